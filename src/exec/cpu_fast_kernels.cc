// The CPU executor's fast kernels. See cpu_fast_kernels.h.
#include "cpu_fast_kernels.h"

#if HFUSE_HAVE_CBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename();
extern "C" int openblas_get_num_threads();
#endif
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_kernels.h"
#include "hfuse/support/error.h"

namespace hfuse::cpu::fast {
namespace {

int g_threads = 0;  // 0: not set yet

// Work below this many multiply-adds runs on one thread: on a 2-core
// machine a split costs a few microseconds of wake-up and barrier, which a
// product of 2^17 multiply-adds (about 10 us) does not earn back.
constexpr int64_t kParallelFlops = int64_t{1} << 18;

float Sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

}  // namespace

int SetThreads(int n) {
  if (n <= 0) n = omp_get_max_threads();
  g_threads = std::max(n, 1);
  return g_threads;
}

SingleThreadedBlas::SingleThreadedBlas() {
#if HFUSE_HAVE_CBLAS
  before_ = openblas_get_num_threads();
  if (before_ != 1) openblas_set_num_threads(1);
#endif
}

SingleThreadedBlas::~SingleThreadedBlas() {
#if HFUSE_HAVE_CBLAS
  if (before_ != 1) openblas_set_num_threads(before_);
#endif
}

const char* BlasCoreName() {
#if HFUSE_HAVE_CBLAS
  return openblas_get_corename();
#else
  return nullptr;
#endif
}

int Threads() { return g_threads > 0 ? g_threads : SetThreads(0); }

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int64_t parts = std::min<int64_t>(Threads(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (parts <= 1) {
    f(0, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static, 1)
  for (int64_t p = 0; p < parts; ++p) f(n * p / parts, n * (p + 1) / parts);
}

void Epilogue(float* y, int64_t ldy, int64_t m, int64_t n, const float* bias,
              std::optional<EwFunc> activation) {
  if (!bias && !activation) return;
  for (int64_t r = 0; r < m; ++r) {
    float* row = y + r * ldy;
    if (bias) {
      for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    }
    if (!activation) continue;
    switch (*activation) {
      case EwFunc::kRelu:
        for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j], 0.0f);
        break;
      case EwFunc::kSigmoid:
        for (int64_t j = 0; j < n; ++j) row[j] = Sigmoid(row[j]);
        break;
      default:
        for (int64_t j = 0; j < n; ++j) row[j] = Apply(*activation, row[j]);
    }
  }
}

namespace {

// One single-threaded product (its part of the rows or columns).
void GemmPart(Matrix a, Matrix b, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha,
              const float* bias, std::optional<EwFunc> activation) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t r = 0; r < m; ++r) std::fill(y + r * ldy, y + r * ldy + n, 0.0f);
  } else {
#if HFUSE_HAVE_CBLAS
    cblas_sgemm(CblasRowMajor, a.trans ? CblasTrans : CblasNoTrans, b.trans ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a.data,
                static_cast<blasint>(a.ld), b.data, static_cast<blasint>(b.ld), 0.0f, y,
                static_cast<blasint>(ldy));
#else
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const float av = a.trans ? a.data[p * a.ld + r] : a.data[r * a.ld + p];
          const float bv = b.trans ? b.data[j * b.ld + p] : b.data[p * b.ld + j];
          acc += av * bv;
        }
        y[r * ldy + j] = alpha * acc;
      }
    }
#endif
  }
  Epilogue(y, ldy, m, n, bias, activation);
}

// a's rows [r0, r1) of op(a), as a matrix of its own.
Matrix RowsOf(Matrix a, int64_t r0) {
  return {a.trans ? a.data + r0 : a.data + r0 * a.ld, a.ld, a.trans};
}
// op(b)'s columns from c0.
Matrix ColsOf(Matrix b, int64_t c0) {
  return {b.trans ? b.data + c0 * b.ld : b.data + c0, b.ld, b.trans};
}

}  // namespace

void Gemm(Matrix a, Matrix b, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha,
          const float* bias, std::optional<EwFunc> activation, bool parallel) {
  // Blocks of 256 rows (or, for a product of few rows, 256 columns), one
  // single-threaded sgemm each, spread over the threads. The blocks depend
  // on the shape alone, never on the thread count or on whether the product
  // runs alone or beside a group's other members: OpenBLAS sums a row's
  // products in an order that can depend on where the row falls in its call
  // (its micro-kernel's leftover rows and columns), so the same calls are
  // what gives the same bytes on any thread count and in any schedule.
  constexpr int64_t kBlock = 256;
  const bool by_rows = m >= 2 * kBlock;
  const bool by_cols = !by_rows && n >= 2 * kBlock;
  const int64_t blocks = by_rows ? (m + kBlock - 1) / kBlock : by_cols ? (n + kBlock - 1) / kBlock : 1;
  const auto run = [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t lo = blk * kBlock;
      if (by_rows) {
        GemmPart(RowsOf(a, lo), b, y + lo * ldy, ldy, std::min(kBlock, m - lo), n, k, alpha, bias, activation);
      } else if (by_cols) {
        GemmPart(a, ColsOf(b, lo), y + lo, ldy, m, std::min(kBlock, n - lo), k, alpha, bias ? bias + lo : nullptr,
                 activation);
      } else {
        GemmPart(a, b, y, ldy, m, n, k, alpha, bias, activation);
      }
    }
  };
  const int64_t flops = m * n * std::max<int64_t>(k, 1);
  if (!parallel || blocks == 1 || Threads() == 1 || flops < kParallelFlops) {
    run(0, blocks);
  } else {
    ParallelFor(blocks, 1, run);
  }
}

