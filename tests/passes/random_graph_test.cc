// Property test of fuse-group-ops over a few thousand seeded random graphs
// (testing/random_graph.h). For each graph the fused result must verify and
// be acyclic; keep the graph outputs (names, order, shapes, dtypes); account
// for every live GEMM and layernorm exactly once (left alone, or a member of
// exactly one group whose group op has one output per member) and drop the
// dead ones; come out byte for byte the same from a second parse and fuse;
// write graph JSON that reads back (and writes back to the same bytes); and
// form only groups that obey the grouping rules: at least 2 members (at most
// 39 layernorms) of one type, none an ancestor of another in the original
// graph, GEMMs of one dtype, M and alignment that pass the candidate filter,
// layernorms of one eps and dtype. Also: without group_gemm no GEMM group
// forms, and neither the order of the tensors array nor the op names change
// the groups (the canonical order depends on neither). A failing graph is
// written to the test temp dir, named by its seed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hfuse/ir/op_members.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/runtime/bound_dims.h"
#include "hfuse/support/checked.h"
#include "testing/random_graph.h"

namespace hfuse {
namespace {

using Groups = std::vector<std::pair<std::string, std::vector<std::string>>>;

Groups GroupList(const FuseGroupOpsResult& result) {
  Groups groups;
  for (const FusedGroup& g : result.groups) groups.emplace_back(OpTypeName(g.type), g.members);
  return groups;
}

// AITemplate's GEMM alignment: the largest of 8 (not for float32), 4, 2
// dividing K, else 1.
int Alignment(const Graph& g, OpId gemm) {
  const Tensor& a = g.tensor(g.op(gemm).inputs[0]);
  const int64_t k = a.shape.back().value;
  for (int align : {8, 4, 2}) {
    if (align == 8 && a.dtype == DType::kFloat32) continue;
    if (k % align == 0) return align;
  }
  return 1;
}

// Ops that reach a graph output (the others are dead and dropped first).
std::vector<bool> LiveOps(const Graph& g) {
  std::vector<bool> live(static_cast<size_t>(g.num_op_ids()), false);
  std::vector<TensorId> stack(g.outputs().begin(), g.outputs().end());
  while (!stack.empty()) {
    const OpId p = g.tensor(stack.back()).producer;
    stack.pop_back();
    if (p == kNone || live[static_cast<size_t>(p)]) continue;
    live[static_cast<size_t>(p)] = true;
    for (TensorId in : g.op(p).inputs) stack.push_back(in);
  }
  return live;
}

// Collects the failures of one graph as messages.
class Checker {
 public:
  void Expect(bool ok, const std::string& what) {
    if (!ok) failures_.push_back(what);
  }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::vector<std::string> failures_;
};

struct Fused {
  Graph graph;
  FuseGroupOpsResult result;
  std::string json;  // WriteGraphJson in the pass's final order
};

Fused Fuse(Graph graph, const FuseGroupOpsOptions& options) {
  Fused f{std::move(graph), {}, {}};
  f.result = FuseGroupOps(f.graph, options);
  f.json = WriteGraphJson(f.graph, f.result.op_order);
  return f;
}

// (1) the fused graph verifies, is acyclic, and op_order is a topological
// order of exactly its live ops.
void CheckValid(const Fused& f, Checker& c) {
  try {
    VerifyGraph(f.graph);
  } catch (const std::exception& e) {
    c.Expect(false, std::string("fused graph does not verify: ") + e.what());
    return;
  }
  const Graph& g = f.graph;
  c.Expect(static_cast<int64_t>(StableTopologicalOrder(g).size()) == g.NumLiveOps(),
           "fused graph has a cycle");
  c.Expect(f.result.ops_after == g.NumLiveOps(), "ops_after is not the number of live ops");
  std::vector<int> position(static_cast<size_t>(g.num_op_ids()), -1);
  for (size_t i = 0; i < f.result.op_order.size(); ++i) {
    const OpId id = f.result.op_order[i];
    c.Expect(g.op(id).alive, "op_order lists a dead op");
    c.Expect(position[static_cast<size_t>(id)] < 0, "op_order lists an op twice");
    position[static_cast<size_t>(id)] = static_cast<int>(i);
  }
  c.Expect(static_cast<int64_t>(f.result.op_order.size()) == g.NumLiveOps(),
           "op_order does not list every live op");
  for (OpId id : f.result.op_order) {
    for (TensorId in : g.op(id).inputs) {
      const OpId p = g.tensor(in).producer;
      if (p != kNone && position[static_cast<size_t>(p)] >= position[static_cast<size_t>(id)]) {
        c.Expect(false, "op_order puts '" + g.op(id).name + "' before its producer '" +
                            g.op(p).name + "'");
      }
    }
  }
}

// (2) the graph outputs: same names, order, shapes and dtypes.
void CheckOutputs(const Graph& orig, const Graph& g, Checker& c) {
  c.Expect(orig.outputs().size() == g.outputs().size(), "number of graph outputs changed");
  for (size_t i = 0; i < std::min(orig.outputs().size(), g.outputs().size()); ++i) {
    const Tensor& a = orig.tensor(orig.outputs()[i]);
    const Tensor& b = g.tensor(g.outputs()[i]);
    c.Expect(a.name == b.name,
             "graph output " + std::to_string(i) + " '" + a.name + "' became '" + b.name + "'");
    c.Expect(ShapeString(orig, a.shape) == ShapeString(g, b.shape) && a.dtype == b.dtype,
             "graph output '" + a.name + "' changed shape or dtype");
  }
}

// (3) every live GEMM and layernorm once, dead ones gone; group ops match
// the report.
void CheckAccounting(const Graph& orig, const Fused& f, Checker& c) {
  const Graph& g = f.graph;
  const std::vector<bool> live = LiveOps(orig);
  std::map<std::string, int> memberships;
  int64_t merged = 0;
  for (const FusedGroup& group : f.result.groups) {
    merged += static_cast<int64_t>(group.members.size()) - 1;
    for (const std::string& m : group.members) ++memberships[m];
  }
  for (OpId id = 0; id < orig.num_op_ids(); ++id) {
    const Op& op = orig.op(id);
    const auto found = g.FindOp(op.name);
    const bool present = found && g.op(*found).alive;
    if (!IsGemm(op.type) && !IsLayerNorm(op.type)) {
      // Other ops stay as they are, but for dead ones and no-op splits (one
      // output) and concatenates (output shaped like one of the inputs).
      bool noop = op.type == OpType::kSplit && op.outputs.size() == 1;
      if (op.type == OpType::kConcatenate) {
        for (TensorId in : op.inputs) {
          noop = noop || orig.tensor(in).shape == orig.tensor(op.outputs[0]).shape;
        }
      }
      if (!live[static_cast<size_t>(id)]) {
        c.Expect(!present, "dead op '" + op.name + "' survives");
      } else if (!present) {
        c.Expect(noop, "op '" + op.name + "' is gone");
      } else {
        const Op& now = g.op(*found);
        c.Expect(now.type == op.type && now.inputs.size() == op.inputs.size() &&
                     now.outputs.size() == op.outputs.size(),
                 "op '" + op.name + "' changed");
      }
      continue;
    }
    const int times = (present ? 1 : 0) + memberships[op.name];
    if (live[static_cast<size_t>(id)]) {
      c.Expect(times == 1,
               "live op '" + op.name + "' is accounted for " + std::to_string(times) + " times");
      if (present) c.Expect(g.op(*found).type == op.type, "op '" + op.name + "' changed type");
    } else {
      c.Expect(times == 0, "dead op '" + op.name + "' survives");
    }
  }
  for (const auto& [name, n] : memberships) {
    const auto id = orig.FindOp(name);
    c.Expect(id.has_value(), "group member '" + name + "' is no op of the input");
  }
  c.Expect(f.result.ops_after == f.result.ops_before - merged,
           "ops_after != ops_before - (members - 1 per group)");

  // Each reported group is the group op producing its members' outputs.
  int64_t group_ops = 0;
  for (OpId id : g.LiveOps()) {
    if (IsGroupGemm(g.op(id).type) || IsGroupLayerNorm(g.op(id).type)) ++group_ops;
  }
  c.Expect(group_ops == static_cast<int64_t>(f.result.groups.size()),
           "fused graph has " + std::to_string(group_ops) + " group ops, the report " +
               std::to_string(f.result.groups.size()));
  for (const FusedGroup& group : f.result.groups) {
    const std::string label =
        std::string(OpTypeName(group.type)) + " of '" + group.members[0] + "'";
    std::vector<std::string> outs;
    for (const std::string& m : group.members) {
      const auto id = orig.FindOp(m);
      if (!id || orig.op(*id).outputs.size() != 1) {
        c.Expect(false, "group member '" + m + "' has no single output in the input");
        return;
      }
      outs.push_back(orig.tensor(orig.op(*id).outputs[0]).name);
    }
    const auto t = g.FindTensor(outs[0]);
    const OpId gop = t ? g.tensor(*t).producer : kNone;
    if (gop == kNone) {
      c.Expect(false, label + ": no op produces the first member's output");
      continue;
    }
    const Op& op = g.op(gop);
    c.Expect(op.type == group.type, label + ": produced by a " + std::string(OpTypeName(op.type)));
    c.Expect(op.outputs.size() == group.members.size(), label + ": wrong number of outputs");
    for (size_t i = 0; i < std::min(op.outputs.size(), outs.size()); ++i) {
      c.Expect(g.tensor(op.outputs[i]).name == outs[i], label + ": outputs not in member order");
    }
    if (IsGroupGemm(op.type)) {
      const size_t per = GemmHasBias(op.type) ? 3 : 2;
      c.Expect(NumMembers(op) == group.members.size(), label + ": member count");
      c.Expect(op.inputs.size() == per * group.members.size(), label + ": wrong number of inputs");
    } else {
      c.Expect(op.inputs.size() == 3 * group.members.size(), label + ": wrong number of inputs");
      c.Expect(op.attrs.normalized_shapes.size() == group.members.size(),
               label + ": normalized_shapes");
    }
  }
}

// (6) the grouping rules, judged on the original graph.
void CheckGroupRules(const Graph& orig, const FuseGroupOpsResult& result, bool group_gemm,
                     Checker& c) {
  for (const FusedGroup& group : result.groups) {
    const std::string label =
        std::string(OpTypeName(group.type)) + " of '" + group.members[0] + "'";
    c.Expect(group.members.size() >= 2, label + ": fewer than 2 members");
    c.Expect(group_gemm || !IsGroupGemm(group.type), label + ": a GEMM group without group_gemm");
    std::vector<OpId> ids;
    for (const std::string& m : group.members) {
      const auto id = orig.FindOp(m);
      if (!id) return;  // reported by CheckAccounting
      ids.push_back(*id);
    }
    const Op& first = orig.op(ids[0]);
    for (size_t i = 0; i < ids.size(); ++i) {
      const Op& op = orig.op(ids[i]);
      c.Expect(GroupOf(op.type) == group.type,
               label + ": member '" + op.name + "' of type " + std::string(OpTypeName(op.type)));
      const std::vector<bool> ancestors = Ancestors(orig, ids[i]);
      for (size_t j = 0; j < ids.size(); ++j) {
        if (ancestors[static_cast<size_t>(ids[j])]) {
          c.Expect(false, label + ": member '" + orig.op(ids[j]).name + "' is an ancestor of '" +
                              op.name + "'");
        }
      }
      if (IsGemm(op.type)) {
        const Tensor& a = orig.tensor(op.inputs[0]);
        const Tensor& a0 = orig.tensor(first.inputs[0]);
        bool candidate =
            op.attrs.Alpha() == 1.0 && a.shape.size() == 2 && Alignment(orig, ids[i]) > 1;
        for (TensorId in : op.inputs) {
          for (const Dim& d : orig.tensor(in).shape) candidate = candidate && d.is_static();
        }
        c.Expect(candidate, label + ": member '" + op.name + "' is no GEMM candidate");
        for (size_t k = 0; k < op.inputs.size() && k < first.inputs.size(); ++k) {
          c.Expect(orig.tensor(op.inputs[k]).dtype == orig.tensor(first.inputs[k]).dtype,
                   label + ": members of different dtypes");
        }
        c.Expect(!a.shape.empty() && !a0.shape.empty() && a.shape[0] == a0.shape[0],
                 label + ": members of different M");
        c.Expect(Alignment(orig, ids[i]) == Alignment(orig, ids[0]),
                 label + ": members of different alignment");
      } else {
        c.Expect(op.attrs.Eps() == first.attrs.Eps(), label + ": members of different eps");
        c.Expect(orig.tensor(op.inputs[0]).dtype == orig.tensor(first.inputs[0]).dtype,
                 label + ": members of different dtypes");
        c.Expect(op.inputs.size() == 3, label + ": member '" + op.name + "' lacks gamma or beta");
      }
    }
    if (IsGroupLayerNorm(group.type)) {
      c.Expect(group.members.size() <= 39, label + ": more than 39 layernorms");
    }
  }
}

// The same graph with the tensors array shuffled and every op renamed.
std::string Disguise(const std::string& text, uint64_t seed,
                     std::map<std::string, std::string>& new_to_old) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text);
  std::mt19937_64 engine(seed * 0x9e3779b97f4a7c15ULL + 17);
  auto& tensors = doc["tensors"];
  for (size_t i = tensors.size(); i > 1; --i) std::swap(tensors[i - 1], tensors[engine() % i]);
  const size_t n = doc["ops"].size();
  for (size_t i = 0; i < n; ++i) {
    auto& op = doc["ops"][i];
    std::string name = "n";  // (built step by step: GCC 12 warns falsely on "n" + string)
    name += std::to_string(n - i);
    name += "_";
    name += std::to_string(engine() % 1000);
    new_to_old[name] = op["name"].get<std::string>();
    op["name"] = name;
  }
  return doc.dump();
}

