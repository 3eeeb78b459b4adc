// Fused elementwise chains: the kernel source of a chain, NVRTC, the
// kernel cache (fused_elementwise.h).
#include "fused_elementwise.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <bit>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "hfuse/cuda/cuda_executor.h"

namespace hfuse::cuda {
namespace {

// Each OnnxFunc's formula as text: the very expressions the kernels'
// switch compiles (float_funcs.def).
const char* Expression(int32_t func) {
  switch (func) {
#define HFUSE_FLOAT_FUNC(Func, expression) \
  case Func: return #expression;
#include "float_funcs.def"
#undef HFUSE_FLOAT_FUNC
    default: return nullptr;
  }
}

// A float constant exactly, whatever it is (an infinite Clip bound too).
std::string FloatLiteral(float f) { return fmt::format("__int_as_float(0x{:08x})", std::bit_cast<uint32_t>(f)); }

void CheckNvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw CudaError(fmt::format("NVRTC: {}: {}", what, nvrtcGetErrorString(r)));
}

void CheckRuntime(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(fmt::format("CUDA error: {}: {}", what, cudaGetErrorString(e)));
}

}  // namespace

bool FusableFunc(int32_t func) { return Expression(func) != nullptr; }

std::string FusedElementwiseSource(const FusedElementwiseArgs& a) {
  std::string params;
  for (int k = 0; k < a.num_inputs; ++k) params += fmt::format("const float* __restrict__ in{}, ", k);
  std::string s = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256) hfuse_chain({}float* __restrict__ out) {{\n"
      "  for (unsigned e = blockIdx.x * 256u + threadIdx.x; e < {}u; e += gridDim.x * 256u) {{\n"
      "    unsigned rest = e;\n    int o = 0",
      params, a.numel);
  for (int k = 0; k < a.num_inputs; ++k) s += fmt::format(", k{} = 0", k);
  s += ";\n";
  // Dims from the innermost out; the outermost takes what is left.
  for (int d = a.rank - 1; d >= 0; --d) {
    if (a.shape[d] == 1) continue;
    std::string terms;
    if (a.out_strides[d] != 0) terms += fmt::format(" o += i * {};", a.out_strides[d]);
    for (int k = 0; k < a.num_inputs; ++k) {
      if (a.in[k].strides[d] != 0) terms += fmt::format(" k{} += i * {};", k, a.in[k].strides[d]);
    }
    if (d == 0) {
      s += fmt::format("    {{ const int i = static_cast<int>(rest);{} }}\n", terms);
    } else {
      s += fmt::format("    {{ const int i = static_cast<int>(rest % {}u); rest /= {}u;{} }}\n", a.shape[d],
                       a.shape[d], terms);
    }
  }
  for (int k = 0; k < a.num_inputs; ++k) s += fmt::format("    const float r{} = in{}[k{}];\n", k, k, k);
  auto reg = [&](int r) { return fmt::format("r{}", r); };
  for (int t = 0; t < a.num_steps; ++t) {
    const FusedStep& st = a.steps[t];
    const char* expression = Expression(st.func);
    if (!expression) throw CudaError(fmt::format("fused elementwise chain: no formula for function {}", st.func));
    s += fmt::format(
        "    float r{};\n    {{ const float u = {}, v = {}, w = {}; const float alpha = {}, beta = {};\n"
        "      (void)u; (void)v; (void)w; (void)alpha; (void)beta;\n      r{} = ({}); }}\n",
        kMaxFusedInputs + t, reg(st.arg[0]), reg(st.arg[1]), reg(st.arg[2]), FloatLiteral(st.alpha),
        FloatLiteral(st.beta), kMaxFusedInputs + t, expression);
  }
  s += fmt::format("    out[o] = r{};\n  }}\n}}\n", kMaxFusedInputs + a.num_steps - 1);
  return s;
}

