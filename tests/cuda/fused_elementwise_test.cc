// The fused elementwise chains' kernel source (src/cuda/fused_elementwise.h):
// what it computes is checked on the GPU (check_gpu_models.py's
// elementwise_chains and every real model); here, with no device needed,
// that every formula the chains may hold compiles with NVRTC, and that the
// source has the chain's shape and operands in it.
#include "fused_elementwise.h"

#include <gtest/gtest.h>

#include <string>

#include "fusion_regions.h"

namespace hfuse::cuda {
namespace {

StridedOperand Input(const void* p, std::initializer_list<int64_t> strides) {
  StridedOperand o{};
  o.ptr = p;
  int d = 0;
  for (int64_t s : strides) o.strides[d++] = s;
  o.type = o.as = 2;  // float32
  return o;
}

// DCN's cross layer over [2048, 429]: x * s + b + x, s a column, b a row.
FusedElementwiseArgs CrossLayer() {
  FusedElementwiseArgs a{};
  a.rank = 2;
  a.shape[0] = 2048;
  a.shape[1] = 429;
  a.out_strides[0] = 429;
  a.out_strides[1] = 1;
  a.numel = 2048 * 429;
  a.num_inputs = 3;
  a.in[0] = Input(nullptr, {429, 1});
  a.in[1] = Input(nullptr, {1, 0});
  a.in[2] = Input(nullptr, {0, 1});
  a.num_steps = 3;
  a.steps[0] = {kMul, {0, 1, 0}, 1.0f, 0.5f};
  a.steps[1] = {kAdd, {kMaxFusedInputs, 2, kMaxFusedInputs}, 1.0f, 0.5f};
  a.steps[2] = {kAdd, {kMaxFusedInputs + 1, 0, kMaxFusedInputs + 1}, 1.0f, 0.5f};
  return a;
}

TEST(FusedElementwiseTest, CrossLayerSourceHasItsShapeAndCompiles) {
  const std::string source = FusedElementwiseSource(CrossLayer());
  EXPECT_NE(source.find("e < 878592u"), std::string::npos) << source;
  EXPECT_NE(source.find("rest % 429u"), std::string::npos) << source;
  EXPECT_NE(source.find("const float* __restrict__ in2"), std::string::npos) << source;
  EXPECT_EQ(source.find("in3"), std::string::npos) << source;
  // the column's and the row's zero strides cost no arithmetic
  EXPECT_EQ(source.find("* 0;"), std::string::npos) << source;
  EXPECT_FALSE(CompileFusedSource(source, "sm_90").empty());
}

TEST(FusedElementwiseTest, EveryFormulaCompilesInAChain) {
  FusedElementwiseArgs a = CrossLayer();
  a.num_steps = 0;
  int funcs = 0;
  for (int32_t f = kCopy; f <= kMish; ++f) {
    if (!FusableFunc(f)) continue;
    ++funcs;
    if (a.num_steps == kMaxFusedSteps) {
      EXPECT_FALSE(CompileFusedSource(FusedElementwiseSource(a), "sm_90").empty());
      a.num_steps = 0;
    }
    const int8_t prev = static_cast<int8_t>(a.num_steps == 0 ? 0 : kMaxFusedInputs + a.num_steps - 1);
    a.steps[a.num_steps++] = {f, {prev, 1, 2}, -0.25f, std::numeric_limits<float>::infinity()};
  }
  EXPECT_FALSE(CompileFusedSource(FusedElementwiseSource(a), "sm_90").empty());
  // every float function but the logical ones (And, Or, Xor take bools)
  EXPECT_EQ(funcs, kMish - kCopy + 1 - 3);
}

TEST(FusedElementwiseTest, ABrokenSourceIsAnErrorWithTheLog) {
  try {
    CompileFusedSource("extern \"C\" __global__ void hfuse_chain() { undefined_name; }", "sm_90");
    FAIL() << "compiled";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_name"), std::string::npos) << e.what();
  }
}

// MMoE's gate over a stack of E = 4 expert outputs [B, E, D] (B = 2, D = 3):
// sum over E of gate[b, e] * expert_e[b, d], the stack a select step (column
// c of the domain takes expert c) read where the experts lie, never written.
TEST(FusedRegionTest, SelectOfAStackComputesTheWeightedSumAndCompiles) {
  const std::vector<int64_t> stack = {2, 4, 3};
  const std::vector<bool> cols = {false, true, false};
  FusionRegion r;
  r.rows = 6;
  r.cols = 4;
  std::vector<std::vector<int64_t>> strides;
  for (int e = 0; e < 4; ++e) {  // expert e: [B, 1, D], read over the stack
    r.operands.push_back({0, e, stack, cols, false});
    strides.push_back({3, 0, 1});
  }
  r.operands.push_back({1, 1, stack, cols, false});  // the gate [B, E, 1]
  strides.push_back({4, 1, 0});
  RegionStep select;
  select.kind = RegionStep::Kind::kSelect;
  select.parts = {-1, -2, -3, -4};
  RegionStep mul;
  mul.func = kMul;
  mul.args[0] = 0;
  mul.args[1] = -5;
  mul.num_args = 2;
  RegionStep sum;
  sum.kind = RegionStep::Kind::kReduce;
  sum.func = kReduceSum;
  sum.args[0] = 1;
  sum.num_args = 1;
  sum.per_row = true;
  r.steps = {select, mul, sum};
  r.outputs.push_back({kNone, 2, {2, 1, 3}, {false, false, false}, kNone, 0, {3, 3, 1}});
  // expert e's [b, d] = 10 e + 3 b + d; gate [b, e] = e + 1 + b
  auto read = [&](size_t k, int64_t row, int64_t col) {
    const int64_t b = row / 3, d = row % 3;
    return k < 4 ? static_cast<float>(10 * static_cast<int64_t>(k) + 3 * b + d) : static_cast<float>(col + 1 + b);
  };
  const std::vector<std::vector<float>> got = EvaluateRegion(r, read);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].size(), 6u);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t d = 0; d < 3; ++d) {
      float want = 0.0f;
      for (int64_t e = 0; e < 4; ++e) want += static_cast<float>((e + 1 + b) * (10 * e + 3 * b + d));
      EXPECT_EQ(got[0][static_cast<size_t>(b * 3 + d)], want) << b << " " << d;
    }
  }
  const std::string source = FusedRegionSource(r, strides);
  // each expert read once a row (no column term), picked by the lane's column
  EXPECT_NE(source.find("const float b3 = in3["), std::string::npos) << source;
  EXPECT_NE(source.find("(lane + 0u) == 2u ? b2"), std::string::npos) << source;
  EXPECT_FALSE(CompileFusedSource(source, "sm_90").empty());
  EXPECT_FALSE(CompileFusedSource(FusedRegionGroupSource(r, strides), "sm_90").empty());  // a grid row a region
}