Fused ParseAndFuse(const std::string& text, const FuseGroupOpsOptions& options) {
  return Fuse(ParseGraphJson(text, "random"), options);
}

// What the graphs of a chunk made the pass do, to see that they exercise it.
struct Stats {
  int64_t ops = 0;
  int64_t groups = 0;
  int64_t graphs_with_cycle_drops = 0;
};

// Runs every check on the parsed graph `orig` (from `text`); returns the
// failures and adds to `stats`.
std::vector<std::string> CheckGraph(const Graph& orig, const std::string& text, uint64_t seed,
                                    const FuseGroupOpsOptions& options, Stats& stats) {
  Checker c;
  Fused f;
  try {
    f = Fuse(orig, options);
  } catch (const std::exception& e) {
    return {std::string("fusing throws: ") + e.what()};
  }
  stats.groups += static_cast<int64_t>(f.result.groups.size());
  if (f.result.dropped_by_cycle_check > 0) ++stats.graphs_with_cycle_drops;
  CheckValid(f, c);
  CheckOutputs(orig, f.graph, c);
  CheckAccounting(orig, f, c);
  CheckGroupRules(orig, f.result, options.group_gemm, c);
  c.Expect(f.result.ops_before <= orig.NumLiveOps(), "ops_before exceeds the input's op count");

  // (4) a second parse and fuse gives the same bytes and groups.
  try {
    const Fused again = ParseAndFuse(text, options);
    c.Expect(again.json == f.json, "a second run writes different JSON");
    c.Expect(GroupList(again.result) == GroupList(f.result), "a second run forms different groups");
    c.Expect(again.result.ops_before == f.result.ops_before &&
                 again.result.ops_after == f.result.ops_after,
             "a second run counts different ops");
  } catch (const std::exception& e) {
    c.Expect(false, std::string("second run throws: ") + e.what());
  }

  // (5) the written graph reads back, and writes back to the same bytes.
  try {
    const Graph reread = ParseGraphJson(f.json, "fused");
    c.Expect(WriteGraphJson(reread) == f.json,
             "the fused graph does not write back to the same bytes");
    c.Expect(reread.NumLiveOps() == f.result.ops_after,
             "the re-read fused graph has a different op count");
  } catch (const std::exception& e) {
    c.Expect(false, std::string("the fused graph does not read back: ") + e.what());
  }

  // Neither tensor order nor op names may change the groups.
  try {
    std::map<std::string, std::string> new_to_old;
    const std::string disguised = Disguise(text, seed, new_to_old);
    const Fused d = ParseAndFuse(disguised, options);
    Groups mapped = GroupList(d.result);
    for (auto& [type, members] : mapped) {
      for (std::string& m : members) m = new_to_old[m];
    }
    c.Expect(mapped == GroupList(f.result),
             "shuffling tensors and renaming ops changes the groups");
    c.Expect(d.result.ops_after == f.result.ops_after,
             "shuffling tensors and renaming ops changes ops_after");
  } catch (const std::exception& e) {
    c.Expect(false, std::string("the disguised graph throws: ") + e.what());
  }
  return c.failures();
}

