// The CUDA backend. See cuda_executor.h.
#include "hfuse/cuda/cuda_executor.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "cutlass_grouped_gemm.h"
#include "gemm_plan.h"
#include "memory_plan.h"
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

namespace {

#define HFUSE_CUDA(call) ::hfuse::CheckCuda((call), #call, __FILE__, __LINE__)
#define HFUSE_CUBLAS(call) ::hfuse::CheckCublas((call), #call, __FILE__, __LINE__)
#define HFUSE_LAUNCHED() ::hfuse::CheckCuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

}  // namespace

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

namespace {

constexpr size_t kWorkspaceBytes = 32 << 20;

cudaDataType_t CudaType(DType d) {
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

int KernelType(DType d) { return d == DType::kFloat16 ? 0 : d == DType::kBFloat16 ? 1 : 2; }

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

// Where a tensor's elements are: a base pointer plus a row stride.
struct Place {
  char* base = nullptr;
  int64_t row_stride = 0;  // elements between rows (a row = the last dim)
};

}  // namespace

struct CudaExecutor::Impl {
  const Graph& g;
  DimValues dims;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer inputs_arena, params_arena, outputs_arena, arena;
  std::vector<std::unique_ptr<DeviceBuffer>> descriptors;  // device arrays read by launches
  std::vector<std::unique_ptr<cuda::CutlassGroupedGemm>> cutlass_gemms;
  std::vector<cublasLtMatmulDesc_t> lt_descs;
  std::vector<cublasLtMatrixLayout_t> lt_layouts;
  std::vector<int64_t> offset;     // per tensor id: byte offset in its buffer, or -1
  std::vector<char> region;        // per tensor id: 'i'nput, 'p'aram, 'o'utput, 'a'rena
  std::vector<std::function<void(cudaStream_t)>> launches;
  std::vector<std::string> labels;  // per launch: "<op name> (<what>)"
  std::vector<double> op_bytes;     // per launch: its op's inputs and outputs, once each
  std::string current;              // the op being planned
  double current_bytes = 0;
  void Add(const std::string& what, std::function<void(cudaStream_t)> f) {
    launches.push_back(std::move(f));
    labels.push_back(fmt::format("{} ({})", current, what));
    op_bytes.push_back(current_bytes);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t graph_exec = nullptr;
  CudaRunStats stats;

  CudaOptions options;

  Impl(const Graph& graph_in, const DimValues& d, CudaOptions o) : g(graph_in), dims(d), options(o) {
    HFUSE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // Handles and the workspace are made once per process: creating them
    // costs milliseconds, and tests build thousands of executors.
    static const Shared shared = MakeShared();
    blas = shared.blas;
    lt = shared.lt;
    workspace_ptr = shared.workspace;
    PlanMemory();
    for (OpId id : order) PlanOp(g.op(id));
  }

  ~Impl() {
    if (graph_exec) cudaGraphExecDestroy(graph_exec);
    if (graph) cudaGraphDestroy(graph);
    for (auto d : lt_descs) cublasLtMatmulDescDestroy(d);
    for (auto l : lt_layouts) cublasLtMatrixLayoutDestroy(l);
    if (stream) cudaStreamDestroy(stream);
  }

  struct Shared {
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void* workspace;
  };
  static Shared MakeShared() {
    Shared s{};
    HFUSE_CUBLAS(cublasCreate(&s.blas));
    HFUSE_CUBLAS(cublasLtCreate(&s.lt));
    HFUSE_CUDA(cudaMalloc(&s.workspace, kWorkspaceBytes));
    return s;
  }
  void* workspace_ptr = nullptr;

  std::vector<OpId> order;

  // ---- memory plan -----------------------------------------------------------

  int64_t Bytes(TensorId t) const { return cuda::DeviceTensorBytes(g, dims, t); }
  TensorId StorageOf(TensorId t) const { return cuda::StorageOf(g, t); }

  void PlanMemory() {
    cuda::MemoryPlan plan = cuda::PlanDeviceMemory(g, dims);
    order = std::move(plan.order);
    offset = std::move(plan.offset);
    region = std::move(plan.region);
    stats.tensor_bytes = plan.tensor_bytes;
    stats.arena_bytes = plan.arena_bytes;
    inputs_arena.Allocate(plan.input_bytes);
    params_arena.Allocate(plan.param_bytes);
    outputs_arena.Allocate(plan.output_bytes);
    arena.Allocate(plan.arena_bytes);
  }

  char* BufferOf(TensorId s) const {
    switch (region[static_cast<size_t>(s)]) {
      case 'i': return static_cast<char*>(inputs_arena.ptr) + offset[static_cast<size_t>(s)];
      case 'p': return static_cast<char*>(params_arena.ptr) + offset[static_cast<size_t>(s)];
      case 'o': return static_cast<char*>(outputs_arena.ptr) + offset[static_cast<size_t>(s)];
      case 'a': return static_cast<char*>(arena.ptr) + offset[static_cast<size_t>(s)];
      default: HFUSE_CHECK(false && "tensor has no buffer");
    }
    return nullptr;
  }

  Place PlaceOf(TensorId t) const {
    const Tensor& tensor = g.tensor(t);
    const TensorId s = StorageOf(t);
    const std::vector<int64_t> shape = ConcreteShape(g.tensor(s).shape, dims);
    Place p;
    p.row_stride = shape.empty() ? 1 : shape.back();
    p.base = BufferOf(s) + (tensor.storage == kNone ? 0 : tensor.storage_offset * DTypeBytes(tensor.dtype));
    return p;
  }

  template <typename T>
  const T* Device(const std::vector<T>& host) {
    descriptors.push_back(std::make_unique<DeviceBuffer>());
    descriptors.back()->Upload(host);
    return static_cast<const T*>(descriptors.back()->ptr);
  }

  // ---- per-op launch plans -----------------------------------------------------

  void PlanOp(const Op& op) {
    if (op.elided) return;
    current = op.name;
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
      case OpFamily::kElementwise: PlanElementwise(op); break;
      case OpFamily::kReshape: {
        char* dst = PlaceOf(op.outputs[0]).base;
        const char* src = PlaceOf(op.inputs[0]).base;
        const auto bytes = static_cast<size_t>(Bytes(op.outputs[0]));
        Add("copy", [=](cudaStream_t s) {
          HFUSE_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        });
        break;
      }
      default:
        throw CudaError(fmt::format("op '{}': {} cannot run on the GPU", op.name, OpTypeName(op.type)));
    }
  }

