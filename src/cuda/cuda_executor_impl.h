// The CUDA executor's inside (CudaExecutor::Impl, cuda_executor.h), shared
// by the three files that fill it: cuda_executor.cc (the executor's
// lifetime, its buffers, the per-op dispatch, and the LayerNorm, copy and
// elementwise launches), gemm_launches.cc (every GEMM: cuBLASLt, CUTLASS
// grouped, cuBLAS grouped, and the bias/activation epilogue kernel) and
// onnx_launches.cc (the opaque ONNX ops: their kernels, or the host). Internal to
// src/cuda; the host-only planning beneath it is memory_plan.h and
// gemm_plan.h.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "byte_span.h"
#include "cutlass_grouped_gemm.h"
#include "fused_elementwise.h"
#include "gemm_plan.h"
#include "hfuse/cuda/cuda_executor.h"
#include "hfuse/exec/plan_constants.h"
#include "hfuse/runtime/host_tensor.h"
#include "kernels.h"
#include "memory_plan.h"
#include "onnx_kernels.h"
#include "view_plan.h"

#define HFUSE_CUDA(call) ::hfuse::CheckCuda((call), #call, __FILE__, __LINE__)
#define HFUSE_CUBLAS(call) ::hfuse::CheckCublas((call), #call, __FILE__, __LINE__)
#define HFUSE_LAUNCHED() ::hfuse::CheckCuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

