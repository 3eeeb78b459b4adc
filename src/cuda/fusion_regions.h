// Fused regions: connected sets of elementwise ops, row reductions
// and softmaxes that the CUDA backend runs as one kernel each, written for
// the region and compiled at plan time by NVRTC (fused_elementwise.h), as
// Inductor writes a persistent-reduction kernel per fusion. The planning
// half, plain C++ built on every machine; tests/cuda/plan_check.cc checks
// every region it finds in the real models against the CPU reference with
// the interpreter below (EvaluateRegion).
//
// Before, the Dice activation of DIN (torch-rechub), thirteen ops and nine
// launches, each [B*L, 64] tensor written to memory and read back:
//
//   m = ReduceMean(x, -1); d = x - m; v = ReduceSum(d^2 + eps, -1)
//   p = Sigmoid(d / Sqrt(v)); y = p * x + (1 - p) * alpha * x
//
// After: one launch, one [B*L, 64] read and one written. A warp (or a part
// of one, for short rows) holds a row in registers; a reduction is a
// shuffle across the row's lanes, and the values it feeds are broadcast
// back to the row for free.
//
// A region has a domain of `rows` x `cols`: each of its values is either
// per element (a tensor of rows * cols elements, its trailing dims making
// the cols) or per row (rows elements: what a reduction over the trailing
// dims leaves). Members:
//   - elementwise ONNX ops with a formula in float_funcs.def (not Cast,
//     Clip, Where or the comparisons), float in and out (RegionFloat); x ** 2 with a
//     constant exponent as x * x (Dice's variance: no powf);
//   - ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare over the trailing dims
//     that make the cols (a per-element value in, a per-row value out);
//   - Softmax and LogSoftmax over those dims;
//   - a LayerNorm (the IR's, one, not a group) over those dims: the
//     LayerNorm kernel's formulas as steps (the mean, x - mean, the mean of
//     its square, 1 / sqrt(that + eps), * gamma + beta), so that the
//     residual Add before it (a transformer block's, twice a block) is no
//     launch of its own;
//   - a batched MatMul of a matrix by a vector, [.., M, K] x [.., K, 1]
//     (a mixture's experts stacked along K, weighed by their gate: DCNv2's
//     low-rank experts): a product and a sum over K, the K columns of the
//     domain, where cuBLAS ran B separate M x K products (50 us at B 2048);
//   - a Concat of values of the region and of tensors it can read per
//     element (or per row: DIN's attention-pooled sums): the region writes
//     each part into its slot of the Concat's output through the output's
//     layout, which may be its slot in an outer concatenate written in
//     place (copying the parts it does not compute), so the Concat is no
//     launch of its own (DIN's [q, k, q - k, q * k], DCN-Mix's stack of
//     expert outputs). Its output is read by no member;
//   - a Concat that members read, whose axis is the domain's one column
//     dim and whose parts are one value a row each (tensors read from
//     memory, or the region's per-row values): a select step, column c
//     taking part c, so the stack is never written. MMoE's and PLE's
//     gates weigh [B, E, D] stacks of expert outputs: softmax(g)[:, :, None]
//     * stack, summed over E, reads the E expert outputs where they lie;
//   - a gate: a Softmax or LogSoftmax whose output members read only as
//     operands broadcast over the rows, its axis the domain's columns (the
//     gate [B, E] of a mixture weighing [B, .., E] experts: DCNv2's
//     matrix-vector products, PLE's weighted sums). It has no step of its
//     own: where a member reads it, the region reads the gate's input the
//     same way and a softmax step over the row makes the value the member
//     reads, once a row (E wide: a few exps next to the E experts the row
//     reads). The gate's launch and its output's write and read-back are
//     gone; a gate whose output an op outside reads stays where it was.
// A member reads a value of another member only as the same elements (a
// reshape view of it, a per-row value broadcast along the row), or a
// gate's as said above; anything else it reads (any strided view, a
// broadcast constant) is an operand, read from memory. A member's value is
// written to memory only when an op outside the region (or a graph output)
// reads it.
//
// Regions grow from producer to consumer in the graph's stable order, then
// each gate moves into the region that reads it (leaving its own region,
// or its lone launch). They stay convex: no op that runs (views run
// nothing) lies on a path from one member to another, so the region can
// run as one launch, where its last member was. The plan's order puts each region's members next to each
// other, and the memory plan keeps every operand of a region alive until
// the region's end and starts every output at its beginning, so no buffer
// the kernel reads is the one it writes.
//
// A region also takes in a GEMM (or a group of them, grouped or
// not) of K at most kMaxProductK whose outputs it alone reads, each as one
// value of a row of several columns, its rows the GEMM's [M, N] outputs in
// order (RegionProduct below): the region's kernel
// computes the products itself, a tile of 64 rows of A by 32 columns of W
// at a time, and runs its program on them in registers, so the outputs are
// never written or read back. DCNv2's experts' up-projections, four [B,
// 429] products of K 32 read only by the mixture that weighs them: 14 MB
// written and read back a layer at batch 2048, and a launch. The CUDA
// executor asks for at least as many 64 x 32 tiles as the device has SMs
// (CudaOptions::region_gemms: fewer ran slower, bench/RESULTS.md).
//
// An attention chain (AttentionChain below: batched MatMul, scale,
// Softmax, batched MatMul) is found first and is a region of its own, run
// by the attention kernel (attention.h); the regions grown next take none
// of its ops and see it as one node.
//
// A feed-forward chain (FfnChain below: a GEMM, one activation, a second
// GEMM; or gated, the activation of one half of the first GEMM's output
// times the other half) is found with the attention chains, a region of
// its own too, run by the FFN kernel (ffn.h).
//
// A region does not form where its rows are longer than 2048 (a row lives
// in at most 64 registers a lane: SAINT's intersample Softmax over the
// batch, 2048 long at batch 2048, with its Div, 80 registers a thread; its
// residual LayerNorm over rows of 1248, 168), or its sizes or counts exceed
// the limits below; its ops then run as before.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attention.h"
#include "ffn.h"
#include "hfuse/exec/plan_constants.h"
#include "hfuse/ir/graph.h"
#include "view_plan.h"

