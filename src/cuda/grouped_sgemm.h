// A grouped float32 GEMM in one launch, for the groups the CUTLASS kernels
// here do not take (they are float16/bfloat16 tensor-core kernels): the
// experts, gates and towers of a ranking model exported in float32, where
// each member is a small product (a batch of rows through a layer of tens
// to hundreds of units) and one cuBLASLt call a member costs a launch each.
// y_i = act_i(alpha * A_i W_i^T + bias_i) for every member i, each member
// with its own bias and activation, to float32's accuracy: on the CUDA
// cores in float32 arithmetic, or (SgemmOptions::tensor) on the tensor
// cores as three TF32 products a product (3xTF32, below), never one TF32
// product (TF32 keeps 10 bits of float32's 23).
//
// Each block computes one tile of one member's output (SgemmConfig: its
// rows x columns), over all of K or, split-K, over one range of K. The
// host lays the tiles out once (SgemmTiles), the most work first, and
// uploads the members and tiles at plan time; the kernel reads its tile's
// member and shape from the table, so no division; a merged member
// (SgemmOptions::merge) finds the members of its tile's rows of W and
// columns of output once a tile, walking at most kSgemmMaxMerged.
//
// The rule (SgemmTiles), measured on the H200 with
// bench/grouped_sgemm_bench.cu and on the real models (`hfuse bench
// --gemm-paths`; bench/RESULTS.md, 2026-12-04, seventh session): the tiled
// kernel (SgemmKernel::kTiled, every config of this file but kLegacy, 2
// blocks of 256 threads an SM) runs a group whose members are all short
// products at most 16 wide (FiBiNet's 325 products of 16 x 16 x 16), on
// k256x16 tiles: 74 against 142 us for one such group at M 2048, FiBiNet
// 1029 -> 901 us a run. Every other group runs the kernel before it
// (kLegacy's 64 x 64 tile, 16 deep, and its narrow path, a warp a row for
// members at most 16 wide with K of 64 or more), which measured as fast
// or faster there: on DCNv2's groups 128x32 won alone (54 against 68 us)
// but the model ran slower (237 against 221 us at batch 512), and the
// 128 x 128 and 128 x 64 configs (8 x 8 and 8 x 4 a thread) lost on every
// real group. (The tiled kernel's rule for a member, RuleConfig: n <= 16
// and k >= 64 kNarrow, n <= 16 k256x16, n <= 32 k128x32, else k64x64.)
// With SgemmOptions::staged (off by default: not yet measured in the
// models in this form), a group whose members are all deep (wider than
// 16, K of 128 or more) on no more 64 x 64 tiles than the SMs runs the
// sliced kernel (SgemmKernel::kSliced): 512 threads a tile, K
// dealt out 16 deep to two slices of 256 threads, each with 4 steps of A
// and W in flight (cp.async) and its own barrier, their sums added at the
// end. Such a tile has an SM of its own and, one slice alone, left it
// waiting on memory most of the time (ncu: 20% occupancy, long-scoreboard
// stalls first): DCNv2's merged experts and gates at batch 2048, 96 tiles
// of K 429, 36.8 -> 33.5 us on an H100 (bench/RESULTS.md, 2026-12-05,
// sixteenth session). The staged tile one slice a tile, on more tiles,
// measured faster alone (DCNv2's first layer 53.7 -> 48.6 us) but made
// the models slower (PLE 300.8 -> 324.3 us a run at 2048), so the rule
// keeps the kernel before there. With the staged tiles on both ways
// (sliced where few, alone elsewhere), DCNv2 ran 262.8 -> 253.9 us at 2048
// but PLE 300.8 -> 313.0; the sliced kernel alone was not measured in the
// models before the device time ran out, so it stays off.
// With SgemmOptions::tensor (the CUDA executor's default,
// CudaOptions::sgemm_tensor), a group of deep members, and narrow ones of
// long K beside them, runs the deep members' tiles on the tensor cores in
// 3xTF32 (SgemmKernel::kTensor): DCNv2's groups of K 429 at batch 2048,
// 55.7 -> 49.1 and 37.8 -> 34.6 us alone on an H100, DCNv2 222.4 -> 213.5
// us a run, PLE 302.6 -> 298.3, MMOE and AutoInt unchanged
// (bench/RESULTS.md, 2026-12-06, eighteenth session).
// Split-K is there for tests and the benchmark (SgemmOptions::split); the
// rule does not split: on the real groups it measured slower (a second
// pass over the partial sums costs more than the idle SMs it fills).
// Split-K: a member's K cut into ranges; each range's block writes its
// partial sums to the workspace; the last of an output tile's blocks to
// arrive (an atomic counter a tile) adds the partial sums in the order of
// their ranges, so the result does not depend on which block finishes last
// (the same bits every run), applies bias and activation, and sets the
// counter back to 0 for the next launch (CUDA graphs replay it). No block
// waits on another.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hfuse::cuda {

