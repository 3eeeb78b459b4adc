// fuse-group-gathers (passes/fuse_group_gathers.h): what groups, what stays
// out and why (one reason per Gather left out, mirroring the planner's
// rules), that the seed rules change nothing, that the op order it mends
// is a topological order of the new graph, and the CPU executor on the
// group op: bitwise the unfused Gathers' bytes on both kernel sets, for 1
// and 500 members, odd widths, float32/float16/bfloat16 tables, ids at the
// table's edges, and the Gather's own error for an id out of range. (Built
// into fuse_group_ops_test.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_text.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/ir/printer.h"
#include "hfuse/passes/fuse_group_gathers.h"
#include "hfuse/passes/fusion_reasons.h"
#include "hfuse/passes/pass_manager.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

using ::testing::HasSubstr;

// One lookup of the text notation: "e<i> = Gather(t<i>, ids<i>)", a table
// of `rows` x `width`, ids [n] of `ids_dtype`.
struct Lookup {
  int64_t rows, width;
  std::string dtype = "float32";
  std::string ids_dtype = "int64";
  int64_t n = 8;
};

std::string LookupsText(const std::vector<Lookup>& lookups, const std::string& extra = "") {
  std::string text, outs;
  for (size_t i = 0; i < lookups.size(); ++i) {
    const Lookup& l = lookups[i];
    text += fmt::format("input ids{0}: {1}[{2}]\nparam t{0}: {3}[{4}, {5}]\ntensor e{0}: {3}[{2}, {5}]\n", i,
                        l.ids_dtype, l.n, l.dtype, l.rows, l.width);
    text += fmt::format("e{0} = opaque(t{0}, ids{0}) {{onnx = Gather}}  # emb{0}\n", i);
    outs += fmt::format("{}e{}", i ? ", " : "", i);
  }
  return text + extra + "output " + outs + "\n";
}

struct Fused {
  FuseGroupOpsResult result;
  std::vector<OpId> order;
};

// The pipeline `passes` under `rules`, verified after each pass.
Fused RunPipeline(Graph& g, const std::string& passes, RuleSet rules = RuleSet::kHfuse) {
  PassOptions options;
  options.fuse_group_ops.rules = rules;
  PassState state(g);
  PassManager(ParsePassList(passes), PassManagerOptions::VerifyingEach()).Run(state, options);
  return {state.fuse_result, state.op_order};
}

const Reason* ReasonOf(const FuseGroupOpsResult& r, const std::string& op) {
  for (const Reason& u : r.ungrouped) {
    if (u.op == op) return &u;
  }
  return nullptr;
}

std::string RuleOf(const FuseGroupOpsResult& r, const std::string& op) {
  const Reason* u = ReasonOf(r, op);
  return u ? fmt::format("{} [{}]", ReasonCodeName(u->code), ReasonRuleName(u->rule)) : "grouped";
}

// `order` lists every live op once, each after the producers of its inputs.
void ExpectTopological(const Graph& g, const std::vector<OpId>& order) {
  std::vector<bool> done(static_cast<size_t>(g.num_tensor_ids()), false);
  for (TensorId t = 0; t < g.num_tensor_ids(); ++t) {
    done[static_cast<size_t>(t)] = g.tensor(t).alive && g.tensor(t).producer == kNone;
  }
  std::set<OpId> seen;
  for (OpId id : order) {
    ASSERT_TRUE(g.op(id).alive) << g.op(id).name;
    ASSERT_TRUE(seen.insert(id).second) << g.op(id).name;
    for (TensorId in : g.op(id).inputs) EXPECT_TRUE(done[static_cast<size_t>(in)]) << g.op(id).name;
    for (TensorId out : g.op(id).outputs) done[static_cast<size_t>(out)] = true;
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), g.NumLiveOps());
}

TEST(FuseGroupGathersTest, GroupsIndependentLookupsInOpIdOrder) {
  Graph g = ParseGraphText(LookupsText({{100, 16}, {7, 3}, {5, 13, "float32", "int32"}}), "t");
  const Fused f = RunPipeline(g, "fuse-group-gathers");
  ASSERT_EQ(f.result.groups.size(), 1u);
  EXPECT_EQ(f.result.groups[0].type, OpType::kGroupGather);
  EXPECT_THAT(f.result.groups[0].members, ::testing::ElementsAre("emb0", "emb1", "emb2"));
  EXPECT_TRUE(f.result.ungrouped.empty());
  EXPECT_EQ(f.result.ops_before, 3);
  EXPECT_EQ(f.result.ops_after, 1);
  EXPECT_EQ(UngroupedKinds(f.result), "GEMM/LayerNorm/Gather");
}

