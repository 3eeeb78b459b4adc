// The pass pipelines. See pipelines.h.
#include "hfuse/runtime/pipelines.h"

#include "hfuse/passes/flatten_gemm.h"
#include "hfuse/passes/fuse_mm_elementwise.h"
#include "hfuse/passes/strided_views.h"

namespace hfuse {

int64_t RunImportPipeline(Graph& graph, ModelFormat format) {
  if (format != ModelFormat::kOnnx) return 0;
  const int64_t absorbed = FuseMmElementwise(graph);
  return absorbed + FlattenGemmInputs(graph);
}

FuseGroupOpsResult RunFusionPipeline(Graph& graph, Target target,
                                     const FuseGroupOpsOptions& options) {
  FuseGroupOpsResult result = FuseGroupOps(graph, options);
  if (target == Target::kGpu) ElideSplitConcat(graph);
  return result;
}

}  // namespace hfuse
