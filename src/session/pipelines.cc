// The default pipelines. See pipelines.h.
#include "hfuse/session/pipelines.h"

namespace hfuse {

std::vector<const PassInfo*> DevicePipeline(ModelFormat format, Target target) {
  std::vector<const PassInfo*> passes;
  if (format == ModelFormat::kOnnx) passes = PipelineNamed("onnx-import");
  const std::vector<const PassInfo*> fusion = PipelineNamed(target == Target::kGpu ? "gpu" : "seed");
  passes.insert(passes.end(), fusion.begin(), fusion.end());
  return passes;
}

}  // namespace hfuse
