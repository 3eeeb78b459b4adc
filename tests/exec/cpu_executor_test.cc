// The CPU reference executor: number formats, each op against a naive loop
// on random data, .npz files, input generation, and `hfuse verify` catching a
// wrong rewrite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/npz.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "hfuse/support/half.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

namespace fs = std::filesystem;

// ---- number formats ---------------------------------------------------------

TEST(Half, RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN
    EXPECT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);      // tie -> even (zero)
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie -> even
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even
  EXPECT_EQ(BFloat16ToFloat(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(NAN))));
}

// ---- ops against naive loops -------------------------------------------------

std::string OneOpGraph(const std::string& tensors, const std::string& op,
                       const std::string& outputs) {
  return R"({"graph_format": 1, "dims": [{"name": "b", "min": 1, "max": 9}], "tensors": [)" +
         tensors + R"(], "ops": [)" + op + R"(], "outputs": [)" + outputs + "]}";
}

TensorMap RunText(const std::string& text, uint64_t seed, TensorMap* feeds_out = nullptr,
                  const std::map<std::string, int64_t>& dims = {}) {
  const Graph g = ParseGraphJson(text, "test");
  const DimValues d = BindDims(g, dims);
  TensorMap feeds = RandomFeeds(g, d, seed);
  TensorMap out = RunOnCpu(g, feeds, d);
  if (feeds_out) *feeds_out = std::move(feeds);
  return out;
}

float Sig(double v) { return static_cast<float>(1.0 / (1.0 + std::exp(-v))); }

struct GemmCase {
  const char* op;
  const char* dtype;
  int rows, n, k;
  double alpha;
};

class GemmOp : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmOp, MatchesNaiveLoop) {
  const GemmCase c = GetParam();
  const bool bias = std::string(c.op) != "gemm_rcr";
  const std::string dt = c.dtype;
  const std::string text = OneOpGraph(
      fmt::format(R"({{"name": "a", "shape": [{}, {}], "dtype": "{}", "role": "input"}},
         {{"name": "w", "shape": [{}, {}], "dtype": "{}", "role": "param"}},
         {{"name": "c", "shape": [{}], "dtype": "{}", "role": "param"}},
         {{"name": "y", "shape": [{}, {}], "dtype": "{}"}})",
                  c.rows, c.k, dt, c.n, c.k, dt, c.n, dt, c.rows, c.n, dt),
      fmt::format(R"({{"name": "g", "op": "{}", "inputs": ["a", "w"{}], "outputs": ["y"], "alpha": {}}})",
                  c.op, bias ? R"(, "c")" : "", c.alpha),
      R"("y")");
  TensorMap feeds;
  const HostTensor y = RunText(text, 11, &feeds).at("y");
  const HostTensor &a = feeds.at("a"), &w = feeds.at("w"), &cb = feeds.at("c");
  double worst = 0, scale = 0;
  for (int r = 0; r < c.rows; ++r) {
    for (int j = 0; j < c.n; ++j) {
      double acc = 0;
      for (int k = 0; k < c.k; ++k) acc += double(a.Get(r * c.k + k)) * w.Get(j * c.k + k);
      double v = c.alpha * acc + (bias ? cb.Get(j) : 0.0);
      if (std::string(c.op).ends_with("relu")) v = std::max(v, 0.0);
      if (std::string(c.op).ends_with("sigmoid")) v = Sig(v);
      worst = std::max(worst, std::fabs(v - y.Get(r * c.n + j)));
      scale = std::max(scale, std::fabs(v));
    }
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(worst / scale, Tolerance(y.dtype)) << worst;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmOp,
    ::testing::Values(GemmCase{"gemm_rcr", "float32", 7, 5, 3, 1.0},
                      GemmCase{"gemm_rcr_bias", "float32", 33, 17, 65, 0.5},
                      GemmCase{"gemm_rcr_bias_relu", "float16", 64, 24, 40, 1.0},
                      GemmCase{"gemm_rcr_bias_sigmoid", "bfloat16", 9, 31, 16, 2.0},
                      GemmCase{"gemm_rcr_bias_sigmoid", "float32", 1, 1, 1, 1.0}));

