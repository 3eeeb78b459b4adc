// The CUDA backend against the CPU reference executor, on random data: every
// kernel path (single GEMMs with each epilogue; CUTLASS grouped, cuBLAS
// grouped and strided-batched group GEMMs, each CUTLASS tile, members with N
// and K off the tile, alignments 8/4/2; LayerNorm groups of 1 to 1000
// members with odd and aligned sizes, and the hfuse rules' uncapped groups
// of mixed widths; elementwise, copies, strided views; group_gather of 1 to
// 500 lookups of odd widths as one launch, lookups of 70000 ids over more
// blocks than a gather takes, ids at the tables' edges, an id
// out of range) in float16, bfloat16 and float32. Outputs are poisoned
// (0xFF: NaN) before each run, so an element a kernel fails to write fails
// the check. Normalised error max|gpu - cpu| /
// max|cpu| must be at most 1e-2 (float16, bfloat16) or 1e-5 (float32).
// Random and conformance graphs are checked op by op (see
// ExpectEachOpMatches). Skipped, saying so, when no CUDA device is present.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <cuda_runtime.h>

#include "ffn.h"
#include "onnx_kernels.h"
#include "grouped_sgemm.h"
#include "hfuse/cuda/cuda_executor.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/compare.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/io/graph_text.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/pass_manager.h"
#include "hfuse/passes/strided_views.h"
#include "hfuse/support/error.h"
#include "testing/conformance.h"
#include "testing/attention_graphs.h"
#include "testing/ffn_graphs.h"
#include "testing/gate_graphs.h"
#include "testing/graph_builder.h"
#include "testing/random_graph.h"

namespace hfuse {
namespace {

double GpuTolerance(DType d) { return d == DType::kFloat32 ? 1e-5 : 1e-2; }

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!CudaDeviceAvailable(&why)) GTEST_SKIP() << "no CUDA device (" << why << "): GPU test skipped";
  }
};

// Runs `g` on the CPU and on the GPU (plain launches and a CUDA graph) and
// compares every output; `f32_tolerance` bounds a float32 output's error.
void ExpectGpuMatchesCpu(const Graph& g, uint64_t seed, const std::string& what,
                         CudaOptions cuda = {}, double f32_tolerance = GpuTolerance(DType::kFloat32)) {
  const DimValues dims = BindDims(g);
  const TensorMap feeds = RandomFeeds(g, dims, seed);
  const TensorMap want = RunOnCpu(g, feeds, dims);
  CudaExecutor gpu(g, dims, cuda);
  gpu.SetFeeds(feeds);
  for (bool use_graph : {false, true}) {
    gpu.Poison();
    use_graph ? gpu.RunGraph() : gpu.Run();
    const TensorMap got = gpu.Outputs();
    for (const OutputComparison& c : CompareOutputs(want, got)) {
      EXPECT_TRUE(c.problem.empty()) << what << " " << c.name << ": " << c.problem;
      EXPECT_LE(c.normalized, c.dtype == DType::kFloat32 ? f32_tolerance : GpuTolerance(c.dtype))
          << what << " output " << c.name << " (" << DTypeName(c.dtype) << ")"
          << (use_graph ? " in a CUDA graph" : "");
    }
  }
}

// The gpu pipeline in two steps, verified after each pass: up to
// fuse-group-ops, then the rest (split/concat views).
class GpuPipeline {
 public:
  GpuPipeline(Graph& g, const FuseGroupOpsOptions& options) : state_(g) {
    options_.fuse_group_ops = options;
    PassManagerOptions manager = PassManagerOptions::VerifyingEach();
    manager.stop_after = "fuse-group-ops";
    PassManager(PipelineNamed("gpu"), manager).Run(state_, options_);
  }
  void Finish() {
    std::vector<const PassInfo*> rest = PipelineNamed("gpu");
    rest.erase(rest.begin());
    PassManager(rest, PassManagerOptions::VerifyingEach()).Run(state_, options_);
  }

 private:
  PassState state_;
  PassOptions options_;
};

// The graph as given, fused, and fused with split/concat views.
void ExpectAllVariantsMatch(const Graph& g, uint64_t seed, const std::string& what,
                            FuseGroupOpsOptions options = {}) {
  ExpectGpuMatchesCpu(g, seed, what + " (unfused)");
  Graph fused = g;
  GpuPipeline pipeline(fused, options);
  ExpectGpuMatchesCpu(fused, seed, what + " (fused)");
  pipeline.Finish();
  ExpectGpuMatchesCpu(fused, seed, what + " (fused, views)");
}

// A graph of `op` alone: its inputs become graph inputs (params stay
// params), its outputs the graph's outputs.
Graph OneOpGraph(const Graph& g, OpId id) {
  Graph one;
  for (const DynamicDim& d : g.dims()) one.AddDim(d);
  std::map<TensorId, TensorId> map;
  auto copy = [&](TensorId t, Role role) {
    if (map.count(t)) return map[t];
    Tensor c;
    c.name = g.tensor(t).name;
    c.shape = g.tensor(t).shape;
    c.dtype = g.tensor(t).dtype;
    c.role = role;
    return map[t] = one.AddTensor(c);
  };
  Op op = g.op(id);
  for (TensorId& in : op.inputs) in = copy(in, g.tensor(in).role == Role::kParam ? Role::kParam : Role::kInput);
  for (TensorId& out : op.outputs) out = copy(out, Role::kIntermediate);
  op.elided = false;
  const std::vector<TensorId> outputs = op.outputs;
  one.AddOp(op);
  one.set_outputs(outputs);
  return one;
}

// Each op of `g` alone against the CPU: chains of ops in random graphs
// (a division by a value near zero, say) can magnify a last-bit difference
// beyond any fixed tolerance, so whole random graphs are checked op by op,
// and end to end only for missing or non-finite values.
void ExpectEachOpMatches(const Graph& g, uint64_t seed, const std::string& what) {
  for (OpId id : g.LiveOps()) {
    if (g.op(id).elided) continue;
    ExpectGpuMatchesCpu(OneOpGraph(g, id), seed, what + " op " + g.op(id).name);
  }
}

void ExpectAllOutputsWritten(const Graph& g, uint64_t seed, const std::string& what) {
  const DimValues dims = BindDims(g);
  const TensorMap feeds = RandomFeeds(g, dims, seed);
  const TensorMap want = RunOnCpu(g, feeds, dims);
  CudaExecutor gpu(g, dims);
  gpu.SetFeeds(feeds);
  gpu.Poison();
  gpu.RunGraph();
  for (const OutputComparison& c : CompareOutputs(want, gpu.Outputs())) {
    EXPECT_TRUE(c.problem.empty()) << what << " " << c.name << ": " << c.problem;
  }
}

void ExpectRandomGraphMatches(const Graph& g, uint64_t seed, const std::string& what,
                              FuseGroupOpsOptions options = {}) {
  ExpectEachOpMatches(g, seed, what + " (unfused)");
  Graph fused = g;
  GpuPipeline pipeline(fused, options);
  ExpectEachOpMatches(fused, seed, what + " (fused)");
  pipeline.Finish();
  ExpectAllOutputsWritten(fused, seed, what + " (fused, views)");
}

const char* kDtypes[] = {"float16", "bfloat16", "float32"};
const OpType kGemmTypes[] = {OpType::kGemmRcr, OpType::kGemmRcrBias, OpType::kGemmRcrBiasRelu,
                             OpType::kGemmRcrBiasSigmoid};

DType ParseDt(const std::string& s) { return *ParseDType(s); }

TEST_F(CudaTest, SingleGemmsEveryEpilogueAlignmentAndDtype) {
  for (const char* dt : kDtypes) {
    for (OpType type : kGemmTypes) {
      for (int k : {7, 6, 12, 24, 64}) {  // alignment 1, 2, 4, 8, 8
        test::GraphBuilder b;
        const std::string y = b.Fc("fc", b.Input("x", {33, k}, ParseDt(dt)), 17,
                                   {.type = type, .alpha = k == 12 ? 0.5 : 1.0});
        b.Outputs({y});
        ExpectGpuMatchesCpu(b.Build(), static_cast<uint64_t>(k),
                            std::string(OpTypeName(type)) + " " + dt + " K=" + std::to_string(k));
      }
    }
  }
}

TEST_F(CudaTest, RankThreeGemm) {
  test::GraphBuilder b;
  b.Outputs({b.Fc("fc", b.Input("x", {3, 5, 40}), 24)});
  ExpectGpuMatchesCpu(b.Build(), 1, "rank-3 A");
}

// Mixed shapes go through the CUTLASS grouped GEMM (float16, bfloat16) or
// cublasGemmGroupedBatchedEx + the grouped epilogue (float32); one shape
// through strided-batched cuBLASLt.
TEST_F(CudaTest, GroupGemmsMixedAndUniformShapes) {
  for (const char* dt : kDtypes) {
    for (bool uniform : {false, true}) {
      for (OpType type : kGemmTypes) {
        test::GraphBuilder b;
        std::vector<std::string> outs;
        const int ks[] = {64, 24, 40, 128, 8};
        const int ns[] = {32, 48, 16, 72, 8};
        for (int i = 0; i < 5; ++i) {
          const int k = uniform ? 64 : ks[i], n = uniform ? 32 : ns[i];
          outs.push_back(b.Fc(fmt::format("fc{}", i), b.Input(fmt::format("x{}", i), {96, k}, ParseDt(dt)),
                              n, {.type = type}));
        }
        b.Outputs(outs);
        ExpectAllVariantsMatch(b.Build(), 3, std::string("group ") + std::string(OpTypeName(type)) + " " +
                                                 dt + (uniform ? " uniform" : " mixed"));
      }
    }
  }
}

TEST_F(CudaTest, GroupGemmOfAThousandMembers) {
  test::GraphBuilder b;
  std::vector<std::string> outs;
  for (int i = 0; i < 1000; ++i) {
    const int k = 8 * (1 + i % 5), n = 8 + 8 * (i % 3);
    outs.push_back(b.Fc(fmt::format("fc{}", i), b.Input(fmt::format("x{}", i), {16, k}), n));
  }
  b.Outputs(outs);
  ExpectAllVariantsMatch(b.Build(), 4, "1000 GEMMs");
}

// The launches' labels, which name each group GEMM's path.
std::vector<std::string> LaunchLabels(const Graph& g, CudaOptions cuda = {}) {
  const DimValues dims = BindDims(g);
  CudaExecutor gpu(g, dims, cuda);
  gpu.SetFeeds(RandomFeeds(g, dims, 0));
  std::vector<std::string> labels;
  for (const auto& [label, us] : gpu.ProfileLaunches(1)) labels.push_back(label);
  return labels;
}

