// The inference session (include/hfuse/session/session.h): created from a
// file or bytes of either format, fused for its device, run on host tensors
// with the feeds checked, and (where a GPU exists) on CUDA and on device
// pointers.
#include "hfuse/session/session.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/support/error.h"
#include "testing/graph_builder.h"
#include "testing/require_gpu.h"
#include "testing/tool_runner.h"

#if HFUSE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace hfuse {
namespace {

using test::ErrorOf;
using test::GraphBuilder;

const std::string kTowers = test::ExamplePath("towers_small.json");
const std::string kRanking = test::ExamplePath("ranking_small.onnx");

// The feeds a session's inputs need, from RandomFeeds on its graph.
TensorMap FeedsFor(const Session& s, const DimValues& dims, uint64_t seed = 1) {
  const TensorMap all = RandomFeeds(s.graph(), dims, seed);
  TensorMap feeds;
  for (const TensorInfo& i : s.inputs()) feeds[i.name] = all.at(i.name);
  return feeds;
}

void ExpectClose(const TensorMap& want, const TensorMap& got) {
  ASSERT_EQ(want.size(), got.size());
  for (const OutputComparison& c : CompareOutputs(want, got)) {
    EXPECT_TRUE(c.problem.empty()) << c.name << ": " << c.problem;
    EXPECT_TRUE(c.pass) << c.name << ": normalised error " << c.normalized;
  }
}

// Two towers on a dynamic batch: under the seed rules GEMMs group only once
// the batch is bound (static), under the hfuse rules (the session's default)
// at the dynamic batch too; LayerNorms group either way.
std::string DynamicTowersJson() {
  GraphBuilder b;
  b.Dim("batch", 1, 64);
  const std::string x = b.Input("x", {"batch", 32}, DType::kFloat32);
  const std::string h0 = b.Fc("fc0", x, 16), h1 = b.Fc("fc1", x, 16);
  b.Outputs({b.LayerNorm("ln0", h0), b.LayerNorm("ln1", h1)});
  return b.Json();
}

TEST(Session, GraphJsonOnCpuComputesWhatTheOriginalComputes) {
  Session s = Session::FromFile(kTowers);
  EXPECT_EQ(s.rules(), RuleSet::kHfuse);  // kSessionRules, on the CPU too
  EXPECT_EQ(s.fusion().rules, RuleSet::kHfuse);
  EXPECT_FALSE(s.fusion().groups.empty());
  EXPECT_LT(s.graph().NumLiveOps(), s.original().NumLiveOps());
  // Graph JSON carries no weights: its params are inputs, after the graph's.
  ASSERT_GT(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].name, "x");
  EXPECT_EQ(s.inputs()[0].shape, (std::vector<int64_t>{256, 1440}));
  EXPECT_EQ(s.inputs()[0].dtype, DType::kFloat16);
  EXPECT_TRUE(s.overridable_inputs().empty());
  ASSERT_EQ(s.outputs().size(), s.original().outputs().size());

  const DimValues dims = BindDims(s.original());
  const TensorMap feeds = FeedsFor(s, dims);
  const TensorMap got = s.Run(feeds);
  // On the CPU a fused graph gives the original's bytes.
  const TensorMap want = RunOnCpu(s.original(), feeds, dims);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_EQ(got.at(name).bytes, t.bytes) << name;
}

TEST(Session, FromBytesEqualsFromFile) {
  SessionOptions options;
  options.format = "json";
  Session a = Session::FromBytes(test::Slurp(kTowers), options, "towers");
  Session b = Session::FromFile(kTowers);
  EXPECT_EQ(a.FusedModelBytes(), b.FusedModelBytes());
  EXPECT_NE(a.FusedModelBytes().find("group_gemm_rcr_bias_relu"), std::string::npos);
  options.format = "";
  EXPECT_THROW(Session::FromBytes("{}", options), InputError);
}

TEST(Session, OnnxModelRunsOnItsInitializers) {
  Session s = Session::FromFile(kRanking);
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].name, "features");
  EXPECT_EQ(s.inputs()[0].shape, (std::vector<int64_t>{64, 256}));
  EXPECT_FALSE(s.overridable_inputs().empty());
  ASSERT_EQ(s.outputs().size(), 1u);
  EXPECT_EQ(s.outputs()[0].name, "score");
  EXPECT_EQ(s.fusion().groups.size(), 3u);  // first layer, second layer, gate

  const DimValues dims = BindDims(s.original());
  const TensorMap feeds = FeedsFor(s, dims);
  ExpectClose(RunOnCpu(s.original(), feeds, dims), s.Run(feeds));
  // The fused model comes back as ONNX with ai.hfuse group ops, and runs.
  SessionOptions options;
  options.format = "onnx";
  Session again = Session::FromBytes(s.FusedModelBytes(), options, "fused.onnx");
  ExpectClose(s.Run(feeds), again.Run(feeds));
}

