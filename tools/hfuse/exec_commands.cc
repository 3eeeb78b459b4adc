// hfuse run / verify. See exec_commands.h.
#include "exec_commands.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/npz.h"
#include "hfuse/session/pipelines.h"
#include "hfuse/session/session.h"
#include "hfuse/support/error.h"
#include "pass_flags.h"

namespace hfuse {
namespace {

SessionOptions SessionOptionsFor(const std::string& device, const std::string& rules,
                                 const std::map<std::string, int64_t>& dims) {
  SessionOptions options;
  if (!ParseDevice(device, options.device)) {
    ThrowInputError("--device '{}': expected cpu or cuda", device);
  }
  if (!rules.empty()) {
    RuleSet r = RuleSet::kSeed;
    if (!ParseRuleSet(rules, r)) ThrowInputError("--rules '{}': expected seed or hfuse", rules);
    options.rules = r;
  }
  options.dims = dims;
  return options;
}

// The arrays of `all` that the session takes (its inputs, and params that
// override their values); the rest (other tensors of the graph) are not
// its business.
TensorMap FeedsOf(const Session& session, const TensorMap& all) {
  TensorMap feeds;
  for (const auto* list : {&session.inputs(), &session.overridable_inputs()}) {
    for (const TensorInfo& info : *list) {
      auto it = all.find(info.name);
      if (it != all.end()) feeds[info.name] = it->second;
    }
  }
  return feeds;
}

std::string Summary(const Session& s) {
  if (!s.options().fuse) return fmt::format("{} ops, unfused", s.graph().NumLiveOps());
  const FuseGroupOpsResult& r = s.fusion();
  return fmt::format("{} ops -> {} ops, {} group{} ({} rules)", r.ops_before, r.ops_after,
                     r.groups.size(), r.groups.size() == 1 ? "" : "s", RuleSetName(s.rules()));
}

// One line per output; true when every output passes. `tf32x3`: the run
// summed float32 products on the tensor cores (compare.h's tolerance).
bool PrintComparisons(const TensorMap& want, const TensorMap& got, bool tf32x3 = false) {
  bool pass = true;
  for (const OutputComparison& c : CompareOutputs(want, got, tf32x3)) {
    pass = pass && c.pass;
    if (!c.problem.empty()) {
      fmt::print("  {}: {} FAIL\n", c.name, c.problem);
      continue;
    }
    fmt::print("  {}: {} [{}] max_abs={:.3g} rel={:.3g} tol={:.0e}{} {}\n", c.name,
               DTypeName(c.dtype), fmt::join(c.shape, ", "), c.max_abs, c.normalized,
               Tolerance(c.dtype, tf32x3), c.bitwise_equal ? " bitwise-equal" : "",
               c.pass ? "PASS" : "FAIL");
  }
  fmt::print("verify: {}\n", pass ? "PASS" : "FAIL");
  return pass;
}

// A CUDA session's plan in one line, then each op it runs on the host and
// each launch that only moves data or runs elementwise ops alone, with why;
// true when some launch sums float32 products on the tensor cores (3xTF32).
bool PrintPlan(Session& session, const DimValues& dims) {
  if (session.options().device != Device::kCuda) return false;
  const Session::PlanSummary p = session.Plan(dims);
  fmt::print("cuda plan: {} launches, {} on the host; {} ops computed at plan time, {} views{}\n", p.launches,
             p.host_launches, p.folded_ops, p.view_ops,
             p.tf32x3_launches > 0 ? fmt::format("; {} sum float32 products on the tensor cores (3xTF32)",
                                                 p.tf32x3_launches)
                                   : "");
  for (const std::string& op : p.host_ops) fmt::print("  on the host: {}\n", op);
  for (const std::string& launch : p.apart) fmt::print("  apart: {}\n", launch);
  return p.tf32x3_launches > 0;
}

// Random feeds, with the arrays of `npz` (if any) in place of theirs.
TensorMap FeedsFor(const Graph& graph, const DimValues& dims, uint64_t seed, const std::string& npz) {
  TensorMap all = RandomFeeds(graph, dims, seed);
  if (npz.empty()) return all;
  std::map<std::string, DType> want;
  for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
    if (graph.tensor(id).alive) want[graph.tensor(id).name] = graph.tensor(id).dtype;
  }
  for (auto& [name, value] : ReadNpz(npz, want)) all[name] = std::move(value);
  return all;
}

// `run --profile` on the CPU: each op's median time over `reps` runs, the
// slowest first, with its bytes and FLOPs and the rates they make; then the
// run's memory: the largest live set (what must be held at once), what the
// executor held at most, and the process's peak resident set.
void PrintCpuProfile(Session& session, const TensorMap& feeds, int reps) {
  std::vector<std::vector<CpuOpProfile>> runs(static_cast<size_t>(std::max(reps, 1)));
  CpuMemory memory;
  std::vector<double> totals;
  for (auto& run : runs) {
    session.SetCpuProfile(&run, &memory);
    const auto start = std::chrono::steady_clock::now();
    session.Run(feeds);
    totals.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  session.SetCpuProfile(nullptr, nullptr);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  struct Row {
    const CpuOpProfile* op;
    double us;
  };
  std::vector<Row> rows;
  double sum = 0;
  for (size_t i = 0; i < runs[0].size(); ++i) {
    std::vector<double> us;
    for (const auto& run : runs) us.push_back(run[i].us);
    rows.push_back({&runs[0][i], median(us)});
    sum += rows.back().us;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us > b.us; });
  fmt::print("cpu profile: {} ops, {} threads, median of {} runs: {:.3f} ms a run ({:.3f} ms in ops)\n",
             rows.size(), session.CpuThreads(), runs.size(), median(totals), sum / 1000);
  fmt::print("  {:>10} {:>6} {:>10} {:>9} {:>8} {:>8}  {:<28} {}\n", "us", "%", "bytes", "FLOPs", "GB/s",
             "GFLOP/s", "kind", "op");
  for (const Row& r : rows) {
    const CpuOpProfile& p = *r.op;
    const double s = r.us * 1e-6;
    fmt::print("  {:>10.1f} {:>6.1f} {:>10} {:>9.3g} {:>8.2f} {:>8.2f}  {:<28} {}\n", r.us,
               sum > 0 ? 100 * r.us / sum : 0.0, p.bytes, static_cast<double>(p.flops),
               s > 0 ? static_cast<double>(p.bytes) / s * 1e-9 : 0.0,
               s > 0 ? static_cast<double>(p.flops) / s * 1e-9 : 0.0, p.kind, p.op);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double mib = 1.0 / (1 << 20);
  fmt::print("cpu memory: largest live set {:.1f} MiB, executor peak {:.1f} MiB (+ inputs and params), "
             "peak resident {:.1f} MiB ({:.2f}x the live set)\n",
             static_cast<double>(memory.largest_live_bytes) * mib, static_cast<double>(memory.peak_bytes) * mib,
             static_cast<double>(usage.ru_maxrss) / 1024.0,
             memory.largest_live_bytes > 0
                 ? static_cast<double>(usage.ru_maxrss) * 1024.0 / static_cast<double>(memory.largest_live_bytes)
                 : 0.0);
}

uint8_t CpuGroupMode(const std::string& name) {
  if (name == "auto") return 0;
  if (name == "side") return 1;
  if (name == "serial") return 2;
  ThrowInputError("--cpu-groups '{}': expected auto, side or serial", name);
}

}  // namespace

namespace {

// Runs `body`, with the model's path before any message of bad input that
// does not name it already, like the other commands' messages; a missing
// device is the machine's, not the model's, and says so alike for every
// command (bench too).
template <typename F>
int ForModel(const std::string& path, F&& body) {
  try {
    return body();
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.starts_with(path + ":") || what.starts_with("--device ")) throw;
    ThrowInputError("{}: {}", path, what);
  }
}

}  // namespace