  void PlanGemm(const Op& op) {
    const bool group = IsGroupGemm(op.type);
    const OpType member_type = group ? MemberOf(op.type) : op.type;
    const DType dtype = g.tensor(op.inputs[0]).dtype;
    const std::optional<EwFunc> activation = ActivationOf(member_type);
    const int act = activation ? static_cast<int>(*activation) : cuda::kNoActivation;
    std::vector<cuda::DeviceGemm> ms;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      const hfuse::GemmMember member = GemmMemberOf(op, i);
      const std::vector<int64_t> a_shape = ConcreteShape(g.tensor(member.a).shape, dims);
      const Place a = PlaceOf(member.a), y = PlaceOf(member.y);
      cuda::DeviceGemm m;
      m.a = a.base;
      m.w = PlaceOf(member.w).base;
      m.bias = member.bias != kNone ? PlaceOf(member.bias).base : nullptr;
      m.y = y.base;
      m.k = a_shape.back();
      m.m = NumRows(a_shape);
      m.n = ConcreteShape(g.tensor(member.w).shape, dims)[0];
      m.lda = a.row_stride;
      m.ldy = y.row_stride;
      ms.push_back(m);
    }
    const float alpha = static_cast<float>(op.attrs.Alpha());
    if (!group || (options.strided_batched && cuda::IsStridedBatch(ms))) {
      PlanLtGemm(ms, dtype, alpha, act);
      return;
    }
    std::string why = !options.cutlass ? "CUTLASS off" : alpha != 1.0f ? "alpha is not 1" : "";
    if (why.empty() && PlanCutlassGemm(ms, dtype, act, why)) return;
    PlanGroupedGemm(ms, dtype, alpha, act, why);
  }

