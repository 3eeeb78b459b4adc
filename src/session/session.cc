// The inference session. See session.h.
//
// The CUDA half (plans per dim values, uploads, device runs) is compiled only
// with the CUDA backend (HFUSE_HAVE_CUDA); without it a CUDA session is an
// input error at creation, with the reason.
#include "hfuse/session/session.h"

#include <fmt/format.h>

#include <algorithm>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/session/pipelines.h"
#include "hfuse/support/error.h"

#if HFUSE_HAVE_CUDA
#include <cuda_runtime.h>

#include "hfuse/cuda/cuda_executor.h"
#endif

namespace hfuse {

const char* DeviceName(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

bool ParseDevice(std::string_view name, Device& device) {
  if (name == "cpu") {
    device = Device::kCpu;
  } else if (name == "cuda") {
    device = Device::kCuda;
  } else {
    return false;
  }
  return true;
}

bool CudaAvailable(std::string* why) {
#if HFUSE_HAVE_CUDA
  return CudaDeviceAvailable(why);
#else
  if (why) *why = "this hfuse was built without the CUDA backend";
  return false;
#endif
}

namespace {

// Bound dims become static sizes in every tensor's shape. The dims stay in
// the graph's list, unused, so that dim indices keep their meaning.
void MakeBoundDimsStatic(Graph& graph, const std::map<std::string, int64_t>& bound) {
  if (bound.empty()) return;
  const DimValues values = BindDims(graph, bound);  // checks names and ranges
  std::vector<bool> is_bound(graph.dims().size(), false);
  for (const auto& [name, value] : bound) is_bound[static_cast<size_t>(*graph.FindDim(name))] = true;
  for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
    Tensor& t = graph.mutable_tensor(id);
    if (!t.alive) continue;
    for (Dim& d : t.shape) {
      if (!d.is_static() && is_bound[static_cast<size_t>(d.dynamic)]) {
        d = Dim::Static(values[static_cast<size_t>(d.dynamic)]);
      }
    }
  }
}

void GiveParamsValues(Graph& graph, const TensorMap& params) {
  for (const auto& [name, value] : params) {
    const std::optional<TensorId> id = graph.FindTensor(name);
    if (!id || !graph.tensor(*id).alive || graph.tensor(*id).role != Role::kParam) {
      ThrowInputError("param '{}': the model has no param named so", name);
    }
    Tensor& t = graph.mutable_tensor(*id);
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape) {
      if (!d.is_static()) {
        ThrowInputError("param '{}': its shape {} is not static", name, ShapeString(graph, t.shape));
      }
      shape.push_back(d.value);
    }
    if (value.dtype != t.dtype || value.shape != shape) {
      ThrowInputError("param '{}': {} [{}], the model wants {} {}", name, DTypeName(value.dtype),
                      fmt::join(value.shape, ", "), DTypeName(t.dtype), ShapeString(graph, t.shape));
    }
    if (value.bytes.size() != static_cast<size_t>(value.numel() * DTypeBytes(value.dtype))) {
      ThrowInputError("param '{}': {} bytes of data, expected {}", name, value.bytes.size(),
                      value.numel() * DTypeBytes(value.dtype));
    }
    t.data = std::make_shared<const std::vector<uint8_t>>(value.bytes);
  }
}

TensorInfo InfoOf(const Graph& g, TensorId id) {
  const Tensor& t = g.tensor(id);
  TensorInfo info;
  info.name = t.name;
  info.dtype = t.dtype;
  for (const Dim& d : t.shape) {
    info.shape.push_back(d.is_static() ? d.value : -1);
    info.dim_names.push_back(d.is_static() ? "" : g.dims()[static_cast<size_t>(d.dynamic)].name);
  }
  return info;
}

std::string NamesOf(const std::vector<TensorInfo>& infos) {
  std::string names;
  for (const TensorInfo& i : infos) names += (names.empty() ? "" : ", ") + i.name;
  return names.empty() ? "none" : names;
}

}  // namespace