namespace hfuse {

namespace cpu {
struct AxisView;  // src/exec/cpu_onnx_ops.h
}  // namespace cpu
namespace cuda {
struct Tf32Split;  // grouped_sgemm.h
struct SgemmMember;
struct SgemmTiling;
}  // namespace cuda

// Throw CudaError naming the call, file and line when a call failed.
void CheckCuda(cudaError_t e, const char* what, const char* file, int line);
void CheckCublas(cublasStatus_t s, const char* what, const char* file, int line);

namespace cuda {

// cuBLASLt's workspace, one per process.
inline constexpr size_t kWorkspaceBytes = 32 << 20;

// A dtype as cuBLAS names it.
inline cudaDataType_t CudaType(DType d) {
  switch (d) {
    case DType::kFloat16: return CUDA_R_16F;
    case DType::kBFloat16: return CUDA_R_16BF;
    case DType::kFloat32: return CUDA_R_32F;
    case DType::kInt64:  // data of ONNX models, which no GEMM reads
    case DType::kInt32:
    case DType::kBool: break;
  }
  return CUDA_R_32F;
}

// A dtype as the kernels take it (kernels.h): 0 float16, 1 bfloat16, 2 float32.
inline int KernelType(DType d) { return d == DType::kFloat16 ? 0 : d == DType::kBFloat16 ? 1 : 2; }

// A device buffer freed on destruction.
struct DeviceBuffer {
  void* ptr = nullptr;
  int64_t bytes = 0;
  void Allocate(int64_t n) {
    bytes = n;
    if (n > 0) HFUSE_CUDA(cudaMalloc(&ptr, static_cast<size_t>(n)));
  }
  template <typename T>
  void Upload(const std::vector<T>& v) {
    Allocate(static_cast<int64_t>(v.size() * sizeof(T)));
    if (!v.empty()) HFUSE_CUDA(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};

// Page-locked host memory freed on destruction: what an asynchronous copy
// between host and device, and a CUDA graph capturing one, needs.
struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(int64_t n) {
    if (n > 0) HFUSE_CUDA(cudaMallocHost(&ptr, static_cast<size_t>(n)));
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr) cudaFreeHost(ptr);
  }
};

// An opaque op run on the host (PlanOnHost): the CPU executor's operands,
// their page-locked copies the stream fills and drains, and the first
// error the op raised (a host function cannot throw into the stream).
struct HostOp {
  std::string name;
  std::shared_ptr<const OnnxNode> node;
  std::vector<HostTensor> in, out;
  std::vector<std::unique_ptr<PinnedBuffer>> in_staged, out_staged;
  std::string error;
};

// Where a tensor's elements are: a base pointer plus a row stride.
struct Place {
  char* base = nullptr;
  int64_t row_stride = 0;  // elements between rows (a row = the last dim)
};

// The device's SMs, which the tile rules fill (CUTLASS's, the grouped
// float32 kernel's, a region's products'): asked once.
int NumSms();

}  // namespace cuda

struct CudaExecutor::Impl {
  const Graph& g;
  DimValues dims;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  PlanConstants folded;  // what the plan computed once (plan_constants.h)
  cuda::ViewPlan views;  // where each tensor's elements are (view_plan.h)
  cuda::DeviceBuffer inputs_arena, params_arena, outputs_arena, constants_arena, arena;
  std::vector<std::unique_ptr<cuda::DeviceBuffer>> descriptors;  // device arrays read by launches
  std::vector<std::unique_ptr<cuda::CutlassGroupedGemm>> cutlass_gemms;
  std::vector<std::unique_ptr<cuda::HostOp>> host_ops;
  // The gathers' flags, one int each in one device array (index_flags),
  // set when an index is out of range; read back once after a run.
  struct IndexCheck {
    std::string op;
    std::string what;  // "ONNX Gather", ...
  };
  std::vector<IndexCheck> index_checks;
  cuda::DeviceBuffer index_flags;
  int* never_bad = nullptr;  // the flag of gathers whose ids are always in range (index_flags' last int)
  int* NextIndexFlag(const Op& op, const std::string& what);
  int* NextIndexFlag(const std::string& op_name, const std::string& what);  // a group's member
  std::vector<cublasLtMatmulDesc_t> lt_descs;
  std::vector<cublasLtMatrixLayout_t> lt_layouts;
  std::vector<int64_t> offset;     // per tensor id: byte offset in its buffer, or -1
  std::vector<char> region;        // per tensor id: 'i'nput, 'p'aram, 'o'utput, 'a'rena
  std::vector<std::function<void(cudaStream_t)>> launches;
  std::vector<std::string> labels;  // per launch: "<op name> (<what>)"
  std::vector<double> op_bytes;     // per launch: its op's inputs and outputs, once each
  std::string current;              // the op being planned
  double current_bytes = 0;
  // `apart`: why the launch only moves data or runs elementwise ops alone
  // (CudaRunStats::apart), or empty.
  void Add(const std::string& what, std::function<void(cudaStream_t)> f, const std::string& apart = "") {
    FlushRegions();
    if (!LaunchMayPassGathers()) FlushGathers();
    FlushChain();
    AddLaunch(fmt::format("{} ({})", current, what), current_bytes, std::move(f), apart);
  }
  void AddLaunch(std::string label, double bytes, std::function<void(cudaStream_t)> f, const std::string& apart = "") {
    if (!apart.empty()) stats.apart.push_back(fmt::format("{}: {}", label, apart));
    launches.push_back(std::move(f));
    labels.push_back(std::move(label));
    op_bytes.push_back(bytes);
  }
  // Why elementwise op `first` (and the chain it starts, writing y) runs
  // in a launch of its own: the reason AbsorbActivations recorded for it
  // (kept_apart), or its neighbours, which take no elementwise op; and
  // where it is the activation of an FFN block below the FFN kernel's rule,
  // that too (FfnNote).
  std::map<OpId, std::string> kept_apart;
  std::string ApartWhy(OpId first, TensorId y) const;
  std::string ApartNeighbours(OpId first, TensorId y) const;
  std::string FfnNote(OpId act) const;
  // Gathers planned and not yet launched (PlanOnnxGather): independent
  // gathers next to each other in the order (a model's embedding lookups,
  // one table each) go out as one launch, as TorchRec's table-batched
  // embedding does; the next launch of another kind, a gather that reads
  // or overwrites what a waiting one touches, and the end of planning
  // flush them; a launch that does not touch them goes out first
  // (LaunchMayPassGathers), so that the batch keeps waiting past it.
  using Span = cuda::ByteSpan;
  //
  // A waiting gather also takes in what follows it where that costs no
  // launch of its own: an Add of a row broadcast over its rows (the bias
  // an exporter adds to each embedding: the gather writes row + bias), and
  // a Concat of waiting gathers' results along an axis that leaves each
  // gathered row whole, or whose output row takes several gathered rows
  // one after another (each gather writes its rows into its slot of the
  // concatenate's output, which then needs no copy; parts other ops wrote
  // in their slots beside them: FTTransformer's lookup [B, n, D] beside
  // its numeric columns' region).
  struct PendingGather {
    cuda::GatherArgs args;
    std::string op;
    double bytes;
    std::vector<Span> reads;
    Span write;
    TensorId y = kNone;       // the tensor it writes; kNone once it writes a concatenate's slot
    std::string add, into;    // the Add and the Concat it took in, if any
    bool copy = false;        // a part's copy (PartCopyGather), no lookup
  };
  std::vector<PendingGather> pending_gathers;
  // A batch's gathers at most (each takes up to 2048 blocks of the launch,
  // onnx_kernels.cu, LayGatherBatch: the launch stays below 2^31 blocks).
  static constexpr size_t kMaxGatherBatch = 65535;
  void QueueGather(PendingGather g);
  // Whether p reads or writes what a waiting gather writes, or writes what one reads.
  bool ClashesWithWaiting(const PendingGather& p) const;
  // The waiting gather y = data[index] along v (index kNone: the known
  // `ids`), under op name `name`, or nothing (and why) for a form the
  // kernel does not take. Takes one index flag.
  std::optional<PendingGather> GatherLaunch(const std::string& name, TensorId data, TensorId index,
                                            const std::optional<std::vector<int64_t>>& ids,
                                            const cpu::AxisView& v, TensorId y, std::string& why);
  // A group_gather (fuse-group-gathers): its members join the waiting batch
  // together, so that they go out in one launch.
  void PlanGroupGather(const Op& op);
  void FlushGathers();
  // The waiting gather that writes tensor t (its own result, or an Add's it took in), if any.
  PendingGather* WaitingGatherOf(TensorId t);
  // Whether `span` touches what a waiting gather reads or (other than `except`'s) writes.
  bool GathersTouch(const Span& span, const std::vector<const PendingGather*>& except) const;
  // Whether a launch of the op being planned may go out before the waiting
  // gathers: it reads nothing they write and writes nothing they read or
  // write, each tensor of the op taken as the whole buffer of its root.
  bool LaunchMayPassGathers() const;
  bool LaunchMayPassGathers(const std::vector<TensorId>& reads, const std::vector<TensorId>& writes) const;
  // An Add (`a`, of the tensors `operands`, kNone for a constant, writing
  // y) taken in by the waiting gather that wrote one operand.
  bool AddIntoGather(const Op& op, const std::vector<TensorId>& operands, const cuda::OnnxElementwiseArgs& a,
                     TensorId y);
  // A Concat of `parts` into y along `axis` written by the waiting gathers
  // that make its parts, and by gathers that copy its other row-major parts
  // (PartCopyGather) in the same batch.
  bool ConcatIntoGathers(const Op& op, const std::vector<TensorId>& parts, TensorId y, size_t axis);
  // A waiting gather that copies `part` ([outer, inner]: row-major, a
  // lookup of id 0 a row; or each row's inner elements lying together at
  // a wider row stride, a lookup of its columns 0..inner-1), its output
  // placed by the caller (blocks of `count` rows an output row); nothing
  // for another layout.
  std::optional<PendingGather> PartCopyGather(const std::string& name, TensorId part, int64_t outer, int64_t inner);
  // Fused regions planned and not yet launched (PlanRegion,
  // CudaOptions::region_batches): regions of one kernel source, one after
  // another in the order, none of which reads or writes what another
  // writes (each tensor's own elements: the slots of one concatenate lie
  // apart), go out as one launch of the source's group kernel
  // (FusedRegionGroupSource), as the lookups' batch does. Every other
  // launch sends them out first: the lookups' batch (FlushGathers), a
  // chain's launch (FlushChain), Add, an attention or product region.
  struct PendingRegion {
    std::string label, first, last;  // its launch's label alone; its first and last ops
    double bytes;
    std::vector<const void*> pointers;  // its operands', then its outputs' addresses
    std::vector<Span> reads, writes;
    std::string apart;  // an activation kept apart from its GEMM (kept_apart), or empty
  };
  struct PendingRegions {
    std::string source;
    const cuda::FusionRegion* region;
    std::vector<std::vector<int64_t>> strides;
    int64_t rows, cols;
    int lanes, rows_per_thread;
    std::vector<PendingRegion> members;
  };
  std::optional<PendingRegions> pending_regions;
  // The group kernel runs a region per grid row (gridDim.y).
  static constexpr size_t kMaxRegionBatch = 65535;
  void FlushRegions();
  // A chain of float32 elementwise ops planned and not yet launched
  // (PlanElementwiseTo): while the next op planned is elementwise, reads
  // the chain's result element for element and is its only reader, it
  // joins the chain as one more step (cuda::FusedElementwiseArgs); anything
  // else launches the chain, as one fused kernel (a chain of one op as that
  // op's own kernel). DCN's cross layer x0 * (x w) + b + x, the Erf form of
  // GELU (Div, Erf, Add, Mul, Mul) and the like run as one launch each.
  struct PendingChain {
    cuda::FusedElementwiseArgs fused;  // every step so far
    cuda::OnnxElementwiseArgs first;   // the first op, as it launches alone
    std::string first_what;
    TensorId y = kNone;  // the last step's output
    std::vector<std::string> ops;
    double bytes = 0;
    OpId first_op = kNone;
  };
  std::optional<PendingChain> chain;
  // false: `a` (a float32 op writing y) cannot be chained; plan it alone.
  bool ChainElementwise(const cuda::OnnxElementwiseArgs& a, TensorId y, const std::string& what);
  void FlushChain();
  // The fused regions (fusion_regions.h): each runs as one kernel, planned
  // where its first member is in the order; its members are next to each other.
  cuda::FusionPlan fusion;
  void PlanRegion(const cuda::FusionRegion& region);
  void PlanAttention(const cuda::FusionRegion& region);
  void PlanFfn(const cuda::FusionRegion& region);
  // Operand `slot` of an opaque op, numpy-broadcast over `shape`: a tensor
  // through its layout, or a constant the node keeps (uploaded once);
  // nothing when the slot has neither.
  std::optional<cuda::StridedOperand> SlotOperand(const Op& op, size_t slot, const std::vector<int64_t>& shape);
  // Whether `reader` is the one op that reads t (through views), t no graph output.
  bool OnlyReadBy(TensorId t, const Op& reader) const;
  const Op* current_op = nullptr;  // the op being planned
  // What launches read that is made from a param's value, once after the
  // param is written (CudaExecutor::ParamWritten), on the stream before
  // the next run's launches: the 3xTF32 parts of a weight (PlanLtGemm).
  struct Derived {
    TensorId from = kNone;
    std::function<void(cudaStream_t)> make;
    bool stale = true;
  };
  std::vector<Derived> derived;
  void MakeStaleDerived(cudaStream_t s);
  // The 3xTF32 parts of A (PlanLtGemm; A and B in PlanBatchedTf32x3), one
  // buffer for every such GEMM (a run's launches go one after another),
  // allocated once planned.
  cuda::DeviceBuffer tf32x3_scratch;
  int64_t tf32x3_scratch_bytes = 0;
  // A launch, each run, of the split kernel writing `split`'s parts into
  // the scratch buffer from byte `at` (which grows to hold them).
  void AddTf32Split(const cuda::Tf32Split& split, int64_t at, std::string label);
  // The A whose parts the last 3xTF32 GEMM's launch left in the scratch
  // buffer (address, rows, K, row stride), and the launches then.
  std::tuple<const char*, int64_t, int64_t, int64_t> tf32x3_last_split{};
  size_t tf32x3_last_end = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graph_exec = nullptr;
  CudaRunStats stats;