int RunGraphCommand(const std::string& path, const RunOptions& options) {
  return ForModel(path, [&] {
    SessionOptions session_options =
        SessionOptionsFor(options.device, options.rules, options.dims);
    session_options.fuse = options.fuse;
    session_options.cuda_graph = options.cuda_graph;
    session_options.threads = options.threads;
    session_options.cpu_group_mode = CpuGroupMode(options.cpu_groups);
    session_options.cpu_poison_buffers = options.poison_buffers;
    if (options.profile && session_options.device != Device::kCpu) {
      ThrowInputError("--profile: on the CPU only (hfuse bench --profile times CUDA launches)");
    }
    Session session = Session::FromFile(path, session_options);
    const Graph& graph = session.graph();
    const DimValues dims = BindDims(graph, options.dims);
    TensorMap all;
    if (options.inputs_npz.empty()) {
      all = RandomFeeds(graph, dims, options.seed);
    } else {
      std::map<std::string, DType> want;
      for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
        if (graph.tensor(id).alive) want[graph.tensor(id).name] = graph.tensor(id).dtype;
      }
      all = ReadNpz(options.inputs_npz, want);
    }
    // The feeds moved out of `all` unless --save-inputs still needs them:
    // resident memory is what `run --profile` reports.
    // Random feeds leave the params that carry values (ONNX initializers)
    // to the session, which keeps them from run to run as a server's
    // session does (and packs its GEMM weights once); an .npz feeds
    // whatever it holds, overriding them.
    if (options.inputs_npz.empty()) {
      for (const TensorInfo& info : session.overridable_inputs()) all.erase(info.name);
    }
    TensorMap feeds;
    if (options.save_inputs.empty()) {
      for (const auto* list : {&session.inputs(), &session.overridable_inputs()}) {
        for (const TensorInfo& info : *list) {
          if (auto node = all.extract(info.name)) feeds.insert(std::move(node));
        }
      }
      all.clear();
    } else {
      feeds = FeedsOf(session, all);
    }
    {  // the outputs go before --profile runs again
      const TensorMap outputs = session.Run(feeds);
      // Files first: a write that fails leaves nothing that looks like a result.
      if (!options.save_inputs.empty()) {
        // The model's inputs by their names, what --inputs (and onnxruntime)
        // take; params keep the values the model holds.
        TensorMap inputs;
        for (const TensorInfo& info : session.inputs()) {
          if (auto it = all.find(info.name); it != all.end()) inputs[info.name] = it->second;
        }
        WriteNpz(options.save_inputs, inputs);
      }
      if (!options.output_npz.empty()) WriteNpz(options.output_npz, outputs);
      fmt::print("{}: {}: {}\n", path, DeviceName(session_options.device), Summary(session));
      PrintPlan(session, dims);
      for (TensorId id : graph.outputs()) {
        const HostTensor& t = outputs.at(graph.tensor(id).name);
        fmt::print("{}: {} [{}] sum={:.6g} hash={:016x}\n", graph.tensor(id).name,
                   DTypeName(t.dtype), fmt::join(t.shape, ", "), Checksum(t), BytesHash(t));
      }
    }
    if (options.profile) PrintCpuProfile(session, feeds, options.profile_reps);
    return 0;
  });
}

