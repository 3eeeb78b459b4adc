// The CUDA backend's host-side planning, on the CPU (no GPU, no CUDA
// runtime): the GEMM member rules every planner shares
// (src/cuda/gemm_plan.h), the device memory plan (src/cuda/memory_plan.h)
// and the fused regions (src/cuda/fusion_regions.h).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "byte_span.h"
#include "fusion_regions.h"
#include "gemm_plan.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/plan_constants.h"
#include "hfuse/io/graph_text.h"
#include "hfuse/passes/pass_manager.h"
#include "hfuse/runtime/bound_dims.h"
#include "memory_plan.h"
#include "testing/attention_graphs.h"
#include "testing/ffn_graphs.h"
#include "testing/gate_graphs.h"
#include "testing/graph_builder.h"
#include "view_plan.h"

namespace hfuse::cuda {
namespace {

// A member of m x n x k whose operands sit at `at` bytes into each of four
// buffers (A, W, bias, Y).
struct Buffers {
  std::array<char, 4096> a{}, w{}, bias{}, y{};
  DeviceGemm At(int64_t m, int64_t n, int64_t k, int64_t at, bool with_bias = true) {
    return {a.data() + at, w.data() + at, with_bias ? bias.data() + at : nullptr, y.data() + at,
            m, n, k, k, n};
  }
};

std::vector<int64_t> Ms(const std::vector<DeviceGemm>& ms) {
  std::vector<int64_t> out;
  for (const DeviceGemm& m : ms) out.push_back(m.m);
  return out;
}

TEST(GemmMemberSplit, DropsEmptyOutputsAndSetsAsideEmptyK) {
  Buffers b;
  // m tells the members apart.
  const std::vector<DeviceGemm> ms = {b.At(1, 8, 16, 0),  b.At(0, 8, 16, 0), b.At(3, 0, 16, 0),
                                      b.At(4, 8, 0, 0),   b.At(5, 3, 5, 0),  b.At(0, 0, 0, 0),
                                      b.At(7, 2, 0, 0)};
  const GemmMemberSplit split = SplitGemmMembers(ms);
  EXPECT_EQ(Ms(split.products), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(Ms(split.bias_only), (std::vector<int64_t>{4, 7}));
}

TEST(GemmMemberSplit, KeepsTheMembersAsTheyAre) {
  Buffers b;
  const std::vector<DeviceGemm> ms = {b.At(2, 8, 16, 64), b.At(2, 8, 0, 128, false)};
  const GemmMemberSplit split = SplitGemmMembers(ms);
  ASSERT_EQ(split.products.size(), 1u);
  ASSERT_EQ(split.bias_only.size(), 1u);
  EXPECT_EQ(split.products[0].a, b.a.data() + 64);
  EXPECT_EQ(split.products[0].bias, b.bias.data() + 64);
  EXPECT_EQ(split.products[0].lda, 16);
  EXPECT_EQ(split.bias_only[0].y, b.y.data() + 128);
  EXPECT_EQ(split.bias_only[0].bias, nullptr);
}

TEST(GemmMemberSplit, NothingToDo) {
  Buffers b;
  EXPECT_TRUE(SplitGemmMembers({}).products.empty());
  const GemmMemberSplit split = SplitGemmMembers({b.At(0, 8, 16, 0), b.At(4, 0, 0, 0)});
  EXPECT_TRUE(split.products.empty());
  EXPECT_TRUE(split.bias_only.empty());
}

TEST(IsStridedBatch, OneShapeAtConstantStrides) {
  Buffers b;
  EXPECT_TRUE(IsStridedBatch({}));
  EXPECT_TRUE(IsStridedBatch({b.At(4, 8, 16, 0)}));
  EXPECT_TRUE(IsStridedBatch({b.At(4, 8, 16, 0), b.At(4, 8, 16, 256), b.At(4, 8, 16, 512)}));
  EXPECT_TRUE(IsStridedBatch({b.At(4, 8, 16, 0, false), b.At(4, 8, 16, 256, false)}));
}

TEST(IsStridedBatch, NotWhenAStrideOrShapeDiffers) {
  Buffers b;
  EXPECT_FALSE(IsStridedBatch({b.At(4, 8, 16, 0), b.At(4, 8, 16, 256), b.At(4, 8, 16, 768)}));
  EXPECT_FALSE(IsStridedBatch({b.At(4, 8, 16, 0), b.At(4, 8, 32, 256)}));
  DeviceGemm other_ldy = b.At(4, 8, 16, 256);
  other_ldy.ldy = 16;
  EXPECT_FALSE(IsStridedBatch({b.At(4, 8, 16, 0), other_ldy}));
  // Every stride counts: A, W and Y at 256, the bias at 128.
  std::vector<DeviceGemm> ms = {b.At(4, 8, 16, 0), b.At(4, 8, 16, 256), b.At(4, 8, 16, 512)};
  ms[1].bias = b.bias.data() + 128;
  ms[2].bias = b.bias.data() + 256;
  EXPECT_TRUE(IsStridedBatch(ms));  // the bias at its own constant stride
  ms[2].bias = b.bias.data() + 384;
  EXPECT_FALSE(IsStridedBatch(ms));
  ms = {b.At(4, 8, 16, 0), b.At(4, 8, 16, 256), b.At(4, 8, 16, 512)};
  ms[2].w = b.w.data() + 1024;
  EXPECT_FALSE(IsStridedBatch(ms));
}

// A batch stride that goes backwards (a later member's operand placed
// first) is refused as given; reversed, the members make one batch.
TEST(IsStridedBatch, NotBackwardsButReversed) {
  Buffers b;
  const std::vector<DeviceGemm> back = {b.At(4, 8, 16, 512), b.At(4, 8, 16, 256), b.At(4, 8, 16, 0)};
  EXPECT_FALSE(IsStridedBatch(back));
  const std::optional<std::vector<DeviceGemm>> order = StridedBatchOrder(back);
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ((*order)[0].a, b.a.data());
  EXPECT_EQ((*order)[2].y, b.y.data() + 512);
  // A backwards but W forwards: neither order is one batch.
  std::vector<DeviceGemm> mixed = {b.At(4, 8, 16, 0), b.At(4, 8, 16, 256)};
  std::swap(mixed[0].a, mixed[1].a);
  EXPECT_FALSE(StridedBatchOrder(mixed).has_value());
  // The same A for every member (stride 0) is one batch.
  std::vector<DeviceGemm> shared = {b.At(4, 8, 16, 0), b.At(4, 8, 16, 256)};
  shared[1].a = shared[0].a;
  EXPECT_TRUE(IsStridedBatch(shared));
}

// Two parts' slots in one concatenate (rows of 48 bytes: 16 of one part,
// 32 of the other) interleave without overlapping; a slot that reaches
// into the other's, a plain span over both, or rows of another stride do.
// The 3xTF32 rule (gemm_plan.h) on the products it was measured on (H100,
// batch 2048 unless said): SAINT's intersample layers and scores take it,
// at 512 too; its mix p v (p's split costs what the tensor cores save),
// FiBiNet's 32-tile 2048 x 256 x 10400, AutoInt's and FTTransformer's
// narrow layers and the scores at 512 do not. A broadcast operand is
// split once (fewer elements), and 65536 matrices are too many (the split
// kernel's grid).
TEST(Tf32x3Rule, TakesLargeDeepProductsOnly) {
  using cuda::Tf32x3Pays;
  EXPECT_TRUE(Tf32x3Pays(2048, 1248, 1248, 1, 2048 * 1248, 1));
  EXPECT_TRUE(Tf32x3Pays(2048, 4992, 1248, 1, 2048 * 1248, 1));
  EXPECT_TRUE(Tf32x3Pays(2048, 1248, 4992, 1, 2048 * 4992, 1));
  EXPECT_TRUE(Tf32x3Pays(512, 1248, 1248, 1, 512 * 1248, 1));
  EXPECT_TRUE(Tf32x3Pays(2048, 2048, 312, 4, 2 * 4 * 2048 * 312, 2));
  EXPECT_FALSE(Tf32x3Pays(2048, 312, 2048, 4, 4 * 2048 * 2048 + 4 * 2048 * 312, 2));
  EXPECT_FALSE(Tf32x3Pays(2048, 256, 10400, 1, 2048 * 10400, 1));
  EXPECT_FALSE(Tf32x3Pays(512, 256, 10400, 1, 512 * 10400, 1));
  EXPECT_FALSE(Tf32x3Pays(2048, 256, 624, 1, 2048 * 624, 1));
  EXPECT_FALSE(Tf32x3Pays(2048, 128, 1248, 1, 2048 * 1248, 1));
  EXPECT_FALSE(Tf32x3Pays(512, 512, 312, 4, 2 * 4 * 512 * 312, 2));
  EXPECT_FALSE(Tf32x3Pays(2048, 2048, 312, 65536, 2 * 2048 * 312, 2));
  EXPECT_FALSE(Tf32x3Pays(0, 2048, 312, 1, 0, 1));
}

// The rule for one cuBLASLt call a member (gemm_plan.h FewCallsPay) on
// the groups it was measured on (bench/RESULTS.md): AITM's three towers at
// 512 (2^25.7 multiply-adds) and TabTransformer's pairs of projections at
// 512 (13312 x 64 x 32: 2^24.7, a pair's bar) take it; TabResnet's and
// ESMM's pairs of 2^24, PLE's and MMoE's three towers of 2^24 and DCNv2's
// four up-projections at 2048 (2^24.7, four members) do not; a mixed
// group from 2^24 (DCN's cross layer beside its DNN layer), GEMVs at any
// size; never more than four members.
TEST(FewCallsRule, AFewLargeMembersOrAPairOrGemvs) {
  const auto members = [](size_t count, int64_t m, int64_t n, int64_t k) {
    DeviceGemm g{nullptr, nullptr, nullptr, nullptr, m, n, k, k, n};
    return std::vector<DeviceGemm>(count, g);
  };
  EXPECT_TRUE(FewCallsPay(members(3, 512, 256, 429), false));
  std::vector<DeviceGemm> pair = members(1, 13312, 64, 32);
  pair.push_back(members(1, 13312, 32, 32)[0]);
  EXPECT_TRUE(FewCallsPay(pair, false));
  EXPECT_FALSE(FewCallsPay(members(2, 512, 128, 256), false));
  EXPECT_FALSE(FewCallsPay(members(3, 2048, 64, 128), false));
  EXPECT_FALSE(FewCallsPay(members(4, 2048, 429, 32), false));
  EXPECT_TRUE(FewCallsPay(members(2, 512, 128, 256), true));
  EXPECT_FALSE(FewCallsPay(members(2, 512, 64, 256), true));
  EXPECT_TRUE(FewCallsPay(members(3, 512, 1, 64), false));
  EXPECT_FALSE(FewCallsPay(members(5, 512, 1, 64), false));
  EXPECT_FALSE(FewCallsPay(members(5, 2048, 256, 429), false));
}

TEST(ByteSpan, InterleavedSlotsDoNotOverlap) {
  std::vector<char> buf(48 * 10);
  const char* b = buf.data();
  const ByteSpan first{b, b + 48 * 9 + 16, 48, 16};
  const ByteSpan second{b + 16, b + 48 * 9 + 48, 48, 32};
  EXPECT_FALSE(first.Overlaps(second));
  EXPECT_FALSE(second.Overlaps(first));
  const ByteSpan wide{b + 8, b + 48 * 9 + 40, 48, 32};  // bytes 8..39 of each row
  EXPECT_TRUE(first.Overlaps(wide));
  EXPECT_TRUE(wide.Overlaps(second));
  EXPECT_TRUE(first.Overlaps(ByteSpan{b + 40, b + 41}));  // plain: taken whole
  EXPECT_TRUE(first.Overlaps(ByteSpan{b + 16, b + 48 * 9 + 48, 96, 32}));
  // Disjoint ranges never overlap, strided or not.
  EXPECT_FALSE(first.Overlaps(ByteSpan{b + 48 * 9 + 16, b + 48 * 10}));
  // A slot of the same stride starting a whole row later, its rows in the same columns: overlap.
  EXPECT_TRUE(first.Overlaps(ByteSpan{b + 48, b + 48 * 9 + 16, 48, 16}));
}

// The bytes of a tensor through its layout: two parts' slots of one
// concatenate ([9, 4] and [9, 8] float32 of a [9, 12] output, as [9, 1, 4]
// too) are rows that do not overlap; a contiguous tensor and a transposed
// view are their range; an empty one nothing.
TEST(ByteSpan, ElementsSpanOfSlotsAndViews) {
  std::vector<char> buf(9 * 12 * 4);
  const char* b = buf.data();
  const ByteSpan left = ElementsSpan(b, {9, 4}, {12, 1}, 4);
  EXPECT_EQ(left.begin, b);
  EXPECT_EQ(left.end, b + (8 * 12 + 4) * 4);
  EXPECT_EQ(left.stride, 48);
  EXPECT_EQ(left.width, 16);
  const ByteSpan right = ElementsSpan(b + 16, {9, 1, 8}, {12, 8, 1}, 4);
  EXPECT_EQ(right.stride, 48);
  EXPECT_EQ(right.width, 32);
  EXPECT_FALSE(left.Overlaps(right));
  EXPECT_TRUE(left.Overlaps(ElementsSpan(b + 12, {9, 2}, {12, 1}, 4)));  // columns 3 and 4
  // Rows of two dims at one run of strides ([3, 3, 4] in the [9, 12] rows).
  const ByteSpan nested = ElementsSpan(b + 16, {3, 3, 4}, {36, 12, 1}, 4);
  EXPECT_EQ(nested.stride, 48);
  EXPECT_FALSE(nested.Overlaps(left));
  const ByteSpan whole = ElementsSpan(b, {9, 12}, {12, 1}, 4);
  EXPECT_EQ(whole.stride, 0);
  EXPECT_EQ(whole.end - whole.begin, 9 * 12 * 4);
  const ByteSpan transposed = ElementsSpan(b, {12, 9}, {1, 12}, 4);
  EXPECT_EQ(transposed.stride, 0);
  EXPECT_EQ(transposed.end - transposed.begin, 9 * 12 * 4);
  const ByteSpan reversed = ElementsSpan(b + 11 * 4, {9, 12}, {12, -1}, 4);
  EXPECT_EQ(reversed.begin, b);
  EXPECT_EQ(reversed.end, b + 9 * 12 * 4);
  const ByteSpan empty = ElementsSpan(b, {0, 12}, {12, 1}, 4);
  EXPECT_EQ(empty.begin, empty.end);
}

// A mixed group's members by epilogue (bias or not, activation): lists in
// the order of their first member, members in order within each.
TEST(SplitByEpilogue, OneListPerEpilogueInFirstMemberOrder) {
  Buffers b;
  EXPECT_TRUE(SplitByEpilogue({}).empty());
  std::vector<DeviceGemm> ms = {b.At(1, 8, 16, 0), b.At(2, 8, 16, 0, false), b.At(3, 8, 16, 0),
                                b.At(4, 8, 16, 0), b.At(5, 8, 16, 0, false), b.At(6, 8, 16, 0)};
  ms[2].act = 0;  // bias + one activation
  ms[3].act = 1;  // bias + another
  ms[5].act = 0;
  const std::vector<std::vector<DeviceGemm>> lists = SplitByEpilogue(ms);
  ASSERT_EQ(lists.size(), 4u);
  EXPECT_EQ(Ms(lists[0]), (std::vector<int64_t>{1}));     // bias
  EXPECT_EQ(Ms(lists[1]), (std::vector<int64_t>{2, 5}));  // no bias
  EXPECT_EQ(Ms(lists[2]), (std::vector<int64_t>{3, 6}));  // bias + act 0
  EXPECT_EQ(Ms(lists[3]), (std::vector<int64_t>{4}));     // bias + act 1
  EXPECT_EQ(SplitByEpilogue({b.At(1, 8, 16, 0), b.At(2, 8, 16, 0)}).size(), 1u);
}

// ---- memory plan ---------------------------------------------------------------

struct Lifetime {
  int64_t first = INT64_MAX, last = -1;
};

// Checks what any plan must hold: every tensor an op touches has a place,
// aligned, inside its buffer; two tensors of one buffer overlap only in the
// arena and only when their lifetimes (in the plan's order) do not.
void ExpectSound(const Graph& g, const DimValues& dims, const MemoryPlan& plan) {
  ASSERT_EQ(plan.order.size(), g.LiveOps().size());
  const std::map<char, int64_t> size = {{'i', plan.input_bytes},
                                        {'p', plan.param_bytes},
                                        {'o', plan.output_bytes},
                                        {'a', plan.arena_bytes}};
  std::vector<Lifetime> life(static_cast<size_t>(g.num_tensor_ids()));
  for (size_t pos = 0; pos < plan.order.size(); ++pos) {
    const Op& op = g.op(plan.order[pos]);
    for (TensorId t : op.outputs) {
      auto& l = life[static_cast<size_t>(StorageOf(g, t))];
      l.first = std::min(l.first, static_cast<int64_t>(pos));
    }
    for (TensorId t : op.inputs) {
      auto& l = life[static_cast<size_t>(StorageOf(g, t))];
      l.last = std::max(l.last, static_cast<int64_t>(pos));
    }
  }
  std::vector<TensorId> placed;
  for (OpId id : plan.order) {
    for (const auto* list : {&g.op(id).inputs, &g.op(id).outputs}) {
      for (TensorId t : *list) {
        const TensorId s = StorageOf(g, t);
        const char r = plan.region[static_cast<size_t>(s)];
        const Tensor& tensor = g.tensor(s);
        const char want = tensor.role == Role::kInput   ? 'i'
                          : tensor.role == Role::kParam ? 'p'
                          : std::find(g.outputs().begin(), g.outputs().end(), s) != g.outputs().end()
                              ? 'o'
                              : 'a';
        ASSERT_EQ(r, want) << tensor.name;
        const int64_t off = plan.offset[static_cast<size_t>(s)];
        EXPECT_EQ(off % kBufferAlign, 0) << tensor.name;
        EXPECT_LE(off + DeviceTensorBytes(g, dims, s), size.at(r)) << tensor.name;
        placed.push_back(s);
      }
    }
  }
  std::sort(placed.begin(), placed.end());
  placed.erase(std::unique(placed.begin(), placed.end()), placed.end());
  for (size_t i = 0; i < placed.size(); ++i) {
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const TensorId s = placed[i], t = placed[j];
      if (plan.region[static_cast<size_t>(s)] != plan.region[static_cast<size_t>(t)]) continue;
      const int64_t a0 = plan.offset[static_cast<size_t>(s)], b0 = plan.offset[static_cast<size_t>(t)];
      const bool bytes_overlap = a0 < b0 + DeviceTensorBytes(g, dims, t) &&
                                 b0 < a0 + DeviceTensorBytes(g, dims, s);
      if (!bytes_overlap) continue;
      const Lifetime& x = life[static_cast<size_t>(s)];
      const Lifetime& y = life[static_cast<size_t>(t)];
      ASSERT_EQ(plan.region[static_cast<size_t>(s)], 'a')
          << g.tensor(s).name << " and " << g.tensor(t).name << " share bytes outside the arena";
      EXPECT_TRUE(x.last < y.first || y.last < x.first)
          << g.tensor(s).name << " and " << g.tensor(t).name << " share bytes while both live";
    }
  }
}

TEST(MemoryPlan, AChainReusesTheArena) {
  test::GraphBuilder b;
  b.Dim("batch", 1, 1024);
  std::string x = b.Input("x", {"batch", 64});
  for (int i = 0; i < 5; ++i) x = b.Fc(fmt::format("fc{}", i), x, 64);
  b.Outputs({x});
  const Graph g = b.Build();
  const DimValues dims = BindDims(g, {{"batch", 32}});
  const MemoryPlan plan = PlanDeviceMemory(g, dims);
  ExpectSound(g, dims, plan);
  // Four intermediates of 32 x 64 float16 (4 KiB each): two are ever alive
  // at once, so the arena holds two.
  EXPECT_EQ(plan.tensor_bytes, 4 * 4096);
  EXPECT_EQ(plan.arena_bytes, 2 * 4096);
  EXPECT_EQ(plan.input_bytes, 4096);
  EXPECT_EQ(plan.output_bytes, 4096);
  // Weights [64, 64] (8 KiB) and biases [64] (128 bytes, aligned to 256),
  // in order of first use: fc0's weight, then its bias, then fc1's.
  EXPECT_EQ(plan.param_bytes, 5 * (8192 + 256));
  EXPECT_EQ(plan.offset[static_cast<size_t>(test::TensorNamed(g, "w_fc0"))], 0);
  EXPECT_EQ(plan.offset[static_cast<size_t>(test::TensorNamed(g, "b_fc0"))], 8192);
  EXPECT_EQ(plan.offset[static_cast<size_t>(test::TensorNamed(g, "w_fc1"))], 8192 + 256);
}

// A run of elementwise ops may run as one fused chain (fused_elementwise.h),
// which reads every input while it writes the last op's output: no input of
// the run may lend its bytes to a later output of the run (a plan of op
// after op would hand a0's bytes to a2: a0's last reader, the second op,
// has run by then).
TEST(MemoryPlan, AnElementwiseRunKeepsItsInputsAlive) {
  test::GraphBuilder b;
  b.Dim("batch", 1, 1024);
  const std::string x = b.Input("x", {"batch", 64});
  std::string t = b.Fc("fc", x, 64);
  const std::string a0 = b.Elementwise("a0", "relu", {t});
  const std::string a1 = b.Elementwise("a1", "mul", {a0, x});
  const std::string a2 = b.Elementwise("a2", "add", {a1, x});
  const std::string a3 = b.Elementwise("a3", "sigmoid", {a2});
  b.Outputs({a3});
  const Graph g = b.Build();
  const DimValues dims = BindDims(g, {{"batch", 32}});
  const MemoryPlan plan = PlanDeviceMemory(g, dims);
  ExpectSound(g, dims, plan);
  auto at = [&](const std::string& name) { return plan.offset[static_cast<size_t>(test::TensorNamed(g, name))]; };
  const std::vector<int64_t> offsets = {at(t), at(a0), at(a1), at(a2)};
  for (size_t i = 0; i < offsets.size(); ++i) {
    for (size_t j = i + 1; j < offsets.size(); ++j) EXPECT_NE(offsets[i], offsets[j]) << i << " and " << j;
  }
}

TEST(MemoryPlan, TowersAndAFusedGroup) {
  test::GraphBuilder b;
  const std::string x = b.Input("x", {48, 32});
  std::vector<std::string> outs;
  for (int t = 0; t < 4; ++t) {
    std::string y = b.Fc(fmt::format("t{}a", t), x, 16 + 8 * t, {.type = OpType::kGemmRcrBiasRelu});
    y = b.LayerNorm(fmt::format("t{}ln", t), y);
    outs.push_back(b.Fc(fmt::format("t{}b", t), y, 8));
  }
  outs.push_back(b.Concat("cat", outs, 1));
  b.Outputs({outs.back()});
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused" : "unfused");
    Graph g = b.Build();
    if (fused) {
      ASSERT_FALSE(test::FuseAndGetGroups(g).empty());
    }
    const DimValues dims = BindDims(g);
    const MemoryPlan plan = PlanDeviceMemory(g, dims);
    ExpectSound(g, dims, plan);
    EXPECT_LT(plan.arena_bytes, plan.tensor_bytes);
    EXPECT_GT(plan.arena_bytes, 0);
  }
}

// The device memory plan as the executor makes it (views and fused
// regions planned first), checked sound.
MemoryPlan DevicePlanned(const Graph& g) {
  const DimValues dims = BindDims(g);
  const PlanConstants folded = FoldPlanConstants(g, dims);
  const DevicePlan planned = PlanViewsAndRegions(g, dims, folded, true);
  MemoryPlan plan = PlanDeviceMemory(g, dims, &planned.views, &planned.fusion);
  ExpectSound(g, dims, plan);
  return plan;
}

// Whether tensors a and b, of `bytes` each, lie on no common byte.
::testing::AssertionResult LieApart(const MemoryPlan& plan, const Graph& g, const std::string& a,
                                    const std::string& b, int64_t bytes) {
  const int64_t i = plan.offset[static_cast<size_t>(test::TensorNamed(g, a))];
  const int64_t o = plan.offset[static_cast<size_t>(test::TensorNamed(g, b))];
  if (i + bytes <= o || o + bytes <= i) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " at " << i << ", " << b << " at " << o;
}

// The grouped float32 kernel may take the tanh that alone reads each
// member's output into its epilogue (gemm_launches.cc, AbsorbActivations),
// writing each tanh's output while other members still read their A: the
// group's inputs (a0, a1, dead after it) live on to the tanh, so no tanh
// output lies on them (DCNv2's middle projections, whose inputs are the
// tanh before).
TEST(MemoryPlan, AGroupsInputsLiveToTheActivationsItMayTakeIn) {
  test::GraphBuilder b;
  const std::string x = b.Input("x", {8, 16}, DType::kFloat32);
  const std::vector<std::string> a = {b.Fc("p0", x, 16), b.Fc("p1", x, 16)};
  std::vector<std::string> t, outs;
  for (int i = 0; i < 2; ++i) {
    const std::string h = b.Fc(fmt::format("q{}", i), a[static_cast<size_t>(i)], 16);
    t.push_back(b.Elementwise(fmt::format("tanh{}", i), "tanh", {h}));
    outs.push_back(b.Fc(fmt::format("r{}", i), t.back(), 4));
  }
  b.Outputs(outs);
  Graph g = b.Build();
  ASSERT_EQ(test::FuseAndGetGroups(g).size(), 3u);  // p, q and r
  const MemoryPlan plan = DevicePlanned(g);
  for (const std::string& in : a) {
    for (const std::string& out : t) EXPECT_TRUE(LieApart(plan, g, in, out, 8 * 16 * 4));
  }
}

// A single GEMM's cuBLASLt call may take the Add of a residual that alone
// reads its output (gemm_launches.cc, FindResidual: the tensor added as
// its C operand), writing the Add's output while it still reads A: its A
// (p, dead after it) lives on to the Add, so the Add's output does not lie
// on it. An Add of a broadcast operand (a row of biases) is no residual.
TEST(MemoryPlan, AGemmsInputsLiveToTheResidualAddItMayTakeIn) {
  test::GraphBuilder b;
  const std::string x = b.Input("x", {8, 16}, DType::kFloat32);
  const std::string row = b.Input("row", {16}, DType::kFloat32);
  const std::string p = b.Fc("p", x, 16);
  const std::string h = b.Fc("q", p, 16);
  const std::string y = b.Elementwise("res", "add", {h, x});
  const std::string h2 = b.Fc("r", y, 16);
  const std::string z = b.Elementwise("shift", "add", {h2, row});
  b.Outputs({z});
  const Graph g = b.Build();
  const auto passes = [](OpId) { return false; };
  TensorId read = kNone, other = kNone;
  const OpId add = ResidualAddReading(g, test::TensorNamed(g, h), passes, &read, &other);
  ASSERT_NE(add, kNone);
  EXPECT_EQ(g.op(add).name, "res");
  EXPECT_EQ(read, test::TensorNamed(g, h));
  EXPECT_EQ(other, test::TensorNamed(g, x));
  EXPECT_EQ(ResidualAddReading(g, test::TensorNamed(g, h2), passes), kNone);  // broadcast
  EXPECT_EQ(ResidualAddReading(g, test::TensorNamed(g, p), passes), kNone);   // a GEMM reads it
  EXPECT_TRUE(LieApart(DevicePlanned(g), g, p, y, 8 * 16 * 4));  // A and the Add's output
}

TEST(MemoryPlan, SameGraphSamePlan) {
  test::GraphBuilder b;
  const std::string x = b.Input("x", {8, 16});
  b.Outputs({b.Fc("a", x, 16), b.Fc("b", b.Fc("c", x, 16), 4)});
  const Graph g = b.Build();
  const DimValues dims = BindDims(g);
  const MemoryPlan p = PlanDeviceMemory(g, dims), q = PlanDeviceMemory(g, dims);
  EXPECT_EQ(p.order, q.order);
  EXPECT_EQ(p.offset, q.offset);
  EXPECT_EQ(p.region, q.region);
  EXPECT_EQ(p.arena_bytes, q.arena_bytes);
}

// ---- fused regions: a gate's softmax -------------------------------------------

// The gate graphs of testing/gate_graphs.h at B = 6, E = 4 (D = M = 5).
std::string GateWeighsAStack(const std::string& extra_outputs = "") {
  return test::GateWeighsAStack(6, 4, 5, extra_outputs);
}
std::string GateTimesExperts(const std::string& extra_outputs = "") {
  return test::GateTimesExperts(6, 4, 5, extra_outputs);
}

struct PlannedRegions {
  Graph g;
  DimValues dims;
  PlanConstants folded;
  ViewPlan views;
  FusionPlan plan;
};
PlannedRegions PlanRegionsOf(const std::string& text, const std::string& what) {
  PlannedRegions p;
  p.g = ParseGraphText(text, what);
  p.dims = BindDims(p.g);
  p.folded = FoldPlanConstants(p.g, p.dims);
  DevicePlan planned = PlanViewsAndRegions(p.g, p.dims, p.folded, true, 0);  // (products wherever they can be)
  p.views = std::move(planned.views);
  p.plan = std::move(planned.fusion);
  return p;
}

// What region r computes (EvaluateRegion, its operands read through the
// strides the kernel reads them with) on random feeds drawn with `seed` is,
// output by output, the CPU executor's value of the unfused ops (graph
// outputs or not).
void ExpectRegionComputesTheCpus(const PlannedRegions& p, const FusionRegion& r, uint64_t seed) {
  const Graph& g = p.g;
  const TensorMap feeds = RandomFeeds(g, p.dims, seed);
  std::vector<std::vector<int64_t>> strides;
  for (const RegionOperand& o : r.operands) strides.push_back(OperandStrides(g, p.views, o));
  const std::vector<HostTensor> want = RunOnCpuKeepAll(g, feeds, p.dims);
  // (a product the region computes: the CPU's value of its GEMM)
  auto read = [&](size_t k, int64_t row, int64_t col) {
    const RegionOperand& o = r.operands[k];
    const TensorId t = OperandTensor(g, o);
    const auto fed = feeds.find(g.tensor(t).name);
    const HostTensor& v = fed != feeds.end() ? fed->second : want[static_cast<size_t>(t)];
    return v.Get(DomainOffset(o.over, strides[k], o.cols, row, col));
  };
  const std::vector<std::vector<float>> got = EvaluateRegion(r, read);
  ASSERT_EQ(got.size(), r.outputs.size());
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const HostTensor& w = want[static_cast<size_t>(r.outputs[k].tensor)];
    ASSERT_EQ(static_cast<int64_t>(got[k].size()), w.numel());
    for (int64_t i = 0; i < w.numel(); ++i) {
      EXPECT_NEAR(got[k][static_cast<size_t>(i)], w.Get(i), 1e-5f * std::max(1.0f, std::fabs(w.Get(i)))) << i;
    }
  }
}