std::vector<char> CompileFusedSource(const std::string& source, const std::string& arch) {
  nvrtcProgram program = nullptr;
  CheckNvrtc(nvrtcCreateProgram(&program, source.c_str(), "hfuse_chain.cu", 0, nullptr, nullptr),
             "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) {
    nvrtcDestroyProgram(p);
  });
  const std::string arch_option = "--gpu-architecture=" + arch;
  const char* options[] = {arch_option.c_str(), "--std=c++17"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 2, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(program, &n);
    std::string log(n, '\0');
    if (n > 0) nvrtcGetProgramLog(program, log.data());
    throw CudaError(fmt::format("NVRTC could not compile a fused kernel: {}\n{}\n{}",
                                nvrtcGetErrorString(compiled), log, source));
  }
  size_t bytes = 0;
  CheckNvrtc(nvrtcGetCUBINSize(program, &bytes), "nvrtcGetCUBINSize");
  std::vector<char> cubin(bytes);
  CheckNvrtc(nvrtcGetCUBIN(program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

cudaKernel_t CompiledKernel(const std::string& source, const char* name) {
  // One library per distinct source and device, loaded for the process's life.
  static std::mutex mutex;
  static std::map<std::pair<int, std::string>, cudaKernel_t> cache;
  int device = 0;
  CheckRuntime(cudaGetDevice(&device), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({device, source});
  if (it != cache.end()) return it->second;
  int major = 0, minor = 0;
  CheckRuntime(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
  CheckRuntime(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
  const std::vector<char> cubin = CompileFusedSource(source, fmt::format("sm_{}{}", major, minor));
  cudaLibrary_t library = nullptr;
  CheckRuntime(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
               "cudaLibraryLoadData (a fused kernel)");
  cudaKernel_t kernel = nullptr;
  CheckRuntime(cudaLibraryGetKernel(&kernel, library, name), "cudaLibraryGetKernel");
  cache.emplace(std::make_pair(device, source), kernel);
  return kernel;
}

cudaKernel_t FusedElementwiseKernel(const FusedElementwiseArgs& args) {
  return CompiledKernel(FusedElementwiseSource(args), "hfuse_chain");
}

void LaunchFusedElementwise(cudaKernel_t kernel, const FusedElementwiseArgs& args, cudaStream_t stream) {
  if (args.numel == 0) return;
  const void* pointers[kMaxFusedInputs + 1];
  void* params[kMaxFusedInputs + 1];
  for (int k = 0; k < args.num_inputs; ++k) {
    pointers[k] = args.in[k].ptr;
    params[k] = &pointers[k];
  }
  pointers[args.num_inputs] = args.out;
  params[args.num_inputs] = &pointers[args.num_inputs];
  const int64_t blocks = std::min<int64_t>((args.numel + 255) / 256, 65536);
  CheckRuntime(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)),
                                dim3(256), params, 0, stream),
               "cudaLaunchKernel (a fused elementwise chain)");
}

namespace {

// The dims of `over` with cols[d] == `column` (extent above 1), innermost
// first, adjacent ones merged where the strides run on across them (the
// outer stride the inner run's stride times its extent, zeros included):
// a contiguous operand is one run, its offset the index itself.
struct DimRun {
  int64_t extent, stride, inner;  // inner: the extent of the dims inside the run
};
std::vector<DimRun> DimRuns(const std::vector<int64_t>& over, const std::vector<int64_t>& strides,
                            const std::vector<bool>& cols, bool column) {
  std::vector<DimRun> runs;
  int64_t inner = 1;
  for (size_t d = over.size(); d-- > 0;) {
    if (cols[d] != column || over[d] == 1) continue;
    if (!runs.empty() && strides[d] == runs.back().stride * runs.back().extent) {
      runs.back().extent *= over[d];
    } else {
      runs.push_back({over[d], strides[d], inner});
    }
    inner *= over[d];
  }
  return runs;
}

// The offset of an operand over the dims of `over` where cols[d] is
// `column` (row-major among them), for the index `index` (a C++
// expression), as a sum of `long long` terms: "0" when every stride is 0.
std::string OffsetExpression(const std::vector<int64_t>& over, const std::vector<int64_t>& strides,
                             const std::vector<bool>& cols, bool column, const std::string& index) {
  const std::vector<DimRun> runs = DimRuns(over, strides, cols, column);
  std::string terms;
  for (size_t i = 0; i < runs.size(); ++i) {
    const DimRun& run = runs[i];
    if (run.stride == 0) continue;
    std::string at = run.inner == 1 ? index : fmt::format("({} / {}u)", index, run.inner);
    if (i + 1 < runs.size()) at = fmt::format("({} % {}u)", at, run.extent);  // the outermost takes what is left
    terms += fmt::format(" + static_cast<long long>({}) * {}", at, run.stride);
  }
  return terms.empty() ? "0" : "0" + terms;
}

// Whether rows r..r+3 (r a multiple of 4) of a one-column region lie at
// q..q+3 of an operand laid out over `over` with `strides`, q a multiple of
// 4: its innermost run contiguous over a multiple of 4, every other stride a
// multiple of 4.
bool QuadContiguous(const std::vector<int64_t>& over, const std::vector<int64_t>& strides,
                    const std::vector<bool>& cols) {
  const std::vector<DimRun> runs = DimRuns(over, strides, cols, false);
  if (runs.empty() || runs[0].stride != 1 || runs[0].inner != 1 || runs[0].extent % 4 != 0) return false;
  for (size_t i = 1; i < runs.size(); ++i) {
    if (runs[i].stride % 4 != 0) return false;
  }
  return true;
}

// A map step's statement: `into` = its formula of u, v, w.
std::string MapText(const RegionStep& st, const std::string& u, const std::string& v, const std::string& w,
                    const std::string& into) {
  const char* expression = Expression(st.func);
  if (!expression) throw CudaError(fmt::format("fused region: no formula for function {}", st.func));
  return fmt::format(
      "    {{ const float u = {}, v = {}, w = {}; const float alpha = {}, beta = {};\n"
      "      (void)u; (void)v; (void)w; (void)alpha; (void)beta;\n      {} = ({}); }}\n",
      u, v, w, FloatLiteral(st.alpha), FloatLiteral(st.beta), into, expression);
}

const char* ReduceInitText(int32_t kind) {
  return kind == kReduceMax ? "__int_as_float(0xff800000)" : kind == kReduceMin ? "__int_as_float(0x7f800000)"
         : kind == kReduceProd                                 ? "1.0f"
                                                               : "0.0f";
}
std::string ReduceTermText(int32_t kind, const std::string& acc, const std::string& v) {
  switch (kind) {
    case kReduceMax: return fmt::format("fmaxf({}, {})", acc, v);
    case kReduceMin: return fmt::format("fminf({}, {})", acc, v);
    case kReduceProd: return fmt::format("{} * {}", acc, v);
    case kReduceL1: return fmt::format("{} + fabsf({})", acc, v);
    case kReduceL2:
    case kReduceSumSquare: return fmt::format("{} + {} * {}", acc, v, v);
    default: return fmt::format("{} + {}", acc, v);
  }
}
std::string ReduceCombineText(int32_t kind, const std::string& a, const std::string& b) {
  switch (kind) {
    case kReduceMax: return fmt::format("fmaxf({}, {})", a, b);
    case kReduceMin: return fmt::format("fminf({}, {})", a, b);
    case kReduceProd: return fmt::format("{} * {}", a, b);
    default: return fmt::format("{} + {}", a, b);
  }
}

// How a region's kernel holds a tensor of type t (RegionFloat): float32 as
// float, float16 and bfloat16 as their 16-bit patterns, read into float32
// and rounded back to nearest even when written, by the functions of
// ConversionText (no header: NVRTC compiles the source alone).
const char* ElementText(DType t) { return t == DType::kFloat32 ? "float" : "unsigned short"; }
std::string LoadText(DType t, const std::string& e) {
  return t == DType::kFloat16    ? fmt::format("hfuse_from_f16({})", e)
         : t == DType::kBFloat16 ? fmt::format("hfuse_from_bf16({})", e)
                                 : e;
}
std::string StoreText(DType t, const std::string& v) {
  return t == DType::kFloat16    ? fmt::format("hfuse_to_f16({})", v)
         : t == DType::kBFloat16 ? fmt::format("hfuse_to_bf16({})", v)
                                 : v;
}
// The conversions, where a region has a 16-bit tensor ("" otherwise: a
// float32 region's source is as before).
std::string ConversionText(const FusionRegion& r) {
  bool half = false;
  for (const RegionOperand& o : r.operands) half = half || o.dtype != DType::kFloat32;
  for (const RegionOutput& o : r.outputs) half = half || o.dtype != DType::kFloat32;
  for (const RegionProduct& q : r.products) half = half || q.dtype != DType::kFloat32;
  if (!half) return "";
  return "__device__ __forceinline__ float hfuse_from_bf16(unsigned short x) {\n"
         "  return __uint_as_float(static_cast<unsigned>(x) << 16);\n}\n"
         "__device__ __forceinline__ unsigned short hfuse_to_bf16(float f) {\n"
         "  const unsigned u = __float_as_uint(f);\n"
         "  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);\n"
         "  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n}\n"
         "__device__ __forceinline__ float hfuse_from_f16(unsigned short x) {\n"
         "  float f;\n  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(x));\n  return f;\n}\n"
         "__device__ __forceinline__ unsigned short hfuse_to_f16(float f) {\n"
         "  unsigned short h;\n  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n  return h;\n}\n";
}

// The kernel's parameters: operand k as in{k}, output o as out{o}, each of its type.
std::string RegionParams(const FusionRegion& r) {
  std::string params;
  for (size_t k = 0; k < r.operands.size(); ++k) {
    params += fmt::format("const {}* __restrict__ in{}, ", ElementText(r.operands[k].dtype), k);
  }
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    params += fmt::format("{}* __restrict__ out{}{}", ElementText(r.outputs[o].dtype), o,
                          o + 1 < r.outputs.size() ? ", " : "");
  }
  return params;
}

// A one-column region's kernel, four rows a thread (RegionRowsPerThread):
// an operand whose four rows lie contiguous (QuadContiguous) is read as one
// float4 (four 16-bit values: one uint2) and an output so written, where
// its address is so aligned (a test the whole grid takes alike); other
// operands row by row, those one value for the domain once a thread.
std::string QuadRegionSource(const FusionRegion& r, const std::vector<std::vector<int64_t>>& strides) {
  const std::string params = RegionParams(r);
  enum class Read { kOnce, kQuad, kRows };
  std::vector<Read> read(r.operands.size());
  std::vector<std::pair<std::string, DType>> aligned;  // the pointers a float4 (uint2) goes through
  for (size_t k = 0; k < r.operands.size(); ++k) {
    const RegionOperand& o = r.operands[k];
    read[k] = OffsetExpression(o.over, strides[k], o.cols, false, "r") == "0" ? Read::kOnce
              : QuadContiguous(o.over, strides[k], o.cols)                   ? Read::kQuad
                                                                             : Read::kRows;
    if (read[k] == Read::kQuad) aligned.emplace_back(fmt::format("in{}", k), o.dtype);
  }
  std::vector<bool> quad_out(r.outputs.size());
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const RegionOutput& out = r.outputs[o];
    quad_out[o] = out.offset % 4 == 0 && QuadContiguous(out.shape, out.strides, out.cols);
    if (quad_out[o]) aligned.emplace_back(fmt::format("out{}", o), out.dtype);
  }
  std::string s = ConversionText(r) +
                  fmt::format("extern \"C\" __global__ void __launch_bounds__(256) hfuse_region({}) {{\n", params);
  for (const auto& [p, type] : aligned) {
    s += fmt::format("  const bool {}_aligned = (reinterpret_cast<unsigned long long>({}) & {}ull) == 0ull;\n", p, p,
                     type == DType::kFloat32 ? 15 : 7);
  }
  for (size_t k = 0; k < r.operands.size(); ++k) {
    if (read[k] == Read::kOnce) {
      s += fmt::format("  const float b{} = {};\n", k, LoadText(r.operands[k].dtype, fmt::format("in{}[0]", k)));
    }
  }
  s += fmt::format("  for (unsigned r = (blockIdx.x * 256u + threadIdx.x) * 4u; r < {}u; r += gridDim.x * 1024u) {{\n",
                   r.rows);
  auto row = [](int64_t j) { return j == 0 ? std::string("r") : fmt::format("(r + {}u)", j); };
  for (size_t k = 0; k < r.operands.size(); ++k) {
    const RegionOperand& o = r.operands[k];
    if (read[k] == Read::kOnce) continue;
    s += fmt::format("    float a{}[4];\n", k);
    auto load = [&](const std::string& e) { return LoadText(o.dtype, e); };
    if (read[k] == Read::kQuad && o.dtype != DType::kFloat32) {
      s += fmt::format(
          "    {{ const long long q = {};\n"
          "      if (in{}_aligned) {{ const uint2 t = *reinterpret_cast<const uint2*>(in{} + q);\n"
          "        a{}[0] = {}; a{}[1] = {}; a{}[2] = {}; a{}[3] = {}; }}\n"
          "      else {{ a{}[0] = {}; a{}[1] = {}; a{}[2] = {}; a{}[3] = {}; }} }}\n",
          OffsetExpression(o.over, strides[k], o.cols, false, "r"), k, k, k,
          load("static_cast<unsigned short>(t.x & 0xffffu)"), k, load("static_cast<unsigned short>(t.x >> 16)"), k,
          load("static_cast<unsigned short>(t.y & 0xffffu)"), k, load("static_cast<unsigned short>(t.y >> 16)"), k,
          load(fmt::format("in{}[q]", k)), k, load(fmt::format("in{}[q + 1]", k)), k,
          load(fmt::format("in{}[q + 2]", k)), k, load(fmt::format("in{}[q + 3]", k)));
      continue;
    }
    if (read[k] == Read::kQuad) {
      s += fmt::format(
          "    {{ const long long q = {};\n"
          "      if (in{}_aligned) {{ const float4 t = *reinterpret_cast<const float4*>(in{} + q);\n"
          "        a{}[0] = t.x; a{}[1] = t.y; a{}[2] = t.z; a{}[3] = t.w; }}\n"
          "      else {{ a{}[0] = in{}[q]; a{}[1] = in{}[q + 1]; a{}[2] = in{}[q + 2]; a{}[3] = in{}[q + 3]; }} }}\n",
          OffsetExpression(o.over, strides[k], o.cols, false, "r"), k, k, k, k, k, k, k, k, k, k, k, k, k, k);
      continue;
    }
    for (int64_t j = 0; j < 4; ++j) {
      s += fmt::format("    a{}[{}] = {};\n", k, j,
                       load(fmt::format("in{}[{}]", k, OffsetExpression(o.over, strides[k], o.cols, false, row(j)))));
    }
  }
  auto arg = [&](int32_t a, int64_t j) {
    if (a >= 0) return fmt::format("v{}[{}]", a, j);
    const auto k = static_cast<size_t>(-1 - a);
    return read[k] == Read::kOnce ? fmt::format("b{}", k) : fmt::format("a{}[{}]", k, j);
  };
  for (size_t t = 0; t < r.steps.size(); ++t) {
    const RegionStep& st = r.steps[t];
    s += fmt::format("    float v{}[4];\n", t);
    for (int64_t j = 0; j < 4; ++j) {
      const std::string u = arg(st.args[0], j);
      const std::string v = st.num_args > 1 ? arg(st.args[1], j) : u;
      const std::string w = st.num_args > 2 ? arg(st.args[2], j) : u;
      s += MapText(st, u, v, w, fmt::format("v{}[{}]", t, j));
    }
  }
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const RegionOutput& out = r.outputs[o];
    const int32_t t = out.step;
    auto store = [&](int64_t j) { return StoreText(out.dtype, fmt::format("v{}[{}]", t, j)); };
    if (quad_out[o] && out.dtype != DType::kFloat32) {
      s += fmt::format(
          "    {{ unsigned short* const p = out{} + {};\n"
          "      const unsigned short h0 = {}, h1 = {}, h2 = {}, h3 = {};\n"
          "      if (out{}_aligned) *reinterpret_cast<uint2*>(p) = make_uint2(h0 | (static_cast<unsigned>(h1) << 16), "
          "h2 | (static_cast<unsigned>(h3) << 16));\n"
          "      else {{ p[0] = h0; p[1] = h1; p[2] = h2; p[3] = h3; }} }}\n",
          o, OffsetExpression(out.shape, out.strides, out.cols, false, "r"), store(0), store(1), store(2),
          store(3), o);
      continue;
    }
    if (quad_out[o]) {
      s += fmt::format(
          "    {{ float* const p = out{} + {};\n"
          "      if (out{}_aligned) *reinterpret_cast<float4*>(p) = make_float4(v{}[0], v{}[1], v{}[2], v{}[3]);\n"
          "      else {{ p[0] = v{}[0]; p[1] = v{}[1]; p[2] = v{}[2]; p[3] = v{}[3]; }} }}\n",
          o, OffsetExpression(out.shape, out.strides, out.cols, false, "r"), o, t, t, t, t, t, t, t, t);
      continue;
    }
    for (int64_t j = 0; j < 4; ++j) {
      s += fmt::format("    out{}[{}] = {};\n", o, OffsetExpression(out.shape, out.strides, out.cols, false, row(j)),
                       store(j));
    }
  }
  return s + "  }\n}\n";
}

}  // namespace

