// The default pipelines. See pipelines.h.
#include "hfuse/session/pipelines.h"

namespace hfuse {

std::vector<const PassInfo*> FusionPipeline(Target target, RuleSet rules) {
  if (target == Target::kGpu) return PipelineNamed("gpu");
  return PipelineNamed(rules == RuleSet::kHfuse ? "hfuse" : "seed");
}

std::vector<const PassInfo*> DevicePipeline(ModelFormat format, Target target, RuleSet rules) {
  std::vector<const PassInfo*> passes;
  if (format == ModelFormat::kOnnx) passes = PipelineNamed("onnx-import");
  const std::vector<const PassInfo*> fusion = FusionPipeline(target, rules);
  passes.insert(passes.end(), fusion.begin(), fusion.end());
  return passes;
}

}  // namespace hfuse
