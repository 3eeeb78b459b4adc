// The CPU executor's fast kernels. See cpu_fast_kernels.h.
#include "cpu_fast_kernels.h"

#if HFUSE_HAVE_CBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename();
extern "C" int openblas_get_num_threads();
#endif
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include <pthread.h>

#include "cpu_kernels.h"
#include "hfuse/support/error.h"

namespace hfuse::cpu::fast {
namespace {

int g_threads = 0;  // 0: not set yet

// Work below this many multiply-adds runs on one thread: on a 2-core
// machine a split costs a few microseconds of wake-up and barrier, which a
// product of 2^17 multiply-adds (about 10 us) does not earn back.
constexpr int64_t kParallelFlops = int64_t{1} << 18;

// ---- vector math ----------------------------------------------------------
// exp, sigmoid and erf as plain float arithmetic (no libm call in the loop),
// so that the compiler vectorises each loop; the loops are cloned for
// AVX-512, AVX2 and the baseline, picked at load time (target_clones). They
// are within a few ulp of libm's (the tests bound it), not its bytes: the
// fast path uses them everywhere it computes these functions (elementwise
// ops, GEMM epilogues, softmax, LayerNorm's sigmoid), so that a fused and an
// unfused graph still compute each value alike.
#define HFUSE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// exp as Cephes' expf: x = k ln2 + r with |r| <= ln2 / 2, a degree-7
// polynomial in r, times 2^k as two powers of two (k/2 and k - k/2, so that
// neither leaves float's exponent range and results below 2^-126 come out
// subnormal, as libm's). Inputs past ln(FLT_MAX) give inf, NaN stays NaN.
inline float ExpPoly(float x) {
  constexpr float kHi = 88.72283935546875f, kLo = -103.972084045410f;
  // Clamped so that k below converts to int32 (NaN too: it takes kHi here and
  // passes through at the end; converting a NaN is undefined behaviour).
  float c = x < kHi ? x : kHi;
  c = c > kLo ? c : kLo;
  const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(c / ln2)
  float r = c - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const auto ki = static_cast<int32_t>(k);
  const int32_t k1 = ki / 2, k2 = ki - k1;
  const float y = p * std::bit_cast<float>((k1 + 127) << 23) * std::bit_cast<float>((k2 + 127) << 23);
  return x > kHi ? std::numeric_limits<float>::infinity() : (x == x ? y : x);
}

inline float SigmoidPoly(float v) { return 1.0f / (1.0f + ExpPoly(-v)); }

// erf as a rational function of x on [-4, 4] (Eigen's float erf: odd
// numerator of degree 13, even denominator of degree 8); +-1 outside.
inline float ErfPoly(float v) {
  const float x = v > 4.0f ? 4.0f : (v < -4.0f ? -4.0f : v);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * x;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

inline float GeluPoly(float a) { return 0.5f * a * (1.0f + ErfPoly(a * 0.70710678118654752f)); }

HFUSE_VECTOR_CLONES void MapSpan(VecFunc func, const float* x, float* y, int64_t n) {
  switch (func) {
    case VecFunc::kExp:
      for (int64_t i = 0; i < n; ++i) y[i] = ExpPoly(x[i]);
      break;
    case VecFunc::kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = SigmoidPoly(x[i]);
      break;
    case VecFunc::kSilu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * SigmoidPoly(x[i]);
      break;
    case VecFunc::kErf:
      for (int64_t i = 0; i < n; ++i) y[i] = ErfPoly(x[i]);
      break;
    case VecFunc::kGelu:
      for (int64_t i = 0; i < n; ++i) y[i] = GeluPoly(x[i]);
      break;
  }
}

// Softmax of a block of rows, a row at a time in 16-float vectors (GCC's
// vector types, kept in registers; one zmm register in the AVX-512 clone):
// its max, y = x - max, then one exp over the whole block (a flat loop that
// vectorises whatever the row length), then per row the sum of the exps and
// times 1 / sum (or, for log-softmax, x - max - log(sum)). A row of n >= 16
// ends with the vector of its last 16 values, overlapping the one before:
// harmless for the max and for y = f(x) (the same values written again),
// masked for the sum. The lanes fold in halves, a tree of
// depth 4 (a chain of 16 dependent steps cost more than a row of 39).
constexpr int64_t kLanes = 16;
// Passing 64-byte vectors by value changes the ABI without AVX-512 (GCC's
// -Wpsabi, reported at the end of the file, so off from here on): these
// helpers are inline in this file and never cross an ABI boundary.
#pragma GCC diagnostic ignored "-Wpsabi"
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneInts = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
constexpr LaneInts kLaneIndex = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr float kExpNormalLow = -87.33654475f;  // ln(FLT_MIN)

inline Lanes LoadLanes(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void StoreLanes(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }
inline Lanes MaxLanes(Lanes a, Lanes b) { return a > b ? a : b; }

template <typename F>
inline float FoldLanes(Lanes v, F f) {
  v = f(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  v = f(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  v = f(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  v = f(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  return v[0];
}

// The lanes of the last vector of a row of n (from n - 16) not yet covered
// by the whole vectors before it.
inline LaneInts TailLanes(int64_t n) {
  return kLaneIndex >= static_cast<int32_t>(kLanes - n % kLanes);
}

inline float RowMax(const float* in, int64_t n) {
  if (n < kLanes) {
    float high = -INFINITY;
    for (int64_t j = 0; j < n; ++j) high = in[j] > high ? in[j] : high;
    return high;
  }
  Lanes m = LoadLanes(in);
  for (int64_t j = kLanes; j + kLanes <= n; j += kLanes) m = MaxLanes(m, LoadLanes(in + j));
  m = MaxLanes(m, LoadLanes(in + n - kLanes));
  return FoldLanes(m, MaxLanes);
}

inline float RowSum(const float* in, int64_t n) {
  if (n < kLanes) {
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum += in[j];
    return sum;
  }
  Lanes s = LoadLanes(in);
  for (int64_t j = kLanes; j + kLanes <= n; j += kLanes) s += LoadLanes(in + j);
  if (n % kLanes) s += TailLanes(n) ? LoadLanes(in + n - kLanes) : Lanes{};
  return FoldLanes(s, [](Lanes a, Lanes b) { return a + b; });
}

// y = f(x) of a row (y may be x). The overlapping last vector is read
// before anything is written (a load that spans two earlier stores would
// wait for them: a store-forwarding stall a row).
template <typename F>
inline void RowMap(const float* x, float* y, int64_t n, F f) {
  if (n < kLanes) {
    for (int64_t j = 0; j < n; ++j) y[j] = f(x[j]);
    return;
  }
  const Lanes last = f(LoadLanes(x + n - kLanes));
  for (int64_t j = 0; j + kLanes <= n; j += kLanes) StoreLanes(y + j, f(LoadLanes(x + j)));
  StoreLanes(y + n - kLanes, last);
}

HFUSE_VECTOR_CLONES void SoftmaxBlock(const float* in, float* out, int64_t rows, int64_t n, bool log,
                                      float* highs) {
  for (int64_t r = 0; r < rows; ++r) {
    highs[r] = RowMax(in + r * n, n);
    const float high = highs[r];
    RowMap(in + r * n, out + r * n, n, [high](auto v) { return v - high; });
  }
  // exp of x - max below -87.3 is under float's smallest normal: written
  // as 0 (at most 1.2e-38 off a value <= 1), because subnormal results and
  // sums of them take the CPU's slow microcode path, tens of times slower.
  const int64_t total = rows * n;
  for (int64_t i = 0; i < total; ++i) out[i] = out[i] < kExpNormalLow ? 0.0f : ExpPoly(out[i]);
  for (int64_t r = 0; r < rows; ++r) {
    float* y = out + r * n;
    const float sum = RowSum(y, n);
    if (log) {
      const float shift = highs[r] + std::log(sum);
      RowMap(in + r * n, y, n, [shift](auto v) { return v - shift; });
    } else {
      const float scale = 1.0f / sum;  // a multiply: a vector division costs 10-16 cycles
      RowMap(y, y, n, [scale](auto v) { return v * scale; });
    }
  }
}

}  // namespace

void VecMath(VecFunc func, const float* x, float* y, int64_t n) {
  ParallelFor(n, int64_t{1} << 14, [&](int64_t i0, int64_t i1) { MapSpan(func, x + i0, y + i0, i1 - i0); });
}

float VecMathOne(VecFunc func, float x) {
  float y = 0.0f;
  MapSpan(func, &x, &y, 1);
  return y;
}

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

namespace {

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// The workers of ParallelFor. A loop is published as a job: its function,
// item count and part count in the fields below, under a generation
// number; every thread (the caller and the workers) claims parts by
// compare-and-swap on `state_` (generation << 32 | next part), and the
// caller, once no part is left to claim, waits only for the parts others
// claimed to be done. A worker that comes late finds nothing to claim, or,
// if the caller has moved on, a newer generation, and its claim of the old
// one fails: so it never runs a part of a loop that has returned. Fields are
// read under a sequence number (`fields_gen_`: 0 while they change) so
// that a worker reading them as the caller publishes the next job sees
// either that job's values or a mismatch, never a mix.
//
// An idle worker spins for kSpin (the next op of a run usually comes within
// microseconds, and a futex wake-up costs several), then sleeps on `wake_`
// until a job comes; ParkThreads sends it to sleep at once.
//
// The pool is never destroyed and its threads are detached: at exit they
// sleep (or spin) on memory that stays valid, and a child forked without
// exec (Python's multiprocessing) has none of them, which the fork handler
// records, so that its loops run on the calling thread instead of joining
// threads that are not there.
class Pool {
 public:
  static Pool& Get() {
    static Pool* pool = [] {
      auto* p = new Pool;
      pthread_atfork(nullptr, nullptr, [] { Get().workers_ = 0; });
      return p;
    }();
    return *pool;
  }

  // False, doing nothing, when the pool is busy (another thread's loop) or
  // this thread is inside a part already: the caller runs f inline.
  bool Run(int64_t n, int64_t parts, int workers, const std::function<void(int64_t, int64_t)>& f) {
    if (in_part_) return false;
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    Grow(workers);
    active_.store(workers, std::memory_order_relaxed);
    gen_ = gen_ + 1 == 0 ? 1 : gen_ + 1;
    fields_gen_.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    fn_.store(&f, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    parts_.store(parts, std::memory_order_relaxed);
    fields_gen_.store(gen_, std::memory_order_release);
    done_.store(0, std::memory_order_relaxed);
    parked_.store(false, std::memory_order_relaxed);
    state_.store(static_cast<uint64_t>(gen_) << 32, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      wake_.fetch_add(1, std::memory_order_seq_cst);
      wake_.notify_all();
    }
    in_part_ = true;
    while (ClaimAndRun(gen_, n, parts, f)) {
    }
    in_part_ = false;
    // Parts others claimed: they are running now.
    for (int spins = 0; done_.load(std::memory_order_acquire) < parts; ++spins) {
      if (spins < (1 << 16)) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
    return true;
  }

  void Park() { parked_.store(true, std::memory_order_relaxed); }

  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

 private:
  static constexpr auto kSpin = std::chrono::microseconds(200);

  Pool() = default;
  ~Pool() = delete;

  void Grow(int workers) {
    for (; workers_ < workers; ++workers_) {
      std::thread([this, index = workers_] { Work(index); }).detach();
    }
  }

  // Claims the next part of generation `gen`, runs it, counts it done;
  // false when no part is left (or the generation has passed).
  bool ClaimAndRun(uint32_t gen, int64_t n, int64_t parts, const std::function<void(int64_t, int64_t)>& f) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(s >> 32) != gen) return false;
      const auto part = static_cast<int64_t>(s & 0xFFFFFFFFu);
      if (part >= parts) return false;
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        f(n * part / parts, n * (part + 1) / parts);
        done_.fetch_add(1, std::memory_order_release);
        return true;
      }
    }
  }

  void Work(int index) {
    in_part_ = true;  // a ParallelFor inside a part runs inline
    uint32_t seen = 0;
    for (;;) {
      // Wait for a generation after `seen`: spin, then sleep.
      auto spin_until = std::chrono::steady_clock::now() + kSpin;
      uint64_t s = state_.load(std::memory_order_acquire);
      for (int spins = 0; static_cast<uint32_t>(s >> 32) == seen; ++spins) {
        const bool spinning = !parked_.load(std::memory_order_relaxed) &&
                              ((spins & 63) != 0 || std::chrono::steady_clock::now() < spin_until);
        if (spinning) {
          CpuRelax();
        } else {
          const uint32_t w = wake_.load(std::memory_order_seq_cst);
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          if (static_cast<uint32_t>(state_.load(std::memory_order_seq_cst) >> 32) == seen) {
            wake_.wait(w, std::memory_order_seq_cst);
          }
          sleepers_.fetch_sub(1, std::memory_order_seq_cst);
          spin_until = std::chrono::steady_clock::now() + kSpin;
        }
        s = state_.load(std::memory_order_acquire);
      }
      seen = static_cast<uint32_t>(s >> 32);
      if (index >= active_.load(std::memory_order_relaxed)) continue;  // more workers than this loop wants
      // The job's fields, as of generation `seen`, or nothing.
      const uint32_t g1 = fields_gen_.load(std::memory_order_acquire);
      const std::function<void(int64_t, int64_t)>* f = fn_.load(std::memory_order_relaxed);
      const int64_t n = n_.load(std::memory_order_relaxed), parts = parts_.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (g1 != seen || fields_gen_.load(std::memory_order_relaxed) != seen) continue;
      while (ClaimAndRun(seen, n, parts, *f)) {
      }
    }
  }

  std::mutex busy_;  // one loop at a time
  uint32_t gen_ = 0;  // the caller's, under busy_
  int workers_ = 0;   // threads started (under busy_)
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> fields_gen_{0};
  std::atomic<const std::function<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0}, parts_{0}, done_{0};
  std::atomic<int> active_{0}, sleepers_{0};
  std::atomic<uint32_t> wake_{0};
  std::atomic<bool> parked_{false};
  static thread_local bool in_part_;
};

thread_local bool Pool::in_part_ = false;

}  // namespace

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int threads = Threads();
  // Two parts a thread, so that a thread that starts late, or is
  // descheduled in its part, leaves less for the others to wait on.
  const int64_t parts = std::min<int64_t>(2 * threads, std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (parts <= 1 || threads <= 1 || !Pool::Get().Run(n, parts, threads - 1, f)) f(0, n);
}

void ParallelItems(int64_t n, const std::function<void(int64_t)>& f) {
  const auto range = [&f](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) f(i);
  };
  const int threads = Threads();
  if (n <= 0) return;
  const int64_t parts = std::min<int64_t>(n, int64_t{1} << 30);  // a part an item (the claim's 32 bits)
  if (parts <= 1 || threads <= 1 || !Pool::Get().Run(n, parts, threads - 1, range)) range(0, n);
}

void ParkThreads() { Pool::Get().Park(); }

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
      case EwFunc::kSigmoid: MapSpan(VecFunc::kSigmoid, row, row, n); break;
      case EwFunc::kSilu: MapSpan(VecFunc::kSilu, row, row, n); break;
      case EwFunc::kGelu: MapSpan(VecFunc::kGelu, row, row, n); break;
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

// ---- the packed kernel ------------------------------------------------------
// y = alpha op(a) op(b) with op(b) packed in panels of kPanel columns (see
// PackB), 8 rows by 32 columns at a time in 16 AVX-512 accumulators, each
// element summed over k in order, k = 0 first, one FMA a step: so an
// element's bytes depend on its row of a and column of b alone, not on the
// blocks or threads that computed it. k runs in blocks of kDepth (a panel's
// block, 32 KB, stays in L1 while the rows pass over it), the partial sums
// kept in y between blocks (a float stored and loaded back is the same
// float, so blocking changes nothing). Measured alone on one core of this
// machine (2.7 GHz, AVX-512, 170 GFLOP/s of FMAs): 160-168 GFLOP/s for 64
// or 512 rows by 128-384 columns; 12 x 32 tiles were no faster, 4 or 6 x
// 64 much slower.
constexpr int64_t kDepth = 256;
constexpr int64_t kPanelRows = 8;  // rows of a micro-tile
constexpr int64_t kTileRows = 256;  // rows of a task (its rows of a stay in L2)

#if defined(__x86_64__)
#define HFUSE_AVX512 __attribute__((target("avx512f")))

// What the last block of k does to the sums before they are stored: times
// alpha (when not 1), plus the bias, then ReLU: Epilogue's arithmetic, in
// registers (0 > v ? 0 : v keeps a NaN and -0, as Epilogue's std::max(v, 0) does).
struct TileEnd {
  bool last = false;
  float alpha = 1.0f;
  const float* bias = nullptr;  // at the tile's first column
  bool relu = false;
};

// Rows r of the tile: y[r, 0:cols] (+)= a[r, 0:depth] . panel, with cols
// <= 16 * kHalves (masked past them; kHalves 1: the panel's first 16
// columns only, for products of 16 to 32 columns' last panel); `first`: the
// sums start at 0, else at y.
template <int kRows, int kHalves>
HFUSE_AVX512 void PanelTile(const float* a, int64_t lda, const float* panel, int64_t depth, float* y,
                            int64_t ldy, int64_t cols, bool first, TileEnd end) {
  const __mmask16 m0 = cols >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 =
      cols >= 32 ? __mmask16{0xFFFF} : cols <= 16 ? __mmask16{0} : static_cast<__mmask16>((1u << (cols - 16)) - 1);
  const __mmask16 masks[2] = {m0, m1};
  __m512 acc[kRows][kHalves];
  for (int r = 0; r < kRows; ++r) {
    for (int h = 0; h < kHalves; ++h) {
      acc[r][h] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(masks[h], y + r * ldy + 16 * h);
    }
  }
  for (int64_t p = 0; p < depth; ++p) {
    __m512 b[kHalves];
    for (int h = 0; h < kHalves; ++h) b[h] = _mm512_loadu_ps(panel + p * kPanel + 16 * h);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + p]);
      for (int h = 0; h < kHalves; ++h) acc[r][h] = _mm512_fmadd_ps(av, b[h], acc[r][h]);
    }
  }
  if (end.last) {
    const __m512 s = _mm512_set1_ps(end.alpha), zero = _mm512_setzero_ps();
    const __m512 b0 = end.bias ? _mm512_maskz_loadu_ps(m0, end.bias) : zero;
    const __m512 b1 = end.bias && kHalves > 1 ? _mm512_maskz_loadu_ps(m1, end.bias + 16) : zero;
    for (int r = 0; r < kRows; ++r) {
      for (int h = 0; h < kHalves; ++h) {
        __m512 v = acc[r][h];
        if (end.alpha != 1.0f) v = _mm512_mul_ps(v, s);
        if (end.bias) v = _mm512_add_ps(v, h == 0 ? b0 : b1);
        if (end.relu) v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(zero, v, _CMP_GT_OQ), zero);  // 0 > v ? 0 : v
        acc[r][h] = v;
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int h = 0; h < kHalves; ++h) _mm512_mask_storeu_ps(y + r * ldy + 16 * h, masks[h], acc[r][h]);
  }
}

using PanelTileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool, TileEnd);
// By halves (1 or 2) and rows (1 to 8).
constexpr PanelTileFn kPanelTiles[2][kPanelRows + 1] = {
    {nullptr, PanelTile<1, 1>, PanelTile<2, 1>, PanelTile<3, 1>, PanelTile<4, 1>, PanelTile<5, 1>,
     PanelTile<6, 1>, PanelTile<7, 1>, PanelTile<8, 1>},
    {nullptr, PanelTile<1, 2>, PanelTile<2, 2>, PanelTile<3, 2>, PanelTile<4, 2>, PanelTile<5, 2>,
     PanelTile<6, 2>, PanelTile<7, 2>, PanelTile<8, 2>}};

bool HasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#else
bool HasAvx512() { return false; }
#endif

// Rows [r0, r1) by panel `panel` of the product, then its epilogue.
void PackedTile(const float* a, int64_t lda, const float* packed, int64_t k, float* y, int64_t ldy, int64_t n,
                int64_t r0, int64_t r1, int64_t panel, float alpha, const float* bias,
                std::optional<EwFunc> activation) {
#if defined(__x86_64__)
  const int64_t c0 = panel * kPanel, cols = std::min(kPanel, n - c0);
  // Bias and ReLU in registers; another activation after, over the tile.
  const bool relu = activation == EwFunc::kRelu;
  const int64_t passes = (r1 - r0 + kPanelRows - 1) / kPanelRows;
  const float* panel_end = packed + (panel + 1) * k * kPanel;
  for (int64_t d0 = 0; d0 < k; d0 += kDepth) {
    const int64_t depth = std::min(kDepth, k - d0);
    const float* block = packed + (panel * k + d0) * kPanel;
    const TileEnd end{d0 + depth >= k, alpha, bias ? bias + c0 : nullptr, relu};
    // The first pass over a block reads it from memory, the others from L1;
    // each pass asks for its share of the panel's next block meanwhile
    // (into L2): +16-23% for weights that come from DRAM (FiBiNet's 10 MB
    // layer, alone on one core), within noise for those L3 holds.
    const float* next = block + depth * kPanel;
    const int64_t next_bytes = std::min<int64_t>(kDepth * kPanel, panel_end - next) * int64_t{sizeof(float)};
    for (int64_t r = r0, pass = 0; r < r1; r += kPanelRows, ++pass) {
      const int64_t rows = std::min(kPanelRows, r1 - r);
      for (int64_t b = next_bytes * pass / passes; b < next_bytes * (pass + 1) / passes; b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next) + b, _MM_HINT_T1);
      }
      kPanelTiles[cols > 16 ? 1 : 0][rows](a + r * lda + d0, lda, block, depth, y + r * ldy + c0, ldy, cols,
                                           d0 == 0, end);
    }
  }
  if (activation && !relu) Epilogue(y + r0 * ldy + c0, ldy, r1 - r0, cols, nullptr, activation);