// With group_operands_together, the A operands of a group GEMM's members
// that one fused region writes lie side by side in the members' order (one
// strided-batched call can take the group: DIN's second attention layers);
// the plan stays sound, and without it nothing asks for that.
TEST(MemoryPlan, AGroupsOperandsOfOneRegionLieSideBySide) {
  const PlannedRegions p = PlanRegionsOf(R"(input x0: float32[64, 32]
input x1: float32[64, 32]
input s: float32[64, 32]
tensor a0: float32[64, 32]
a0 = opaque(x0, s) {onnx = Mul}  # m0
tensor a1: float32[64, 32]
a1 = opaque(x1, s) {onnx = Mul}  # m1
param w0: float32[16, 32]
param b0: float32[16]
param w1: float32[16, 32]
param b1: float32[16]
tensor y0: float32[64, 16]
tensor y1: float32[64, 16]
(y1, y0) = group_gemm_rcr_bias(a1, w1, b1, a0, w0, b0)  # g
output y0, y1
)",
                                         "two operands of one region");
  const Graph& g = p.g;
  const TensorId a0 = test::TensorNamed(g, "a0"), a1 = test::TensorNamed(g, "a1");
  ASSERT_GE(p.plan.region_of[static_cast<size_t>(test::OpNamed(g, "m0"))], 0);
  ASSERT_EQ(p.plan.region_of[static_cast<size_t>(test::OpNamed(g, "m0"))],
            p.plan.region_of[static_cast<size_t>(test::OpNamed(g, "m1"))]);
  const MemoryPlan together = PlanDeviceMemory(g, p.dims, &p.views, &p.plan, true);
  ExpectSound(g, p.dims, together);
  EXPECT_EQ(together.region[static_cast<size_t>(a1)], 'a');
  EXPECT_EQ(together.offset[static_cast<size_t>(a0)] - together.offset[static_cast<size_t>(a1)], 64 * 32 * 4);
  const MemoryPlan apart = PlanDeviceMemory(g, p.dims, &p.views, &p.plan);
  ExpectSound(g, p.dims, apart);
  EXPECT_NE(apart.offset[static_cast<size_t>(a0)] - apart.offset[static_cast<size_t>(a1)], 64 * 32 * 4);
}