TEST(LayerNormOp, MatchesNaiveLoopOverTwoNormalizedDims) {
  const std::string text = OneOpGraph(
      R"({"name": "x", "shape": ["b", 3, 20], "dtype": "float32", "role": "input"},
         {"name": "g", "shape": [3, 20], "dtype": "float32", "role": "param"},
         {"name": "be", "shape": [3, 20], "dtype": "float32", "role": "param"},
         {"name": "y", "shape": ["b", 3, 20], "dtype": "float32"})",
      R"({"name": "ln", "op": "layernorm_sigmoid_mul", "inputs": ["x", "g", "be"], "outputs": ["y"],
          "normalized_shape": [3, 20], "eps": 0.001})",
      R"("y")");
  TensorMap feeds;
  const HostTensor y = RunText(text, 5, &feeds, {{"b", 4}}).at("y");
  ASSERT_EQ(y.shape, (std::vector<int64_t>{4, 3, 20}));
  const HostTensor &x = feeds.at("x"), &g = feeds.at("g"), &be = feeds.at("be");
  for (int r = 0; r < 4; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 60; ++j) mean += x.Get(r * 60 + j) / 60.0;
    for (int j = 0; j < 60; ++j) var += std::pow(x.Get(r * 60 + j) - mean, 2) / 60.0;
    for (int j = 0; j < 60; ++j) {
      const double xv = x.Get(r * 60 + j);
      const double ln = (xv - mean) / std::sqrt(var + 0.001) * g.Get(j) + be.Get(j);
      EXPECT_NEAR(y.Get(r * 60 + j), xv * Sig(ln), 1e-5);
    }
  }
}

TEST(LayerNormOp, MissingGammaAndBetaMeanOneAndZero) {
  const std::string text = OneOpGraph(
      R"({"name": "x", "shape": [2, 8], "dtype": "float32", "role": "input"},
         {"name": "y", "shape": [2, 8], "dtype": "float32"})",
      R"({"name": "ln", "op": "layernorm", "inputs": ["x"], "outputs": ["y"], "normalized_shape": [8]})",
      R"("y")");
  const HostTensor y = RunText(text, 1).at("y");
  for (int r = 0; r < 2; ++r) {
    double mean = 0, sq = 0;
    for (int j = 0; j < 8; ++j) mean += y.Get(r * 8 + j) / 8;
    for (int j = 0; j < 8; ++j) sq += y.Get(r * 8 + j) * y.Get(r * 8 + j) / 8;
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(sq, 1.0, 1e-3);  // unit variance (eps 1e-5)
  }
}

TEST(DataMovement, SplitAndConcatOnTheLastDimSwapHalves) {
  const std::string text = OneOpGraph(
      R"({"name": "x", "shape": [2, 3, 4], "dtype": "float16", "role": "input"},
         {"name": "p", "shape": [2, 3, 1], "dtype": "float16"},
         {"name": "q", "shape": [2, 3, 3], "dtype": "float16"},
         {"name": "y", "shape": [2, 3, 4], "dtype": "float16"})",
      R"({"name": "s", "op": "split", "inputs": ["x"], "outputs": ["p", "q"], "split_sizes": [1, 3], "dim": -1},
         {"name": "c", "op": "concatenate", "inputs": ["q", "p"], "outputs": ["y"], "dim": 2})",
      R"("y")");
  TensorMap feeds;
  const HostTensor y = RunText(text, 3, &feeds).at("y");
  const HostTensor& x = feeds.at("x");
  for (int r = 0; r < 6; ++r) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(y.Get(r * 4 + j), x.Get(r * 4 + (j + 1) % 4));
  }
}