// Writes `value` into param `name` where the executor keeps it, and says so
// (CudaExecutor::ParamWritten): what derives from the param is made again.
void WriteParamInPlace(const Graph& g, CudaExecutor& gpu, const std::string& name, const HostTensor& value) {
  const std::optional<TensorId> w = g.FindTensor(name);
  ASSERT_TRUE(w.has_value()) << name;
  ASSERT_EQ(cudaMemcpy(gpu.TensorAddress(*w), value.bytes.data(), value.bytes.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  gpu.ParamWritten(*w);
}

bool AnyLabelHas(const std::vector<std::string>& labels, const std::string& what) {
  return std::any_of(labels.begin(), labels.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// The CUTLASS grouped GEMM with every epilogue, each tile, members whose M,
// N and K are not multiples of the tile (M 300 = 2 x 128 + 44, K 200 =
// 3 x 64 + 8, N 136 = 128 + 8, 72 = 64 + 8, 1000), against the CPU and
// against cuBLAS's grouped path.
TEST_F(CudaTest, CutlassGroupGemmEveryEpilogueAndTile) {
  for (const char* dt : {"float16", "bfloat16"}) {
    for (OpType type : kGemmTypes) {
      test::GraphBuilder b;
      std::vector<std::string> outs;
      const int ks[] = {200, 64, 8, 1032, 136};
      const int ns[] = {136, 72, 8, 256, 1000};
      for (int i = 0; i < 5; ++i) {
        outs.push_back(b.Fc(fmt::format("fc{}", i), b.Input(fmt::format("x{}", i), {300, ks[i]}, ParseDt(dt)),
                            ns[i], {.type = type}));
      }
      b.Outputs(outs);
      Graph fused = b.Build();
      FuseGroupOps(fused);
      ASSERT_EQ(fused.NumLiveOps(), 1);
      const std::string what = std::string(OpTypeName(type)) + " " + dt;
      for (GemmKernelChoice kernel : {GemmKernelChoice::kRule, GemmKernelChoice::k128x128, GemmKernelChoice::k128x64}) {
        const CudaOptions cuda{.gemm_kernel = kernel};
        const std::vector<std::string> labels = LaunchLabels(fused, cuda);
        EXPECT_TRUE(AnyLabelHas(labels, "CUTLASS grouped")) << what;
        if (kernel == GemmKernelChoice::k128x64 && std::string(dt) == "float16") {
          EXPECT_TRUE(AnyLabelHas(labels, "CUTLASS grouped 128x64")) << what;
        }
        ExpectGpuMatchesCpu(fused, 21, what + " CUTLASS kernel " + std::to_string(static_cast<int>(kernel)), cuda);
      }
      const CudaOptions cublas{.cutlass = false};
      EXPECT_TRUE(AnyLabelHas(LaunchLabels(fused, cublas), "cublasGemmGroupedBatchedEx")) << what;
      ExpectGpuMatchesCpu(fused, 21, what + " cuBLAS grouped", cublas);
    }
  }
}

// A single-member group op: one cuBLASLt GEMM by default (its epilogue has
// bias and ReLU too), and the CUTLASS kernel when strided batching is off.
TEST_F(CudaTest, CutlassGroupGemmOfOneMember) {
  for (const char* dt : {"float16", "bfloat16"}) {
    test::GraphBuilder b;
    const std::string x = b.Input("x", {130, 72}, ParseDt(dt));
    const std::string w = b.Param("w", {24, 72}, ParseDt(dt));
    const std::string bias = b.Param("bias", {24}, ParseDt(dt));
    const std::string y = b.Declare("y", {130, 24}, ParseDt(dt));
    b.RawOp("gg", "group_gemm_rcr_bias_relu", {x, w, bias}, {y}, "\"group_size\": 1");
    b.Outputs({y});
    const Graph g = b.Build();
    EXPECT_TRUE(AnyLabelHas(LaunchLabels(g), "cublasLt")) << dt;
    const CudaOptions grouped{.strided_batched = false};
    EXPECT_TRUE(AnyLabelHas(LaunchLabels(g, grouped), "CUTLASS grouped")) << dt;
    ExpectGpuMatchesCpu(g, 22, std::string("one-member group, cuBLASLt ") + dt);
    ExpectGpuMatchesCpu(g, 22, std::string("one-member group, CUTLASS ") + dt, grouped);
  }
}

// Mixed float16 groups at alignments 8, 4 and 2 (the seed groups by
// alignment): 8 goes to CUTLASS, 4 and 2 (TMA needs 16-byte rows) run one
// cuBLASLt call a member however many there are, bias and ReLU in its
// epilogue (cuBLAS's grouped GEMM took 83 us where DCNv2's eight such
// bfloat16 members take less a call each: gemm_launches.cc).
TEST_F(CudaTest, GroupGemmAlignments842TakeTheirPaths) {
  test::GraphBuilder b;
  std::vector<std::string> outs;
  // Five members of each alignment: more than PlanGemm runs one by one.
  const int ks[] = {64, 40, 200, 16, 24, 12, 20, 36, 28, 44, 6, 10, 14, 18, 22};  // 8 x5 | 4 x5 | 2 x5
  for (int i = 0; i < 15; ++i) {
    outs.push_back(b.Fc(fmt::format("fc{}", i), b.Input(fmt::format("x{}", i), {77, ks[i]}), 24 + 8 * (i % 3),
                        {.type = OpType::kGemmRcrBiasRelu}));
  }
  b.Outputs(outs);
  Graph fused = b.Build();
  FuseGroupOps(fused);
  ASSERT_EQ(fused.NumLiveOps(), 3);
  const std::vector<std::string> labels = LaunchLabels(fused);
  EXPECT_TRUE(AnyLabelHas(labels, "CUTLASS grouped"));
  EXPECT_FALSE(AnyLabelHas(labels, "cublasGemmGroupedBatchedEx"));
  EXPECT_EQ(std::count_if(labels.begin(), labels.end(),
                          [](const std::string& l) { return l.find("(cublasLt)") != std::string::npos; }),
            10);
  ExpectAllVariantsMatch(b.Build(), 23, "alignments 8/4/2");
}

// A group of at most four members CUTLASS cannot take runs one cuBLASLt
// call a member, bias and ReLU in the call's epilogue.
TEST_F(CudaTest, SmallGroupGemmBelowCutlassRunsMemberByMember) {
  test::GraphBuilder b;
  std::vector<std::string> outs;
  const int ks[] = {12, 20, 36};  // alignment 4
  for (int i = 0; i < 3; ++i) {
    outs.push_back(b.Fc(fmt::format("fc{}", i), b.Input(fmt::format("x{}", i), {77, ks[i]}), 24 + 8 * i,
                        {.type = OpType::kGemmRcrBiasRelu}));
  }
  b.Outputs(outs);
  Graph fused = b.Build();
  FuseGroupOps(fused);
  ASSERT_EQ(fused.NumLiveOps(), 1);
  const std::vector<std::string> labels = LaunchLabels(fused);
  EXPECT_EQ(labels.size(), 3u);
  for (const std::string& l : labels) EXPECT_NE(l.find("(cublasLt)"), std::string::npos) << l;
  ExpectAllVariantsMatch(b.Build(), 29, "three members of alignment 4");
}

// A GEMM of one output column runs the GEMV kernel, its epilogue included;
// in float32 with a sigmoid (an activation cuBLASLt's epilogue lacks) too
// by default (CudaOptions::gemv_activations), one launch of the grouped
// float32 kernel without it.
TEST_F(CudaTest, OneColumnGemmRunsTheGemvKernel) {
  for (const char* dt : kDtypes) {
    for (OpType type : kGemmTypes) {
      test::GraphBuilder b;
      b.Outputs({b.Fc("fc", b.Input("x", {300, 429}, ParseDt(dt)), 1, {.type = type})});
      const Graph g = b.Build();
      const std::vector<std::string> labels = LaunchLabels(g);
      if (ParseDt(dt) == DType::kFloat32 && type == OpType::kGemmRcrBiasSigmoid) {
        // (the GEMV kernel, the sigmoid in it)
        ASSERT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
        EXPECT_NE(labels[0].find("GEMV kernel (N = 1, sigmoid in it)"), std::string::npos) << labels[0];
        const std::vector<std::string> tiles = LaunchLabels(g, {.gemv_activations = false});
        EXPECT_EQ(tiles.size(), 1u) << fmt::format("{}", fmt::join(tiles, "; "));
        EXPECT_TRUE(AnyLabelHas(tiles, "grouped float32 GEMM")) << fmt::format("{}", fmt::join(tiles, "; "));
        ExpectGpuMatchesCpu(g, 32, "N = 1 sigmoid on the grouped float32 kernel", {.gemv_activations = false});
      } else {
        EXPECT_TRUE(AnyLabelHas(labels, "GEMV kernel")) << dt;
      }
      ExpectGpuMatchesCpu(g, 32, std::string("N = 1 ") + std::string(OpTypeName(type)) + " " + dt);
    }
  }
}

// The GEMV kernel gives a row the lanes its depth needs (kernels.h,
// GemvShape): depths of 1 to 429, in packs of four where k allows (4, 32,
// 132) and element by element where not (1, 3, 429); rows that leave a
// warp's last rows idle (37); four members of four depths (one M: the
// pass groups no others) in one launch, each with its own lanes.
TEST_F(CudaTest, GemvRowsTakeTheLanesTheirDepthNeeds) {
  for (const char* dt : kDtypes) {
    for (int64_t k : {1, 3, 4, 32, 132, 429}) {
      test::GraphBuilder b;
      b.Outputs({b.Fc("fc", b.Input("x", {37, k}, ParseDt(dt)), 1, {.type = OpType::kGemmRcrBias})});
      const Graph g = b.Build();
      EXPECT_TRUE(AnyLabelHas(LaunchLabels(g), "GEMV kernel")) << dt << " k " << k;
      ExpectGpuMatchesCpu(g, 34, fmt::format("GEMV {} k {}", dt, k));
    }
  }
  test::GraphBuilder b;
  std::vector<std::string> outs;
  for (int64_t k : {3, 32, 96, 429}) {
    outs.push_back(b.Fc(fmt::format("fc{}", k), b.Input(fmt::format("x{}", k), {37, k}, DType::kFloat32),
                        1, {.type = OpType::kGemmRcrBiasRelu}));
  }
  b.Outputs(outs);
  Graph fused = b.Build();
  FuseGroupOps(fused, {.rules = RuleSet::kHfuse});
  ASSERT_EQ(fused.NumLiveOps(), 1);
  const std::vector<std::string> labels = LaunchLabels(fused);
  ASSERT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
  EXPECT_NE(labels[0].find("GEMV kernel (N = 1, 4 members"), std::string::npos) << labels[0];
  ExpectGpuMatchesCpu(fused, 35, "four GEMVs of four depths");
}

// CudaOptions::single_sgemm: a single float32 GEMM (DIN's final MLP's
// shapes, 2048 x 256 x 192 with its bias and ReLU, and one of K 96 below
// the tensor tiles' depth) runs on the grouped float32 kernel as a group
// of one, its values the CPU's; by default, cuBLASLt.
TEST_F(CudaTest, SingleFloat32GemmOnTheGroupedKernel) {
  for (int64_t k : {192, 96}) {
    test::GraphBuilder b;
    b.Outputs({b.Fc("fc", b.Input("x", {2048, k}, DType::kFloat32), 256, {.type = OpType::kGemmRcrBiasRelu})});
    const Graph g = b.Build();
    EXPECT_TRUE(AnyLabelHas(LaunchLabels(g), "cublasLt")) << k;
    const std::vector<std::string> labels = LaunchLabels(g, {.single_sgemm = true});
    ASSERT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
    EXPECT_NE(labels[0].find("grouped float32 GEMM, 1 members"), std::string::npos) << labels[0];
    ExpectGpuMatchesCpu(g, 36, fmt::format("single float32 GEMM of K {} on the grouped kernel", k), {.single_sgemm = true});
  }
}

// The float32 group rule (gemm_launches.cc): at most four members, all
// GEMVs or one of 2^25 multiply-adds or more, run a call each: two
// 512 x 256 x 429 towers on cuBLASLt; two GEMVs are one launch of the GEMV
// kernel (a grid row a member, their ReLU in it).
TEST_F(CudaTest, Float32GroupRuleRunsFewGemvsOrLargeMembersACallEach) {
  struct Case {
    int64_t rows, k, n;
    const char* label;
  };
  for (const Case& c : {Case{300, 416, 1, "GEMV kernel (N = 1, 2 members, relu in it)"}, Case{512, 429, 256, "(cublasLt)"}}) {
    test::GraphBuilder b;
    b.Outputs({b.Fc("fc0", b.Input("x0", {c.rows, c.k}, DType::kFloat32), c.n, {.type = OpType::kGemmRcrBiasRelu}),
               b.Fc("fc1", b.Input("x1", {c.rows, c.k - 3}, DType::kFloat32), c.n,
                    {.type = OpType::kGemmRcrBiasRelu})});
    Graph fused = b.Build();
    FuseGroupOps(fused, {.rules = RuleSet::kHfuse});
    ASSERT_EQ(fused.NumLiveOps(), 1);
    const std::vector<std::string> labels = LaunchLabels(fused);
    ASSERT_EQ(labels.size(), c.n == 1 ? 1u : 2u) << fmt::format("{}", fmt::join(labels, "; "));
    for (const std::string& l : labels) EXPECT_NE(l.find(c.label), std::string::npos) << l;
    ExpectGpuMatchesCpu(fused, 33, c.label);
  }
}

// A single float32 GEMM in 3xTF32 (forced: CudaOptions::tf32x3 = 1; the
// rule, gemm_plan.h's Tf32x3Pays, takes larger ones) is one TF32 GEMM of
// three times its depth over its operands split in TF32 parts: float32's
// error (1e-5 against the CPU, where one TF32 product would miss by
// 1e-3), K off the parts' width of 4 (1030), bias and ReLU in cuBLASLt's
// epilogue, GELU after it; W's parts follow its value when it is fed
// again (SetFeeds) or written in place (ParamWritten); off, one float32
// cuBLASLt call.
TEST_F(CudaTest, LargeFloat32GemmRunsIn3xTf32) {
  for (OpType type : {OpType::kGemmRcrBiasRelu, OpType::kGemmRcr}) {
    test::GraphBuilder b;
    const std::string y = b.Fc("fc", b.Input("x", {600, 1030}, DType::kFloat32), 520, {.type = type});
    b.Outputs({type == OpType::kGemmRcr ? b.Elementwise("gelu", "gelu", {y}) : y});
    const Graph g = b.Build();
    const std::string what(OpTypeName(type));
    const std::vector<std::string> labels = LaunchLabels(g, {.tf32x3 = 1});
    EXPECT_TRUE(AnyLabelHas(labels, "3xTF32 split kernel, A's TF32 parts, 600 x 1030")) << fmt::format("{}", fmt::join(labels, "; "));
    EXPECT_TRUE(AnyLabelHas(labels, "cublasLt 3xTF32 on the tensor cores, 600 x 520 x 1030"));
    const std::vector<std::string> off = LaunchLabels(g, {.tf32x3 = 0});
    EXPECT_FALSE(AnyLabelHas(off, "3xTF32")) << fmt::format("{}", fmt::join(off, "; "));
    ExpectGpuMatchesCpu(g, 41, what + " 3xTF32", {.tf32x3 = 1});
    ExpectGpuMatchesCpu(g, 41, what + " float32 cuBLASLt", {.tf32x3 = 0});
    for (int x3 : {1, 0}) {  // the errors, for the record (bench/RESULTS.md)
      const DimValues dims = BindDims(g);
      const TensorMap feeds = RandomFeeds(g, dims, 41);
      CudaExecutor gpu(g, dims, {.tf32x3 = x3});
      gpu.SetFeeds(feeds);
      gpu.Run();
      for (const OutputComparison& c : CompareOutputs(RunOnCpu(g, feeds, dims), gpu.Outputs())) {
        fmt::print("{} {}: normalized error against the CPU {:.3g}\n", what, x3 ? "3xTF32" : "float32", c.normalized);
      }
    }

    // New weights, fed again and written in place.
    const DimValues dims = BindDims(g);
    CudaExecutor gpu(g, dims, {.tf32x3 = 1});
    gpu.SetFeeds(RandomFeeds(g, dims, 1));
    gpu.RunGraph();
    const TensorMap feeds2 = RandomFeeds(g, dims, 2);
    gpu.SetFeeds(feeds2);
    gpu.Poison();
    gpu.RunGraph();
    for (const OutputComparison& c : CompareOutputs(RunOnCpu(g, feeds2, dims), gpu.Outputs())) {
      EXPECT_LE(c.normalized, 1e-5) << what << " after SetFeeds " << c.problem;
    }
    TensorMap feeds3 = feeds2;
    const TensorMap other = RandomFeeds(g, dims, 3);
    feeds3.at("w_fc") = other.at("w_fc");
    WriteParamInPlace(g, gpu, "w_fc", feeds3.at("w_fc"));
    gpu.Poison();
    gpu.RunGraph();
    for (const OutputComparison& c : CompareOutputs(RunOnCpu(g, feeds3, dims), gpu.Outputs())) {
      EXPECT_LE(c.normalized, 1e-5) << what << " after ParamWritten " << c.problem;
    }
  }
}

// A float32 group (no CUTLASS kernel here takes float32) runs as one launch
// of the grouped float32 kernel (grouped_sgemm.h), of any size: members
// with M, N and K off its 64 x 64 tile and its depth of 16 (M 70, N 1 to
// 130, K 1 to 429; N 1, 5 and 16 on the narrow path, a warp a row), every
// epilogue, 2 to 500 members; forced one cuBLASLt call a member, it gives
// the same results.
TEST_F(CudaTest, Float32GroupRunsTheGroupedKernel) {
  const int ks[] = {429, 1, 16, 33, 64}, ns[] = {32, 1, 5, 130, 16};
  for (OpType type : kGemmTypes) {
    for (int members : {2, 8, 500}) {
      test::GraphBuilder b;
      std::vector<std::string> outs;
      for (int i = 0; i < members; ++i) {
        outs.push_back(b.Fc(fmt::format("fc{}", i),
                            b.Input(fmt::format("x{}", i), {members == 500 ? 9 : 70, ks[i % 5]}, DType::kFloat32),
                            ns[(i + members) % 5], {.type = type}));
      }
      b.Outputs(outs);
      Graph fused = b.Build();
      FuseGroupOps(fused, {.rules = RuleSet::kHfuse});
      ASSERT_EQ(fused.NumLiveOps(), 1);
      const std::vector<std::string> labels = LaunchLabels(fused);
      EXPECT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
      EXPECT_TRUE(AnyLabelHas(labels, "grouped float32 GEMM"));
      const std::string what = fmt::format("{} float32 {}", members, OpTypeName(type));
      ExpectGpuMatchesCpu(fused, 31, what);
      if (members == 8) {
        const std::vector<std::string> each = LaunchLabels(fused, {.gemm_kernel = GemmKernelChoice::kPerMember});
        EXPECT_GE(each.size(), 8u);
        ExpectGpuMatchesCpu(fused, 31, what + ", a cuBLASLt call a member", {.gemm_kernel = GemmKernelChoice::kPerMember});
      }
    }
  }
}

// Shapes for the grouped float32 kernel's own tests: each config's edge
// (m, n off every tile; k off the depths of 8 and 16), GEMVs, long K for
// split-K.
struct SgemmCase {
  int64_t m, n, k;
  bool bias;
  int act;
};
const SgemmCase kSgemmCases[] = {{70, 130, 429, true, 0}, {9, 5, 33, false, -1},  {130, 32, 64, true, 1},
                                 {257, 16, 16, true, 2},  {70, 1, 429, true, -1}, {300, 64, 256, false, 3},
                                 {129, 17, 128, true, 4}, {64, 128, 1, true, 0}};

// A distinct, 16-byte aligned address for host-only tiling tests (never read).
const float* FakeAddress(size_t i) { return reinterpret_cast<const float*>(uintptr_t{4096} * (i + 1)); }

// The rule (grouped_sgemm.h): a group of short products at most 16 wide
// (FiBiNet's) runs the tiled kernel's 256 x 16 tiles.
TEST(GroupedSgemmTiles, ShortNarrowGroupsTakeTheTiledKernel) {
  std::vector<cuda::SgemmMember> members(325, {nullptr, nullptr, nullptr, nullptr, 2048, 16, 16, 16, 16, -1});
  for (size_t i = 0; i < members.size(); ++i) members[i].a = FakeAddress(i);  // each its own A, as FiBiNet's
  const cuda::SgemmTiling tiling = cuda::SgemmTiles(members);
  EXPECT_EQ(tiling.kernel, cuda::SgemmKernel::kTiled);
  EXPECT_EQ(tiling.tiles.size(), 325u * 8);
  for (const cuda::SgemmTile& t : tiling.tiles) EXPECT_EQ(t.config, static_cast<int32_t>(cuda::SgemmConfig::k256x16));
  members.push_back({nullptr, nullptr, nullptr, nullptr, 2048, 32, 429, 429, 32, -1});
  EXPECT_EQ(cuda::SgemmTiles(members).kernel, cuda::SgemmKernel::kLegacy);
}

// DCNv2's cross layer's four experts of 32 (tanh) and four one-column
// gates, all of K 429 reading one A (FakeAddress(0)), at m rows.
std::vector<cuda::SgemmMember> ExpertsAndGates(int64_t m) {
  std::vector<cuda::SgemmMember> g;
  for (int e = 0; e < 4; ++e) {
    g.push_back({FakeAddress(0), FakeAddress(10 + e), nullptr, nullptr, m, 32, 429, 429, 32, 2});
    g.push_back({FakeAddress(0), FakeAddress(20 + e), nullptr, nullptr, m, 1, 429, 429, 1, -1});
  }
  return g;
}

// The rule for deep members (SgemmOptions::staged, off by default): a
// group whose members are all wider than 16 with K of kSgemmStagedMinK or
// more, on no more 64 x 64 tiles than the SMs, runs the sliced kernel,
// every tile staged.
// DCNv2's experts and gates at batch 2048 merge into 96 such tiles; at
// 512 they stay apart, the gates narrow (the kernel before); its first
// layer, 256 wide beside them, is 224 tiles (the kernel before). Off (the
// default), or with a wide member of short K, the kernel before.
TEST(GroupedSgemmTiles, DeepGroupsOfFewTilesTakeTheSlicedKernel) {
  const float* x = FakeAddress(0);
  const auto staged = static_cast<int32_t>(cuda::SgemmConfig::kStaged64x64);

  cuda::SgemmTiling t = cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132, .staged = true});
  EXPECT_EQ(t.kernel, cuda::SgemmKernel::kSliced);
  EXPECT_EQ(t.tiles.size(), 96u);
  for (const cuda::SgemmTile& tile : t.tiles) EXPECT_EQ(tile.config, staged);
  EXPECT_EQ(t.workspace_floats, 0);
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132}).kernel, cuda::SgemmKernel::kLegacy);  // off
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132, .staged = false}).kernel,
            cuda::SgemmKernel::kLegacy);
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 95, .staged = true}).kernel, cuda::SgemmKernel::kLegacy);
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(512), {.sms = 132, .staged = true}).kernel, cuda::SgemmKernel::kLegacy);

  std::vector<cuda::SgemmMember> first = ExpertsAndGates(2048);
  first.push_back({x, FakeAddress(30), nullptr, nullptr, 2048, 256, 429, 429, 256, 0});
  EXPECT_EQ(cuda::SgemmTiles(first, {.sms = 132, .staged = true}).kernel, cuda::SgemmKernel::kLegacy);

  // A lone deep member of 128 tiles is sliced; a wide member of short K beside it is not deep.
  std::vector<cuda::SgemmMember> deep = {
      {FakeAddress(50), FakeAddress(51), nullptr, nullptr, 2048, 256, 429, 429, 256, 0}};
  EXPECT_EQ(cuda::SgemmTiles(deep, {.sms = 1000, .staged = true}).kernel, cuda::SgemmKernel::kSliced);
  deep.push_back({FakeAddress(40), FakeAddress(41), nullptr, nullptr, 64, 429, 32, 32, 429, -1});
  EXPECT_EQ(cuda::SgemmTiles(deep, {.sms = 1000, .staged = true}).kernel, cuda::SgemmKernel::kLegacy);
}

