// libFuzzer target: the pipeline on valid graphs. The input is read as graph
// JSON; when it is not a valid graph, its first bytes seed the random graph
// generator of the tests (tests/testing/random_graph.h), so that every input
// becomes a valid graph. The graph then goes through fuse-group-ops (and,
// on a flag byte, elide-split-concat) and the CPU executor, and the
// invariants must hold: the fused graph verifies (acyclic, user lists, op
// rules), keeps the graph outputs (names, dtypes, shapes), writes and reads
// back to the same bytes, and on the CPU gives the same bytes as the
// original on the same seeded inputs.
//
// Bounds, so that an execution takes about a millisecond under ASan (the CPU
// executor's per-element loops are what cost; 10^6 executions fit in well
// under an hour on one core):
// - random graphs have 1 to 60 ops and, for 3 inputs in 4, the generator's
//   small shapes (rows <= 16, features <= 64, the same alignment classes;
//   layernorm sizes keep their whole range); the rest its usual shapes;
// - the CPU runs a graph (twice: original and fused) only when all its
//   tensors together, dynamic dims at their min, fit in kCpuBudget (256 KiB);
//   a larger graph is fused and checked but not run;
// - parsing and fusing see the fuzz memory budget (fuzz_util.h).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/passes/pass_manager.h"
#include "hfuse/support/error.h"
#include "testing/random_graph.h"

namespace {

using hfuse::Graph;

// All the tensors of a graph that the CPU runs, together (both runs count
// it alone): 256 KiB keeps a run under a millisecond or so under ASan.
constexpr int64_t kCpuBudget = int64_t{256} << 10;

// What the executions checked, printed when the run ends (the figures in
// bench/RESULTS.md): how many were graph JSON, how many the fusion changed,
// how many ran on the CPU.
struct Counts {
  long executions = 0, json = 0, fused = 0, ran = 0;
};
Counts counts;
void PrintCounts() {
  std::fprintf(stderr,
               "pipeline fuzz: %ld executions: %ld graph JSON, %ld random graphs; %ld fused "
               "(fewer ops); %ld ran on the CPU (fused == unfused)\n",
               counts.executions, counts.json, counts.executions - counts.json, counts.fused,
               counts.ran);
}

Graph GraphOf(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Only a text that opens an object can be a graph: the others skip the
  // reader's thrown error (costly under ASan; graph_json fuzzes that path).
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    try {
      Graph graph = hfuse::ParseGraphJson(text, "fuzz.json");
      ++counts.json;
      return graph;
    } catch (const hfuse::InputError&) {
    }
  }
  uint64_t seed = 0;
  std::memcpy(&seed, data, std::min<size_t>(size, 8));
  hfuse::RandomGraphOptions options;
  options.min_ops = 1;
  options.max_ops = size > 8 ? 1 + data[8] % 60 : 20;
  options.wide = size > 9 && (data[9] & 1);
  options.dynamic_dims = size > 9 && (data[9] & 2);
  options.small_shapes = !(size > 9 && (data[9] & 12) == 12);
  const std::string json = hfuse::RandomGraphJson(seed, options);
  try {
    return hfuse::ParseGraphJson(json, "random.json");
  } catch (const hfuse::InputError& e) {
    hfuse::fuzz::InvariantFailed("the random graph generator made an invalid graph:", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hfuse::fuzz::Init();
  static const bool registered = std::atexit(PrintCounts) == 0;
  (void)registered;
  ++counts.executions;
  const Graph original = GraphOf(data, size);
  const uint8_t flags = size > 10 ? data[10] : 0;
  Graph fused = original;
  hfuse::PassOptions options;
  options.fuse_group_ops.group_gemm = !(flags & 1);
  // The seed pipeline, or the gpu one (with elide-split-concat); the graph
  // and the IR invariants verified after every pass.
  hfuse::PassState result(fused);
  try {
    hfuse::PassManager(hfuse::PipelineNamed(flags & 2 ? "gpu" : "seed"),
                       hfuse::PassManagerOptions::VerifyingEach())
        .Run(result, options);
  } catch (const hfuse::InternalError& e) {
    hfuse::fuzz::InvariantFailed("the fused graph does not verify:", e.what());
  }
  if (fused.NumLiveOps() < original.NumLiveOps()) ++counts.fused;
  HFUSE_FUZZ_EXPECT(fused.outputs().size() == original.outputs().size(), "outputs lost");
  for (size_t i = 0; i < fused.outputs().size(); ++i) {
    const hfuse::Tensor& a = original.tensor(original.outputs()[i]);
    const hfuse::Tensor& b = fused.tensor(fused.outputs()[i]);
    HFUSE_FUZZ_EXPECT(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape, a.name.c_str());
  }
  if (!(flags & 2)) {  // views are not part of graph JSON
    const std::string text = hfuse::WriteGraphJson(fused, result.op_order);
    const std::string again = hfuse::WriteGraphJson(hfuse::ParseGraphJson(text, "fused.json"));
    HFUSE_FUZZ_EXPECT(again == text, "the fused graph does not read back to the same bytes");
  }
  // Same bytes on the CPU: a group runs its members with the same kernels.
  // Dynamic dims at their min: small tensors, and empty ones when it is 0.
  std::map<std::string, int64_t> at_min;
  for (const hfuse::DynamicDim& d : original.dims()) at_min[d.name] = d.min;
  const hfuse::DimValues dims = hfuse::BindDims(original, at_min);
  hfuse::TensorMap feeds;
  hfuse::SetMemoryBudget(kCpuBudget);
  try {
    // Refuses a graph whose tensors together are over the budget.
    feeds = hfuse::RandomFeeds(original, dims, 7);
  } catch (const hfuse::InputError&) {
    hfuse::SetMemoryBudget(hfuse::fuzz::kFuzzMemoryBudget);
    return 0;  // fused and checked above, not run
  }
  hfuse::SetMemoryBudget(hfuse::fuzz::kFuzzMemoryBudget);
  try {
    const hfuse::TensorMap want = hfuse::RunOnCpu(original, feeds, dims);
    const hfuse::TensorMap got = hfuse::RunOnCpu(fused, feeds, hfuse::BindDims(fused, at_min));
    HFUSE_FUZZ_EXPECT(want.size() == got.size(), "outputs lost on the CPU");
    for (const auto& [name, t] : want) {
      auto it = got.find(name);
      HFUSE_FUZZ_EXPECT(it != got.end() && it->second.shape == t.shape &&
                            it->second.bytes == t.bytes,
                        name.c_str());
    }
    ++counts.ran;
  } catch (const hfuse::InputError& e) {
    hfuse::fuzz::InvariantFailed("the CPU refused a graph whose inputs it took:", e.what());
  }
  return 0;
}
