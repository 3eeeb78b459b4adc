// Helpers for tests that run the hfuse binary. See tool_runner.h.
#include "testing/tool_runner.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace hfuse::test {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spit(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TempDir::TempDir() {
  static int counter = 0;
  path_ = fs::path(::testing::TempDir()) / fmt::format("hfuse_test_{}_{}", ::getpid(), counter++);
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<std::string> TempDir::Listing(const std::string& sub) const {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path_ / sub)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

ToolRun RunShell(const std::string& command) {
  TempDir capture;
  // A group, so that redirections apply to the whole command line.
  const std::string line = fmt::format("{{ {}\n}} >{} 2>{}", command, Quote(capture.Str("out")),
                                       Quote(capture.Str("err")));
  ToolRun run;
  run.status = std::system(line.c_str());
  run.out = Slurp(capture / "out");
  run.err = Slurp(capture / "err");
  return run;
}

ToolRun RunTool(const std::string& args) { return RunShell(Tool() + " " + args); }

std::string Tool() { return Quote(HFUSE_TOOL); }

std::string Describe(const ToolRun& run) {
  const std::string how = WIFEXITED(run.status) ? fmt::format("exit {}", WEXITSTATUS(run.status))
                          : WIFSIGNALED(run.status)
                              ? fmt::format("signal {}", WTERMSIG(run.status))
                              : fmt::format("status {}", run.status);
  return fmt::format("{}; stderr: [{}]", how, run.err);
}

void ExpectInputError(const ToolRun& run, const std::vector<std::string>& needles) {
  ASSERT_TRUE(WIFEXITED(run.status)) << Describe(run);
  EXPECT_EQ(WEXITSTATUS(run.status), 2) << Describe(run);
  EXPECT_THAT(run.err, ::testing::StartsWith("hfuse: error: "));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_TRUE(run.err.ends_with("\n")) << run.err;
  for (const std::string& n : needles) EXPECT_THAT(run.err, ::testing::HasSubstr(n));
  EXPECT_EQ(run.out, "") << "nothing on stdout on failure";
}

std::string ExamplePath(const std::string& name) {
  return std::string(HFUSE_SOURCE_DIR) + "/examples/" + name;
}

}  // namespace hfuse::test