TEST(FuseGroupGathersTest, SeedRulesChangeNothing) {
  const std::string text = LookupsText({{100, 16}, {7, 3}});
  Graph g = ParseGraphText(text, "t");
  const std::string before = PrintGraph(g);
  const Fused f = RunPipeline(g, "fuse-group-ops,fuse-group-gathers", RuleSet::kSeed);
  EXPECT_EQ(PrintGraph(g), before);
  EXPECT_TRUE(f.result.groups.empty());
  EXPECT_TRUE(f.result.ungrouped.empty());  // Gathers get no reasons under the seed rules
  EXPECT_EQ(UngroupedKinds(f.result), "GEMM/LayerNorm");
}

TEST(FuseGroupGathersTest, FiveHundredMembersFormOneGroup) {
  std::vector<Lookup> lookups;
  for (int i = 0; i < 500; ++i) lookups.push_back({3 + i % 7, 1 + i % 13});
  Graph g = ParseGraphText(LookupsText(lookups), "t");
  const Fused f = RunPipeline(g, "fuse-group-gathers");
  ASSERT_EQ(f.result.groups.size(), 1u);
  ASSERT_EQ(f.result.groups[0].members.size(), 500u);
  EXPECT_EQ(f.result.groups[0].members[499], "emb499");
  EXPECT_EQ(g.NumLiveOps(), 1);
}

TEST(FuseGroupGathersTest, EveryGatherLeftOutHasOneReason) {
  const std::string extra =
      "input x: float32[100, 4]\ntensor r: float32[100, 4]\nr = elementwise(x) {func = relu}  # relu\n"
      "param t2: float32[4, 100]\ntensor y2: float32[4, 8]\n"
      "y2 = opaque(t2, ids0) {onnx = Gather, axis = 1}  # columns\n"
      "tensor y3: float32[8, 4]\ny3 = opaque(r, ids0) {onnx = Gather}  # computed_table\n"
      "param pid: int64[8]\ntensor y4: float32[8, 4]\ny4 = opaque(t0, pid) {onnx = Gather}  # constant_ids\n"
      "param ti: int64[100, 4]\ntensor y5: int64[8, 4]\ny5 = opaque(ti, ids0) {onnx = Gather}  # int_table\n"
      "input ids9: int64[1, 1, 1, 1, 1, 1, 1, 1, 8]\ntensor y6: float32[1, 1, 1, 1, 1, 1, 1, 1, 8, 4]\n"
      "y6 = opaque(t0, ids9) {onnx = Gather}  # rank9_ids\n"
      "tensor y7: float32[8, 5]\ny7 = opaque(t0, ids0) {onnx = Gather}  # wrong_shape\n"
      "param th: float16[10, 4]\ntensor y8: float16[8, 4]\ny8 = opaque(th, ids0) {onnx = Gather}  # half\n";
  std::string text = LookupsText({{100, 4}, {100, 4}}, extra);
  text.replace(text.rfind("output "), std::string::npos,
               "output e0, e1, y2, y3, y4, y5, y6, y7, y8\n");
  Graph g = ParseGraphText(text, "t");
  const Fused f = RunPipeline(g, "hfuse");
  ASSERT_EQ(f.result.groups.size(), 1u);
  EXPECT_THAT(f.result.groups[0].members, ::testing::ElementsAre("emb0", "emb1"));
  EXPECT_EQ(RuleOf(f.result, "columns"), "not-a-candidate [gather-axis]");
  EXPECT_EQ(RuleOf(f.result, "computed_table"), "not-a-candidate [table-not-constant]");
  EXPECT_EQ(RuleOf(f.result, "constant_ids"), "not-a-candidate [ids-constant]");
  EXPECT_EQ(RuleOf(f.result, "int_table"), "not-a-candidate [table-dtype]");
  EXPECT_EQ(RuleOf(f.result, "rank9_ids"), "not-a-candidate [ids-form]");
  EXPECT_EQ(RuleOf(f.result, "wrong_shape"), "not-a-candidate [gather-form]");
  EXPECT_EQ(RuleOf(f.result, "half"), "no-compatible-peer [dtype]");
  EXPECT_THAT(ReasonOf(f.result, "half")->details, HasSubstr("dtype of table float32 vs float16"));
  EXPECT_THAT(ReasonOf(f.result, "columns")->details, HasSubstr("axis 1 of table t2"));
  EXPECT_EQ(f.result.ungrouped.size(), 7u);
  for (const Reason& r : f.result.ungrouped) EXPECT_EQ(KindName(r.type), "Gather") << r.op;
  // Each explanation is the planner's own rule: no candidate explained as one.
  for (const Reason& r : f.result.ungrouped) {
    Reason again;
    EXPECT_EQ(ExplainNotACandidate(g, r.id, again, RuleSet::kHfuse), r.code == ReasonCode::kNotACandidate)
        << r.op;
    EXPECT_EQ(IsGatherCandidate(g, r.id), r.code != ReasonCode::kNotACandidate) << r.op;
  }
  EXPECT_THAT(ReasonsByCode(f.result.ungrouped), HasSubstr("  half (Gather) [dtype]: nearest peer"));
}