int RegionRowsPerThread(const FusionRegion& r) {
  if (r.cols != 1 || r.rows % 4 != 0) return 1;
  for (const RegionStep& st : r.steps) {
    if (st.kind != RegionStep::Kind::kMap) return 1;
  }
  return 4;
}

// Calls f on each argument of step st (RegionStep::args: >= 0 a step's
// value, < 0 an operand), its parts too.
template <typename F>
void ForEachArg(const RegionStep& st, F f) {
  for (int32_t i = 0; i < st.num_args; ++i) f(st.args[i]);
  for (int32_t a : st.parts) f(a);
}

// Whether operand k is one value a row for every column of it (a lane
// reads it once): per row, a product's, or its offset the same along the
// row.
bool OneAlongRow(const RegionOperand& o, const std::vector<int64_t>& strides) {
  return o.per_row || o.product >= 0 || OffsetExpression(o.over, strides, o.cols, true, "c") == "0";
}

// What of a product region's program depends only on the products' row
// bm = r / N, the region's rows running along the products' N columns
// (ProductRegionSource): the operands whose offset does not change along
// N (a gate's logits, one set a batch row), and the steps of only such
// operands and steps (the gate's softmax). `stash`: the slot in a row's
// shared memory of each such step that other steps or outputs read (-1:
// none), `width` the floats a row.
// `preload`: the operands of one value a row that the rows' program
// reads, which the kernel loads for its 8 rows before their program
// (pre<k>[m]) rather than row by row, each row's loads waiting.
struct RowSplit {
  std::vector<bool> operand, step;
  std::vector<int32_t> stash;
  int64_t width = 0;
  std::vector<bool> preload;
};
// The most floats a row a block stashes (64 rows of them; more, and the
// rows' program computes it all), and the most operands preloaded.
constexpr int64_t kMaxStashWidth = 32;
constexpr int kMaxPreloads = 4;