#if HFUSE_HAVE_CUDA
// One plan per set of dim values: the executor (memory plan, launches,
// params uploaded once) for those sizes.
struct CudaPlan {
  std::unique_ptr<CudaExecutor> executor;
  cudaEvent_t feeds_ready = nullptr;  // recorded on the caller's stream
  ~CudaPlan() {
    if (feeds_ready) cudaEventDestroy(feeds_ready);
  }
};
#endif

struct Session::Impl {
  SessionOptions options;
  RuleSet rules = RuleSet::kSeed;
  LoadedModel model;  // model.graph: as imported
  Graph fused;        // as run; executors keep a reference (Impl never moves)
  FuseGroupOpsResult fusion;
  std::vector<OpId> op_order;  // the order to write ops in (empty: by id)
  std::vector<TensorInfo> inputs, overridable, outputs;
  std::map<std::string, TensorId> feedable;  // inputs and overridable params
  std::map<std::string, TensorId> output_ids;
#if HFUSE_HAVE_CUDA
  std::map<DimValues, std::unique_ptr<CudaPlan>> plans;
#endif
#if HFUSE_HAVE_CUDA
  // The plan of BindInputs: its inputs are the caller's memory at `ptrs`.
  std::unique_ptr<CudaPlan> bound_plan;
  DimValues bound_dims;
  std::map<std::string, void*> bound_ptrs;
#endif
  int device_id = -1;               // CUDA: the device current at creation
  int64_t last_device_copy_bytes = 0;
  // The CPU executor reads params in place from here: their values made
  // once per set of dims, not once per run.
  std::map<DimValues, TensorMap> cpu_params;
  CpuBufferPool cpu_pool;  // intermediates' buffers, from run to run
  CpuPackedWeights cpu_packed;  // packings of cpu_params' GEMM weights
  CpuRunPlans cpu_plans;        // the fused graph's run plans, per dim values

  const TensorMap& CpuParams(const DimValues& dims) {
    auto it = cpu_params.find(dims);
    if (it != cpu_params.end()) return it->second;
    if (cpu_params.size() >= 8) {  // a few batch sizes, not every one
      cpu_packed.Clear();  // (made from these values: keyed by their addresses)
      cpu_params.clear();
    }
    TensorMap& values = cpu_params[dims];
    for (TensorId id = 0; id < fused.num_tensor_ids(); ++id) {
      const Tensor& t = fused.tensor(id);
      if (t.alive && t.role == Role::kParam && t.data) values[t.name] = ParamValue(t, dims);
    }
    return values;
  }

  void Build() {
    if (options.device == Device::kCuda) {
      std::string why;
      if (!CudaAvailable(&why)) ThrowInputError("--device cuda: no usable CUDA device: {}", why);
#if HFUSE_HAVE_CUDA
      Check(cudaGetDevice(&device_id), "cudaGetDevice");
#endif
    }
    rules = options.rules.value_or(kSessionRules);
    GiveParamsValues(model.graph, options.params);
    fused = model.graph;
    MakeBoundDimsStatic(fused, options.dims);
    fusion.ops_before = fusion.ops_after = fused.NumLiveOps();
    fusion.rules = rules;
    if (options.fuse) {
      PassOptions pass_options;
      pass_options.fuse_group_ops.group_gemm = options.group_gemm;
      pass_options.fuse_group_ops.rules = rules;
      const Target target = options.device == Device::kCuda ? Target::kGpu : Target::kCpu;
      PassManager manager(options.passes.empty() ? DevicePipeline(model.format, target, rules)
                                                 : ParsePassList(options.passes),
                          options.pass_manager);
      PassState state(fused);
      manager.Run(state, pass_options);
      if (state.fused) fusion = std::move(state.fuse_result);
      op_order = std::move(state.op_order);
    }
    for (TensorId id = 0; id < fused.num_tensor_ids(); ++id) {
      const Tensor& t = fused.tensor(id);
      if (!t.alive || t.role == Role::kIntermediate) continue;
      if (t.role == Role::kParam && t.data) {
        overridable.push_back(InfoOf(fused, id));
      } else {
        inputs.push_back(InfoOf(fused, id));
      }
      feedable[t.name] = id;
    }
    // Graph inputs first, then the params fed like inputs.
    std::stable_partition(inputs.begin(), inputs.end(), [&](const TensorInfo& i) {
      return fused.tensor(feedable.at(i.name)).role == Role::kInput;
    });
    for (TensorId id : fused.outputs()) {
      outputs.push_back(InfoOf(fused, id));
      output_ids[fused.tensor(id).name] = id;
    }
  }