#else
  (void)a, (void)lda, (void)packed, (void)k, (void)y, (void)ldy, (void)n, (void)r0, (void)r1, (void)panel;
  (void)alpha, (void)bias, (void)activation;
  HFUSE_CHECK(false);
#endif
}

// a's rows [r0, r1) of op(a), as a matrix of its own.
// (An empty operand, K = 0, may have no data at all: a null pointer stays
// null, offsetting it is undefined.)
Matrix RowsOf(Matrix a, int64_t r0) {
  if (!a.data) return a;
  return {a.trans ? a.data + r0 : a.data + r0 * a.ld, a.ld, a.trans};
}
// op(b)'s columns from c0.
Matrix ColsOf(Matrix b, int64_t c0) {
  if (!b.data) return b;
  return {b.trans ? b.data + c0 * b.ld : b.data + c0, b.ld, b.trans};
}

}  // namespace

bool PackedGemm(int64_t n, int64_t k, bool trans_a) { return HasAvx512() && !trans_a && n >= 16 && k > 0; }

// Tiles of up to 256 rows by one panel, the row tiles of a panel one after
// another: threads claiming tiles in turn then each keep to their own rows
// of a (in their L2) and share the panel, where the other order had every
// thread read all of a (MMoE at batch 512: 8.3-8.8 ms a run, now 6.3).
int64_t PackedTiles(int64_t m, int64_t n) { return (m + kTileRows - 1) / kTileRows * ((n + kPanel - 1) / kPanel); }

