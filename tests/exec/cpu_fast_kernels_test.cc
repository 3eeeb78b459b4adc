// The CPU executor's fast kernels against its reference kernels, on random
// data: odd sizes, broadcasting, strided (leading-dimension) operands, one
// thread and several. Each ONNX operator with a fast kernel runs through
// cpu::RunOnnxOp twice, fast and reference, on the same inputs; the results
// must agree within the executor's float32 tolerance (compare.h) where the
// summation order may differ (products), bitwise elsewhere. A fast kernel
// that declines a form leaves it to the reference, so each case also
// checks that its fast kernel ran (the form it was written for is covered).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "cpu_fast_kernels.h"
#include "cpu_kernels.h"
#include "cpu_onnx_ops.h"
#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

HostTensor RandomTensor(std::vector<int64_t> shape, uint32_t seed) {
  HostTensor t(DType::kFloat32, std::move(shape));
  const std::vector<float> v = Random(t.numel(), seed);
  t.FromFloat(v.data());
  return t;
}

HostTensor Ints(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> values) {
  HostTensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.SetInt(static_cast<int64_t>(i), values[i]);
  return t;
}

// The largest difference, relative to the largest value of `want`.
double Normalized(const HostTensor& want, const HostTensor& got) {
  EXPECT_EQ(want.shape, got.shape);
  EXPECT_EQ(want.dtype, got.dtype);
  double high = 0, err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    high = std::max(high, std::fabs(static_cast<double>(want.Get(i))));
    err = std::max(err, std::fabs(static_cast<double>(want.Get(i)) - got.Get(i)));
  }
  return high > 0 ? err / high : err;
}

constexpr double kProductTolerance = 1e-5;  // compare.h's float32 tolerance
// The fast path's exp, sigmoid, erf and gelu (fast::VecMath) and what uses
// them (Softmax): a few ulp of float (relative), 3e-7 absolute for erf;
// measured: the functions within 3e-7 (VecMathNearLibm), softmax 6e-7.
constexpr double kVecMathTolerance = 1e-6;

// ---- kernels ------------------------------------------------------------------

class Threads : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { cpu::fast::SetThreads(GetParam()); }
  void TearDown() override { cpu::fast::SetThreads(0); }
};

// op(a)[m, k] . op(b)[k, n] with every transpose, leading dims wider than
// the matrices, odd sizes, bias and activation, against cpu::Gemm on
// copies laid out as it takes them.
TEST_P(Threads, GemmMatchesReference) {
  const cpu::fast::SingleThreadedBlas blas;
  uint32_t seed = 1;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 5, 3}, {37, 129, 65},
                          {513, 17, 31}, {3, 300, 257}, {64, 64, 0}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldy = n + 2;
        const std::vector<float> a = Random((ta ? k : m) * lda, seed++), b = Random((tb ? n : k) * ldb, seed++);
        const std::vector<float> bias = Random(n, seed++);
        std::vector<float> ar(static_cast<size_t>(m * k)), br(static_cast<size_t>(n * k));
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t p = 0; p < k; ++p) ar[static_cast<size_t>(i * k + p)] = ta ? a[p * lda + i] : a[i * lda + p];
        }
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t p = 0; p < k; ++p) br[static_cast<size_t>(j * k + p)] = tb ? b[j * ldb + p] : b[p * ldb + j];
        }
        std::vector<float> want(static_cast<size_t>(m * n)), got(static_cast<size_t>(m * ldy), 7.0f);
        cpu::Gemm(ar.data(), br.data(), bias.data(), want.data(), m, n, k, 0.5f, EwFunc::kRelu);
        cpu::fast::Gemm({a.data(), lda, ta}, {b.data(), ldb, tb}, got.data(), ldy, m, n, k, 0.5f, bias.data(),
                        EwFunc::kRelu);
        double high = 0, err = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            high = std::max(high, std::fabs(double{want[static_cast<size_t>(i * n + j)]}));
            err = std::max(err, std::fabs(double{want[static_cast<size_t>(i * n + j)]} - got[static_cast<size_t>(i * ldy + j)]));
          }
          for (int64_t j = n; j < ldy; ++j) EXPECT_EQ(got[static_cast<size_t>(i * ldy + j)], 7.0f) << "wrote past n";
        }
        EXPECT_LE(err, kProductTolerance * std::max(high, 1.0)) << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb;
      }
    }
  }
}

