// The CPU executor's fast kernels: float32 only, on the tensors' own bytes
// (no conversion copies), matrix products through hfuse's packed AVX-512
// kernel or OpenBLAS (Gemm below), loops over contiguous runs, work split
// over a pool of threads (ParallelFor) where an op is large enough to pay
// for the split. The simple kernels (cpu_kernels.h,
// cpu_onnx_ops.cc) stay the reference: each of these is tested against its
// reference on random data (tests/exec/cpu_fast_kernels_test.cc), and the
// executor runs the reference for every form a fast kernel declines.
//
// Threads: one pool of workers that claim parts of a loop (ParallelFor).
// OpenBLAS runs single-threaded during a run (SingleThreadedBlas); a
// product is cut into blocks that depend on its shape alone, and the blocks
// of a large enough product are spread over the pool. Results do not depend
// on the number of threads, nor on which thread ran which part, nor on
// whether a group's members run side by side (cpu_executor_test and
// cpu_fast_kernels_test check both).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse::cpu::fast {

// The pool's size: n > 0 sets it, 0 takes OMP_NUM_THREADS (or the cores).
// Returns the size in effect.
int SetThreads(int n);
// OpenBLAS on one thread for a scope (a run), then as it was: the process
// may share the library (numpy links the same libopenblas).
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int before_ = 1;
};
int Threads();
// The kernel set OpenBLAS runs (its core name), or null without OpenBLAS.
const char* BlasCoreName();

// Runs f(begin, end) over [0, n) in parts of at least `grain` items, on up
// to Threads() threads (inline when one part covers it, and when called from
// inside another ParallelFor or while another thread's runs). The calling
// thread takes parts too, and parts go to whichever thread claims them
// first: a worker the OS has not scheduled yet holds nothing up, where a
// fixed split (OpenMP's) waits for it at the barrier, which on a loaded
// machine cost a run ten times its time (bench/RESULTS.md).
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);
// Runs f(i) for each i in [0, n), each item a part of its own that any
// thread may claim: for items of a few microseconds or more (a product's
// tiles), where balance under load matters more than a claim's cost.
void ParallelItems(int64_t n, const std::function<void(int64_t)>& f);
// The run is over: workers stop spinning for the next part and sleep (a
// spinning worker would take a core from whatever runs between runs).
void ParkThreads();

// y[m, n] (row stride ldy) = alpha * op(a) . op(b) (+ bias[n]) then the
// activation; op(a) is [m, k] (a's rows at stride lda; trans_a: a is [k, m]),
// op(b) is [k, n] (trans_b: b is [n, k], the weight layout of gemm_rcr).
// Splits over the pool when `parallel` and the product is large enough.
struct Matrix {
  const float* data;
  int64_t ld;
  bool trans;
};
//
// On a CPU with AVX-512, a product with op(a) not transposed and n >= 16
// runs the packed kernel instead of OpenBLAS (PackedGemm): op(b) packed into
// panels of 32 columns (PackB; `packed`, when given, is that packing made
// once, as a session does for its weights, else Gemm packs it), each element
// of y the sum over k in order, one FMA a step. It has no packing of a and
// no packing of b per call, which for the few rows of a serving batch cost
// OpenBLAS more than the product (bench/RESULTS.md), and its bytes do not
// depend on how the product is split. Other shapes: OpenBLAS, cut into
// blocks that depend on the shape alone (so the same bytes on any thread
// count too).
void Gemm(Matrix a, Matrix b, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha,
          const float* bias, std::optional<EwFunc> activation, bool parallel = true,
          const float* packed = nullptr);
// Whether Gemm of this shape runs the packed kernel on this CPU; the floats
// of op(b)'s packing; the packing (column j of op(b) at panel j / 32, its
// rows k in order, 32 floats each, zeros past n).
inline constexpr int64_t kPanel = 32;
bool PackedGemm(int64_t n, int64_t k, bool trans_a);
int64_t PackedSize(int64_t n, int64_t k);
void PackB(Matrix b, int64_t n, int64_t k, float* out);
// The packed kernel's work as tiles (up to 256 rows by 32 columns, epilogue
// included), which may run on any thread in any order with the same bytes:
// PackedTiles(m, n) of them, tile t computed by PackedGemmTile. A group op
// runs all its members' tiles in one loop.
int64_t PackedTiles(int64_t m, int64_t n);
void PackedGemmTile(Matrix a, const float* packed, float* y, int64_t ldy, int64_t m, int64_t n, int64_t k,
                    float alpha, const float* bias, std::optional<EwFunc> activation, int64_t tile);