RowSplit SplitByProductRow(const FusionRegion& r, const std::vector<std::vector<int64_t>>& strides) {
  const int64_t n = r.products.front().n;
  const RegionLanes lanes = LanesOf(r);
  RowSplit split;
  for (size_t k = 0; k < r.operands.size(); ++k) {
    const RegionOperand& o = r.operands[k];
    // The row dims inside the product's row (extents multiplying up to N
    // exactly, innermost first) all of stride 0.
    bool same = o.product < 0;
    int64_t inner = 1;
    for (size_t d = o.over.size(); same && inner < n && d-- > 0;) {
      if (o.cols[d] || o.over[d] == 1) continue;
      inner *= o.over[d];
      same = strides[k][d] == 0;
    }
    split.operand.push_back(same && inner == n);
  }
  const auto per_row = [&](int32_t a) {
    return a >= 0 ? static_cast<bool>(split.step[static_cast<size_t>(a)]) : split.operand[static_cast<size_t>(-1 - a)];
  };
  for (const RegionStep& st : r.steps) {
    bool same = true;
    ForEachArg(st, [&](int32_t a) { same = same && per_row(a); });
    split.step.push_back(same);
  }
  std::vector<bool> read(r.steps.size(), false);  // by a step of the rows' program or an output
  for (size_t t = 0; t < r.steps.size(); ++t) {
    if (split.step[t]) continue;
    ForEachArg(r.steps[t], [&](int32_t a) {
      if (a >= 0) read[static_cast<size_t>(a)] = true;
    });
  }
  for (const RegionOutput& out : r.outputs) read[static_cast<size_t>(out.step)] = true;
  split.stash.assign(r.steps.size(), -1);
  for (size_t t = 0; t < r.steps.size(); ++t) {
    if (!split.step[t] || !read[t]) continue;
    split.stash[t] = static_cast<int32_t>(split.width);
    split.width += r.steps[t].per_row ? 1 : lanes.per_lane;
  }
  if (split.width > kMaxStashWidth) {
    split.step.assign(r.steps.size(), false);
    split.stash.assign(r.steps.size(), -1);
    split.width = 0;
  }
  // The rows' program's operands (of steps not in the stash's program).
  std::vector<bool> used(r.operands.size(), false);
  for (size_t t = 0; t < r.steps.size(); ++t) {
    if (split.step[t]) continue;
    ForEachArg(r.steps[t], [&](int32_t a) {
      if (a < 0) used[static_cast<size_t>(-1 - a)] = true;
    });
  }
  split.preload.assign(r.operands.size(), false);
  int preloads = 0;
  for (size_t k = 0; k < r.operands.size() && preloads < kMaxPreloads; ++k) {
    const RegionOperand& o = r.operands[k];
    if (used[k] && o.product < 0 && OneAlongRow(o, strides[k])) split.preload[k] = true, ++preloads;
  }
  return split;
}