// The packed kernel (AVX-512 CPUs; cpu_fast_kernels.h): against the
// reference for both layouts of b, tails of rows and columns (masked),
// several row tiles and K blocks; and the same bytes whether b comes packed
// by the caller (a session's weights) or is packed by Gemm, and whatever
// order its tiles run in (a group runs its members' tiles in one loop).
TEST_P(Threads, PackedKernelMatchesReferenceInAnyTileOrder) {
  if (!cpu::fast::PackedGemm(32, 1, false)) GTEST_SKIP() << "no AVX-512 here: products go to OpenBLAS";
  EXPECT_FALSE(cpu::fast::PackedGemm(15, 8, false));  // narrow: OpenBLAS
  EXPECT_FALSE(cpu::fast::PackedGemm(64, 8, true));   // a transposed: OpenBLAS
  const cpu::fast::SingleThreadedBlas blas;
  uint32_t seed = 100;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 32, 1}, {9, 33, 300}, {300, 70, 600},
                         {64, 256, 429}, {257, 64, 513}, {13, 47, 256}, {64, 16, 16}, {11, 20, 9}}) {
    for (bool tb : {false, true}) {
      const int64_t lda = k + 1, ldb = (tb ? k : n) + 3, ldy = n + 2;
      const std::vector<float> a = Random(m * lda, seed++), b = Random((tb ? n : k) * ldb, seed++);
      const std::vector<float> bias = Random(n, seed++);
      std::vector<float> ar(static_cast<size_t>(m * k)), br(static_cast<size_t>(n * k));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t p = 0; p < k; ++p) ar[static_cast<size_t>(i * k + p)] = a[i * lda + p];
      }
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t p = 0; p < k; ++p) br[static_cast<size_t>(j * k + p)] = tb ? b[j * ldb + p] : b[p * ldb + j];
      }
      std::vector<float> want(static_cast<size_t>(m * n));
      cpu::Gemm(ar.data(), br.data(), bias.data(), want.data(), m, n, k, 1.5f, EwFunc::kSigmoid);
      const std::string what = fmt::format("{}x{}x{} tb {}", m, n, k, tb);
      std::vector<float> got(static_cast<size_t>(m * ldy), 7.0f);
      cpu::fast::Gemm({a.data(), lda, false}, {b.data(), ldb, tb}, got.data(), ldy, m, n, k, 1.5f, bias.data(),
                      EwFunc::kSigmoid);
      double high = 0, err = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const double w = want[static_cast<size_t>(i * n + j)];
          high = std::max(high, std::fabs(w));
          err = std::max(err, std::fabs(w - got[static_cast<size_t>(i * ldy + j)]));
        }
        for (int64_t j = n; j < ldy; ++j) EXPECT_EQ(got[static_cast<size_t>(i * ldy + j)], 7.0f) << what << ": wrote past n";
      }
      EXPECT_LE(err, kProductTolerance * std::max(high, 1.0)) << what;  // the sums' order differs
      // Packed by the caller, and tiles run last to first: the same bytes.
      std::vector<float> packed(static_cast<size_t>(cpu::fast::PackedSize(n, k)));
      cpu::fast::PackB({b.data(), ldb, tb}, n, k, packed.data());
      std::vector<float> again(got.size(), 7.0f), reversed(got.size(), 7.0f);
      cpu::fast::Gemm({a.data(), lda, false}, {b.data(), ldb, tb}, again.data(), ldy, m, n, k, 1.5f, bias.data(),
                      EwFunc::kSigmoid, true, packed.data());
      EXPECT_EQ(again, got) << what;
      for (int64_t t = cpu::fast::PackedTiles(m, n); t-- > 0;) {
        cpu::fast::PackedGemmTile({a.data(), lda, false}, packed.data(), reversed.data(), ldy, m, n, k, 1.5f,
                                  bias.data(), EwFunc::kSigmoid, t);
      }
      EXPECT_EQ(reversed, got) << what;
    }
  }
}

// The same product on 1 thread and on several: the same bytes (the split is
// by rows or columns, never over K).
TEST(FastGemm, SameBytesOnAnyThreadCount) {
  const cpu::fast::SingleThreadedBlas blas;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1000, 77, 129}, {5, 2000, 300}, {300, 300, 300},
                         {70, 1000, 64}, {4099, 33, 7}, {129, 130, 1}}) {
    const std::vector<float> a = Random(m * k, 3), b = Random(n * k, 4);
    std::vector<std::vector<float>> ys;
    for (int threads : {1, 2, 3, 5}) {
      cpu::fast::SetThreads(threads);
      std::vector<float> y(static_cast<size_t>(m * n));
      cpu::fast::Gemm({a.data(), k, false}, {b.data(), k, true}, y.data(), n, m, n, k, 1.0f, nullptr, std::nullopt);
      ys.push_back(std::move(y));
    }
    cpu::fast::SetThreads(0);
    for (size_t i = 1; i < ys.size(); ++i) EXPECT_EQ(ys[0], ys[i]) << m << "x" << n << "x" << k << " run " << i;
  }
}

// Empty products whose empty operands have no data at all (null, as an
// empty tensor's buffer may be): nothing is written, nothing offset (a
// null pointer offset is undefined: the pipeline fuzz target found
// m = 0 with 128 columns, split by columns; the sanitizer job runs this).
TEST(FastGemm, EmptyOperandsWithoutData) {
  const std::vector<float> b = Random(128 * 8, 6);
  // m = 0: no A, no Y.
  cpu::fast::Gemm({nullptr, 8, false}, {b.data(), 8, true}, nullptr, 128, 0, 128, 8, 1.0f, nullptr, std::nullopt);
  // k = 0: no A, no B; y = bias.
  std::vector<float> y(4 * 128, 7.0f), bias(128);
  for (size_t j = 0; j < bias.size(); ++j) bias[j] = static_cast<float>(j);
  cpu::fast::Gemm({nullptr, 0, false}, {nullptr, 0, true}, y.data(), 128, 4, 128, 0, 1.0f, bias.data(), std::nullopt);
  for (int64_t i = 0; i < 4 * 128; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], bias[static_cast<size_t>(i % 128)]) << i;
}

