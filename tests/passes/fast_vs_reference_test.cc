// The fast pass makes the seed's decisions: on every conformance case and on
// thousands of random graphs (tests/testing/random_graph.h, standard and
// wide, and the lanes graphs of tools/hfuse_gen, whose edges across lanes
// make the cycle check drop members often), FuseGroupOps with each way of
// computing reachability (window sets, chains, search, and the automatic
// choice) gives the same groups (type, members in order), the same counts,
// the same members dropped by the cycle check, and byte for byte the same
// fused graph as the literal implementation of the seed in reference_pass.h.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gen_graphs.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/file.h"
#include "passes/reference_pass.h"
#include "testing/conformance.h"
#include "testing/random_graph.h"

namespace hfuse {
namespace {

struct Outcome {
  std::vector<std::pair<OpType, std::vector<std::string>>> groups;
  int64_t ops_before = 0;
  int64_t ops_after = 0;
  int64_t dropped = 0;
  std::string written;
};

Outcome Summarize(const Graph& graph, const FuseGroupOpsResult& r) {
  Outcome o;
  for (const FusedGroup& g : r.groups) o.groups.emplace_back(g.type, g.members);
  o.ops_before = r.ops_before;
  o.ops_after = r.ops_after;
  o.dropped = r.dropped_by_cycle_check;
  o.written = WriteGraphJson(graph, r.op_order);
  return o;
}

Outcome Reference(const std::string& text, const FuseGroupOpsOptions& options) {
  Graph graph = ParseGraphJson(text, "graph.json");
  const FuseGroupOpsResult r = test::ReferenceFuseGroupOps(graph, options);
  return Summarize(graph, r);
}

Outcome Fast(const std::string& text, FuseGroupOpsOptions options, ReachStrategy reach) {
  Graph graph = ParseGraphJson(text, "graph.json");
  options.reach = reach;
  const FuseGroupOpsResult r = FuseGroupOps(graph, options);
  return Summarize(graph, r);
}

const char* Name(ReachStrategy reach) {
  switch (reach) {
    case ReachStrategy::kAuto: return "auto";
    case ReachStrategy::kWindows: return "windows";
    case ReachStrategy::kChains: return "chains";
    case ReachStrategy::kSearch: return "search";
  }
  return "?";
}

std::string GroupsText(const Outcome& o) {
  std::string s;
  for (const auto& [type, members] : o.groups) {
    s += fmt::format("{}({})\n", OpTypeName(type), fmt::join(members, ","));
  }
  return s;
}

// Compares every strategy with the reference; returns the reference's
// number of members dropped by the cycle check.
int64_t ExpectSameAsReference(const std::string& text, const FuseGroupOpsOptions& options,
                              const std::string& what) {
  const Outcome want = Reference(text, options);
  for (ReachStrategy reach : {ReachStrategy::kAuto, ReachStrategy::kWindows, ReachStrategy::kChains,
                              ReachStrategy::kSearch}) {
    const Outcome got = Fast(text, options, reach);
    // Groups first, so that a difference shows as groups, not as a diff of two graphs.
    EXPECT_EQ(GroupsText(got), GroupsText(want)) << what << ", " << Name(reach);
    EXPECT_EQ(got.ops_before, want.ops_before) << what << ", " << Name(reach);
    EXPECT_EQ(got.ops_after, want.ops_after) << what << ", " << Name(reach);
    EXPECT_EQ(got.dropped, want.dropped) << what << ", " << Name(reach);
    EXPECT_TRUE(got.written == want.written)
        << what << ", " << Name(reach) << ": fused graphs differ";
    if (::testing::Test::HasFailure()) break;
  }
  return want.dropped;
}

class ConformanceCases : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformanceCases, SameAsReference) {
  const std::string& id = GetParam();
  ExpectSameAsReference(ReadFile(testing::ConformancePath(id) + ".json"),
                        testing::ConformanceOptions(id), id);
}

INSTANTIATE_TEST_SUITE_P(Shared, ConformanceCases, ::testing::ValuesIn(testing::ConformanceCases()),
                         [](const auto& info) { return testing::CaseTestName(info.param); });

struct RandomChunk {
  const char* name;
  uint64_t first_seed;
  int count;
  RandomGraphOptions graph;
  bool group_gemm = true;
};

void PrintTo(const RandomChunk& c, std::ostream* os) { *os << c.name; }

class RandomGraphs : public ::testing::TestWithParam<RandomChunk> {};

TEST_P(RandomGraphs, SameAsReference) {
  const RandomChunk& chunk = GetParam();
  FuseGroupOpsOptions options;
  options.group_gemm = chunk.group_gemm;
  int64_t dropped = 0;
  for (int i = 0; i < chunk.count && !HasFailure(); ++i) {
    const uint64_t seed = chunk.first_seed + static_cast<uint64_t>(i);
    dropped += ExpectSameAsReference(RandomGraphJson(seed, chunk.graph), options,
                                     fmt::format("{} seed {}", chunk.name, seed));
  }
  RecordProperty("dropped_by_cycle_check", std::to_string(dropped));
  if (chunk.graph.wide && chunk.group_gemm) {
    EXPECT_GT(dropped, chunk.count) << "wide graphs should make the cycle check fire often";
  }
}

RandomGraphOptions Options(int min_ops, int max_ops, bool wide) {
  RandomGraphOptions o;
  o.min_ops = min_ops;
  o.max_ops = max_ops;
  o.wide = wide;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Seeds, RandomGraphs,
    ::testing::Values(RandomChunk{"Standard0", 9100000, 400, Options(5, 200, false)},
                      RandomChunk{"Standard1", 9200000, 400, Options(5, 200, false)},
                      RandomChunk{"Wide0", 9300000, 400, Options(20, 200, true)},
                      RandomChunk{"Wide1", 9400000, 400, Options(20, 200, true)},
                      RandomChunk{"WideLarge", 9500000, 40, Options(400, 1200, true)},
                      RandomChunk{"NoGroupGemm", 9600000, 200, Options(5, 200, true), false}),
    [](const auto& info) { return std::string(info.param.name); });

// Lanes graphs: few lanes and many edges across them, so that groups formed
// earlier relate candidates and the cycle check drops many members.
TEST(LanesGraphs, SameAsReference) {
  int64_t dropped = 0;
  for (uint64_t seed = 1; seed <= 150 && !HasFailure(); ++seed) {
    gen::LanesOptions lanes;
    lanes.ops = 60 + static_cast<int64_t>(seed * 7 % 400);
    lanes.width = 2 + static_cast<int64_t>(seed % 12);
    lanes.cross = 0.1 + 0.05 * static_cast<double>(seed % 9);
    lanes.seed = seed;
    dropped +=
        ExpectSameAsReference(gen::LanesGraphJson(lanes), {}, fmt::format("lanes seed {}", seed));
  }
  RecordProperty("dropped_by_cycle_check", std::to_string(dropped));
  EXPECT_GT(dropped, 1000);
}

// Towers graphs of a few sizes, up to that of the scale conformance case.
TEST(TowersGraphs, SameAsReference) {
  for (int64_t towers : {2, 7, 50, 333}) {
    ExpectSameAsReference(gen::TowersGraphJson({.towers = towers, .rows = 256}), {},
                          fmt::format("towers {}", towers));
  }
}

}  // namespace
}  // namespace hfuse
