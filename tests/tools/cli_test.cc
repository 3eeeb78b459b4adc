// Tests of the hfuse command-line tool, run as a subprocess (HFUSE_TOOL):
// help and version, the one-line summary of `check`, and what `fuse` writes:
// a valid fused graph, a report whose groups are the ones printed in the
// stdout table (and the conformance expectations), the pass's debug dumps,
// the --no-group-gemm switch; that runs are reproducible byte for byte; that
// fusing a fused graph again forms no new group; and that outputs are written
// atomically, leaving no temporary file behind whether the run succeeds or
// fails. Bad input is covered in tests/io/bad_input_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hfuse/io/graph_json.h"
#include "hfuse/support/error.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using Json = nlohmann::json;

using test::Quote;
using test::RunTool;
using test::Slurp;
using test::Spit;
using test::TempDir;
using test::ToolRun;

fs::path Conformance(const std::string& relative) {
  return fs::path(HFUSE_SHARED_DIR) / "conformance" / relative;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What the expected file of a conformance case says the tool must be run with.
std::string OptionsOf(const fs::path& graph) {
  fs::path expected = graph;
  expected.replace_extension(".expected.json");
  if (!fs::exists(expected)) return "";
  const Json e = Json::parse(Slurp(expected));
  std::string options;
  for (const auto& o : e.value("options", Json::array())) options += " " + o.get<std::string>();
  return options;
}

// Groups as (op, members) pairs, sorted: the conformance comparison ignores
// the order of the list.
std::vector<std::pair<std::string, std::vector<std::string>>> GroupSet(const Json& report) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const Json& g : report.at("groups")) {
    groups.emplace_back(g.at("op").get<std::string>(),
                        g.at("members").get<std::vector<std::string>>());
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

TEST(CliTest, HelpListsTheSubcommands) {
  const ToolRun run = RunTool("--help");
  EXPECT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("fuse"));
  EXPECT_THAT(run.out, HasSubstr("check"));
  EXPECT_EQ(run.err, "");
  const ToolRun fuse = RunTool("fuse --help");
  EXPECT_TRUE(fuse.ok()) << fuse.err;
  for (const char* option : {"--output", "--report", "--no-group-gemm", "--dump-dir", "--rules"}) {
    EXPECT_THAT(fuse.out, HasSubstr(option));
  }
}

// --rules: the report names the rule set; the hfuse rules put the towers'
// LayerNorms into one group where the seed's make several (39-member cap and
// size buckets).
TEST(CliTest, FuseReportSaysWhichRulesRan) {
  TempDir dir;
  const fs::path in = fs::path(HFUSE_SHARED_DIR) / "bench" / "towers_mixed_T64_M2048.json";
  auto ln_groups = [](const Json& report) {
    int n = 0;
    for (const Json& g : report["groups"]) n += g["op"].get<std::string>() == "group_layernorm";
    return n;
  };
  const ToolRun seed = RunTool(fmt::format("fuse {} --report {} -o {}", Quote(in.string()),
                                           Quote(dir.Str("seed.json")), Quote(dir.Str("a.json"))));
  const ToolRun seed2 =
      RunTool(fmt::format("fuse {} --rules seed -o {}", Quote(in.string()), Quote(dir.Str("b.json"))));
  const ToolRun hfuse = RunTool(fmt::format("fuse {} --rules hfuse --report {}", Quote(in.string()),
                                            Quote(dir.Str("hfuse.json"))));
  ASSERT_TRUE(seed.ok() && seed2.ok() && hfuse.ok()) << seed.err << seed2.err << hfuse.err;
  EXPECT_EQ(Slurp(dir / "a.json"), Slurp(dir / "b.json"));  // seed is the default
  const Json r_seed = Json::parse(Slurp(dir / "seed.json"));
  const Json r_hfuse = Json::parse(Slurp(dir / "hfuse.json"));
  EXPECT_EQ(r_seed["rules"], "seed");
  EXPECT_EQ(r_hfuse["rules"], "hfuse");
  EXPECT_GT(ln_groups(r_seed), 1);
  EXPECT_EQ(ln_groups(r_hfuse), 1);
}

