// Helpers shared by the ONNX importer and exporter. See onnx_util.h.
#include "onnx_util.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <optional>
#include <span>

#include "hfuse/support/checked.h"

#include "hfuse/support/error.h"

namespace hfuse::onnx_util {
namespace {

using onnx::TensorProto;

template <typename T, typename Field>
std::vector<uint8_t> Pack(const Field& field) {
  std::vector<uint8_t> bytes(static_cast<size_t>(field.size()) * sizeof(T));
  for (int i = 0; i < field.size(); ++i) {
    const T v = static_cast<T>(field.Get(i));
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
  return bytes;
}

}  // namespace

std::optional<DType> DTypeOf(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT: return DType::kFloat32;
    case TensorProto::FLOAT16: return DType::kFloat16;
    case TensorProto::BFLOAT16: return DType::kBFloat16;
    default: return std::nullopt;
  }
}

std::optional<DType> AnyDTypeOf(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::INT64: return DType::kInt64;
    case TensorProto::INT32: return DType::kInt32;
    case TensorProto::BOOL: return DType::kBool;
    default: return DTypeOf(elem_type);
  }
}

int32_t ElemTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kInt64: return TensorProto::INT64;
    case DType::kInt32: return TensorProto::INT32;
    case DType::kBool: return TensorProto::BOOL;
    case DType::kFloat32: return TensorProto::FLOAT;
    case DType::kFloat16: return TensorProto::FLOAT16;
    case DType::kBFloat16: return TensorProto::BFLOAT16;
  }
  return TensorProto::UNDEFINED;
}

std::string ElemTypeName(int32_t elem_type) {
  if (!TensorProto::DataType_IsValid(elem_type) || elem_type == TensorProto::UNDEFINED) {
    return fmt::format("an unknown element type ({})", elem_type);
  }
  std::string name = TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

int ElemTypeBytes(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
    case TensorProto::UINT32: return 4;
    case TensorProto::DOUBLE:
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::COMPLEX64: return 8;
    case TensorProto::COMPLEX128: return 16;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
    case TensorProto::INT16:
    case TensorProto::UINT16: return 2;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL: return 1;
    default: return 0;
  }
}

int64_t TensorNumel(const TensorProto& tensor) {
  const std::optional<int64_t> n =
      ElementCount(std::span<const int64_t>(tensor.dims().data(), tensor.dims().size()));
  return n ? *n : -1;
}

std::optional<std::vector<uint8_t>> TensorData(const TensorProto& tensor) {
  const int width = ElemTypeBytes(tensor.data_type());
  const int64_t numel = TensorNumel(tensor);
  if (width == 0 || numel < 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  if (tensor.has_raw_data()) {
    bytes.assign(tensor.raw_data().begin(), tensor.raw_data().end());
  } else {
    switch (tensor.data_type()) {
      case TensorProto::FLOAT: bytes = Pack<float>(tensor.float_data()); break;
      case TensorProto::DOUBLE: bytes = Pack<double>(tensor.double_data()); break;
      case TensorProto::INT64: bytes = Pack<int64_t>(tensor.int64_data()); break;
      case TensorProto::UINT32:
      case TensorProto::UINT64:
        bytes = width == 4 ? Pack<uint32_t>(tensor.uint64_data())
                           : Pack<uint64_t>(tensor.uint64_data());
        break;
      case TensorProto::INT32: bytes = Pack<int32_t>(tensor.int32_data()); break;
      // 16- and 8-bit types keep one value per int32_data entry.
      case TensorProto::FLOAT16:
      case TensorProto::BFLOAT16:
      case TensorProto::INT16:
      case TensorProto::UINT16: bytes = Pack<uint16_t>(tensor.int32_data()); break;
      case TensorProto::INT8:
      case TensorProto::UINT8:
      case TensorProto::BOOL: bytes = Pack<uint8_t>(tensor.int32_data()); break;
      default: return std::nullopt;
    }
  }
  const std::optional<int64_t> want = CheckedMul(numel, width);
  if (!want || static_cast<int64_t>(bytes.size()) != *want) return std::nullopt;
  return bytes;
}

std::optional<std::vector<int64_t>> TensorInts(const TensorProto& tensor) {
  if (tensor.data_type() != TensorProto::INT64 && tensor.data_type() != TensorProto::INT32) {
    return std::nullopt;
  }
  const auto bytes = TensorData(tensor);
  if (!bytes) return std::nullopt;
  std::vector<int64_t> values;
  const bool wide = tensor.data_type() == TensorProto::INT64;
  for (size_t at = 0; at < bytes->size(); at += wide ? 8 : 4) {
    if (wide) {
      int64_t v;
      std::memcpy(&v, bytes->data() + at, 8);
      values.push_back(v);
    } else {
      int32_t v;
      std::memcpy(&v, bytes->data() + at, 4);
      values.push_back(v);
    }
  }
  return values;
}

TensorProto MakeTensor(const std::string& name, int32_t elem_type, const std::vector<int64_t>& dims,
                       const void* data, size_t bytes) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(elem_type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(data, bytes);
  return t;
}

TensorProto MakeInt64Tensor(const std::string& name, const std::vector<int64_t>& values) {
  return MakeTensor(name, TensorProto::INT64, {static_cast<int64_t>(values.size())}, values.data(),
                    values.size() * sizeof(int64_t));
}

std::string_view HfuseOpType(OpType group_type) {
  return OpKind(group_type).onnx_name;
}

std::string_view OnnxActivationOp(EwFunc func) {
  switch (func) {
    case EwFunc::kRelu: return "Relu";
    case EwFunc::kSigmoid: return "Sigmoid";
    case EwFunc::kTanh: return "Tanh";
    default: break;
  }
  HFUSE_CHECK(false && "no single ONNX op for this activation");
  return "";
}

std::optional<OpType> ParseHfuseOpType(std::string_view op_type) {
  for (size_t i = 0; i < std::size(kOpKinds); ++i) {
    if (!kOpKinds[i].onnx_name.empty() && kOpKinds[i].onnx_name == op_type) {
      return static_cast<OpType>(i);
    }
  }
  return std::nullopt;
}

std::string NameSet::Fresh(const std::string& base) {
  std::string name = base;
  for (int n = 1; Taken(name); ++n) name = fmt::format("{}_{}", base, n);
  Take(name);
  return name;
}

std::string OneLine(std::string_view message) {
  std::string line;
  bool space = false;
  for (char c : message) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !line.empty();
      continue;
    }
    if (space) line += ' ';
    space = false;
    line += c;
  }
  return line;
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, std::string_view name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t IntAttr(const onnx::NodeProto& node, std::string_view name, int64_t fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a && a->type() == onnx::AttributeProto::INT ? a->i() : fallback;
}

double FloatAttr(const onnx::NodeProto& node, std::string_view name, double fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a && a->type() == onnx::AttributeProto::FLOAT ? a->f() : fallback;
}

std::vector<int64_t> IntsAttr(const onnx::NodeProto& node, std::string_view name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  if (!a || a->type() != onnx::AttributeProto::INTS) return {};
  return {a->ints().begin(), a->ints().end()};
}

bool IsDefaultDomain(const onnx::NodeProto& node) {
  return node.domain().empty() || node.domain() == "ai.onnx";
}

}  // namespace hfuse::onnx_util
