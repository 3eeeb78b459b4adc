// The C++ session's cost per Run on small models (CPU): the baseline that
// bench/session_overhead.py holds the Python module's run() against.
//
//   ./build/bench/session_bench [google benchmark flags]
//   ./build/bench/session_bench --calls MODEL N [params]
//
// Each benchmark creates the session once (fusion and planning are not
// timed), builds the feeds once (RandomFeeds, seed 1), then times
// Session::Run with host tensors in and out. `--calls` times the same loop
// the way the Python side times run(): 200 warm-up calls, then 5 rounds of
// N calls, and prints the median round's mean thread CPU time and wall time
// per call, in microseconds, as "cpu_us wall_us" (thread CPU time leaves out
// the time the process waited for a core, which on a shared machine dwarfs
// the work). With `params`, the params without values (graph JSON's) are
// given at creation (SessionOptions::params), so that a run feeds the
// inputs alone.
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/session/session.h"

namespace hfuse {
namespace {

TensorMap FeedsOf(const Session& session) {
  const TensorMap all = RandomFeeds(session.graph(), BindDims(session.graph()), 1);
  TensorMap feeds;
  for (const TensorInfo& i : session.inputs()) feeds[i.name] = all.at(i.name);
  return feeds;
}

void SessionRun(benchmark::State& state, const std::string& model) {
  Session session = Session::FromFile(std::string(HFUSE_SOURCE_DIR) + "/" + model);
  const TensorMap feeds = FeedsOf(session);
  for (auto _ : state) {
    TensorMap out = session.Run(feeds);
    benchmark::DoNotOptimize(out);
  }
}

BENCHMARK_CAPTURE(SessionRun, tiny_towers, std::string("bench/tiny_towers.json"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(SessionRun, ranking_small, std::string("examples/ranking_small.onnx"))
    ->Unit(benchmark::kMicrosecond);

double ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

int TimeCalls(const std::string& model, int calls, bool params) {
  Session session = Session::FromFile(model);
  if (params) {
    SessionOptions options;
    const TensorMap all = FeedsOf(session);
    for (const auto& [name, t] : all) {
      if (session.graph().tensor(*session.graph().FindTensor(name)).role == Role::kParam) {
        options.params[name] = t;
      }
    }
    session = Session::FromFile(model, options);
  }
  const TensorMap feeds = FeedsOf(session);
  for (int i = 0; i < 200; ++i) benchmark::DoNotOptimize(session.Run(feeds));
  std::vector<std::pair<double, double>> rounds;  // (cpu, wall) ns per call
  for (int r = 0; r < 5; ++r) {
    const double c0 = ThreadCpuNs();
    const auto w0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) benchmark::DoNotOptimize(session.Run(feeds));
    const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - w0).count();
    rounds.emplace_back((ThreadCpuNs() - c0) / calls, wall / calls);
  }
  std::vector<double> cpu, wall;
  for (auto [c, w] : rounds) cpu.push_back(c), wall.push_back(w);
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  std::printf("%.3f %.3f\n", cpu[2] / 1e3, wall[2] / 1e3);
  return 0;
}

}  // namespace
}  // namespace hfuse

int main(int argc, char** argv) {
  if ((argc == 4 || argc == 5) && std::strcmp(argv[1], "--calls") == 0) {
    return hfuse::TimeCalls(argv[2], std::atoi(argv[3]),
                            argc == 5 && std::strcmp(argv[4], "params") == 0);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