  // Checks each feed's name, dtype and shape, and that every input is fed;
  // returns the dim values the feeds bind.
  DimValues Bind(const std::map<std::string, std::vector<int64_t>>& shapes,
                 const std::map<std::string, DType>& dtypes) const {
    DimValues dims = BindDims(fused, options.dims);
    std::vector<std::string> bound_by(fused.dims().size());
    for (const auto& [name, shape] : shapes) {
      auto it = feedable.find(name);
      if (it == feedable.end()) {
        ThrowInputError("feed '{}': the model has no input named so (inputs: {})", name,
                        NamesOf(inputs));
      }
      const Tensor& t = fused.tensor(it->second);
      const DType dtype = dtypes.at(name);
      if (dtype != t.dtype) {
        ThrowInputError("input '{}': dtype {}, the model wants {}", name, DTypeName(dtype),
                        DTypeName(t.dtype));
      }
      // (clang 14 lambdas cannot capture structured bindings: name them.)
      auto shape_error = [&, &name = name, &shape = shape] {
        ThrowInputError("input '{}': shape [{}], the model wants {}", name, fmt::join(shape, ", "),
                        ShapeString(fused, t.shape));
      };
      if (shape.size() != t.shape.size()) shape_error();
      for (size_t i = 0; i < shape.size(); ++i) {
        const Dim& d = t.shape[i];
        if (d.is_static()) {
          if (shape[i] != d.value) shape_error();
          continue;
        }
        const auto k = static_cast<size_t>(d.dynamic);
        const DynamicDim& dim = fused.dims()[k];
        if (bound_by[k].empty()) {
          if (shape[i] < dim.min || shape[i] > dim.max) {
            ThrowInputError("input '{}': dim {} ({}) is {}, outside [{}, {}]", name, i, dim.name,
                            shape[i], dim.min, dim.max);
          }
          dims[k] = shape[i];
          bound_by[k] = name;
        } else if (dims[k] != shape[i]) {
          ThrowInputError("input '{}': dim {} ({}) is {}, but {} in input '{}'", name, i,
                          dim.name, shape[i], dims[k], bound_by[k]);
        }
      }
    }
    for (const TensorInfo& info : inputs) {
      if (!shapes.count(info.name)) {
        ThrowInputError("input '{}' is not fed (inputs: {})", info.name, NamesOf(inputs));
      }
    }
    DeriveDims(fused, dims);  // a derived dim follows the feeds' values of its factors
    return dims;
  }

  // Bind for device feeds: each pointer set, then as Bind.
  DimValues BindDevice(const DeviceTensorMap& feeds) const {
    std::map<std::string, std::vector<int64_t>> shapes;
    std::map<std::string, DType> dtypes;
    for (const auto& [name, t] : feeds) {
      if (!t.data) ThrowInputError("input '{}': a null device pointer", name);
      shapes[name] = t.shape;
      dtypes[name] = t.dtype;
    }
    return Bind(shapes, dtypes);
  }

