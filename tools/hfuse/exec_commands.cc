// hfuse run / verify. See exec_commands.h.
#include "exec_commands.h"

#include <fmt/format.h>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/exec/npz.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/runtime/pipelines.h"

namespace hfuse {

int RunGraphCommand(const std::string& path, const RunOptions& options) {
  const Graph graph = LoadGraph(path);
  const DimValues dims = BindDims(graph, options.dims);
  TensorMap feeds;
  if (options.inputs_npz.empty()) {
    feeds = RandomFeeds(graph, dims, options.seed);
  } else {
    std::map<std::string, DType> want;
    for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
      if (graph.tensor(id).alive) want[graph.tensor(id).name] = graph.tensor(id).dtype;
    }
    feeds = ReadNpz(options.inputs_npz, want);
  }
  const TensorMap outputs = RunOnCpu(graph, feeds, dims);
  for (TensorId id : graph.outputs()) {
    const HostTensor& t = outputs.at(graph.tensor(id).name);
    fmt::print("{}: {} [{}] sum={:.6g} hash={:016x}\n", graph.tensor(id).name, DTypeName(t.dtype),
               fmt::join(t.shape, ", "), Checksum(t), BytesHash(t));
  }
  if (!options.save_inputs.empty()) WriteNpz(options.save_inputs, feeds);
  if (!options.output_npz.empty()) WriteNpz(options.output_npz, outputs);
  return 0;
}

int VerifyGraphs(const Graph& original, const Graph& fused, uint64_t seed,
                 const std::map<std::string, int64_t>& dim_overrides) {
  const DimValues dims = BindDims(original, dim_overrides);
  const TensorMap feeds = RandomFeeds(original, dims, seed);
  const TensorMap want = RunOnCpu(original, feeds, dims);
  const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused, dim_overrides));
  bool pass = true;
  for (const OutputComparison& c : CompareOutputs(want, got)) {
    pass = pass && c.pass;
    if (!c.problem.empty()) {
      fmt::print("  {}: {} FAIL\n", c.name, c.problem);
      continue;
    }
    fmt::print("  {}: {} [{}] max_abs={:.3g} rel={:.3g} tol={:.0e}{} {}\n", c.name,
               DTypeName(c.dtype), fmt::join(c.shape, ", "), c.max_abs, c.normalized,
               Tolerance(c.dtype), c.bitwise_equal ? " bitwise-equal" : "",
               c.pass ? "PASS" : "FAIL");
  }
  fmt::print("verify: {}\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

int VerifyCommand(const std::string& path, const std::string& fused_path, bool group_gemm,
                  RuleSet rules, uint64_t seed, const std::map<std::string, int64_t>& dims) {
  const LoadedModel model = LoadModel(path);
  const Graph& original = model.graph;
  Graph fused = original;
  if (fused_path.empty()) {
    RunImportPipeline(fused, model.format);
    FuseGroupOpsOptions options;
    options.group_gemm = group_gemm;
    options.rules = rules;
    const FuseGroupOpsResult result = RunFusionPipeline(fused, Target::kCpu, options);
    fmt::print("{}: {} ops -> {} ops, {} groups ({} rules)\n", path, result.ops_before,
               result.ops_after, result.groups.size(), RuleSetName(rules));
  } else {
    fused = LoadGraph(fused_path);
  }
  return VerifyGraphs(original, fused, seed, dims);
}

}  // namespace hfuse