  CudaOptions options;

  std::map<TensorId, void*> input_addresses;  // inputs in the caller's memory
  Impl(const Graph& graph_in, const DimValues& d, CudaOptions o,
       std::map<TensorId, void*> inputs_at);  // plans everything
  ~Impl();

  // cuBLAS handles and the cuBLASLt workspace, made once per process.
  struct Shared {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void* workspace;
  };
  static Shared MakeShared() {
    Shared s{};
    HFUSE_CUBLAS(cublasCreate(&s.blas));
    HFUSE_CUBLAS(cublasLtCreate(&s.lt));
    HFUSE_CUDA(cudaMalloc(&s.workspace, cuda::kWorkspaceBytes));
    return s;
  }
  void* workspace_ptr = nullptr;

  std::vector<OpId> order;

  // ---- memory (cuda_executor.cc) -----------------------------------------------

  int64_t Bytes(TensorId t) const { return cuda::DeviceTensorBytes(g, dims, t); }
  void PlanMemory();  // memory_plan.h's plan, then the buffers
  char* BufferOf(TensorId s) const;
  cuda::Place PlaceOf(TensorId t) const;
  // A copy of `host` on the device, alive as long as the executor.
  template <typename T>
  const T* Device(const std::vector<T>& host) {
    descriptors.push_back(std::make_unique<cuda::DeviceBuffer>());
    descriptors.back()->Upload(host);
    return static_cast<const T*>(descriptors.back()->ptr);
  }