void PackedGemmTile(Matrix a, const float* packed, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* bias, std::optional<EwFunc> activation, int64_t tile) {
  const int64_t row_tiles = (m + kTileRows - 1) / kTileRows, r0 = tile % row_tiles * kTileRows;
  PackedTile(a.data, a.ld, packed, k, y, ldy, n, r0, std::min(m, r0 + kTileRows), tile / row_tiles, alpha, bias,
             activation);
}

int64_t PackedSize(int64_t n, int64_t k) { return (n + kPanel - 1) / kPanel * kPanel * k; }

void PackB(Matrix b, int64_t n, int64_t k, float* out) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  for (int64_t p = 0; p < panels; ++p) {
    float* panel = out + p * k * kPanel;
    const int64_t c0 = p * kPanel, cols = std::min(kPanel, n - c0);
    if (b.trans) {  // b is [n, k]: column j of op(b) is b's row j, read along
      // 64 rows of the panel at a time (8 KB, in L1 while 32 rows of b fill it).
      for (int64_t d0 = 0; d0 < k; d0 += 64) {
        const int64_t d1 = std::min(k, d0 + 64);
        for (int64_t j = 0; j < kPanel; ++j) {
          if (j >= cols) {
            for (int64_t d = d0; d < d1; ++d) panel[d * kPanel + j] = 0.0f;
            continue;
          }
          const float* row = b.data + (c0 + j) * b.ld;
          for (int64_t d = d0; d < d1; ++d) panel[d * kPanel + j] = row[d];
        }
      }
    } else {  // b is [k, n]: a panel's row is a run of b's row
      for (int64_t d = 0; d < k; ++d) {
        std::memcpy(panel + d * kPanel, b.data + d * b.ld + c0, static_cast<size_t>(cols) * sizeof(float));
        std::fill(panel + d * kPanel + cols, panel + (d + 1) * kPanel, 0.0f);
      }
    }
  }
}

