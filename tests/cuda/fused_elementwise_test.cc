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
}

}  // namespace
}  // namespace hfuse::cuda