// The tensor rule (SgemmOptions::tensor): a group of deep members, and
// narrow ones of long K beside them (narrow tiles), runs the tensor kernel;
// with staged too, where the sliced rule holds, two slices a tile.
TEST(GroupedSgemmTiles, DeepGroupsTakeTheTensorKernel) {
  const float* x = FakeAddress(0);
  const auto tensor = static_cast<int32_t>(cuda::SgemmConfig::kTensor64x64);
  const auto narrow = static_cast<int32_t>(cuda::SgemmConfig::kNarrow);

  // Merged at 2048: one member of 132 columns, 96 tiles.
  cuda::SgemmTiling t = cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132, .tensor = true});
  EXPECT_EQ(t.kernel, cuda::SgemmKernel::kTensor);
  EXPECT_EQ(t.tiles.size(), 96u);
  for (const cuda::SgemmTile& tile : t.tiles) EXPECT_EQ(tile.config, tensor);
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132, .staged = true, .tensor = true}).kernel,
            cuda::SgemmKernel::kTensorSliced);
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132}).kernel, cuda::SgemmKernel::kLegacy);  // off

  // Apart at 512: the experts' tiles on the tensor cores, the gates' narrow
  // (no split-K here: below).
  t = cuda::SgemmTiles(ExpertsAndGates(512), {.sms = 132, .tensor = true, .tensor_split = 1});
  EXPECT_EQ(t.kernel, cuda::SgemmKernel::kTensor);
  int tensor_tiles = 0, narrow_tiles = 0;
  for (const cuda::SgemmTile& tile : t.tiles) {
    const int64_t n = t.members[static_cast<size_t>(tile.member)].n;
    EXPECT_EQ(tile.config, n == 1 ? narrow : tensor);
    (tile.config == tensor ? tensor_tiles : narrow_tiles)++;
  }
  EXPECT_EQ(tensor_tiles, 4 * 8);
  EXPECT_EQ(narrow_tiles, 4 * 512 / 8);
  // The rule's split-K (tensor_split 0): 32 tensor tiles on 132 SMs take K
  // in kSgemmTensorMaxSplit ranges; the 96 merged at 2048, or 32 on 40 SMs,
  // in one; forced, 3 where the tiles are no more than the SMs.
  const auto ranges = [](const cuda::SgemmTiling& tiling) {
    std::set<int32_t> r;
    for (const cuda::SgemmTile& tile : tiling.tiles) {
      if (tile.config == static_cast<int32_t>(cuda::SgemmConfig::kTensor64x64)) r.insert(tile.splits);
    }
    return r;
  };
  EXPECT_EQ(ranges(cuda::SgemmTiles(ExpertsAndGates(512), {.sms = 132, .tensor = true})),
            std::set<int32_t>{cuda::kSgemmTensorMaxSplit});
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(512), {.sms = 132, .tensor = true}).tiles.size(),
            size_t{4 * 8 * cuda::kSgemmTensorMaxSplit + 4 * 512 / 8});
  EXPECT_EQ(ranges(cuda::SgemmTiles(ExpertsAndGates(512), {.sms = 40, .tensor = true})), std::set<int32_t>{1});
  EXPECT_EQ(ranges(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132, .tensor = true})), std::set<int32_t>{1});
  EXPECT_EQ(ranges(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 132, .tensor = true, .tensor_split = 3})),
            std::set<int32_t>{3});
  EXPECT_EQ(ranges(cuda::SgemmTiles(ExpertsAndGates(2048), {.sms = 64, .tensor = true, .tensor_split = 3})),
            std::set<int32_t>{1});
  EXPECT_EQ(cuda::SgemmTiles(ExpertsAndGates(512), {.sms = 132, .staged = true, .tensor = true}).kernel,
            cuda::SgemmKernel::kTensor);  // the gates are not deep: one slice

  // The first layer beside them: 224 tiles, more than the SMs: one slice.
  std::vector<cuda::SgemmMember> first = ExpertsAndGates(2048);
  first.push_back({x, FakeAddress(30), nullptr, nullptr, 2048, 256, 429, 429, 256, 0});
  EXPECT_EQ(cuda::SgemmTiles(first, {.sms = 132, .staged = true, .tensor = true}).kernel,
            cuda::SgemmKernel::kTensor);
  // A wide member of short K, or gates alone, are not for the tensor cores.
  first.push_back({FakeAddress(40), FakeAddress(41), nullptr, nullptr, 64, 429, 32, 32, 429, -1});
  EXPECT_EQ(cuda::SgemmTiles(first, {.sms = 132, .tensor = true}).kernel, cuda::SgemmKernel::kLegacy);
  std::vector<cuda::SgemmMember> gates(ExpertsAndGates(512));
  std::erase_if(gates, [](const cuda::SgemmMember& m) { return m.n != 1; });
  EXPECT_EQ(cuda::SgemmTiles(gates, {.sms = 132, .tensor = true}).kernel, cuda::SgemmKernel::kLegacy);

  // DCNv2's DNN layer of K 256 beside the experts' middle projections (K
  // 32): the CUDA cores, unless short members may join (tensor_short);
  // never with no deep member, nor with a member narrower than a tile of K 32.
  std::vector<cuda::SgemmMember> second = {{FakeAddress(60), FakeAddress(61), nullptr, nullptr, 2048, 128, 256, 256, 128, 0}};
  for (int e = 0; e < 4; ++e) {
    second.push_back({FakeAddress(62 + e), FakeAddress(70 + e), nullptr, nullptr, 2048, 32, 32, 32, 32, 2});
  }
  EXPECT_EQ(cuda::SgemmTiles(second, {.sms = 132, .tensor = true}).kernel, cuda::SgemmKernel::kLegacy);
  t = cuda::SgemmTiles(second, {.sms = 132, .tensor = true, .tensor_short = true});
  EXPECT_EQ(t.kernel, cuda::SgemmKernel::kTensor);
  for (const cuda::SgemmTile& tile : t.tiles) EXPECT_EQ(tile.config, tensor);
  EXPECT_EQ(cuda::SgemmTiles(std::vector(second.begin() + 1, second.end()), {.sms = 132, .tensor = true, .tensor_short = true}).kernel,
            cuda::SgemmKernel::kLegacy);
  second.push_back({FakeAddress(80), FakeAddress(81), nullptr, nullptr, 2048, 8, 32, 32, 8, -1});
  EXPECT_EQ(cuda::SgemmTiles(second, {.sms = 132, .tensor = true, .tensor_short = true}).kernel,
            cuda::SgemmKernel::kLegacy);
}