// A tile shape: rows x columns of a member's output a block of 256 threads
// computes, and the outputs a thread holds.
enum class SgemmConfig : int32_t {
  kLegacy = 0,    // 64 x 64, 4 x 4 a thread, 16 deep, one step of register prefetch: the kernel before
  kNarrow = 1,    // 8 rows x all columns (n <= kSgemmNarrow), a warp a row
  k128x128 = 2,   // 8 x 8 a thread
  k128x64 = 3,    // 8 x 4
  k64x64 = 4,     // 4 x 4
  k128x32 = 5,    // 4 x 4
  k256x16 = 6,    // 4 x 4
  kStaged64x64 = 7,  // 4 x 4, 16 deep, 4 stages of cp.async in flight, two slices of K (SgemmKernel::kSliced)
  kTensor64x64 = 8,  // the staged tile's loads, its products on the tensor cores as 3 TF32 products (SgemmKernel::kTensor)
};
inline constexpr int kSgemmConfigs = 9;
const char* SgemmConfigName(SgemmConfig c);

// Which kernel a group's launch runs (SgemmTiles decides, for all its tiles).
enum class SgemmKernel : int32_t {
  kLegacy,  // kLegacy and kNarrow tiles
  kTiled,   // every config but kLegacy
  kSliced,  // kStaged64x64 tiles only (SgemmOptions::staged)
  kTensor,        // kTensor64x64 and kNarrow tiles (SgemmOptions::tensor)
  kTensorSliced,  // kTensor64x64 tiles only, two slices of K a tile (SgemmOptions::tensor and staged)
};

inline constexpr int kSgemmNarrow = 16, kSgemmNarrowMinK = 64;
// The rule's deep members (n > kSgemmNarrow, k >= kSgemmStagedMinK): the
// staged tile (SgemmOptions::staged).
inline constexpr int kSgemmStagedMinK = 128;
// The tensor tiles' split-K by the rule (SgemmOptions::tensor_split 0): at
// most this many ranges, the most measured (bench/RESULTS.md, 2026-12-07:
// DCNv2 at batch 512 on an H100, 130.9 against 140.3 us a run; at 2048,
// where 2 ranges would be more tiles than SMs, 208.2 against 202.0).
inline constexpr int kSgemmTensorMaxSplit = 2;

struct SgemmMember {
  const float* a;     // [m, k], row stride lda
  const float* w;     // [n, k], packed
  const float* bias;  // [n], or null
  float* y;           // [m, n], row stride ldy
  int64_t m, n, k, lda, ldy;
  int32_t act;        // an EwFunc code (kernels.h), kLeakyReluActivation or kNoActivation
  float act_alpha = 0.0f;  // LeakyRelu's slope below 0 (act kLeakyReluActivation)
  // Set by SgemmTiles only (SgemmOptions::merge). A merged member (count >
  // 0) is the members first .. first + count - 1 of the launch's table side
  // by side: their one A, n the sum of theirs, and w, bias, y, ldy, act
  // unused (each column's are its own member's); such a member's n0 is
  // its first column in the merged one.
  int32_t n0 = 0, first = 0, count = 0;
  // W's 3xTF32 parts, made once from a weight (LaunchSplitTf32's W order:
  // row r's big part at w3 + 3 kp r, its small part kp after, kp = k
  // rounded up to 4, zeros past k), or null. A tensor tile whose rows of W
  // all have them (kSgemmPartsW) loads them, 16 bytes at a time, rather
  // than splitting every float of W in every tile that reads it
  // (SgemmOptions::tensor): the same bits, fewer instructions a product.
  const float* w3 = nullptr;
};
// The most members one merged member takes (its kernel finds a column's
// member by walking them).
inline constexpr int kSgemmMaxMerged = 16;