TEST(Elementwise, BroadcastsLikeNumpy) {
  const std::string text = OneOpGraph(
      R"({"name": "p", "shape": [3, 1], "dtype": "float32", "role": "input"},
         {"name": "q", "shape": [5], "dtype": "float32", "role": "input"},
         {"name": "y", "shape": [3, 5], "dtype": "float32"})",
      R"({"name": "e", "op": "elementwise", "inputs": ["p", "q"], "outputs": ["y"], "func": "sub"})",
      R"("y")");
  TensorMap feeds;
  const HostTensor y = RunText(text, 9, &feeds).at("y");
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(y.Get(i * 5 + j), feeds.at("p").Get(i) - feeds.at("q").Get(j));
  }
}

TEST(Elementwise, UnaryFunctions) {
  for (const auto& [func, f] : std::vector<std::pair<std::string, double (*)(double)>>{
           {"relu", [](double v) { return std::max(v, 0.0); }},
           {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
           {"tanh", [](double v) { return std::tanh(v); }},
           {"gelu", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
           {"silu", [](double v) { return v / (1 + std::exp(-v)); }}}) {
    const std::string text = OneOpGraph(
        R"({"name": "x", "shape": [64], "dtype": "float32", "role": "input"},
           {"name": "y", "shape": [64], "dtype": "float32"})",
        R"({"name": "e", "op": "elementwise", "inputs": ["x"], "outputs": ["y"], "func": ")" + func +
            R"("})",
        R"("y")");
    TensorMap feeds;
    const HostTensor y = RunText(text, 2, &feeds).at("y");
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(y.Get(i), f(feeds.at("x").Get(i)), 1e-6) << func;
  }
}

// ---- inputs ------------------------------------------------------------------

TEST(RandomFeeds, AreSeededNonZeroAndKeyedByName) {
  const Graph g = ReadGraphJsonFile(test::ExamplePath("towers_small.json"));
  const DimValues d = BindDims(g);
  const TensorMap a = RandomFeeds(g, d, 1), b = RandomFeeds(g, d, 1), c = RandomFeeds(g, d, 2);
  EXPECT_EQ(a.at("x").bytes, b.at("x").bytes);
  EXPECT_NE(a.at("x").bytes, c.at("x").bytes);
  EXPECT_NE(a.at("w1_0").bytes, a.at("w1_1").bytes);
  int zeros = 0;
  for (int64_t i = 0; i < a.at("x").numel(); ++i) zeros += a.at("x").Get(i) == 0.0f;
  EXPECT_LT(zeros, a.at("x").numel() / 100);
  for (int64_t i = 0; i < a.at("g_0").numel(); ++i) {  // gammas in [0.5, 1.5)
    EXPECT_GE(a.at("g_0").Get(i), 0.5f);
    EXPECT_LE(a.at("g_0").Get(i), 1.5f);
  }
}

TEST(BindDims, RejectsUnknownNamesAndValuesOutOfRange) {
  const Graph g = ParseGraphJson(
      OneOpGraph(R"({"name": "x", "shape": ["b"], "dtype": "float32", "role": "input"},
                    {"name": "y", "shape": ["b"], "dtype": "float32"})",
                 R"({"name": "e", "op": "elementwise", "inputs": ["x"], "outputs": ["y"], "func": "relu"})",
                 R"("y")"),
      "test");
  EXPECT_EQ(BindDims(g), DimValues{9});
  EXPECT_EQ(BindDims(g, {{"b", 1}}), DimValues{1});
  EXPECT_THROW(BindDims(g, {{"b", 10}}), InputError);
  EXPECT_THROW(BindDims(g, {{"c", 1}}), InputError);
}

// ---- .npz --------------------------------------------------------------------

TEST(Npz, RoundTripsEveryDtype) {
  TensorMap arrays;
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    HostTensor t(d, {2, 3});
    for (int i = 0; i < 6; ++i) t.Set(i, 0.25f * static_cast<float>(i) - 0.5f);
    arrays[std::string(DTypeName(d))] = t;
  }
  arrays["scalar_like"] = HostTensor(DType::kFloat32, {1});
  const std::string path = (fs::temp_directory_path() / "hfuse_npz_test.npz").string();
  WriteNpz(path, arrays);
  const TensorMap back = ReadNpz(path, {{"bfloat16", DType::kBFloat16}});
  ASSERT_EQ(back.size(), arrays.size());
  for (const auto& [name, t] : arrays) {
    EXPECT_EQ(back.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(back.at(name).shape, t.shape) << name;
    EXPECT_EQ(back.at(name).bytes, t.bytes) << name;
  }
  fs::remove(path);
}