// The gate joins the region of the op that reads it, which then writes only
// y, the CPU executor's y of the unfused ops.
TEST(FusionRegions, AGateJoinsTheRegionThatReadsItBroadcast) {
  for (const std::string& text : {GateWeighsAStack(), GateTimesExperts()}) {
    SCOPED_TRACE(text);
    const PlannedRegions p = PlanRegionsOf(text, "gate");
    const Graph& g = p.g;
    const auto gate = static_cast<size_t>(test::OpNamed(g, "gate")), mix = static_cast<size_t>(test::OpNamed(g, "mix"));
    ASSERT_EQ(p.plan.regions.size(), 1u);
    EXPECT_EQ(p.plan.region_of[gate], 0);
    EXPECT_EQ(p.plan.region_of[mix], 0);
    const FusionRegion& r = p.plan.regions[0];
    EXPECT_EQ(r.rows, 30);
    EXPECT_EQ(r.cols, 4);
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].tensor, test::TensorNamed(g, "y"));
    ExpectRegionComputesTheCpus(p, r, 7);
  }
}

// A gate whose output a graph output also is stays where it was (its own
// launch): the region would otherwise write it as well.
TEST(FusionRegions, AGateReadOutsideStaysOutOfTheRegion) {
  for (const std::string& text : {GateWeighsAStack(", s"), GateTimesExperts(", s")}) {
    SCOPED_TRACE(text);
    const PlannedRegions p = PlanRegionsOf(text, "gate read outside");
    const auto gate = static_cast<size_t>(test::OpNamed(p.g, "gate"));
    EXPECT_EQ(p.plan.region_of[gate], -1);
  }
}

