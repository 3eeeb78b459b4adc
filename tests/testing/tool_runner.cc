// Helpers for tests that run the hfuse binary. See tool_runner.h.
#include "testing/tool_runner.h"

#include <fmt/format.h>
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

ToolRun RunTool(const std::string& args) {
  TempDir capture;
  const std::string command = fmt::format("{} {} >{} 2>{}", Quote(HFUSE_TOOL), args,
                                          Quote(capture.Str("out")), Quote(capture.Str("err")));
  ToolRun run;
  run.status = std::system(command.c_str());
  run.out = Slurp(capture / "out");
  run.err = Slurp(capture / "err");
  return run;
}

}  // namespace hfuse::test