TEST(CliTest, Version) {
  const ToolRun run = RunTool("--version");
  EXPECT_TRUE(run.ok()) << run.err;
  EXPECT_TRUE(std::regex_match(run.out, std::regex(R"(\d+\.\d+\.\d+\n)"))) << run.out;
}

TEST(CliTest, UsageErrorsExitTwo) {
  for (const char* args : {"", "frobnicate", "fuse", "fuse a.json --no-such-option", "check",
                           "fuse a.json --rules aitemplate", "verify a.json --rules both"}) {
    const ToolRun run = RunTool(args);
    EXPECT_TRUE(WIFEXITED(run.status)) << args;
    EXPECT_EQ(run.code(), 2) << args << ": " << run.err;
    EXPECT_NE(run.err, "") << args;
  }
}

TEST(CliTest, CheckPrintsAOneLineSummary) {
  const std::string in = Conformance("ait_tests/group_fusions__gemm_0_float16.json").string();
  const ToolRun run = RunTool("check " + Quote(in));
  EXPECT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(run.out, in + ": ok: 2 ops, 8 tensors, 2 outputs, 0 dynamic dims\n");
  EXPECT_EQ(run.err, "");
  // A graph with dynamic dims and group ops.
  for (const auto& entry : fs::directory_iterator(Conformance("ait_tests"))) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".expected.json")) continue;
    const ToolRun each = RunTool("check " + Quote(entry.path().string()));
    ASSERT_TRUE(each.ok()) << name << ": " << each.err;
    ASSERT_EQ(Lines(each.out).size(), 1u) << each.out;
    EXPECT_TRUE(std::regex_match(
        each.out, std::regex(R"(.*: ok: \d+ ops, \d+ tensors, \d+ outputs, \d+ dynamic dims\n)")))
        << each.out;
  }
}

// The stdout table must show the report's groups: one row per group, in
// order, with the op type, the member count and the members (the first four
// and a count when there are more than five).
void ExpectTableMatchesReport(const std::string& in, const std::string& stdout_text,
                              const Json& report) {
  const std::vector<std::string> lines = Lines(stdout_text);
  ASSERT_FALSE(lines.empty());
  const size_t n = report["groups"].size();
  const std::string summary =
      fmt::format("{}: {} ops -> {} ops, {} group{}", in, report["ops_before"].get<int64_t>(),
                  report["ops_after"].get<int64_t>(), n, n == 1 ? "" : "s");
  const size_t left_out = report["ungrouped"].size();
  if (left_out == 0) {
    EXPECT_EQ(lines[0], summary);
  } else {  // the summary names the top reasons
    const std::string tail = fmt::format("; {} GEMM/LayerNorm op{} ungrouped (", left_out,
                                         left_out == 1 ? "" : "s");
    EXPECT_EQ(lines[0].substr(0, summary.size() + tail.size()), summary + tail);
    EXPECT_THAT(lines[0], ::testing::EndsWith("): see hfuse explain"));
  }
  if (n == 0) {
    EXPECT_EQ(lines.size(), 1u);
    return;
  }
  ASSERT_EQ(lines.size(), n + 2) << stdout_text;
  EXPECT_THAT(lines[1], HasSubstr("group op"));
  const std::regex row(R"(  (\S+) +(\d+)  (.*))");
  for (size_t i = 0; i < n; ++i) {
    const Json& g = report["groups"][i];
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i + 2], m, row)) << lines[i + 2];
    EXPECT_EQ(m[1].str(), g["op"].get<std::string>());
    const auto members = g["members"].get<std::vector<std::string>>();
    EXPECT_EQ(m[2].str(), std::to_string(members.size()));
    std::string names;
    for (size_t k = 0; k < members.size(); ++k) {
      if (k == 4 && members.size() > 5) {
        names += fmt::format(", ... ({} more)", members.size() - 4);
        break;
      }
      names += (k ? ", " : "") + members[k];
    }
    EXPECT_EQ(m[3].str(), names);
  }
}

