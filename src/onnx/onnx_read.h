// Reading an ONNX model up to the point where the importer's walk
// (importer.h) can take it: the protobuf parsed, the default-domain opset
// and IR version checked against what hfuse reads, external data read in
// (inside the model's folder, exactly the bytes the dims need), every
// constant tensor's data checked against its dims (ONNX 1.12 trusts them),
// If nodes on a constant condition replaced by the branch they take, dims
// an earlier shape inference made up forgotten, then ONNX 1.12's checker
// and strict shape inference run (on the opset-17 copy of a newer model:
// opset_compat.h, whose inferred types are read back). Last, an If whose
// condition follows from the inferred shapes (`if x.dim() == 3:` as
// Equal(Size(Shape(x)), 3)) is replaced by its branch too, and the model
// checked and inferred again, until no more go.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace hfuse::onnx_import {

// The model, checked and with its value types inferred; throws InputError
// ("SOURCE: ...") for anything it cannot read. `model_dir` is where
// external data files are looked for. `bound_dims` (named dim -> value):
// an If that the shapes decide only once these dims have their values
// (`if x.shape[0] == 1:`) is folded to the branch those values take, and
// the names of the dims that were read for it go into `specialised`.
onnx::ModelProto ReadModel(std::string_view bytes, const std::string& source,
                           const std::string& model_dir,
                           const std::map<std::string, int64_t>& bound_dims = {},
                           std::set<std::string>* specialised = nullptr);

}  // namespace hfuse::onnx_import