// Operand k's value at row `row` (a C++ expression), for one that is one
// value a row (OneAlongRow), as float.
std::string RowValueText(const RegionOperand& o, size_t k, const std::vector<int64_t>& strides, const std::string& row) {
  return LoadText(o.dtype, fmt::format("in{}[{}]", k, OffsetExpression(o.over, strides, o.cols, false, row)));
}

// Which part of a region's program RowProgram writes: all of it; or, for
// a product region with a RowSplit, the values a product row shares,
// stashed (threadIdx.x the row in the block's 64), or the rest, reading
// them from the stash (ty * 8 + m the row).
enum class ProgramPart { kAll, kRowPrologue, kRowMain };

// The program of a row of region r, for a kernel that has defined `r` (the
// row, unsigned), `valid` (whether it is one) and `lane` (of
// LanesOf(r).lanes): the operands' loads, the steps, the stores. An
// operand that reads a product takes prod<q>[m], the product's value at
// the thread's m-th row (ProductRegionSource). With a part other than
// kAll, the operands its steps read alone.
std::string RowProgram(const FusionRegion& r, const std::vector<std::vector<int64_t>>& strides,
                       ProgramPart part = ProgramPart::kAll, const RowSplit* split = nullptr) {
  const RegionLanes lanes = LanesOf(r);
  const bool exact = lanes.lanes * lanes.per_lane == r.cols;  // every lane's every column is in the row
  const auto emitted = [&](size_t t) {
    return part == ProgramPart::kAll || (part == ProgramPart::kRowPrologue) == static_cast<bool>(split->step[t]);
  };
  std::vector<bool> used(r.operands.size(), part == ProgramPart::kAll);
  for (size_t t = 0; t < r.steps.size(); ++t) {
    if (!emitted(t)) continue;
    ForEachArg(r.steps[t], [&](int32_t a) {
      if (a < 0) used[static_cast<size_t>(-1 - a)] = true;
    });
  }
  std::string s;
  // The columns of lane j: lane + j * lanes; in the row when below cols.
  auto column = [&](int64_t j) { return fmt::format("(lane + {}u)", j * lanes.lanes); };
  auto in_row = [&](int64_t j) {
    return exact ? std::string("true") : fmt::format("{} < {}u", column(j), r.cols);
  };
  // Operands: per-row values once, per-element ones for every column of the lane.
  // An operand the same along the row (a bias per row, a scalar) is one value a lane.
  std::vector<bool> one(r.operands.size());
  for (size_t k = 0; k < r.operands.size(); ++k) one[k] = OneAlongRow(r.operands[k], strides[k]);
  for (size_t k = 0; k < r.operands.size(); ++k) {
    const RegionOperand& o = r.operands[k];
    if (!used[k]) continue;
    if (o.product >= 0) {
      s += fmt::format("    const float b{} = prod{}[m];\n", k, o.product);
      continue;
    }
    if (part == ProgramPart::kRowMain && split->preload[k]) {
      s += fmt::format("    const float b{} = pre{}[m];\n", k, k);
      continue;
    }
    if (one[k]) {
      s += fmt::format("    const float b{} = {};\n", k, RowValueText(o, k, strides[k], "r"));
      continue;
    }
    const std::string row = OffsetExpression(o.over, strides[k], o.cols, false, "r");
    s += fmt::format("    float a{}[{}];\n    {{ const long long q = {};\n", k, lanes.per_lane, row);
    for (int64_t j = 0; j < lanes.per_lane; ++j) {
      const std::string col = OffsetExpression(o.over, strides[k], o.cols, true, column(j));
      s += fmt::format("      a{}[{}] = {} ? {} : 0.0f;\n", k, j, in_row(j), LoadText(o.dtype, fmt::format("in{}[q + {}]", k, col)));
    }
    s += "    }\n";
  }
  // Argument a of a step at column j of the lane.
  auto arg = [&](int32_t a, int64_t j) {
    if (a >= 0) {
      return r.steps[static_cast<size_t>(a)].per_row ? fmt::format("w{}", a) : fmt::format("v{}[{}]", a, j);
    }
    const auto k = static_cast<size_t>(-1 - a);
    return one[k] ? fmt::format("b{}", k) : fmt::format("a{}[{}]", k, j);
  };
  // A reduction over the row of the lane's values x(j), into `into`.
  auto reduce = [&](int32_t kind, const std::function<std::string(int64_t)>& x, const std::string& into) {
    std::string t = fmt::format("    {{ float acc = {};\n", ReduceInitText(kind));
    for (int64_t j = 0; j < lanes.per_lane; ++j) {
      t += fmt::format("      if ({}) acc = {};\n", in_row(j), ReduceTermText(kind, "acc", x(j)));
    }
    for (int step = lanes.lanes / 2; step > 0; step /= 2) {
      t += fmt::format("      acc = {};\n",
                       ReduceCombineText(kind, "acc", fmt::format("__shfl_xor_sync(0xffffffffu, acc, {}, {})", step,
                                                                  lanes.lanes)));
    }
    return t + fmt::format("      {} = acc; }}\n", into);
  };
  // The stashed values a product row shares, read back.
  for (size_t t = 0; part == ProgramPart::kRowMain && t < r.steps.size(); ++t) {
    const int32_t slot = split->stash[t];
    if (slot < 0) continue;
    if (r.steps[t].per_row) {
      s += fmt::format("    const float w{} = srow[ty * 8u + m][{}];\n", t, slot);
      continue;
    }
    s += fmt::format("    float v{}[{}];\n", t, lanes.per_lane);
    for (int64_t j = 0; j < lanes.per_lane; ++j) s += fmt::format("    v{}[{}] = srow[ty * 8u + m][{}];\n", t, j, slot + j);
  }
  for (size_t t = 0; t < r.steps.size(); ++t) {
    const RegionStep& st = r.steps[t];
    if (!emitted(t)) continue;
    switch (st.kind) {
      case RegionStep::Kind::kMap: {
        const int64_t n = st.per_row ? 1 : lanes.per_lane;
        s += st.per_row ? fmt::format("    float w{};\n", t) : fmt::format("    float v{}[{}];\n", t, n);
        for (int64_t j = 0; j < n; ++j) {
          const std::string u = arg(st.args[0], j);
          const std::string v = st.num_args > 1 ? arg(st.args[1], j) : u;
          const std::string w = st.num_args > 2 ? arg(st.args[2], j) : u;
          s += MapText(st, u, v, w, st.per_row ? fmt::format("w{}", t) : fmt::format("v{}[{}]", t, j));
        }
        break;
      }
      case RegionStep::Kind::kSelect: {
        // Column c takes part c (each one value a row).
        s += fmt::format("    float v{}[{}];\n", t, lanes.per_lane);
        for (int64_t j = 0; j < lanes.per_lane; ++j) {
          std::string pick = arg(st.parts.back(), j);
          for (size_t p = st.parts.size() - 1; p-- > 0;) {
            pick = fmt::format("{} == {}u ? {} : {}", column(j), p, arg(st.parts[p], j), pick);
          }
          s += fmt::format("    v{}[{}] = {};\n", t, j, pick);
        }
        break;
      }
      case RegionStep::Kind::kReduce: {
        s += fmt::format("    float w{};\n", t);
        s += reduce(st.func, [&](int64_t j) { return arg(st.args[0], j); }, fmt::format("w{}", t));
        if (st.func == kReduceMean) s += fmt::format("    w{} = w{} / {};\n", t, t, FloatLiteral(static_cast<float>(r.cols)));
        if (st.func == kReduceL2) s += fmt::format("    w{} = sqrtf(w{});\n", t, t);
        break;
      }
      case RegionStep::Kind::kSoftmax:
      case RegionStep::Kind::kLogSoftmax: {
        s += fmt::format("    float v{}[{}];\n    {{ float high, sum;\n", t, lanes.per_lane);
        s += reduce(kReduceMax, [&](int64_t j) { return arg(st.args[0], j); }, "high");
        for (int64_t j = 0; j < lanes.per_lane; ++j) {
          s += fmt::format("      v{}[{}] = {} - high;\n", t, j, arg(st.args[0], j));
        }
        s += reduce(kReduceSum, [&](int64_t j) { return fmt::format("expf(v{}[{}])", t, j); }, "sum");
        for (int64_t j = 0; j < lanes.per_lane; ++j) {
          s += st.kind == RegionStep::Kind::kLogSoftmax
                   ? fmt::format("      v{}[{}] = v{}[{}] - logf(sum);\n", t, j, t, j)
                   : fmt::format("      v{}[{}] = expf(v{}[{}]) / sum;\n", t, j, t, j);
        }
        s += "    }\n";
        break;
      }
    }
  }
  if (part == ProgramPart::kRowPrologue) {  // the stash, not the outputs
    for (size_t t = 0; t < r.steps.size(); ++t) {
      const int32_t slot = split->stash[t];
      if (slot < 0) continue;
      if (r.steps[t].per_row) {
        s += fmt::format("    srow[threadIdx.x][{}] = w{};\n", slot, t);
        continue;
      }
      for (int64_t j = 0; j < lanes.per_lane; ++j) s += fmt::format("    srow[threadIdx.x][{}] = v{}[{}];\n", slot + j, t, j);
    }
    return s;
  }
  s += "    if (valid) {\n";
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const RegionOutput& out = r.outputs[o];
    const int32_t t = out.step;
    const std::string row = OffsetExpression(out.shape, out.strides, out.cols, false, "r");
    if (r.steps[static_cast<size_t>(t)].per_row) {
      s += fmt::format("      if (lane == 0) out{}[{}] = {};\n", o, row, StoreText(out.dtype, fmt::format("w{}", t)));
      continue;
    }
    for (int64_t j = 0; j < lanes.per_lane; ++j) {
      s += fmt::format("      if ({}) out{}[{} + {}] = {};\n", in_row(j), o, row,
                       OffsetExpression(out.shape, out.strides, out.cols, true, column(j)),
                       StoreText(out.dtype, fmt::format("v{}[{}]", t, j)));
    }
  }
  return s + "    }\n";  // (valid)
}