TEST(CliTest, FuseWritesAValidGraphAndAReportMatchingTheTable) {
  for (const char* name :
       {"random/case_3.json", "random/case_0.json", "edge/cycle_pattern.json",
        "ait_tests/group_fusions__gemm_0_float16.json", "scale/towers_1001.json"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    const fs::path in = Conformance(name);
    const ToolRun run = RunTool(fmt::format("fuse {} -o {} --report {}{}", Quote(in.string()),
                                            Quote(dir.Str("out.json")),
                                            Quote(dir.Str("report.json")), OptionsOf(in)));
    ASSERT_TRUE(run.ok()) << run.err;
    EXPECT_EQ(run.err, "");
    EXPECT_THAT(dir.Listing(), ElementsAre("out.json", "report.json"));

    const Json report = Json::parse(Slurp(dir / "report.json"));
    ExpectTableMatchesReport(in.string(), run.out, report);

    // The fused graph reads back, has ops_after ops, and one group op per group.
    Graph fused;
    ASSERT_NO_THROW(fused = ReadGraphJsonFile(dir.Str("out.json")));
    EXPECT_EQ(fused.NumLiveOps(), report["ops_after"].get<int64_t>());
    std::vector<std::pair<std::string, size_t>> group_ops, reported;
    for (OpId id : fused.LiveOps()) {
      const Op& op = fused.op(id);
      if (IsGroupGemm(op.type) || IsGroupLayerNorm(op.type)) {
        group_ops.emplace_back(std::string(OpTypeName(op.type)), op.outputs.size());
      }
    }
    for (const Json& g : report["groups"]) {
      reported.emplace_back(g["op"].get<std::string>(), g["members"].size());
    }
    const Graph original = ReadGraphJsonFile(in.string());
    for (OpId id : original.LiveOps()) {
      const Op& op = original.op(id);
      if (IsGroupGemm(op.type) || IsGroupLayerNorm(op.type)) {
        reported.emplace_back(std::string(OpTypeName(op.type)), op.outputs.size());
      }
    }
    std::sort(group_ops.begin(), group_ops.end());
    std::sort(reported.begin(), reported.end());
    EXPECT_EQ(group_ops, reported);

    // And the groups are the conformance case's.
    fs::path expected_path = in;
    expected_path.replace_extension(".expected.json");
    const Json expected = Json::parse(Slurp(expected_path));
    EXPECT_EQ(GroupSet(report), GroupSet(expected));
    EXPECT_EQ(report["ops_after"].get<int64_t>(), expected["ops_after"].get<int64_t>());
    EXPECT_EQ(report["ops_before"].get<int64_t>(), expected["ops_before"].get<int64_t>());
  }
}

TEST(CliTest, FuseWithoutOutputsOnlyPrints) {
  TempDir dir;
  const std::string in = dir.Str("in.json");
  fs::copy_file(Conformance("random/case_3.json"), in);
  const ToolRun run = RunTool("fuse " + Quote(in));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("ops ->"));
  EXPECT_THAT(dir.Listing(), ElementsAre("in.json"));
}

TEST(CliTest, FuseCanOverwriteItsInput) {
  TempDir dir;
  const std::string in = dir.Str("g.json");
  fs::copy_file(Conformance("random/case_3.json"), in);
  const ToolRun reference =
      RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote(dir.Str("ref.json"))));
  ASSERT_TRUE(reference.ok()) << reference.err;
  const ToolRun run = RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote(in)));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_EQ(Slurp(in), Slurp(dir / "ref.json"));
  EXPECT_THAT(dir.Listing(), ElementsAre("g.json", "ref.json"));
}