// numpy broadcasting of every pair of shapes below (ranks differ, ones on
// either side, a scalar), bitwise against the naive index loop.
TEST_P(Threads, BinaryBroadcastsLikeTheReference) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {5}, {3, 1}, {3, 5}, {2, 3, 5}, {2, 1, 5}, {1, 3, 1},
                                                    {4, 2, 3, 5}, {4, 1, 1, 5}};
  uint32_t seed = 10;
  for (const auto& sa : shapes) {
    for (const auto& sb : shapes) {
      // The broadcast shape, or skip pairs that do not broadcast.
      const size_t rank = std::max(sa.size(), sb.size());
      std::vector<int64_t> y(rank);
      bool ok = true;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t da = d + sa.size() >= rank ? sa[d + sa.size() - rank] : 1;
        const int64_t db = d + sb.size() >= rank ? sb[d + sb.size() - rank] : 1;
        ok = ok && (da == db || da == 1 || db == 1);
        y[d] = std::max(da, db);
      }
      if (!ok) continue;
      const HostTensor a = RandomTensor(sa, seed++), b = RandomTensor(sb, seed++);
      HostTensor want(DType::kFloat32, y), got(DType::kFloat32, y);
      std::vector<int64_t> index(rank, 0);
      for (int64_t i = 0; i < want.numel(); ++i) {
        int64_t oa = 0, ob = 0, stride_a = 1, stride_b = 1;
        for (size_t d = rank; d-- > 0;) {
          if (d + sa.size() >= rank) {
            const int64_t dim = sa[d + sa.size() - rank];
            oa += (dim == 1 ? 0 : index[d]) * stride_a;
            stride_a *= dim;
          }
          if (d + sb.size() >= rank) {
            const int64_t dim = sb[d + sb.size() - rank];
            ob += (dim == 1 ? 0 : index[d]) * stride_b;
            stride_b *= dim;
          }
        }
        want.Set(i, a.Get(oa) - b.Get(ob));
        for (size_t d = rank; d-- > 0;) {
          if (++index[d] < y[d]) break;
          index[d] = 0;
        }
      }
      cpu::fast::Binary(cpu::fast::BinOp::kSub, reinterpret_cast<const float*>(a.bytes.data()), a.shape,
                        reinterpret_cast<const float*>(b.bytes.data()), b.shape,
                        reinterpret_cast<float*>(got.bytes.data()), y);
      EXPECT_EQ(want.bytes, got.bytes) << "[" << fmt::format("{}", fmt::join(sa, ",")) << "] - ["
                                       << fmt::format("{}", fmt::join(sb, ",")) << "]";
    }
  }
}