// W's 3xTF32 parts (SgemmMember::w3): a tile loads them (kSgemmPartsW)
// only where every row of W it reads has them; a merged member's rows are
// its members', so one member without parts leaves the merged tiles
// splitting W themselves. The tiles are the same either way.
TEST(GroupedSgemmTiles, TilesLoadWsPartsWhereEveryRowHasThem) {
  std::vector<cuda::SgemmMember> g = ExpertsAndGates(2048);
  const cuda::SgemmTiling plain = cuda::SgemmTiles(g, {.sms = 132, .tensor = true});
  for (const cuda::SgemmTile& tile : plain.tiles) EXPECT_EQ(tile.flags & cuda::kSgemmPartsW, 0);
  for (size_t i = 0; i < g.size(); ++i) g[i].w3 = FakeAddress(200 + i);
  const cuda::SgemmTiling parts = cuda::SgemmTiles(g, {.sms = 132, .tensor = true});
  EXPECT_FALSE(plain.parts_w);
  EXPECT_TRUE(parts.parts_w);  // (LaunchGroupedSgemm's larger shared memory)
  ASSERT_EQ(parts.tiles.size(), plain.tiles.size());
  for (size_t i = 0; i < parts.tiles.size(); ++i) {
    EXPECT_EQ(parts.tiles[i].flags, plain.tiles[i].flags | cuda::kSgemmPartsW);
    EXPECT_EQ(parts.tiles[i].member, plain.tiles[i].member);
  }
  EXPECT_EQ(parts.members.back().count, 8);
  EXPECT_EQ(parts.members.back().w3, nullptr);  // the merged member's rows are its members'
  g[5].w3 = nullptr;  // a gate's W computed: no parts
  for (const cuda::SgemmTile& tile : cuda::SgemmTiles(g, {.sms = 132, .tensor = true}).tiles) {
    EXPECT_EQ(tile.flags & cuda::kSgemmPartsW, 0);
  }
  // Apart at 512: each expert's tiles by its own W.
  std::vector<cuda::SgemmMember> apart = ExpertsAndGates(512);
  for (size_t i = 0; i < apart.size(); i += 4) apart[i].w3 = FakeAddress(300 + i);  // experts 0 and 2
  const cuda::SgemmTiling t = cuda::SgemmTiles(apart, {.sms = 132, .tensor = true});
  for (const cuda::SgemmTile& tile : t.tiles) {
    const cuda::SgemmMember& m = t.members[static_cast<size_t>(tile.member)];
    EXPECT_EQ((tile.flags & cuda::kSgemmPartsW) != 0, m.w3 != nullptr);
  }
}

// SgemmTiles alone (no GPU): for every config and split, each output
// element of each member is in exactly one output tile, and that tile's
// ranges of K cover 0 .. k once, in order; split-K tiles have workspace.
TEST(GroupedSgemmTiles, CoverEveryOutputAndKOnce) {
  std::vector<cuda::SgemmMember> given;
  for (size_t i = 0; i < std::size(kSgemmCases); ++i) {
    const SgemmCase& c = kSgemmCases[i];
    given.push_back({FakeAddress(i), FakeAddress(100 + i), nullptr, nullptr, c.m, c.n, c.k, c.k, c.n, -1});
  }
  for (int config = -1; config < cuda::kSgemmConfigs; ++config) {
    for (int split : {0, 1, 3, -3}) {  // -3: the tensor tiles' own split-K in 3 (SgemmOptions::tensor_split)
      const cuda::SgemmTiling tiling =
          cuda::SgemmTiles(given, {.config = config, .split = std::max(split, 0), .tensor_split = std::max(-split, 0)});
      const std::vector<cuda::SgemmMember>& members = tiling.members;
      const std::string what = fmt::format("config {} split {}", config, split);
      if (split < 0) {
        EXPECT_EQ(tiling.counters > 0, config == static_cast<int>(cuda::SgemmConfig::kTensor64x64)) << what;
      }
      ASSERT_EQ(members.size(), given.size()) << what << ": each its own A, none merged";
      // the rule: these members are not all short and narrow, so the kernel before the tiled one
      EXPECT_EQ(tiling.kernel == cuda::SgemmKernel::kLegacy, config <= 0) << what;
      std::map<std::tuple<int, int, int>, std::vector<std::pair<int, int>>> ranges;  // (member, m0, n0) -> k
      for (const cuda::SgemmTile& t : tiling.tiles) {
        ranges[{t.member, t.m0, t.n0}].push_back({t.k0, t.k1});
        if (t.splits > 1) {
          EXPECT_LT(t.counter, tiling.counters) << what;
          EXPECT_LT(t.partial, tiling.workspace_floats) << what;
        }
      }
      for (size_t i = 0; i < members.size(); ++i) {
        std::vector<int> covered(static_cast<size_t>(members[i].m * members[i].n), 0);
        for (auto& [key, ks] : ranges) {
          if (std::get<0>(key) != static_cast<int>(i)) continue;
          std::sort(ks.begin(), ks.end());
          int k = 0;
          for (auto [k0, k1] : ks) {
            EXPECT_EQ(k0, k) << what;
            k = k1;
          }
          EXPECT_EQ(k, members[i].k) << what;
          const cuda::SgemmTile* t = nullptr;
          for (const cuda::SgemmTile& x : tiling.tiles) {
            if (x.member == static_cast<int>(i) && x.m0 == std::get<1>(key) && x.n0 == std::get<2>(key)) t = &x;
          }
          const auto c = static_cast<cuda::SgemmConfig>(t->config);
          const int rows = c == cuda::SgemmConfig::kNarrow ? 8 : c == cuda::SgemmConfig::k256x16 ? 256
                           : c == cuda::SgemmConfig::k128x128 || c == cuda::SgemmConfig::k128x64 ||
                                   c == cuda::SgemmConfig::k128x32 ? 128 : 64;
          const int cols = c == cuda::SgemmConfig::kNarrow ? static_cast<int>(members[i].n)
                           : c == cuda::SgemmConfig::k128x128 ? 128 : c == cuda::SgemmConfig::k128x32 ? 32
                           : c == cuda::SgemmConfig::k256x16 ? 16 : 64;
          for (int64_t r = t->m0; r < std::min<int64_t>(members[i].m, t->m0 + rows); ++r) {
            for (int64_t col = t->n0; col < std::min<int64_t>(members[i].n, t->n0 + cols); ++col) {
              ++covered[static_cast<size_t>(r * members[i].n + col)];
            }
          }
        }
        EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int x) { return x == 1; })) << what << " member " << i;
      }
    }
  }
}

// Members that read one A merge (SgemmOptions::merge) in order of first
// appearance, kSgemmMaxMerged at a time, where together they are wider than
// kSgemmNarrow, take fewer 64-column tiles and have tiles for half the SMs
// (SgemmOptions::sms), each member's width not a multiple of 64: DCNv2's four experts of 32 and four gates of one column
// are one member 132 wide, their columns side by side in member order; a
// lone member, members narrower together, one 64 wide, or another A stay
// apart; off, nothing merges.
TEST(GroupedSgemmTiles, MembersReadingOneAMerge) {
  const float* x = FakeAddress(0);
  std::vector<cuda::SgemmMember> given;
  for (int e = 0; e < 4; ++e) {
    given.push_back({x, FakeAddress(10 + e), nullptr, nullptr, 2048, 32, 429, 429, 32, 2});  // an expert, tanh
    given.push_back({x, FakeAddress(20 + e), nullptr, nullptr, 2048, 1, 429, 429, 1, -1});   // a gate
  }
  given.push_back({x, FakeAddress(30), nullptr, nullptr, 2048, 8, 429, 430, 8, -1});      // another lda
  given.push_back({FakeAddress(1), FakeAddress(31), nullptr, nullptr, 2048, 4, 64, 64, 4, -1});
  given.push_back({FakeAddress(1), FakeAddress(32), nullptr, nullptr, 2048, 4, 64, 64, 4, -1});  // 8 wide together
  for (int i = 0; i < 20; ++i) given.push_back({FakeAddress(2), FakeAddress(40 + i), nullptr, nullptr, 64, 3, 16, 16, 3, 0});
  given.push_back({x, FakeAddress(60), nullptr, nullptr, 2048, 64, 429, 429, 64, 0});  // whole tiles: apart

  const cuda::SgemmTiling tiling = cuda::SgemmTiles(given);
  // The given members, then 8 copies and their merged member, then 16 and
  // one, then the last 4 (12 wide) stay apart.
  ASSERT_EQ(tiling.members.size(), given.size() + 9 + 17);
  const cuda::SgemmMember& merged = tiling.members[given.size() + 8];
  EXPECT_EQ(merged.count, 8);
  EXPECT_EQ(merged.first, static_cast<int32_t>(given.size()));
  EXPECT_EQ(merged.n, 4 * 33);
  EXPECT_EQ(merged.a, x);
  EXPECT_EQ(merged.k, 429);
  int32_t n0 = 0;
  for (int32_t s = 0; s < merged.count; ++s) {
    const cuda::SgemmMember& part = tiling.members[static_cast<size_t>(merged.first + s)];
    EXPECT_EQ(part.w, given[static_cast<size_t>(s)].w) << "member order";
    EXPECT_EQ(part.n0, n0);
    n0 += static_cast<int32_t>(part.n);
  }
  EXPECT_EQ(tiling.members.back().count, 16);
  EXPECT_EQ(tiling.members.back().n, 48);
  // Which table entries the tiles run: the merged two and the five apart.
  std::set<int32_t> ran;
  for (const cuda::SgemmTile& t : tiling.tiles) ran.insert(t.member);
  const int32_t apart[] = {8, 9, 10, 27, 28, 29, 30, 31};
  EXPECT_EQ(ran, (std::set<int32_t>{apart[0], apart[1], apart[2], apart[3], apart[4], apart[5], apart[6], apart[7],
                                    static_cast<int32_t>(given.size() + 8), static_cast<int32_t>(tiling.members.size() - 1)}));
  const cuda::SgemmTiling off = cuda::SgemmTiles(given, {.merge = false});
  EXPECT_EQ(off.members.size(), given.size());
  // On 132 SMs the experts and gates' 96 tiles merge (at least 66), the
  // short products' one tile does not; on 264, neither.
  const cuda::SgemmTiling h100 = cuda::SgemmTiles(given, {.sms = 132});
  ASSERT_EQ(h100.members.size(), given.size() + 9);
  EXPECT_EQ(h100.members.back().count, 8);
  EXPECT_EQ(cuda::SgemmTiles(given, {.sms = 264}).members.size(), given.size());
}

