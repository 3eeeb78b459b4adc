// `hfuse run`, `verify` and `bench` through the inference session: fused
// runs compute what unfused runs compute, --dim binds dims before fusion,
// bad feeds are one-line input errors, and --device cuda without a GPU is
// one clear error with exit 2 (with a GPU, the GPU runs are checked instead).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hfuse/exec/npz.h"
#include "hfuse/session/session.h"
#include "testing/graph_builder.h"
#include "testing/require_gpu.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using test::Quote;
using test::RunTool;
using test::TempDir;
using test::ToolRun;

const std::string kTowers = Quote(test::ExamplePath("towers_small.json"));
const std::string kRankingPath = test::ExamplePath("ranking_small.onnx");
const std::string kRanking = Quote(kRankingPath);

// The output lines ("name: dtype [shape] sum=... hash=...") of a run.
std::string OutputLines(const std::string& out) {
  std::string lines;
  size_t start = 0;
  while (start < out.size()) {
    const size_t end = out.find('\n', start);
    const std::string line = out.substr(start, end - start);
    if (line.find(" hash=") != std::string::npos) lines += line + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

TEST(RunCommand, FusedAndUnfusedGiveTheSameBytesOnTheCpu) {
  for (const std::string& model : {kTowers, kRanking}) {
    const ToolRun fused = RunTool("run " + model + " --seed 5");
    const ToolRun unfused = RunTool("run " + model + " --seed 5 --no-fuse");
    ASSERT_TRUE(fused.ok()) << fused.err;
    ASSERT_TRUE(unfused.ok()) << unfused.err;
    EXPECT_THAT(fused.out, HasSubstr(": cpu: "));
    EXPECT_THAT(fused.out, HasSubstr("(hfuse rules)"));  // the session's default on the CPU too
    EXPECT_THAT(unfused.out, HasSubstr("unfused"));
    EXPECT_FALSE(OutputLines(fused.out).empty());
    EXPECT_EQ(OutputLines(fused.out), OutputLines(unfused.out));
  }
  const ToolRun seed_rules = RunTool("run " + kTowers + " --seed 5 --rules seed");
  ASSERT_TRUE(seed_rules.ok()) << seed_rules.err;
  EXPECT_THAT(seed_rules.out, HasSubstr("(seed rules)"));
  EXPECT_EQ(OutputLines(seed_rules.out), OutputLines(RunTool("run " + kTowers + " --seed 5").out));
}

TEST(RunCommand, DimsAreBoundBeforeFusion) {
  test::GraphBuilder b;
  b.Dim("batch", 1, 64);
  const std::string x = b.Input("x", {"batch", 32}, DType::kFloat32);
  b.Outputs({b.Fc("fc0", x, 16), b.Fc("fc1", x, 16)});
  TempDir dir;
  test::Spit(dir / "g.json", b.Json());
  const ToolRun unbound = RunTool("run " + Quote(dir.Str("g.json")));
  const ToolRun seed_unbound = RunTool("run " + Quote(dir.Str("g.json")) + " --rules seed");
  const ToolRun bound = RunTool("run " + Quote(dir.Str("g.json")) + " --dim batch=8 --rules seed");
  ASSERT_TRUE(bound.ok()) << bound.err;
  // The hfuse rules (the default) group GEMMs of one named batch, bound or not.
  EXPECT_THAT(unbound.out, HasSubstr("1 group (hfuse rules)"));
  EXPECT_THAT(unbound.out, HasSubstr("[64, 16]"));
  EXPECT_THAT(seed_unbound.out, HasSubstr("0 groups (seed rules)"));  // static shapes only
  EXPECT_THAT(bound.out, HasSubstr("1 group (seed rules)"));
  EXPECT_THAT(bound.out, HasSubstr("fc0_y: float32 [8, 16]"));
  const ToolRun bad = RunTool("run " + Quote(dir.Str("g.json")) + " --dim batch=65");
  EXPECT_EQ(bad.code(), 2);
  EXPECT_THAT(bad.err, StartsWith("hfuse: error: " + dir.Str("g.json") +
                                  ": --dim batch=65: outside [1, 64]"));
}

TEST(RunCommand, AFeedOfTheWrongShapeIsAnInputError) {
  TempDir dir;
  TensorMap feeds{{"features", HostTensor(DType::kFloat32, {64, 128})}};
  WriteNpz(dir.Str("in.npz"), feeds);
  const ToolRun run = RunTool("run " + kRanking + " --inputs " + Quote(dir.Str("in.npz")));
  EXPECT_EQ(run.code(), 2);
  EXPECT_EQ(run.err, "hfuse: error: " + kRankingPath +
                         ": input 'features': shape [64, 128], the model wants [64, 256]\n");
}

// ---- --device cuda ------------------------------------------------------------

TEST(DeviceCuda, WithoutAGpuEachCommandGivesOneErrorAndExit2) {
  std::string why;
  if (CudaAvailable(&why)) GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  std::vector<std::string> commands = {"run " + kRanking + " --device cuda",
                                       "verify " + kTowers + " --device cuda"};
#if HFUSE_TEST_HAVE_BENCH
  commands.push_back("bench " + kRanking + " --device cuda");
#endif
  for (const std::string& args : commands) {
    const ToolRun run = RunTool(args);
    EXPECT_EQ(run.code(), 2) << args;
    EXPECT_EQ(run.err, "hfuse: error: --device cuda: no usable CUDA device: " + why + "\n") << args;
    EXPECT_EQ(run.out, "") << args;
  }
}

TEST(DeviceCuda, AnUnknownDeviceIsAUsageError) {
  const ToolRun run = RunTool("run " + kRanking + " --device tpu");
  EXPECT_EQ(run.code(), 2);
  EXPECT_THAT(run.err, HasSubstr("--device: tpu not in {cpu,cuda}"));
}

TEST(DeviceCuda, VerifyRunsTheFusedModelOnTheGpuAgainstTheCpuReference) {
  REQUIRE_GPU();
  for (const std::string& model : {kTowers, kRanking}) {
    const ToolRun run = RunTool("verify " + model + " --device cuda");
    EXPECT_TRUE(run.ok()) << run.out << run.err;
    EXPECT_THAT(run.out, HasSubstr("(hfuse rules) on cuda"));
    EXPECT_THAT(run.out, HasSubstr("verify: PASS"));
  }
}

TEST(DeviceCuda, RunAndBenchTakeOnnx) {
  REQUIRE_GPU();
  const ToolRun run = RunTool("run " + kRanking + " --device cuda");
  EXPECT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("score: float32 [64, 1]"));
#if HFUSE_TEST_HAVE_BENCH
  const ToolRun bench = RunTool("bench " + kRanking + " --device cuda --reps 20 --warmup 5");
  EXPECT_TRUE(bench.ok()) << bench.err;
  EXPECT_THAT(bench.out, HasSubstr("fused, hfuse rules"));
#endif
}

}  // namespace
}  // namespace hfuse