TEST_P(Threads, CopyRowsCopiesStridedRows) {
  for (int64_t width : {4, 12, 64, 100, 4096}) {
    const int64_t rows = 300, src_stride = width + 8, dst_stride = width + 4;
    std::vector<uint8_t> src(static_cast<size_t>(rows * src_stride)), dst(static_cast<size_t>(rows * dst_stride), 0xee);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
    cpu::fast::CopyRows(dst.data(), dst_stride, src.data(), src_stride, rows, width);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < dst_stride; ++c) {
        const uint8_t want = c < width ? src[static_cast<size_t>(r * src_stride + c)] : 0xee;
        ASSERT_EQ(dst[static_cast<size_t>(r * dst_stride + c)], want) << "width " << width << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneAndMany, Threads, ::testing::Values(1, 2, 4));

// ---- ONNX operators: fast kernel against reference kernel --------------------

struct OnnxCase {
  OnnxNode node;
  std::vector<HostTensor> inputs;
  std::vector<std::pair<DType, std::vector<int64_t>>> outputs;
};

OnnxNode Node(std::string op_type, int64_t opset = 17) {
  OnnxNode n;
  n.op_type = std::move(op_type);
  n.opset = opset;
  return n;
}

// Runs the case both ways; returns the normalized error of output 0. Every
// output must be the reference's within `tolerance` (0: bitwise).
void ExpectFastMatches(const OnnxCase& c, double tolerance, const std::string& what) {
  std::vector<const HostTensor*> in;
  for (const HostTensor& t : c.inputs) in.push_back(&t);
  std::vector<HostTensor> want, got;
  for (const auto& [dtype, shape] : c.outputs) {
    want.emplace_back(dtype, shape);
    got.emplace_back(dtype, shape);
    got.back().bytes.assign(got.back().bytes.size(), 0xcd);  // what the fast kernel leaves unwritten shows
  }
  std::vector<HostTensor*> want_out, got_out;
  for (HostTensor& t : want) want_out.push_back(&t);
  for (HostTensor& t : got) got_out.push_back(&t);
  cpu::RunOnnxOp("ref", c.node, in, want_out, false);
  cpu::RunOnnxOp("fast", c.node, in, got_out, true);
  for (size_t i = 0; i < want.size(); ++i) {
    if (tolerance == 0) {
      EXPECT_EQ(want[i].bytes, got[i].bytes) << what << ": output " << i;
    } else {
      EXPECT_LE(Normalized(want[i], got[i]), tolerance) << what << ": output " << i;
    }
  }
}

TEST_P(Threads, MatMulBatchedAndBroadcast) {
  const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>> forms = {
      {{7, 13}, {13, 5}, {7, 5}},                  // plain
      {{3, 7, 13}, {13, 5}, {3, 7, 5}},            // one weight for every matrix (one product)
      {{3, 7, 13}, {3, 13, 5}, {3, 7, 5}},         // batched
      {{2, 1, 7, 13}, {1, 4, 13, 5}, {2, 4, 7, 5}},  // both broadcast
      {{1, 7, 13}, {3, 13, 5}, {3, 7, 5}},         // a broadcast
      {{13}, {4, 13, 5}, {4, 5}},                  // a vector, promoted
      {{2, 7, 13}, {13}, {2, 7}},                  // b vector
      {{64, 26, 1}, {64, 1, 16}, {64, 26, 16}},    // K = 1 (an outer product: xDeepFM)
  };
  uint32_t seed = 50;
  for (const auto& [a, b, y] : forms) {
    OnnxCase c{Node("MatMul"), {RandomTensor(a, seed++), RandomTensor(b, seed++)}, {{DType::kFloat32, y}}};
    ExpectFastMatches(c, kProductTolerance, fmt::format("MatMul [{}] x [{}]", fmt::join(a, ","), fmt::join(b, ",")));
  }
}

TEST_P(Threads, GemmNodeEveryTransposeAndBias) {
  uint32_t seed = 70;
  for (int ta : {0, 1}) {
    for (int tb : {0, 1}) {
      for (const std::vector<int64_t>& cshape : {std::vector<int64_t>{}, {1}, {9}, {11, 1}, {11, 9}}) {
        OnnxNode n = Node("Gemm");
        n.ints["transA"] = {ta};
        n.ints["transB"] = {tb};
        n.floats["alpha"] = {0.75};
        n.floats["beta"] = {1.5};
        OnnxCase c{n,
                   {RandomTensor(ta ? std::vector<int64_t>{17, 11} : std::vector<int64_t>{11, 17}, seed++),
                    RandomTensor(tb ? std::vector<int64_t>{9, 17} : std::vector<int64_t>{17, 9}, seed++),
                    RandomTensor(cshape, seed++)},
                   {{DType::kFloat32, {11, 9}}}};
        ExpectFastMatches(c, kProductTolerance, fmt::format("Gemm transA {} transB {} C [{}]", ta, tb, fmt::join(cshape, ",")));
      }
    }
  }
}

// Kernel-1 Convs (one GEMM, a batched GEMM, grouped) and general ones
// (im2col: pads, strides, dilations, groups, 2-D).
TEST_P(Threads, ConvAsGemms) {
  struct Form {
    std::vector<int64_t> x, w;
    std::vector<int64_t> strides, pads, dilations;
    int64_t group;
  };
  const std::vector<Form> forms = {
      {{5, 24, 1}, {32, 24, 1}, {}, {}, {}, 1},         // a Linear in Conv clothing
      {{6, 676, 16}, {8, 676, 1}, {}, {}, {}, 1},       // xDeepFM's CIN
      {{3, 12, 7}, {9, 4, 1}, {}, {}, {}, 3},           // grouped kernel 1
      {{2, 5, 11}, {4, 5, 3}, {2}, {1, 2}, {1}, 1},     // strided, padded
      {{2, 6, 13}, {4, 3, 3}, {1}, {2, 2}, {2}, 2},     // dilated, grouped
      {{2, 3, 7, 6}, {5, 3, 3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 1}, 1},  // 2-D
  };
  uint32_t seed = 90;
  for (const Form& f : forms) {
    OnnxNode n = Node("Conv");
    if (!f.strides.empty()) n.ints["strides"] = f.strides;
    if (!f.pads.empty()) n.ints["pads"] = f.pads;
    if (!f.dilations.empty()) n.ints["dilations"] = f.dilations;
    n.ints["group"] = {f.group};
    const size_t sp = f.x.size() - 2;
    std::vector<int64_t> y = {f.x[0], f.w[0]};
    for (size_t d = 0; d < sp; ++d) {
      const int64_t s = f.strides.empty() ? 1 : f.strides[d], dl = f.dilations.empty() ? 1 : f.dilations[d];
      const int64_t p = f.pads.empty() ? 0 : f.pads[d] + f.pads[sp + d];
      y.push_back((f.x[2 + d] + p - dl * (f.w[2 + d] - 1) - 1) / s + 1);
    }
    OnnxCase c{n, {RandomTensor(f.x, seed++), RandomTensor(f.w, seed++), RandomTensor({f.w[0]}, seed++)},
               {{DType::kFloat32, y}}};
    ExpectFastMatches(c, kProductTolerance, fmt::format("Conv x [{}] w [{}]", fmt::join(f.x, ","), fmt::join(f.w, ",")));
  }
}

TEST_P(Threads, ElementwiseBitwise) {
  uint32_t seed = 110;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    OnnxCase c{Node(op), {RandomTensor({3, 1, 50}, seed++), RandomTensor({4, 1}, seed++)}, {{DType::kFloat32, {3, 4, 50}}}};
    ExpectFastMatches(c, 0, op);
  }
  // Pow: a float exponent, an integer one, and the square (a product: the
  // reference's powf, within a rounding).
  OnnxCase pow{Node("Pow"), {RandomTensor({40, 3}, seed++), RandomTensor({3}, seed++)}, {{DType::kFloat32, {40, 3}}}};
  ExpectFastMatches(pow, 0, "Pow float exponent");
  OnnxCase square{Node("Pow"), {RandomTensor({40, 3}, seed++), Ints(DType::kInt64, {}, {2})}, {{DType::kFloat32, {40, 3}}}};
  ExpectFastMatches(square, 1e-7, "Pow x**2");
  for (const char* op : {"Relu", "Tanh", "Neg", "Abs", "Reciprocal", "Softplus", "LeakyRelu"}) {
    OnnxCase c{Node(op), {RandomTensor({70001}, seed++)}, {{DType::kFloat32, {70001}}}};
    ExpectFastMatches(c, 0, op);
  }
  // The fast path's vector math (fast::VecMath): within a few ulp of libm.
  for (const char* op : {"Sigmoid", "Exp", "Erf", "Gelu"}) {
    OnnxCase c{Node(op), {RandomTensor({70001}, seed++)}, {{DType::kFloat32, {70001}}}};
    ExpectFastMatches(c, kVecMathTolerance, op);
  }
}

