// File helpers.
#include "hfuse/support/file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hfuse/support/error.h"

namespace hfuse {

std::string ReadFile(const std::string& path) {
  // The error_code form: the throwing one aborts the tool on a name too long.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) ThrowInputError("{}: is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowInputError("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) ThrowInputError("{}: read failed", path);
  return std::move(buffer).str();
}

void WriteFileAtomic(const std::string& path, std::string_view content) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) ThrowInputError("{}: cannot write: {}", path, std::strerror(errno));
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    ThrowInputError("{}: cannot write: {}", path, why);
  }
}

}  // namespace hfuse