TEST(Session, UnfusedRunsTheModelAsImported) {
  SessionOptions options;
  options.fuse = false;
  Session s = Session::FromFile(kTowers, options);
  EXPECT_TRUE(s.fusion().groups.empty());
  EXPECT_EQ(s.graph().NumLiveOps(), s.original().NumLiveOps());
}

TEST(Session, UnboundDimsTakeTheirSizeFromTheFeeds) {
  SessionOptions options;
  options.format = "json";
  Session s = Session::FromBytes(DynamicTowersJson(), options);
  EXPECT_EQ(s.inputs()[0].shape, (std::vector<int64_t>{-1, 32}));
  EXPECT_EQ(s.inputs()[0].dim_names, (std::vector<std::string>{"batch", ""}));
  for (int64_t batch : {3, 64}) {
    const DimValues dims{batch};
    const TensorMap feeds = FeedsFor(s, dims);
    const TensorMap got = s.Run(feeds);
    for (const auto& [name, t] : got) EXPECT_EQ(t.shape, (std::vector<int64_t>{batch, 16})) << name;
    ExpectClose(RunOnCpu(s.original(), feeds, dims), got);
  }
}

TEST(Session, ADynamicBatchGroupsLikeABoundOneOnTheCpu) {
  SessionOptions options;
  options.format = "json";
  Session unbound = Session::FromBytes(DynamicTowersJson(), options);
  EXPECT_EQ(unbound.rules(), RuleSet::kHfuse);
  EXPECT_EQ(unbound.fusion().groups.size(), 2u);  // the GEMMs and the LayerNorms
  EXPECT_EQ(unbound.inputs()[0].shape, (std::vector<int64_t>{-1, 32}));
  for (int64_t batch : {1, 7, 64}) {  // the group runs at each run's batch, the original's bytes
    const TensorMap feeds = FeedsFor(unbound, {batch});
    const TensorMap want = RunOnCpu(unbound.original(), feeds, {batch});
    const TensorMap got = unbound.Run(feeds);
    for (const auto& [name, t] : want) {
      EXPECT_EQ(got.at(name).shape, t.shape) << name;
      EXPECT_EQ(got.at(name).bytes, t.bytes) << name << " at batch " << batch;
    }
  }
}

TEST(Session, UnderTheSeedRulesBoundDimsAreStaticSoGemmsGroup) {
  SessionOptions options;
  options.format = "json";
  options.rules = RuleSet::kSeed;
  Session unbound = Session::FromBytes(DynamicTowersJson(), options);
  options.dims = {{"batch", 8}};
  Session bound = Session::FromBytes(DynamicTowersJson(), options);
  EXPECT_EQ(unbound.fusion().groups.size(), 1u);  // the LayerNorms
  EXPECT_EQ(bound.fusion().groups.size(), 2u);    // and the GEMMs
  EXPECT_EQ(bound.inputs()[0].shape, (std::vector<int64_t>{8, 32}));
  const TensorMap feeds = FeedsFor(bound, {8});
  ExpectClose(RunOnCpu(unbound.original(), feeds, {8}), bound.Run(feeds));
  options.dims = {{"batch", 65}};
  EXPECT_THROW(Session::FromBytes(DynamicTowersJson(), options), InputError);
  options.dims = {{"rows", 8}};
  EXPECT_THROW(Session::FromBytes(DynamicTowersJson(), options), InputError);
}

