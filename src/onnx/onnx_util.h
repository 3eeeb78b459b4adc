// What the ONNX importer and exporter share: element types, tensor data in
// and out of TensorProto, a node's attributes, the ai.hfuse domain's op
// types, fresh names, and input errors naming the model.
#pragma once

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/support/error.h"

namespace hfuse::onnx_util {

inline constexpr const char* kHfuseDomain = "ai.hfuse";
inline constexpr int64_t kHfuseDomainVersion = 1;

// float32 / float16 / bfloat16, or nothing for any other element type.
std::optional<DType> DTypeOf(int32_t elem_type);
// Any dtype of the IR (the float ones, int64, int32, bool), or nothing.
std::optional<DType> AnyDTypeOf(int32_t elem_type);
int32_t ElemTypeOf(DType dtype);
// "int64", "double", ... for messages.
std::string ElemTypeName(int32_t elem_type);
int ElemTypeBytes(int32_t elem_type);  // 0 for strings and unknown types

// A tensor's values as little-endian bytes, from raw_data or the typed
// fields; nothing when the size does not fit the dims or the type has no
// fixed size (strings).
std::optional<std::vector<uint8_t>> TensorData(const onnx::TensorProto& tensor);
// An int64 or int32 tensor's values.
std::optional<std::vector<int64_t>> TensorInts(const onnx::TensorProto& tensor);
int64_t TensorNumel(const onnx::TensorProto& tensor);

// Builds a TensorProto with raw data.
onnx::TensorProto MakeTensor(const std::string& name, int32_t elem_type,
                             const std::vector<int64_t>& dims, const void* data, size_t bytes);
onnx::TensorProto MakeInt64Tensor(const std::string& name, const std::vector<int64_t>& values);

// The ai.hfuse op type of a group op ("GroupGemmRcrBias"), and back.
std::string_view HfuseOpType(OpType group_type);
std::optional<OpType> ParseHfuseOpType(std::string_view op_type);
// The one standard ONNX op computing a GEMM kind's activation (Relu, Sigmoid, Tanh).
std::string_view OnnxActivationOp(EwFunc func);

// Hands out names that collide with none taken so far.
class NameSet {
 public:
  void Take(const std::string& name) { taken_.insert(name); }
  bool Taken(const std::string& name) const { return taken_.count(name) != 0; }
  // `base`, or `base_1`, `base_2`, ... ; the result is taken.
  std::string Fresh(const std::string& base);

 private:
  std::unordered_set<std::string> taken_;
};

// A message from ONNX (checker, shape inference) on one line.
std::string OneLine(std::string_view message);

// An input error "SOURCE: message", SOURCE naming the model.
template <typename... Args>
[[noreturn]] void Fail(const std::string& source, fmt::format_string<Args...> format,
                       Args&&... args) {
  ThrowInputError("{}: {}", source, fmt::format(format, std::forward<Args>(args)...));
}

// A node's attribute `name`, or null; its value as an int, float or ints
// when it has that type, else `fallback` (nothing for ints).
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, std::string_view name);
int64_t IntAttr(const onnx::NodeProto& node, std::string_view name, int64_t fallback);
double FloatAttr(const onnx::NodeProto& node, std::string_view name, double fallback);
std::vector<int64_t> IntsAttr(const onnx::NodeProto& node, std::string_view name);
// The default ONNX domain ("" or "ai.onnx").
bool IsDefaultDomain(const onnx::NodeProto& node);

}  // namespace hfuse::onnx_util
