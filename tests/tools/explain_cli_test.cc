// The tool's explanations, end to end: hfuse explain, the reasons in the
// fuse report and summary line, the --dump-dir files, hfuse dot (Graphviz
// accepts its output for every conformance graph) and hfuse report (the page
// opens in headless Chromium and holds one cluster per group in each
// picture). Graphviz and Chromium come from scripts/setup.sh; a missing one
// fails these tests rather than skipping them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "testing/conformance.h"
#include "testing/graph_builder.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;
using test::Quote;
using test::RunShell;
using test::RunTool;
using test::Slurp;
using test::Spit;
using test::TempDir;

const std::string kTowers = test::ExamplePath("towers_small.json");

// Two GEMMs and two LayerNorms on a dynamic batch, as a model exported with
// a dynamic batch arrives.
std::string DynamicBatchGraph() {
  test::GraphBuilder b;
  b.Dim("batch", 1, 1024);
  const std::string x = b.Input("x", {"batch", 64});
  b.Outputs({b.LayerNorm("ln0", b.Fc("fc0", x, 32)), b.LayerNorm("ln1", b.Fc("fc1", x, 32))});
  return b.Json();
}

TEST(ExplainCliTest, ExplainGroupsReasonsByCodeWithCounts) {
  const test::ToolRun run = RunTool("explain " + Quote(kTowers));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("20 ops -> 7 ops, 4 groups; 1 GEMM/LayerNorm op ungrouped "
                                 "(no-compatible-peer 1)"));
  EXPECT_THAT(run.out, HasSubstr("\nno-compatible-peer (1): "));
  EXPECT_THAT(run.out, HasSubstr("\n  t4.ln (layernorm) [size-bucket]: nearest peer t3.ln"));
}

TEST(ExplainCliTest, ExplainOneOp) {
  test::ToolRun run = RunTool("explain " + Quote(kTowers) + " --op t4.ln");
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("t4.ln (layernorm): no-compatible-peer [size-bucket]: "));
  run = RunTool("explain " + Quote(kTowers) + " --op t0.ln");
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("t0.ln (layernorm): grouped in group_layernorm_2 "
                                 "(group_layernorm, 3 members: t0.ln, t1.ln, t2.ln)"));
  run = RunTool("explain " + Quote(kTowers) + " --op split");
  EXPECT_THAT(run.out, HasSubstr("not a GEMM or LayerNorm"));
}

TEST(ExplainCliTest, ExplainUnknownOpIsAnInputError) {
  const test::ToolRun run = RunTool("explain " + Quote(kTowers) + " --op nope");
  EXPECT_EQ(run.code(), 2);
  EXPECT_THAT(run.err, HasSubstr("hfuse: error: "));
  EXPECT_THAT(run.err, HasSubstr("--op nope: no op of that name"));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
}

TEST(ExplainCliTest, FuseSummaryNamesTopReasonsOnADynamicBatch) {
  TempDir dir;
  Spit(dir / "g.json", DynamicBatchGraph());
  const test::ToolRun run = RunTool("fuse " + Quote(dir.Str("g.json")) + " --report " +
                                    Quote(dir.Str("r.json")));
  ASSERT_TRUE(run.ok()) << run.err;
  // LayerNorms group on a dynamic batch; GEMMs do not.
  EXPECT_THAT(run.out, HasSubstr("4 ops -> 3 ops, 1 group; 2 GEMM/LayerNorm ops ungrouped "
                                 "(not-a-candidate 2): see hfuse explain"));
  const Json report = Json::parse(Slurp(dir / "r.json"));
  ASSERT_EQ(report["ungrouped"].size(), 2u);
  const Json& u = report["ungrouped"][0];
  EXPECT_EQ(u["type"], "gemm_rcr_bias");
  EXPECT_EQ(u["reason"], "not-a-candidate");
  EXPECT_EQ(u["rule"], "a-dynamic");
  EXPECT_THAT(u["details"].get<std::string>(), HasSubstr("dynamic dim 'batch' in A (x)"));
}

TEST(ExplainCliTest, FuseSummaryIsUnchangedWhenEverythingGroups) {
  test::GraphBuilder b;
  const std::string x = b.Input("x", {256, 64});
  b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
  TempDir dir;
  Spit(dir / "g.json", b.Json());
  const test::ToolRun run = RunTool("fuse " + Quote(dir.Str("g.json")));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr(": 2 ops -> 1 ops, 1 group\n"));
}

TEST(ExplainCliTest, ReportListsEachCycleReasonWithItsPath) {
  TempDir dir;
  const std::string graph = testing::ConformancePath("edge/cycle_pattern") + ".json";
  ASSERT_TRUE(RunTool("fuse " + Quote(graph) + " --report " + Quote(dir.Str("r.json"))).ok());
  const Json report = Json::parse(Slurp(dir / "r.json"));
  std::map<std::string, Json> by_op;
  for (const Json& u : report["ungrouped"]) by_op[u["op"]] = u;
  ASSERT_EQ(by_op.size(), 2u);
  EXPECT_EQ(by_op["Q"]["reason"], "dropped-by-cycle-check");
  EXPECT_EQ(by_op["Q"]["path"], Json::parse(R"(["P", "group_gemm_rcr_bias_0", "Q"])"));
  EXPECT_EQ(by_op["P"]["reason"], "cycle-risk");
}