// The grouped float32 kernel directly (grouped_sgemm.h) against a float64
// reference, every config and the rule, split-K off, by the rule and forced
// to 3 ranges; A with a row stride and pointer that allow float4 loads and
// with ones that do not (lda = k + 1, one float off 16 bytes); outputs side
// by side in one buffer (ldy > n, columns at odd offsets); plain launches
// and a CUDA graph replayed twice (the split-K counters are reset), each
// run bitwise equal to the first. Then the same members all reading one A
// (M 130, K 64 or 57), which merge (SgemmOptions::merge: one member 201
// wide, each column with its own member's W, bias, activation and output).
// The tensor tile runs again with W's 3xTF32 parts made beforehand
// (SgemmMember::w3, kSgemmPartsW on every tensor tile): the same bits.
TEST_F(CudaTest, GroupedSgemmEveryConfigSplitAndAlignment) {
  uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
  };
  for (const auto& [aligned, shared] : {std::pair{true, false}, std::pair{false, false}, std::pair{true, true},
                                       std::pair{false, true}}) {
    const size_t count = std::size(kSgemmCases);
    std::vector<SgemmCase> cases(std::begin(kSgemmCases), std::end(kSgemmCases));
    if (shared) {
      for (SgemmCase& c : cases) c.m = 130, c.k = aligned ? 64 : 57;
    }
    int64_t ldy = 3;
    for (const SgemmCase& c : cases) ldy += c.n;
    std::vector<std::vector<float>> ha(count), hw(count), hb(count);
    std::vector<float*> da(count), dw(count), db(count);
    std::vector<cuda::SgemmMember> members;
    std::vector<int64_t> col(count), lda(count);
    float* dy = nullptr;
    int64_t max_m = 0;
    for (const SgemmCase& c : cases) max_m = std::max(max_m, c.m);
    ASSERT_EQ(cudaMalloc(&dy, static_cast<size_t>(max_m * ldy) * sizeof(float)), cudaSuccess);
    int64_t offset = 1;
    for (size_t i = 0; i < count; ++i) {
      const SgemmCase& c = cases[i];
      lda[i] = aligned ? (c.k + 3) / 4 * 4 + 4 : c.k + 1;
      const int64_t shift = aligned ? 0 : 1;  // floats before A's first element
      ha[i].resize(static_cast<size_t>(c.m * lda[i] + shift));
      for (float& x : ha[i]) x = uniform();
      hw[i].resize(static_cast<size_t>(c.n * c.k));
      for (float& x : hw[i]) x = uniform();
      hb[i].resize(static_cast<size_t>(c.n));
      for (float& x : hb[i]) x = uniform();
      auto upload = [](const std::vector<float>& v) {
        float* d = nullptr;
        EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(float)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        return d;
      };
      da[i] = shared && i > 0 ? da[0] : upload(ha[i]);
      dw[i] = upload(hw[i]);
      db[i] = upload(hb[i]);
      col[i] = offset;
      offset += c.n;
      members.push_back({da[i] + shift, dw[i], c.bias ? db[i] : nullptr, dy + col[i], c.m, c.n, c.k, lda[i], ldy, c.act});
    }
    // W's parts, as the CUDA executor makes them from a param; W itself
    // NaN for these members (the forced tensor config's tiles are all
    // tensor tiles), so a tile that read W rather than its parts fails.
    std::vector<cuda::SgemmMember> parted = members;
    std::vector<float*> dw3(count), dnan(count);
    for (size_t i = 0; i < count; ++i) {
      const cuda::Tf32Split split{.x = dw[i], .rows = cases[i].n, .cols = cases[i].k, .ld = cases[i].k,
                                  .k_along_rows = false, .w_order = true};
      ASSERT_EQ(cudaMalloc(&dw3[i], static_cast<size_t>(split.OutFloats()) * sizeof(float)), cudaSuccess);
      cuda::LaunchSplitTf32(split, dw3[i], nullptr);
      parted[i].w3 = dw3[i];
      ASSERT_EQ(cudaMalloc(&dnan[i], hw[i].size() * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMemset(dnan[i], 0xFF, hw[i].size() * sizeof(float)), cudaSuccess);
      parted[i].w = dnan[i];
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // The float64 reference.
    std::vector<std::vector<double>> want(count);
    for (size_t i = 0; i < count; ++i) {
      const SgemmCase& c = cases[i];
      const float* a = ha[shared ? 0 : i].data() + (aligned ? 0 : 1);
      for (int64_t r = 0; r < c.m; ++r) {
        for (int64_t j = 0; j < c.n; ++j) {
          double v = 0;
          for (int64_t k = 0; k < c.k; ++k) v += static_cast<double>(a[r * lda[i] + k]) * hw[i][j * c.k + k];
          if (c.bias) v += hb[i][j];
          if (c.act == 0) v = std::max(v, 0.0);
          if (c.act == 1) v = 1 / (1 + std::exp(-v));
          if (c.act == 2) v = std::tanh(v);
          if (c.act == 3) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
          if (c.act == 4) v = v / (1 + std::exp(-v));
          want[i].push_back(v);
        }
      }
    }
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    const size_t y_bytes = static_cast<size_t>(max_m * ldy) * sizeof(float);
    for (int config = -1; config < cuda::kSgemmConfigs; ++config) {
      const bool tensor_config = config == static_cast<int>(cuda::SgemmConfig::kTensor64x64);
      // The tensor tiles' first run without W's parts, by split (then the
      // tensor tiles' own split-K, SgemmOptions::tensor_split, in 3 ranges).
      std::array<std::vector<float>, 4> unparted;
      for (int variant = 0; variant < (tensor_config ? 8 : 3); ++variant) {
        const int split = std::array{0, 1, 3, 0}[variant % 4];
        const int tensor_split = variant % 4 == 3 ? 3 : 0;
        const bool parts = variant >= 4;
        if (!tensor_config && variant == 3) continue;
        const std::string what = fmt::format("{}{} A, config {}, split {}{}{}", aligned ? "aligned" : "unaligned",
                                             shared ? " shared" : "",
                                             config < 0 ? "rule" : cuda::SgemmConfigName(static_cast<cuda::SgemmConfig>(config)), split,
                                             tensor_split ? ", tensor split-K 3" : "", parts ? ", W's parts made" : "");
        const cuda::SgemmTiling tiling = cuda::SgemmTiles(parts ? parted : members,
                                                          {.config = config, .split = split, .tensor_split = tensor_split});
        EXPECT_EQ(tiling.parts_w, parts) << what;
        if (tensor_split > 0) {
          EXPECT_EQ(tiling.kernel, cuda::SgemmKernel::kTensor) << what;
          EXPECT_GT(tiling.counters, 0) << what;  // (every case but K 1 and 16 has more than one range)
        }
        for (const cuda::SgemmTile& t : tiling.tiles) {
          if (t.config == static_cast<int32_t>(cuda::SgemmConfig::kTensor64x64)) {
            EXPECT_EQ((t.flags & cuda::kSgemmPartsW) != 0, parts) << what;
          }
        }
        EXPECT_EQ(tiling.kernel == cuda::SgemmKernel::kSliced,
                  config == static_cast<int>(cuda::SgemmConfig::kStaged64x64)) << what;
        if (config == static_cast<int>(cuda::SgemmConfig::kTensor64x64)) {  // two slices a tile where split-K asks
          EXPECT_EQ(tiling.kernel, split > 1 ? cuda::SgemmKernel::kTensorSliced : cuda::SgemmKernel::kTensor) << what;
        }
        const bool merged = std::any_of(tiling.members.begin(), tiling.members.end(),
                                        [](const cuda::SgemmMember& m) { return m.count > 0; });
        EXPECT_EQ(merged, shared) << what;
        cuda::SgemmMember* d_members = nullptr;
        const size_t table_bytes = tiling.members.size() * sizeof(cuda::SgemmMember);
        ASSERT_EQ(cudaMalloc(&d_members, table_bytes), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(d_members, tiling.members.data(), table_bytes, cudaMemcpyHostToDevice), cudaSuccess);
        cuda::SgemmTile* d_tiles = nullptr;
        ASSERT_EQ(cudaMalloc(&d_tiles, tiling.tiles.size() * sizeof(cuda::SgemmTile)), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(d_tiles, tiling.tiles.data(), tiling.tiles.size() * sizeof(cuda::SgemmTile),
                             cudaMemcpyHostToDevice), cudaSuccess);
        void* ws = nullptr;
        if (tiling.WorkspaceBytes() > 0) {
          ASSERT_EQ(cudaMalloc(&ws, tiling.WorkspaceBytes()), cudaSuccess);
          ASSERT_EQ(cudaMemset(ws, 0, tiling.WorkspaceBytes()), cudaSuccess);
        }
        auto launch = [&] {
          cuda::LaunchGroupedSgemm(tiling.kernel, d_members, d_tiles, static_cast<int>(tiling.tiles.size()), 1.0f,
                                   ws, tiling.workspace_floats, tiling.parts_w, stream);
        };
        cudaGraph_t graph;
        ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        launch();
        ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
        cudaGraphExec_t exec;
        ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
        std::vector<float> first, got(static_cast<size_t>(max_m * ldy));
        for (int run = 0; run < 4; ++run) {  // plain twice, then the graph twice
          ASSERT_EQ(cudaMemsetAsync(dy, 0xFF, y_bytes, stream), cudaSuccess);  // NaN: unwritten fails
          if (run < 2) {
            launch();
          } else {
            ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
          }
          ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << what;
          ASSERT_EQ(cudaMemcpy(got.data(), dy, y_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
          if (run == 0) {
            first = got;
            if (tensor_config && !parts) unparted[variant % 4] = got;
            if (parts) {
              EXPECT_EQ(std::memcmp(unparted[variant % 4].data(), got.data(), y_bytes), 0)
                  << what << ": not the bits of W split in the tile";
            }
            for (size_t i = 0; i < count; ++i) {
              const SgemmCase& c = cases[i];
              double err = 0, scale = 0;
              for (int64_t r = 0; r < c.m; ++r) {
                for (int64_t j = 0; j < c.n; ++j) {
                  const double g = got[static_cast<size_t>(r * ldy + col[i] + j)], w = want[i][r * c.n + j];
                  err = std::isfinite(g) ? std::max(err, std::abs(g - w)) : INFINITY;
                  scale = std::max(scale, std::abs(w));
                }
              }
              EXPECT_LE(err / std::max(scale, 1e-30), 1e-5) << what << ", member " << i;
            }
          } else {
            EXPECT_EQ(std::memcmp(first.data(), got.data(), y_bytes), 0) << what << ", run " << run;
          }
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaFree(d_tiles);
        cudaFree(d_members);
        if (ws) cudaFree(ws);
      }
    }
    cudaStreamDestroy(stream);
    cudaFree(dy);
    for (size_t i = 0; i < count; ++i) {
      if (!shared || i == 0) cudaFree(da[i]);
      cudaFree(dw[i]), cudaFree(db[i]), cudaFree(dw3[i]), cudaFree(dnan[i]);
    }
  }
}

// GEMMs of every epilogue, some sharing their A (DCNv2's cross layer and
// DNN), as one group_gemm_rcr_mixed (hfuse rules).
Graph MixedEpilogueGroup(int members, int64_t m, DType dtype, const int* ks, const int* ns, int sizes) {
  test::GraphBuilder b;
  const std::string shared = b.Input("x", {m, ks[0]}, dtype);
  std::vector<std::string> outs;
  for (int i = 0; i < members; ++i) {
    const std::string a =
        i % 2 == 0 ? shared : b.Input(fmt::format("x{}", i), {m, ks[i % sizes]}, dtype);
    outs.push_back(b.Fc(fmt::format("fc{}", i), a, ns[(i + members) % sizes], {.type = kGemmTypes[i % 4]}));
  }
  b.Outputs(outs);
  Graph fused = b.Build();
  FuseGroupOps(fused, {.rules = RuleSet::kHfuse});
  return fused;
}

// A float32 mixed group is one launch of the grouped float32 kernel, each
// member with its own bias and activation, plain and in a CUDA graph; forced
// one cuBLASLt call a member (one plan per epilogue), the same results; and
// through the gpu pipeline's views.
TEST_F(CudaTest, MixedEpilogueFloat32GroupIsOneLaunch) {
  const int ks[] = {64, 1, 16, 33, 429}, ns[] = {32, 1, 5, 130, 70};
  for (int members : {4, 9, 200}) {
    const Graph fused = MixedEpilogueGroup(members, members == 200 ? 9 : 70, DType::kFloat32, ks, ns, 5);
    ASSERT_EQ(fused.NumLiveOps(), 1);
    ASSERT_EQ(fused.op(fused.LiveOps()[0]).type, OpType::kGroupGemmRcrMixed);
    const std::vector<std::string> labels = LaunchLabels(fused);
    EXPECT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
    EXPECT_TRUE(AnyLabelHas(labels, "grouped float32 GEMM"));
    EXPECT_TRUE(AnyLabelHas(labels, "an epilogue a member"));
    const std::string what = fmt::format("{} float32 mixed epilogues", members);
    ExpectGpuMatchesCpu(fused, 41, what);
    if (members == 9) {
      const CudaOptions each{.gemm_kernel = GemmKernelChoice::kPerMember};
      EXPECT_TRUE(AnyLabelHas(LaunchLabels(fused, each), "[epilogue 4 of 4")) << what;
      ExpectGpuMatchesCpu(fused, 41, what + ", a cuBLASLt call a member", each);
    }
  }
  test::GraphBuilder b;
  const std::string x = b.Input("x", {70, 64}, DType::kFloat32);
  std::vector<std::string> outs;
  for (int i = 0; i < 4; ++i) outs.push_back(b.Fc(fmt::format("fc{}", i), x, 24 + 8 * i, {.type = kGemmTypes[i]}));
  b.Outputs(outs);
  ExpectAllVariantsMatch(b.Build(), 43, "float32 mixed epilogues", {.rules = RuleSet::kHfuse});
}

// DCNv2's cross layer beside its DNN, as one float32 mixed group at batch
// 2048: four experts of 32 and four gates of one column read x (K 429),
// merged, and a DNN layer of K 256 and 48 columns of K 32 read others. On
// the tensor cores with the weights' TF32 parts made once
// (CudaOptions::sgemm_parts_w, the default), and with the tensor tiles'
// split-K and short members too: against the CPU, plain and in a CUDA
// graph; the parts give the bits of the tiles that split W themselves
// (sgemm_parts_w off); a weight written in place (ParamWritten) makes its
// parts again.
TEST_F(CudaTest, Float32TensorTilesLoadWeightPartsMadeOnce) {
  test::GraphBuilder b;
  const std::string x = b.Input("x", {2048, 429}, DType::kFloat32);
  std::vector<std::string> outs;
  for (int e = 0; e < 4; ++e) {
    outs.push_back(b.Fc(fmt::format("v{}", e), x, 32, {.type = kGemmTypes[e]}));
    outs.push_back(b.Fc(fmt::format("g{}", e), x, 1, {.type = kGemmTypes[(e + 1) % 4]}));  // (no two of one shape and epilogue)
  }
  outs.push_back(b.Fc("dnn", b.Input("h", {2048, 256}, DType::kFloat32), 128, {.type = OpType::kGemmRcrBiasRelu}));
  outs.push_back(b.Fc("c", b.Input("t", {2048, 32}, DType::kFloat32), 48, {.type = OpType::kGemmRcrBias}));
  b.Outputs(outs);
  Graph fused = b.Build();
  FuseGroupOps(fused, {.rules = RuleSet::kHfuse});
  ASSERT_EQ(fused.NumLiveOps(), 1);
  const CudaOptions parts{};  // (W's parts and short members: the default)
  const std::vector<std::string> labels = LaunchLabels(fused, parts);
  EXPECT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
  EXPECT_TRUE(AnyLabelHas(labels, "W's parts made once")) << fmt::format("{}", fmt::join(labels, "; "));
  EXPECT_TRUE(AnyLabelHas(labels, "(8 as one, reading one A)")) << fmt::format("{}", fmt::join(labels, "; "));
  // The K-32 member keeps the group off the tensor cores unless short members may join.
  EXPECT_FALSE(AnyLabelHas(LaunchLabels(fused, {.sgemm_tensor_short = false}), "tensor cores"));
  EXPECT_FALSE(AnyLabelHas(LaunchLabels(fused, {.sgemm_parts_w = false}), "W's parts"));
  const CudaOptions all{.sgemm_tensor_split = 2};
  const std::vector<std::string> all_labels = LaunchLabels(fused, all);
  EXPECT_TRUE(AnyLabelHas(all_labels, "on the tensor cores (3xTF32), W's parts made once")) << fmt::format("{}", fmt::join(all_labels, "; "));
  // 3xTF32 over K 429 against the CPU's float32: on the H100 (2026-12-07) the
  // sigmoid member's output was off by 1.04e-5 of its range of 1 (the sums
  // before it, of size ~10, by ~4e-5), the same with and without W's parts
  // and split-K; the members without a sigmoid stay under 1e-5 of theirs.
  const double tf32x3_sigmoid = 3e-5;
  ExpectGpuMatchesCpu(fused, 47, "DCNv2-like group, W's parts", parts, tf32x3_sigmoid);
  ExpectGpuMatchesCpu(fused, 47, "DCNv2-like group, W's parts, short members, split-K 2", all, tf32x3_sigmoid);
  ExpectGpuMatchesCpu(fused, 47, "DCNv2-like group, short members, W split in the tile", {.sgemm_parts_w = false},
                      tf32x3_sigmoid);

  const DimValues dims = BindDims(fused);
  const TensorMap feeds = RandomFeeds(fused, dims, 48);
  CudaExecutor split_in_tile(fused, dims, {.sgemm_parts_w = false});
  CudaExecutor with_parts(fused, dims, parts);
  split_in_tile.SetFeeds(feeds);
  with_parts.SetFeeds(feeds);
  split_in_tile.RunGraph();
  with_parts.RunGraph();
  const TensorMap a = split_in_tile.Outputs(), p = with_parts.Outputs();
  for (const auto& [name, t] : a) EXPECT_EQ(t.bytes, p.at(name).bytes) << name << ": not the bits of W split in the tile";

  TensorMap feeds2 = feeds;
  const TensorMap other = RandomFeeds(fused, dims, 49);
  feeds2.at("w_v2") = other.at("w_v2");
  WriteParamInPlace(fused, with_parts, "w_v2", feeds2.at("w_v2"));
  with_parts.Poison();
  with_parts.RunGraph();
  for (const OutputComparison& c : CompareOutputs(RunOnCpu(fused, feeds2, dims), with_parts.Outputs())) {
    EXPECT_TRUE(c.problem.empty()) << "after ParamWritten " << c.name << ": " << c.problem;
  }
}

// A float16 or bfloat16 mixed group: the CUTLASS grouped GEMM takes one
// epilogue a launch, so each epilogue's members run as a group of their own
// (one CUTLASS launch each), the labels saying so; with CUTLASS off, one
// cuBLAS grouped GEMM plus the epilogue kernel each.
TEST_F(CudaTest, MixedEpilogueHalfGroupRunsAPlanPerEpilogue) {
  const int ks[] = {200, 64, 8, 136, 1032}, ns[] = {136, 72, 8, 256, 1000};
  for (const char* dt : {"float16", "bfloat16"}) {
    const Graph fused = MixedEpilogueGroup(8, 300, ParseDt(dt), ks, ns, 5);
    ASSERT_EQ(fused.NumLiveOps(), 1);
    ASSERT_EQ(fused.op(fused.LiveOps()[0]).type, OpType::kGroupGemmRcrMixed);
    const std::string what = std::string("mixed epilogues ") + dt;
    const std::vector<std::string> labels = LaunchLabels(fused);
    EXPECT_TRUE(AnyLabelHas(labels, "[epilogue 1 of 4")) << what;
    EXPECT_TRUE(AnyLabelHas(labels, "[epilogue 4 of 4")) << what;
    EXPECT_TRUE(AnyLabelHas(labels, "CUTLASS grouped takes one epilogue a launch")) << what;
    EXPECT_TRUE(AnyLabelHas(labels, "CUTLASS grouped")) << what;
    ExpectGpuMatchesCpu(fused, 42, what);
    const CudaOptions cublas{.cutlass = false};
    ExpectGpuMatchesCpu(fused, 42, what + ", cuBLAS grouped", cublas);
  }
}

// The hfuse rules' LayerNorm groups: 80 LayerNorms of widths from 8 to 8192
// (odd, aligned, wider than the register path) as one group op, one launch.
TEST_F(CudaTest, UncappedLayerNormGroupOfMixedWidths) {
  for (const char* dt : kDtypes) {
    for (OpType type : {OpType::kLayerNorm, OpType::kLayerNormSigmoidMul}) {
      test::GraphBuilder b;
      std::vector<std::string> outs;
      const int ns[] = {8, 37, 64, 96, 160, 256, 320, 512, 1000, 1024, 2048, 4333, 8192};
      for (int i = 0; i < 80; ++i) {
        outs.push_back(b.LayerNorm(fmt::format("ln{:02}", i),
                                   b.Input(fmt::format("x{}", i), {67, ns[i % 13]}, ParseDt(dt)), {.type = type}));
      }
      b.Outputs(outs);
      FuseGroupOpsOptions hfuse_rules;
      hfuse_rules.rules = RuleSet::kHfuse;
      Graph fused = b.Build();
      const FuseGroupOpsResult r = FuseGroupOps(fused, hfuse_rules);
      ASSERT_EQ(r.groups.size(), 1u);
      EXPECT_EQ(r.groups[0].members.size(), 80u);
      const std::vector<std::string> labels = LaunchLabels(fused);
      EXPECT_EQ(labels.size(), 1u);
      ExpectAllVariantsMatch(b.Build(), 24, "uncapped " + std::string(OpTypeName(type)) + " " + dt, hfuse_rules);
    }
  }
}

TEST_F(CudaTest, TowersExampleWithHfuseRules) {
  const Graph g = ReadGraphJsonFile(std::string(HFUSE_SOURCE_DIR) + "/examples/towers_small.json");
  FuseGroupOpsOptions hfuse_rules;
  hfuse_rules.rules = RuleSet::kHfuse;
  ExpectAllVariantsMatch(g, 25, "towers_small, hfuse rules", hfuse_rules);
}

TEST_F(CudaTest, LayerNormGroupsOddAlignedAndLarge) {
  for (const char* dt : kDtypes) {
    for (OpType type : {OpType::kLayerNorm, OpType::kLayerNormSigmoidMul}) {
      test::GraphBuilder b;
      std::vector<std::string> outs;
      const int ns[] = {37, 64, 256, 1000, 4333, 8192};
      for (int i = 0; i < 6; ++i) {
        outs.push_back(b.LayerNorm(fmt::format("ln{}", i), b.Input(fmt::format("x{}", i), {19, ns[i]}, ParseDt(dt)),
                                   {.type = type}));
      }
      b.Outputs(outs);
      ExpectAllVariantsMatch(b.Build(), 5, std::string(OpTypeName(type)) + " " + dt);
    }
  }
}

TEST_F(CudaTest, LayerNormWithoutGammaOrBetaAndOverTwoDims) {
  test::GraphBuilder b;
  std::vector<std::string> outs;
  outs.push_back(b.LayerNorm("a", b.Input("xa", {4, 96}), {.gamma = test::kNoParam}));
  outs.push_back(b.LayerNorm("c", b.Input("xc", {4, 96}), {.beta = test::kNoParam}));
  outs.push_back(b.LayerNorm("d", b.Input("xd", {2, 3, 40}), {.normalized_rank = 2}));
  b.Outputs(outs);
  ExpectGpuMatchesCpu(b.Build(), 6, "layernorm variants");
}

// Group ops of a single member, as a graph file may hold them.
TEST_F(CudaTest, GroupOpsOfOneMember) {
  for (const char* dt : kDtypes) {
    test::GraphBuilder b;
    const std::string x = b.Input("x", {24, 40}, ParseDt(dt));
    const std::string w = b.Param("w", {16, 40}, ParseDt(dt));
    const std::string bias = b.Param("bias", {16}, ParseDt(dt));
    const std::string y = b.Declare("y", {24, 16}, ParseDt(dt));
    b.RawOp("gg", "group_gemm_rcr_bias_sigmoid", {x, w, bias}, {y}, "\"group_size\": 1");
    const std::string g = b.Param("g", {16}, ParseDt(dt));
    const std::string be = b.Param("be", {16}, ParseDt(dt));
    const std::string z = b.Declare("z", {24, 16}, ParseDt(dt));
    b.RawOp("gl", "group_layernorm", {y, g, be}, {z}, "\"normalized_shapes\": [[16]]");
    b.Outputs({z});
    ExpectGpuMatchesCpu(b.Build(), 12, std::string("one-member groups ") + dt);
  }
}

// One group_layernorm op of 1000 members: the GPU kernel has no 39 limit.
TEST_F(CudaTest, LayerNormGroupOfAThousandMembers) {
  test::GraphBuilder b;
  std::vector<std::string> xs, gammas, betas, ys;
  std::string shapes;
  for (int i = 0; i < 1000; ++i) {
    const int n = 32 + 8 * (i % 4);
    xs.push_back(b.Input(fmt::format("x{}", i), {8, n}));
    gammas.push_back(b.Param(fmt::format("g{}", i), {n}));
    betas.push_back(b.Param(fmt::format("b{}", i), {n}));
    ys.push_back(b.Declare(fmt::format("y{}", i), {8, n}));
    shapes += fmt::format("{}[{}]", i ? ", " : "", n);
  }
  std::vector<std::string> ins = xs;
  ins.insert(ins.end(), gammas.begin(), gammas.end());
  ins.insert(ins.end(), betas.begin(), betas.end());
  b.RawOp("group", "group_layernorm_sigmoid_mul", ins, ys, "\"normalized_shapes\": [" + shapes + "]");
  b.Outputs(ys);
  ExpectGpuMatchesCpu(b.Build(), 7, "group_layernorm_sigmoid_mul of 1000");
}

TEST_F(CudaTest, ElementwiseSplitConcatReshape) {
  for (const char* dt : kDtypes) {
    const std::string text = std::string(R"({"graph_format": 1, "tensors": [
      {"name": "x", "shape": [4, 6, 10], "dtype": "DT", "role": "input"},
      {"name": "v", "shape": [10], "dtype": "DT", "role": "param"},
      {"name": "a", "shape": [1, 6, 10], "dtype": "DT"}, {"name": "b", "shape": [3, 6, 10], "dtype": "DT"},
      {"name": "c", "shape": [4, 6, 10], "dtype": "DT"},
      {"name": "p", "shape": [4, 6, 3], "dtype": "DT"}, {"name": "q", "shape": [4, 6, 7], "dtype": "DT"},
      {"name": "d", "shape": [4, 6, 10], "dtype": "DT"},
      {"name": "e", "shape": [4, 6, 10], "dtype": "DT"}, {"name": "f", "shape": [4, 6, 10], "dtype": "DT"},
      {"name": "r", "shape": [24, 10], "dtype": "DT"}],
     "ops": [
      {"name": "s0", "op": "split", "inputs": ["x"], "outputs": ["a", "b"], "split_sizes": [1, 3], "dim": 0},
      {"name": "c0", "op": "concatenate", "inputs": ["b", "a"], "outputs": ["c"], "dim": 0},
      {"name": "s2", "op": "split", "inputs": ["c"], "outputs": ["p", "q"], "split_sizes": [3, 7], "dim": 2},
      {"name": "c2", "op": "concatenate", "inputs": ["q", "p"], "outputs": ["d"], "dim": -1},
      {"name": "g", "op": "elementwise", "inputs": ["d"], "outputs": ["e"], "func": "gelu"},
      {"name": "m", "op": "elementwise", "inputs": ["e", "v", "d"], "outputs": ["f"], "func": "mul"},
      {"name": "rs", "op": "reshape", "inputs": ["f"], "outputs": ["r"], "shape": [-1, 10]}],
     "outputs": ["r"]})");
    std::string t = text;
    for (size_t at; (at = t.find("DT")) != std::string::npos;) t.replace(at, 2, dt);
    ExpectGpuMatchesCpu(ParseGraphJson(t, "test"), 8, std::string("data movement ") + dt);
  }
}

// ---- fused regions: a gate's softmax -----------------------------------------

// A mixture's gate read broadcast by its experts' weighted sum (MMoE, PLE)
// and by their matrix-vector product (DCNv2, with a LogSoftmax): the gate
// joins that region (testing/gate_graphs.h, as in cuda_plan_test),
// which computes it once a row; one launch, the CPU's outputs.
TEST_F(CudaTest, AGateInItsReadersRegionIsOneLaunch) {
  const std::string stack = test::GateWeighsAStack(37, 4, 130), experts = test::GateTimesExperts(37, 8, 129);
  for (const std::string& text : {stack, experts}) {
    const Graph g = ParseGraphText(text, "gate");
    const CudaExecutor gpu(g, BindDims(g));
    EXPECT_EQ(gpu.stats().launches, 1) << text;
    ExpectGpuMatchesCpu(g, 9, text);
  }
}

// DCNv2's mixture whose experts are GEMMs (testing/gate_graphs.h,
// MixtureOfGemms): the region computes them, one launch, the CPU's
// outputs, plain and in a CUDA graph, as given and with the GEMMs grouped
// (one op of three members); rows and columns not multiples of the
// kernel's 64 x 32 tiles, K of one, of 40 (two steps of 32) and 64 (the
// most), one column of W, eight products (the most), a bias; in bfloat16
// and float16 too. With regions taking no GEMMs: the GEMMs' launches too,
// the same outputs.
TEST_F(CudaTest, ARegionComputesItsGemmsInOneLaunch) {
  struct Sizes {
    int64_t b, n, k;
    int e;
    bool bias;
  };
  for (const Sizes& z : {Sizes{100, 45, 40, 3, true}, Sizes{3, 5, 1, 2, false}, Sizes{130, 429, 32, 4, false},
                         Sizes{70, 33, 64, 8, true}, Sizes{64, 96, 64, 2, true}}) {
    const std::string text = test::MixtureOfGemms(z.b, z.n, z.k, z.e, z.bias);
    SCOPED_TRACE(text);
    const Graph g = ParseGraphText(text, "mixture of gemms");
    const std::vector<std::string> labels = LaunchLabels(g, {.region_gemms = 1});
    EXPECT_EQ(labels.size(), 1u);
    EXPECT_TRUE(AnyLabelHas(labels, fmt::format("computing {} GEMMs of {} x {}", z.e, z.b, z.n)));
    ExpectGpuMatchesCpu(g, 21, "mixture of gemms", {.region_gemms = 1});
    Graph fused = g;
    GpuPipeline pipeline(fused, FuseGroupOpsOptions{.rules = RuleSet::kHfuse});
    pipeline.Finish();
    EXPECT_EQ(LaunchLabels(fused, {.region_gemms = 1}).size(), 1u);
    ExpectGpuMatchesCpu(fused, 21, "mixture of grouped gemms", {.region_gemms = 1});
    EXPECT_EQ(LaunchLabels(g, {.region_gemms = 0}).size(), 1u + static_cast<size_t>(z.e));
    ExpectGpuMatchesCpu(g, 22, "mixture of gemms, the GEMMs apart", {.region_gemms = 0});
    // by the rule: in the region where its tiles are at least the SMs
    int device = 0, sms = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
    const bool many = (z.b + 63) / 64 * ((z.n + 31) / 32) >= sms;
    EXPECT_EQ(LaunchLabels(g).size(), many ? 1u : 1u + static_cast<size_t>(z.e));
  }
  // in bfloat16 and float16: read into float32, the products not rounded
  for (const char* dt : {"bfloat16", "float16"}) {
    std::string text = test::MixtureOfGemms(100, 45, 40, 3, true);
    for (size_t at; (at = text.find("float32")) != std::string::npos;) text.replace(at, 7, dt);
    const Graph g = ParseGraphText(text, dt);
    EXPECT_EQ(LaunchLabels(g, {.region_gemms = 1}).size(), 1u) << dt;
    ExpectGpuMatchesCpu(g, 23, dt, {.region_gemms = 1});
  }
}

// An attention chain (testing/attention_graphs.h) is one launch of the
// attention kernel, and gives the CPU's values: heads of 8 (the tabular
// transformers'), one key, heads of 33 and values of 64 (the widest the
// kernel holds), more queries than a block has threads.
TEST_F(CudaTest, AnAttentionChainIsOneLaunch) {
  for (const test::AttentionSizes& n : {test::AttentionSizes{37, 4, 39, 19, 8, 8}, test::AttentionSizes{5, 2, 7, 1, 8, 3},
                                        test::AttentionSizes{3, 2, 9, 20, 33, 64},
                                        test::AttentionSizes{2, 1, 300, 26, 8, 8},
                                        // more rows than a block's threads; K and V too long for shared memory
                                        test::AttentionSizes{1, 2, 700, 9, 4, 4}, test::AttentionSizes{2, 2, 5, 200, 64, 64}}) {
    const std::string text = test::AttentionChain(n);
    const Graph g = ParseGraphText(text, "attention");
    const CudaExecutor gpu(g, BindDims(g));
    EXPECT_EQ(gpu.stats().launches, 1) << text;
    ExpectGpuMatchesCpu(g, 9, text);
  }
}

// A feed-forward block (testing/ffn_graphs.h) with CudaOptions::ffn_chains
// 1 is one launch of the FFN kernel (fused FFN kernel, a row or two a
// thread) and gives the CPU's values, plain and in a CUDA graph: each
// width of x and y (8 to 64), TabTransformer's 32 -> 128 -> 32 with the
// erf GELU at 13 rows (fewer than a block) and at 70000 (two rows a thread
// where the SMs are at most 273), no first bias, tanh and sigmoid (the
// activation through float_funcs.def's switch), through SAINT's reshape
// views; gated (FTTransformer's GEGLU, 32 -> 84 -> 42 -> 32, either half
// first, each width of x and y); by the rule, one launch where it has
// kFfnMinRows rows or more (gated: kFfnGatedMinRows), else a GELU's launch
// kept apart from its GEMM, or gated the region of the GELU and the Mul,
// says it is below the rule; off, the GEMMs
// and the activation launch as before, the same values.
TEST_F(CudaTest, AFeedForwardBlockIsOneLaunch) {
  std::vector<test::FfnSizes> sizes = {{.m = 13},
                                       {.m = 70000},
                                       {.m = 39 * 40, .tokens = 39},
                                       {.m = 301, .in = 64, .hidden = 37, .out = 8, .act = "tanh", .bias1 = false},
                                       {.m = 500, .in = 16, .hidden = 200, .out = 16, .act = "sigmoid"},
                                       {.m = 13, .hidden = 42, .gated = 1},
                                       {.m = 79872, .hidden = 42, .gated = 1},
                                       {.m = 301, .in = 64, .hidden = 21, .out = 8, .act = "tanh", .bias1 = false,
                                        .gated = -1}};
  for (int in : cuda::kFfnWidths) {
    for (int out : cuda::kFfnWidths) {
      sizes.push_back({.m = 129, .in = in, .hidden = 24, .out = out});
      sizes.push_back({.m = 131, .in = in, .hidden = 12, .out = out, .gated = in == out ? -1 : 1});
    }
  }
  for (const test::FfnSizes& n : sizes) {
    const std::string text = test::FfnBlock(n);
    SCOPED_TRACE(text);
    const Graph g = ParseGraphText(text, "ffn");
    const std::vector<std::string> labels = LaunchLabels(g, {.ffn_chains = 1});
    EXPECT_EQ(labels.size(), 1u) << fmt::format("{}", fmt::join(labels, "; "));
    EXPECT_TRUE(AnyLabelHas(labels, fmt::format("fused FFN kernel, {} ops: up to down, {} rows of {} -> {}{} -> {}",
                                                n.gated != 0 ? 4 : 3, n.m, n.in, n.hidden,
                                                n.gated != 0 ? " gated" : "", n.out)));
    ExpectGpuMatchesCpu(g, 31, "ffn", {.ffn_chains = 1});
    const int64_t rule = n.gated != 0 ? cuda::kFfnGatedMinRows : cuda::kFfnMinRows;
    EXPECT_EQ(LaunchLabels(g).size() == 1u, n.m >= rule);  // by the rule
    // Below the rule, the launch of the activation (a GELU kept apart from
    // its GEMM, or gated, the region of the GELU and the Mul) says why (the
    // profile's reason).
    const CudaExecutor by_rule(g, BindDims(g));
    const std::string why = fmt::format("its FFN block, {} rows, is below the FFN kernel's rule of {} (ffn.h, {})", n.m,
                                        rule, n.gated != 0 ? "kFfnGatedMinRows" : "kFfnMinRows");
    const bool says = std::any_of(by_rule.stats().apart.begin(), by_rule.stats().apart.end(),
                                  [&](const std::string& l) { return l.find(why) != std::string::npos; });
    EXPECT_EQ(says, n.m < rule) << fmt::format("{}", fmt::join(by_rule.stats().apart, "; "));
    EXPECT_GT(LaunchLabels(g, {.ffn_chains = 0}).size(), 1u);
    ExpectGpuMatchesCpu(g, 31, "ffn apart", {.ffn_chains = 0});
  }
}

// Batched MatMuls in 3xTF32 (CudaOptions::tf32x3; SAINT's intersample
// attention): B read transposed through a Transpose view (q k^T), B one
// for every batch matrix (a rank-2 weight: split once), A and B both of
// K off the parts' width of 4 (322, 261), against the CPU at float32's
// tolerance; by the rule these products are too few (150M multiply-adds)
// and run in float32 on cuBLAS.
TEST_F(CudaTest, BatchedMatMulsRunIn3xTf32) {
  const std::string text = R"(input q: float32[2, 3, 300, 322]
input k: float32[2, 3, 261, 322]
input v: float32[2, 3, 261, 70]
param w: float32[322, 90]
tensor kt: float32[2, 3, 322, 261]
kt = opaque(k) {onnx = Transpose, perm = [0, 1, 3, 2]}  # kt
tensor s: float32[2, 3, 300, 261]
s = opaque(q, kt) {onnx = MatMul}  # scores
tensor y: float32[2, 3, 300, 70]
y = opaque(s, v) {onnx = MatMul}  # mix
tensor z: float32[2, 3, 300, 90]
z = opaque(q, w) {onnx = MatMul}  # project
output s, y, z
)";
  const Graph g = ParseGraphText(text, "batched matmuls");
  const std::vector<std::string> labels = LaunchLabels(g, {.tf32x3 = 1});
  const std::string all = fmt::format("{}", fmt::join(labels, "; "));
  EXPECT_TRUE(AnyLabelHas(labels, "cublasGemmStridedBatchedEx 3xTF32 on the tensor cores, 6 of 300 x 261 x 322")) << all;
  EXPECT_TRUE(AnyLabelHas(labels, "cublasGemmStridedBatchedEx 3xTF32 on the tensor cores, 6 of 300 x 70 x 261")) << all;
  EXPECT_TRUE(AnyLabelHas(labels, "3xTF32 split kernel, B's TF32 parts, 1 of 322 x 90")) << all;
  ExpectGpuMatchesCpu(g, 43, "3xTF32 batched", {.tf32x3 = 1});
  EXPECT_FALSE(AnyLabelHas(LaunchLabels(g), "3xTF32")) << "the rule";
}

// An op that falls back to the host (a BatchNormalization whose statistics
// are computed at run time) reading a view its rows cannot describe (a
// transpose, which BatchNormalization's kernel would read in place): the
// view is copied row-major for the host first.
TEST_F(CudaTest, AHostOpReadsAViewAsItsValues) {
  const std::string text = R"(input x: float32[3, 37]
input m: float32[3]
input v: float32[3]
param s: float32[3]
param b: float32[3]
tensor xt: float32[37, 3]
xt = opaque(x) {onnx = Transpose, perm = [1, 0]}  # xt
tensor va: float32[3]
va = opaque(v) {onnx = Abs}  # va
tensor y: float32[37, 3]
y = opaque(xt, s, b, m, va) {onnx = BatchNormalization}  # bn
output y
)";
  const Graph g = ParseGraphText(text, "host view");
  const CudaExecutor gpu(g, BindDims(g));
  EXPECT_EQ(gpu.stats().host_ops.size(), 1u);
  ExpectGpuMatchesCpu(g, 9, text);
}