TEST(CliTest, DumpDirHoldsTheDependencyGraphAndGroupsOfEachOpType) {
  TempDir dir;
  const fs::path in = Conformance("random/case_0.json");
  const std::string dumps = dir.Str("nested/dumps");  // created, parents too
  const ToolRun run = RunTool(fmt::format("fuse {} --report {} --dump-dir {}", Quote(in.string()),
                                          Quote(dir.Str("report.json")), Quote(dumps)));
  ASSERT_TRUE(run.ok()) << run.err;
  const Json report = Json::parse(Slurp(dir / "report.json"));
  const std::vector<std::string> files = dir.Listing("nested/dumps");
  ASSERT_FALSE(files.empty());
  const std::regex pattern(
      R"(fuse_group_([a-z_]+?)_(dependency_graph_filtered|groups|reasons)\.txt)");
  for (const std::string& file : files) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(file, m, pattern)) << file;
    const std::optional<OpType> type = ParseOpType(m[1].str());
    ASSERT_TRUE(type.has_value()) << file;
    EXPECT_TRUE(IsGemm(*type) || IsLayerNorm(*type)) << file;
    // Files come in threes.
    for (const char* other : {"dependency_graph_filtered", "groups", "reasons"}) {
      EXPECT_TRUE(
          fs::exists(fs::path(dumps) / fmt::format("fuse_group_{}_{}.txt", m[1].str(), other)))
          << file;
    }
  }
  // Every group of the report is listed in the groups file of its member type.
  for (const Json& g : report["groups"]) {
    const OpType member = MemberOf(*ParseOpType(g["op"].get<std::string>()));
    const fs::path groups_file =
        fs::path(dumps) / fmt::format("fuse_group_{}_groups.txt", OpTypeName(member));
    ASSERT_TRUE(fs::exists(groups_file)) << groups_file;
    const std::string listed =
        fmt::format("[{}]", fmt::join(g["members"].get<std::vector<std::string>>(), ","));
    EXPECT_THAT(Slurp(groups_file), HasSubstr(listed));
    EXPECT_GT(
        fs::file_size(fs::path(dumps) / fmt::format("fuse_group_{}_dependency_graph_filtered.txt",
                                                    OpTypeName(member))),
        0u);
  }
  // The dumps went only where they were asked to.
  EXPECT_THAT(dir.Listing(), ElementsAre("nested", "report.json"));
}

// Under --rules hfuse, GEMMs of different epilogues form a
// group_gemm_rcr_mixed: the table names each member's kind, the report
// lists them in member_ops, and the dumps of the one GEMM round are
// fuse_group_gemm_*.txt; the seed rules form no group.
TEST(CliTest, MixedEpilogueGroupInTheTableReportAndDumps) {
  TempDir dir;
  const std::string graph = R"({"graph_format": 1,
  "tensors": [
    {"name": "x", "shape": [64, 32], "dtype": "float16", "role": "input"},
    {"name": "w0", "shape": [16, 32], "dtype": "float16", "role": "param"},
    {"name": "b0", "shape": [16], "dtype": "float16", "role": "param"},
    {"name": "w1", "shape": [8, 32], "dtype": "float16", "role": "param"},
    {"name": "b1", "shape": [8], "dtype": "float16", "role": "param"},
    {"name": "y0", "shape": [64, 16], "dtype": "float16"},
    {"name": "y1", "shape": [64, 8], "dtype": "float16"}],
  "ops": [
    {"name": "lr", "op": "gemm_rcr_bias", "inputs": ["x", "w0", "b0"], "outputs": ["y0"]},
    {"name": "dnn0", "op": "gemm_rcr_bias_relu", "inputs": ["x", "w1", "b1"], "outputs": ["y1"]}],
  "outputs": ["y0", "y1"]})";
  Spit(dir / "mixed.json", graph);
  const ToolRun run = RunTool(fmt::format("fuse {} --rules hfuse --report {} --dump-dir {} -o {}",
                                          Quote(dir.Str("mixed.json")), Quote(dir.Str("r.json")),
                                          Quote(dir.Str("dumps")), Quote(dir.Str("out.json"))));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("group_gemm_rcr_mixed"));
  EXPECT_THAT(run.out, HasSubstr("lr [gemm_rcr_bias], dnn0 [gemm_rcr_bias_relu]"));
  const Json report = Json::parse(Slurp(dir / "r.json"));
  ASSERT_EQ(report["groups"].size(), 1u);
  EXPECT_EQ(report["groups"][0]["op"], "group_gemm_rcr_mixed");
  EXPECT_EQ(report["groups"][0]["members"], Json::array({"lr", "dnn0"}));
  EXPECT_EQ(report["groups"][0]["member_ops"], Json::array({"gemm_rcr_bias", "gemm_rcr_bias_relu"}));
  EXPECT_THAT(Slurp(dir / "dumps" / "fuse_group_gemm_groups.txt"), HasSubstr("[lr,dnn0]"));
  EXPECT_THAT(Slurp(dir / "out.json"), HasSubstr(R"("member_ops": ["gemm_rcr_bias", "gemm_rcr_bias_relu"])"));
  const ToolRun seed = RunTool(fmt::format("fuse {} --report {}", Quote(dir.Str("mixed.json")),
                                           Quote(dir.Str("seed.json"))));
  ASSERT_TRUE(seed.ok()) << seed.err;
  EXPECT_TRUE(Json::parse(Slurp(dir / "seed.json"))["groups"].empty());
}