// ---- fused regions: a row a thread ------------------------------------------------

// DCNv2's mixture: four experts' values (each x0 * e_i, one value a row)
// stacked on the last axis, weighed by a softmax gate (MatMul by [B, 4,
// 1]), plus the residual r: five of six operands one value a row, so one
// thread holds a row (FusionRegion::one_lane), and computes the CPU's.
// MMoE's weighted sum reads a stack and the gate, both along the row:
// lanes.
TEST(FusionRegions, AFewColumnsReadOnceARowAreOneThreadsRow) {
  const std::string mixture = R"(input g: float32[6, 4]
input x0: float32[6, 5, 1]
input e0: float32[6, 5, 1]
input e1: float32[6, 5, 1]
input e2: float32[6, 5, 1]
input e3: float32[6, 5, 1]
input r: float32[6, 5, 1]
tensor p0: float32[6, 5, 1]
p0 = opaque(x0, e0) {onnx = Mul}  # p0
tensor p1: float32[6, 5, 1]
p1 = opaque(x0, e1) {onnx = Mul}  # p1
tensor p2: float32[6, 5, 1]
p2 = opaque(x0, e2) {onnx = Mul}  # p2
tensor p3: float32[6, 5, 1]
p3 = opaque(x0, e3) {onnx = Mul}  # p3
tensor x: float32[6, 5, 4]
x = opaque(p0, p1, p2, p3) {onnx = Concat, axis = -1}  # stack
tensor s: float32[6, 4]
s = opaque(g) {onnx = Softmax, axis = -1}  # gate
tensor u: float32[6, 4, 1]
u = reshape(s) {shape = [6, 4, 1]}  # unsqueeze
tensor m: float32[6, 5, 1]
m = opaque(x, u) {onnx = MatMul}  # mix
tensor y: float32[6, 5, 1]
y = opaque(m, r) {onnx = Add}  # res
output y
)";
  const PlannedRegions p = PlanRegionsOf(mixture, "mixture");
  ASSERT_EQ(p.plan.regions.size(), 1u);
  const FusionRegion& r = p.plan.regions[0];
  EXPECT_EQ(r.rows, 30);
  EXPECT_EQ(r.cols, 4);
  EXPECT_TRUE(r.one_lane);
  EXPECT_EQ(LanesOf(r).lanes, 1);
  EXPECT_EQ(LanesOf(r).per_lane, 4);
  ExpectRegionComputesTheCpus(p, r, 11);

  const PlannedRegions mmoe = PlanRegionsOf(GateWeighsAStack(), "gate");
  ASSERT_EQ(mmoe.plan.regions.size(), 1u);
  EXPECT_FALSE(mmoe.plan.regions[0].one_lane);
  EXPECT_EQ(LanesOf(mmoe.plan.regions[0]).lanes, 4);
}

