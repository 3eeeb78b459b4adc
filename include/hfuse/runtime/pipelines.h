// The pass pipelines a model goes through before it runs, in one place: the
// CLI (fuse, verify, run, bench) and the session (runtime/session.h) call
// these, so that when the pass manager's named pipelines land, switching to
// them is an edit here only.
//
//   import:  ONNX input only: fuse-mm-elementwise, then flatten-gemm-inputs
//            (a Linear layer arrives as Gemm/MatMul + Add + activation;
//            graph JSON spells fused GEMMs out already, so JSON input skips
//            them, which keeps the conformance cases as they were).
//   fusion:  fuse-group-ops with the given options; for the GPU, then
//            elide-split-concat (splits and concatenates as strided views).
#pragma once

#include <cstdint>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/runtime/model_files.h"

namespace hfuse {

// Where a fused graph will run; the GPU pipeline also lays out views.
enum class Target : uint8_t { kCpu, kGpu };

// Returns the number of ops the import passes folded into GEMMs or reshaped.
int64_t RunImportPipeline(Graph& graph, ModelFormat format);

FuseGroupOpsResult RunFusionPipeline(Graph& graph, Target target,
                                     const FuseGroupOpsOptions& options);

}  // namespace hfuse