TEST(CliTest, NoGroupGemmGroupsOnlyLayerNorms) {
  TempDir dir;
  const fs::path in = Conformance("random/case_0.json");
  const ToolRun with =
      RunTool(fmt::format("fuse {} --report {}", Quote(in.string()), Quote(dir.Str("with.json"))));
  const ToolRun without = RunTool(fmt::format("fuse {} --report {} --no-group-gemm",
                                              Quote(in.string()), Quote(dir.Str("without.json"))));
  ASSERT_TRUE(with.ok() && without.ok()) << with.err << without.err;
  const Json r_with = Json::parse(Slurp(dir / "with.json"));
  const Json r_without = Json::parse(Slurp(dir / "without.json"));
  int gemm_groups = 0, ln_groups = 0;
  for (const Json& g : r_with["groups"])
    gemm_groups += g["op"].get<std::string>().starts_with("group_gemm");
  for (const Json& g : r_without["groups"]) {
    EXPECT_THAT(g["op"].get<std::string>(), ::testing::StartsWith("group_layernorm"));
    ++ln_groups;
  }
  EXPECT_GT(gemm_groups, 0);
  EXPECT_GT(ln_groups, 0);
  EXPECT_GT(r_without["ops_after"].get<int64_t>(), r_with["ops_after"].get<int64_t>());
  ExpectTableMatchesReport(in.string(), without.out, r_without);

  // Conformance cases that AITemplate ran without fuse_group_gemm.
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(Conformance("ait_tests"))) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".expected.json")) continue;
    const Json expected = Json::parse(Slurp(entry.path()));
    if (!expected.contains("options") || cases >= 12) continue;
    ++cases;
    const std::string graph =
        entry.path().string().substr(0, entry.path().string().size() - 14) + ".json";
    const ToolRun run = RunTool(
        fmt::format("fuse {} --report {} --no-group-gemm", Quote(graph), Quote(dir.Str("r.json"))));
    ASSERT_TRUE(run.ok()) << graph << ": " << run.err;
    const Json report = Json::parse(Slurp(dir / "r.json"));
    EXPECT_EQ(GroupSet(report), GroupSet(expected)) << graph;
  }
  EXPECT_EQ(cases, 12);
}

std::vector<std::string> DeterminismCases() {
  return {"scale/towers_1001.json",
          "random/case_0.json",
          "random/case_57.json",
          "random/case_102.json",
          "random/case_149.json",
          "edge/cycle_pattern.json",
          "edge/layernorm_40_singleton_chunk.json"};
}

TEST(CliTest, TwoRunsGiveByteIdenticalOutputs) {
  for (const std::string& name : DeterminismCases()) {
    SCOPED_TRACE(name);
    TempDir dir;
    const std::string in = Conformance(name).string();
    std::string outputs[2], reports[2], stdouts[2];
    for (int i = 0; i < 2; ++i) {
      const ToolRun run = RunTool(fmt::format("fuse {} -o {} --report {}", Quote(in),
                                              Quote(dir.Str(fmt::format("out{}.json", i))),
                                              Quote(dir.Str(fmt::format("report{}.json", i)))));
      ASSERT_TRUE(run.ok()) << run.err;
      outputs[i] = Slurp(dir / fmt::format("out{}.json", i));
      reports[i] = Slurp(dir / fmt::format("report{}.json", i));
      stdouts[i] = run.out;
    }
    EXPECT_FALSE(outputs[0].empty());
    EXPECT_EQ(outputs[0], outputs[1]);
    EXPECT_EQ(reports[0], reports[1]);
    EXPECT_EQ(stdouts[0], stdouts[1]);
  }
}

// Ops and tensors of a graph file as sorted JSON texts: its content,
// whatever order the file lists them in.
std::vector<std::string> Content(const std::string& path) {
  const Json g = Json::parse(Slurp(path));
  std::vector<std::string> items;
  for (const char* key : {"ops", "tensors"}) {
    for (const Json& v : g[key]) items.push_back(std::string(key) + v.dump());
  }
  items.push_back("outputs" + g["outputs"].dump());
  items.push_back("dims" + g["dims"].dump());
  std::sort(items.begin(), items.end());
  return items;
}

