// Models newer than the ONNX library hfuse links. hfuse checks models and
// infers their shapes with Debian's libonnx 1.12, which knows default-domain
// opsets up to 17 and IR versions up to 8; current exporters write opsets
// up to kMaxOnnxOpset (28) and IR versions up to 14 (ONNX 1.23, onnx_import.h). Most operators did not
// change after opset 17, and most that did only gained element types hfuse
// does not carry (float8, int4, ...), so for those the node means what it
// meant at opset 17. The rest changed form (Split's num_outputs and the
// reductions' axes as an input at 18, Gelu as an op at 20, ...).
//
// ForLinkedOnnx makes the copy of such a model that ONNX 1.12 checks and
// infers shapes on: the same graph, value names and nodes, at opset 17 and
// IR 8, each node whose operator changed after opset 17 rewritten into the
// opset-17 form that computes the same (or into an Identity, for a new
// element-wise op like Gelu, which keeps its input's type and shape). The
// importer reads the inferred types back into the model itself and imports
// its nodes as they are, so the model is exported in the opset it came with.
// A node whose newer semantics hfuse does not implement (DFT-20's axis
// input, Pad-19's wrap mode, Attention-23, ...) is refused: every such node
// is named, with its operator version, in one error.
//
// kOpsetChanges (opset_compat.cc) is the one list of what changed after
// opset 17 and how hfuse reads it; README.md ("ONNX") summarises it.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace hfuse::onnx_compat {

inline constexpr int64_t kLinkedOpset = 17;     // ONNX 1.12's newest default-domain opset
inline constexpr int64_t kLinkedIrVersion = 8;  // and IR version

// Whether `model` (default-domain opset `opset`) needs the copy: an opset
// above 17 or an IR version above 8.
bool NeedsLinkedCopy(const onnx::ModelProto& model, int64_t opset);

// The copy of `model` that ONNX 1.12 reads, as above; throws InputError
// ("SOURCE: ...") naming every node hfuse cannot read at this opset.
onnx::ModelProto ForLinkedOnnx(const onnx::ModelProto& model, int64_t opset,
                               const std::string& source);

}  // namespace hfuse::onnx_compat