TEST(FuseGroupGathersTest, OnlyCandidateOfType) {
  Graph g = ParseGraphText(LookupsText({{100, 4}}), "t");
  const Fused f = RunPipeline(g, "fuse-group-gathers");
  EXPECT_TRUE(f.result.groups.empty());
  EXPECT_EQ(RuleOf(f.result, "emb0"), "only-candidate-of-type [only-of-type]");
  EXPECT_EQ(ReasonOf(f.result, "emb0")->details, "the only Gather op in the graph");
}

TEST(FuseGroupGathersTest, LookupOfALookupsResultIsACycleRiskWithItsPath) {
  const std::string text =
      "input ids0: int64[8]\nparam t0: float32[10, 1]\nparam t1: float32[10, 4]\n"
      "tensor e0: float32[8, 1]\ntensor c: int64[8, 1]\ntensor e1: float32[8, 1, 4]\n"
      "e0 = opaque(t0, ids0) {onnx = Gather}  # emb0\n"
      "c = opaque(e0) {onnx = Cast, to = 7}  # cast\n"
      "e1 = opaque(t1, c) {onnx = Gather}  # emb1\noutput e1\n";
  Graph g = ParseGraphText(text, "t");
  const Fused f = RunPipeline(g, "fuse-group-gathers");
  EXPECT_TRUE(f.result.groups.empty());
  EXPECT_EQ(RuleOf(f.result, "emb0"), "cycle-risk [peer-below]");
  EXPECT_THAT(ReasonOf(f.result, "emb0")->path, ::testing::ElementsAre("emb0", "cast", "emb1"));
  EXPECT_EQ(RuleOf(f.result, "emb1"), "cycle-risk [below-group]");
}

TEST(FuseGroupGathersTest, MendedOrderIsTopologicalWhenIdsComeLater) {
  // fuse-group-ops' order puts emb0 first; emb1's ids are computed after it,
  // so the group moves after that computation, and its readers after it.
  const std::string text =
      "input ids0: int64[8]\ninput x: float32[8, 4]\nparam t0: float32[10, 4]\nparam t1: float32[10, 4]\n"
      "tensor e0: float32[8, 4]\ntensor r: float32[8, 4]\ntensor c: int64[8, 4]\ntensor e1: float32[8, 4, 4]\n"
      "tensor s: float32[8, 4]\n"
      "e0 = opaque(t0, ids0) {onnx = Gather}  # emb0\n"
      "s = elementwise(e0, x) {func = add}  # add\n"
      "r = elementwise(x) {func = relu}  # relu\n"
      "c = opaque(r) {onnx = Cast, to = 7}  # cast\n"
      "e1 = opaque(t1, c) {onnx = Gather}  # emb1\noutput s, e1\n";
  Graph g = ParseGraphText(text, "t");
  const Fused f = RunPipeline(g, "hfuse");
  ASSERT_EQ(f.result.groups.size(), 1u);
  ExpectTopological(g, f.order);
  std::vector<std::string> names;
  for (OpId id : f.order) names.push_back(g.op(id).name);
  EXPECT_THAT(names, ::testing::ElementsAre("relu", "cast", f.result.groups[0].name, "add"));
}

TEST(FuseGroupGathersTest, DeterministicAcrossRuns) {
  std::vector<Lookup> lookups;
  for (int i = 0; i < 40; ++i) lookups.push_back({10, 1 + i % 5, i % 2 ? "float16" : "bfloat16"});
  std::string first;
  for (int run = 0; run < 3; ++run) {
    Graph g = ParseGraphText(LookupsText(lookups), "t");
    const Fused f = RunPipeline(g, "hfuse");
    const std::string printed = PrintGraph(g, f.order);
    if (run == 0) first = printed;
    EXPECT_EQ(printed, first);
  }
  EXPECT_THAT(first, HasSubstr("members = [emb0, emb2, emb4"));
}

// ---------------------------------------------------------------------------
// The CPU executor on group_gather.

// Feeds for LookupsText's graph: random tables, ids at both edges (0, rows
// - 1, -1, -rows) and in between.
TensorMap LookupFeeds(const Graph& g, const std::vector<Lookup>& lookups, uint64_t seed) {
  TensorMap feeds = RandomFeeds(g, BindDims(g), seed);
  for (size_t i = 0; i < lookups.size(); ++i) {
    HostTensor& ids = feeds.at(fmt::format("ids{}", i));
    const int64_t rows = lookups[i].rows;
    for (int64_t k = 0; k < ids.numel(); ++k) {
      const int64_t edge[] = {0, rows - 1, -1, -rows};
      ids.SetInt(k, k < 4 ? edge[k] : static_cast<int64_t>((k * 7 + static_cast<int64_t>(seed)) % rows));
    }
  }
  return feeds;
}