void Gemm(Matrix a, Matrix b, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha,
          const float* bias, std::optional<EwFunc> activation, bool parallel, const float* packed) {
  if (m <= 0 || n <= 0) return;  // no output (y may be null: offsetting it is undefined)
  if (PackedGemm(n, k, a.trans)) {
    // op(b) packed once by the caller (a session's weights), or here.
    thread_local std::vector<float> scratch;
    if (!packed) {
      scratch.resize(static_cast<size_t>(PackedSize(n, k)));
      PackB(b, n, k, scratch.data());
      packed = scratch.data();
    }
    const int64_t tiles = PackedTiles(m, n);
    const auto run = [&](int64_t t) { PackedGemmTile(a, packed, y, ldy, m, n, k, alpha, bias, activation, t); };
    if (!parallel || Threads() == 1 || m * n * k < kParallelFlops) {
      for (int64_t t = 0; t < tiles; ++t) run(t);
    } else {
      ParallelItems(tiles, run);
    }
    return;
  }
  // Blocks of 256 rows (or, for a product of fewer than 512 rows, columns:
  // 256 wide from 512 columns, 128 from 256, 64 from 128, so that a batch
  // of 64 rows through a 256-wide layer still splits; a narrower block
  // costs its sgemm 4-6% measured, the second core doubles it), one
  // single-threaded sgemm each, spread over the threads. The blocks depend
  // on the shape alone, never on the thread count or on whether the product
  // runs alone or beside a group's other members: OpenBLAS sums a row's
  // products in an order that can depend on where the row falls in its call
  // (its micro-kernel's leftover rows and columns), so the same calls are
  // what gives the same bytes on any thread count and in any schedule.
  constexpr int64_t kBlock = 256;
  const bool by_rows = m >= 2 * kBlock;
  const int64_t col_block = n >= 2 * kBlock ? kBlock : n >= 256 ? 128 : 64;
  const bool by_cols = !by_rows && n >= 2 * col_block;
  const int64_t blocks = by_rows ? (m + kBlock - 1) / kBlock : by_cols ? (n + col_block - 1) / col_block : 1;
  const auto run = [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t lo = blk * kBlock;
      if (by_rows) {
        GemmPart(RowsOf(a, lo), b, y + lo * ldy, ldy, std::min(kBlock, m - lo), n, k, alpha, bias, activation);
      } else if (by_cols) {
        const int64_t c0 = blk * col_block;
        GemmPart(a, ColsOf(b, c0), y + c0, ldy, m, std::min(col_block, n - c0), k, alpha,
                 bias ? bias + c0 : nullptr, activation);
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
  if (outer == 1) {  // one run (same shapes, or a scalar operand): the run split over the pool
    ParallelFor(inner, int64_t{1} << 15, [&](int64_t i0, int64_t i1) {
      Run(f, a + i0 * ia, ia, b + i0 * ib, ib, y + i0, i1 - i0);
    });
    return;
  }
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
  ParallelFor(n, int64_t{1} << 14, [&](int64_t i0, int64_t i1) {
    switch (func) {
      case EwFunc::kRelu:
        for (int64_t i = i0; i < i1; ++i) y[i] = std::max(x[i], 0.0f);
        break;
      case EwFunc::kSigmoid: MapSpan(VecFunc::kSigmoid, x + i0, y + i0, i1 - i0); break;
      case EwFunc::kSilu: MapSpan(VecFunc::kSilu, x + i0, y + i0, i1 - i0); break;
      case EwFunc::kGelu: MapSpan(VecFunc::kGelu, x + i0, y + i0, i1 - i0); break;
      default:
        for (int64_t i = i0; i < i1; ++i) y[i] = Apply(func, x[i]);
    }
  });
}

namespace {

// The transpose of T elements over reduced dims: out dim d has size o[d]
// and steps through x by is[d] elements; y is contiguous.
template <typename T>
void TransposeTyped(const T* x, T* y, const std::vector<int64_t>& o, const std::vector<int64_t>& is) {
  const size_t r = o.size();
  std::vector<int64_t> os(r, 1);  // y's strides
  for (size_t d = r - 1; d-- > 0;) os[d] = os[d + 1] * o[d + 1];
  if (is[r - 1] == 1) {  // the innermost dim stays innermost: runs of o[r-1]
    const int64_t run = o[r - 1];
    int64_t outer = 1;
    for (size_t d = 0; d + 1 < r; ++d) outer *= o[d];
    ParallelFor(outer, std::max<int64_t>(1, 4096 / run), [&](int64_t o0, int64_t o1) {
      std::vector<int64_t> index(r - 1, 0);
      int64_t rest = o0, src = 0;
      for (size_t d = r - 1; d-- > 0;) {
        index[d] = rest % o[d];
        rest /= o[d];
        src += index[d] * is[d];
      }
      for (int64_t at = o0; at < o1; ++at) {
        std::memcpy(y + at * run, x + src, static_cast<size_t>(run) * sizeof(T));
        for (size_t d = r - 1; d-- > 0;) {
          src += is[d];
          if (++index[d] < o[d]) break;
          src -= is[d] * o[d];
          index[d] = 0;
        }
      }
    });
    return;
  }
  // x's innermost dim is y's dim q: tiles of (q, r - 1), read along q and
  // written along r - 1, for each index of the other dims.
  size_t q = 0;
  while (is[q] != 1) ++q;
  constexpr int64_t kTile = 16;
  std::vector<size_t> rest_dims;
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < r; ++d) {
    if (d == q) continue;
    rest_dims.push_back(d);
    outer *= o[d];
  }
  const int64_t tiles_q = (o[q] + kTile - 1) / kTile, n = o[r - 1], sx = is[r - 1], sy = os[q];
  ParallelFor(outer * tiles_q, std::max<int64_t>(1, 4096 / (kTile * n)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t rest = t / tiles_q, src = 0, dst = 0;
      for (size_t i = rest_dims.size(); i-- > 0;) {
        const size_t d = rest_dims[i];
        const int64_t at = rest % o[d];
        rest /= o[d];
        src += at * is[d];
        dst += at * os[d];
      }
      const int64_t i0 = (t % tiles_q) * kTile, i1 = std::min(o[q], i0 + kTile);
      for (int64_t j0 = 0; j0 < n; j0 += kTile) {
        const int64_t j1 = std::min(n, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i) {
          T* out = y + dst + i * sy;
          const T* in = x + src + i;
          for (int64_t j = j0; j < j1; ++j) out[j] = in[j * sx];
        }
      }
    }
  });
}

}  // namespace

