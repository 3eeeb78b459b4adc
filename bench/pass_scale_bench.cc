// The fuse-group-ops pipeline at scale: reading, verifying, sorting, the pass
// and writing, timed separately on generated graphs of 10^3 to 10^6 ops
// (tools/hfuse_gen/gen_graphs.h: "towers", the shape of the scale
// conformance case, and "lanes", wide and deep with edges across lanes so
// that the cycle check fires). Each phase is one benchmark; the graph text
// is generated once per size and not timed. Counters: ops, groups, members
// dropped by the cycle check, and the process's peak RSS so far (sizes run
// in increasing order, so after the largest it is that size's peak; for a
// clean per-run figure use scripts/bench_scale.sh, which times whole `hfuse
// fuse` processes).
//
//   ./build/bench/pass_scale_bench                      # all sizes
//   ./build/bench/pass_scale_bench --benchmark_filter=towers/1000000
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gen_graphs.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/ir/graph.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/canonical_order.h"
#include "hfuse/passes/fuse_group_ops.h"

namespace hfuse {
namespace {

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // kB on Linux
}

// One generated graph: its text and, once read, the graph (kept so that the
// later phases need not read it again).
struct Case {
  std::string text;
  std::unique_ptr<Graph> graph;
};

Case& GetCase(const std::string& shape, int64_t ops) {
  static std::map<std::pair<std::string, int64_t>, Case> cases;
  Case& c = cases[{shape, ops}];
  if (c.text.empty()) {
    // Drop the other sizes first: at 10^6 ops a case is a GB or so.
    for (auto it = cases.begin(); it != cases.end();) {
      it = (it->first != std::pair(shape, ops)) ? cases.erase(it) : std::next(it);
    }
    if (shape == "towers") {
      c.text = gen::TowersGraphJson({.towers = gen::TowersForOps(ops), .rows = 256});
    } else {
      c.text = gen::LanesGraphJson({.ops = ops, .width = 64, .cross = 0.15, .seed = 1, .rows = 64});
    }
    c.graph = std::make_unique<Graph>(ParseGraphJson(c.text, shape));
  }
  return c;
}

void Counters(benchmark::State& state, const Graph& graph) {
  state.counters["ops"] = static_cast<double>(graph.NumLiveOps());
  state.counters["peak_rss_mb"] = PeakRssMb();
}

// ParseGraphJson: parsing, building the graph, and VerifyGraph.
void BmRead(benchmark::State& state, std::string shape) {
  Case& c = GetCase(shape, state.range(0));
  for (auto _ : state) {
    Graph g = ParseGraphJson(c.text, shape);
    benchmark::DoNotOptimize(g.num_op_ids());
    state.PauseTiming();
    g = Graph();  // freeing a million ops is not reading
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(c.text.size()));
  Counters(state, *c.graph);
}

void BmVerify(benchmark::State& state, std::string shape) {
  Case& c = GetCase(shape, state.range(0));
  for (auto _ : state) VerifyGraph(*c.graph);
  Counters(state, *c.graph);
}

// The canonical order as the pass computes it first: dead ops, construction
// order and depths, AITemplate's toposort, numbering, no-op removal.
void BmSort(benchmark::State& state, std::string shape) {
  Case& c = GetCase(shape, state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    auto g = std::make_unique<Graph>(*c.graph);
    state.ResumeTiming();
    Canonicalize(*g);
    std::vector<TensorId> sorted = SortTensors(*g, g->outputs());
    benchmark::DoNotOptimize(SortedOps(*g, sorted).size());
    RemoveNoOps(*g, sorted);
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
  Counters(state, *c.graph);
}

// FuseGroupOps: the sort above plus one round per op type (planning,
// rewriting, re-sorting).
void BmPass(benchmark::State& state, std::string shape) {
  Case& c = GetCase(shape, state.range(0));
  FuseGroupOpsResult result;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = std::make_unique<Graph>(*c.graph);
    state.ResumeTiming();
    result = FuseGroupOps(*g);
    state.PauseTiming();
    g.reset();
    state.ResumeTiming();
  }
  Counters(state, *c.graph);
  state.counters["groups"] = static_cast<double>(result.groups.size());
  state.counters["ops_after"] = static_cast<double>(result.ops_after);
  state.counters["cycle_drops"] = static_cast<double>(result.dropped_by_cycle_check);
}

void BmWrite(benchmark::State& state, std::string shape) {
  Case& c = GetCase(shape, state.range(0));
  Graph g = *c.graph;
  const FuseGroupOpsResult result = FuseGroupOps(g);
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = WriteGraphJson(g, result.op_order);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  Counters(state, g);
}

void Register() {
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"towers", {1000, 10000, 100000, 1000000}},
      {"lanes", {1000, 10000, 100000, 1000000}},
  };
  using Fn = void (*)(benchmark::State&, std::string);
  const std::vector<std::pair<const char*, Fn>> phases = {{"read", BmRead},
                                                          {"verify", BmVerify},
                                                          {"sort", BmSort},
                                                          {"pass", BmPass},
                                                          {"write", BmWrite}};
  // Size-major, so that each size's graph is generated once.
  for (const auto& [shape, sizes] : shapes) {
    for (int64_t n : sizes) {
      for (const auto& [phase, fn] : phases) {
        auto* b =
            benchmark::RegisterBenchmark(fmt::format("{}/{}", phase, shape).c_str(), fn, shape);
        b->Arg(n)->Unit(benchmark::kMillisecond)->UseRealTime();
        if (n >= 100000) b->Iterations(n >= 1000000 ? 1 : 3);
      }
    }
  }
}

}  // namespace
}  // namespace hfuse

int main(int argc, char** argv) {
  hfuse::Register();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