  DimValues BindHost(const TensorMap& feeds) const {
    std::map<std::string, std::vector<int64_t>> shapes;
    std::map<std::string, DType> dtypes;
    for (const auto& [name, t] : feeds) {
      shapes[name] = t.shape;
      dtypes[name] = t.dtype;
    }
    const DimValues dims = Bind(shapes, dtypes);
    for (const auto& [name, t] : feeds) {
      const auto want = static_cast<size_t>(t.numel() * DTypeBytes(t.dtype));
      if (t.bytes.size() != want) {
        ThrowInputError("input '{}': {} bytes of data for shape [{}], expected {}", name,
                        t.bytes.size(), fmt::join(t.shape, ", "), want);
      }
    }
    return dims;
  }

  void CheckOutputNames(const std::vector<std::string>& names) const {
    for (const std::string& n : names) {
      if (!output_ids.count(n)) {
        ThrowInputError("output '{}': the model has no output named so (outputs: {})", n,
                        NamesOf(outputs));
      }
    }
  }

  void RequireCuda(const char* what) const {
    if (options.device != Device::kCuda) {
      ThrowInputError("{}: this session runs on the cpu; device tensors need a cuda session",
                      what);
    }
  }

#if HFUSE_HAVE_CUDA
  CudaPlan& PlanFor(const DimValues& dims) {
    auto it = plans.find(dims);
    if (it != plans.end()) return *it->second;
    return *plans.emplace(dims, MakePlan(dims, {})).first->second;
  }

  // `inputs_at`: inputs in the caller's memory (BindInputs).
  std::unique_ptr<CudaPlan> MakePlan(const DimValues& dims, std::map<TensorId, void*> inputs_at) {
    auto plan = std::make_unique<CudaPlan>();
    plan->executor = std::make_unique<CudaExecutor>(fused, dims, CudaOptions{}, std::move(inputs_at));
    // Params once per plan (their values or zeros until fed); inputs each run.
    TensorMap initial;
    for (TensorId id = 0; id < fused.num_tensor_ids(); ++id) {
      const Tensor& t = fused.tensor(id);
      if (!t.alive || t.role == Role::kIntermediate) continue;
      initial[t.name] = t.role == Role::kParam && t.data
                            ? ParamValue(t, dims)
                            : HostTensor(t.dtype, ConcreteShape(t.shape, dims));
    }
    plan->executor->SetFeeds(initial);
    // A plan starts with every output and intermediate NaN (0xFF bytes), so
    // that an element no launch writes shows up in the first run.
    plan->executor->Poison();
    if (cudaEventCreateWithFlags(&plan->feeds_ready, cudaEventDisableTiming) != cudaSuccess) {
      throw CudaError("cudaEventCreate failed");
    }
    return plan;
  }

  // The bound plan when `feeds` are exactly its pointers at its dims.
  CudaPlan* BoundPlanFor(const DimValues& dims, const DeviceTensorMap& feeds) const {
    if (!bound_plan || bound_dims != dims || feeds.size() != bound_ptrs.size()) return nullptr;
    for (const auto& [name, t] : feeds) {
      auto it = bound_ptrs.find(name);
      if (it == bound_ptrs.end() || it->second != t.data) return nullptr;
    }
    return bound_plan.get();
  }

  // A feed of a param the plan keeps no buffer for: its value was computed
  // with (plan_constants.h) or is read by no launch. Feeding its own value
  // again is harmless; feeding another one cannot take effect.
  void CheckUnkept(const std::string& name, const HostTensor& value) const {
    const Tensor& t = fused.tensor(feedable.at(name));
    if (t.role == Role::kParam && t.data && *t.data == value.bytes) return;
    ThrowInputError("'{}' is a param whose value the CUDA plan used when it was made (no launch reads it): "
                    "a run cannot override it",
                    name);
  }

  void Execute(CudaPlan& plan) {
    if (options.cuda_graph) {
      plan.executor->RunGraph();
    } else {
      plan.executor->Run();
    }
  }

  static void Check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw CudaError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
  }
#endif
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