// A region that computes products (FusionRegion::products): a block takes
// 64 rows of their A (ty: 8 warps of 8 rows) by 32 columns of their W
// (tx: a warp's lanes). The products' K, 32 deep at a time, are one
// sequence of steps (product 0's, then product 1's, ...), each through
// shared memory (A rows K-contiguous, read as float4 the same by a warp's
// lanes; W transposed, padded to 33 so that neither the stores nor the
// reads of a warp share a bank), two buffers: a thread loads the next
// step's 8 elements of A and 4 of W into registers while this step's
// products run, so a step waits on memory only where its products are
// shorter than the loads. Each thread's 8 products of each member are
// summed in K's order in registers; then the region's program for each
// of its 8 rows, of which lanes of a warp hold one row of A and 32
// columns running on.
std::string ProductRegionSource(const FusionRegion& r, const std::vector<std::vector<int64_t>>& strides) {
  const RegionProduct& first = r.products.front();
  std::string params = RegionParams(r);
  for (size_t q = 0; q < r.products.size(); ++q) {
    const char* type = ElementText(r.products[q].dtype);
    params += fmt::format(", const {0}* __restrict__ pa{1}, const {0}* __restrict__ pw{1}", type, q);
    if (r.products[q].bias != kNone) params += fmt::format(", const {}* __restrict__ pb{}", type, q);
  }
  std::string s = ConversionText(r) + fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256) hfuse_region({}) {{\n"
      "  __shared__ __align__(16) float sa[2][64][36];\n"
      "  __shared__ float sw[2][32][33];\n"
      "  const unsigned tx = threadIdx.x % 32u, ty = threadIdx.x / 32u;\n"
      "  const unsigned tj = blockIdx.x * 32u, tb = blockIdx.y * 64u, j = tj + tx;\n"
      "  float ra[8], rw[4];\n",
      params);
  struct Step {
    size_t q;
    int64_t k0;
  };
  std::vector<Step> steps;
  for (size_t q = 0; q < r.products.size(); ++q) {
    s += fmt::format("  float prod{}[8] = {{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}};\n", q);
    for (int64_t k0 = 0; k0 < r.products[q].k; k0 += 32) steps.push_back({q, k0});
  }
  // A thread's elements of a step: A's rows ty + 8 c (c < 8) and W's
  // rows ty + 8 c (c < 4), at k0 + tx; zero past the rows and K.
  auto load = [&](const Step& st) {
    const RegionProduct& p = r.products[st.q];
    return fmt::format(
        "#pragma unroll\n"
        "  for (unsigned c = 0; c < 8u; ++c) {{\n"
        "    const unsigned bb = ty + 8u * c;\n"
        "    ra[c] = tb + bb < {m}u && {k0}u + tx < {k}u ? {a} : 0.0f;\n"
        "  }}\n"
        "#pragma unroll\n"
        "  for (unsigned c = 0; c < 4u; ++c) {{\n"
        "    const unsigned jj = ty + 8u * c;\n"
        "    rw[c] = tj + jj < {n}u && {k0}u + tx < {k}u ? {w} : 0.0f;\n"
        "  }}\n",
        fmt::arg("m", p.m), fmt::arg("n", p.n), fmt::arg("k", p.k), fmt::arg("k0", st.k0),
        fmt::arg("a", LoadText(p.dtype, fmt::format("pa{}[(long long)(tb + bb) * {}ll + {}u + tx]", st.q, p.lda, st.k0))),
        fmt::arg("w", LoadText(p.dtype, fmt::format("pw{}[(long long)(tj + jj) * {}ll + {}u + tx]", st.q, p.k, st.k0))));
  };
  s += load(steps.front());
  // The values a product row shares, for the block's 64 rows, while the
  // first step's loads are in flight; its barrier makes them seen.
  const RowSplit split = SplitByProductRow(r, strides);
  // The preloaded operands of the rows' program, each row's value, loaded
  // while the last step's products run.
  std::string preload;
  for (size_t k = 0; k < r.operands.size(); ++k) {
    if (!split.preload[k]) continue;
    preload += fmt::format("    pre{}[m] = {};\n", k, RowValueText(r.operands[k], k, strides[k], "r"));
    s += fmt::format("  float pre{}[8];\n", k);
  }
  if (!preload.empty()) {
    preload = fmt::format(
                  "#pragma unroll\n"
                  "  for (unsigned m = 0; m < 8u; ++m) {{\n"
                  "    const unsigned bm = tb + ty * 8u + m;\n"
                  "    const unsigned r = bm < {}u && j < {}u ? bm * {}u + j : {}u;\n",
                  first.m, first.n, first.n, r.rows - 1) +
              preload + "  }\n";
  }
  if (split.width > 0) {
    s += fmt::format(
        "  __shared__ float srow[64][{}];\n"
        "  if (threadIdx.x < 64u) {{\n"
        "    const unsigned bm = tb + threadIdx.x;\n"
        "    const unsigned r = (bm < {}u ? bm : {}u) * {}u;  // the row's column 0\n"
        "    const unsigned lane = 0u;\n",
        split.width, first.m, first.m - 1, first.n);
    s += RowProgram(r, strides, ProgramPart::kRowPrologue, &split);
    s += "  }\n";
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    const size_t buf = i % 2;
    // Buffer buf was last read in step i - 2, which every thread finished
    // before the barrier of step i - 1.
    s += fmt::format(
        "#pragma unroll\n"
        "  for (unsigned c = 0; c < 8u; ++c) sa[{0}][ty + 8u * c][tx] = ra[c];\n"
        "#pragma unroll\n"
        "  for (unsigned c = 0; c < 4u; ++c) sw[{0}][tx][ty + 8u * c] = rw[c];\n"
        "  __syncthreads();\n",
        buf);
    s += i + 1 < steps.size() ? load(steps[i + 1]) : preload;
    // Only the step's K (rounded up to 4; the rest is zero) is summed.
    const int64_t depth = (std::min<int64_t>(32, r.products[st.q].k - st.k0) + 3) / 4 * 4;
    s += fmt::format(
        "#pragma unroll\n"
        "  for (unsigned kk = 0; kk < {d}u; kk += 4u) {{\n"
        "    const float w0 = sw[{b}][kk][tx], w1 = sw[{b}][kk + 1u][tx], w2 = sw[{b}][kk + 2u][tx], "
        "w3 = sw[{b}][kk + 3u][tx];\n"
        "#pragma unroll\n"
        "    for (unsigned m = 0; m < 8u; ++m) {{\n"
        "      const float4 a = *reinterpret_cast<const float4*>(&sa[{b}][ty * 8u + m][kk]);\n"
        "      prod{q}[m] = fmaf(a.w, w3, fmaf(a.z, w2, fmaf(a.y, w1, fmaf(a.x, w0, prod{q}[m]))));\n"
        "    }}\n"
        "  }}\n",
        fmt::arg("d", depth), fmt::arg("b", buf), fmt::arg("q", st.q));
  }
  for (size_t q = 0; q < r.products.size(); ++q) {
    const RegionProduct& p = r.products[q];
    if (p.bias != kNone) {
      s += fmt::format(
          "  if (j < {}u) {{\n    const float bias = {};\n"
          "#pragma unroll\n    for (unsigned m = 0; m < 8u; ++m) prod{}[m] += bias;\n  }}\n",
          p.n, LoadText(p.dtype, fmt::format("pb{}[j]", q)), q);
    }
  }
  s += fmt::format(
      "  const unsigned lane = 0u;\n"
      "#pragma unroll\n"
      "  for (unsigned m = 0; m < 8u; ++m) {{\n"
      "    const unsigned bm = tb + ty * 8u + m;\n"
      "    const bool valid = bm < {}u && j < {}u;\n"
      "    const unsigned r = valid ? bm * {}u + j : {}u;\n",
      first.m, first.n, first.n, r.rows - 1);
  s += RowProgram(r, strides, ProgramPart::kRowMain, &split);
  return s + "  }\n}\n";
}

