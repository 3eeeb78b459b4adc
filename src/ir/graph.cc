// Graph storage and the mutations that keep producers and user lists in sync.
#include "hfuse/ir/graph.h"

#include <algorithm>
#include <array>
#include <limits>

#include "hfuse/support/error.h"

namespace hfuse {
namespace {

constexpr std::array<std::string_view, kNumOpTypes> kOpTypeNames = {
    "gemm_rcr",
    "gemm_rcr_bias",
    "gemm_rcr_bias_relu",
    "gemm_rcr_bias_sigmoid",
    "layernorm",
    "layernorm_sigmoid_mul",
    "split",
    "concatenate",
    "elementwise",
    "reshape",
    "group_gemm_rcr",
    "group_gemm_rcr_bias",
    "group_gemm_rcr_bias_relu",
    "group_gemm_rcr_bias_sigmoid",
    "group_layernorm",
    "group_layernorm_sigmoid_mul",
};

constexpr std::array<std::string_view, 9> kEwFuncNames = {
    "relu", "sigmoid", "tanh", "gelu", "silu", "add", "sub", "mul", "div"};

int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > std::numeric_limits<int64_t>::max() / b) return std::numeric_limits<int64_t>::max();
  return a * b;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "float16") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "float32") return DType::kFloat32;
  return std::nullopt;
}

