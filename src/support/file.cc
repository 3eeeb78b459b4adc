// File helpers.
#include "hfuse/support/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
  // A file of known size is read straight into its string: a stream buffer
  // and its copy would hold a graph of hundreds of MB three times over.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > 0) {
    in.seekg(0, std::ios::beg);
    std::string text(static_cast<size_t>(size), '\0');
    in.read(text.data(), size);
    if (in.gcount() == size && in.peek() == std::ifstream::traits_type::eof()) return text;
  }
  // Not seekable, or it changed while being read: as a stream.
  in.clear();
  in.seekg(0, std::ios::beg);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) ThrowInputError("{}: read failed", path);
  return std::move(buffer).str();
}

FileText::FileText(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                     MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      map_ = static_cast<const char*>(p);
      size_ = static_cast<size_t>(st.st_size);
    }
  }
  if (fd >= 0) ::close(fd);
  if (map_ == nullptr) copy_ = ReadFile(path);  // and its messages
}

FileText::~FileText() {
  if (map_ != nullptr) ::munmap(const_cast<char*>(map_), size_);
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

void WriteFileAtomic(
    const std::string& path,
    const std::function<void(const std::function<void(std::string_view)>& put)>& produce) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) ThrowInputError("{}: cannot write: {}", path, std::strerror(errno));
  bool ok = true;
  try {
    produce([&](std::string_view piece) {
      ok = ok && std::fwrite(piece.data(), 1, piece.size(), f) == piece.size();
    });
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    ThrowInputError("{}: cannot write: {}", path, why);
  }
}

}  // namespace hfuse