// A crash (an HFUSE_CHECK abort, a segfault) would end the binary without
// naming the graph: the handler prints the seed being checked first.
char g_current[128] = "";

extern "C" void ReportCrash(int sig) {
  const ssize_t ignored = write(STDERR_FILENO, g_current, std::strlen(g_current));
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct Chunk {
  std::string name;
  uint64_t first_seed;
  int count;
  RandomGraphOptions graph;
  bool group_gemm = true;
};

std::vector<Chunk> AllChunks() {
  std::vector<Chunk> chunks;
  RandomGraphOptions standard;  // 5 to 200 ops
  RandomGraphOptions small;
  small.max_ops = 30;
  RandomGraphOptions wide;
  wide.wide = true;
  RandomGraphOptions wide_small = wide;
  wide_small.max_ops = 40;
  RandomGraphOptions fixed;
  fixed.dynamic_dims = false;
  for (int i = 0; i < 6; ++i) {
    chunks.push_back({"Standard" + std::to_string(i), 1000u * i, 160, standard});
  }
  for (int i = 0; i < 4; ++i) {
    chunks.push_back({"Small" + std::to_string(i), 100000u + 1000u * i, 350, small});
  }
  for (int i = 0; i < 4; ++i) {
    chunks.push_back({"Wide" + std::to_string(i), 200000u + 1000u * i, 120, wide});
  }
  for (int i = 0; i < 2; ++i) {
    chunks.push_back({"WideSmall" + std::to_string(i), 300000u + 1000u * i, 300, wide_small});
  }
  chunks.push_back({"Static", 400000u, 150, fixed});
  RandomGraphOptions small_shapes;  // as the pipeline fuzz target asks
  small_shapes.min_ops = 1;
  small_shapes.max_ops = 60;
  small_shapes.small_shapes = true;
  chunks.push_back({"SmallShapes", 800000u, 200, small_shapes});
  RandomGraphOptions large;  // deep chains and big groups
  large.min_ops = 600;
  large.max_ops = 1500;
  chunks.push_back({"Large", 700000u, 8, large});
  chunks.push_back({"NoGroupGemm", 500000u, 150, standard, false});
  chunks.push_back({"NoGroupGemmWide", 600000u, 100, wide, false});
  return chunks;
}

void PrintTo(const Chunk& chunk, std::ostream* os) { *os << chunk.name; }

class RandomGraphs : public testing::TestWithParam<Chunk> {};

TEST_P(RandomGraphs, FusionKeepsProperties) {
  const Chunk& chunk = GetParam();
  FuseGroupOpsOptions options;
  options.group_gemm = chunk.group_gemm;
  int failed = 0;
  Stats stats;
  std::signal(SIGSEGV, ReportCrash);
  std::signal(SIGABRT, ReportCrash);
  for (int i = 0; i < chunk.count; ++i) {
    const uint64_t seed = chunk.first_seed + static_cast<uint64_t>(i);
    std::snprintf(g_current, sizeof g_current, "\nrandom_graph_test: crashed on seed %llu (%s)\n",
                  static_cast<unsigned long long>(seed), chunk.name.c_str());
    const std::string text = RandomGraphJson(seed, chunk.graph);
    if (i % 16 == 0) {
      ASSERT_EQ(text, RandomGraphJson(seed, chunk.graph))
          << "the generator is not deterministic, seed " << seed;
    }
    std::vector<std::string> failures;
    try {
      const Graph orig = ParseGraphJson(text, "random");
      const int n = orig.num_op_ids();
      stats.ops += n;
      EXPECT_TRUE(n >= chunk.graph.min_ops && n <= chunk.graph.max_ops)
          << "seed " << seed << " has " << n << " ops";
      failures = CheckGraph(orig, text, seed, options, stats);
    } catch (const std::exception& e) {
      failures = {std::string("the generated graph does not parse: ") + e.what()};
    }
    if (failures.empty()) continue;
    const std::string path = testing::TempDir() + "random_graph_" + std::to_string(seed) + ".json";
    std::ofstream(path) << text;
    std::string message;
    for (const std::string& f : failures) message += "\n  " + f;
    ADD_FAILURE() << "seed " << seed << " (" << chunk.name << ", graph in " << path
                  << "):" << message;
    if (++failed >= 5) break;
  }
  g_current[0] = '\0';
  RecordProperty("ops", std::to_string(stats.ops));
  RecordProperty("groups", std::to_string(stats.groups));
  RecordProperty("graphs_with_cycle_drops", std::to_string(stats.graphs_with_cycle_drops));
  // The generator must keep the pass busy: groups everywhere, and in large
  // wide graphs the cycle check firing often (about 70% of them).
  EXPECT_GT(stats.groups, chunk.count) << "few groups formed";
  if (chunk.graph.wide && chunk.graph.max_ops >= 100 && chunk.group_gemm && failed == 0) {
    EXPECT_GE(stats.graphs_with_cycle_drops * 3, chunk.count) << "the cycle check rarely fired";
  }
}

// All the tensors of a graph together, dynamic dims at their min, in bytes.
int64_t TensorBytesAtMin(const Graph& g) {
  std::map<std::string, int64_t> at_min;
  for (const DynamicDim& d : g.dims()) at_min[d.name] = d.min;
  const DimValues dims = BindDims(g, at_min);
  int64_t total = 0;
  for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
    const Tensor& t = g.tensor(id);
    if (!t.alive) continue;
    total += ByteCount(ConcreteShape(t.shape, dims), DTypeBytes(t.dtype)).value_or(INT64_MAX / 2);
  }
  return total;
}