// ---- group_gather (fuse-group-gathers) --------------------------------------

// A graph of embedding lookups in the text notation: lookup i reads table
// t<i> [rows, width] of `dtype` by ids<i> [n] (int32 for every third), and
// with `concat`, the float32 lookups of width > 0 go into one Concat "cat".
struct GpuLookup {
  int64_t rows, width;
};
std::string GpuLookupsText(const std::vector<GpuLookup>& lookups, const std::string& dtype, int64_t n,
                           bool concat) {
  std::string text, outs, parts;
  int64_t total = 0;
  for (size_t i = 0; i < lookups.size(); ++i) {
    const auto [rows, width] = lookups[i];
    text += fmt::format("input ids{0}: {1}[{2}]\nparam t{0}: {3}[{4}, {5}]\ntensor e{0}: {3}[{2}, {5}]\n", i,
                        i % 3 == 2 ? "int32" : "int64", n, dtype, rows, width);
    text += fmt::format("e{0} = opaque(t{0}, ids{0}) {{onnx = Gather}}  # emb{0}\n", i);
    if (concat) {
      parts += fmt::format("{}e{}", parts.empty() ? "" : ", ", i);
      total += width;
    } else {
      outs += fmt::format("{}e{}", outs.empty() ? "" : ", ", i);
    }
  }
  if (concat) {
    text += fmt::format("tensor cat: {}[{}, {}]\ncat = concatenate({}) {{dim = 1}}  # cat\n", dtype, n, total, parts);
    outs = "cat";
  }
  return text + "output " + outs + "\n";
}