// ---- fused regions: GEMMs computed in the region ---------------------------------

// DCNv2's mixture whose experts are GEMMs (MixtureOfGemms): the region
// takes each GEMM in (its ops), each expert's operand reads its product,
// and the products' outputs have no buffer; 5 x 45 products of K 40 make
// its 225 rows. With regions taking no GEMMs, fewer tiles than asked for,
// K over kMaxProductK, or a
// GEMM's output read outside too (a graph output), that GEMM launches
// alone and the region reads its output.
TEST(FusionRegions, ARegionComputesTheGemmsOnlyItReads) {
  const std::string text = test::MixtureOfGemms(5, 45, 40, 3, true);
  const PlannedRegions p = PlanRegionsOf(text, "mixture of gemms");
  const Graph& g = p.g;
  ASSERT_EQ(p.plan.regions.size(), 1u);
  const FusionRegion& r = p.plan.regions[0];
  EXPECT_EQ(r.rows, 225);
  EXPECT_TRUE(r.one_lane);
  ASSERT_EQ(r.products.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const OpId up = test::OpNamed(g, fmt::format("up{}", i));
    EXPECT_EQ(p.plan.region_of[static_cast<size_t>(up)], 0) << i;
    EXPECT_NE(std::find(r.ops.begin(), r.ops.end(), up), r.ops.end()) << i;
    const auto q = std::find_if(r.products.begin(), r.products.end(), [&](const RegionProduct& x) { return x.gemm == up; });
    ASSERT_NE(q, r.products.end()) << i;
    EXPECT_EQ(q->m, 5);
    EXPECT_EQ(q->n, 45);
    EXPECT_EQ(q->k, 40);
    EXPECT_EQ(q->lda, 40);
    EXPECT_EQ(q->bias != kNone, i == 1);
    EXPECT_EQ(q->y, test::TensorNamed(g, fmt::format("y{}", i)));
  }
  int reading = 0;
  for (const RegionOperand& o : r.operands) reading += o.product >= 0;
  EXPECT_EQ(reading, 3);
  const MemoryPlan mem = PlanDeviceMemory(g, p.dims, &p.views, &p.plan);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(mem.region[static_cast<size_t>(test::TensorNamed(g, fmt::format("y{}", i)))], 0);
  // the members together in the order, the GEMMs first
  const auto first = std::find(mem.order.begin(), mem.order.end(), r.ops.front());
  ASSERT_NE(first, mem.order.end());
  for (size_t i = 0; i < r.ops.size(); ++i) {
    ASSERT_LT(first + static_cast<std::ptrdiff_t>(i), mem.order.end());
    EXPECT_EQ(p.plan.region_of[static_cast<size_t>(first[static_cast<std::ptrdiff_t>(i)])], 0) << i;
  }
  ExpectRegionComputesTheCpus(p, r, 13);

  {
    const Graph off = ParseGraphText(text, "mixture of gemms");
    const DimValues dims = BindDims(off);
    const DevicePlan plain = PlanViewsAndRegions(off, dims, FoldPlanConstants(off, dims), true, kNoProducts);
    ASSERT_EQ(plain.fusion.regions.size(), 1u);
    EXPECT_TRUE(plain.fusion.regions[0].products.empty());
    EXPECT_EQ(plain.fusion.region_of[static_cast<size_t>(test::OpNamed(off, "up0"))], -1);
  }
  // the GPU test's sizes (cuda_executor_test.cc): every GEMM in the region
  for (const auto& [b, n, k, e] : std::vector<std::array<int, 4>>{{100, 45, 40, 3}, {3, 5, 1, 2}, {130, 429, 32, 4},
                                                                  {70, 33, 64, 8}, {64, 96, 64, 2}}) {
    const PlannedRegions z = PlanRegionsOf(test::MixtureOfGemms(b, n, k, e, true), "mixture of gemms");
    ASSERT_EQ(z.plan.regions.size(), 1u) << b << " " << n << " " << k << " " << e;
    EXPECT_EQ(z.plan.regions[0].products.size(), static_cast<size_t>(e)) << b << " " << n << " " << k << " " << e;
    ExpectRegionComputesTheCpus(z, z.plan.regions[0], 13);
  }
  // in bfloat16: the products of that type
  {
    std::string half = test::MixtureOfGemms(5, 45, 40, 3, true);
    for (size_t at; (at = half.find("float32")) != std::string::npos;) half.replace(at, 7, "bfloat16");
    const PlannedRegions z = PlanRegionsOf(half, "bfloat16");
    ASSERT_EQ(z.plan.regions.size(), 1u);
    ASSERT_EQ(z.plan.regions[0].products.size(), 3u);
    EXPECT_EQ(z.plan.regions[0].products[0].dtype, DType::kBFloat16);
  }
  // the GEMMs grouped (the gpu pipeline, hfuse rules): one op of three
  // members, all computed in the region
  {
    Graph fused = ParseGraphText(text, "mixture of gemms");
    PassState state(fused);
    PassOptions options;
    options.fuse_group_ops.rules = RuleSet::kHfuse;
    PassManager(PipelineNamed("gpu"), PassManagerOptions::VerifyingEach()).Run(state, options);
    const DimValues dims = BindDims(fused);
    const DevicePlan planned = PlanViewsAndRegions(fused, dims, FoldPlanConstants(fused, dims), true, 0);
    ASSERT_EQ(planned.fusion.regions.size(), 1u);
    const std::vector<RegionProduct>& q = planned.fusion.regions[0].products;
    ASSERT_EQ(q.size(), 3u);
    EXPECT_TRUE(IsGroupGemm(fused.op(q[0].gemm).type));
    EXPECT_EQ(q[1].gemm, q[0].gemm);
    EXPECT_EQ(q[2].gemm, q[0].gemm);
  }
  // fewer 64 x 32 tiles than asked for (5 x 45: 2): none
  {
    const Graph few = ParseGraphText(text, "mixture of gemms");
    const DimValues dims = BindDims(few);
    EXPECT_EQ(PlanViewsAndRegions(few, dims, FoldPlanConstants(few, dims), true, 2).fusion.regions[0].products.size(), 3u);
    EXPECT_TRUE(PlanViewsAndRegions(few, dims, FoldPlanConstants(few, dims), true, 3).fusion.regions[0].products.empty());
  }
  // K over kMaxProductK: none
  const PlannedRegions deep = PlanRegionsOf(test::MixtureOfGemms(5, 45, kMaxProductK + 1, 3, true), "deep");
  ASSERT_EQ(deep.plan.regions.size(), 1u);
  EXPECT_TRUE(deep.plan.regions[0].products.empty());
  const PlannedRegions out = PlanRegionsOf(test::MixtureOfGemms(5, 45, 40, 3, true, ", y0"), "y0 read outside");
  ASSERT_EQ(out.plan.regions.size(), 1u);
  EXPECT_EQ(out.plan.regions[0].products.size(), 2u);
  EXPECT_EQ(out.plan.region_of[static_cast<size_t>(test::OpNamed(out.g, "up0"))], -1);
  ExpectRegionComputesTheCpus(out, out.plan.regions[0], 13);
}

