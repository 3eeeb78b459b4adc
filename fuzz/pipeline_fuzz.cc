// libFuzzer target: the pipeline on valid graphs. The input is read as graph
// JSON; when it is not a valid graph, its first bytes seed the random graph
// generator of the tests (tests/testing/random_graph.h), so that every input
// becomes a valid graph. The graph then goes through fuse-group-ops (and,
// on a flag byte, elide-split-concat) and the CPU executor, and the
// invariants must hold: the fused graph verifies (acyclic, user lists, op
// rules), keeps the graph outputs (names, dtypes, shapes), writes and reads
// back to the same bytes, and on the CPU gives the same bytes as the
// original on the same seeded inputs.
#include <fmt/format.h>

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

Graph GraphOf(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    return hfuse::ParseGraphJson(text, "fuzz.json");
  } catch (const hfuse::InputError&) {
  }
  uint64_t seed = 0;
  std::memcpy(&seed, data, std::min<size_t>(size, 8));
  hfuse::RandomGraphOptions options;
  options.min_ops = 1;
  options.max_ops = size > 8 ? 1 + data[8] % 60 : 20;
  options.wide = size > 9 && (data[9] & 1);
  options.dynamic_dims = size > 9 && (data[9] & 2);
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
  // Two CPU runs per input: graphs of up to 4 MiB of tensors run (a few ms
  // under ASan); larger ones are only fused and checked, not run.
  hfuse::SetMemoryBudget(int64_t{4} << 20);
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
  try {
    // Dynamic dims at their min: small tensors, and empty ones when it is 0.
    std::map<std::string, int64_t> at_min;
    for (const hfuse::DynamicDim& d : original.dims()) at_min[d.name] = d.min;
    const hfuse::DimValues dims = hfuse::BindDims(original, at_min);
    const hfuse::TensorMap feeds = hfuse::RandomFeeds(original, dims, 7);
    const hfuse::TensorMap want = hfuse::RunOnCpu(original, feeds, dims);
    const hfuse::TensorMap got = hfuse::RunOnCpu(fused, feeds, hfuse::BindDims(fused, at_min));
    HFUSE_FUZZ_EXPECT(want.size() == got.size(), "outputs lost on the CPU");
    for (const auto& [name, t] : want) {
      auto it = got.find(name);
      HFUSE_FUZZ_EXPECT(it != got.end() && it->second.shape == t.shape &&
                            it->second.bytes == t.bytes,
                        name.c_str());
    }
  } catch (const hfuse::InputError&) {
    // Over the fuzz memory budget: the pass was still checked above.
  }
  return 0;
}