// --dump-dir: every GEMM and LayerNorm type gets the seed's two dumps, saying
// so when it has no ops or no candidates, and a reasons file.
TEST(ExplainCliTest, DumpDirWritesEveryTypeAndItsReasons) {
  TempDir dir;
  Spit(dir / "g.json", DynamicBatchGraph());
  ASSERT_TRUE(RunTool("fuse " + Quote(dir.Str("g.json")) + " --dump-dir " + Quote(dir.Str("d"))).ok());
  const std::vector<std::string> files = dir.Listing("d");
  for (const char* type : {"gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_relu",
                           "gemm_rcr_bias_sigmoid", "layernorm", "layernorm_sigmoid_mul"}) {
    for (const char* kind : {"dependency_graph_filtered", "groups", "reasons"}) {
      const std::string name = std::string("fuse_group_") + type + "_" + kind + ".txt";
      EXPECT_THAT(files, ::testing::Contains(name));
    }
  }
  EXPECT_EQ(Slurp(dir / "d" / "fuse_group_gemm_rcr_dependency_graph_filtered.txt"),
            "# no gemm_rcr ops in the graph: nothing to group\n");
  EXPECT_EQ(Slurp(dir / "d" / "fuse_group_gemm_rcr_bias_dependency_graph_filtered.txt"),
            "# 2 gemm_rcr_bias op(s), none a candidate: see fuse_group_gemm_rcr_bias_reasons.txt\n");
  EXPECT_THAT(Slurp(dir / "d" / "fuse_group_gemm_rcr_bias_reasons.txt"),
              HasSubstr("fc0: not-a-candidate [a-dynamic]: dynamic dim 'batch' in A (x)"));
  EXPECT_THAT(Slurp(dir / "d" / "fuse_group_layernorm_groups.txt"), HasSubstr("[ln"));
  EXPECT_EQ(Slurp(dir / "d" / "fuse_group_layernorm_reasons.txt"),
            "# 0 layernorm op(s) outside every group\n");
}

TEST(ExplainCliTest, DumpDirSaysWhenGemmGroupingIsOff) {
  TempDir dir;
  ASSERT_TRUE(RunTool("fuse " + Quote(kTowers) + " --no-group-gemm --dump-dir " +
                      Quote(dir.Str("d")))
                  .ok());
  EXPECT_EQ(Slurp(dir / "d" / "fuse_group_gemm_rcr_bias_relu_groups.txt"),
            "# gemm_rcr_bias_relu not grouped: GEMM grouping is off (--no-group-gemm)\n");
  EXPECT_THAT(Slurp(dir / "d" / "fuse_group_gemm_rcr_bias_relu_reasons.txt"),
              HasSubstr("t0.fc1: not-a-candidate [group-gemm-off]"));
}

// ---------------------------------------------------------------------------
// hfuse dot.

TEST(ExplainCliTest, DotMarksGroupsAndReasonsAndIsDeterministic) {
  TempDir dir;
  const test::ToolRun a = RunTool("dot " + Quote(kTowers));
  const test::ToolRun b = RunTool("dot " + Quote(kTowers));
  ASSERT_TRUE(a.ok()) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(std::count(a.out.begin(), a.out.end(), '\n') > 20, true);
  EXPECT_THAT(a.out, HasSubstr("subgraph cluster_0 {"));
  EXPECT_THAT(a.out, HasSubstr("subgraph cluster_3 {"));
  EXPECT_THAT(a.out, Not(HasSubstr("subgraph cluster_4 {")));
  EXPECT_THAT(a.out, HasSubstr("t4.ln\\nlayernorm\\n[no-compatible-peer]"));
  const test::ToolRun fused = RunTool("dot " + Quote(kTowers) + " --fused -o " + Quote(dir.Str("f.dot")));
  ASSERT_TRUE(fused.ok()) << fused.err;
  EXPECT_THAT(Slurp(dir / "f.dot"), HasSubstr("group_gemm_rcr_bias_relu_0 (6 members)"));
  const test::ToolRun collapsed = RunTool("dot " + Quote(kTowers) + " --collapse");
  ASSERT_TRUE(collapsed.ok());
  EXPECT_THAT(collapsed.out, Not(HasSubstr("concatenate")));
  EXPECT_THAT(collapsed.out, HasSubstr("->"));
}

