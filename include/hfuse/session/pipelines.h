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
//   gpu          for the CUDA backend: fuse-group-ops, elide-split-concat
#pragma once

#include <cstdint>
#include <vector>

#include "hfuse/passes/pass_manager.h"
#include "hfuse/session/model_files.h"

namespace hfuse {

// Where a fused graph will run; the GPU pipeline also lays out views.
enum class Target : uint8_t { kCpu, kGpu };

// onnx-import for ONNX input, then seed (CPU) or gpu (GPU).
std::vector<const PassInfo*> DevicePipeline(ModelFormat format, Target target);

// What `hfuse fuse` and `verify` run by default: the CPU pipeline.
inline std::vector<const PassInfo*> FusePipeline(ModelFormat format) {
  return DevicePipeline(format, Target::kCpu);
}

}  // namespace hfuse