namespace hfuse::cuda {

inline constexpr int kMaxRegionOperands = 16, kMaxRegionSteps = 64, kMaxRegionOutputs = 8;
inline constexpr int64_t kMaxRegionCols = 2048;

// The types a region's tensors may have: float32, and float16 and bfloat16
// read into float32 and rounded back to nearest even when written (what
// Inductor does with a bfloat16 chain: no rounding between its ops).
inline bool RegionFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

// The elementwise function of an ONNX node (OnnxFunc, its alpha and beta,
// how many inputs it takes), as the elementwise kernel and a fused region
// compute it; nothing (and why) for an op_type with none or an attribute
// value the kernels do not take. Clip's bounds from inputs (opset 11 on)
// are left at +-infinity: its planner reads them.
struct ElementwiseFunction {
  int32_t func = 0;
  float alpha = 1.0f, beta = 0.5f;
  size_t inputs = 1;
};
std::optional<ElementwiseFunction> ElementwiseFunctionOf(const OnnxNode& node, std::string& why);

// An input a region reads from memory: member `op`'s node input `slot` (a
// tensor, or a constant the node keeps), numpy-broadcast over `over` (the
// member's output shape, or a reduction's input shape). Per element: the
// dims where `cols` is set index the column, the others the row (each
// row-major); per row: every dim indexes the row.
struct RegionOperand {
  OpId op = kNone;
  int32_t slot = 0;
  std::vector<int64_t> over;
  std::vector<bool> cols;
  bool per_row = false;
  bool swap_last = false;  // read with its last two dims swapped (a batched MatMul's vector, [.., K, 1] as [.., 1, K])
  // A gate's input (`op` the gate, `slot` 0), read as `view` would be: a
  // view of the gate's output (its own row-major buffer), the input
  // row-major, so the same strides find its elements; kNone otherwise.
  TensorId view = kNone;
  DType dtype = DType::kFloat32;  // as it lies in memory (RegionFloat); the kernel computes in float32
  // A product the region computes (FusionRegion::products), read here in
  // place of the tensor: its value at row r is the product's element r.
  int32_t product = -1;
};

// A GEMM member the region computes (see above): y = A W^T (+ bias), A
// [M, K] rows at a stride, W [N, K] and the bias [N] row-major, all of one
// type;
// its element r (row r / N, column r % N) is the region's row r.
struct RegionProduct {
  OpId gemm = kNone;  // a member of the region: a GEMM op, grouped or not
  size_t member = 0;
  TensorId a = kNone, w = kNone, bias = kNone, y = kNone;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0;  // elements between A's rows
  DType dtype = DType::kFloat32;  // of A, W, the bias and y (RegionFloat); summed in float32, not rounded
};
// At most this many products a region, of K at most kMaxProductK: the
// kernel reads A and W 32 deep at a time, one step in flight, which suits
// the short products of a mixture's experts (K 32), not a deep GEMM the
// GEMM kernels pipeline.
inline constexpr int kMaxRegionProducts = 8;
inline constexpr int64_t kMaxProductK = 64;

// Input `slot` of an op: the IR's elementwise op's input, or an opaque
// ONNX op's node input: a tensor (kNone: none, or a constant the node
// keeps, which ConstantOf gives).
TensorId InputOf(const Op& op, size_t slot);
const OnnxNode::Value* ConstantOf(const Op& op, size_t slot);
// Operand o's strides (elements, one per dim of o.over): its tensor's
// layout (views; a gate's input: o.view's), or its constant's row-major
// strides, numpy-broadcast
// (0 on the dims it has as 1 or lacks).
std::vector<int64_t> OperandStrides(const Graph& graph, const ViewPlan& views, const RegionOperand& o);
// What operand o reads: a tensor, or (kNone) a constant its node keeps.
TensorId OperandTensor(const Graph& graph, const RegionOperand& o);
const OnnxNode::Value* OperandConstant(const Graph& graph, const RegionOperand& o);

struct RegionStep {
  // kSelect: a Concat that members read, along the domain's only column
  // dim (the experts' outputs stacked for a gate's weighted sum): the
  // value at column c is part c's, one value a row (`parts`).
  enum class Kind : uint8_t { kMap, kReduce, kSoftmax, kLogSoftmax, kSelect };
  Kind kind = Kind::kMap;
  OpId op = kNone;
  int32_t func = 0;  // kMap: an OnnxFunc; kReduce: a ReduceKind
  float alpha = 1.0f, beta = 0.5f;
  // The arguments: >= 0 an earlier step's value, < 0 operand -1 - a.
  int32_t args[3] = {0, 0, 0};
  int32_t num_args = 0;
  bool per_row = false;  // its value: one a row, else one an element
  std::vector<int32_t> parts;  // kSelect: per column, an argument as in args (one value a row)
};

// A step's value written to memory. `tensor` holds these values (a
// member's output; or a part of a Concat member); `shape` and `cols` say
// where place (row, col) of the domain is among them (DomainOffset, row
// major over `shape`; all cols unset for a per-row value), and the value
// at index i over `shape` goes to element `offset` + i . `strides` of
// `place`'s buffer: the member's output itself (row-major strides), or a
// Concat member's output (the part's slot: the Concat needs no copy).
struct RegionOutput {
  TensorId tensor = kNone;
  int32_t step = 0;
  std::vector<int64_t> shape;
  std::vector<bool> cols;
  TensorId place = kNone;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  DType dtype = DType::kFloat32;  // as `place` holds it (RegionFloat), rounded to nearest even from float32
};

// Where place (row, col) of a region's domain is in a tensor laid out over
// `shape` with `strides` (elements) whose column dims are `cols`: row
// decomposed row-major over the other dims, col over the column dims.
int64_t DomainOffset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                     const std::vector<bool>& cols, int64_t row, int64_t col);