// Graphviz accepts hfuse dot's output, before and after, for every
// conformance graph, and collapsed for the edge and scale cases. One dot
// process renders them all (-O: F.dot.svg next to each F.dot); a failure is
// then rendered alone, to name the case.
TEST(ExplainCliTest, GraphvizAcceptsDotOfEveryConformanceGraph) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> files;  // (case and flags, .dot)
  for (const std::string& id : testing::ConformanceCases()) {
    const std::string graph = Quote(testing::ConformancePath(id) + ".json");
    std::vector<std::string> variants = {"", " --fused"};
    if (id.rfind("edge/", 0) == 0 || id.rfind("scale/", 0) == 0) {
      variants.push_back(" --collapse");
      variants.push_back(" --fused --collapse");
    }
    for (const std::string& flags : variants) {
      const std::string dot = dir.Str(std::to_string(files.size()) + ".dot");
      const test::ToolRun run = RunTool("dot " + graph + flags + " -o " + Quote(dot));
      ASSERT_TRUE(run.ok()) << id << flags << ": " << run.err;
      files.emplace_back(id + flags, dot);
    }
  }
  std::string all;
  for (const auto& [what, dot] : files) all += " " + Quote(dot);
  const test::ToolRun svg = RunShell("dot -Tsvg -O" + all);
  for (const auto& [what, dot] : files) {
    const std::string out = Slurp(dot + ".svg");
    if (out.find("</svg>") != std::string::npos) continue;
    const test::ToolRun alone = RunShell("dot -Tsvg " + Quote(dot));
    ADD_FAILURE() << what << ": dot -Tsvg: " << alone.err;
  }
  EXPECT_TRUE(svg.ok()) << svg.err;
  EXPECT_GT(files.size(), 600u);
}

// ---------------------------------------------------------------------------
// hfuse report.

// How many Graphviz clusters the element with id `id` holds in `dom`.
size_t ClustersIn(const std::string& dom, const std::string& id) {
  const size_t start = dom.find("id=\"" + id + "\"");
  if (start == std::string::npos) return 0;
  const size_t end = dom.find("</svg>", start);
  const std::string part = dom.substr(start, end - start);
  size_t n = 0;
  for (size_t at = part.find("class=\"cluster\""); at != std::string::npos;
       at = part.find("class=\"cluster\"", at + 1)) {
    ++n;
  }
  return n;
}

TEST(ExplainCliTest, ReportOpensInHeadlessChromiumWithOneClusterPerGroup) {
  TempDir dir;
  const test::ToolRun run = RunTool("report " + Quote(kTowers) + " -o " + Quote(dir.Str("r.html")));
  ASSERT_TRUE(run.ok()) << run.err;
  const std::string html = Slurp(dir / "r.html");
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http://www.w3.org/Graphics")));  // no external DTD
  const test::ToolRun dom = RunShell("chromium --headless --no-sandbox --disable-gpu --dump-dom " +
                                  Quote("file://" + dir.Str("r.html")));
  ASSERT_TRUE(dom.ok()) << dom.err;
  EXPECT_THAT(dom.out, HasSubstr("<table id=\"groups\">"));
  EXPECT_EQ(ClustersIn(dom.out, "before"), 4u);
  EXPECT_EQ(ClustersIn(dom.out, "after"), 4u);
  EXPECT_THAT(dom.out, HasSubstr("<td>t4.ln</td><td>layernorm</td><td><code>no-compatible-peer"));
}

TEST(ExplainCliTest, ReportShowsTheTimingsOfABenchJson) {
  TempDir dir;
  Spit(dir / "b.json", R"({"graph": "t.json", "groups": {"seed": 4},
    "variants": [{"name": "unfused", "plain_us": 120.5, "cudagraph_us": 80.25, "floor_us": 10,
                  "launches": 20},
                 {"name": "fused, seed rules", "plain_us": 40, "cudagraph_us": 30, "floor_us": 10,
                  "launches": 7}],
    "profile": {"fused, seed rules": [{"launch": "group_gemm_rcr_bias_relu_0", "us": 12.5}]}})");
  const test::ToolRun run = RunTool("report " + Quote(kTowers) + " -o " + Quote(dir.Str("r.html")) +
                                    " --bench " + Quote(dir.Str("b.json")));
  ASSERT_TRUE(run.ok()) << run.err;
  const std::string html = Slurp(dir / "r.html");
  EXPECT_THAT(html, HasSubstr("<td>unfused</td><td>120.5</td><td>80.2</td>"));
  EXPECT_THAT(html, HasSubstr("Per launch: fused, seed rules"));
  EXPECT_THAT(html, HasSubstr("<td>group_gemm_rcr_bias_relu_0</td><td>12.5</td>"));
}

TEST(ExplainCliTest, ReportRejectsABadBenchJsonAndWritesNothing) {
  TempDir dir;
  Spit(dir / "b.json", R"({"variants": [{"name": "x"}]})");
  const test::ToolRun run = RunTool("report " + Quote(kTowers) + " -o " + Quote(dir.Str("r.html")) +
                                    " --bench " + Quote(dir.Str("b.json")));
  EXPECT_EQ(run.code(), 2);
  EXPECT_THAT(run.err, HasSubstr("b.json: a variant without a number \""));
  EXPECT_THAT(dir.Listing(), ::testing::ElementsAre("b.json"));
}

}  // namespace
}  // namespace hfuse