// fast::VecMath against libm over the whole useful range (and past it:
// overflow to inf, underflow to 0 and subnormals, NaN), odd lengths so that
// every vector loop's tail runs: relative error for exp and sigmoid,
// absolute for erf and gelu / x.
TEST_P(Threads, VecMathNearLibm) {
  std::vector<float> x;
  for (float v = -110.0f; v <= 110.0f; v += 0.0137f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.5f, -103.0f, 1e30f, -1e30f}) x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> y(x.size());
  const auto rel = [](double want, double got) {
    if (std::isinf(want) || want == 0) return want == got ? 0.0 : std::fabs(want - got);
    return std::fabs(want - got) / std::fabs(want);
  };
  for (const auto f : {cpu::fast::VecFunc::kExp, cpu::fast::VecFunc::kSigmoid, cpu::fast::VecFunc::kSilu,
                       cpu::fast::VecFunc::kErf, cpu::fast::VecFunc::kGelu}) {
    cpu::fast::VecMath(f, x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(y[i])) << static_cast<int>(f);
        continue;
      }
      double want = 0, err = 0;
      switch (f) {
        case cpu::fast::VecFunc::kExp:
          want = std::exp(v);
          // Below FLT_MIN the result is subnormal: an absolute error.
          err = want < 1.2e-38 ? std::fabs(want - y[i]) * 1e30 : rel(static_cast<float>(want), y[i]);
          break;
        case cpu::fast::VecFunc::kSigmoid:
          want = 1 / (1 + std::exp(-v));
          err = want < 1.2e-38 ? std::fabs(want - y[i]) * 1e30 : rel(want, y[i]);
          break;
        case cpu::fast::VecFunc::kSilu:
          want = v / (1 + std::exp(-v));
          err = std::fabs(want) < 1e-30 ? std::fabs(want - y[i]) : rel(want, y[i]);
          break;
        case cpu::fast::VecFunc::kErf: err = std::fabs(std::erf(v) - y[i]); break;
        case cpu::fast::VecFunc::kGelu:
          want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
          err = std::fabs(want - y[i]) / std::max(1.0, std::fabs(v));
          break;
      }
      worst = std::max(worst, err);
      ASSERT_LE(err, kVecMathTolerance) << "func " << static_cast<int>(f) << " x " << v << " got " << y[i];
      ASSERT_EQ(cpu::fast::VecMathOne(f, x[i]), y[i]) << "a value depends on where it falls in the loop";
    }
    EXPECT_LE(worst, kVecMathTolerance);
  }
}