void BatchedGemm(const float* a, const std::vector<int64_t>& a_off, int64_t lda, bool trans_a,
                 const float* b, const std::vector<int64_t>& b_off, int64_t ldb, bool trans_b,
                 float* y, int64_t m, int64_t n, int64_t k) {
  const auto batch = static_cast<int64_t>(a_off.size());
  HFUSE_CHECK(b_off.size() == a_off.size());
  const auto one = [&](int64_t i, bool parallel) {
    Gemm({a + a_off[static_cast<size_t>(i)], lda, trans_a}, {b + b_off[static_cast<size_t>(i)], ldb, trans_b},
         y + i * m * n, n, m, n, k, 1.0f, nullptr, std::nullopt, parallel);
  };
  if (batch == 1 || batch * m * n * std::max<int64_t>(k, 1) < kParallelFlops) {
    for (int64_t i = 0; i < batch; ++i) one(i, true);
    return;
  }
  ParallelFor(batch, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) one(i, false);
  });
}

std::optional<BinOp> BinOpOf(EwFunc func) {
  switch (func) {
    case EwFunc::kAdd: return BinOp::kAdd;
    case EwFunc::kSub: return BinOp::kSub;
    case EwFunc::kMul: return BinOp::kMul;
    case EwFunc::kDiv: return BinOp::kDiv;
    default: return std::nullopt;
  }
}

namespace {

// The innermost run: n values, a and b each at stride 1 or 0 (a scalar
// over the run). One loop per case so that the compiler vectorises each.
template <typename F>
void Run(F f, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (sa == 1) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  } else if (sb == 1) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else {
    const float v = f(*a, *b);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

template <typename F>
void BinaryWith(F f, const float* a, const std::vector<int64_t>& a_shape, const float* b,
                const std::vector<int64_t>& b_shape, float* y, const std::vector<int64_t>& y_shape) {
  // Per output dim: its size and each operand's stride (0 where broadcast).
  const size_t rank = y_shape.size();
  std::vector<int64_t> size, sa, sb;
  {
    std::vector<int64_t> fa(rank, 0), fb(rank, 0);
    int64_t stride = 1;
    for (size_t d = a_shape.size(); d-- > 0;) {
      fa[rank - a_shape.size() + d] = a_shape[d] == 1 ? 0 : stride;
      stride *= a_shape[d];
    }
    stride = 1;
    for (size_t d = b_shape.size(); d-- > 0;) {
      fb[rank - b_shape.size() + d] = b_shape[d] == 1 ? 0 : stride;
      stride *= b_shape[d];
    }
    // Collapse, inner dims first: drop dims of size 1, and merge a dim
    // into the run inside it when both operands step over the two alike
    // (contiguously, or not at all), so that most calls have one or two runs.
    for (size_t d = rank; d-- > 0;) {
      if (y_shape[d] == 1) continue;
      if (!size.empty() && fa[d] == sa.back() * size.back() && fb[d] == sb.back() * size.back()) {
        size.back() *= y_shape[d];
        continue;
      }
      size.push_back(y_shape[d]);
      sa.push_back(fa[d]);
      sb.push_back(fb[d]);
    }
    std::reverse(size.begin(), size.end());
    std::reverse(sa.begin(), sa.end());
    std::reverse(sb.begin(), sb.end());
  }
  if (size.empty()) {
    y[0] = f(a[0], b[0]);
    return;
  }
  const size_t r = size.size();
  const int64_t inner = size.back();
  const int64_t ia = sa.back(), ib = sb.back();
  // Contiguous operands: the innermost run steps by 1, or by 0 (broadcast).
  HFUSE_CHECK((ia == 0 || ia == 1) && (ib == 0 || ib == 1));
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < r; ++d) outer *= size[d];
  ParallelFor(outer, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(inner, 1)),
              [&](int64_t o0, int64_t o1) {
                std::vector<int64_t> index(r - 1, 0);
                int64_t rest = o0, oa = 0, ob = 0;
                for (size_t d = r - 1; d-- > 0;) {
                  index[d] = rest % size[d];
                  rest /= size[d];
                  oa += index[d] * sa[d];
                  ob += index[d] * sb[d];
                }
                for (int64_t o = o0; o < o1; ++o) {
                  Run(f, a + oa, ia, b + ob, ib, y + o * inner, inner);
                  for (size_t d = r - 1; d-- > 0;) {  // next outer index
                    oa += sa[d];
                    ob += sb[d];
                    if (++index[d] < size[d]) break;
                    oa -= sa[d] * size[d];
                    ob -= sb[d] * size[d];
                    index[d] = 0;
                  }
                }
              });
}

}  // namespace