// The same with the activation and bias applied in one pass over y's rows
// (the GEMM's epilogue): exposed for the group ops, which split members.
void Epilogue(float* y, int64_t ldy, int64_t m, int64_t n, const float* bias,
              std::optional<EwFunc> activation);

// A batch of products of one shape: matrix i of a at a + a_off[i], of b at
// b + b_off[i], of y at y + i * m * n (contiguous). The batch is split over
// the pool when it has several matrices, else each product is.
void BatchedGemm(const float* a, const std::vector<int64_t>& a_off, int64_t lda, bool trans_a,
                 const float* b, const std::vector<int64_t>& b_off, int64_t ldb, bool trans_b,
                 float* y, int64_t m, int64_t n, int64_t k);

// y = f(a, b) with numpy broadcasting of a and b to y's shape (ranks
// aligned at the right). The dims are first collapsed into the fewest runs;
// the innermost run is a plain loop (both operands contiguous, or one a
// scalar over the run); a single run is itself split over the pool.
enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kMax, kMin, kPow };
std::optional<BinOp> BinOpOf(EwFunc func);
void Binary(BinOp op, const float* a, const std::vector<int64_t>& a_shape, const float* b,
            const std::vector<int64_t>& b_shape, float* y, const std::vector<int64_t>& y_shape);
// Copies `rows` rows of `width` bytes from src (rows `src_stride` bytes
// apart) to dst (`dst_stride` apart): typed loops for rows of one to a few
// elements (a stack along a new last axis), memcpy for wider ones, rows
// split over the pool when there are many.
void CopyRows(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t rows,
              int64_t width);
// y = f(x), n values.
void Unary(EwFunc func, const float* x, float* y, int64_t n);

// The fast path's exp, sigmoid (1 / (1 + exp(-x))), silu (x sigmoid(x)),
// erf and gelu (0.5 x (1 + erf(x / sqrt 2))): polynomials in float that
// vectorise, within a few ulp of libm's (exp, sigmoid) and 3e-7 of erf, not
// its bytes. Every fast kernel that computes one of these uses them (the
// elementwise ops, GEMM epilogues, Softmax, LayerNorm's sigmoid), so that
// fused and unfused graphs agree bitwise on the fast path as they do on the
// reference. y may be x. VecMathOne: one value (the tests).
enum class VecFunc : uint8_t { kExp, kSigmoid, kSilu, kErf, kGelu };
void VecMath(VecFunc func, const float* x, float* y, int64_t n);
float VecMathOne(VecFunc func, float x);

// y = x transposed by perm (y's dim d is x's dim perm[d]), elements of
// `elem` bytes: dims of 1 dropped and dims that stay neighbours merged,
// then runs copied whole where the innermost dim stays innermost, else
// 16 x 16 tiles of the two innermost dims (reads and writes both in runs),
// split over the pool. The same bytes as the reference (a copy). False,
// copying nothing, for elements of other than 1, 2, 4 or 8 bytes.
bool Transpose(const uint8_t* x, uint8_t* y, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm,
               size_t elem);

// Softmax (or log-softmax) of each of `rows` contiguous rows of n values,
// one pass per row with the fast exp (its sum in 16 partial sums): within
// 1e-6 of the reference, not its bytes.
void SoftmaxRows(const float* x, float* y, int64_t rows, int64_t n, bool log);

// LayerNorm of `rows` rows of n (cpu_kernels.h's LayerNorm, same arithmetic
// per row, rows split over the pool); with sigmoid_mul, x * sigmoid(ln) with
// the fast sigmoid (VecMath).
void LayerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t n, float eps, bool sigmoid_mul, bool parallel = true);

}  // namespace hfuse::cpu::fast