TEST(Session, ParamsGivenAtCreationAreNoInputs) {
  SessionOptions options;
  options.format = "json";
  Session fed = Session::FromBytes(DynamicTowersJson(), options);
  const TensorMap feeds = FeedsFor(fed, {4});
  for (const auto& [name, t] : feeds) {
    if (name != "x") options.params[name] = t;
  }
  Session given = Session::FromBytes(DynamicTowersJson(), options);
  ASSERT_EQ(given.inputs().size(), 1u);
  EXPECT_EQ(given.inputs()[0].name, "x");
  EXPECT_EQ(given.overridable_inputs().size(), feeds.size() - 1);
  const TensorMap out = given.Run({{"x", feeds.at("x")}});
  for (const auto& [name, t] : fed.Run(feeds)) EXPECT_EQ(out.at(name).bytes, t.bytes) << name;
  options.params = {{"x", feeds.at("x")}};
  EXPECT_THROW(Session::FromBytes(DynamicTowersJson(), options), InputError);
  options.params = {{"w_fc0", HostTensor(DType::kFloat32, {16})}};
  EXPECT_THROW(Session::FromBytes(DynamicTowersJson(), options), InputError);
}

// float32 towers 64 wide (the packed GEMM kernel's width, where the CPU
// has it): weights the session holds are packed once and read from there;
// the bytes are those of the weights fed, and of the unfused original.
TEST(Session, WeightsItHoldsGiveTheBytesOfWeightsFed) {
  GraphBuilder b;
  b.Dim("batch", 1, 512);
  const std::string x = b.Input("x", {"batch", 96}, DType::kFloat32);
  b.Outputs({b.Fc("fc0", x, 64), b.Fc("fc1", x, 64), b.Fc("fc2", x, 40)});
  SessionOptions options;
  options.format = "json";
  Session fed = Session::FromBytes(b.Json(), options);
  ASSERT_EQ(fed.fusion().groups.size(), 1u);
  for (int64_t batch : {5, 300}) {
    const TensorMap feeds = FeedsFor(fed, {batch});
    options.params.clear();
    for (const auto& [name, t] : feeds) {
      if (name != "x") options.params[name] = t;
    }
    Session given = Session::FromBytes(b.Json(), options);
    const TensorMap want = RunOnCpu(fed.original(), feeds, {batch});
    for (int run = 0; run < 2; ++run) {  // packs on the first run, reads the packing on the second
      const TensorMap got = given.Run({{"x", feeds.at("x")}});
      for (const auto& [name, t] : want) EXPECT_EQ(got.at(name).bytes, t.bytes) << name << " run " << run;
    }
    for (const auto& [name, t] : fed.Run(feeds)) EXPECT_EQ(want.at(name).bytes, t.bytes) << name;
  }
}

TEST(Session, PicksTheNamedOutputs) {
  SessionOptions options;
  options.format = "json";
  Session s = Session::FromBytes(DynamicTowersJson(), options);
  const TensorMap got = s.Run(FeedsFor(s, {4}), {s.outputs()[1].name});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.begin()->first, s.outputs()[1].name);
}

TEST(Session, BadFeedsAreInputErrorsNamingTheTensor) {
  SessionOptions options;
  options.format = "json";
  Session s = Session::FromBytes(DynamicTowersJson(), options);
  const TensorMap good = FeedsFor(s, {4});
  EXPECT_NO_THROW(s.Run(good));

  TensorMap feeds = good;
  feeds["y"] = feeds.at("x");
  EXPECT_EQ(ErrorOf([&] { s.Run(feeds); }).rfind("feed 'y': the model has no input named so", 0), 0u);

  feeds = good;
  feeds.erase("x");
  EXPECT_NE(ErrorOf([&] { s.Run(feeds); }).find("input 'x' is not fed"), std::string::npos);

  feeds = good;
  feeds["x"] = HostTensor(DType::kFloat16, {4, 32});
  EXPECT_EQ(ErrorOf([&] { s.Run(feeds); }), "input 'x': dtype float16, the model wants float32");

  feeds["x"] = HostTensor(DType::kFloat32, {4, 31});
  EXPECT_EQ(ErrorOf([&] { s.Run(feeds); }), "input 'x': shape [4, 31], the model wants [batch, 32]");

  feeds["x"] = HostTensor(DType::kFloat32, {4, 32, 1});
  EXPECT_NE(ErrorOf([&] { s.Run(feeds); }).find("shape [4, 32, 1]"), std::string::npos);

  feeds["x"] = HostTensor(DType::kFloat32, {65, 32});
  EXPECT_EQ(ErrorOf([&] { s.Run(feeds); }), "input 'x': dim 0 (batch) is 65, outside [1, 64]");

  feeds["x"] = HostTensor(DType::kFloat32, {4, 32});
  feeds["x"].bytes.pop_back();
  EXPECT_NE(ErrorOf([&] { s.Run(feeds); }).find("bytes of data"), std::string::npos);

  EXPECT_NE(ErrorOf([&] { s.Run(good, {"nope"}); }).find("output 'nope'"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { s.RunDevice({}); }).find("runs on the cpu"), std::string::npos);
}