// small_shapes is what lets the pipeline fuzz target run most graphs on the
// CPU (it runs those of up to 256 KiB of tensors): nine in ten fit, against
// far fewer of the same seeds with the usual shapes.
TEST(RandomGraphOptions, SmallShapesKeepMostGraphsUnder256KiB) {
  constexpr int64_t kBudget = int64_t{256} << 10;
  RandomGraphOptions usual;
  usual.min_ops = 1;
  usual.max_ops = 60;
  RandomGraphOptions small = usual;
  small.small_shapes = true;
  int small_fit = 0, usual_fit = 0;
  constexpr int kSeeds = 200;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    small_fit += TensorBytesAtMin(ParseGraphJson(RandomGraphJson(seed, small), "s")) <= kBudget;
    usual_fit += TensorBytesAtMin(ParseGraphJson(RandomGraphJson(seed, usual), "u")) <= kBudget;
  }
  EXPECT_GE(small_fit, kSeeds * 9 / 10) << "usual shapes: " << usual_fit;
  EXPECT_LT(usual_fit, small_fit - kSeeds / 5) << "small_shapes changed little";
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomGraphs, testing::ValuesIn(AllChunks()),
                         [](const testing::TestParamInfo<Chunk>& info) { return info.param.name; });

}  // namespace
}  // namespace hfuse
