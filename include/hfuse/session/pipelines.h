// Which pass pipeline a model runs before it is written or run, in one
// place: the CLI (fuse, verify, run, bench) and the session
// (session/session.h) take their default pipeline from here. The pipelines
// themselves are the pass manager's named ones (passes/pass_manager.h):
//
//   onnx-import  ONNX input only, first: fuse-mm-elementwise, then
//                flatten-gemm-inputs (a Linear layer arrives as Gemm/MatMul +
//                Add + activation; graph JSON spells fused GEMMs out
//                already, so JSON input skips them, which keeps the
//                conformance cases as they were)
//   seed         for the CPU (and for `hfuse fuse`): fuse-group-ops
//   hfuse        the same under the hfuse rules (`--rules hfuse`):
//                fuse-group-ops, fuse-group-gathers
//   gpu          for the CUDA backend: fuse-group-ops, fuse-group-gathers,
//                elide-split-concat (the gathers group under the hfuse
//                rules only, which the GPU takes by default)
#pragma once

#include <cstdint>
#include <vector>

#include "hfuse/passes/pass_manager.h"
#include "hfuse/session/model_files.h"

namespace hfuse {

// Where a fused graph will run; the GPU pipeline also lays out views.
enum class Target : uint8_t { kCpu, kGpu };

// onnx-import for ONNX input, then seed or hfuse (CPU, by the rules) or gpu (GPU).
std::vector<const PassInfo*> DevicePipeline(ModelFormat format, Target target,
                                            RuleSet rules = RuleSet::kSeed);
// The fusion pipeline alone: seed, hfuse or gpu.
std::vector<const PassInfo*> FusionPipeline(Target target, RuleSet rules);

// What `hfuse fuse` and `verify` run by default: the CPU pipeline.
inline std::vector<const PassInfo*> FusePipeline(ModelFormat format, RuleSet rules = RuleSet::kSeed) {
  return DevicePipeline(format, Target::kCpu, rules);
}

}  // namespace hfuse