Session Session::FromFile(const std::string& path, SessionOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->model = LoadModel(path, options.format, options.dims);
  impl->options = std::move(options);
  impl->Build();
  return Session(std::move(impl));
}

Session Session::FromBytes(std::string_view bytes, SessionOptions options,
                           const std::string& source) {
  if (options.format != "json" && options.format != "onnx") {
    ThrowInputError("{}: the format of a model given as bytes must be json or onnx, not '{}'",
                    source, options.format);
  }
  auto impl = std::make_unique<Impl>();
  impl->model = LoadModelBytes(bytes, FormatOf(source, options.format), source, ".", options.dims);
  impl->options = std::move(options);
  impl->Build();
  return Session(std::move(impl));
}

const std::vector<TensorInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Session::overridable_inputs() const { return impl_->overridable; }
const std::vector<TensorInfo>& Session::outputs() const { return impl_->outputs; }
const SessionOptions& Session::options() const { return impl_->options; }
RuleSet Session::rules() const { return impl_->rules; }
const FuseGroupOpsResult& Session::fusion() const { return impl_->fusion; }
const Graph& Session::graph() const { return impl_->fused; }
const Graph& Session::original() const { return impl_->model.graph; }
ModelFormat Session::format() const { return impl_->model.format; }

std::string Session::FusedModelBytes() const {
  return SerializeModel(impl_->model, impl_->fused, impl_->op_order, impl_->model.format, "hfuse");
}

DimValues Session::DimsFor(const std::map<std::string, std::vector<int64_t>>& shapes,
                           const std::map<std::string, DType>& dtypes) const {
  return impl_->Bind(shapes, dtypes);
}

void Session::SetCpuProfile(std::vector<CpuOpProfile>* profile, CpuMemory* memory) {
  impl_->options.cpu_profile = profile;
  impl_->options.cpu_memory = memory;
  if (profile) profile->clear();
}

int Session::CpuThreads() const { return CpuFastThreads(impl_->options.threads); }

TensorMap Session::Run(const TensorMap& feeds, const std::vector<std::string>& output_names) {
  impl_->CheckOutputNames(output_names);
  const DimValues dims = impl_->BindHost(feeds);
  TensorMap all;
  if (impl_->options.device == Device::kCpu) {
    CpuRunOptions cpu;
    cpu.threads = impl_->options.threads;
    cpu.group_mode = impl_->options.cpu_group_mode;
    cpu.params = &impl_->CpuParams(dims);
    cpu.pool = &impl_->cpu_pool;
    cpu.packed = &impl_->cpu_packed;
    cpu.plans = &impl_->cpu_plans;
    impl_->cpu_pool.set_poison(impl_->options.cpu_poison_buffers);
    cpu.profile = impl_->options.cpu_profile;
    cpu.memory = impl_->options.cpu_memory;
    all = RunOnCpu(impl_->fused, feeds, dims, cpu);
  } else {
#if HFUSE_HAVE_CUDA
    CudaPlan& plan = impl_->PlanFor(dims);
    CudaExecutor& gpu = *plan.executor;
    auto stream = static_cast<cudaStream_t>(gpu.Stream());
    for (const auto& [name, t] : feeds) {
      void* into = gpu.TensorAddress(impl_->feedable.at(name));
      if (!into) {
        impl_->CheckUnkept(name, t);
        continue;
      }
      Impl::Check(cudaMemcpyAsync(into, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice, stream),
                  "copying a feed to the device");
      gpu.ParamWritten(impl_->feedable.at(name));  // what the plan made of a param's value is made again
    }
    impl_->Execute(plan);
    all = gpu.Outputs();
#endif
  }
  if (output_names.empty()) return all;
  TensorMap picked;
  for (const std::string& n : output_names) picked[n] = all.at(n);
  return picked;
}

DeviceTensorMap Session::RunDevice(const DeviceTensorMap& feeds, void* stream) {
  return RunDevice(feeds, stream, {});
}

