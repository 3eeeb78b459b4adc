// Running the hfuse binary from tests: temporary directories, whole-file
// reads and writes, shell quoting, and a run that captures the exit status,
// stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hfuse::test {

std::string Slurp(const std::filesystem::path& path);
void Spit(const std::filesystem::path& path, std::string_view text);
std::string Quote(const std::string& s);  // for a POSIX shell

// A fresh empty directory under gtest's temp dir, removed when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  std::string Str(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> Listing(const std::string& sub = "") const;  // sorted names

 private:
  std::filesystem::path path_;
};

struct ToolRun {
  int status = -1;  // as std::system returns it
  std::string out, err;
  bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// Runs the tool (HFUSE_TOOL) with `args`, already quoted; stdout and stderr
// are captured in a directory of their own, so directories under test stay clean.
ToolRun RunTool(const std::string& args);

}  // namespace hfuse::test