int DTypeBytes(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

std::string_view OpTypeName(OpType type) { return kOpTypeNames[static_cast<size_t>(type)]; }

std::optional<OpType> ParseOpType(std::string_view name) {
  for (size_t i = 0; i < kOpTypeNames.size(); ++i) {
    if (kOpTypeNames[i] == name) return static_cast<OpType>(i);
  }
  return std::nullopt;
}

bool IsGemm(OpType type) { return type <= OpType::kGemmRcrBiasSigmoid; }
bool IsLayerNorm(OpType type) {
  return type == OpType::kLayerNorm || type == OpType::kLayerNormSigmoidMul;
}
bool IsGroupGemm(OpType type) {
  return type >= OpType::kGroupGemmRcr && type <= OpType::kGroupGemmRcrBiasSigmoid;
}
bool IsGroupLayerNorm(OpType type) {
  return type == OpType::kGroupLayerNorm || type == OpType::kGroupLayerNormSigmoidMul;
}
bool GemmHasBias(OpType type) {
  return (IsGemm(type) && type != OpType::kGemmRcr) ||
         (IsGroupGemm(type) && type != OpType::kGroupGemmRcr);
}

OpType GroupOf(OpType type) {
  switch (type) {
    case OpType::kGemmRcr: return OpType::kGroupGemmRcr;
    case OpType::kGemmRcrBias: return OpType::kGroupGemmRcrBias;
    case OpType::kGemmRcrBiasRelu: return OpType::kGroupGemmRcrBiasRelu;
    case OpType::kGemmRcrBiasSigmoid: return OpType::kGroupGemmRcrBiasSigmoid;
    case OpType::kLayerNorm: return OpType::kGroupLayerNorm;
    case OpType::kLayerNormSigmoidMul: return OpType::kGroupLayerNormSigmoidMul;
    default: HFUSE_CHECK(false && "op type has no group form");
  }
  return type;
}

OpType MemberOf(OpType type) {
  switch (type) {
    case OpType::kGroupGemmRcr: return OpType::kGemmRcr;
    case OpType::kGroupGemmRcrBias: return OpType::kGemmRcrBias;
    case OpType::kGroupGemmRcrBiasRelu: return OpType::kGemmRcrBiasRelu;
    case OpType::kGroupGemmRcrBiasSigmoid: return OpType::kGemmRcrBiasSigmoid;
    case OpType::kGroupLayerNorm: return OpType::kLayerNorm;
    case OpType::kGroupLayerNormSigmoidMul: return OpType::kLayerNormSigmoidMul;
    default: HFUSE_CHECK(false && "op type is not a group op");
  }
  return type;
}

std::string_view EwFuncName(EwFunc func) { return kEwFuncNames[static_cast<size_t>(func)]; }

std::optional<EwFunc> ParseEwFunc(std::string_view name) {
  for (size_t i = 0; i < kEwFuncNames.size(); ++i) {
    if (kEwFuncNames[i] == name) return static_cast<EwFunc>(i);
  }
  return std::nullopt;
}

bool IsUnary(EwFunc func) { return func <= EwFunc::kSilu; }

int32_t Graph::AddDim(DynamicDim dim) {
  dims_.push_back(std::move(dim));
  return static_cast<int32_t>(dims_.size() - 1);
}

std::optional<int32_t> Graph::FindDim(std::string_view name) const {
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name == name) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

TensorId Graph::AddTensor(Tensor tensor) {
  const auto id = static_cast<TensorId>(tensors_.size());
  if (!tensor_by_name_.emplace(tensor.name, id).second) return kNone;
  tensor.producer = kNone;
  tensor.users.clear();
  tensors_.push_back(std::move(tensor));
  is_output_.push_back(false);
  return id;
}

std::optional<TensorId> Graph::FindTensor(std::string_view name) const {
  auto it = tensor_by_name_.find(std::string(name));
  if (it == tensor_by_name_.end() || !tensors_[static_cast<size_t>(it->second)].alive) {
    return std::nullopt;
  }
  return it->second;
}

OpId Graph::AddOp(Op op) {
  const auto id = static_cast<OpId>(ops_.size());
  if (!op_by_name_.emplace(op.name, id).second) return kNone;
  for (TensorId out : op.outputs) {
    Tensor& t = mutable_tensor(out);
    HFUSE_CHECK(t.alive && t.producer == kNone);
    t.producer = id;
  }
  for (TensorId in : op.inputs) {
    // A repeated input pushes to the same list with nothing in between.
    std::vector<OpId>& users = mutable_tensor(in).users;
    if (users.empty() || users.back() != id) users.push_back(id);
  }
  op.alive = true;
  ops_.push_back(std::move(op));
  return id;
}

std::optional<OpId> Graph::FindOp(std::string_view name) const {
  auto it = op_by_name_.find(std::string(name));
  if (it == op_by_name_.end() || !ops_[static_cast<size_t>(it->second)].alive) return std::nullopt;
  return it->second;
}

int64_t Graph::NumLiveOps() const {
  return std::count_if(ops_.begin(), ops_.end(), [](const Op& op) { return op.alive; });
}

std::vector<OpId> Graph::LiveOps() const {
  std::vector<OpId> live;
  for (OpId id = 0; id < num_op_ids(); ++id) {
    if (op(id).alive) live.push_back(id);
  }
  return live;
}

std::string Graph::UniqueOpName(std::string_view base) {
  for (;;) {
    std::string name = fmt::format("{}_{}", base, next_unique_++);
    if (!op_by_name_.count(name)) return name;
  }
}

void Graph::set_outputs(std::vector<TensorId> outputs) {
  for (TensorId id : outputs_) is_output_[static_cast<size_t>(id)] = false;
  outputs_ = std::move(outputs);
  for (TensorId id : outputs_) is_output_[static_cast<size_t>(id)] = true;
}

void Graph::RemoveUser(TensorId tensor, OpId op) {
  std::vector<OpId>& users = mutable_tensor(tensor).users;
  auto it = std::find(users.begin(), users.end(), op);
  if (it != users.end()) users.erase(it);
}

void Graph::ReplaceAllUsesWith(TensorId from, TensorId to) {
  HFUSE_CHECK(from != to);
  std::vector<OpId> users = std::move(mutable_tensor(from).users);
  mutable_tensor(from).users.clear();
  std::vector<OpId>& to_users = mutable_tensor(to).users;
  for (OpId user : users) {
    for (TensorId& in : mutable_op(user).inputs) {
      if (in == from) in = to;
    }
    if (std::find(to_users.begin(), to_users.end(), user) == to_users.end()) {
      to_users.push_back(user);
    }
  }
}

void Graph::DetachOp(OpId id) {
  Op& o = mutable_op(id);
  HFUSE_CHECK(o.alive);
  for (TensorId in : o.inputs) RemoveUser(in, id);
  for (TensorId out : o.outputs) mutable_tensor(out).producer = kNone;
  o.alive = false;  // its name stays taken, so reports never see it reused
}

void Graph::EraseOp(OpId id) {
  const Op& o = op(id);
  for (TensorId out : o.outputs) {
    HFUSE_CHECK(tensor(out).users.empty() && !IsGraphOutput(out));
  }
  const std::vector<TensorId> outputs = o.outputs;
  DetachOp(id);
  for (TensorId out : outputs) EraseTensor(out);
}

void Graph::EraseTensor(TensorId id) {
  Tensor& t = mutable_tensor(id);
  HFUSE_CHECK(t.alive && t.producer == kNone && t.users.empty() && !IsGraphOutput(id));
  t.alive = false;
}

void Graph::ReorderUsers(const std::vector<OpId>& op_order) {
  for (Tensor& t : tensors_) t.users.clear();
  for (OpId id : op_order) {
    const Op& o = op(id);
    HFUSE_CHECK(o.alive);
    for (TensorId in : o.inputs) {
      std::vector<OpId>& users = mutable_tensor(in).users;
      if (users.empty() || users.back() != id) users.push_back(id);
    }
  }
}

int64_t NumElements(const Graph& graph, const Shape& shape) {
  int64_t n = 1;
  for (const Dim& d : shape) {
    n = SaturatingMul(n, d.is_static() ? d.value : graph.dims()[static_cast<size_t>(d.dynamic)].max);
  }
  return n;
}

int64_t TensorBytes(const Graph& graph, TensorId id) {
  const Tensor& t = graph.tensor(id);
  return SaturatingMul(NumElements(graph, t.shape), DTypeBytes(t.dtype));
}

std::string ShapeString(const Graph& graph, const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].is_static() ? std::to_string(shape[i].value)
                              : graph.dims()[static_cast<size_t>(shape[i].dynamic)].name;
  }
  return s + "]";
}

}  // namespace hfuse