// Fusing a fused graph forms no new group and keeps its ops and tensors;
// the op order may change once (the first run's final sort starts from every
// tensor, a fresh run from the outputs), after which it is a fixed point.
TEST(CliTest, FusingAFusedGraphChangesNothing) {
  std::vector<fs::path> graphs;
  for (const char* folder : {"edge", "scale", "ait_tests"}) {
    for (const auto& entry : fs::directory_iterator(Conformance(folder))) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(".expected.json")) graphs.push_back(entry.path());
    }
  }
  std::sort(graphs.begin(), graphs.end());
  ASSERT_GT(graphs.size(), 150u);
  for (const fs::path& in : graphs) {
    SCOPED_TRACE(in.string());
    TempDir dir;
    const std::string options = OptionsOf(in);
    ASSERT_TRUE(RunTool(fmt::format("fuse {} -o {}{}", Quote(in.string()),
                                    Quote(dir.Str("f1.json")), options))
                    .ok());
    const ToolRun second =
        RunTool(fmt::format("fuse {} -o {} --report {}{}", Quote(dir.Str("f1.json")),
                            Quote(dir.Str("f2.json")), Quote(dir.Str("r2.json")), options));
    ASSERT_TRUE(second.ok()) << second.err;
    const Json report = Json::parse(Slurp(dir / "r2.json"));
    EXPECT_TRUE(report["groups"].empty()) << report["groups"].dump();
    EXPECT_EQ(report["ops_before"].get<int64_t>(), report["ops_after"].get<int64_t>());
    EXPECT_EQ(Content(dir.Str("f1.json")), Content(dir.Str("f2.json")));
    ASSERT_TRUE(RunTool(fmt::format("fuse {} -o {}{}", Quote(dir.Str("f2.json")),
                                    Quote(dir.Str("f3.json")), options))
                    .ok());
    EXPECT_EQ(Slurp(dir / "f2.json"), Slurp(dir / "f3.json"));
  }
}

// The pass is AITemplate's, quirks included: a member dropped by the cycle
// check is never offered again in that run, so a second run over a fused
// random graph may still form groups. Repeated runs must reach a fixed
// point quickly, every intermediate graph valid.
TEST(CliTest, RepeatedFusionReachesAFixedPoint) {
  for (int i = 0; i < 150; i += 7) {
    const std::string name = fmt::format("random/case_{}.json", i);
    SCOPED_TRACE(name);
    TempDir dir;
    std::string current = Conformance(name).string();
    bool fixed = false;
    for (int round = 0; round < 6 && !fixed; ++round) {
      const std::string next = dir.Str(fmt::format("f{}.json", round));
      const ToolRun run = RunTool(fmt::format("fuse {} -o {} --report {}", Quote(current),
                                              Quote(next), Quote(dir.Str("r.json"))));
      ASSERT_TRUE(run.ok()) << run.err;
      const Json report = Json::parse(Slurp(dir / "r.json"));
      fixed = round > 0 && report["groups"].empty() && Content(current) == Content(next);
      current = next;
    }
    EXPECT_TRUE(fixed);
  }
}

TEST(CliTest, OutputsAreWrittenAtomically) {
  TempDir dir;
  const std::string in = Conformance("random/case_3.json").string();
  // Success, over existing files: replaced whole, nothing else left behind.
  Spit(dir / "out.json", "old");
  Spit(dir / "report.json", "old");
  const ToolRun ok =
      RunTool(fmt::format("fuse {} -o {} --report {}", Quote(in), Quote(dir.Str("out.json")),
                          Quote(dir.Str("report.json"))));
  ASSERT_TRUE(ok.ok()) << ok.err;
  EXPECT_THAT(dir.Listing(), ElementsAre("out.json", "report.json"));
  EXPECT_NO_THROW(ReadGraphJsonFile(dir.Str("out.json")));
  EXPECT_TRUE(Json::accept(Slurp(dir / "report.json")));
  // Failure while writing (the output path is a directory): no temp file.
  fs::create_directories(dir / "taken");
  const ToolRun fail = RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote(dir.Str("taken"))));
  EXPECT_EQ(fail.code(), 2) << fail.err;
  EXPECT_THAT(dir.Listing(), ElementsAre("out.json", "report.json", "taken"));
  EXPECT_THAT(dir.Listing("taken"), IsEmpty());
  // Failure on input: the existing outputs are untouched.
  const std::string before = Slurp(dir / "out.json");
  Spit(dir / "bad.json", "{");
  const ToolRun bad =
      RunTool(fmt::format("fuse {} -o {} --report {}", Quote(dir.Str("bad.json")),
                          Quote(dir.Str("out.json")), Quote(dir.Str("report.json"))));
  EXPECT_EQ(bad.code(), 2) << bad.err;
  EXPECT_EQ(Slurp(dir / "out.json"), before);
  EXPECT_THAT(dir.Listing(), ElementsAre("bad.json", "out.json", "report.json", "taken"));
}