  // ---- per-op launch plans (cuda_executor.cc) --------------------------------------

  void PlanOp(const Op& op);  // by the op's family, one of the Plan* below
  void PlanLayerNorm(const Op& op);
  void PlanCopies(const Op& op);
  void PlanIrElementwise(const Op& op);
  // The inputs, output and numpy broadcast strides of an IR elementwise op
  // (at most 4 inputs of rank <= 6, read through their layouts); func left 0.
  cuda::ElementwiseArgs BroadcastArgs(const Op& op) const;
  // The view-plan's layout of tensor t as the ONNX kernels read it, its
  // strides over `shape` (numpy broadcasting: t's dims right-aligned, 0 on
  // the dims t has as 1 or lacks).
  cuda::StridedOperand Operand(TensorId t, const std::vector<int64_t>& shape) const;
  cuda::StridedOperand Operand(TensorId t, const cuda::Layout& l, const std::vector<int64_t>& from,
                               const std::vector<int64_t>& shape) const;
  // The elementwise kernel's arguments that copy `src` (a layout over
  // `shape`) into `dst` (another, of dtype `dst_type`), converting.
  static cuda::OnnxElementwiseArgs CopyArgs(const cuda::StridedOperand& src, void* dst,
                                            const std::vector<int64_t>& dst_strides, DType dst_type,
                                            const std::vector<int64_t>& shape);
  // Independent elementwise ops (copies of the parts of one op) in one
  // launch; `note` ends its label ("...; not in place: why").
  // `apart`: CudaRunStats::apart's reason (every copy has one).
  void PlanBatch(std::vector<cuda::OnnxElementwiseArgs> ops, const std::string& what, const std::string& note = "",
                 const std::string& apart = "");
  // One elementwise op (func and inputs set) writing tensor y, row-major in
  // its own buffer: the output, shape and count filled in, then planned.
  void PlanElementwiseTo(cuda::OnnxElementwiseArgs a, TensorId y, const std::string& what);
  // `why`: why the copy (CudaRunStats::apart).
  void PlanStridedCopy(const cuda::StridedOperand& src, void* dst, const std::vector<int64_t>& dst_strides,
                       DType dst_type, const std::vector<int64_t>& shape, const std::string& what,
                       const std::string& why) {
    PlanBatch({CopyArgs(src, dst, dst_strides, dst_type, shape)}, what, "", "moves data: " + why);
  }
  // Concatenates `parts` into `whole` along `axis` (or splits `whole` into
  // them): every part's copy in one launch; none where the parts are
  // waiting gathers' results or lie in buffers no launch writes
  // (ConcatIntoGathers: the batch of gathers writes them all).
  void PlanPartCopies(const std::vector<TensorId>& parts, TensorId whole, size_t axis, bool split,
                      const std::string& what);