std::string FusedRegionSource(const FusionRegion& r, const std::vector<std::vector<int64_t>>& strides) {
  if (!r.products.empty()) return ProductRegionSource(r, strides);
  if (RegionRowsPerThread(r) == 4) return QuadRegionSource(r, strides);
  const RegionLanes lanes = LanesOf(r);
  const int64_t per_block = 256 / lanes.lanes;
  const std::string params = RegionParams(r);
  std::string s = ConversionText(r) + fmt::format(
      "extern \"C\" __global__ void __launch_bounds__(256) hfuse_region({}) {{\n"
      "  const unsigned lane = threadIdx.x % {}u;\n"
      "  for (unsigned base = blockIdx.x * {}u; base < {}u; base += gridDim.x * {}u) {{\n"
      "    const unsigned r0 = base + threadIdx.x / {}u;\n"
      "    const bool valid = r0 < {}u;\n"
      "    const unsigned r = valid ? r0 : {}u;\n",
      params, lanes.lanes, per_block, r.rows, per_block, lanes.lanes, r.rows, r.rows - 1);
  s += RowProgram(r, strides);
  s += "  }\n}\n";
  return s;
}

void LaunchProductRegion(cudaKernel_t kernel, int64_t m, int64_t n, const std::vector<const void*>& pointers,
                         cudaStream_t stream) {
  if (m == 0 || n == 0) return;
  std::vector<const void*> copy(pointers);
  std::vector<void*> params;
  for (const void*& p : copy) params.push_back(&p);
  const dim3 grid(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>((m + 63) / 64));
  CheckRuntime(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, dim3(256), params.data(), 0, stream),
               "cudaLaunchKernel (a fused region with products)");
}