// A GELU between two FFN GEMMs over [8, 6, 16] (one column, 768 rows):
// four rows a thread. Its contiguous input is one run (its offset the row
// itself) read as a float4 behind an alignment test; a bias over the last
// dim a float4 at r % 16; a scale per [8, 6] row row by row; a scalar read
// once; the output in a [8, 6, 20] concatenate's slot at offset 2 (not a
// multiple of 4) written row by row (the offset in the address the
// launch passes, not in the source).
TEST(FusedRegionTest, AOneColumnRegionTakesFourRowsAThread) {
  const std::vector<int64_t> over = {8, 6, 16};
  const std::vector<bool> cols = {false, false, false};
  FusionRegion r;
  r.rows = 768;
  r.cols = 1;
  r.operands = {{0, 0, over, cols, false}, {0, 1, over, cols, false}, {1, 1, over, cols, false},
                {2, 1, over, cols, false}};
  const std::vector<std::vector<int64_t>> strides = {{96, 16, 1}, {0, 0, 0}, {0, 0, 1}, {6, 1, 0}};
  RegionStep div;
  div.func = kDiv;
  div.args[0] = -1;
  div.args[1] = -2;
  div.num_args = 2;
  RegionStep erf;
  erf.func = kErf;
  erf.args[0] = 0;
  erf.num_args = 1;
  RegionStep add = div;
  add.func = kAdd;
  add.args[0] = 1;
  add.args[1] = -3;
  RegionStep mul = add;
  mul.func = kMul;
  mul.args[0] = 2;
  mul.args[1] = -4;
  r.steps = {div, erf, add, mul};
  r.outputs.push_back({kNone, 3, over, cols, kNone, 2, {120, 20, 1}});
  r.outputs.push_back({kNone, 2, over, cols, kNone, 0, {96, 16, 1}});
  ASSERT_EQ(RegionRowsPerThread(r), 4);
  const std::string source = FusedRegionSource(r, strides);
  EXPECT_NE(source.find("const long long q = 0 + static_cast<long long>(r) * 1;"), std::string::npos) << source;
  EXPECT_NE(source.find("if (in0_aligned) { const float4 t = *reinterpret_cast<const float4*>(in0 + q);"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("const long long q = 0 + static_cast<long long>((r % 16u)) * 1;"), std::string::npos)
      << source;
  EXPECT_NE(source.find("const float b1 = in1[0];"), std::string::npos) << source;
  EXPECT_NE(source.find("a3[3] = in3[0 + static_cast<long long>(((r + 3u) / 16u)) * 1];"), std::string::npos)
      << source;
  EXPECT_EQ(source.find("in3_aligned"), std::string::npos) << source;
  EXPECT_EQ(source.find("out0_aligned"), std::string::npos) << source;  // offset 2: row by row
  EXPECT_NE(source.find("out0[0 + static_cast<long long>(((r + 1u) % 16u)) * 1 + "
                        "static_cast<long long>(((r + 1u) / 16u)) * 20] = v3[1];"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("if (out1_aligned) *reinterpret_cast<float4*>(p) = make_float4(v2[0], v2[1], v2[2], v2[3]);"),
            std::string::npos)
      << source;
  EXPECT_FALSE(CompileFusedSource(source, "sm_90").empty());
  // Regions alike in one launch: the program a device function, each grid
  // row's addresses from the table.
  const std::string group = FusedRegionGroupSource(r, strides);
  EXPECT_EQ(group.find("hfuse_region("), std::string::npos) << group;
  EXPECT_NE(group.find("hfuse_region_group(const void* const* __restrict__ table)"), std::string::npos) << group;
  EXPECT_NE(group.find("const void* const* p = table + static_cast<unsigned long long>(blockIdx.y) * 6ull;"),
            std::string::npos)
      << group;
  EXPECT_NE(group.find("hfuse_region_body(static_cast<const float*>(p[0]), static_cast<const float*>(p[1]), "
                       "static_cast<const float*>(p[2]), static_cast<const float*>(p[3]), "
                       "static_cast<float*>(const_cast<void*>(p[4])), static_cast<float*>(const_cast<void*>(p[5])));"),
            std::string::npos)
      << group;
  EXPECT_FALSE(CompileFusedSource(group, "sm_90").empty());
  // rows not a multiple of 4, or a reduction: a row a thread
  r.rows = 766;
  EXPECT_EQ(RegionRowsPerThread(r), 1);
  EXPECT_EQ(FusedRegionSource(r, strides).find("float4"), std::string::npos);
}

// A region that computes products (FusionRegion::products): two experts,
// each a [100, 45] product of K 40 (one with a bias) read one value a row,
// selected as the row's two columns and summed. Each operand that reads a
// product takes the thread's m-th value of it; A, W and the bias are read
// through their own parameters, K in two steps of 32 (the second 8 deep),
// bfloat16 ones into float32; the source compiles.
TEST(FusedRegionTest, ARegionComputesItsProducts) {
  for (DType type : {DType::kFloat32, DType::kBFloat16}) {
    const std::vector<int64_t> over = {100, 45, 1};
    FusionRegion r;
    r.rows = 4500;
    r.cols = 2;
    r.one_lane = true;
    r.operands = {{0, 0, over, {false, false, false}, true}, {0, 1, over, {false, false, false}, true}};
    r.operands[0].product = 1;
    r.operands[1].product = 0;
    r.products = {{7, 0, 1, 2, kNone, 3, 100, 45, 40, 40, type}, {7, 1, 4, 5, 6, 8, 100, 45, 40, 48, type}};
    const std::vector<std::vector<int64_t>> strides = {{45, 1, 0}, {45, 1, 0}};
    RegionStep select;
    select.kind = RegionStep::Kind::kSelect;
    select.parts = {-1, -2};
    RegionStep sum;
    sum.kind = RegionStep::Kind::kReduce;
    sum.func = kReduceSum;
    sum.args[0] = 0;
    sum.num_args = 1;
    sum.per_row = true;
    r.steps = {select, sum};
    r.outputs.push_back({kNone, 1, over, {false, false, false}, kNone, 0, {45, 1, 1}});
    const std::string source = FusedRegionSource(r, strides);
    EXPECT_NE(source.find("const float b0 = prod1[m];"), std::string::npos) << source;
    EXPECT_NE(source.find("const float b1 = prod0[m];"), std::string::npos) << source;
    EXPECT_EQ(source.find("in0["), std::string::npos) << source;
    // Product 1's second step: K 32 .. 39, the rest zero and not summed.
    EXPECT_NE(source.find("32u + tx < 40u"), std::string::npos) << source;
    EXPECT_NE(source.find("pa1[(long long)(tb + bb) * 48ll + 32u + tx]"), std::string::npos) << source;
    EXPECT_NE(source.find("kk < 8u"), std::string::npos) << source;
    EXPECT_EQ(source.find("pa2"), std::string::npos) << source;
    EXPECT_NE(source.find("pb1[j]"), std::string::npos) << source;
    EXPECT_EQ(source.find("pb0"), std::string::npos) << source;
    EXPECT_NE(source.find("bm * 45u + j"), std::string::npos) << source;
    EXPECT_EQ(source.find("hfuse_from_bf16(pw0[") != std::string::npos, type == DType::kBFloat16) << source;
    EXPECT_FALSE(CompileFusedSource(source, "sm_90").empty()) << source;
  }
}

// A product region's values that depend on the products' row alone (a
// gate's logits, one pair a row of the products, and their softmax) are
// computed once a row of the block, before the products, into shared
// memory; the rows' program reads them there and does not load the
// logits. An operand of one value a row (a residual) is loaded for the
// thread's 8 rows before their program.
TEST(FusedRegionTest, AProductRegionComputesWhatARowSharesOnce) {
  const std::vector<int64_t> over = {100, 45, 1}, wide = {100, 45, 2};
  FusionRegion r;
  r.rows = 4500;
  r.cols = 2;
  r.one_lane = true;
  r.operands = {{0, 0, over, {false, false, false}, true},
                {0, 1, over, {false, false, false}, true},
                {1, 0, wide, {false, false, true}, false},
                {2, 0, over, {false, false, false}, true}};
  r.operands[0].product = 0;
  r.operands[1].product = 1;
  r.products = {{7, 0, 1, 2, kNone, 3, 100, 45, 40, 40, DType::kFloat32},
                {7, 1, 4, 5, kNone, 8, 100, 45, 40, 40, DType::kFloat32}};
  const std::vector<std::vector<int64_t>> strides = {{45, 1, 0}, {45, 1, 0}, {2, 0, 1}, {45, 1, 0}};
  RegionStep select;  // 0: the experts' products as the row's two columns
  select.kind = RegionStep::Kind::kSelect;
  select.parts = {-1, -2};
  RegionStep softmax;  // 1: the gate's weights
  softmax.kind = RegionStep::Kind::kSoftmax;
  softmax.args[0] = -3;
  softmax.num_args = 1;
  RegionStep weigh;  // 2
  weigh.func = kMul;
  weigh.args[0] = 0;
  weigh.args[1] = 1;
  weigh.num_args = 2;
  RegionStep sum;  // 3
  sum.kind = RegionStep::Kind::kReduce;
  sum.func = kReduceSum;
  sum.args[0] = 2;
  sum.num_args = 1;
  sum.per_row = true;
  RegionStep residual;  // 4
  residual.func = kAdd;
  residual.args[0] = 3;
  residual.args[1] = -4;
  residual.num_args = 2;
  residual.per_row = true;
  r.steps = {select, softmax, weigh, sum, residual};
  r.outputs.push_back({kNone, 4, over, {false, false, false}, kNone, 0, {45, 1, 1}});
  const std::string source = FusedRegionSource(r, strides);
  EXPECT_NE(source.find("__shared__ float srow[64][2];"), std::string::npos) << source;
  EXPECT_NE(source.find("const unsigned r = (bm < 100u ? bm : 99u) * 45u;"), std::string::npos) << source;
  EXPECT_NE(source.find("srow[threadIdx.x][1] = v1[1];"), std::string::npos) << source;
  EXPECT_NE(source.find("v1[1] = srow[ty * 8u + m][1];"), std::string::npos) << source;
  // The logits are read, and their softmax taken, only before the first
  // step's barrier: by the block's rows, not by the rows' program.
  const size_t barrier = source.find("__syncthreads");
  ASSERT_NE(barrier, std::string::npos) << source;
  EXPECT_LT(source.find("in2["), barrier) << source;
  EXPECT_EQ(source.find("in2[", barrier), std::string::npos) << source;
  EXPECT_LT(source.find("expf"), barrier) << source;
  EXPECT_EQ(source.find("expf", barrier), std::string::npos) << source;
  EXPECT_NE(source.find("pre3[m] = in3["), std::string::npos) << source;
  EXPECT_NE(source.find("const float b3 = pre3[m];"), std::string::npos) << source;
  EXPECT_FALSE(CompileFusedSource(source, "sm_90").empty()) << source;
}

}  // namespace
}  // namespace hfuse::cuda
