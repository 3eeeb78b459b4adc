// The textual pass tests: each file under tests/passes/textual/ is a small
// graph in the printer's notation (ir/printer.h), the pipeline to run on it
// and what the printed graph must show afterwards, in the manner of MLIR's
// cse.mlir and XLA's FileCheck tests:
//
//   // RUN: fuse-group-ops                  the passes (--passes syntax)
//   // OPTIONS: no-group-gemm, rules-hfuse  pass options (optional)
//   ... the graph ...
//   // CHECK: (y0, y1) = group_gemm_rcr_bias(x, w0, b0, x, w1, b1)
//   // CHECK-NEXT: ...                      on the line after the last match
//   // CHECK-NOT: = gemm_rcr_bias(          not between the matches around it
//
// CHECK lines match in order, each a substring of one printed line. The
// passes run with --verify-each on. One runner for all files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hfuse/io/graph_text.h"
#include "hfuse/ir/printer.h"
#include "hfuse/passes/pass_manager.h"

namespace hfuse {
namespace {

struct Directive {
  std::string kind;  // CHECK, CHECK-NEXT, CHECK-NOT
  std::string pattern;
  int line;
};

std::string Trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\r") + 1);
  return s;
}

// FileCheck's core: "" if `output` satisfies the directives, else why not.
std::string Check(const std::vector<std::string>& out, const std::vector<Directive>& ds) {
  size_t pos = 0;  // the first line not yet matched past
  std::vector<const Directive*> nots;
  auto check_nots = [&](size_t end) -> std::string {
    for (const Directive* d : nots) {
      for (size_t i = pos; i < end; ++i) {
        if (out[i].find(d->pattern) != std::string::npos) {
          return "line " + std::to_string(d->line) + ": CHECK-NOT '" + d->pattern +
                 "' found in: " + out[i];
        }
      }
    }
    nots.clear();
    return "";
  };
  for (const Directive& d : ds) {
    if (d.kind == "CHECK-NOT") {
      nots.push_back(&d);
      continue;
    }
    size_t at = pos;
    if (d.kind == "CHECK-NEXT") {
      if (pos == 0 || pos >= out.size() || out[pos].find(d.pattern) == std::string::npos) {
        return "line " + std::to_string(d.line) + ": CHECK-NEXT '" + d.pattern +
               "' is not on the next line";
      }
    } else {
      while (at < out.size() && out[at].find(d.pattern) == std::string::npos) ++at;
      if (at == out.size()) {
        return "line " + std::to_string(d.line) + ": CHECK '" + d.pattern + "' not found";
      }
    }
    if (std::string why = check_nots(at); !why.empty()) return why;
    pos = at + 1;
  }
  return check_nots(out.size());
}

class TextualPassTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TextualPassTest, Passes) {
  const std::string path = GetParam();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string pipeline;
  PassOptions options;
  std::vector<Directive> directives;
  std::istringstream lines(text.str());
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    const std::string t = Trim(line);
    if (t.rfind("//", 0) != 0) continue;
    const std::string body = Trim(t.substr(2));
    const size_t colon = body.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = body.substr(0, colon);
    const std::string value = Trim(body.substr(colon + 1));
    if (key == "RUN") {
      pipeline = value;
    } else if (key == "OPTIONS") {
      std::istringstream words(value);
      for (std::string w; std::getline(words, w, ',');) {
        w = Trim(w);
        if (w == "no-group-gemm") {
          options.fuse_group_ops.group_gemm = false;
        } else {
          ASSERT_EQ(w, "rules-hfuse") << path << ":" << n << ": unknown option";
          options.fuse_group_ops.rules = RuleSet::kHfuse;
        }
      }
    } else if (key == "CHECK" || key == "CHECK-NEXT" || key == "CHECK-NOT") {
      directives.push_back({key, value, n});
    }
  }
  ASSERT_FALSE(pipeline.empty()) << path << ": no RUN line";
  ASSERT_FALSE(directives.empty()) << path << ": no CHECK lines";
  Graph graph = ParseGraphText(text.str(), path);
  PassState state(graph);
  PassManager(ParsePassList(pipeline), PassManagerOptions::VerifyingEach()).Run(state, options);
  const std::string printed = PrintGraph(graph, state.op_order);
  std::vector<std::string> out;
  std::istringstream printed_lines(printed);
  while (std::getline(printed_lines, line)) out.push_back(line);
  const std::string why = Check(out, directives);
  EXPECT_TRUE(why.empty()) << path << ":" << why << "\nprinted graph:\n" << printed;
}

std::vector<std::string> TestFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(HFUSE_TEXTUAL_TEST_DIR)) {
    if (e.path().extension() == ".hfuse") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

INSTANTIATE_TEST_SUITE_P(Files, TextualPassTest, ::testing::ValuesIn(TestFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = std::filesystem::path(info.param).stem().string();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The checker itself: a test that cannot fail asserts nothing.
TEST(TextualCheckTest, FindsInOrderAndRejectsWhatItShould) {
  const std::vector<std::string> out = {"a = x(b)", "c = y(a)", "d = z(c)"};
  EXPECT_EQ(Check(out, {{"CHECK", "x(b)", 1}, {"CHECK-NEXT", "y(a)", 2}}), "");
  EXPECT_NE(Check(out, {{"CHECK", "y(a)", 1}, {"CHECK", "x(b)", 2}}), "");     // order
  EXPECT_NE(Check(out, {{"CHECK", "x(b)", 1}, {"CHECK-NEXT", "z(c)", 2}}), "");  // next
  EXPECT_NE(Check(out, {{"CHECK", "x(b)", 1}, {"CHECK-NOT", "y(", 2}, {"CHECK", "z(c)", 3}}), "");
  EXPECT_EQ(Check(out, {{"CHECK-NOT", "w(", 1}}), "");
  EXPECT_NE(Check(out, {{"CHECK", "x(b)", 1}, {"CHECK-NOT", "z(", 2}}), "");
}

}  // namespace
}  // namespace hfuse