// Transposes of every permutation of a rank-4 tensor with odd dims and dims
// of 1, of 1-, 2-, 4- and 8-byte elements, bitwise against the reference;
// and the attention forms (heads split and merged, K transposed).
TEST_P(Threads, TransposeMatchesReference) {
  uint32_t seed = 170;
  const std::vector<std::vector<int64_t>> shapes = {{3, 5, 1, 7}, {2, 17, 19, 3}, {33, 1, 18, 5}};
  for (const auto& shape : shapes) {
    std::vector<int64_t> perm = {0, 1, 2, 3};
    do {
      for (DType dtype : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kBool}) {
        HostTensor x(dtype, shape);
        std::mt19937 rng(seed++);
        for (auto& b : x.bytes) b = static_cast<uint8_t>(rng());
        if (dtype == DType::kBool) {
          for (auto& b : x.bytes) b &= 1;
        }
        std::vector<int64_t> y;
        for (int64_t d : perm) y.push_back(shape[static_cast<size_t>(d)]);
        OnnxNode n = Node("Transpose");
        n.ints["perm"] = perm;
        OnnxCase c{n, {x}, {{dtype, y}}};
        ExpectFastMatches(c, 0, fmt::format("Transpose [{}] perm [{}] {}", fmt::join(shape, ","),
                                            fmt::join(perm, ","), DTypeName(dtype)));
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  for (const auto& [shape, perm] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{512, 39, 2, 8}, {0, 2, 1, 3}}, {{512, 39, 2, 8}, {0, 2, 3, 1}}, {{64, 2, 39, 8}, {0, 2, 1, 3}},
           {{300, 257}, {1, 0}}, {{5, 6, 7}, {}}}) {
    std::vector<int64_t> y;
    if (perm.empty()) {
      y.assign(shape.rbegin(), shape.rend());
    } else {
      for (int64_t d : perm) y.push_back(shape[static_cast<size_t>(d)]);
    }
    OnnxNode n = Node("Transpose");
    if (!perm.empty()) n.ints["perm"] = perm;
    OnnxCase c{n, {RandomTensor(shape, seed++)}, {{DType::kFloat32, y}}};
    ExpectFastMatches(c, 0, fmt::format("Transpose [{}] perm [{}]", fmt::join(shape, ","), fmt::join(perm, ",")));
  }
}

// Softmax rows of every length from 1 to 70 (the vector loops' tails) and
// long ones, large and small values, against the reference.
TEST_P(Threads, SoftmaxRowsOddLengths) {
  uint32_t seed = 190;
  for (int64_t n : {1, 2, 7, 15, 16, 17, 31, 39, 64, 70, 129, 1000, 5003}) {
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      HostTensor x = RandomTensor({3, 37, n}, seed++);
      // Some rows far from uniform, some with exps under float's normal range.
      for (int64_t i = 0; i < x.numel(); i += 5) x.Set(i, x.Get(i) * (i % 3 == 0 ? 400 : 40));
      OnnxCase c{Node(op, 13), {x}, {{DType::kFloat32, {3, 37, n}}}};
      ExpectFastMatches(c, kVecMathTolerance, fmt::format("{} rows of {}", op, n));
    }
  }
}

TEST_P(Threads, SoftmaxReduceLayerNormBatchNorm) {
  uint32_t seed = 130;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    OnnxNode n = Node(op, 13);
    OnnxCase c{n, {RandomTensor({37, 3, 129}, seed++)}, {{DType::kFloat32, {37, 3, 129}}}};
    ExpectFastMatches(c, kVecMathTolerance, op);
  }
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2", "ReduceSumSquare"}) {
    for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, {-1}, {1, 2}, {0}}) {
      OnnxNode n = Node(op, 13);
      n.ints["axes"] = axes;
      n.ints["keepdims"] = {1};
      std::vector<int64_t> y = {5, 7, 9, 3};
      for (int64_t a : axes) y[static_cast<size_t>(a < 0 ? a + 4 : a)] = 1;
      OnnxCase c{n, {RandomTensor({5, 7, 9, 3}, seed++)}, {{DType::kFloat32, y}}};
      ExpectFastMatches(c, 0, fmt::format("{} axes [{}]", op, fmt::join(axes, ",")));
    }
    // Long rows reduced whole (DIN's [batch * 20, 64] sums): eight rows at
    // a time, then the 5 left over, each still in the reference's order.
    OnnxNode rows = Node(op, 13);
    rows.ints["axes"] = {-1};
    rows.ints["keepdims"] = {0};
    HostTensor x = RandomTensor({29, 70}, seed++);
    x.Set(3 * 70 + 11, NAN);  // a NaN in one row of the first eight
    OnnxCase c{rows, {x}, {{DType::kFloat32, {29}}}};
    ExpectFastMatches(c, 0, fmt::format("{} rows of 70", op));
  }
  OnnxNode ln = Node("LayerNormalization");
  ln.ints["axis"] = {-1};
  OnnxCase c{ln, {RandomTensor({33, 97}, seed++), RandomTensor({97}, seed++), RandomTensor({97}, seed++)},
             {{DType::kFloat32, {33, 97}}}};
  ExpectFastMatches(c, 0, "LayerNormalization");
  HostTensor var = RandomTensor({6}, seed++);
  for (int64_t i = 0; i < 6; ++i) var.Set(i, std::fabs(var.Get(i)) + 0.1f);
  OnnxCase bn{Node("BatchNormalization"),
              {RandomTensor({4, 6, 5}, seed++), RandomTensor({6}, seed++), RandomTensor({6}, seed++),
               RandomTensor({6}, seed++), var},
              {{DType::kFloat32, {4, 6, 5}}}};
  ExpectFastMatches(bn, 0, "BatchNormalization");
}