// SgemmTile::flags: float4 loads and stores where the host found the rows
// 16-byte aligned (lda, k, ldy multiples of 4 and the pointers aligned);
// kSgemmPartsW: a tensor tile whose every row of W has its parts made
// (SgemmMember::w3).
inline constexpr int32_t kSgemmVecA = 1, kSgemmVecW = 2, kSgemmVecY = 4, kSgemmPartsW = 8;

struct SgemmTile {
  int32_t member;
  int32_t m0, n0;
  int32_t config;         // an SgemmConfig
  int32_t k0, k1;         // the range of K this block sums
  int32_t split, splits;  // which range of the output tile's `splits` (1: no split-K)
  int32_t counter;        // split-K: the output tile's arrival counter
  int32_t flags;          // kSgemmVec*
  int64_t partial;        // split-K: the output tile's partial sums, floats into the workspace
};

struct SgemmOptions {
  int config = -1;     // -1: the rule; else an SgemmConfig for every member that it can take
  int split = 0;       // 0 or 1: no split-K (the rule); n > 1: n ranges of K for every tiled member
  bool tiled = false;  // config -1: the tiled kernel with the rule's configs, whichever kernel the rule picks
  // Members that read one A (the same a, lda, m and k) and leave columns
  // of a 64-wide tile idle (n not a multiple of 64) run as one member over
  // their weights side by side, kSgemmMaxMerged at most, where together
  // they are wider than kSgemmNarrow and take fewer 64-column tiles:
  // DCNv2's four experts of 32 and four gates of one column that read the
  // cross layer's input fill three tiles' columns, where apart each expert
  // left half its 64 x 64 tiles' columns idle and each gate took narrow
  // tiles of its own (grouped_sgemm.cu, Units).
  bool merge = true;
  // With merge: the device's SMs; members merge only where the merged
  // member has at least sms / 2 tiles of 64 x 64 (0: wherever they can).
  // Measured with grouped_sgemm_bench on an H100 (132 SMs; bench/RESULTS.md,
  // 2026-12-05, fifteenth session): DCNv2's groups of K 429 at batch 2048,
  // 224 and 96 tiles merged, ran 56.9 and 37.9 us merged against 66.3 and
  // 50.2 apart; at batch 512, 56 and 24 tiles, 39.2 and 37.3 merged against
  // 34.5 and 31.2 apart: a tile of K 429 is long, and too few of them
  // leave SMs idle that the members' many narrow tiles kept busy. (Those
  // figures merged the DNN's layer of 256 too, which now stays apart.)
  int sms = 0;
  // With config -1: a group whose members are all deep (each wider than
  // kSgemmNarrow with K of kSgemmStagedMinK or more) and take no more 64 x
  // 64 tiles than the SMs (sms) runs the sliced kernel (SgemmKernel::
  // kSliced: kStaged64x64 tiles, K in two slices of 256 threads each):
  // DCNv2's merged experts and gates at batch 2048 (96 tiles of K 429;
  // grouped_sgemm.cu, StagedTile). Off here (SgemmTiles' callers choose);
  // the executor turns it on (CudaOptions::sgemm_staged, measured in the
  // models with the tensor kernel).
  bool staged = false;
  // With config -1: a group whose members are each deep (as above) or
  // narrow with a long K (kNarrow tiles), at least one deep, runs the
  // tensor kernel (SgemmKernel::kTensor; with staged, where the sliced
  // rule holds, kTensorSliced): a deep member's 64 x 64 tiles take the
  // staged tile's loads and run their products on the tensor cores
  // (mma.sync m16n8k8, TF32 in, float32 sums), each float x split into
  // two TF32 parts, big = x rounded to TF32 and small = x - big so
  // rounded, and a * b taken as a_small b_big + a_big b_small + a_big
  // b_big (CUTLASS's "3xTF32", OpMultiplyAddFastF32; the term a_small
  // b_small, under 2^-22 of the product, is dropped): float32's error, not
  // TF32's. An infinite input gives NaN where float32 gives infinity
  // (inf - inf in the split).
  bool tensor = false;
  // With tensor: a group may also have members wider than a narrow tile of
  // short K (below kSgemmStagedMinK) beside its deep ones, their tiles on
  // the tensor cores too (DCNv2's DNN layer of K 256 beside its experts'
  // middle projections of K 32, which otherwise keep the whole group on
  // the CUDA cores; CudaOptions::sgemm_tensor_short).
  bool tensor_short = false;
  // With the tensor kernel (one slice a tile), split-K for its tensor
  // tiles (as the tiled kernel's), so that SMs the tiles leave idle sum
  // ranges too. 0: by the rule, with config -1 and `sms` known: the most
  // ranges, at most kSgemmTensorMaxSplit, that keep the tensor tiles'
  // ranges no more than the SMs (DCNv2's experts at batch 512: 32 tiles of
  // K 429 on 132 SMs, 2 ranges each; at 2048, 96 merged tiles: none). 1:
  // none. N: N ranges where the tensor tiles are no more than `sms` (0:
  // any number), for measuring (CudaOptions::sgemm_tensor_split).
  int tensor_split = 0;
};