  // ---- opaque ONNX ops (onnx_launches.cc) -----------------------------------------

  // The planner of onnx_ops.def's Cuda column for the op, else PlanOnHost.
  void PlanOpaque(const Op& op);
  // One per value of the Cuda column: plans the op's launches and returns
  // true, or false for a form its kernels do not take (it then runs on the
  // host, and `why` says why).
#define HFUSE_ONNX_CUDA_PLANNER(Cuda) bool PlanOnnx##Cuda(const Op& op, std::string& why);
  HFUSE_ONNX_CUDA_PLANNER(View)
  HFUSE_ONNX_CUDA_PLANNER(Copy)
  HFUSE_ONNX_CUDA_PLANNER(Elementwise)
  HFUSE_ONNX_CUDA_PLANNER(Gather)
  HFUSE_ONNX_CUDA_PLANNER(GatherElements)
  HFUSE_ONNX_CUDA_PLANNER(GatherND)
  HFUSE_ONNX_CUDA_PLANNER(Folded)
  HFUSE_ONNX_CUDA_PLANNER(Softmax)
  HFUSE_ONNX_CUDA_PLANNER(Reduce)
  HFUSE_ONNX_CUDA_PLANNER(CumSum)
  HFUSE_ONNX_CUDA_PLANNER(LayerNorm)
  HFUSE_ONNX_CUDA_PLANNER(BatchNorm)
  HFUSE_ONNX_CUDA_PLANNER(MatMul)
  HFUSE_ONNX_CUDA_PLANNER(Gemm)
  HFUSE_ONNX_CUDA_PLANNER(Conv)
  HFUSE_ONNX_CUDA_PLANNER(Host)
#undef HFUSE_ONNX_CUDA_PLANNER
  // A materialized view (view_plan.h): output k's view of the input, copied.
  void PlanViewCopy(const Op& op);
  // The op input filling node slot `slot`, or kNone.
  TensorId NodeInput(const Op& op, size_t slot) const;
  // The values of node slot `slot` where the plan knows them (a constant the
  // node keeps, or a tensor computed at plan time).
  std::optional<std::vector<int64_t>> KnownInts(const Op& op, size_t slot) const;
  std::optional<std::vector<float>> KnownFloats(const Op& op, size_t slot) const;
  // One batched GEMM, row-major C[b] = alpha A[b] B[b] (+ beta C[b]) over
  // `batch` matrices, each operand a layout (per-batch pointers, or one stride).
  struct MatrixOperand {
    const char* base;
    std::vector<int64_t> batch_offsets;  // bytes, per output batch
    bool transposed;
    int64_t ld;
  };
  // C's matrices are row-major (`transposed` unset), written.
  void PlanBatchedGemm(const MatrixOperand& a, const MatrixOperand& b, const MatrixOperand& c, int64_t m,
                       int64_t n, int64_t k, int64_t batch, DType dtype, float alpha, float beta);
  void PlanBatchedTf32x3(const MatrixOperand& a, const MatrixOperand& b, const char* pa, const char* pb, char* pc,
                         long long ea, long long eb, long long ec, int64_t m, int64_t n, int64_t k, int64_t batch,
                         float alpha, float beta, int ldc);
  // Runs `op` through the CPU executor's ONNX operators (cpu::RunOnnxOp):
  // its inputs copied down to page-locked memory, a host function, its
  // outputs copied up, all on the stream (so a CUDA graph captures it).
  void PlanOnHost(const Op& op, const std::string& why);
  // Copies tensor `t` between its device place and `host` (contiguous) on `s`.
  void CopyPlace(TensorId t, void* host, bool to_host, cudaStream_t s) const;
  // After a run: throws the first error a gather or a host op raised, as the CPU would.
  void CheckHostOps();