// Data movement: exact copies whatever the dtype.
TEST_P(Threads, SliceExpandWhereCastCopyExactly) {
  uint32_t seed = 150;
  const HostTensor x = RandomTensor({6, 7, 8}, seed++);
  struct SliceForm {
    std::vector<int64_t> starts, ends, axes, steps, y;
  };
  for (const SliceForm& s : {SliceForm{{1}, {5}, {0}, {1}, {4, 7, 8}}, SliceForm{{2}, {3}, {2}, {1}, {6, 7, 1}},
                             SliceForm{{0, 6}, {6, 1}, {1, 2}, {2, -2}, {6, 3, 3}},
                             SliceForm{{-3}, {100}, {1}, {1}, {6, 3, 8}}}) {
    OnnxCase c{Node("Slice"),
               {x, Ints(DType::kInt64, {static_cast<int64_t>(s.starts.size())}, s.starts),
                Ints(DType::kInt64, {static_cast<int64_t>(s.ends.size())}, s.ends),
                Ints(DType::kInt64, {static_cast<int64_t>(s.axes.size())}, s.axes),
                Ints(DType::kInt64, {static_cast<int64_t>(s.steps.size())}, s.steps)},
               {{DType::kFloat32, s.y}}};
    ExpectFastMatches(c, 0, fmt::format("Slice axes [{}] steps [{}]", fmt::join(s.axes, ","), fmt::join(s.steps, ",")));
  }
  for (const std::vector<int64_t>& in : {std::vector<int64_t>{7, 1}, {1, 8}, {1}, {3, 1, 8}}) {
    OnnxCase c{Node("Expand"), {RandomTensor(in, seed++), Ints(DType::kInt64, {3}, {3, 7, 8})}, {{DType::kFloat32, {3, 7, 8}}}};
    ExpectFastMatches(c, 0, fmt::format("Expand [{}]", fmt::join(in, ",")));
  }
  OnnxCase i64{Node("Expand"), {Ints(DType::kInt64, {2, 1}, {5, -9}), Ints(DType::kInt64, {2}, {2, 3})}, {{DType::kInt64, {2, 3}}}};
  ExpectFastMatches(i64, 0, "Expand int64");
  HostTensor cond(DType::kBool, {50});
  for (int64_t i = 0; i < 50; ++i) cond.SetInt(i, i % 3 == 0);
  OnnxCase where{Node("Where"), {cond, RandomTensor({50}, seed++), RandomTensor({}, seed++)}, {{DType::kFloat32, {50}}}};
  ExpectFastMatches(where, 0, "Where");
  HostTensor ids = RandomTensor({40}, seed++);
  for (int64_t i = 0; i < 40; ++i) ids.Set(i, std::floor(ids.Get(i) * 100));
  OnnxNode to_i64 = Node("Cast");
  to_i64.ints["to"] = {7};
  OnnxCase cast{to_i64, {ids}, {{DType::kInt64, {40}}}};
  ExpectFastMatches(cast, 0, "Cast float -> int64");
}

// A form a fast kernel does not cover (float16 here) runs on the reference,
// with the same result as the reference alone.
TEST(FastOnnx, DeclinedFormsRunOnTheReference) {
  HostTensor a(DType::kFloat16, {4, 3}), b(DType::kFloat16, {3, 2});
  const std::vector<float> av = Random(12, 1), bv = Random(6, 2);
  a.FromFloat(av.data());
  b.FromFloat(bv.data());
  OnnxCase c{Node("MatMul"), {a, b}, {{DType::kFloat16, {4, 2}}}};
  ExpectFastMatches(c, 0, "MatMul float16");
}

// ---- the executor: memory plan, group ops, threads ---------------------------