  // One CUTLASS grouped GEMM, bias and activation in its epilogue; false
  // (and why) when CUTLASS cannot take the members.
  bool PlanCutlassGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, int act, std::string& why) {
    const cuda::GemmMemberSplit split = cuda::SplitGemmMembers(ms);
    std::vector<cuda::GroupedGemmMember> members;
    for (const cuda::DeviceGemm& m : split.products) {
      members.push_back({m.a, m.w, m.bias, m.y, m.m, m.n, m.k, m.lda, m.ldy});
    }
    const int type = KernelType(dtype);
    why = cuda::CutlassCannotTake(type, members, act);
    if (!why.empty()) return false;
    if (!split.bias_only.empty()) PlanEpilogue(split.bias_only, dtype, act, true);
    if (members.empty()) return true;
    static const int num_sms = [] {
      int device = 0, sms = 0;
      HFUSE_CUDA(cudaGetDevice(&device));
      HFUSE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      return sms;
    }();
    const cuda::GemmKernel kernel =
        options.gemm_kernel == GemmKernelChoice::k128x128 || type != 0 ? cuda::GemmKernel::kTile128x128
        : options.gemm_kernel == GemmKernelChoice::k128x64             ? cuda::GemmKernel::kTile128x64
                                                                       : cuda::ChooseGemmKernel(type, members, num_sms);
    cutlass_gemms.push_back(cuda::MakeCutlassGroupedGemm(type, kernel, members, act));
    cuda::CutlassGroupedGemm* gemm = cutlass_gemms.back().get();
    std::string epi = ms[0].bias ? "bias" : "";
    if (act != cuda::kNoActivation) {
      epi += std::string(epi.empty() ? "" : "+") + std::string(EwFuncName(static_cast<EwFunc>(act)));
    }
    Add(fmt::format("CUTLASS grouped {}{}", cuda::GemmKernelName(kernel), epi.empty() ? "" : ", " + epi + " in epilogue"),
        [gemm](cudaStream_t s) {
          gemm->Run(s);
          HFUSE_LAUNCHED();
        });
    return true;
  }

  static int64_t NumRows(const std::vector<int64_t>& shape) {
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    return r;
  }

  void PlanLtGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act) {
    const cuda::DeviceGemm& m = ms[0];
    const int64_t batch = static_cast<int64_t>(ms.size());
    const int64_t esize = DTypeBytes(dtype);
    if (m.m == 0 || m.n == 0) return;
    if (m.k == 0) {  // no products: y = bias, then the activation
      PlanEpilogue(ms, dtype, act, /*zero_first=*/true);
      return;
    }
    cublasLtMatmulDesc_t desc;
    HFUSE_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    lt_descs.push_back(desc);
    const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    const bool relu = act == static_cast<int>(EwFunc::kRelu);
    if (m.bias) epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (m.bias) {
      const void* bias = m.bias;
      HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
      const cudaDataType_t bt = CudaType(dtype);
      HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
      if (batch > 1) {
        const int64_t stride = (ms[1].bias - m.bias) / esize;
        HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &stride, sizeof(stride)));
      }
    }
    // Column-major view: D (n x m, ld ldy) = op(W) (n x k) . A^T (k x m).
    auto layout = [&](uint64_t rows, uint64_t cols, int64_t ld, int64_t stride) {
      cublasLtMatrixLayout_t l;
      HFUSE_CUBLAS(cublasLtMatrixLayoutCreate(&l, CudaType(dtype), rows, cols, ld));
      if (batch > 1) {
        const int32_t count = static_cast<int32_t>(batch);
        HFUSE_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        HFUSE_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      }
      lt_layouts.push_back(l);
      return l;
    };
    auto stride_of = [&](auto member_ptr) -> int64_t {
      return batch > 1 ? (ms[1].*member_ptr - m.*member_ptr) / esize : 0;
    };
    const cublasLtMatrixLayout_t lw = layout(static_cast<uint64_t>(m.k), static_cast<uint64_t>(m.n), m.k, stride_of(&cuda::DeviceGemm::w));
    const cublasLtMatrixLayout_t la = layout(static_cast<uint64_t>(m.k), static_cast<uint64_t>(m.m), m.lda, stride_of(&cuda::DeviceGemm::a));
    const cublasLtMatrixLayout_t ly = layout(static_cast<uint64_t>(m.n), static_cast<uint64_t>(m.m), m.ldy, stride_of(&cuda::DeviceGemm::y));
    cublasLtMatmulPreference_t pref;
    HFUSE_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kWorkspaceBytes;
    HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // The heuristic assumes 256-byte aligned operands unless told otherwise;
    // views and packed params can sit at any element offset.
    auto alignment = [&](auto member_ptr) {
      uint32_t a = 256;
      for (const cuda::DeviceGemm& mm : ms) {
        while (a > 1 && reinterpret_cast<uintptr_t>(mm.*member_ptr) % a != 0) a /= 2;
      }
      return a;
    };
    const uint32_t align_w = alignment(&cuda::DeviceGemm::w), align_a = alignment(&cuda::DeviceGemm::a),
                   align_y = alignment(&cuda::DeviceGemm::y);
    HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w, sizeof(align_w)));
    HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a, sizeof(align_a)));
    HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_y, sizeof(align_y)));
    HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_y, sizeof(align_y)));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, lw, la, ly, ly, pref, 1, &heur, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    HFUSE_CUBLAS(hs);
    if (found == 0) throw CudaError("cuBLASLt found no algorithm for a GEMM");
    const cublasLtMatmulAlgo_t algo = heur.algo;
    const void *w = m.w, *a = m.a;
    void* y = m.y;
    void* wsp = workspace_ptr;
    const float beta = 0.0f;
    cublasLtHandle_t handle = lt;
    Add(batch > 1 ? "cublasLt strided batched" : "cublasLt", [=](cudaStream_t s) {
      HFUSE_CUBLAS(cublasLtMatmul(handle, desc, &alpha, w, lw, a, la, &beta, y, ly, y, ly, &algo, wsp, ws, s));
    });
    if (act != cuda::kNoActivation && !relu) {  // cuBLASLt's only activation epilogue is relu
      std::vector<cuda::DeviceGemm> no_bias = ms;
      for (auto& mm : no_bias) mm.bias = nullptr;
      PlanEpilogue(no_bias, dtype, act, false);
    }
  }

  void PlanGroupedGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act,
                       const std::string& why) {
    std::vector<cublasOperation_t> ta, tb;
    std::vector<int> m_arr, n_arr, k_arr, lda, ldb, ldc, sizes;
    std::vector<float> alphas, betas;
    std::vector<const void*> a_ptrs, b_ptrs;
    std::vector<void*> c_ptrs;
    const cuda::GemmMemberSplit split = cuda::SplitGemmMembers(ms);
    for (const cuda::DeviceGemm& m : split.products) {
      ta.push_back(CUBLAS_OP_T);
      tb.push_back(CUBLAS_OP_N);
      m_arr.push_back(static_cast<int>(m.n));
      n_arr.push_back(static_cast<int>(m.m));
      k_arr.push_back(static_cast<int>(m.k));
      lda.push_back(static_cast<int>(m.k));
      ldb.push_back(static_cast<int>(m.lda));
      ldc.push_back(static_cast<int>(m.ldy));
      alphas.push_back(alpha);
      betas.push_back(0.0f);
      a_ptrs.push_back(m.w);
      b_ptrs.push_back(m.a);
      c_ptrs.push_back(m.y);
      sizes.push_back(1);
    }
    if (!split.bias_only.empty()) PlanEpilogue(split.bias_only, dtype, act, true);
    if (!ta.empty()) {
      const void* const* da = Device(a_ptrs);
      const void* const* db = Device(b_ptrs);
      void* const* dc = const_cast<void* const*>(Device(c_ptrs));
      const cudaDataType_t type = CudaType(dtype);
      cublasHandle_t handle = blas;
      const int count = static_cast<int>(ta.size());
      Add(why.empty() ? std::string("cublasGemmGroupedBatchedEx")
                      : fmt::format("cublasGemmGroupedBatchedEx, not CUTLASS: {}", why),
          [=](cudaStream_t s) {
        HFUSE_CUBLAS(cublasSetStream(handle, s));
        HFUSE_CUBLAS(cublasGemmGroupedBatchedEx(handle, ta.data(), tb.data(), m_arr.data(), n_arr.data(),
                                                k_arr.data(), alphas.data(), da, type, lda.data(), db, type,
                                                ldb.data(), betas.data(), dc, type, ldc.data(), count,
                                                sizes.data(), CUBLAS_COMPUTE_32F));
      });
    }
    const std::vector<cuda::DeviceGemm>& rest = split.products;
    if (!rest.empty() && (rest[0].bias || act != cuda::kNoActivation)) PlanEpilogue(rest, dtype, act, false);
  }

  // Bias + activation over each member's output, in one launch. With
  // zero_first, the outputs are cleared first (GEMMs with K = 0).
  void PlanEpilogue(const std::vector<cuda::DeviceGemm>& ms, DType dtype, int act, bool zero_first) {
    std::vector<cuda::EpilogueDesc> descs;
    std::vector<cuda::EpilogueTile> tiles;
    const int vec = 16 / DTypeBytes(dtype);
    for (const cuda::DeviceGemm& m : ms) {
      auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
      const int32_t v = m.n % vec == 0 && m.ldy % vec == 0 && aligned(m.y) && (!m.bias || aligned(m.bias));
      descs.push_back({m.y, m.bias, m.m, m.n, m.ldy, v});
      // About 16K elements a tile.
      const int64_t rows_per_tile = std::max<int64_t>(1, 16384 / std::max<int64_t>(m.n, 1));
      for (int64_t r = 0; r < m.m; r += rows_per_tile) {
        tiles.push_back({static_cast<int32_t>(descs.size() - 1), static_cast<int32_t>(r),
                         static_cast<int32_t>(std::min(rows_per_tile, m.m - r))});
      }
      if (zero_first) {
        char* y = m.y;
        const size_t pitch = static_cast<size_t>(m.ldy * DTypeBytes(dtype));
        const size_t width = static_cast<size_t>(m.n * DTypeBytes(dtype));
        const size_t rows = static_cast<size_t>(m.m);
        Add("clear", [=](cudaStream_t s) { HFUSE_CUDA(cudaMemset2DAsync(y, pitch, 0, width, rows, s)); });
      }
    }
    const cuda::EpilogueDesc* d = Device(descs);
    const cuda::EpilogueTile* t = Device(tiles);
    const int num_tiles = static_cast<int>(tiles.size());
    const int type = KernelType(dtype);
    const int a = act;
    Add("epilogue kernel", [=](cudaStream_t s) {
      cuda::LaunchGroupEpilogue(type, d, t, num_tiles, a, s);
      HFUSE_LAUNCHED();
    });
  }

  void PlanLayerNorm(const Op& op) {
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
      const Place px = PlaceOf(x), py = PlaceOf(y);
      const int64_t numel = Bytes(x) / DTypeBytes(dtype);
      const int64_t rows = n > 0 ? numel / n : 0;
      // Views are rows of the last dim; a normalized size spanning several
      // dims needs the tensor contiguous, which a view is only if it is whole.
      const int64_t last = ConcreteShape(g.tensor(x).shape, dims).back();
      const int64_t xs = n == last ? px.row_stride : n, ys = n == last ? py.row_stride : n;
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
    const int type = KernelType(dtype);
    Add(fmt::format("layernorm kernel, {} member{}", members, members == 1 ? "" : "s"), [=](cudaStream_t s) {
      cuda::LaunchGroupLayerNorm(type, dd, tt, num_tiles, eps, lsm, s);
      HFUSE_LAUNCHED();
    });
  }

  void PlanCopies(const Op& op) {
    const bool split = op.type == OpType::kSplit;
    const TensorId whole = split ? op.inputs[0] : op.outputs[0];
    const std::vector<int64_t> shape = ConcreteShape(g.tensor(whole).shape, dims);
    const auto rank = static_cast<int64_t>(shape.size());
    const auto axis = static_cast<size_t>(op.attrs.dim < 0 ? op.attrs.dim + rank : op.attrs.dim);
    int64_t outer = 1, inner = DTypeBytes(g.tensor(whole).dtype);
    for (size_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    const std::vector<TensorId>& parts = split ? op.outputs : op.inputs;
    const Place pw = PlaceOf(whole);
    int64_t at = 0;
    for (TensorId part : parts) {
      const int64_t size = ConcreteShape(g.tensor(part).shape, dims)[axis];
      const Place pp = PlaceOf(part);
      const auto width = static_cast<size_t>(size * inner);
      const auto whole_pitch = static_cast<size_t>(shape[axis] * inner);
      char* whole_ptr = pw.base + at * inner;
      char* part_ptr = pp.base;
      const auto rows = static_cast<size_t>(outer);
      if (width > 0 && rows > 0) {
        Add("copy 2D", [=](cudaStream_t s) {
          if (split) {
            HFUSE_CUDA(cudaMemcpy2DAsync(part_ptr, width, whole_ptr, whole_pitch, width, rows, cudaMemcpyDeviceToDevice, s));
          } else {
            HFUSE_CUDA(cudaMemcpy2DAsync(whole_ptr, whole_pitch, part_ptr, width, width, rows, cudaMemcpyDeviceToDevice, s));
          }
        });
      }
      at += size;
    }
  }

  void PlanElementwise(const Op& op) {
    if (op.inputs.size() > 4) throw CudaError(fmt::format("op '{}': more than 4 elementwise inputs", op.name));
    const std::vector<int64_t> out = ConcreteShape(g.tensor(op.outputs[0]).shape, dims);
    if (out.size() > 6) throw CudaError(fmt::format("op '{}': rank above 6", op.name));
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
      args.in[k] = PlaceOf(op.inputs[k]).base;
      const std::vector<int64_t> s = ConcreteShape(g.tensor(op.inputs[k]).shape, dims);
      int64_t stride = 1;
      for (size_t d = s.size(); d-- > 0;) {
        args.in_strides[k][out.size() - s.size() + d] = s[d] == 1 ? 0 : stride;
        stride *= s[d];
      }
    }
    args.out = PlaceOf(op.outputs[0]).base;
    const int type = KernelType(g.tensor(op.outputs[0]).dtype);
    Add("elementwise kernel", [=](cudaStream_t s) {
      cuda::LaunchElementwise(type, args, s);
      HFUSE_LAUNCHED();
    });
  }

  void Enqueue() {
    for (auto& launch : launches) launch(stream);
  }
};