TEST(Session, ADimThatRecursHasOneValue) {
  GraphBuilder b;
  b.Dim("batch", 1, 16);
  const std::string x = b.Input("x", {"batch", 8}, DType::kFloat32);
  const std::string y = b.Input("y", {"batch", 8}, DType::kFloat32);
  b.Outputs({b.Elementwise("add", "add", {x, y})});
  SessionOptions options;
  options.format = "json";
  Session s = Session::FromBytes(b.Json(), options);
  TensorMap feeds{{"x", HostTensor(DType::kFloat32, {4, 8})}, {"y", HostTensor(DType::kFloat32, {5, 8})}};
  EXPECT_EQ(ErrorOf([&] { s.Run(feeds); }), "input 'y': dim 0 (batch) is 5, but 4 in input 'x'");
}

// ---- CUDA: skipped, saying so, without a device ---------------------------------

TEST(CudaSession, WithoutADeviceCreationIsOneInputError) {
  std::string why;
  if (CudaAvailable(&why)) GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  SessionOptions options;
  options.device = Device::kCuda;
  const std::string message = ErrorOf([&] { Session::FromFile(kTowers, options); });
  EXPECT_EQ(message, "--device cuda: no usable CUDA device: " + why);
}

TEST(CudaSession, RunsTheFusedGraphLikeTheCpuReference) {
  REQUIRE_GPU();
  for (bool cuda_graph : {false, true}) {
    SessionOptions options;
    options.device = Device::kCuda;
    options.cuda_graph = cuda_graph;
    Session s = Session::FromFile(kTowers, options);
    EXPECT_EQ(s.rules(), RuleSet::kHfuse);
    const DimValues dims = BindDims(s.original());
    const TensorMap feeds = FeedsFor(s, dims);
    const TensorMap want = RunOnCpu(s.original(), feeds, dims);
    ExpectClose(want, s.Run(feeds));
    ExpectClose(want, s.Run(feeds));  // the plan (and graph) again
    EXPECT_EQ(s.NumPlans(), 1u);
  }
}

TEST(CudaSession, PlansOncePerShape) {
  REQUIRE_GPU();
  SessionOptions options;
  options.device = Device::kCuda;
  options.format = "json";
  Session s = Session::FromBytes(DynamicTowersJson(), options);
  for (int64_t batch : {3, 64, 3}) {
    const TensorMap feeds = FeedsFor(s, {batch});
    ExpectClose(RunOnCpu(s.original(), feeds, {batch}), s.Run(feeds));
  }
  EXPECT_EQ(s.NumPlans(), 2u);
}

