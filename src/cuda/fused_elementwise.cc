// Fused elementwise chains: the kernel source of a chain, NVRTC, the
// kernel cache (fused_elementwise.h).
#include "fused_elementwise.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <bit>
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
    throw CudaError(fmt::format("NVRTC could not compile a fused elementwise chain: {}\n{}\n{}",
                                nvrtcGetErrorString(compiled), log, source));
  }
  size_t bytes = 0;
  CheckNvrtc(nvrtcGetCUBINSize(program, &bytes), "nvrtcGetCUBINSize");
  std::vector<char> cubin(bytes);
  CheckNvrtc(nvrtcGetCUBIN(program, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

cudaKernel_t FusedElementwiseKernel(const FusedElementwiseArgs& args) {
  // One library per distinct source and device, loaded for the process's life.
  static std::mutex mutex;
  static std::map<std::pair<int, std::string>, cudaKernel_t> cache;
  int device = 0;
  CheckRuntime(cudaGetDevice(&device), "cudaGetDevice");
  const std::string source = FusedElementwiseSource(args);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({device, source});
  if (it != cache.end()) return it->second;
  int major = 0, minor = 0;
  CheckRuntime(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
  CheckRuntime(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
  const std::vector<char> cubin = CompileFusedSource(source, fmt::format("sm_{}{}", major, minor));
  cudaLibrary_t library = nullptr;
  CheckRuntime(cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
               "cudaLibraryLoadData (a fused elementwise chain)");
  cudaKernel_t kernel = nullptr;
  CheckRuntime(cudaLibraryGetKernel(&kernel, library, "hfuse_chain"), "cudaLibraryGetKernel");
  cache.emplace(std::make_pair(device, source), kernel);
  return kernel;
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

}  // namespace hfuse::cuda