// softmax(scale(Q K^T)) V as one kernel (attention.h): a region whose
// members are a batched MatMul of Q [.., Sq, D] by K^T [.., D, Sk] read
// only by a division or product by one constant (or by nothing) read only
// by a Softmax over the keys, read only by a batched MatMul by V [.., Sk,
// Dv]; D and Dv at most kMaxAttentionHead, float32, up to
// kMaxAttentionBatchDims batch dims (numpy broadcast). Its operands are Q,
// K^T and V (the first MatMul's inputs, the second's B), its output O; it
// has no steps. (TabTransformer's, FTTransformer's and SAINT's column
// attention, AutoInt's.)
struct AttentionChain {
  float scale = 1.0f;
  bool divide = false;  // the scores are (q . k) / scale
};

// y = act(x W1^T + b1) W2^T + b2 as one kernel (ffn.h): a region whose
// members are a GEMM (gemm_rcr or gemm_rcr_bias, not a group) whose output
// only an elementwise op of one operand reads (through views), whose
// output only a second such GEMM reads as its A; float32, x's and y's
// widths of kFfnWidths, W1, W2 and the biases in at most
// kFfnMaxSharedBytes, x and y rows at strides of whole float4s (y may be
// a concatenate's slot). Its hidden tensors get no buffer. (TabTransformer's
// and SAINT's 32 -> 128 -> 32 blocks, erf GELU.)
//
// Gated (GEGLU): the first GEMM's output split on its last dim into two
// halves of `hidden` (views), the activation of one (the gate) multiplied
// by the other (the value) in a Mul read only by the second GEMM, the
// activation read only by the Mul. (FTTransformer's 32 -> 84 -> 42 -> 32.)
struct FfnChain {
  TensorId x = kNone, w1 = kNone, b1 = kNone, w2 = kNone, b2 = kNone, y = kNone;  // b1, b2 kNone: none
  int64_t m = 0, in = 0, hidden = 0, out = 0;
  int32_t act = 0;  // an OnnxFunc of one operand
  float alpha = 1.0f, beta = 0.5f;
  int64_t value_row = 0, gate_row = -1;  // gated: W1's first row of each half (else gate_row -1)
  bool Gated() const { return gate_row >= 0; }
};

