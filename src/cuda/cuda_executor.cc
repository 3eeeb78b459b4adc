// The CUDA backend (cuda_executor.h): the executor's lifetime and buffers
// (the memory plan is memory_plan.h's), the per-op dispatch of launch plans,
// the LayerNorm, copy and elementwise launches, and running them (on the
// stream, or replayed from a CUDA graph). GEMM launches are gemm_launches.cc;
// both fill CudaExecutor::Impl (cuda_executor_impl.h).
#include "hfuse/cuda/cuda_executor.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "cuda_executor_impl.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "kernels.h"

namespace hfuse {
// The kernels take an EwFunc as its value (kernels.cu, ApplyFunc).
static_assert(static_cast<int>(EwFunc::kRelu) == 0 && static_cast<int>(EwFunc::kSigmoid) == 1 &&
              static_cast<int>(EwFunc::kTanh) == 2 && static_cast<int>(EwFunc::kGelu) == 3 &&
              static_cast<int>(EwFunc::kSilu) == 4 && static_cast<int>(EwFunc::kAdd) == 5 &&
              static_cast<int>(EwFunc::kDiv) == 8);

void CheckCuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    throw CudaError(fmt::format("CUDA error at {}:{}: {}: {}", file, line, what, cudaGetErrorString(e)));
  }
}

void CheckCublas(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(fmt::format("cuBLAS error at {}:{}: {}: status {}", file, line, what,
                                static_cast<int>(s)));
  }
}