TEST(Npz, ReadsWhatNumpyWrites) {
  const fs::path dir = fs::temp_directory_path() / "hfuse_npz_numpy";
  fs::create_directories(dir);
  const std::string script = (dir / "make.py").string();
  std::ofstream(script) << "import numpy as np\n"
                           "a = np.arange(12, dtype=np.float16).reshape(3, 4) / 4\n"
                           "b = np.linspace(-1, 1, 5).astype(np.float32)\n"
                           "np.savez_compressed('" << (dir / "c.npz").string() << "', a=a, b=b)\n"
                           "np.savez('" << (dir / "s.npz").string() << "', a=a, b=b)\n";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script).c_str()), 0) << "needs python3-numpy";
  for (const char* file : {"c.npz", "s.npz"}) {
    const TensorMap t = ReadNpz((dir / file).string());
    ASSERT_EQ(t.at("a").dtype, DType::kFloat16);
    ASSERT_EQ(t.at("a").shape, (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(t.at("a").Get(11), 2.75f);
    ASSERT_EQ(t.at("b").shape, (std::vector<int64_t>{5}));
    EXPECT_EQ(t.at("b").Get(0), -1.0f);
    EXPECT_EQ(t.at("b").Get(4), 1.0f);
  }
  // A float32 array fed to a float16 tensor is rounded into it.
  const TensorMap h = ReadNpz((dir / "s.npz").string(), {{"b", DType::kFloat16}});
  EXPECT_EQ(h.at("b").dtype, DType::kFloat16);
  EXPECT_EQ(h.at("b").Get(1), -0.5f);
  fs::remove_all(dir);
}

TEST(Npz, RejectsGarbage) {
  const std::string path = (fs::temp_directory_path() / "hfuse_bad.npz").string();
  std::ofstream(path) << "this is not a zip file at all, not even close.";
  EXPECT_THROW(ReadNpz(path), InputError);
  fs::remove(path);
}

// ---- verify catches a wrong rewrite ----------------------------------------------

TEST(Verify, CatchesSwappedGroupOutputs) {
  // Four towers of identical shapes: the grouped GEMM's outputs all have one
  // shape, so swapping two of them still verifies as a graph but computes
  // something else.
  const test::TempDir dir;
  const std::string graph = dir.Str("g.json"), fused = dir.Str("f.json"), broken = dir.Str("b.json");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + std::string(HFUSE_SOURCE_DIR) +
                         "/scripts/gen_towers.py --towers 4 --rows 16 -o " + graph).c_str()),
            0);
  ASSERT_EQ(test::RunTool("fuse " + graph + " -o " + fused).code(), 0);
  EXPECT_EQ(test::RunTool("verify " + graph + " --fused " + fused).code(), 0);
  EXPECT_EQ(test::RunTool("fuse " + graph + " -o " + fused + " --verify").code(), 0);

  Graph g = ReadGraphJsonFile(fused);
  bool swapped = false;
  for (OpId id : g.LiveOps()) {
    Op& op = g.mutable_op(id);
    if (op.type == OpType::kGroupGemmRcrBiasRelu && op.outputs.size() >= 2) {
      std::swap(op.outputs[0], op.outputs[1]);
      swapped = true;
      break;
    }
  }
  ASSERT_TRUE(swapped);
  WriteFileAtomic(broken, WriteGraphJson(g));
  EXPECT_EQ(test::RunTool("check " + broken).code(), 0);  // still a well-formed graph
  EXPECT_EQ(test::RunTool("verify " + graph + " --fused " + broken).code(), 1);
}

}  // namespace
}  // namespace hfuse