// A chain of 40 elementwise ops on [256, 1024] float32 (1 MiB a tensor):
// the run holds two or three at once, not forty.
TEST(CpuMemoryPlan, PeakIsTheLiveSetNotEveryTensor) {
  std::string ops, tensors = R"({"name": "x", "dtype": "float32", "shape": [256, 1024], "role": "input"})";
  std::string prev = "x";
  for (int i = 0; i < 40; ++i) {
    const std::string y = fmt::format("t{}", i);
    tensors += fmt::format(R"(, {{"name": "{}", "dtype": "float32", "shape": [256, 1024]}})", y);
    ops += fmt::format(R"({}{{"name": "op{}", "op": "elementwise", "func": "{}", "inputs": ["{}"{}], "outputs": ["{}"]}})",
                       i ? ", " : "", i, i % 2 ? "add" : "relu", prev, i % 2 ? ", \"x\"" : "", y);
    prev = y;
  }
  const Graph g = ParseGraphJson(fmt::format(R"({{"graph_format": 1, "name": "chain", "dims": [], "tensors": [{}], "ops": [{}], "outputs": ["{}"]}})",
                                             tensors, ops, prev),
                                 "chain");
  const DimValues dims = BindDims(g);
  const TensorMap feeds = RandomFeeds(g, dims, 3);
  CpuMemory memory;
  CpuRunOptions options;
  options.memory = &memory;
  const TensorMap fast = RunOnCpu(g, feeds, dims, options);
  const int64_t tensor = 256 * 1024 * 4;
  EXPECT_EQ(memory.largest_live_bytes, 3 * tensor);  // x, an op's input and its output
  EXPECT_LE(memory.peak_bytes, 2 * tensor);          // intermediates only
  const TensorMap ref = RunOnCpuReference(g, feeds, dims);
  EXPECT_EQ(fast.at(prev).bytes, ref.at(prev).bytes);
}

// A concatenate of many narrow parts into a wide row (FiBiNet's 325 pairs
// of 16 floats, DCNv2's stacks of single floats): copied block of output
// rows by block on the fast path, in runs of 16 bytes, 4 bytes or whole
// parts; the reference's bytes either way.
TEST(FastConcatenate, ManyNarrowPartsIntoWideRows) {
  for (auto [dtype, width] :
       {std::pair<std::string, int>{"float32", 4}, {"float32", 3}, {"float32", 1}, {"float16", 3}}) {
    std::string tensors, names;
    for (int i = 0; i < 90; ++i) {
      tensors += fmt::format(R"({{"name": "p{}", "dtype": "{}", "shape": [37, 2, {}], "role": "input"}}, )", i,
                             dtype, width);
      names += fmt::format(R"({}"p{}")", i ? ", " : "", i);
    }
    tensors += fmt::format(R"({{"name": "y", "dtype": "{}", "shape": [37, 2, {}]}})", dtype, 90 * width);
    const Graph g = ParseGraphJson(
        fmt::format(R"({{"graph_format": 1, "name": "stack", "dims": [], "tensors": [{}], "ops": [)"
                    R"({{"name": "c", "op": "concatenate", "inputs": [{}], "outputs": ["y"], "dim": -1}}], "outputs": ["y"]}})",
                    tensors, names),
        "stack");
    const DimValues dims = BindDims(g);
    const TensorMap feeds = RandomFeeds(g, dims, 7);
    for (int threads : {1, 2}) {
      CpuRunOptions options;
      options.threads = threads;
      EXPECT_EQ(RunOnCpu(g, feeds, dims, options).at("y").bytes, RunOnCpuReference(g, feeds, dims).at("y").bytes)
          << dtype << " parts of " << width << ", " << threads << " threads";
    }
  }
  cpu::fast::SetThreads(0);
}

// A group GEMM and LayerNorm run side by side or one by one, on one thread
// or several: the same bytes every way, and the unfused graph's.
TEST(CpuGroups, SameBytesEveryScheduleAndThreadCount) {
  // The example in float32, what the fast kernels compute.
  std::string text = ReadFile(std::string(HFUSE_SOURCE_DIR) + "/examples/towers_small.json");
  for (size_t at; (at = text.find("float16")) != std::string::npos;) text.replace(at, 7, "float32");
  const Graph original = ParseGraphJson(text, "towers_small (float32)");
  Graph fused = original;
  ASSERT_FALSE(FuseGroupOps(fused, {}).groups.empty());
  const DimValues dims = BindDims(original);
  const TensorMap feeds = RandomFeeds(original, dims, 9);
  const TensorMap want = RunOnCpu(original, feeds, dims);
  for (int threads : {1, 2, 3}) {
    for (uint8_t mode : {0, 1, 2}) {
      CpuRunOptions options;
      options.threads = threads;
      options.group_mode = mode;
      std::vector<CpuOpProfile> profile;
      options.profile = &profile;
      const TensorMap got = RunOnCpu(fused, feeds, BindDims(fused), options);
      for (const OutputComparison& c : CompareOutputs(want, got)) {
        EXPECT_TRUE(c.bitwise_equal) << c.name << " threads " << threads << " mode " << int{mode};
      }
      // The profile names each group's path as the mode asked.
      for (const CpuOpProfile& p : profile) {
        if (p.kind.find(" x") == std::string::npos) continue;
        if (mode == 1 && threads > 1) {
          EXPECT_NE(p.kind.find("side by side"), std::string::npos) << p.kind;
        }
        if (mode == 2 || threads == 1) {
          EXPECT_NE(p.kind.find("one by one"), std::string::npos) << p.kind;
        }
      }
    }
  }
  cpu::fast::SetThreads(0);
  // And the reference kernels agree within float32's tolerance.
  for (const OutputComparison& c : CompareOutputs(RunOnCpuReference(original, feeds, dims), want)) {
    EXPECT_TRUE(c.pass) << c.name << ": " << c.normalized;
  }
}

}  // namespace
}  // namespace hfuse