int cuda::NumSms() {
  static const int num_sms = [] {
    int device = 0, sms = 0;
    HFUSE_CUDA(cudaGetDevice(&device));
    HFUSE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return num_sms;
}

bool CudaDeviceAvailable(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

CudaExecutor::Impl::Impl(const Graph& graph_in, const DimValues& d, CudaOptions o,
                         std::map<TensorId, void*> inputs_at)
    : g(graph_in), dims(d), options(o), input_addresses(std::move(inputs_at)) {
  HFUSE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Handles and the workspace are made once per process: creating them
  // costs milliseconds, and tests build thousands of executors.
  static const Shared shared = MakeShared();
  blas = shared.blas;
  lt = shared.lt;
  workspace_ptr = shared.workspace;
  folded = FoldPlanConstants(g, dims);
  // Products in regions (fusion_regions.h) by their rule: where their
  // tiles fill the SMs (CudaOptions::region_gemms).
  const int64_t product_min_tiles = options.region_gemms < 0    ? cuda::NumSms()
                                    : options.region_gemms == 0 ? cuda::kNoProducts
                                                                : 0;
  // FFN blocks of enough rows one kernel (CudaOptions::ffn_chains).
  const int64_t ffn_min_rows = options.ffn_chains < 0    ? cuda::kFfnMinRows
                               : options.ffn_chains == 0 ? cuda::kNoFfn
                                                         : 0;
  cuda::DevicePlan planned =
      cuda::PlanViewsAndRegions(g, dims, folded, options.elementwise_chains, product_min_tiles, ffn_min_rows);
  views = std::move(planned.views);
  fusion = std::move(planned.fusion);
  PlanMemory();
  // Every op that could check indices gets a flag in one array, so that a
  // run reads them all back with one copy.
  int64_t gathers = 0;
  for (OpId id : order) {
    const Op& op = g.op(id);
    if (FamilyOf(op.type) == OpFamily::kOpaque) ++gathers;
    if (IsGroupGather(op.type)) gathers += static_cast<int64_t>(NumMembers(op));  // one per member
  }
  index_flags.Allocate((gathers + 1) * static_cast<int64_t>(sizeof(int)));
  HFUSE_CUDA(cudaMemset(index_flags.ptr, 0, static_cast<size_t>(index_flags.bytes)));
  never_bad = static_cast<int*>(index_flags.ptr) + gathers;
  absorbed.assign(views.skip.size(), false);
  for (OpId id : order) {
    if (views.skip[static_cast<size_t>(id)] || absorbed[static_cast<size_t>(id)]) continue;
    const int32_t r = fusion.region_of[static_cast<size_t>(id)];
    if (r < 0) {
      PlanOp(g.op(id));
    } else if (fusion.regions[static_cast<size_t>(r)].ops.front() == id) {
      PlanRegion(fusion.regions[static_cast<size_t>(r)]);
    }
  }
  FlushRegions();
  FlushGathers();
  FlushChain();
  tf32x3_scratch.Allocate(tf32x3_scratch_bytes);
  stats.folded_ops = folded.folded_ops;
  stats.view_ops = views.views;
}

int* CudaExecutor::Impl::NextIndexFlag(const Op& op, const std::string& what) {
  return NextIndexFlag(op.name, what);
}

int* CudaExecutor::Impl::NextIndexFlag(const std::string& op_name, const std::string& what) {
  const size_t i = index_checks.size();
  HFUSE_CHECK(static_cast<int64_t>((i + 2) * sizeof(int)) <= index_flags.bytes);  // the last: never_bad
  index_checks.push_back({op_name, what});
  return static_cast<int*>(index_flags.ptr) + i;
}

CudaExecutor::Impl::~Impl() {
  if (graph_exec) cudaGraphExecDestroy(graph_exec);
  if (graph) cudaGraphDestroy(graph);
  for (auto d : lt_descs) cublasLtMatmulDescDestroy(d);
  for (auto l : lt_layouts) cublasLtMatrixLayoutDestroy(l);
  if (stream) cudaStreamDestroy(stream);
}

void CudaExecutor::Impl::PlanMemory() {
  cuda::MemoryPlan plan = cuda::PlanDeviceMemory(g, dims, &views, &fusion, options.group_operands_together);
  order = std::move(plan.order);
  offset = std::move(plan.offset);
  region = std::move(plan.region);
  stats.tensor_bytes = plan.tensor_bytes;
  stats.arena_bytes = plan.arena_bytes;
  stats.constant_bytes = plan.constant_bytes;
  inputs_arena.Allocate(plan.input_bytes);
  params_arena.Allocate(plan.param_bytes);
  outputs_arena.Allocate(plan.output_bytes);
  constants_arena.Allocate(plan.constant_bytes);
  arena.Allocate(plan.arena_bytes);
  // The plan's constants, once.
  for (TensorId t = 0; t < g.num_tensor_ids(); ++t) {
    if (region[static_cast<size_t>(t)] != 'c') continue;
    const HostTensor& v = folded.values.at(t);
    HFUSE_CUDA(cudaMemcpy(BufferOf(t), v.bytes.data(), v.bytes.size(), cudaMemcpyHostToDevice));
  }
}

char* CudaExecutor::Impl::BufferOf(TensorId s) const {
  switch (region[static_cast<size_t>(s)]) {
    case 'i': {
      auto it = input_addresses.find(s);  // the caller's memory
      if (it != input_addresses.end()) return static_cast<char*>(it->second);
      return static_cast<char*>(inputs_arena.ptr) + offset[static_cast<size_t>(s)];
    }
    case 'p': return static_cast<char*>(params_arena.ptr) + offset[static_cast<size_t>(s)];
    case 'o': return static_cast<char*>(outputs_arena.ptr) + offset[static_cast<size_t>(s)];
    case 'c': return static_cast<char*>(constants_arena.ptr) + offset[static_cast<size_t>(s)];
    case 'a': return static_cast<char*>(arena.ptr) + offset[static_cast<size_t>(s)];
    default: HFUSE_CHECK(false && "tensor has no buffer");
  }
  return nullptr;
}

cuda::Place CudaExecutor::Impl::PlaceOf(TensorId t) const {
  const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
  HFUSE_CHECK(l.root != kNone);
  const std::vector<int64_t>& shape = views.shape[static_cast<size_t>(t)];
  cuda::Place p;
  p.base = BufferOf(l.root) + l.offset * DTypeBytes(l.root_dtype);
  // Readers of rows get a layout of rows (view_plan.h's ReadsOf); others
  // read it contiguous, one row after another.
  const std::optional<int64_t> rows = cuda::RowStride(l, shape);
  p.row_stride = rows ? *rows : (shape.empty() ? 1 : shape.back());
  return p;
}

cuda::StridedOperand CudaExecutor::Impl::Operand(TensorId t, const std::vector<int64_t>& shape) const {
  return Operand(t, views.layout[static_cast<size_t>(t)], views.shape[static_cast<size_t>(t)], shape);
}

cuda::StridedOperand CudaExecutor::Impl::Operand(TensorId t, const cuda::Layout& l,
                                                 const std::vector<int64_t>& from,
                                                 const std::vector<int64_t>& shape) const {
  HFUSE_CHECK(l.root != kNone && from.size() <= shape.size() && shape.size() <= cuda::kMaxOnnxRank);
  cuda::StridedOperand o{};
  o.ptr = BufferOf(l.root) + l.offset * DTypeBytes(l.root_dtype);
  o.type = static_cast<int32_t>(l.root_dtype);
  o.as = static_cast<int32_t>(g.tensor(t).dtype);
  for (size_t d = 0; d < from.size(); ++d) {
    const size_t od = shape.size() - from.size() + d;
    o.strides[od] = from[d] == 1 ? 0 : l.strides[d];
  }
  return o;
}

void CudaExecutor::Impl::PlanOp(const Op& op) {
  if (op.elided) return;
  current = op.name;
  current_op = &op;
  std::vector<TensorId> touched = op.inputs;
  touched.insert(touched.end(), op.outputs.begin(), op.outputs.end());
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  current_bytes = 0;
  for (TensorId t : touched) current_bytes += static_cast<double>(Bytes(t));
  switch (FamilyOf(op.type)) {
    case OpFamily::kGemm:
    case OpFamily::kGroupGemm: PlanGemm(op); break;
    case OpFamily::kLayerNorm:
    case OpFamily::kGroupLayerNorm: PlanLayerNorm(op); break;
    case OpFamily::kSplit:
    case OpFamily::kConcatenate: PlanCopies(op); break;
    case OpFamily::kElementwise: PlanIrElementwise(op); break;
    case OpFamily::kReshape: PlanViewCopy(op); break;
    case OpFamily::kOpaque: PlanOpaque(op); break;
    case OpFamily::kGroupGather: PlanGroupGather(op); break;
    default:
      throw CudaError(fmt::format("op '{}': {} cannot run on the GPU", op.name, OpTypeName(op.type)));
  }
}

void CudaExecutor::Impl::PlanLayerNorm(const Op& op) {
  const size_t members = op.outputs.size();
  std::vector<cuda::LayerNormDesc> descs;
  std::vector<cuda::LayerNormTile> tiles;
  const DType dtype = g.tensor(op.inputs[0]).dtype;
  const int esize = static_cast<int>(DTypeBytes(dtype));
  const int vec = 16 / esize;
  for (size_t m = 0; m < members; ++m) {
    const auto [x, gamma, beta, y, normalized] = LayerNormMemberOf(op, m);
    int64_t n = 1;
    for (int64_t d : *normalized) n *= d;
    const cuda::Place px = PlaceOf(x), py = PlaceOf(y);
    const int64_t numel = Bytes(x) / DTypeBytes(dtype);
    const int64_t rows = n > 0 ? numel / n : 0;
    // Views are rows of the last dim; a normalized size spanning several
    // dims needs the tensor contiguous, which a view is only if it is whole.
    const int64_t last = ConcreteShape(g.tensor(x).shape, dims).back();
    const int64_t xs = n == last ? px.row_stride : n, ys = n == last ? py.row_stride : n;
    if (n != last) {  // (the view plan gives them no other layout: NormalizesLastDimOnly)
      for (TensorId t : {x, y}) {
        HFUSE_CHECK(cuda::IsRowMajor(views.layout[static_cast<size_t>(t)], views.shape[static_cast<size_t>(t)]));
      }
    }
    cuda::LayerNormDesc d{px.base, py.base,
                          gamma != kNone ? PlaceOf(gamma).base : nullptr,
                          beta != kNone ? PlaceOf(beta).base : nullptr,
                          rows, n, xs, ys, 0, 32};
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    d.vec = n % vec == 0 && xs % vec == 0 && ys % vec == 0 && aligned(d.x) && aligned(d.y) &&
                    (!d.gamma || aligned(d.gamma)) && (!d.beta || aligned(d.beta))
                ? 1
                : 0;
    d.lanes = cuda::LayerNormLanes(n, esize, d.vec != 0);
    if (rows == 0 || n == 0) continue;
    const int64_t per_tile = cuda::kLayerNormThreads / d.lanes;
    for (int64_t r = 0; r < rows; r += per_tile) {
      tiles.push_back({static_cast<int32_t>(descs.size()), static_cast<int32_t>(std::min(per_tile, rows - r)), r});
    }
    descs.push_back(d);
  }
  if (tiles.empty()) return;
  const cuda::LayerNormDesc* dd = Device(descs);
  const cuda::LayerNormTile* tt = Device(tiles);
  const int num_tiles = static_cast<int>(tiles.size());
  const float eps = static_cast<float>(op.attrs.Eps());
  const bool lsm = ActivationOf(op.type) == EwFunc::kSigmoid;  // y = x * sigmoid(layernorm(x))
  const int type = cuda::KernelType(dtype);
  Add(fmt::format("layernorm kernel, {} member{}", members, members == 1 ? "" : "s"), [=](cudaStream_t s) {
    cuda::LaunchGroupLayerNorm(type, dd, tt, num_tiles, eps, lsm, s);
    HFUSE_LAUNCHED();
  });
}

// A split or concatenate that is not a view (strided_views.h): every part
// copied in one launch. (DCNv2's 64 narrow part copies took 26.7 us each as
// cudaMemcpy2DAsync, 8.0 as a kernel of their own, bench/RESULTS.md; now
// all of one op's parts are one launch.)
void CudaExecutor::Impl::PlanCopies(const Op& op) {
  const bool split = op.type == OpType::kSplit;
  const TensorId whole = split ? op.inputs[0] : op.outputs[0];
  const auto rank = static_cast<int64_t>(views.shape[static_cast<size_t>(whole)].size());
  const auto axis = static_cast<size_t>(op.attrs.dim < 0 ? op.attrs.dim + rank : op.attrs.dim);
  PlanPartCopies(split ? op.outputs : op.inputs, whole, axis, split, split ? "split kernel" : "concatenate kernel");
}

void CudaExecutor::Impl::PlanIrElementwise(const Op& op) {
  const DType dtype = g.tensor(op.outputs[0]).dtype;
  // One and two operands (every op the importer and the passes make): the
  // ONNX elementwise kernel (32-bit index math, float32 four elements a
  // thread; onnx_kernels.h), in int64 for integer shape math. The
  // broadcast kernel of kernels.cu takes the rest (up to four operands,
  // folded left), in float types only. (DIN's and DCN's Add/Mul launches
  // took 21-48 us at 450-650 GB/s in that kernel, bench/RESULTS.md.)
  static const std::map<EwFunc, cuda::OnnxFunc> kFuncs = {
      {EwFunc::kRelu, cuda::kRelu}, {EwFunc::kSigmoid, cuda::kSigmoid}, {EwFunc::kTanh, cuda::kTanh},
      {EwFunc::kGelu, cuda::kGelu}, {EwFunc::kSilu, cuda::kSwish},      {EwFunc::kAdd, cuda::kAdd},
      {EwFunc::kSub, cuda::kSub},   {EwFunc::kMul, cuda::kMul},         {EwFunc::kDiv, cuda::kDiv}};
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(op.outputs[0])];
  auto f = kFuncs.find(op.attrs.func);
  const bool integer = !IsFloat(dtype);
  if (f != kFuncs.end() && !op.inputs.empty() && op.inputs.size() <= 2 && ys.size() <= cuda::kMaxOnnxRank &&
      (!integer || f->first == EwFunc::kRelu || !IsUnary(f->first))) {
    cuda::OnnxElementwiseArgs a{};
    a.func = f->second;
    a.alpha = 1.0f;  // Silu = Swish(alpha 1)
    a.num_inputs = static_cast<int32_t>(op.inputs.size());
    for (size_t k = 0; k < op.inputs.size(); ++k) a.in[k] = Operand(op.inputs[k], ys);
    a.integer = integer ? 1 : 0;
    if (AddIntoGather(op, op.inputs, a, op.outputs[0])) return;
    PlanElementwiseTo(a, op.outputs[0], integer ? "integer elementwise kernel" : "elementwise kernel");
    return;
  }
  if (integer) {
    throw CudaError(fmt::format("op '{}': {} on {} cannot run on the GPU", op.name, EwFuncName(op.attrs.func),
                                DTypeName(dtype)));
  }
  if (op.inputs.size() > 4) throw CudaError(fmt::format("op '{}': more than 4 elementwise inputs", op.name));
  if (g.tensor(op.outputs[0]).shape.size() > 6) throw CudaError(fmt::format("op '{}': rank above 6", op.name));
  const cuda::ElementwiseArgs args = BroadcastArgs(op);
  const int type = cuda::KernelType(dtype);
  Add("elementwise kernel, up to 4 operands", [=](cudaStream_t s) {
    cuda::LaunchElementwise(type, args, s);
    HFUSE_LAUNCHED();
  });
}

cuda::ElementwiseArgs CudaExecutor::Impl::BroadcastArgs(const Op& op) const {
  const std::vector<int64_t> out = ConcreteShape(g.tensor(op.outputs[0]).shape, dims);
  cuda::ElementwiseArgs args{};
  args.rank = static_cast<int32_t>(out.size());
  args.num_inputs = static_cast<int32_t>(op.inputs.size());
  args.func = static_cast<int32_t>(op.attrs.func);
  args.numel = 1;
  for (size_t d = 0; d < out.size(); ++d) {
    args.shape[d] = out[d];
    args.numel *= out[d];
  }
  for (size_t k = 0; k < op.inputs.size(); ++k) {
    const cuda::StridedOperand in = Operand(op.inputs[k], out);
    args.in[k] = in.ptr;
    for (size_t d = 0; d < out.size(); ++d) args.in_strides[k][d] = in.strides[d];
  }
  args.out = PlaceOf(op.outputs[0]).base;
  return args;
}

CudaExecutor::CudaExecutor(const Graph& graph, const DimValues& dims, CudaOptions options,
                           std::map<TensorId, void*> input_addresses)
    : impl_(std::make_unique<Impl>(graph, dims, options, std::move(input_addresses))) {
  impl_->stats.launches = static_cast<int64_t>(impl_->launches.size());
  impl_->stats.host_launches = static_cast<int64_t>(impl_->host_ops.size());
}

CudaExecutor::~CudaExecutor() = default;

void CudaExecutor::SetFeeds(const TensorMap& feeds) {
  const Graph& g = impl_->g;
  for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
    const Tensor& t = g.tensor(id);
    if (!t.alive || t.role == Role::kIntermediate || !impl_->region[static_cast<size_t>(id)]) continue;
    if (impl_->input_addresses.count(id)) continue;  // the caller's memory, not ours to fill
    auto it = feeds.find(t.name);
    if (it == feeds.end()) ThrowInputError("no value given for '{}'", t.name);
    const std::vector<int64_t> want = ConcreteShape(t.shape, impl_->dims);
    if (it->second.dtype != t.dtype || it->second.shape != want) {
      ThrowInputError("value for '{}' has the wrong dtype or shape", t.name);
    }
    HFUSE_CUDA(cudaMemcpyAsync(impl_->BufferOf(id), it->second.bytes.data(), it->second.bytes.size(),
                               cudaMemcpyHostToDevice, impl_->stream));
    HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
    ParamWritten(id);
  }
}