std::string FusedRegionGroupSource(const FusionRegion& r, const std::vector<std::vector<int64_t>>& strides) {
  if (!r.products.empty()) throw CudaError("a region that computes products has no group kernel");
  std::string s = FusedRegionSource(r, strides);
  static const std::string kHead = "extern \"C\" __global__ void __launch_bounds__(256) hfuse_region(";
  const size_t at = s.find(kHead);
  if (at == std::string::npos) throw CudaError("a region's source has no hfuse_region");
  s.replace(at, kHead.size(), "static __device__ __forceinline__ void hfuse_region_body(");
  const size_t n = r.operands.size() + r.outputs.size();
  std::string args;
  for (size_t k = 0; k < r.operands.size(); ++k) {
    args += fmt::format("static_cast<const {}*>(p[{}]), ", ElementText(r.operands[k].dtype), k);
  }
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    args += fmt::format("static_cast<{}*>(const_cast<void*>(p[{}])){}", ElementText(r.outputs[o].dtype),
                        r.operands.size() + o, o + 1 < r.outputs.size() ? ", " : "");
  }
  return s + fmt::format(
                 "extern \"C\" __global__ void __launch_bounds__(256) hfuse_region_group(const void* const* "
                 "__restrict__ table) {{\n"
                 "  const void* const* p = table + static_cast<unsigned long long>(blockIdx.y) * {}ull;\n"
                 "  hfuse_region_body({});\n"
                 "}}\n",
                 n, args);
}

void LaunchFusedRegionGroup(cudaKernel_t kernel, int64_t rows, int lanes, int rows_per_thread,
                            const void* const* table, int count, cudaStream_t stream) {
  if (rows == 0 || count == 0) return;
  const int64_t per_block = 256 * rows_per_thread / lanes;
  const int64_t blocks = std::min<int64_t>((rows + per_block - 1) / per_block, 65536);
  void* params[] = {&table};
  CheckRuntime(cudaLaunchKernel(reinterpret_cast<const void*>(kernel),
                                dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), dim3(256), params,
                                0, stream),
               "cudaLaunchKernel (fused regions alike)");
}

void LaunchFusedRegion(cudaKernel_t kernel, int64_t rows, int lanes, int rows_per_thread,
                       const std::vector<const void*>& operands, const std::vector<void*>& outputs,
                       cudaStream_t stream) {
  if (rows == 0) return;
  std::vector<const void*> pointers(operands);
  pointers.insert(pointers.end(), outputs.begin(), outputs.end());
  std::vector<void*> params;
  for (const void*& p : pointers) params.push_back(&p);
  const int64_t per_block = 256 * rows_per_thread / lanes;
  const int64_t blocks = std::min<int64_t>((rows + per_block - 1) / per_block, 65536);
  CheckRuntime(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)),
                                dim3(256), params.data(), 0, stream),
               "cudaLaunchKernel (a fused region)");
}

}  // namespace hfuse::cuda
