// The grouped float32 GEMM (src/cuda/grouped_sgemm.h) on the groups of the
// models it serves (DCNv2, PLE, FiBiNet, AutoInt/AITM towers) at batch 512
// and 2048: each config of the kernel, the rule's choice, the kernel before
// (kLegacy) and cuBLAS (sgemm a member, and strided batched where the
// members share a shape), all exact float32 (no TF32). Self-checking: every
// member of every run against a float64 CPU reference (normalised error at
// most 1e-5), two runs bitwise identical; exits 1 on any failure. Times are
// the median of 100 launches after warm-up (CUDA events). cuBLAS rows do
// the products only (no bias or activation), so they flatter cuBLAS.
// Usage: grouped_sgemm_bench [NAME_PART] (only the groups whose name has it).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_bench_util.h"
#include "grouped_sgemm.h"
#include "kernels.h"

namespace {

using hfuse::bench::Random;
using hfuse::bench::Upload;
using hfuse::cuda::SgemmConfig;

constexpr int kRelu = 0, kGelu = 3, kNone = hfuse::cuda::kNoActivation;

struct MemberShape {
  int64_t n, k;
  bool bias;
  int act;
};
struct Group {
  std::string name;
  std::vector<MemberShape> members;
  bool shared_a;  // every member reads one A (its K the members' K)
  bool concat_y;  // outputs side by side in one buffer (ldy = the sum of n)
  int64_t tokens = 1;  // rows a batch row: M = batch * tokens (a transformer's FFN over its tokens)
};

std::vector<MemberShape> Repeat(int count, MemberShape s) { return std::vector<MemberShape>(count, s); }
std::vector<MemberShape> Join(std::vector<std::vector<MemberShape>> parts) {
  std::vector<MemberShape> all;
  for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

std::vector<Group> Groups() {
  return {
      {"dcnv2 mixed A (1x256 + 4x32 + 4 GEMV, K 429)",
       Join({{{256, 429, true, kRelu}}, Repeat(4, {32, 429, false, kNone}), Repeat(4, {1, 429, true, kNone})}),
       true, true},
      {"dcnv2 V + gates (4x32 + 4 GEMV, K 429)", Join({Repeat(4, {32, 429, false, kNone}), Repeat(4, {1, 429, false, kNone})}),
       true, false},
      {"dcnv2 B (1x128 K256 + 4x32 K32)", Join({{{128, 256, true, kRelu}}, Repeat(4, {32, 32, false, kNone})}),
       false, false},
      {"dcnv2 C (4x429 K32)", Repeat(4, {429, 32, false, kNone}), false, false},
      // The same with rows of 432 floats (16-byte aligned): what the rows' alignment costs.
      {"dcnv2 C, rows of 432 (4x432 K32)", Repeat(4, {432, 32, false, kNone}), false, false},
      {"ple experts (8x128 K256)", Repeat(8, {128, 256, true, kRelu}), false, false},
      {"ple gates (2x4 K429 + 2x8 K128)", Join({Repeat(2, {4, 429, true, kNone}), Repeat(2, {8, 128, true, kNone})}),
       false, false},
      {"ple 3x64 K128", Repeat(3, {64, 128, true, kRelu}), false, false},
      {"ple 3 GEMV K64", Repeat(3, {1, 64, true, kNone}), false, false},
      {"fibinet (325x16 K16)", Repeat(325, {16, 16, false, kNone}), false, false},
      {"autoint/aitm towers (3x256 K429)", Repeat(3, {256, 429, true, kRelu}), false, false},
      // TabTransformer's FFN over its 26 tokens: 32 -> 128 with the erf GELU in
      // the epilogue (hfuse runs it as cuBLASLt's bias GEMM and a GELU region
      // after), and 128 -> 32.
      {"tabtransformer ffn 1 (1x128 K32, GELU)", {{128, 32, true, kGelu}}, false, false, 26},
      {"tabtransformer ffn 2 (1x32 K128)", {{32, 128, true, kNone}}, false, false, 26},
  };
}

double Act(int act, double v) {
  switch (act) {
    case 0: return v > 0 ? v : 0;
    case 1: return 1 / (1 + std::exp(-v));
    case 2: return std::tanh(v);
    case 3: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    default: return v;
  }
}

struct Buffers {
  std::vector<float*> a, w, bias;
  float* y = nullptr;
  std::vector<int64_t> y_offset, lda;
  int64_t ldy_concat = 0;
  size_t y_floats = 0;
  std::vector<std::vector<float>> ha, hw, hb;
};

struct Failure {
  int count = 0;
};

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds of `run` over 100 launches after 10 of warm-up.
template <typename F>
double TimeUs(F run, cudaStream_t s) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  for (int i = 0; i < 10; ++i) run();
  std::vector<float> ms;
  for (int i = 0; i < 100; ++i) {
    CHECK_CUDA(cudaEventRecord(e0, s));
    run();
    CHECK_CUDA(cudaEventRecord(e1, s));
    CHECK_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaEventDestroy(e0));
  CHECK_CUDA(cudaEventDestroy(e1));
  return Median(ms) * 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("command:");
  for (int i = 0; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf("\n");
  int device = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s, %d SMs\n", prop.name, sms);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  CHECK_CUBLAS(cublasCreate(&blas));
  CHECK_CUBLAS(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));  // no TF32
  CHECK_CUBLAS(cublasSetStream(blas, stream));
  int failures = 0;

  struct Variant {
    std::string name;
    hfuse::cuda::SgemmOptions options;
  };
  // The rule splits no K (grouped_sgemm.h): split-K measured forced, on the tiled 64 x 64 config.
  std::vector<Variant> variants = {
      {"rule", {.sms = sms}},
      {"rule, one A's apart", {.merge = false}},
      {"rule, one A's merged", {}},
      {"rule, deep groups sliced", {.sms = sms, .staged = true}},
      {"rule, deep groups 3xTF32", {.sms = sms, .tensor = true}},
      {"rule, deep groups 3xTF32 sliced", {.sms = sms, .staged = true, .tensor = true}},
      {"all 64x64, split-K 3", {.config = static_cast<int>(SgemmConfig::k64x64), .split = 3}}};
  // Configs with K split, for merged members (grouped_sgemm.h, SgemmOptions::merge).
  for (SgemmConfig c : {SgemmConfig::k128x128, SgemmConfig::k128x64, SgemmConfig::k64x64, SgemmConfig::k128x32}) {
    for (int split : {2, 4}) {
      variants.push_back({std::string("all ") + hfuse::cuda::SgemmConfigName(c) + ", split-K " + std::to_string(split),
                          {.config = static_cast<int>(c), .split = split}});
    }
  }
  for (int split : {1, 2, 4, 8}) {
    variants.push_back({"tiled rule, split-K " + std::to_string(split), {.split = split, .tiled = true}});
  }
  for (SgemmConfig c : {SgemmConfig::kLegacy, SgemmConfig::k128x128, SgemmConfig::k128x64, SgemmConfig::k64x64,
                        SgemmConfig::k128x32, SgemmConfig::k256x16, SgemmConfig::kStaged64x64,
                        SgemmConfig::kTensor64x64}) {
    variants.push_back({std::string("all ") + hfuse::cuda::SgemmConfigName(c), {.config = static_cast<int>(c)}});
  }

  const std::string only = argc > 1 ? argv[1] : "";  // groups whose name has this, else all
  for (int64_t batch : {512, 2048}) {
    for (const Group& group : Groups()) {
      if (group.name.find(only) == std::string::npos) continue;
      const int64_t m = batch * group.tokens;
      // Data: random, never zero; A shared or one per member.
      const size_t count = group.members.size();
      Buffers b;
      int64_t y_cols = 0;
      for (const MemberShape& s : group.members) y_cols += s.n;
      for (size_t i = 0; i < count; ++i) {
        const MemberShape& s = group.members[i];
        if (i == 0 || !group.shared_a) {
          b.ha.push_back(Random(static_cast<size_t>(m * s.k)));
          b.a.push_back(Upload(b.ha.back()));
        } else {
          b.a.push_back(b.a[0]);
        }
        b.lda.push_back(s.k);
        b.hw.push_back(Random(static_cast<size_t>(s.n * s.k)));
        b.w.push_back(Upload(b.hw.back()));
        b.hb.push_back(s.bias ? Random(static_cast<size_t>(s.n)) : std::vector<float>());
        b.bias.push_back(s.bias ? Upload(b.hb.back()) : nullptr);
      }
      std::vector<hfuse::cuda::SgemmMember> members;
      int64_t offset = 0;
      for (size_t i = 0; i < count; ++i) {
        const MemberShape& s = group.members[i];
        const int64_t ldy = group.concat_y ? y_cols : s.n;
        b.y_offset.push_back(offset);
        offset += group.concat_y ? s.n : m * s.n;
        members.push_back({b.a[i], b.w[i], b.bias[i], nullptr, m, s.n, s.k, b.lda[i], ldy, s.act});
      }
      b.y_floats = static_cast<size_t>(group.concat_y ? m * y_cols : offset);
      CHECK_CUDA(cudaMalloc(&b.y, b.y_floats * sizeof(float)));
      for (size_t i = 0; i < count; ++i) members[i].y = b.y + b.y_offset[i];

      // The float64 reference, each member's output [m, n].
      std::vector<std::vector<double>> want(count);
      for (size_t i = 0; i < count; ++i) {
        const MemberShape& s = group.members[i];
        const std::vector<float>& ha = b.ha[group.shared_a ? 0 : i];
        want[i].resize(static_cast<size_t>(m * s.n));
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t c = 0; c < s.n; ++c) {
            double acc = 0;
            const float* ar = ha.data() + r * s.k;
            const float* wr = b.hw[i].data() + c * s.k;
            for (int64_t k = 0; k < s.k; ++k) acc += static_cast<double>(ar[k]) * wr[k];
            if (s.bias) acc += b.hb[i][c];
            want[i][r * s.n + c] = Act(s.act, acc);
          }
        }
      }
      double flops = 0;
      for (const MemberShape& s : group.members) flops += 2.0 * static_cast<double>(m) * s.n * s.k;
      std::printf("\n== %s, M = %lld: %zu members, %.1f MFLOP\n", group.name.c_str(), static_cast<long long>(m), count,
                  flops / 1e6);
      std::printf("  %-26s %8s %8s %7s %10s %10s\n", "variant", "tiles", "us", "TFLOP/s", "max error", "ws MiB");

      std::vector<float> got(b.y_floats), again(b.y_floats);
      for (const Variant& v : variants) {
        const hfuse::cuda::SgemmTiling tiling = hfuse::cuda::SgemmTiles(members, v.options);
        hfuse::cuda::SgemmMember* d_members = nullptr;  // the tiling's table (merged members after the given)
        const size_t table_bytes = tiling.members.size() * sizeof(hfuse::cuda::SgemmMember);
        CHECK_CUDA(cudaMalloc(&d_members, table_bytes));
        CHECK_CUDA(cudaMemcpy(d_members, tiling.members.data(), table_bytes, cudaMemcpyHostToDevice));
        hfuse::cuda::SgemmTile* d_tiles = nullptr;
        CHECK_CUDA(cudaMalloc(&d_tiles, tiling.tiles.size() * sizeof(hfuse::cuda::SgemmTile)));
        CHECK_CUDA(cudaMemcpy(d_tiles, tiling.tiles.data(), tiling.tiles.size() * sizeof(hfuse::cuda::SgemmTile),
                              cudaMemcpyHostToDevice));
        void* ws = nullptr;
        if (tiling.WorkspaceBytes() > 0) {
          CHECK_CUDA(cudaMalloc(&ws, tiling.WorkspaceBytes()));
          CHECK_CUDA(cudaMemset(ws, 0, tiling.WorkspaceBytes()));
        }
        const int num_tiles = static_cast<int>(tiling.tiles.size());
        auto run = [&] {
          hfuse::cuda::LaunchGroupedSgemm(tiling.kernel, d_members, d_tiles, num_tiles, 1.0f, ws,
                                          tiling.workspace_floats, tiling.parts_w, stream);
        };
        // Poisoned (NaN) outputs: an element no block writes fails the check.
        CHECK_CUDA(cudaMemsetAsync(b.y, 0xFF, b.y_floats * sizeof(float), stream));
        run();
        CHECK_CUDA(cudaStreamSynchronize(stream));
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaMemcpy(got.data(), b.y, b.y_floats * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemsetAsync(b.y, 0xFF, b.y_floats * sizeof(float), stream));
        run();
        CHECK_CUDA(cudaStreamSynchronize(stream));
        CHECK_CUDA(cudaMemcpy(again.data(), b.y, b.y_floats * sizeof(float), cudaMemcpyDeviceToHost));
        const bool same = std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0;
        double worst = 0;
        for (size_t i = 0; i < count; ++i) {
          const MemberShape& s = group.members[i];
          double err = 0, scale = 0;
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t c = 0; c < s.n; ++c) {
              const double ref = want[i][r * s.n + c];
              const double g = got[b.y_offset[i] + r * members[i].ldy + c];
              err = std::isfinite(g) ? std::max(err, std::fabs(g - ref)) : INFINITY;
              if (!std::isfinite(g)) r = m, c = s.n;
              scale = std::max(scale, std::fabs(ref));
            }
          }
          worst = std::max(worst, err / std::max(scale, 1e-30));
        }
        const double us = TimeUs(run, stream);
        const bool ok = worst <= 1e-5 && same;
        std::printf("  %-26s %8d %8.2f %7.2f %10.2e %10.2f%s%s\n", v.name.c_str(), num_tiles, us, flops / us / 1e6,
                    worst, tiling.WorkspaceBytes() / 1048576.0, same ? "" : "  NOT DETERMINISTIC",
                    ok ? "" : "  FAILED");
        if (!ok) ++failures;
        CHECK_CUDA(cudaFree(d_tiles));
        CHECK_CUDA(cudaFree(d_members));
        if (ws) CHECK_CUDA(cudaFree(ws));
      }

      // cuBLAS, products only: C^T (n x m, ld ldy) = W (k x n)^T A^T (k x m).
      const float one = 1.0f, zero = 0.0f;
      const double each_us = TimeUs(
          [&] {
            for (const hfuse::cuda::SgemmMember& mm : members) {
              CHECK_CUBLAS(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(mm.n), static_cast<int>(mm.m),
                                       static_cast<int>(mm.k), &one, mm.w, static_cast<int>(mm.k), mm.a,
                                       static_cast<int>(mm.lda), &zero, mm.y, static_cast<int>(mm.ldy)));
            }
          },
          stream);
      std::printf("  %-26s %8zu %8.2f %7.2f\n", "cublasSgemm a member", count, each_us, flops / each_us / 1e6);
      if (group.shared_a && count > 1) {  // one cuBLAS call over the weights side by side (what merging reaches)
        const int64_t k = group.members[0].k;
        std::vector<float> wcat;
        for (size_t i = 0; i < count; ++i) wcat.insert(wcat.end(), b.hw[i].begin(), b.hw[i].end());
        float* dw = Upload(wcat);
        float* dy = nullptr;
        CHECK_CUDA(cudaMalloc(&dy, static_cast<size_t>(m * y_cols) * sizeof(float)));
        const double one_us = TimeUs(
            [&] {
              CHECK_CUBLAS(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(y_cols), static_cast<int>(m),
                                       static_cast<int>(k), &one, dw, static_cast<int>(k), b.a[0],
                                       static_cast<int>(b.lda[0]), &zero, dy, static_cast<int>(y_cols)));
            },
            stream);
        std::printf("  %-26s %8d %8.2f %7.2f\n", "cublasSgemm side by side", 1, one_us, flops / one_us / 1e6);
        CHECK_CUDA(cudaFree(dw));
        CHECK_CUDA(cudaFree(dy));
      }
      bool uniform = true;
      for (const MemberShape& s : group.members) {
        uniform = uniform && s.n == group.members[0].n && s.k == group.members[0].k;
      }
      if (uniform && count > 1) {  // contiguous copies for the strided call: the shapes are what is timed
        const MemberShape& s = group.members[0];
        float *sa, *sw, *sy;
        CHECK_CUDA(cudaMalloc(&sa, count * m * s.k * sizeof(float)));
        CHECK_CUDA(cudaMalloc(&sw, count * s.n * s.k * sizeof(float)));
        CHECK_CUDA(cudaMalloc(&sy, count * m * s.n * sizeof(float)));
        CHECK_CUDA(cudaMemset(sa, 0x3C, count * m * s.k * sizeof(float)));
        CHECK_CUDA(cudaMemset(sw, 0x3C, count * s.n * s.k * sizeof(float)));
        const double strided_us = TimeUs(
            [&] {
              CHECK_CUBLAS(cublasSgemmStridedBatched(
                  blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(m), static_cast<int>(s.k),
                  &one, sw, static_cast<int>(s.k), s.n * s.k, sa, static_cast<int>(s.k), m * s.k, &zero, sy,
                  static_cast<int>(s.n), m * s.n, static_cast<int>(count)));
            },
            stream);
        std::printf("  %-26s %8d %8.2f %7.2f\n", "cublas strided batched", 1, strided_us, flops / strided_us / 1e6);
        CHECK_CUDA(cudaFree(sa));
        CHECK_CUDA(cudaFree(sw));
        CHECK_CUDA(cudaFree(sy));
      }
      for (size_t i = 0; i < count; ++i) {
        if (i == 0 || !group.shared_a) CHECK_CUDA(cudaFree(b.a[i]));
        CHECK_CUDA(cudaFree(b.w[i]));
        if (b.bias[i]) CHECK_CUDA(cudaFree(b.bias[i]));
      }
      CHECK_CUDA(cudaFree(b.y));
    }
  }
  cublasDestroy(blas);
  std::printf("\n%s: %d failed runs\n", failures ? "FAILED" : "all checks passed", failures);
  return failures ? 1 : 0;
}
