// The C++ session's cost per Run on small models (CPU): the baseline that
// bench/session_overhead.py holds the Python module's run() against.
//
//   ./build/bench/session_bench [--benchmark_format=json]
//
// Each benchmark creates the session once (fusion and planning are not
// timed), builds the feeds once (RandomFeeds, seed 1), then times
// Session::Run with host tensors in and out.
#include <benchmark/benchmark.h>

#include <string>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/runtime/session.h"

namespace hfuse {
namespace {

void SessionRun(benchmark::State& state, const std::string& model) {
  Session session = Session::FromFile(std::string(HFUSE_SOURCE_DIR) + "/" + model);
  const TensorMap all = RandomFeeds(session.graph(), BindDims(session.graph()), 1);
  TensorMap feeds;
  for (const TensorInfo& i : session.inputs()) feeds[i.name] = all.at(i.name);
  for (auto _ : state) {
    TensorMap out = session.Run(feeds);
    benchmark::DoNotOptimize(out);
  }
}

BENCHMARK_CAPTURE(SessionRun, tiny_towers, std::string("bench/tiny_towers.json"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(SessionRun, ranking_small, std::string("examples/ranking_small.onnx"))
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hfuse

BENCHMARK_MAIN();
