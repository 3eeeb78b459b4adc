// An inference session: a model loaded, fused for its device and ready to
// run, for programs that embed hfuse (a C++ server, the Python module).
//
//   hfuse::SessionOptions options;
//   options.device = hfuse::Device::kCuda;        // or kCpu (the default)
//   options.dims = {{"batch", 512}};              // bound: static before fusion
//   hfuse::Session session = hfuse::Session::FromFile("model.onnx", options);
//   hfuse::TensorMap out = session.Run({{"x", x}});   // host tensors in and out
//
// Creation reads the model (graph JSON or ONNX), runs the pass pipeline for
// the device (session/pipelines.h: onnx-import for ONNX, then seed on the
// CPU or gpu on CUDA) with the hfuse grouping rules on either device unless
// `rules` says otherwise (kSessionRules below), and keeps the fused graph.
// A bound dim becomes a static size before fusion; a dim left unbound takes
// its size from each run's feeds. The hfuse rules group GEMMs whose rows are
// the same named dim, so a model exported with a dynamic batch forms the
// groups of its fixed-batch export without binding anything (the seed's
// rules group GEMMs at static shapes only: with them, bind the batch). On
// CUDA the session plans (memory plan, launches, params uploaded) once per
// set of dim values it meets and keeps the plan; with `cuda_graph` on, each
// plan is captured into a CUDA graph on its first run and replayed after.
//
// Feeds are checked before anything runs: a feed that names no input, a
// dtype or shape that does not fit (static dims exact, dynamic dims within
// their range and equal wherever the dim recurs), a missing input, or an
// output name that is not an output throws InputError with one line naming
// the tensor (the CLI prints it and exits with status 2). A model the device
// cannot run (an op without a CUDA kernel) throws at creation.
//
// Threads: a session is thread-compatible, not thread-safe. Const methods
// (metadata) may be called from any number of threads; Run and the device
// calls change the session's plans and buffers, so one thread at a time
// calls them (one session per stream: make a session per thread or stream
// that runs concurrently; sessions share nothing but the process-wide
// cuBLAS handles).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/pass_manager.h"
#include "hfuse/runtime/bound_dims.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/runtime/host_tensor.h"
#include "hfuse/session/model_files.h"

namespace hfuse {

enum class Device : uint8_t { kCpu, kCuda };
const char* DeviceName(Device device);
// "cpu" or "cuda"; false for anything else.
bool ParseDevice(std::string_view name, Device& device);
// True when this build has the CUDA backend and a device is usable; `why`
// says why not otherwise.
bool CudaAvailable(std::string* why = nullptr);

// The grouping rules a session runs when SessionOptions::rules is unset, on
// either device: hfuse's. On the CPU they give the same bytes as the seed's
// (a group op runs each member with the ungrouped op's kernel) and, unlike
// the seed's, group the GEMMs of a dynamic batch, which is how serving
// models are exported. `hfuse fuse` (the offline pass) keeps the seed's.
inline constexpr RuleSet kSessionRules = RuleSet::kHfuse;

struct SessionOptions {
  Device device = Device::kCpu;
  // Grouping rules; unset: kSessionRules.
  std::optional<RuleSet> rules;
  bool fuse = true;        // false: run the model as imported (no fusion)
  bool group_gemm = true;  // the seed's fuse_group_gemm option
  // Dims bound to a value (name -> value, within the dim's range): static
  // before fusion. The others take their size from the feeds.
  std::map<std::string, int64_t> dims;
  bool cuda_graph = true;  // CUDA: replay each plan from a CUDA graph
  // CPU: the fast kernels' threads (0: OMP_NUM_THREADS, or the cores), how
  // group ops run (exec/cpu_executor.h: 0 the rule, 1 side by side, 2 one
  // by one), and where a profiled run puts each op's time (null: none).
  int threads = 0;
  uint8_t cpu_group_mode = 0;
  // CPU, tests: every buffer a run allocates is filled with 0xFF bytes
  // first (CpuBufferPool::set_poison), so that a kernel that leaves part of
  // its output unwritten shows in the outputs.
  bool cpu_poison_buffers = false;
  std::vector<CpuOpProfile>* cpu_profile = nullptr;
  CpuMemory* cpu_memory = nullptr;
  std::string format;      // "", "json" or "onnx" (FromFile: "" is by extension)
  // Values for params (graph JSON carries none): each becomes the param's
  // own value, as an ONNX initializer is, so that runs need not feed it.
  // Its dtype and shape must be the param's (a static shape).
  TensorMap params;
  // The passes, as `--passes` spells them ("" : the device's pipeline,
  // session/pipelines.h), and the pass manager's debug options.
  std::string passes;
  PassManagerOptions pass_manager;
};

// An input or output of the model, as onnxruntime's NodeArg describes it.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;          // -1 where the dim is dynamic
  std::vector<std::string> dim_names;  // the dynamic dims' names; "" where static
};

// A dense, row-major tensor in device memory that the caller owns (or that
// the session owns, for outputs: see RunDevice).
struct DeviceTensor {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};
using DeviceTensorMap = std::map<std::string, DeviceTensor>;