// Random tables; ids at both edges of each table (0, rows - 1, -1, -rows),
// the rest spread over it.
TensorMap GpuLookupFeeds(const Graph& g, const std::vector<GpuLookup>& lookups, uint64_t seed) {
  TensorMap feeds = RandomFeeds(g, BindDims(g), seed);
  for (size_t i = 0; i < lookups.size(); ++i) {
    HostTensor& ids = feeds.at(fmt::format("ids{}", i));
    const int64_t rows = lookups[i].rows;
    for (int64_t k = 0; k < ids.numel(); ++k) {
      const int64_t edge[] = {0, rows - 1, -1, -rows};
      ids.SetInt(k, k < 4 ? edge[k] : (k * 7 + static_cast<int64_t>(seed)) % rows);
    }
  }
  return feeds;
}

// The lookups grouped by fuse-group-gathers (hfuse rules) into one
// group_gather; on the GPU, plain and in a CUDA graph, the group is one
// launch (its Concat taken in) and gives the CPU reference's bytes (a
// gather copies).
void ExpectGroupGatherMatches(const std::vector<GpuLookup>& lookups, const std::string& dtype, bool concat,
                              CudaOptions cuda = {}, int64_t ids = 37) {
  const std::string what =
      fmt::format("{} lookups of {} ids of {}{}", lookups.size(), ids, dtype, concat ? " into a concat" : "");
  const Graph original = ParseGraphText(GpuLookupsText(lookups, dtype, ids, concat), what);
  Graph g = original;
  PassOptions options;
  options.fuse_group_ops.rules = RuleSet::kHfuse;
  PassState state(g);
  PassManager(ParsePassList("fuse-group-gathers"), PassManagerOptions::VerifyingEach()).Run(state, options);
  ASSERT_EQ(state.fuse_result.groups.size(), lookups.size() > 1 ? 1u : 0u) << what;
  const DimValues dims = BindDims(g);
  const TensorMap feeds = GpuLookupFeeds(g, lookups, 5);
  const TensorMap want = RunOnCpuReference(original, feeds, dims);
  CudaExecutor gpu(g, dims, cuda);
  EXPECT_EQ(gpu.stats().launches, 1) << what;
  gpu.SetFeeds(feeds);
  for (bool use_graph : {false, true}) {
    gpu.Poison();
    use_graph ? gpu.RunGraph() : gpu.Run();
    for (const OutputComparison& c : CompareOutputs(want, gpu.Outputs())) {
      EXPECT_TRUE(c.problem.empty()) << what << " " << c.name << ": " << c.problem;
      EXPECT_TRUE(c.bitwise_equal) << what << " " << c.name << (use_graph ? " in a CUDA graph" : "");
    }
  }
}