// ---- fused regions: a residual Add and its LayerNorm ----------------------------

// s = x + h, y = layernorm(s) with `operands` after s (gamma and beta, one
// of them, or none), the sum also a graph output where `sum_out`.
std::string ResidualLayerNorm(const std::string& operands, bool sum_out) {
  return fmt::format(R"(input x: float32[4, 3, 20]
input h: float32[4, 3, 20]
param g: float32[20]
param b: float32[20]
tensor s: float32[4, 3, 20]
s = elementwise(x, h) {{func = add}}  # res
tensor y: float32[4, 3, 20]
y = layernorm(s{}) {{normalized_shape = [20], eps = 0.001}}  # ln
output y{}
)",
                     operands, sum_out ? ", s" : "");
}

// The Add and the LayerNorm are one region over 12 rows of 20, writing y
// (and s where it is read outside); what it computes is the CPU
// executor's, with gamma and beta, either, or neither.
TEST(FusionRegions, AResidualAddAndItsLayerNormAreOneRegion) {
  for (const char* operands : {", g, b", ", g", ", null, b", ""}) {
    for (bool sum_out : {false, true}) {
      const std::string text = ResidualLayerNorm(operands, sum_out);
      SCOPED_TRACE(text);
      const PlannedRegions p = PlanRegionsOf(text, "residual layernorm");
      ASSERT_EQ(p.plan.regions.size(), 1u);
      const FusionRegion& r = p.plan.regions[0];
      EXPECT_EQ(r.ops.size(), 2u);
      EXPECT_EQ(r.rows, 12);
      EXPECT_EQ(r.cols, 20);
      ASSERT_EQ(r.outputs.size(), sum_out ? 2u : 1u);
      ExpectRegionComputesTheCpus(p, r, 11);
    }
  }
}

