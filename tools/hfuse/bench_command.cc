// hfuse bench: times a graph (graph JSON or ONNX) on the GPU, unfused and fused (with the seed's
// grouping rules and with hfuse's GPU rules), each as plain launches and as
// a CUDA graph, against the floor of the graph as run.
#include "bench_command.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "hfuse/cuda/cuda_executor.h"
#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/npz.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/session/pipelines.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

constexpr double kPeakFlops = 790e12;    // dense fp16/bf16, measured on this H200 model
constexpr double kPeakBytes = 4.3e12;    // device-to-device copy, read + write
constexpr int kTimingRounds = 10;        // turns each variant's timed runs are split into

struct Floor {
  double flops = 0;
  double bytes = 0;
  double micros() const { return std::max(flops / kPeakFlops, bytes / kPeakBytes) * 1e6; }
};

// FLOPs of the GEMMs, and for each op that runs its inputs read once and its
// outputs written once (a view counts its own slice).
Floor FloorOf(const Graph& g, const DimValues& dims) {
  Floor f;
  auto bytes = [&](TensorId t) {
    double n = DTypeBytes(g.tensor(t).dtype);
    for (int64_t d : ConcreteShape(g.tensor(t).shape, dims)) n *= static_cast<double>(d);
    return n;
  };
  for (OpId id : g.LiveOps()) {
    const Op& op = g.op(id);
    if (op.elided) continue;
    std::vector<TensorId> ins = op.inputs;
    std::sort(ins.begin(), ins.end());
    ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
    for (TensorId t : ins) f.bytes += bytes(t);
    for (TensorId t : op.outputs) f.bytes += bytes(t);
    if (IsGemm(op.type) || IsGroupGemm(op.type)) {
      for (size_t m = 0; m < NumMembers(op); ++m) {
        const GemmMember member = GemmMemberOf(op, m);
        const std::vector<int64_t> a = ConcreteShape(g.tensor(member.a).shape, dims);
        const std::vector<int64_t> y = ConcreteShape(g.tensor(member.y).shape, dims);
        double rows = 1;
        for (size_t i = 0; i + 1 < a.size(); ++i) rows *= static_cast<double>(a[i]);
        f.flops += 2.0 * rows * static_cast<double>(a.back()) * static_cast<double>(y.back());
      }
    }
  }
  return f;
}