TEST_F(CudaTest, GroupGatherOddWidthsEachDtypeOneLaunch) {
  const std::vector<GpuLookup> lookups = {{7, 3}, {50, 5}, {9, 13}, {4, 1}, {40, 8}, {3, 16}, {1000, 64}};
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    ExpectGroupGatherMatches(lookups, dtype, false);
    ExpectGroupGatherMatches(lookups, dtype, true);
  }
}

TEST_F(CudaTest, GroupGatherOfFiveHundredMembers) {
  std::vector<GpuLookup> lookups;
  for (int i = 0; i < 500; ++i) lookups.push_back({4 + i % 11, 1 + i % 13});
  for (const char* dtype : {"float32", "bfloat16"}) {
    ExpectGroupGatherMatches(lookups, dtype, false);
    ExpectGroupGatherMatches(lookups, dtype, true);
  }
}

// Lookups of many ids take many blocks of the batch's launch, in
// proportion to their words, the largest (70000 x 128 float32: 2.24M
// 16-byte words, or 4-byte ones in a concatenate of rows of 652 bytes)
// more than the 2048 blocks a gather takes at most, so that its blocks
// loop over its words (onnx_kernels.cu, LayGatherBatch).
TEST_F(CudaTest, GroupGatherOfManyIdsLoopsOverItsBlocks) {
  for (const char* dtype : {"float32", "bfloat16"}) {
    ExpectGroupGatherMatches({{100, 32}, {5, 3}, {1000, 128}}, dtype, false, {}, 70000);
    ExpectGroupGatherMatches({{100, 32}, {5, 3}, {1000, 128}}, dtype, true, {}, 70000);
  }
}

// The batch's layout on the host (no GPU): each gather's blocks in
// proportion to its words (a thread four of them, 256 threads a block),
// at most 2048, none for an empty gather, and the block table naming each
// block's gather.
TEST(GatherBatchLayout, BlocksInProportionToWords) {
  auto lookup = [](int64_t count, int64_t inner_bytes, int64_t y_row_bytes) {
    cuda::GatherArgs a{};
    a.data = reinterpret_cast<const void*>(uintptr_t{1} << 20);
    a.y = reinterpret_cast<void*>(uintptr_t{1} << 24);
    a.outer = 1;
    a.count = count;
    a.inner_bytes = inner_bytes;
    a.y_row_bytes = y_row_bytes;
    return a;
  };
  std::vector<cuda::GatherArgs> args = {lookup(2048 * 20, 64, 64),    // 163840 16-byte words
                                        lookup(2048, 64, 64),         // 8192
                                        lookup(0, 64, 64),            // none
                                        lookup(2048, 1716, 1716),     // 4-byte words: 878592
                                        lookup(4000000, 64, 64),      // 16M words: 2048 blocks, looping
                                        lookup(5, 3, 3)};             // bytes: one block
  const std::vector<int32_t> table = cuda::LayGatherBatch(args);
  const std::vector<int32_t> words = {16, 16, 16, 4, 16, 1}, blocks = {160, 8, 0, 858, 2048, 1};
  int32_t first = 0;
  for (size_t g = 0; g < args.size(); ++g) {
    SCOPED_TRACE(g);
    EXPECT_EQ(args[g].word_bytes, words[g]);
    EXPECT_EQ(args[g].blocks, blocks[g]);
    EXPECT_EQ(args[g].first_block, first);
    for (int32_t b = first; b < first + blocks[g]; ++b) ASSERT_EQ(table.at(static_cast<size_t>(b)), static_cast<int32_t>(g));
    first += blocks[g];
  }
  EXPECT_EQ(table.size(), static_cast<size_t>(first));
}

TEST_F(CudaTest, GroupGatherIsOneLaunchWithBatchesOff) {
  // "a launch an op" (bench's variant): the group is one op.
  CudaOptions off;
  off.gather_batches = false;
  ExpectGroupGatherMatches({{7, 3}, {50, 5}, {9, 13}}, "float32", false, off);
}

TEST_F(CudaTest, GroupGatherOfOneMember) {
  // The pass forms none, but a fused model read back may hold one.
  const std::string text =
      "input ids0: int64[37]\nparam t0: float16[6, 5]\ntensor e0: float16[37, 5]\n"
      "(e0) = group_gather(t0, ids0) {members = [emb0]}  # g\noutput e0\n";
  const Graph g = ParseGraphText(text, "one member");
  const Graph plain = ParseGraphText(GpuLookupsText({{6, 5}}, "float16", 37, false), "plain");
  const TensorMap feeds = GpuLookupFeeds(plain, {{6, 5}}, 2);
  const DimValues dims = BindDims(g);
  CudaExecutor gpu(g, dims);
  EXPECT_EQ(gpu.stats().launches, 1);
  gpu.SetFeeds(feeds);
  for (bool use_graph : {false, true}) {
    gpu.Poison();
    use_graph ? gpu.RunGraph() : gpu.Run();
    for (const OutputComparison& c : CompareOutputs(RunOnCpuReference(plain, feeds, dims), gpu.Outputs())) {
      EXPECT_TRUE(c.bitwise_equal) << c.name << (use_graph ? " in a CUDA graph" : "");
    }
  }
}

TEST_F(CudaTest, GroupGatherOutOfRangeIdIsTheGathersError) {
  const std::vector<GpuLookup> lookups = {{10, 4}, {7, 3}, {5, 2}};
  const Graph original = ParseGraphText(GpuLookupsText(lookups, "float32", 37, false), "t");
  Graph fused = original;
  PassOptions options;
  options.fuse_group_ops.rules = RuleSet::kHfuse;
  PassState state(fused);
  PassManager(ParsePassList("fuse-group-gathers"), PassManagerOptions::VerifyingEach()).Run(state, options);
  ASSERT_EQ(fused.NumLiveOps(), 1);
  for (int64_t bad : {int64_t{7}, int64_t{-8}}) {
    TensorMap feeds = GpuLookupFeeds(original, lookups, 1);
    feeds.at("ids1").SetInt(5, bad);
    const DimValues dims = BindDims(original);
    auto error = [&](const Graph& g, bool use_graph) {
      CudaExecutor gpu(g, dims);
      gpu.SetFeeds(feeds);
      try {
        use_graph ? gpu.RunGraph() : gpu.Run();
      } catch (const InputError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    const std::string want = "op 'emb1' (ONNX Gather): an index is out of range";
    EXPECT_EQ(error(original, false), want);
    EXPECT_EQ(error(fused, false), want);
    EXPECT_EQ(error(fused, true), want);
  }
  // The flags are cleared after the error: a good run then passes.
  TensorMap feeds = GpuLookupFeeds(original, lookups, 1);
  feeds.at("ids1").SetInt(5, 99);
  CudaExecutor gpu(fused, BindDims(fused));
  gpu.SetFeeds(feeds);
  EXPECT_THROW(gpu.Run(), InputError);
  gpu.SetFeeds(GpuLookupFeeds(original, lookups, 1));
  EXPECT_NO_THROW(gpu.Run());
}

TEST_F(CudaTest, TowersExampleAllVariants) {
  const Graph g = ReadGraphJsonFile(std::string(HFUSE_SOURCE_DIR) + "/examples/towers_small.json");
  ExpectAllVariantsMatch(g, 9, "towers_small");
}

TEST_F(CudaTest, RandomGraphs) {
  RandomGraphOptions options;
  options.max_ops = 60;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const Graph g = ParseGraphJson(RandomGraphJson(seed, options), "random");
    ExpectRandomGraphMatches(g, seed, "random graph " + std::to_string(seed));
  }
}

TEST_F(CudaTest, ConformanceGraphs) {
  int n = 0;
  for (const std::string& id : testing::ConformanceCases()) {
    if (id.rfind("random/", 0) == 0 && n++ % 10 != 0) continue;  // every 10th random case
    const Graph g = ReadGraphJsonFile(testing::ConformancePath(id) + ".json");
    ExpectRandomGraphMatches(g, 11, id, testing::ConformanceOptions(id));
  }
}

}  // namespace
}  // namespace hfuse