struct FusionRegion {
  std::optional<AttentionChain> attention;  // an attention region,
  std::optional<FfnChain> ffn;              // or a feed-forward one, else a program of steps
  std::vector<OpId> ops;  // the members, in the plan's order
  int64_t rows = 1, cols = 1;
  std::vector<RegionOperand> operands;
  // The GEMMs it computes (see above), their ops among `ops`; all of one
  // M and N, M * N the rows; its operands read them (product).
  std::vector<RegionProduct> products;
  // One per member but the GEMMs, in the members' order (a MatVec's
  // product and sum, a Concat's copies); a gate's softmax where a member
  // first reads it.
  std::vector<RegionStep> steps;
  std::vector<RegionOutput> outputs;
  // A row's columns all in one thread (else LanesOf(cols)): a region of a
  // few columns whose operands are mostly the same along the row (DCNv2's
  // mixture: four experts' columns, five operands one value a row), which
  // lanes would each read again.
  bool one_lane = false;
  // An attention or feed-forward region: a kernel of its own, no steps.
  bool Chain() const { return attention.has_value() || ffn.has_value(); }
};

struct FusionPlan {
  std::vector<FusionRegion> regions;
  std::vector<int32_t> region_of;  // per op id: its region, or -1
  // The stable topological order (StableTopologicalOrder) with each
  // region's members next to each other.
  std::vector<OpId> order;
  // The FFN chains of fewer rows than asked for (not regions): their
  // activation's op, the rows and the rows asked for, for the profile's reason.
  struct FfnBelow {
    int64_t rows = 0, min_rows = 0;
    bool gated = false;
    bool operator==(const FfnBelow&) const = default;
  };
  std::map<OpId, FfnBelow> ffn_below_rule;
};