class Session {
 public:
  static Session FromFile(const std::string& path, SessionOptions options = {});
  // `bytes` is a graph JSON text or a serialized ONNX model (format from
  // options.format, which must be "json" or "onnx" here); `source` names it
  // in error messages.
  static Session FromBytes(std::string_view bytes, SessionOptions options,
                           const std::string& source = "<bytes>");

  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // The tensors a run needs: the graph's inputs, then the params that came
  // without values (graph JSON has no place for weights, so they are fed),
  // in graph order. Params that came with values (ONNX initializers) may be
  // fed too, to override them, and are listed by overridable_inputs().
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& overridable_inputs() const;
  const std::vector<TensorInfo>& outputs() const;

  const SessionOptions& options() const;
  RuleSet rules() const;  // the grouping rules that ran
  // What fusion did (empty groups when options.fuse was false).
  const FuseGroupOpsResult& fusion() const;
  const Graph& graph() const;  // the graph as run (fused)
  const Graph& original() const;  // the graph as imported, before any pass
  ModelFormat format() const;
  // The model's file contents with the fused graph (session/model_files.h's
  // SerializeModel: ONNX with ai.hfuse group ops, or graph JSON).
  std::string FusedModelBytes() const;

  // CPU: the next runs record each op's time and the run's memory here
  // (null: stop); and the fast kernels' thread count.
  void SetCpuProfile(std::vector<CpuOpProfile>* profile, CpuMemory* memory);
  int CpuThreads() const;
  // Runs on host tensors; returns the named outputs (empty: all of them).
  TensorMap Run(const TensorMap& feeds, const std::vector<std::string>& output_names = {});

  // The dim values a run on these feed shapes binds (checks the feeds).
  DimValues DimsFor(const std::map<std::string, std::vector<int64_t>>& shapes,
                    const std::map<std::string, DType>& dtypes) const;

  // ---- CUDA only (InputError on a CPU session) -------------------------------
  // Runs on device tensors, with no copy through the host, and returns once
  // the run has finished. An input whose pointer is the session's own buffer
  // for it (InputBuffers) is not copied; any other is copied device to
  // device into it (the plan's launches read the session's buffers, whose
  // addresses they were planned with).
  //
  // The stream: with `stream` (a cudaStream_t), every copy and launch of the
  // run is enqueued on it, in order after the work already there (the feeds'
  // producer, typically); with null, the run goes on the session's own
  // stream, after the work on the legacy default stream (an event, waited
  // for on the device). Either way the call waits for the run to end, so any
  // stream may read the outputs once it returns.
  //
  // Returns views of the session's output buffers, valid until the next run
  // of this shape, except for the outputs named in `into`: those are copied
  // (device to device, on the run's stream) into the caller's buffers given
  // there (the output's dtype and this run's shape), which are returned.
  DeviceTensorMap RunDevice(const DeviceTensorMap& feeds, void* stream = nullptr);
  DeviceTensorMap RunDevice(const DeviceTensorMap& feeds, void* stream, const DeviceTensorMap& into);
  // The session's device buffers of the inputs and outputs for these feed
  // shapes (plans them if needed): fill the inputs in place and RunDevice
  // on them to run with no copies at all. A param's buffer filled in place
  // takes effect in a run whose feeds name it (what the plan made of its
  // value, such as a weight's 3xTF32 parts, is made again then).
  DeviceTensorMap InputBuffers(const std::map<std::string, std::vector<int64_t>>& shapes);
  // Plans a run whose input buffers are the caller's device memory in
  // `feeds` (every graph input, each pointer 256-byte aligned, as CUDA
  // allocators give), so that RunDevice on exactly these pointers and shapes
  // reads them in place and copies no input: what a binding that feeds the
  // same tensors at every run wants. The plan holds its own params and
  // intermediates, so one is kept at a time (the last bound); RunDevice on
  // other pointers takes the ordinary plans. Returns false, planning
  // nothing, when a pointer is not aligned or a feed is not a graph input
  // (a param); feeds are checked as RunDevice checks them.
  bool BindInputs(const DeviceTensorMap& feeds);
  // The bytes the last RunDevice copied device to device (feeds not in the
  // session's own buffers, and outputs into the caller's): 0 for a run on
  // InputBuffers with no outputs bound.
  int64_t LastDeviceCopyBytes() const;
  // A device tensor's bytes copied to the host (e.g. an output RunDevice returned).
  HostTensor CopyToHost(const DeviceTensor& t) const;
  // The CUDA device the session's plans live on (the current device when it
  // was created); -1 on a CPU session.
  int DeviceId() const;

  // How many plans (one per set of dim values) the session holds.
  size_t NumPlans() const;

  // What the plan of these dim values runs (it is made if need be): its
  // launches, the ops computed once at plan time, those that are views, and
  // each op that runs on the host, named with why ("name (ONNX Op): why").
  struct PlanSummary {
    int64_t launches = 0, host_launches = 0, folded_ops = 0, view_ops = 0;
    int64_t tf32x3_launches = 0;  // CudaRunStats::tf32x3_launches
    std::vector<std::string> host_ops;
    std::vector<std::string> apart;  // CudaRunStats::apart
  };
  PlanSummary Plan(const DimValues& dims);

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hfuse
