// The pass registry, the named pipelines and the manager. See pass_manager.h.
#include "hfuse/passes/pass_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "hfuse/ir/printer.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/canonical_gemms.h"
#include "hfuse/passes/flatten_gemm.h"
#include "hfuse/passes/fold_batchnorm.h"
#include "hfuse/passes/fuse_group_gathers.h"
#include "hfuse/passes/strided_views.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

// The wrappers: each runs its pass and says what it did.

PassResult RunEinsumToGemmPass(PassState& state, const PassOptions&) {
  const int64_t n = EinsumToGemm(state.graph);
  return {n > 0, {{"Einsums rewritten", n}}};
}

PassResult RunEinsumToMatMulPass(PassState& state, const PassOptions&) {
  const int64_t n = EinsumToMatMul(state.graph);
  return {n > 0, {{"Einsums rewritten", n}}};
}

PassResult RunLeftMatMulToGemmPass(PassState& state, const PassOptions&) {
  const int64_t n = LeftMatMulToGemm(state.graph);
  return {n > 0, {{"MatMuls rewritten", n}}};
}

PassResult RunPointwiseConvToGemmPass(PassState& state, const PassOptions&) {
  const int64_t n = PointwiseConvToGemm(state.graph);
  return {n > 0, {{"Convs rewritten", n}}};
}

PassResult RunFoldBatchNormPass(PassState& state, const PassOptions&) {
  const int64_t folded = FoldBatchNorm(state.graph);
  return {folded > 0, {{"BatchNormalizations folded", folded}}};
}

PassResult RunFuseMmElementwisePass(PassState& state, const PassOptions& options) {
  const int64_t absorbed = FuseMmElementwise(state.graph, options.fuse_mm_elementwise);
  return {absorbed > 0, {{"ops absorbed", absorbed}}};
}

PassResult RunFlattenGemmInputsPass(PassState& state, const PassOptions& options) {
  // A named M groups only under the hfuse rules; under the seed's the model keeps its shape.
  FlattenGemmInputsOptions flatten;
  flatten.dynamic_m = options.fuse_group_ops.rules == RuleSet::kHfuse;
  const int64_t flattened = FlattenGemmInputs(state.graph, flatten);
  return {flattened > 0, {{"GEMMs flattened", flattened}}};
}

PassResult RunFuseGroupOpsPass(PassState& state, const PassOptions& options) {
  const int64_t ops_in = state.graph.NumLiveOps();
  FuseGroupOpsResult r = FuseGroupOps(state.graph, options.fuse_group_ops);
  int64_t members = 0;
  for (const FusedGroup& g : r.groups) members += static_cast<int64_t>(g.members.size());
  PassResult result;
  // The clean-up (dead ops, no-op splits and concatenates) changes a graph too.
  result.changed = !r.groups.empty() || r.ops_before != ops_in;
  result.stats = {{"ops before", r.ops_before},
                  {"ops after", r.ops_after},
                  {"groups", static_cast<int64_t>(r.groups.size())},
                  {"members grouped", members},
                  {"dropped by the cycle check", r.dropped_by_cycle_check}};
  state.op_order = std::move(r.op_order);  // the one copy: a million ids on large graphs
  state.fused = true;
  state.fuse_result = std::move(r);
  return result;
}

PassResult RunFuseGroupGathersPass(PassState& state, const PassOptions& options) {
  FuseGroupGathersOptions gathers;
  gathers.rules = options.fuse_group_ops.rules;
  gathers.reach = options.fuse_group_ops.reach;
  gathers.explain = options.fuse_group_ops.explain;
  gathers.want_dumps = options.fuse_group_ops.want_dumps;
  const int64_t ops_in = state.graph.NumLiveOps();
  FuseGroupGathersResult r = FuseGroupGathers(state.graph, gathers, state.op_order);
  if (gathers.rules != RuleSet::kHfuse) return {};
  int64_t members = 0;
  for (const FusedGroup& g : r.groups) members += static_cast<int64_t>(g.members.size());
  // Its groups and reasons join fuse-group-ops' (the report, explain, dot).
  FuseGroupOpsResult& f = state.fuse_result;
  if (!state.fused) {
    f.rules = gathers.rules;
    f.ops_before = ops_in;
    state.fused = true;
  }
  f.ops_after = state.graph.NumLiveOps();
  f.dropped_by_cycle_check += r.dropped_by_cycle_check;
  for (FusedGroup& g : r.groups) f.groups.push_back(std::move(g));
  for (auto& d : r.dumps) f.dumps.push_back(std::move(d));
  if (!r.ungrouped.empty()) {
    for (Reason& u : r.ungrouped) f.ungrouped.push_back(std::move(u));
    // All reasons in the final op order, as fuse-group-ops gives its own.
    const std::vector<OpId> order = state.op_order.empty() ? state.graph.LiveOps() : state.op_order;
    std::vector<int64_t> position(static_cast<size_t>(state.graph.num_op_ids()), 0);
    for (size_t i = 0; i < order.size(); ++i) position[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    std::stable_sort(f.ungrouped.begin(), f.ungrouped.end(), [&](const Reason& a, const Reason& b) {
      return position[static_cast<size_t>(a.id)] < position[static_cast<size_t>(b.id)];
    });
  }
  PassResult result;
  result.changed = !r.groups.empty();
  result.stats = {{"ops after", f.ops_after},
                  {"groups", static_cast<int64_t>(r.groups.size())},
                  {"members grouped", members},
                  {"dropped by the cycle check", r.dropped_by_cycle_check}};
  return result;
}

PassResult RunElideSplitConcatPass(PassState& state, const PassOptions&) {
  const int64_t elided = ElideSplitConcat(state.graph);
  return {elided > 0, {{"ops elided", elided}}};
}

}  // namespace