// A transformer's end (TabTransformer): the last residual LayerNorm's
// [4, 3, 20] rows, flattened, beside columns of an input, into the MLP.
std::string LayerNormBesideAnInput() {
  return R"(input x: float32[4, 3, 20]
input h: float32[4, 3, 20]
input c: float32[4, 5]
param g: float32[20]
param b: float32[20]
tensor s: float32[4, 3, 20]
s = elementwise(x, h) {func = add}  # res
tensor n: float32[4, 3, 20]
n = layernorm(s, g, b) {normalized_shape = [20], eps = 0.001}  # ln
tensor flat: float32[4, 60]
flat = reshape(n) {shape = [4, 60]}  # flatten
tensor cat: float32[4, 65]
cat = concatenate(flat, c) {dim = 1}  # cat
param w: float32[8, 65]
param wb: float32[8]
tensor y: float32[4, 8]
y = gemm_rcr_bias(cat, w, wb)  # mlp
output y
)";
}

// The LayerNorm runs in the residual's region, which writes through any
// strides: the views, told so, lay its output in its slot of the
// concatenate, though no row of it is a row there, and the concatenate
// copies only the input's columns (part 1). The region writes the slot
// (its output's place is the concatenate's buffer, at the concatenate's
// row stride of 65), and what it computes is the CPU's.
TEST(FusionRegions, ARegionWritesItsLayerNormIntoAConcatenatesSlot) {
  const PlannedRegions p = PlanRegionsOf(LayerNormBesideAnInput(), "layernorm beside an input");
  const Graph& g = p.g;
  const auto cat = static_cast<size_t>(test::OpNamed(g, "cat"));
  ASSERT_EQ(p.plan.regions.size(), 1u);
  const FusionRegion& r = p.plan.regions[0];
  EXPECT_EQ(r.ops.size(), 2u);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].place, test::TensorNamed(g, "cat"));
  EXPECT_EQ(r.outputs[0].offset, 0);
  EXPECT_EQ(r.outputs[0].strides, (std::vector<int64_t>{65, 20, 1}));
  EXPECT_FALSE(p.views.in_place[cat]);
  EXPECT_FALSE(p.views.skip[cat]);
  EXPECT_EQ(p.views.in_slot[cat], std::vector<int32_t>{0});
  EXPECT_NE(p.views.copied_why[cat].find("part 'c'"), std::string::npos) << p.views.copied_why[cat];
  ExpectRegionComputesTheCpus(p, r, 13);
  // Without regions, the LayerNorm writes rows of its own, and the
  // concatenate copies both parts.
  const DevicePlan plain = PlanViewsAndRegions(g, p.dims, p.folded, false);
  EXPECT_TRUE(plain.views.in_slot[cat].empty());
  EXPECT_NE(plain.views.copied_why[cat].find("part 'flat'"), std::string::npos) << plain.views.copied_why[cat];
}

// ---- fused regions: attention ----------------------------------------------------

// The chain of testing/attention_graphs.h at B = 2, H = 3, Sq = 5, Sk = 6,
// Dv = 7 and heads of `d`.
std::string Attention(int64_t d, const std::string& extra_outputs = "") {
  test::AttentionSizes n;
  n.d = d;
  return test::AttentionChain(n, extra_outputs);
}

// The chain is one attention region, and the kernel's row function, run
// over the operands where the plan lays them out (K^T as k's transpose, v
// broadcast over the heads), computes the CPU executor's y.
TEST(FusionRegions, AnAttentionChainIsOneRegion) {
  const PlannedRegions p = PlanRegionsOf(Attention(4), "attention");
  const Graph& g = p.g;
  ASSERT_EQ(p.plan.regions.size(), 1u);
  const FusionRegion& r = p.plan.regions[0];
  ASSERT_TRUE(r.attention.has_value());
  EXPECT_EQ(r.ops.size(), 3u);  // the Transpose is a view
  EXPECT_EQ(r.ops.front(), test::OpNamed(g, "scores"));
  EXPECT_EQ(r.ops.back(), test::OpNamed(g, "mix"));
  const TensorMap feeds = RandomFeeds(g, p.dims, 7);
  AttentionArgs a = AttentionArgsOf(g, p.views, r);
  EXPECT_EQ(a.batch, 6);
  EXPECT_EQ(a.kt_d, 1);    // k's elements of a row
  EXPECT_EQ(a.kt_key, 4);  // k's rows
  EXPECT_EQ(a.v_batch[1], 0);
  const AttentionTensors t = AttentionTensorsOf(g, r);
  EXPECT_EQ(t.kt, test::TensorNamed(g, "kt"));
  a.q = reinterpret_cast<const float*>(feeds.at("q").bytes.data());
  a.kt = reinterpret_cast<const float*>(feeds.at("k").bytes.data());  // kt's root
  a.v = reinterpret_cast<const float*>(feeds.at("v").bytes.data());
  std::vector<float> out(2 * 3 * 5 * 7, NAN);
  a.o = out.data();
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t row = 0; row < a.sq; ++row) AttentionRow<kMaxAttentionHead>(a, b, row);
  }
  const HostTensor want = RunOnCpu(g, feeds, p.dims).at("y");
  ASSERT_EQ(static_cast<int64_t>(out.size()), want.numel());
  for (int64_t i = 0; i < want.numel(); ++i) {
    EXPECT_NEAR(out[static_cast<size_t>(i)], want.Get(i), 1e-5f * std::max(1.0f, std::fabs(want.Get(i)))) << i;
  }
}

// Scores read outside the chain (a graph output), or heads wider than the
// kernel's registers: no attention region.
TEST(FusionRegions, NoAttentionRegionWhereTheChainCannotBeOne) {
  for (const auto& [text, what] : {std::pair{Attention(4, ", s"), "scores read outside"},
                                   std::pair{Attention(kMaxAttentionHead + 1), "a head too wide"}}) {
    SCOPED_TRACE(what);
    const PlannedRegions p = PlanRegionsOf(text, what);
    for (const FusionRegion& r : p.plan.regions) EXPECT_FALSE(r.attention.has_value());
    EXPECT_EQ(p.plan.region_of[static_cast<size_t>(test::OpNamed(p.g, "mix"))], -1);
  }
}

// ---- fused regions: feed-forward blocks ----------------------------------------