void Binary(BinOp op, const float* a, const std::vector<int64_t>& a_shape, const float* b,
            const std::vector<int64_t>& b_shape, float* y, const std::vector<int64_t>& y_shape) {
  switch (op) {
    case BinOp::kAdd: return BinaryWith([](float x, float z) { return x + z; }, a, a_shape, b, b_shape, y, y_shape);
    case BinOp::kSub: return BinaryWith([](float x, float z) { return x - z; }, a, a_shape, b, b_shape, y, y_shape);
    case BinOp::kMul: return BinaryWith([](float x, float z) { return x * z; }, a, a_shape, b, b_shape, y, y_shape);
    case BinOp::kDiv: return BinaryWith([](float x, float z) { return x / z; }, a, a_shape, b, b_shape, y, y_shape);
    case BinOp::kMax: return BinaryWith([](float x, float z) { return std::max(x, z); }, a, a_shape, b, b_shape, y, y_shape);
    case BinOp::kMin: return BinaryWith([](float x, float z) { return std::min(x, z); }, a, a_shape, b, b_shape, y, y_shape);
    case BinOp::kPow: return BinaryWith([](float x, float z) { return std::pow(x, z); }, a, a_shape, b, b_shape, y, y_shape);
  }
}

namespace {
template <typename T>
void CopyTyped(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t r0, int64_t r1,
               int64_t count) {
  for (int64_t r = r0; r < r1; ++r) {
    T* d = reinterpret_cast<T*>(dst + r * dst_stride);
    const T* s = reinterpret_cast<const T*>(src + r * src_stride);
    for (int64_t i = 0; i < count; ++i) std::memcpy(d + i, s + i, sizeof(T));
  }
}
}  // namespace

void CopyRows(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t rows,
              int64_t width) {
  if (rows <= 0 || width <= 0) return;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / width);  // 256 KiB a part
  ParallelFor(rows, grain, [&](int64_t r0, int64_t r1) {
    if (width <= 64 && width % 4 == 0 && dst_stride % 4 == 0 && src_stride % 4 == 0) {
      CopyTyped<uint32_t>(dst, dst_stride, src, src_stride, r0, r1, width / 4);
    } else {
      for (int64_t r = r0; r < r1; ++r) {
        std::memcpy(dst + r * dst_stride, src + r * src_stride, static_cast<size_t>(width));
      }
    }
  });
}

void Unary(EwFunc func, const float* x, float* y, int64_t n) {
  ParallelFor(n, int64_t{1} << 15, [&](int64_t i0, int64_t i1) {
    switch (func) {
      case EwFunc::kRelu:
        for (int64_t i = i0; i < i1; ++i) y[i] = std::max(x[i], 0.0f);
        break;
      case EwFunc::kSigmoid:
        for (int64_t i = i0; i < i1; ++i) y[i] = Sigmoid(x[i]);
        break;
      default:
        for (int64_t i = i0; i < i1; ++i) y[i] = Apply(func, x[i]);
    }
  });
}

void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 13) / std::max<int64_t>(n, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float* in = x + r * n;
                  float* out = y + r * n;
                  float high = -INFINITY;
                  for (int64_t j = 0; j < n; ++j) high = std::max(high, in[j]);
                  float sum = 0.0f;
                  for (int64_t j = 0; j < n; ++j) {
                    out[j] = std::exp(in[j] - high);
                    sum += out[j];
                  }
                  if (log) {
                    const float log_sum = std::log(sum);  // as the reference: (x - high) - log(sum)
                    for (int64_t j = 0; j < n; ++j) out[j] = in[j] - high - log_sum;
                  } else {
                    for (int64_t j = 0; j < n; ++j) out[j] = out[j] / sum;
                  }
                }
              });
}

void LayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t n, float eps, bool sigmoid_mul, bool parallel) {
  const auto part = [&](int64_t r0, int64_t r1) {
    cpu::LayerNorm(x + r0 * n, gamma, beta, y + r0 * n, r1 - r0, n, eps, sigmoid_mul);
  };
  if (!parallel) {
    part(0, rows);
    return;
  }
  ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)), part);
}

}  // namespace hfuse::cpu::fast