  // ---- GEMM launch plans (gemm_launches.cc) ----------------------------------------

  // Picks one of the paths below; a mixed group (members of several
  // epilogues) is one grouped float32 launch, or one plan per epilogue.
  void PlanGemm(const Op& op);
  // The activations (GELU, tanh, SiLU) that alone read a float32 GEMM's or
  // group's member outputs `ms` (op's), through views, and that the
  // grouped float32 kernel may apply in its epilogue
  // (CudaOptions::gemm_activations): each such member then writes its
  // activation's output with it, the activation is marked `absorbed`, and
  // the op runs on that kernel. An activation in a fused region goes only
  // with its whole region (all of it such activations of this op's
  // members). None where another launch lies between them in the order,
  // where an output does not lie in rows as the GEMM's would or lies on
  // the GEMM's input, or where the members would run on cuBLASLt
  // (FewCallsPay, or a strided batched call) at K above kAbsorbMaxK, or
  // as a single GEMM at any K.
  std::vector<const Op*> AbsorbActivations(const Op& op, std::vector<cuda::DeviceGemm>& ms);
  struct Absorbable {
    OpId act_id;
    char* y;       // where the member writes the activation's output
    int64_t ldy;
  };
  std::optional<Absorbable> FindActivation(const Op& op, size_t i, const cuda::DeviceGemm& m) const;
  // What both take in must hold (FindActivation, FindResidual): t, a view
  // of GEMM output y, holds y's elements in their order; z holds an [m, n]
  // product's rows as the GEMM writes them, of `dtype` (its row stride);
  // z lies on none of op's inputs; between op and `later` in the order
  // only views run (or ops `also_taken`).
  bool InGemmOrder(TensorId y, TensorId t) const;
  // The ops both walk through from the GEMM's output: views no fused region runs.
  bool ViewOutsideRegions(OpId u) const;
  std::optional<int64_t> GemmRowsOf(TensorId z, const cuda::DeviceGemm& m, DType dtype) const;
  bool OnGemmInputs(const Op& op, TensorId z) const;
  bool NothingRunsBetween(const Op& op, OpId later, const std::set<OpId>& also_taken) const;
  Span RootSpan(TensorId x) const;  // the whole buffer of x's root
  // The residual Add (gemm_plan.h, ResidualAddReading) that a single GEMM
  // `op` of no activation, run as one cuBLASLt call (m), may take in
  // (CudaOptions::gemm_residuals): the Add's operands and output in rows
  // as the GEMM's, its output on none of the GEMM's inputs nor on the
  // tensor added, no launch between the two in the order, the Add in no
  // fused region. None otherwise.
  struct Residual {
    OpId add_id;
    TensorId other;      // the tensor added: C
    const char* c;
    int64_t ldc;
    char* y;             // where the GEMM writes the Add's output: D
    int64_t ldy;
  };
  std::optional<Residual> FindResidual(const Op& op, const cuda::DeviceGemm& m) const;
  std::vector<bool> absorbed;  // per op id: its launch taken in by another's (AbsorbActivations, FindResidual)
  // Members of one epilogue (ms[i].act, bias or not): a group or one GEMM.
  void PlanGemmMembers(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, bool group);
  bool GroupedSgemmFor() const;  // whether float32 groups take the grouped float32 kernel
  static std::string EpilogueName(const cuda::DeviceGemm& m);  // "bias+relu", "none"
  static int64_t NumRows(const std::vector<int64_t>& shape);
  // One cuBLASLt call: one member, or members at constant strides (strided batched).
  void PlanLtGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act);
  // The param that is a member's weight, where it is one (its own buffer,
  // rows packed) of the op being planned; else kNone.
  TensorId WeightParam(const cuda::DeviceGemm& m) const;
  // Members of one output column (N = 1), one epilogue: one launch of the
  // GEMV kernel (kernels.h), then the epilogue kernel for an activation
  // other than ReLU.
  void PlanGemv(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act);
  // One cuBLASLt call (or GEMV kernel) a member, each with its own epilogue.
  void PlanLtEach(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha);
  // One CUTLASS grouped GEMM, bias and activation in its epilogue; false
  // (and why) when CUTLASS cannot take the members.
  bool PlanCutlassGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, int act, std::string& why);
  // One cublasGemmGroupedBatchedEx, then the epilogue kernel for bias and
  // activation; `why` says why not CUTLASS.
  void PlanGroupedGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act,
                       const std::string& why);
  // float32 members in one launch of the grouped float32 kernel
  // (grouped_sgemm.h), each with its own epilogue (ms[i].act, bias or not).
  void PlanGroupedSgemm(const std::vector<cuda::DeviceGemm>& ms, float alpha);
  // The 3xTF32 parts (SgemmMember::w3, derived from the param) of each
  // member's weight that `tiling`'s tensor tiles read, where the weight is
  // a param; whether any were made (then tile again: the flags change).
  bool MakeWeightParts(const cuda::SgemmTiling& tiling, std::vector<cuda::SgemmMember>& members);
  // The 3xTF32 parts of param w_param, the weight w ([n, k], packed) as it
  // lies (LaunchSplitTf32's W order, rows of 3 kp), made after each write
  // of the param (derived), once for every launch that reads them (a
  // cuBLASLt 3xTF32 call's B, the grouped kernel's SgemmMember::w3).
  float* WeightParts(TensorId w_param, const float* w, int64_t n, int64_t k);
  std::map<std::tuple<const float*, int64_t, int64_t>, float*> weight_parts;
  // Bias + activation over each member's output, in one launch. With
  // zero_first, the outputs are cleared first (GEMMs with K = 0).
  void PlanEpilogue(const std::vector<cuda::DeviceGemm>& ms, DType dtype, int act, bool zero_first);

  // ---- running -----------------------------------------------------------------------

  void Enqueue() {
    for (auto& launch : launches) launch(stream);
  }
};

}  // namespace hfuse