// The block (testing/ffn_graphs.h) is one FFN region of its three ops, as
// given and through the reshape views around its GEMMs, or of its four
// gated (FTTransformer's GEGLU: 32 -> 84, halves of 42, either first); the
// kernel's row function (EvaluateFfnRow), over x and the weights, computes
// the CPU executor's y; no buffer for the hidden tensors. Widths of 8 and
// 64, no first bias, tanh.
TEST(FusionRegions, AFeedForwardBlockIsOneRegion) {
  for (const test::FfnSizes& n :
       {test::FfnSizes{}, test::FfnSizes{.m = 20, .in = 8, .hidden = 5, .out = 64, .act = "tanh", .bias1 = false},
        test::FfnSizes{.m = 39 * 3, .tokens = 39}, test::FfnSizes{.m = 39 * 2, .hidden = 42, .gated = 1},
        test::FfnSizes{.m = 9, .in = 16, .hidden = 7, .out = 8, .act = "tanh", .bias1 = false, .gated = -1}}) {
    const std::string text = test::FfnBlock(n);
    SCOPED_TRACE(text);
    const PlannedRegions p = PlanRegionsOf(text, "ffn");
    const Graph& g = p.g;
    ASSERT_EQ(p.plan.regions.size(), 1u);
    const FusionRegion& r = p.plan.regions[0];
    ASSERT_TRUE(r.ffn.has_value());
    std::vector<OpId> ops{test::OpNamed(g, "up"), test::OpNamed(g, "act"), test::OpNamed(g, "down")};
    if (n.gated != 0) ops.insert(ops.begin() + 2, test::OpNamed(g, "gate"));
    EXPECT_EQ(r.ops, ops);
    const FfnChain& c = *r.ffn;
    EXPECT_EQ(c.m, n.m);
    EXPECT_EQ(c.in, n.in);
    EXPECT_EQ(c.hidden, n.hidden);
    EXPECT_EQ(c.out, n.out);
    EXPECT_EQ(c.b1 != kNone, n.bias1);
    EXPECT_EQ(c.Gated(), n.gated != 0);
    if (n.gated != 0) {
      EXPECT_EQ(c.value_row, n.gated > 0 ? 0 : n.hidden);
      EXPECT_EQ(c.gate_row, n.gated > 0 ? n.hidden : 0);
    }
    const TensorMap feeds = RandomFeeds(g, p.dims, 7);
    FfnArgs a = FfnArgsOf(p.views, r, 132);
    EXPECT_EQ(a.ldx, n.in);
    EXPECT_EQ(a.rows_per_thread, 1);  // (too few rows for two a thread on 132 SMs)
    auto at = [&](const char* name) { return reinterpret_cast<const float*>(feeds.at(name).bytes.data()); };
    a.x = at("x"), a.w1 = at("w1"), a.b1 = n.bias1 ? at("b1") : nullptr, a.w2 = at("w2"), a.b2 = at("b2");
    std::vector<float> out(static_cast<size_t>(n.m * n.out), NAN);
    a.y = out.data();
    for (int64_t row = 0; row < a.m; ++row) EvaluateFfnRow(a, row);
    const HostTensor want = RunOnCpu(g, feeds, p.dims).at("y");
    ASSERT_EQ(static_cast<int64_t>(out.size()), want.numel());
    for (int64_t i = 0; i < want.numel(); ++i) {
      EXPECT_NEAR(out[static_cast<size_t>(i)], want.Get(i), 1e-5f * std::max(1.0f, std::fabs(want.Get(i)))) << i;
    }
    const MemoryPlan mem = PlanDeviceMemory(g, p.dims, &p.views, &p.plan);
    for (const char* hidden : {"h", "a", "ag"}) {
      if (n.gated == 0 && std::string(hidden) == "ag") continue;
      EXPECT_EQ(mem.region[static_cast<size_t>(test::TensorNamed(g, hidden))], 0) << hidden;
    }
  }
  // Two rows a thread where the blocks are still at least the SMs.
  const PlannedRegions p = PlanRegionsOf(test::FfnBlock({.m = 2 * 128 * 132}), "ffn");
  ASSERT_EQ(p.plan.regions.size(), 1u);
  EXPECT_EQ(FfnArgsOf(p.views, p.plan.regions[0], 132).rows_per_thread, 2);
  EXPECT_EQ(FfnArgsOf(p.views, p.plan.regions[0], 133).rows_per_thread, 1);
}

// The hidden tensor read outside the block (a graph output), a width the
// kernel has no registers for, weights past 48 KiB of shared memory, an
// activation of two operands; gated, a half or the gate's activation read
// outside, or the Mul of one half by its own activation: no FFN region.
// Fewer rows than asked for, or none asked for (gated: any rule but every
// block's, kFfnGatedMinRows): none either, and the activation's record says
// why.
TEST(FusionRegions, NoFeedForwardRegionWhereTheBlockCannotBeOne) {
  std::string two_operands = test::FfnBlock({});
  two_operands.replace(two_operands.find("elementwise(h) {func = gelu}"), 28, "elementwise(h, h) {func = mul}");
  std::string one_half = test::FfnBlock({.hidden = 42, .gated = 1});
  one_half.replace(one_half.find("elementwise(v, ag)"), 18, "elementwise(g, ag)");
  for (const auto& [text, what] :
       {std::pair{test::FfnBlock({}, ", a"), "the activation read outside"},
        std::pair{test::FfnBlock({}, ", h"), "the first product read outside"},
        std::pair{test::FfnBlock({.in = 48}), "x 48 wide"}, std::pair{test::FfnBlock({.out = 4}), "y 4 wide"},
        std::pair{test::FfnBlock({.in = 64, .hidden = 100, .out = 64}), "weights of 51.6 KB"},
        std::pair{two_operands, "an activation of two operands"},
        std::pair{test::FfnBlock({.hidden = 42, .gated = 1}, ", v"), "gated, the value's half read outside"},
        std::pair{test::FfnBlock({.hidden = 42, .gated = 1}, ", ag"), "gated, the gate's activation read outside"},
        std::pair{test::FfnBlock({.in = 64, .hidden = 64, .out = 64, .gated = 1}), "gated weights of 48.8 KiB"},
        std::pair{one_half, "gated, a half times its own activation"}}) {
    SCOPED_TRACE(what);
    const PlannedRegions p = PlanRegionsOf(text, what);
    for (const FusionRegion& r : p.plan.regions) EXPECT_FALSE(r.ffn.has_value());
    EXPECT_EQ(p.plan.region_of[static_cast<size_t>(test::OpNamed(p.g, "down"))], -1);
  }
  const Graph g = ParseGraphText(test::FfnBlock({}), "ffn");
  const DimValues dims = BindDims(g);
  const PlanConstants folded = FoldPlanConstants(g, dims);
  EXPECT_TRUE(PlanViewsAndRegions(g, dims, folded, true, 0, kNoFfn).fusion.regions.empty());
  const FusionPlan below = PlanViewsAndRegions(g, dims, folded, true, 0, 38).fusion;  // (37 rows)
  EXPECT_TRUE(below.regions.empty());
  EXPECT_EQ(below.ffn_below_rule,
            (std::map<OpId, FusionPlan::FfnBelow>{{test::OpNamed(g, "act"), {.rows = 37, .min_rows = 38}}}));
  EXPECT_EQ(PlanViewsAndRegions(g, dims, folded, true, 0, 37).fusion.regions.size(), 1u);
  const Graph gated = ParseGraphText(test::FfnBlock({.hidden = 42, .gated = 1}), "ffn");
  const DimValues gated_dims = BindDims(gated);
  const PlanConstants gated_folded = FoldPlanConstants(gated, gated_dims);
  const FusionPlan gated_by_rule = PlanViewsAndRegions(gated, gated_dims, gated_folded, true, 0, 37).fusion;
  for (const FusionRegion& r : gated_by_rule.regions) EXPECT_FALSE(r.ffn.has_value());
  EXPECT_EQ(gated_by_rule.ffn_below_rule,
            (std::map<OpId, FusionPlan::FfnBelow>{
                {test::OpNamed(gated, "act"), {.rows = 37, .min_rows = kFfnGatedMinRows, .gated = true}}}));
  const FusionPlan gated_all = PlanViewsAndRegions(gated, gated_dims, gated_folded, true, 0, 0).fusion;
  ASSERT_EQ(gated_all.regions.size(), 1u);
  EXPECT_TRUE(gated_all.regions[0].ffn.has_value());
}

}  // namespace
}  // namespace hfuse::cuda