void ExpectFusedBitwise(const std::vector<Lookup>& lookups, const std::string& what) {
  const Graph original = ParseGraphText(LookupsText(lookups), what);
  Graph fused = original;
  const Fused f = RunPipeline(fused, "fuse-group-gathers");
  ASSERT_EQ(fused.NumLiveOps(), 1) << what;
  const TensorMap feeds = LookupFeeds(original, lookups, 7);
  const DimValues dims = BindDims(original);
  CpuBufferPool pool;
  pool.set_poison(true);  // every output element must be written
  CpuRunOptions fast;
  fast.pool = &pool;
  for (uint8_t mode : {0, 1, 2}) {  // the rule, side by side, one by one
    fast.group_mode = mode;
    const TensorMap want = RunOnCpuReference(original, feeds, dims);
    for (const TensorMap& got : {RunOnCpuReference(fused, feeds, dims), RunOnCpu(fused, feeds, dims, fast),
                                 RunOnCpu(original, feeds, dims, fast)}) {
      for (const OutputComparison& c : CompareOutputs(want, got)) {
        EXPECT_TRUE(c.problem.empty()) << what << " " << c.name << ": " << c.problem;
        EXPECT_TRUE(c.bitwise_equal) << what << " " << c.name << " (group mode " << int(mode) << ")";
      }
    }
  }
}

TEST(GroupGatherCpuTest, BitwiseEqualToTheGathersOddWidthsAndDtypes) {
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    ExpectFusedBitwise({{5, 3, dtype}, {9, 5, dtype, "int32"}, {17, 13, dtype}, {4, 1, dtype, "int64", 1},
                        {1000, 64, dtype, "int64", 300}},
                       dtype);
  }
}

TEST(GroupGatherCpuTest, FiveHundredMembersBitwise) {
  std::vector<Lookup> lookups;
  for (int i = 0; i < 500; ++i) lookups.push_back({4 + i % 11, 1 + i % 13, "float32", i % 2 ? "int32" : "int64"});
  ExpectFusedBitwise(lookups, "500");
}

TEST(GroupGatherCpuTest, OneMemberGroupRunsAsItsGather) {
  // The pass forms no group of one; a group_gather of one (read back from a
  // fused model, or written by hand) still runs as its Gather.
  const std::string text =
      "input ids0: int64[6]\nparam t0: bfloat16[6, 3]\ntensor e0: bfloat16[6, 3]\n"
      "(e0) = group_gather(t0, ids0) {members = [emb0]}  # g\noutput e0\n";
  const Graph one = ParseGraphText(text, "one");
  const Graph plain = ParseGraphText(LookupsText({{6, 3, "bfloat16", "int64", 6}}), "plain");
  const TensorMap feeds = LookupFeeds(plain, {{6, 3}}, 3);
  const DimValues dims = BindDims(plain);
  for (const OutputComparison& c :
       CompareOutputs(RunOnCpuReference(plain, feeds, dims), RunOnCpu(one, feeds, dims))) {
    EXPECT_TRUE(c.bitwise_equal) << c.name;
  }
}

TEST(GroupGatherCpuTest, OutOfRangeIdIsTheGathersOwnError) {
  const std::vector<Lookup> lookups = {{10, 4}, {7, 3}, {5, 2}};
  const Graph original = ParseGraphText(LookupsText(lookups), "t");
  Graph fused = original;
  RunPipeline(fused, "fuse-group-gathers");
  ASSERT_EQ(fused.NumLiveOps(), 1);
  for (int64_t bad : {int64_t{7}, int64_t{-8}, int64_t{1} << 40}) {
    TensorMap feeds = LookupFeeds(original, lookups, 1);
    feeds.at("ids1").SetInt(5, bad);
    const DimValues dims = BindDims(original);
    auto error = [&](const Graph& g, bool reference) {
      try {
        reference ? RunOnCpuReference(g, feeds, dims) : RunOnCpu(g, feeds, dims);
      } catch (const InputError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    const std::string want = error(original, true);
    EXPECT_EQ(want, fmt::format("op 'emb1' is the ONNX operator Gather, which hfuse keeps opaque and the CPU "
                                "executor cannot run: index {} is out of range for a dim of 7",
                                bad));
    EXPECT_EQ(error(fused, true), want);
    EXPECT_EQ(error(fused, false), want);
  }
}

}  // namespace
}  // namespace hfuse