// The pass manager's flags, on a conformance graph and the ONNX example.
TEST(CliPassFlagsTest, PrintAfterAllVerifyEachAndTimePasses) {
  TempDir dir;
  const std::string in = Quote(Conformance("edge/cycle_pattern.json").string());
  const ToolRun plain = RunTool(fmt::format("fuse {} -o {}", in, Quote(dir.Str("a.json"))));
  ASSERT_TRUE(plain.ok()) << plain.err;
  const ToolRun run = RunTool(fmt::format("fuse {} -o {} --print-after=all --verify-each --time-passes",
                                          in, Quote(dir.Str("b.json"))));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.err, HasSubstr("// after fuse-group-ops\n"));
  EXPECT_THAT(run.err, HasSubstr(") = group_gemm_rcr"));
  EXPECT_THAT(run.err, HasSubstr("pass timings:"));
  EXPECT_THAT(run.err, HasSubstr("fuse-group-ops         changed"));
  EXPECT_EQ(Slurp(dir / "a.json"), Slurp(dir / "b.json"));  // the flags change no output
  EXPECT_EQ(plain.out, run.out);
}

TEST(CliPassFlagsTest, ListsPassesAnywhere) {
  for (const char* args : {"--list-passes", "fuse --list-passes", "print --list-passes"}) {
    const ToolRun run = RunTool(args);
    ASSERT_TRUE(run.ok()) << args << ": " << run.err;
    EXPECT_THAT(run.out, HasSubstr("fuse-group-ops")) << args;
    EXPECT_THAT(run.out, HasSubstr("onnx-import")) << args;
  }
}

TEST(CliPassFlagsTest, UnknownPassIsAnInputError) {
  const std::string in = Quote(Conformance("edge/cycle_pattern.json").string());
  for (const char* flag : {"--passes=fuse-group-ops,fuse-all", "--stop-after=fuse",
                           "--print-after=nothing"}) {
    const ToolRun run = RunTool(fmt::format("fuse {} {}", in, flag));
    EXPECT_EQ(run.code(), 2) << flag;
    EXPECT_THAT(run.err, HasSubstr("hfuse: error: --")) << flag;
    EXPECT_EQ(Lines(run.err).size(), 1u) << run.err;
  }
}

TEST(CliPassFlagsTest, StopAfterAndPassesPickThePipeline) {
  const std::string onnx = Quote((fs::path(HFUSE_SOURCE_DIR) / "examples/ranking_small.onnx").string());
  const ToolRun stop = RunTool(fmt::format("print {} --passes onnx-import,seed --stop-after "
                                           "fuse-mm-elementwise", onnx));
  ASSERT_TRUE(stop.ok()) << stop.err;
  EXPECT_THAT(stop.out, HasSubstr("= gemm_rcr_bias_relu("));  // absorbed, not yet grouped
  EXPECT_THAT(stop.out, Not(HasSubstr("group_")));
  const ToolRun none = RunTool(fmt::format("print {}", onnx));
  ASSERT_TRUE(none.ok()) << none.err;
  EXPECT_THAT(none.out, Not(HasSubstr("gemm_rcr_bias_relu(")));  // print runs no pass
  const ToolRun all = RunTool(fmt::format("print {} --passes onnx-import,gpu", onnx));
  ASSERT_TRUE(all.ok()) << all.err;
  EXPECT_THAT(all.out, HasSubstr(") = group_layernorm_sigmoid_mul("));
}

}  // namespace
}  // namespace hfuse
