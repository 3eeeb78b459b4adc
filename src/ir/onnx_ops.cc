// The table of opaque ONNX operators (onnx_ops.h), made from onnx_ops.def.
#include "hfuse/ir/onnx_ops.h"

#include <algorithm>
#include <array>

namespace hfuse {
namespace {

constexpr OnnxOpInfo kOps[] = {
#define HFUSE_ONNX_OP(Name, Shape, Fold, Cpu, Fast, Cuda) {#Name, #Shape, #Fold, #Cpu, #Fast, #Cuda},
#include "hfuse/ir/onnx_ops.def"
#undef HFUSE_ONNX_OP
};

}  // namespace

std::span<const OnnxOpInfo> OnnxOps() { return kOps; }

const OnnxOpInfo* FindOnnxOp(std::string_view op_type) {
  const auto* it = std::find_if(std::begin(kOps), std::end(kOps),
                                [&](const OnnxOpInfo& op) { return op.name == op_type; });
  return it == std::end(kOps) ? nullptr : it;
}

}  // namespace hfuse