int VerifyGraphs(const Graph& original, const Graph& fused, uint64_t seed,
                 const std::map<std::string, int64_t>& dim_overrides) {
  const DimValues dims = BindDims(original, dim_overrides);
  const TensorMap feeds = RandomFeeds(original, dims, seed);
  const TensorMap want = RunOnCpuReference(original, feeds, dims);
  const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused, dim_overrides));
  return PrintComparisons(want, got) ? 0 : 1;
}

int VerifyCommand(const std::string& path, const VerifyOptions& options) {
  return ForModel(path, [&] {
    SessionOptions session_options =
        SessionOptionsFor(options.device, options.rules, options.dims);
    session_options.group_gemm = options.group_gemm;
    session_options.passes = options.flags.passes;
    session_options.pass_manager = options.flags.manager;
    const Graph original = LoadGraph(path, "", options.dims);
    const std::string& model = options.fused_path.empty() ? path : options.fused_path;
    session_options.fuse = options.fused_path.empty();
    Session session = Session::FromFile(model, session_options);
    const DimValues dims = BindDims(original, options.dims);
    const TensorMap feeds = FeedsFor(original, dims, options.seed, options.inputs_npz);
    const TensorMap want = RunOnCpuReference(original, feeds, dims);
    const TensorMap got = session.Run(FeedsOf(session, feeds));
    // Printed once both have run: a failure on the way prints nothing.
    fmt::print("{}: {} on {}, against the CPU reference of {}\n", model, Summary(session),
               DeviceName(session_options.device), path);
    const bool tf32x3 = PrintPlan(session, BindDims(session.graph(), options.dims));
    return PrintComparisons(want, got, tf32x3) ? 0 : 1;
  });
}

}  // namespace hfuse
