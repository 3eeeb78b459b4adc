// Running the hfuse binary from tests: temporary directories, whole-file
// reads and writes, shell quoting, a run (of the tool or of any shell command)
// that captures the exit status, stdout and stderr, the expectation every
// bad-input test makes of a run (and of a call, ErrorOf), and the paths of
// the bundled examples.
#pragma once

#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "hfuse/support/error.h"

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

// Runs a shell command line (ulimit, environment, timeout, pipes: the tool
// is Tool()); stdout and stderr are captured in a directory of their own, so
// directories under test stay clean.
ToolRun RunShell(const std::string& command);
// Runs the tool (HFUSE_TOOL) with `args`, already quoted.
ToolRun RunTool(const std::string& args);
std::string Tool();  // HFUSE_TOOL, quoted

// "exit 2; stderr: [...]" (or "signal 11; ..."), for failure messages.
std::string Describe(const ToolRun& run);

// What bad input must give: a normal exit with status 2 and exactly one
// line on stderr, "hfuse: error: ...\n", containing each of `needles`, and
// nothing on stdout.
void ExpectInputError(const ToolRun& run, const std::vector<std::string>& needles = {});

// The message of the InputError that `f` throws, or "" if it throws none:
// the in-process form of the bad-input expectation.
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// examples/NAME in the source tree.
std::string ExamplePath(const std::string& name);

}  // namespace hfuse::test