void CudaExecutor::ParamWritten(TensorId id) {
  for (Impl::Derived& d : impl_->derived) {
    if (d.from == id) d.stale = true;
  }
}

void CudaExecutor::Impl::MakeStaleDerived(cudaStream_t s) {
  for (Derived& d : derived) {
    if (!d.stale) continue;
    d.make(s);
    d.stale = false;
  }
}

void CudaExecutor::Poison() {
  // On the executor's stream: a plain cudaMemset runs on the legacy default
  // stream, which does not order against a non-blocking stream.
  for (cuda::DeviceBuffer* b : {&impl_->outputs_arena, &impl_->arena}) {
    if (b->bytes) HFUSE_CUDA(cudaMemsetAsync(b->ptr, 0xFF, static_cast<size_t>(b->bytes), impl_->stream));
  }
  HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
}

void CudaExecutor::Run() {
  Launch(false, nullptr);
  Finish(nullptr);
}

void CudaExecutor::RunGraph() {
  Launch(true, nullptr);
  Finish(nullptr);
}

void CudaExecutor::Launch(bool use_graph, void* stream) {
  const cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : impl_->stream;
  impl_->MakeStaleDerived(s);  // before the run's launches, on its stream (never in the CUDA graph)
  if (!use_graph) {
    for (auto& launch : impl_->launches) launch(s);
    return;
  }
  if (!impl_->graph_exec) {
    // Captured on the executor's own stream, which holds no other work; the
    // graph is a DAG of launches that any stream can replay.
    HFUSE_CUDA(cudaStreamBeginCapture(impl_->stream, cudaStreamCaptureModeThreadLocal));
    impl_->Enqueue();
    HFUSE_CUDA(cudaStreamEndCapture(impl_->stream, &impl_->graph));
    HFUSE_CUDA(cudaGraphInstantiate(&impl_->graph_exec, impl_->graph, 0));
  }
  HFUSE_CUDA(cudaGraphLaunch(impl_->graph_exec, s));
}

