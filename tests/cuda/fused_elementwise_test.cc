// The fused elementwise chains' kernel source (src/cuda/fused_elementwise.h):
// what it computes is checked on the GPU (check_gpu_models.py's
// elementwise_chains and every real model); here, with no device needed,
// that every formula the chains may hold compiles with NVRTC, and that the
// source has the chain's shape and operands in it.
#include "fused_elementwise.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace hfuse::cuda