#if HFUSE_HAVE_CUDA
TEST(CudaSession, DevicePointersInAndOut) {
  REQUIRE_GPU();
  SessionOptions options;
  options.device = Device::kCuda;
  Session s = Session::FromFile(kRanking, options);
  const DimValues dims = BindDims(s.original());
  const TensorMap feeds = FeedsFor(s, dims);
  const TensorMap want = s.Run(feeds);
  const HostTensor& x = feeds.at("features");

  // A caller's buffer: copied device to device.
  void* mine = nullptr;
  ASSERT_EQ(cudaMalloc(&mine, x.bytes.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(mine, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  DeviceTensorMap out = s.RunDevice({{"features", {mine, x.dtype, x.shape}}});
  auto to_host = [](const DeviceTensor& d) {
    HostTensor h(d.dtype, d.shape);
    EXPECT_EQ(cudaMemcpy(h.bytes.data(), d.data, h.bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  };
  EXPECT_EQ(to_host(out.at("score")).bytes, want.at("score").bytes);

  // The session's own buffer, filled in place: no copy at all.
  DeviceTensorMap in = s.InputBuffers({{"features", x.shape}});
  ASSERT_EQ(cudaMemcpy(in.at("features").data, mine, x.bytes.size(), cudaMemcpyDeviceToDevice),
            cudaSuccess);
  out = s.RunDevice({{"features", in.at("features")}});
  EXPECT_EQ(to_host(out.at("score")).bytes, want.at("score").bytes);
  EXPECT_EQ(s.LastDeviceCopyBytes(), 0);
  cudaFree(mine);
  EXPECT_EQ(s.NumPlans(), 1u);
  EXPECT_EQ(s.DeviceId(), 0);
}

TEST(CudaSession, RunsOnTheCallersStreamIntoTheCallersBuffers) {
  REQUIRE_GPU();
  for (bool graph : {true, false}) {
    SessionOptions options;
    options.device = Device::kCuda;
    options.cuda_graph = graph;
    Session s = Session::FromFile(kRanking, options);
    const TensorMap feeds = FeedsFor(s, BindDims(s.original()));
    const TensorMap want = s.Run(feeds);
    const HostTensor& x = feeds.at("features");
    const HostTensor& w = want.at("score");
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    void* in = nullptr;
    void* score = nullptr;
    ASSERT_EQ(cudaMalloc(&in, x.bytes.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&score, w.bytes.size()), cudaSuccess);
    // The feed written on the caller's stream, the output buffer poisoned there.
    ASSERT_EQ(cudaMemcpyAsync(in, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice, stream),
              cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(score, 0xFF, w.bytes.size(), stream), cudaSuccess);
    for (int run = 0; run < 2; ++run) {
      DeviceTensorMap out = s.RunDevice({{"features", {in, x.dtype, x.shape}}}, stream,
                                        {{"score", {score, w.dtype, w.shape}}});
      EXPECT_EQ(out.at("score").data, score);
      EXPECT_EQ(s.LastDeviceCopyBytes(), static_cast<int64_t>(x.bytes.size() + w.bytes.size()));
      HostTensor got(w.dtype, w.shape);
      ASSERT_EQ(cudaMemcpy(got.bytes.data(), score, got.bytes.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(got.bytes, w.bytes) << "graph " << graph << " run " << run;
      ASSERT_EQ(cudaMemsetAsync(score, 0xFF, w.bytes.size(), stream), cudaSuccess);
    }
    // A bound buffer of the wrong shape is an input error, before anything runs.
    EXPECT_NE(ErrorOf([&] {
                s.RunDevice({{"features", {in, x.dtype, x.shape}}}, stream,
                            {{"score", {score, w.dtype, {1, 1}}}});
              }).find("output 'score': the buffer bound is float32 [1, 1]"),
              std::string::npos);
    cudaFree(in);
    cudaFree(score);
    cudaStreamDestroy(stream);
  }
}

TEST(CudaSession, BoundInputsAreReadWhereTheyLie) {
  REQUIRE_GPU();
  SessionOptions options;
  options.device = Device::kCuda;
  Session s = Session::FromFile(kRanking, options);
  const DimValues dims = BindDims(s.original());
  const TensorMap a = FeedsFor(s, dims), b = FeedsFor(s, dims, /*seed=*/9);
  const TensorMap want_a = s.Run(a), want_b = s.Run(b);
  ASSERT_NE(want_a.at("score").bytes, want_b.at("score").bytes);
  const HostTensor& x = a.at("features");
  char* mine = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&mine), x.bytes.size() + 256), cudaSuccess);
  const DeviceTensorMap feeds{{"features", {mine, x.dtype, x.shape}}};
  ASSERT_TRUE(s.BindInputs(feeds));
  auto score_of = [&](const DeviceTensorMap& out) {
    HostTensor h(out.at("score").dtype, out.at("score").shape);
    EXPECT_EQ(cudaMemcpy(h.bytes.data(), out.at("score").data, h.bytes.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return h.bytes;
  };
  // Written in place between runs: each run reads what is there now, copying nothing.
  for (const TensorMap* feed : {&a, &b, &a}) {
    const HostTensor& v = feed->at("features");
    ASSERT_EQ(cudaMemcpy(mine, v.bytes.data(), v.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    const DeviceTensorMap out = s.RunDevice(feeds);
    EXPECT_EQ(s.LastDeviceCopyBytes(), 0);
    EXPECT_EQ(score_of(out), (feed == &b ? want_b : want_a).at("score").bytes);
  }
  // Not 256-byte aligned: not bound; such a feed is copied as before.
  const DeviceTensorMap odd{{"features", {mine + 4, x.dtype, x.shape}}};
  EXPECT_FALSE(s.BindInputs(odd));
  ASSERT_EQ(cudaMemcpy(mine + 4, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(score_of(s.RunDevice(odd)), want_a.at("score").bytes);
  EXPECT_EQ(s.LastDeviceCopyBytes(), static_cast<int64_t>(x.bytes.size()));
  cudaFree(mine);
}
#endif

}  // namespace
}  // namespace hfuse