CudaExecutor::CudaExecutor(const Graph& graph, const DimValues& dims, CudaOptions options)
    : impl_(std::make_unique<Impl>(graph, dims, options)) {
  impl_->stats.launches = static_cast<int64_t>(impl_->launches.size());
}

CudaExecutor::~CudaExecutor() = default;

void CudaExecutor::SetFeeds(const TensorMap& feeds) {
  const Graph& g = impl_->g;
  for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
    const Tensor& t = g.tensor(id);
    if (!t.alive || t.role == Role::kIntermediate || !impl_->region[static_cast<size_t>(id)]) continue;
    auto it = feeds.find(t.name);
    if (it == feeds.end()) ThrowInputError("no value given for '{}'", t.name);
    const std::vector<int64_t> want = ConcreteShape(t.shape, impl_->dims);
    if (it->second.dtype != t.dtype || it->second.shape != want) {
      ThrowInputError("value for '{}' has the wrong dtype or shape", t.name);
    }
    HFUSE_CUDA(cudaMemcpyAsync(impl_->BufferOf(id), it->second.bytes.data(), it->second.bytes.size(),
                               cudaMemcpyHostToDevice, impl_->stream));
    HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
  }
}

void CudaExecutor::Poison() {
  // On the executor's stream: a plain cudaMemset runs on the legacy default
  // stream, which does not order against a non-blocking stream.
  for (DeviceBuffer* b : {&impl_->outputs_arena, &impl_->arena}) {
    if (b->bytes) HFUSE_CUDA(cudaMemsetAsync(b->ptr, 0xFF, static_cast<size_t>(b->bytes), impl_->stream));
  }
  HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
}