// The regions of a graph planned with `views` (view_plan.h) and the plan's
// constants (a reduction's axes) at its bound dims; none when `enabled` is
// false (the order is then the stable one). Regions take in the GEMMs they
// alone read (RegionProduct) where the products' 64 x 32 tiles are at
// least `product_min_tiles` (kNoProducts: none); feed-forward chains
// (FfnChain) of at least `ffn_min_rows` rows are regions (kNoFfn: none),
// gated ones of at least kFfnGatedMinRows too unless `ffn_min_rows` is 0
// (every chain).
inline constexpr int64_t kNoProducts = INT64_MAX, kNoFfn = INT64_MAX;
FusionPlan PlanFusionRegions(const Graph& graph, const ViewPlan& views, const PlanConstants& constants,
                             bool enabled, int64_t product_min_tiles = kNoProducts, int64_t ffn_min_rows = 0);

// The view plan and the regions, as the CUDA backend plans a graph: views
// (view_plan.h), regions over them; then views again told which ops those
// regions run (PlanViews' region_members: they write through any strides,
// so a LayerNorm's output may lie in a concatenate's slot), and regions
// over those views. The second pair is kept where its regions run every op
// the second view plan was told of (else the first: their layouts would not
// hold). Regions off (`enabled` false): the views alone, no regions.
struct DevicePlan {
  ViewPlan views;
  FusionPlan fusion;
};
DevicePlan PlanViewsAndRegions(const Graph& graph, const DimValues& dims, const PlanConstants& constants,
                               bool enabled, int64_t product_min_tiles = kNoProducts, int64_t ffn_min_rows = 0);

// What a region computes, on the host: each output's values, in its
// tensor's row-major order, given read(k, row, col), operand k's value at
// that place of the domain (col 0 for a per-row operand). The kernel's
// formulas (float_funcs.def) in float32; sums in the kernel's order up to
// its lanes (a reference for tests, within rounding of the kernel).
std::vector<std::vector<float>> EvaluateRegion(const FusionRegion& region,
                                               const std::function<float(size_t, int64_t, int64_t)>& read);

// The launch of attention region r but for its four pointers, which
// point at the first element of Q, K^T, V and O (AttentionTensors) through
// their layouts: the caller adds each layout's root and offset.
AttentionArgs AttentionArgsOf(const Graph& graph, const ViewPlan& views, const FusionRegion& r);
struct AttentionTensors {
  TensorId q, kt, v, o;
};
AttentionTensors AttentionTensorsOf(const Graph& graph, const FusionRegion& r);

// The launch of FFN region r but for its pointers (x, W1, b1, W2, b2 and y
// of r.ffn, each at its layout's root and offset, for the caller to set)
// and its rows a thread, on a device of `sms` SMs.
FfnArgs FfnArgsOf(const ViewPlan& views, const FusionRegion& r, int sms);
// Row `row` of y as the FFN kernel computes it, on the host (its sums in
// the kernel's order, fmaf; the activation float_funcs.def's formula).
void EvaluateFfnRow(const FfnArgs& a, int64_t row);

// The lanes of a row and the columns each lane holds: lanes the smallest
// power of two >= cols up to 32, columns_per_lane = ceil(cols / lanes);
// of a region, one lane where `one_lane` is set.
struct RegionLanes {
  int lanes = 1;
  int64_t per_lane = 1;
};
RegionLanes LanesOf(int64_t cols);
RegionLanes LanesOf(const FusionRegion& r);
// At most this many columns in one lane (FusionRegion::one_lane).
inline constexpr int64_t kOneLaneMaxCols = 8;

}  // namespace hfuse::cuda