const std::vector<PassInfo>& RegisteredPasses() {
  static const std::vector<PassInfo> passes = {
#define HFUSE_PASS(Id, name, keeps_op_order, summary) {name, keeps_op_order, summary, &Run##Id##Pass},
#include "hfuse/passes/passes.def"
#undef HFUSE_PASS
  };
  return passes;
}

const PassInfo* FindPass(std::string_view name) {
  for (const PassInfo& p : RegisteredPasses()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const std::vector<NamedPipeline>& NamedPipelines() {
  static const std::vector<NamedPipeline> pipelines = {
      {"seed", {"fuse-group-ops"}, "AITemplate's pass: what `hfuse fuse` runs on graph JSON"},
      {"onnx-import",
       {"einsum-to-gemm", "einsum-to-matmul", "left-matmul-to-gemm", "pointwise-conv-to-gemm",
        "fold-batchnorm", "fuse-mm-elementwise", "flatten-gemm-inputs"},
       "what ONNX input goes through before seed"},
      {"hfuse", {"fuse-group-ops", "fuse-group-gathers"},
       "hfuse's own rules for the CPU: `hfuse fuse --rules hfuse`"},
      {"gpu", {"fuse-group-ops", "fuse-group-gathers", "elide-split-concat"},
       "what the CUDA backend runs"},
  };
  return pipelines;
}

std::vector<const PassInfo*> PipelineNamed(std::string_view name) {
  for (const NamedPipeline& p : NamedPipelines()) {
    if (p.name != name) continue;
    std::vector<const PassInfo*> passes;
    for (std::string_view pass : p.passes) {
      passes.push_back(FindPass(pass));
      HFUSE_CHECK(passes.back() != nullptr);
    }
    return passes;
  }
  HFUSE_CHECK(false && "no such pipeline");
  return {};
}

std::vector<const PassInfo*> ParsePassList(std::string_view spec) {
  std::vector<const PassInfo*> passes;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t end = spec.find(',', begin);
    if (end == std::string_view::npos) end = spec.size();
    const std::string_view name = spec.substr(begin, end - begin);
    begin = end + 1;
    if (name.empty()) continue;  // "a,,b" and a trailing comma
    if (const PassInfo* p = FindPass(name)) {
      passes.push_back(p);
      continue;
    }
    bool found = false;
    for (const NamedPipeline& pipeline : NamedPipelines()) {
      if (pipeline.name != name) continue;
      const std::vector<const PassInfo*> more = PipelineNamed(name);
      passes.insert(passes.end(), more.begin(), more.end());
      found = true;
    }
    if (!found) {
      ThrowInputError("--passes: unknown pass or pipeline '{}' (--list-passes lists them)", name);
    }
  }
  return passes;
}

std::string ListPassesText() {
  std::string text = "passes:\n";
  for (const PassInfo& p : RegisteredPasses()) {
    text += fmt::format("  {:<22} {}\n", p.name, p.summary);
  }
  text += "pipelines:\n";
  for (const NamedPipeline& p : NamedPipelines()) {
    text += fmt::format("  {:<22} {} ({})\n", p.name, fmt::join(p.passes, ","), p.summary);
  }
  return text;
}

PassManager::PassManager(std::vector<const PassInfo*> passes, PassManagerOptions options)
    : passes_(std::move(passes)), options_(std::move(options)) {}

void PassManager::Run(PassState& state, const PassOptions& pass_options) {
  for (const std::string* flag : {&options_.print_after, &options_.stop_after}) {
    if (flag->empty() || (flag == &options_.print_after && *flag == "all")) continue;
    if (!FindPass(*flag)) {
      ThrowInputError("--{}: unknown pass '{}' (--list-passes lists them)",
                      flag == &options_.print_after ? "print-after" : "stop-after", *flag);
    }
  }
  using Clock = std::chrono::steady_clock;
  for (const PassInfo* pass : passes_) {
    // A pass that may add or remove ops makes an earlier order stale,
    // unless it changed nothing (fuse-group-ops sets its own).
    std::vector<OpId> order;
    if (!pass->keeps_op_order) order = std::exchange(state.op_order, {});
    const auto start = Clock::now();
    PassResult result = pass->run(state, pass_options);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!pass->keeps_op_order && !result.changed && state.op_order.empty()) {
      state.op_order = std::move(order);
    }
    if (options_.verify_each) {
      try {
        VerifyInvariants(state.graph);
      } catch (const InternalError& e) {
        throw InternalError(fmt::format("after pass '{}': {}", pass->name, e.what()));
      }
    }
    if (options_.print_after == "all" || options_.print_after == pass->name) {
      fmt::print(options_.debug_out, "// after {}{}\n{}", pass->name,
                 result.changed ? "" : " (unchanged)", PrintGraph(state.graph, state.op_order));
    }
    records_.push_back({pass->name, std::move(result), seconds});
    if (options_.stop_after == pass->name) break;
  }
  if (options_.time_passes) {
    double total = 0;
    for (const PassRecord& r : records_) total += r.seconds;
    fmt::print(options_.debug_out, "pass timings:\n");
    for (const PassRecord& r : records_) {
      std::string stats;
      for (const auto& [name, value] : r.result.stats) {
        stats += fmt::format("{}{} {}", stats.empty() ? "" : ", ", value, name);
      }
      fmt::print(options_.debug_out, "  {:>9.3f} s  {:<22} {:<9} {}\n", r.seconds, r.name,
                 r.result.changed ? "changed" : "unchanged", stats);
    }
    fmt::print(options_.debug_out, "  {:>9.3f} s  total\n", total);
  }
}

}  // namespace hfuse