void CudaExecutor::Run() {
  impl_->Enqueue();
  HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
}

void CudaExecutor::RunGraph() {
  if (!impl_->graph_exec) {
    HFUSE_CUDA(cudaStreamBeginCapture(impl_->stream, cudaStreamCaptureModeThreadLocal));
    impl_->Enqueue();
    HFUSE_CUDA(cudaStreamEndCapture(impl_->stream, &impl_->graph));
    HFUSE_CUDA(cudaGraphInstantiate(&impl_->graph_exec, impl_->graph, 0));
  }
  HFUSE_CUDA(cudaGraphLaunch(impl_->graph_exec, impl_->stream));
  HFUSE_CUDA(cudaStreamSynchronize(impl_->stream));
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
  HFUSE_CHECK(impl_->region[static_cast<size_t>(impl_->StorageOf(id))] != 0);
  return impl_->PlaceOf(id).base;
}

void* CudaExecutor::Stream() const { return impl_->stream; }

double CudaExecutor::MedianMicros(int warmup, int reps, bool use_graph) {
  for (int i = 0; i < warmup; ++i) use_graph ? RunGraph() : Run();
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
  std::nth_element(times.begin(), times.begin() + static_cast<ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

const CudaRunStats& CudaExecutor::stats() const { return impl_->stats; }

const std::vector<double>& CudaExecutor::LaunchOpBytes() const { return impl_->op_bytes; }

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