bool Transpose(const uint8_t* x, uint8_t* y, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm,
               size_t elem) {
  if (elem != 1 && elem != 2 && elem != 4 && elem != 8) return false;
  const size_t rank = shape.size();
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel == 0) return true;
  // Dims of 1 dropped, x's dims renumbered.
  std::vector<int64_t> id(rank, -1), kept_shape;
  for (size_t d = 0; d < rank; ++d) {
    if (shape[d] != 1) {
      id[d] = static_cast<int64_t>(kept_shape.size());
      kept_shape.push_back(shape[d]);
    }
  }
  // y's dims as runs of neighbouring x dims (in y's order).
  std::vector<std::pair<int64_t, int64_t>> groups;  // (first x dim, last x dim)
  for (size_t d = 0; d < rank; ++d) {
    const int64_t k = id[static_cast<size_t>(perm[d])];
    if (k < 0) continue;
    if (!groups.empty() && groups.back().second + 1 == k) {
      groups.back().second = k;
    } else {
      groups.emplace_back(k, k);
    }
  }
  if (groups.size() <= 1) {  // nothing moves: one copy
    std::memcpy(y, x, static_cast<size_t>(numel) * elem);
    return true;
  }
  // The reduced x: the groups in x's order, each one dim.
  std::vector<size_t> by_x(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) by_x[g] = g;
  std::sort(by_x.begin(), by_x.end(), [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  std::vector<int64_t> x_stride(groups.size());  // by group, in elements
  int64_t stride = 1;
  for (size_t i = by_x.size(); i-- > 0;) {
    const auto& [first, last] = groups[by_x[i]];
    x_stride[by_x[i]] = stride;
    for (int64_t k = first; k <= last; ++k) stride *= kept_shape[static_cast<size_t>(k)];
  }
  std::vector<int64_t> o, is;
  for (size_t g = 0; g < groups.size(); ++g) {
    int64_t size = 1;
    for (int64_t k = groups[g].first; k <= groups[g].second; ++k) size *= kept_shape[static_cast<size_t>(k)];
    o.push_back(size);
    is.push_back(x_stride[g]);
  }
  switch (elem) {
    case 1: TransposeTyped(x, y, o, is); break;
    case 2: TransposeTyped(reinterpret_cast<const uint16_t*>(x), reinterpret_cast<uint16_t*>(y), o, is); break;
    case 4: TransposeTyped(reinterpret_cast<const uint32_t*>(x), reinterpret_cast<uint32_t*>(y), o, is); break;
    default: TransposeTyped(reinterpret_cast<const uint64_t*>(x), reinterpret_cast<uint64_t*>(y), o, is); break;
  }
  return true;
}

void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  // Blocks of rows of about 4096 values (16 KiB: the block stays in L1
  // between its three passes).
  const int64_t block = std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1));
  ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 13) / std::max<int64_t>(n, 1)),
              [&](int64_t r0, int64_t r1) {
                std::vector<float> highs(static_cast<size_t>(std::min(block, r1 - r0)));
                for (int64_t r = r0; r < r1; r += block) {
                  const int64_t rows_here = std::min(block, r1 - r);
                  SoftmaxBlock(x + r * n, y + r * n, rows_here, n, log, highs.data());
                }
              });
}

void LayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t n, float eps, bool sigmoid_mul, bool parallel) {
  // The reference's arithmetic per row; with sigmoid_mul, x * sigmoid(ln)
  // with the fast path's sigmoid (that of a separate Sigmoid and Mul).
  const auto part = [&](int64_t r0, int64_t r1) {
    cpu::LayerNorm(x + r0 * n, gamma, beta, y + r0 * n, r1 - r0, n, eps, false);
    if (!sigmoid_mul) return;
    for (int64_t r = r0; r < r1; ++r) {
      float* row = y + r * n;
      MapSpan(VecFunc::kSigmoid, row, row, n);
      const float* in = x + r * n;
      for (int64_t j = 0; j < n; ++j) row[j] = in[j] * row[j];
    }
  };
  if (!parallel) {
    part(0, rows);
    return;
  }
  ParallelFor(rows, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)), part);
}

}  // namespace hfuse::cpu::fast