DeviceTensorMap Session::RunDevice(const DeviceTensorMap& feeds, void* stream,
                                   const DeviceTensorMap& into) {
  impl_->RequireCuda("RunDevice");
  const DimValues dims = impl_->BindDevice(feeds);
  // Outputs into the caller's buffers: each an output, of its dtype and of
  // this run's shape, checked before anything runs.
  for (const auto& [name, t] : into) {
    auto it = impl_->output_ids.find(name);
    if (it == impl_->output_ids.end()) {
      ThrowInputError("output '{}': the model has no output named so (outputs: {})", name,
                      NamesOf(impl_->outputs));
    }
    const Tensor& o = impl_->fused.tensor(it->second);
    const std::vector<int64_t> shape = ConcreteShape(o.shape, dims);
    if (!t.data) ThrowInputError("output '{}': a null device pointer", name);
    if (t.dtype != o.dtype || t.shape != shape) {
      ThrowInputError("output '{}': the buffer bound is {} [{}], this run makes {} [{}]", name,
                      DTypeName(t.dtype), fmt::join(t.shape, ", "), DTypeName(o.dtype),
                      fmt::join(shape, ", "));
    }
  }
  DeviceTensorMap out;
  impl_->last_device_copy_bytes = 0;
#if HFUSE_HAVE_CUDA
  CudaPlan* bound = impl_->BoundPlanFor(dims, feeds);
  CudaPlan& plan = bound ? *bound : impl_->PlanFor(dims);
  CudaExecutor& gpu = *plan.executor;
  // With a caller's stream, the whole run goes there, after what it holds.
  // Without one, on the session's stream, which waits (on the device) for
  // the legacy default stream, where the feeds were written.
  auto s = static_cast<cudaStream_t>(stream);
  if (!s) {
    s = static_cast<cudaStream_t>(gpu.Stream());
    Impl::Check(cudaEventRecord(plan.feeds_ready, nullptr), "recording the feeds' stream");
    Impl::Check(cudaStreamWaitEvent(s, plan.feeds_ready, 0), "waiting for the feeds");
  }
  auto bytes_of = [](const DeviceTensor& t) {
    int64_t n = DTypeBytes(t.dtype);
    for (int64_t d : t.shape) n *= d;
    return n;
  };
  for (const auto& [name, t] : feeds) {
    void* to = gpu.TensorAddress(impl_->feedable.at(name));
    if (!to) {
      // A param the plan does not keep (its value was used at plan time):
      // an override cannot reach it.
      ThrowInputError("'{}' is a param whose value the CUDA plan used when it was made (no launch reads "
                      "it): it cannot be fed on the device",
                      name);
    }
    gpu.ParamWritten(impl_->feedable.at(name));  // what the plan made of a param's value is made again
    if (to == t.data) continue;  // filled in place: nothing to copy
    const int64_t bytes = bytes_of(t);
    Impl::Check(cudaMemcpyAsync(to, t.data, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s),
                "copying a device feed");
    impl_->last_device_copy_bytes += bytes;
  }
  gpu.Launch(impl_->options.cuda_graph, s);
  for (TensorId id : impl_->fused.outputs()) {
    const Tensor& t = impl_->fused.tensor(id);
    DeviceTensor view{gpu.TensorAddress(id), t.dtype, ConcreteShape(t.shape, dims)};
    auto bound = into.find(t.name);
    if (bound != into.end()) {
      if (!view.data) ThrowInputError("output '{}': the plan keeps no device buffer for it", t.name);
      const int64_t bytes = bytes_of(view);
      Impl::Check(cudaMemcpyAsync(bound->second.data, view.data, static_cast<size_t>(bytes),
                                  cudaMemcpyDeviceToDevice, s),
                  "copying an output into its bound buffer");
      impl_->last_device_copy_bytes += bytes;
      view.data = bound->second.data;
    }
    out[t.name] = std::move(view);
  }
  gpu.Finish(s);
#else
  (void)stream;
  (void)dims;
#endif
  return out;
}