struct SgemmTiling {
  // The table the launch reads (upload it; tiles index it): the members
  // given, in their order, then for each merged member its members
  // (copies, n0 set) and itself.
  std::vector<SgemmMember> members;
  std::vector<SgemmTile> tiles;
  SgemmKernel kernel = SgemmKernel::kTiled;
  int64_t workspace_floats = 0;  // split-K partial sums
  int32_t counters = 0;          // split-K output tiles
  bool parts_w = false;          // some tile loads W's parts (kSgemmPartsW): more shared memory a tile
  // The workspace LaunchGroupedSgemm needs: partial sums, then counters
  // that start at 0 (allocate and clear once, at plan time).
  size_t WorkspaceBytes() const {
    return static_cast<size_t>(workspace_floats) * sizeof(float) + static_cast<size_t>(counters) * sizeof(int32_t);
  }
};

// The tiles of `members` (each with m, n, k above 0), the most work first,
// and the table they index.
SgemmTiling SgemmTiles(const std::vector<SgemmMember>& members, const SgemmOptions& options = {});

// One launch over `num_tiles` tiles of `tiling.kernel`, `members` its table
// (device arrays written at plan time: tiling.members and tiling.tiles); `workspace`: tiling.WorkspaceBytes() on the device,
// counters cleared, used by one launch at a time (may be null if none);
// `parts_w`: tiling.parts_w.
void LaunchGroupedSgemm(SgemmKernel kernel, const SgemmMember* members, const SgemmTile* tiles, int num_tiles,
                        float alpha, void* workspace, int64_t workspace_floats, bool parts_w, cudaStream_t stream);

// 3xTF32 through a library's TF32 GEMM (the CUDA executor's large single
// float32 GEMMs and batched MatMuls, CudaOptions::tf32x3): a product a . w
// taken as a_big w_big + a_small w_big + a_big w_small, where big is x
// rounded to nearest TF32 and small the rest so rounded (SplitTf32), is
// one TF32 GEMM of depth 3 kp over operands split along K so: A's K as
// [small | big | big], W's (the other operand's) as [big | small | big],
// every part kp = K rounded up to 4 long (zeros after K, so rows stay
// 16-byte aligned). Its inputs are TF32 values already, so the library's
// TF32 conversion loses nothing, and its float32 sums give float32's
// error, not TF32's. The small products come first along K: summed while
// the sum is still small, each keeps its bits (after the big ones, each
// would be rounded to the whole sum's last bit: with them last, a
// 600 x 520 x 1030 GEMM missed the CPU's result by 1.2e-5 of its largest
// value, on an H100, 2026-12-06).
struct Tf32Split {
  const float* x;      // the operand: `batch` matrices `batch_stride` floats apart
  int64_t batch = 1, batch_stride = 0;
  int64_t rows, cols, ld;  // each matrix: rows x cols, rows ld floats apart
  bool k_along_rows;       // K is the rows (a [K, N] operand), else the columns
  bool w_order;            // W's order of parts, else A's
  // The parts go to `out`, each matrix packed: [rows, 3 kp] (K along the
  // columns) or [3 kp, cols] (along the rows), one after another.
  int64_t Kp() const { return ((k_along_rows ? rows : cols) + 3) / 4 * 4; }
  int64_t OutFloats() const { return batch * 3 * Kp() * (k_along_rows ? cols : rows); }
};
void LaunchSplitTf32(const Tf32Split& split, float* out, cudaStream_t stream);

}  // namespace hfuse::cuda