void CudaExecutor::Finish(void* stream) {
  HFUSE_CUDA(cudaStreamSynchronize(stream ? static_cast<cudaStream_t>(stream) : impl_->stream));
  impl_->CheckHostOps();
}

TensorMap CudaExecutor::Outputs() const {
  TensorMap out;
  const Graph& g = impl_->g;
  for (TensorId id : g.outputs()) {
    HostTensor t(g.tensor(id).dtype, ConcreteShape(g.tensor(id).shape, impl_->dims));
    HFUSE_CUDA(cudaMemcpyAsync(t.bytes.data(), impl_->PlaceOf(id).base, t.bytes.size(),
                               cudaMemcpyDeviceToHost, impl_->stream));
    HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
    out[g.tensor(id).name] = std::move(t);
  }
  return out;
}

void* CudaExecutor::TensorAddress(TensorId id) const {
  const TensorId root = impl_->views.layout[static_cast<size_t>(id)].root;
  if (root == kNone || impl_->region[static_cast<size_t>(root)] == 0) return nullptr;
  return impl_->PlaceOf(id).base;
}

void* CudaExecutor::Stream() const { return impl_->stream; }

double CudaExecutor::MedianMicros(int warmup, int reps, bool use_graph) {
  for (int i = 0; i < warmup; ++i) use_graph ? RunGraph() : Run();
  std::vector<float> times = TimedRuns(reps, use_graph);
  std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

std::vector<float> CudaExecutor::TimedRuns(int reps, bool use_graph) {
  if (use_graph && !impl_->graph_exec) RunGraph();  // captures the graph
  impl_->MakeStaleDerived(impl_->stream);
  cudaEvent_t start, stop;
  HFUSE_CUDA(cudaEventCreate(&start));
  HFUSE_CUDA(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    HFUSE_CUDA(cudaEventRecord(start, impl_->stream));
    if (use_graph) {
      HFUSE_CUDA(cudaGraphLaunch(impl_->graph_exec, impl_->stream));
    } else {
      impl_->Enqueue();
    }
    HFUSE_CUDA(cudaEventRecord(stop, impl_->stream));
    HFUSE_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    HFUSE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1000.0f);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return times;
}

const CudaRunStats& CudaExecutor::stats() const { return impl_->stats; }

const std::vector<double>& CudaExecutor::LaunchOpBytes() const { return impl_->op_bytes; }

const std::vector<std::string>& CudaExecutor::LaunchLabels() const { return impl_->labels; }

std::vector<std::pair<std::string, double>> CudaExecutor::ProfileLaunches(int reps) {
  Run();
  cudaEvent_t start, stop;
  HFUSE_CUDA(cudaEventCreate(&start));
  HFUSE_CUDA(cudaEventCreate(&stop));
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < impl_->launches.size(); ++i) {
    std::vector<float> times;
    for (int r = 0; r < reps; ++r) {
      HFUSE_CUDA(cudaEventRecord(start, impl_->stream));
      impl_->launches[i](impl_->stream);
      HFUSE_CUDA(cudaEventRecord(stop, impl_->stream));
      HFUSE_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      HFUSE_CUDA(cudaEventElapsedTime(&ms, start, stop));
      times.push_back(ms * 1000.0f);
    }
    std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2), times.end());
    out.emplace_back(impl_->labels[i], times[times.size() / 2]);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return out;
}

}  // namespace hfuse
