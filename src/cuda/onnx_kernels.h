// The CUDA kernels of the opaque ONNX operators (onnx_ops.def's Cuda
// column; onnx_launches.cc plans them): one elementwise kernel for every
// operator that maps elements to elements (arithmetic and comparisons with
// numpy broadcasting, activations, Where, Cast, and the copies that
// Transpose, Slice, Expand, Tile, Concat and Split become), plus the
// gathers, CumSum and Pad. Every operand is read through a strided view
// (StridedOperand): a transposed, sliced or broadcast tensor, or one whose
// elements are cast on load, is read in place, so the ops that only make
// such views launch nothing (view_plan.h). Element types are DType values:
// 0 float16, 1 bfloat16, 2 float32, 3 int64, 4 int32, 5 bool (one byte).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernel_codes.h"

namespace hfuse::cuda {

inline constexpr int kMaxOnnxRank = 8;

// Where an operand's elements are: element i of the iteration space (an
// index (i0, ..., i[rank-1])) is at ptr + sum(i[d] * strides[d]) elements
// of `type`; read as `type`, then converted to `as` (a Cast read in place:
// float to int truncates toward zero, anything to bool is != 0), then to
// the kernel's arithmetic.
struct StridedOperand {
  const void* ptr;
  int64_t strides[kMaxOnnxRank];
  int32_t type;
  int32_t as;
};

// y[i] = func(in[0][i], ...) over `shape` (rank <= kMaxOnnxRank, dims the
// host has merged where every operand allows). `integer`: the arithmetic is
// int64 (integer and bool operands; comparisons of integers), else fp32.
// alpha and beta: LeakyRelu, Elu, HardSigmoid, Swish, Selu (alpha, gamma)
// and Clip (min, max).
struct OnnxElementwiseArgs {
  StridedOperand in[3];
  void* out;
  int64_t out_strides[kMaxOnnxRank];
  int32_t out_type;
  int32_t num_inputs;
  int32_t func;
  int32_t integer;
  int32_t rank;
  float alpha, beta;
  int64_t shape[kMaxOnnxRank];
  int64_t numel;
  // Set by ClassifyElementwise (the host, once the dims are merged): every
  // index and offset fits 32 bits, so the kernel decodes indices with
  // 32-bit divisions; every operand and the output are float32 read as
  // such, so it loads and stores floats without switching on types.
  int32_t narrow;
  int32_t all_f32;
};
void ClassifyElementwise(OnnxElementwiseArgs& args);
void LaunchOnnxElementwise(const OnnxElementwiseArgs& args, cudaStream_t stream);
// `count` independent elementwise ops in one launch (args: a device array
// the host wrote at plan time; max_numel: the largest op's numel): the
// parts of a concatenate or a split, copied together. narrow: every op's
// `narrow` is set.
void LaunchOnnxElementwiseBatch(const OnnxElementwiseArgs* args, int count, int64_t max_numel, bool narrow,
                                cudaStream_t stream);

// Gather along an axis, data (contiguous) seen as [outer, len, inner bytes]:
// y[o, i, :] = data[o, index[i], :] for the `count` indices, read through
// `index` over `index_shape` (any int or float type, cast on load). An
// index outside [-len, len) writes nothing and sets *bad. Output row r
// (r = o * count + i) starts y_row_bytes after row r - 1 (inner_bytes for
// a tensor of its own; more for a slot of a concatenate's output); with
// y_block_rows above 1, rows come in blocks of that many, row r at
// (r / y_block_rows) * y_block_bytes + (r % y_block_rows) * y_row_bytes
// (a lookup of several ids a row, [B, n, D], into its slot of a
// concatenate along n beside other parts: block b its slot of row b). With
// `add` set (float32 rows, moved as words), y[r, :] = row + add[:]: the
// bias row an exporter adds to each embedding.
struct GatherArgs {
  const void* data;
  StridedOperand index;
  int64_t index_shape[kMaxOnnxRank];
  int32_t index_rank;
  void* y;
  int64_t outer, len, count, inner_bytes;
  int* bad;
  int64_t y_row_bytes;
  const float* add;
  int32_t word_bytes;  // in a batch: the bytes its threads move at once (GatherWordBytes, set by the planner)
  int64_t y_block_rows, y_block_bytes;  // 0: no blocks
  int32_t first_block, blocks;          // in a batch: its blocks of the launch (LayGatherBatch)
};
void LaunchOnnxGather(const GatherArgs& args, cudaStream_t stream);
// Whether the gather moves 4-byte words (rows and pointers aligned), not bytes.
bool GatherWords(const GatherArgs& args);
// The bytes a thread moves at once: 16 (rows, pointers and the add 16-byte
// aligned), 4 (GatherWords) or 1.
int GatherWordBytes(const GatherArgs& args);
// Independent gathers in one launch: the embedding lookups of a model's
// tables, which TorchRec's table-batched embedding also does in one launch.
// Each gather moves its own word size, so a gather of narrow rows (a dense
// feature's column) leaves the others' 16-byte words alone, and takes
// blocks in proportion to its words (a grid row each, as wide as the
// largest gather's, left most blocks of DIN's [B] lookups empty beside its
// [B, 20] ones: 22.0 us at batch 2048 on an H100, 14.0 so,
// bench/RESULTS.md).
// LayGatherBatch sets each gather's word_bytes, first_block and blocks and
// returns the gather of each block of the launch (empty gathers take none).
std::vector<int32_t> LayGatherBatch(std::vector<GatherArgs>& args);
// args and block_gather: device copies of LayGatherBatch's arguments and
// result (blocks: its size).
void LaunchOnnxGatherBatch(const GatherArgs* args, const int32_t* block_gather, int64_t blocks, cudaStream_t stream);

// GatherElements (contiguous operands): y[i] = data[i with index[i] on axis].
// GatherND: indices [n, k] (batch_dims 0, flattened): y[j, :] = data[index[j]], slices of
// slice_bytes. Out-of-range indices set *bad.
struct GatherElementsArgs {
  const void* data;
  const void* index;
  int32_t index64;
  void* y;
  int64_t shape[kMaxOnnxRank];       // the indices' (and output's) shape
  int64_t data_strides[kMaxOnnxRank];  // elements
  int32_t rank, axis;
  int64_t axis_len, numel, elem_bytes;
  int* bad;
};
void LaunchGatherElements(const GatherElementsArgs& args, cudaStream_t stream);
struct GatherNdArgs {
  const void* data;
  const void* index;
  int32_t index64;
  void* y;
  int64_t dims[kMaxOnnxRank];  // data's first k dims
  int32_t k;
  int64_t batches, per_batch, data_batch_bytes, slice_bytes;
  int* bad;
};
void LaunchGatherNd(const GatherNdArgs& args, cudaStream_t stream);

// CumSum along a line of `len` elements `stride` apart, for outer*inner lines.
struct CumSumArgs {
  const void* x;
  void* y;
  int32_t type;
  int32_t exclusive, reverse;
  int64_t outer, len, inner;
};
void LaunchCumSum(const CumSumArgs& args, cudaStream_t stream);

// Pad (contiguous in and out, same type): y[i] = x[i - begin] inside,
// else by mode: 0 constant (value), 1 edge, 2 reflect.
struct PadArgs {
  const void* x;
  void* y;
  int64_t in_shape[kMaxOnnxRank], out_shape[kMaxOnnxRank], begin[kMaxOnnxRank];
  int32_t rank, mode, type;
  double value;
  int64_t numel;
};
void LaunchPad(const PadArgs& args, cudaStream_t stream);

}  // namespace hfuse::cuda
