// The ONNX operators hfuse keeps opaque, as one table (onnx_ops.def says
// what each column means): which operators hfuse knows, and where each one
// runs. Every layer that dispatches on an operator derives its table from
// the same .def; this header is the table as data, for what only reads it
// (`hfuse --list-ops`, `hfuse check`, the CUDA backend's report of what runs
// on the host).
#pragma once

#include <span>
#include <string_view>

namespace hfuse {

struct OnnxOpInfo {
  std::string_view name;   // the op_type
  std::string_view shape;  // the importer's shape rule ("Onnx": ONNX's inference alone)
  std::string_view fold;   // "Shape" or "Value"
  std::string_view cpu;    // the CPU reference kernel
  std::string_view fast;   // the CPU fast kernel, or "Ref"
  std::string_view cuda;   // the CUDA planner, or "Host"
};

// Every operator of onnx_ops.def, in its order.
std::span<const OnnxOpInfo> OnnxOps();
// The operator `op_type` of the default domain, or null.
const OnnxOpInfo* FindOnnxOp(std::string_view op_type);

}  // namespace hfuse
