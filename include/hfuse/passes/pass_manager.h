// The pass manager: one registry of passes (passes.def), the named
// pipelines, and the debug flags of every command that transforms a graph.
//
// A pass is a free function with a small options struct (its own header);
// its wrapper here runs it on a PassState and says whether it changed the
// graph, with its statistics. The manager runs a pipeline (a list of
// passes), and owns what the shape of XLA's HloPassPipeline and Glow's
// PassManager put there: print the graph after a pass (--print-after), verify
// it after every pass (--verify-each: an InternalError naming the pass),
// stop after a pass (--stop-after) and time each pass (--time-passes).
//
// Pipelines (--passes accepts their names too, and any mix with passes):
//   seed         fuse-group-ops: what `hfuse fuse` runs on graph JSON
//   onnx-import  einsum-to-gemm, einsum-to-matmul, left-matmul-to-gemm,
//                pointwise-conv-to-gemm, fold-batchnorm, fuse-mm-elementwise,
//                flatten-gemm-inputs: what ONNX input
//                goes through first (so `hfuse fuse model.onnx` runs
//                onnx-import then seed)
//   hfuse        fuse-group-ops, fuse-group-gathers: `hfuse fuse --rules
//                hfuse` (the gathers group under the hfuse rules only)
//   gpu          fuse-group-ops, fuse-group-gathers, elide-split-concat: what
//                the CUDA backend runs
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/passes/fuse_mm_elementwise.h"

namespace hfuse {

// The passes' options, one struct each.
struct PassOptions {
  FuseGroupOpsOptions fuse_group_ops;
  FuseMmElementwiseOptions fuse_mm_elementwise;
};

// What a pipeline carries from pass to pass.
struct PassState {
  explicit PassState(Graph& g) : graph(g) {}
  Graph& graph;
  // The order in which to write the ops: fuse-group-ops' final sorted order,
  // kept while later passes keep it (passes.def); empty: by id.
  std::vector<OpId> op_order;
  // fuse-group-ops' result (groups, op counts, dumps), if it ran; its
  // op_order has moved to the field above. fuse-group-gathers adds its
  // groups, reasons and dumps to it (and sets it if it ran alone).
  bool fused = false;
  FuseGroupOpsResult fuse_result;
};

struct PassResult {
  bool changed = false;
  std::vector<std::pair<std::string, int64_t>> stats;  // name, value; in the pass's order
};

struct PassInfo {
  std::string_view name;
  bool keeps_op_order;
  std::string_view summary;
  PassResult (*run)(PassState& state, const PassOptions& options);
};

// Every pass, in passes.def's order.
const std::vector<PassInfo>& RegisteredPasses();
const PassInfo* FindPass(std::string_view name);

struct NamedPipeline {
  std::string_view name;
  std::vector<std::string_view> passes;
  std::string_view summary;
};
const std::vector<NamedPipeline>& NamedPipelines();
// A pipeline named in NamedPipelines() as its passes.
std::vector<const PassInfo*> PipelineNamed(std::string_view name);
// "a,b,c": pass and pipeline names (pipelines expand in place); InputError
// naming an unknown one.
std::vector<const PassInfo*> ParsePassList(std::string_view spec);
// The --list-passes text: every pass, then every pipeline.
std::string ListPassesText();

struct PassManagerOptions {
  bool verify_each = false;
  std::string print_after;  // a pass name, or "all"
  std::string stop_after;   // a pass name: run no pass after its first run
  bool time_passes = false;
  std::FILE* debug_out = stderr;  // where --print-after and --time-passes write

  static PassManagerOptions VerifyingEach() {
    PassManagerOptions o;
    o.verify_each = true;
    return o;
  }
};

// What each pass did, in the order they ran.
struct PassRecord {
  std::string_view name;
  PassResult result;
  double seconds = 0;
};

class PassManager {
 public:
  explicit PassManager(std::vector<const PassInfo*> passes, PassManagerOptions options = {});
  // Runs the pipeline on state.graph, which must verify. InputError if
  // print_after or stop_after names no pass of the registry.
  void Run(PassState& state, const PassOptions& options = {});
  const std::vector<PassRecord>& records() const { return records_; }
  const std::vector<const PassInfo*>& passes() const { return passes_; }

 private:
  std::vector<const PassInfo*> passes_;
  PassManagerOptions options_;
  std::vector<PassRecord> records_;
};

}  // namespace hfuse