DeviceTensorMap Session::InputBuffers(const std::map<std::string, std::vector<int64_t>>& shapes) {
  impl_->RequireCuda("InputBuffers");
  std::map<std::string, DType> dtypes;
  for (const auto& [name, shape] : shapes) {
    auto it = impl_->feedable.find(name);
    if (it != impl_->feedable.end()) dtypes[name] = impl_->fused.tensor(it->second).dtype;
  }
  for (const auto& [name, shape] : shapes) {
    if (!dtypes.count(name)) dtypes[name] = DType::kFloat32;  // Bind names the problem
  }
  const DimValues dims = impl_->Bind(shapes, dtypes);
  DeviceTensorMap out;
#if HFUSE_HAVE_CUDA
  CudaExecutor& gpu = *impl_->PlanFor(dims).executor;
  for (const auto& [name, id] : impl_->feedable) {
    const Tensor& t = impl_->fused.tensor(id);
    if (t.role == Role::kParam && t.data && !shapes.count(name)) continue;
    out[name] = DeviceTensor{gpu.TensorAddress(id), t.dtype, ConcreteShape(t.shape, dims)};
  }
#else
  (void)dims;
#endif
  return out;
}

bool Session::BindInputs(const DeviceTensorMap& feeds) {
  impl_->RequireCuda("BindInputs");
  const DimValues dims = impl_->BindDevice(feeds);
#if HFUSE_HAVE_CUDA
  std::map<TensorId, void*> at;
  std::map<std::string, void*> ptrs;
  for (const auto& [name, t] : feeds) {
    const TensorId id = impl_->feedable.at(name);
    if (impl_->fused.tensor(id).role != Role::kInput) return false;  // a param override
    if (reinterpret_cast<uintptr_t>(t.data) % 256 != 0) return false;
    at[id] = t.data;
    ptrs[name] = t.data;
  }
  if (impl_->BoundPlanFor(dims, feeds)) return true;  // bound already
  impl_->bound_plan.reset();  // its memory first
  impl_->bound_plan = impl_->MakePlan(dims, std::move(at));
  impl_->bound_dims = dims;
  impl_->bound_ptrs = std::move(ptrs);
  return true;
#else
  (void)dims;
  return false;
#endif
}

int64_t Session::LastDeviceCopyBytes() const { return impl_->last_device_copy_bytes; }

int Session::DeviceId() const { return impl_->device_id; }

HostTensor Session::CopyToHost(const DeviceTensor& t) const {
  impl_->RequireCuda("CopyToHost");
  HostTensor h(t.dtype, t.shape);
#if HFUSE_HAVE_CUDA
  if (!h.bytes.empty()) {
    if (!t.data) ThrowInputError("CopyToHost: a null device pointer");
    Impl::Check(cudaMemcpy(h.bytes.data(), t.data, h.bytes.size(), cudaMemcpyDeviceToHost),
                "copying a device tensor to the host");
  }
#endif
  return h;
}

size_t Session::NumPlans() const {
#if HFUSE_HAVE_CUDA
  return impl_->plans.size();
#else
  return 0;
#endif
}

Session::PlanSummary Session::Plan(const DimValues& dims) {
  PlanSummary summary;
  if (impl_->options.device != Device::kCuda) ThrowInputError("Plan: a CPU session has no device plan");
#if HFUSE_HAVE_CUDA
  const CudaRunStats& stats = impl_->PlanFor(dims).executor->stats();
  summary.launches = stats.launches;
  summary.host_launches = stats.host_launches;
  summary.folded_ops = stats.folded_ops;
  summary.view_ops = stats.view_ops;
  summary.tf32x3_launches = stats.tf32x3_launches;
  summary.host_ops = stats.host_ops;
  summary.apart = stats.apart;
#else
  (void)dims;
#endif
  return summary;
}

}  // namespace hfuse