// Launches counted by kind, most first (then by name): the kind is what a
// label's last parenthesis, which closes it, says, up to a comma, a
// semicolon or an inner parenthesis ("node_cat (concatenate kernel, 13
// parts; not in place: ...)": "concatenate kernel"; "node_linear (GEMV
// kernel (N = 1))": "GEMV kernel"; "group_gemm_rcr_3 + 4 activations
// (node_tanh_8 to node_tanh_14) (grouped float32 GEMM, 8 members)":
// "grouped float32 GEMM").
std::vector<std::pair<std::string, int>> LaunchKinds(const std::vector<std::string>& labels) {
  std::map<std::string, int> count;
  for (const std::string& l : labels) {
    // the '(' that the label's last ')' closes
    size_t open = std::string::npos;
    if (!l.empty() && l.back() == ')') {
      int depth = 0;
      for (size_t i = l.size(); i-- > 0;) {
        depth += l[i] == ')' ? 1 : l[i] == '(' ? -1 : 0;
        if (depth == 0) {
          open = i;
          break;
        }
      }
    }
    std::string kind = open == std::string::npos ? l : l.substr(open + 1);
    kind = kind.substr(0, std::min({kind.find(','), kind.find(';'), kind.find(" ("), kind.find(')')}));
    ++count[kind];
  }
  std::vector<std::pair<std::string, int>> out(count.begin(), count.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace

int BenchCommand(const std::string& path, const BenchOptions& options) {
  if (options.device != "cuda") ThrowInputError("--device {}: only cuda is supported", options.device);
  std::string why;
  if (!CudaDeviceAvailable(&why)) ThrowInputError("--device cuda: no usable CUDA device: {}", why);
  const LoadedModel model = LoadModel(path, "", options.dims);  // graph JSON or ONNX
  // "unfused" is the model as the runtime sees it before fusion: for ONNX,
  // after the import canonicalisations (einsum-to-matmul and the like), so
  // that the CPU reference and the unfused variant run no Einsum by loops.
  Graph original = model.graph;
  if (model.format == ModelFormat::kOnnx) {
    PassState canonical(original);
    PassManager(PipelineNamed("onnx-import"), {}).Run(canonical, PassOptions{});
  }
  const DimValues dims = BindDims(original, options.dims);
  TensorMap feeds = RandomFeeds(original, dims, options.seed);
  if (!options.inputs_npz.empty()) {
    std::map<std::string, DType> want;
    for (TensorId id = 0; id < original.num_tensor_ids(); ++id) {
      if (original.tensor(id).alive) want[original.tensor(id).name] = original.tensor(id).dtype;
    }
    for (auto& [name, value] : ReadNpz(options.inputs_npz, want)) feeds[name] = std::move(value);
  }
  TensorMap reference;
  if (options.check) reference = RunOnCpu(original, feeds, dims);

  struct Variant {
    std::string name;
    Graph graph;
    CudaOptions cuda;
    bool profiled = true;  // with --profile, each launch timed alone
  };
  std::vector<Variant> variants;
  variants.push_back({"unfused", original, {}});
  nlohmann::ordered_json report;
  report["graph"] = path;
  std::string summary;
  for (RuleSet rules : {RuleSet::kSeed, RuleSet::kHfuse}) {
    if (options.rules != "both" && options.rules != RuleSetName(rules)) continue;
    Graph fused = original;
    PassOptions pass_options;
    pass_options.fuse_group_ops.rules = rules;
    const PassState state = RunPasses(fused, options.passes,
                                       DevicePipeline(model.format, Target::kGpu), pass_options);
    FuseGroupOpsResult result = state.fuse_result;
    if (!state.fused) result.ops_before = result.ops_after = fused.NumLiveOps();
    const std::string name = fmt::format("fused, {} rules", RuleSetName(rules));
    report["groups"][RuleSetName(rules)] = result.groups.size();
    summary += fmt::format("{}{} ops -> {} ops ({} groups, {} rules)", summary.empty() ? "" : "; ",
                           result.ops_before, result.ops_after, result.groups.size(),
                           RuleSetName(rules));
    variants.push_back({name, fused, {}});
    if (rules == RuleSet::kHfuse) {  // what the launch-level fusions buy
      variants.push_back(
          {name + ", a launch an op", fused,
           {.gather_batches = false,
            .elementwise_chains = false,
            .region_batches = false,
            .gemm_activations = false,
            .gemm_residuals = false},
           false});
    }
    if (options.grouped_too) {
      variants.push_back({name + ", grouped GEMM only", fused, {.strided_batched = false}});
    }
    if (options.gemm_paths && rules == RuleSet::kHfuse) {
      variants.push_back({name + ", cuBLAS grouped", fused, {.strided_batched = false, .cutlass = false}});
      variants.push_back({name + ", CUTLASS 128x128", fused,
                          {.strided_batched = false, .gemm_kernel = GemmKernelChoice::k128x128}});
      variants.push_back({name + ", CUTLASS 128x64", fused,
                          {.strided_batched = false, .gemm_kernel = GemmKernelChoice::k128x64}});
      variants.push_back({name + ", grouped float32 kernel", fused, {.gemm_kernel = GemmKernelChoice::kGroupedSgemm}});
      variants.push_back({name + ", float32 rule, the kernel before its tiles", fused, {.sgemm_config = 0}});
      for (int split : {1, 2, 4}) {
        variants.push_back({fmt::format("{}, float32 tiled rule, split-K {}", name, split), fused,
                            {.sgemm_tiled = true, .sgemm_split = split}});
      }
      variants.push_back({name + ", float32 members reading one A apart", fused, {.sgemm_merge = false}});
      variants.push_back({name + ", float32 deep groups on the CUDA cores", fused,
                          {.sgemm_staged = false, .sgemm_tensor = false}});
      variants.push_back({name + ", float32 deep groups on the CUDA cores, sliced", fused, {.sgemm_tensor = false}});
      variants.push_back({name + ", float32 deep groups 3xTF32, not sliced", fused, {.sgemm_staged = false}});
      variants.push_back({name + ", float32 3xTF32 tiles splitting W themselves", fused, {.sgemm_parts_w = false}});
      variants.push_back({name + ", float32 short members beside deep ones on the CUDA cores", fused,
                          {.sgemm_tensor_short = false}});
      variants.push_back({name + ", float32 3xTF32 tiles, no split-K", fused, {.sgemm_tensor_split = 1}});
      for (int split : {2, 3, 4}) {  // (not sliced: all-deep groups of few tiles would take slices instead)
        variants.push_back({fmt::format("{}, float32 3xTF32 tiles of few, not sliced, split-K {}", name, split), fused,
                            {.sgemm_staged = false, .sgemm_tensor_split = split}});
      }
      variants.push_back({name + ", float32 3xTF32 as before W's parts (none of these four)", fused,
                          {.sgemm_staged = false, .sgemm_parts_w = false, .sgemm_tensor_short = false,
                           .sgemm_tensor_split = 1}});
      variants.push_back({name + ", cuBLASLt a member", fused, {.gemm_kernel = GemmKernelChoice::kPerMember}});
      variants.push_back({name + ", activations apart from their GEMMs", fused, {.gemm_activations = false}});
      variants.push_back({name + ", residual Adds apart from their GEMMs", fused, {.gemm_residuals = false}});
      variants.push_back({name + ", group operands where the planner puts them", fused, {.group_operands_together = false}});
      variants.push_back({name + ", one-column sigmoid GEMMs on the grouped float32 kernel", fused,
                          {.gemv_activations = false}});
      variants.push_back({name + ", single float32 GEMMs on the grouped float32 kernel", fused, {.single_sgemm = true}});
      variants.push_back({name + ", GEMMs apart from the regions reading them", fused, {.region_gemms = 0}});
      variants.push_back({name + ", GEMMs in every region reading them", fused, {.region_gemms = 1}});
      variants.push_back({name + ", 3xTF32 nowhere", fused, {.tf32x3 = 0}});
      variants.push_back({name + ", a launch a region", fused, {.region_batches = false}});
      variants.push_back({name + ", FFN blocks apart", fused, {.ffn_chains = 0}});
      variants.push_back({name + ", FFN blocks in one kernel wherever they can be", fused, {.ffn_chains = 1}});
      variants.push_back({name + ", 3xTF32 wherever it can run", fused, {.tf32x3 = 1}});
      variants.push_back({name + ", 3xTF32 by the rule, single GEMMs only", fused, {.tf32x3_batched = false}});
    }
  }
  fmt::print("{}: {}; median of {} runs after {} warm-up, the variants timed in {} turns each\n", path, summary,
             options.reps, options.warmup, std::max(1, std::min(options.reps, kTimingRounds)));
  fmt::print("  {:<44} {:>9} {:>11} {:>9} {:>8} {:>10} {:>5} {:>9}\n", "variant", "plain us", "cudagraph us",
             "floor us", "x floor", "launches", "host", "max err");
  // Every variant planned (and checked) first, then timed in turns: a
  // round of each in a rotating order, until each has its runs. Timed one
  // after another, the second of two identical graphs measured 4-5%
  // slower (bench/RESULTS.md, 2026-12-04), which hid or faked the gaps
  // between unfused and fused.
  std::vector<std::unique_ptr<CudaExecutor>> gpus;
  std::vector<DimValues> vdims;
  std::vector<double> errs;
  for (Variant& v : variants) {
    // A pass can add dims (flatten-gemm-inputs' batch*S): each graph binds its own.
    vdims.push_back(BindDims(v.graph, options.dims));
    gpus.push_back(std::make_unique<CudaExecutor>(v.graph, vdims.back(), v.cuda));
    CudaExecutor& gpu = *gpus.back();
    gpu.SetFeeds(feeds);
    double err = 0;
    if (options.check) {
      gpu.Poison();
      gpu.Run();
      for (const OutputComparison& c : CompareOutputs(reference, gpu.Outputs())) {
        if (!c.problem.empty()) ThrowInputError("output {}: {}", c.name, c.problem);
        err = std::max(err, c.normalized);
      }
    }
    errs.push_back(err);
  }
  const size_t n = variants.size();
  const int rounds = std::max(1, std::min(options.reps, kTimingRounds));
  std::vector<std::vector<float>> plain_runs(n), graph_runs(n);
  for (bool use_graph : {false, true}) {
    for (auto& gpu : gpus) gpu->MedianMicros(options.warmup, 1, use_graph);
    for (int r = 0; r < rounds; ++r) {
      const int reps = options.reps / rounds + (r < options.reps % rounds ? 1 : 0);
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (k + static_cast<size_t>(r)) % n;
        const std::vector<float> t = gpus[i]->TimedRuns(reps, use_graph);
        auto& into = use_graph ? graph_runs[i] : plain_runs[i];
        into.insert(into.end(), t.begin(), t.end());
      }
    }
  }
  const auto median = [](std::vector<float> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return static_cast<double>(v[v.size() / 2]);
  };
  for (size_t i = 0; i < n; ++i) {
    const Variant& v = variants[i];
    CudaExecutor& gpu = *gpus[i];
    const double plain = median(plain_runs[i]), graph = median(graph_runs[i]), err = errs[i];
    const Floor floor = FloorOf(v.graph, vdims[i]);
    const CudaRunStats& stats = gpu.stats();
    fmt::print("  {:<44} {:>9.1f} {:>11.1f} {:>9.1f} {:>8.2f} {:>10} {:>5} {:>9.2g}\n", v.name, plain, graph,
               floor.micros(), graph / floor.micros(), stats.launches, stats.host_launches, err);
    for (const std::string& op : stats.host_ops) fmt::print("    on the host: {}\n", op);
    const std::vector<std::pair<std::string, int>> kinds = LaunchKinds(gpu.LaunchLabels());
    std::string by_kind;
    for (const auto& [kind, count] : kinds) by_kind += fmt::format("{}{} {}", by_kind.empty() ? "" : ", ", count, kind);
    fmt::print("    launches by kind: {}\n", by_kind);
    // The launches that only move data or run elementwise ops alone, each with why.
    for (const std::string& launch : stats.apart) fmt::print("    apart: {}\n", launch);
    report["variants"].push_back({{"name", v.name}, {"plain_us", plain}, {"cudagraph_us", graph},
                                  {"floor_us", floor.micros()}, {"flops", floor.flops},
                                  {"bytes", floor.bytes}, {"launches", stats.launches},
                                  {"host_launches", stats.host_launches}, {"host_ops", stats.host_ops}, {"apart", stats.apart},
                                  {"folded_ops", stats.folded_ops}, {"view_ops", stats.view_ops},
                                  {"arena_bytes", stats.arena_bytes}, {"launch_kinds", kinds}, {"max_err", err}});
    if (options.profile && v.name != "unfused" && v.profiled) {
      fmt::print("    profile ({}): each launch alone, median of 50; GB/s = its op's bytes "
                 "(inputs once, outputs once) / time\n", v.name);
      const auto launches = gpu.ProfileLaunches(50);
      for (size_t l = 0; l < launches.size(); ++l) {
        const auto& [label, us] = launches[l];
        const double bytes = gpu.LaunchOpBytes()[l];
        fmt::print("      {:>9.1f} us {:>8.0f} GB/s  {}\n", us, bytes / (us * 1e3), label);
        report["profile"][v.name].push_back({{"launch", label}, {"us", us}, {"op_bytes", bytes}});
      }
    }
  }
  if (!options.json.empty()) WriteFileAtomic(options.json, report.dump(1) + "\n");
  return 0;
}

}  // namespace hfuse
