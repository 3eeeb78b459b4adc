// Graph storage and the mutations that keep producers and user lists in sync.
#include "hfuse/ir/graph.h"
#include "hfuse/ir/op_members.h"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <limits>
#include <unordered_set>

#include "hfuse/support/error.h"

namespace hfuse {
namespace {

constexpr std::array<std::string_view, 9> kEwFuncNames = {
    "relu", "sigmoid", "tanh", "gelu", "silu", "add", "sub", "mul", "div"};

// For non-negative a and b (sizes).
int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::numeric_limits<int64_t>::max();
  return product;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kBool: return "bool";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "float16") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "float32") return DType::kFloat32;
  return std::nullopt;
}

int DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
  }
  return 4;
}

bool IsFloat(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32;
}

std::string_view OpTypeName(OpType type) { return OpKind(type).name; }

std::optional<OpType> ParseOpType(std::string_view name) {
  for (size_t i = 0; i < std::size(kOpKinds); ++i) {
    if (kOpKinds[i].name == name) return static_cast<OpType>(i);
  }
  return std::nullopt;
}

OpType GroupOf(OpType type) {
  const OpType group = OpKind(type).group;
  HFUSE_CHECK(IsGroupOp(group) && "op type has no group form");
  return group;
}

OpType MemberOf(OpType type) {
  HFUSE_CHECK(IsGroupOp(type) && "op type is not a group op");
  return OpKind(type).member;
}

std::optional<OpType> FindKind(OpFamily family, bool bias, std::optional<EwFunc> activation) {
  for (size_t i = 0; i < std::size(kOpKinds); ++i) {
    const OpKindInfo& k = kOpKinds[i];
    if (k.family == family && k.bias == bias && k.activation == activation) {
      return static_cast<OpType>(i);
    }
  }
  return std::nullopt;
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

uint32_t NameIndex::Hash(std::string_view name) {
  return static_cast<uint32_t>(std::hash<std::string_view>()(name));
}

template <typename Item>
int32_t NameIndex::Find(std::string_view name, uint32_t hash,
                        const std::vector<Item>& items) const {
  if (slots_.empty()) return kNone;
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.id == kNone) return kNone;
    if (slot.hash == hash && items[static_cast<size_t>(slot.id)].name == name) return slot.id;
  }
}

template <typename Item>
int32_t NameIndex::FindOrInsert(int32_t id, std::string_view name, uint32_t hash,
                                const std::vector<Item>& items) {
  // Linear probing stays quick up to a load of about 0.7.
  if (10 * (count_ + 1) > 7 * slots_.size()) Rehash(std::max<size_t>(16, 2 * slots_.size()));
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.id == kNone) {
      slot = {hash, id};
      ++count_;
      return kNone;
    }
    if (slot.hash == hash && items[static_cast<size_t>(slot.id)].name == name) return slot.id;
  }
}

template <typename Item>
void NameIndex::FindMany(const std::string_view* names, const uint32_t* hashes, size_t n,
                         const std::vector<Item>& items, int32_t* out) const {
  if (slots_.empty()) {
    std::fill(out, out + n, kNone);
    return;
  }
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < n; ++i) __builtin_prefetch(&slots_[hashes[i] & mask]);
  // The first slot whose hash matches (or the empty one that ends the
  // probe); then the item it names, whose name is compared last.
  HFUSE_CHECK(n <= kBatch);
  std::array<size_t, kBatch> at;
  for (size_t i = 0; i < n; ++i) {
    size_t k = hashes[i] & mask;
    while (slots_[k].id != kNone && slots_[k].hash != hashes[i]) k = (k + 1) & mask;
    at[i] = k;
    if (slots_[k].id != kNone) __builtin_prefetch(&items[static_cast<size_t>(slots_[k].id)]);
  }
  for (size_t i = 0; i < n; ++i) {
    const Slot& first = slots_[at[i]];
    out[i] = first.id == kNone || items[static_cast<size_t>(first.id)].name == names[i]
                 ? first.id
                 : Find(names[i], hashes[i], items);  // another name of the same hash
  }
}

void NameIndex::Reserve(size_t count) {
  size_t capacity = 16;
  while (7 * capacity < 10 * count) capacity *= 2;
  if (capacity > slots_.size()) Rehash(capacity);
}

constexpr size_t kHugePage = size_t{2} << 20;

void* NameIndex::AllocateSlots(size_t bytes) {
  if (bytes < 2 * kHugePage) return ::operator new(bytes);
  void* p = std::aligned_alloc(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage);
  if (p == nullptr) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without it, 4 KB pages
  return p;
}

void NameIndex::FreeSlots(void* p, size_t bytes) {
  if (bytes < 2 * kHugePage) {
    ::operator delete(p);
  } else {
    std::free(p);
  }
}

void NameIndex::Rehash(size_t capacity) {
  std::vector<Slot, SlotAllocator<Slot>> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  const size_t mask = capacity - 1;
  for (const Slot& s : old) {
    if (s.id == kNone) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id != kNone) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

TensorId Graph::AddTensor(Tensor tensor) { return TryAddTensor(tensor); }

TensorId Graph::TryAddTensor(Tensor& tensor) {
  const auto id = static_cast<TensorId>(tensors_.size());
  // A name stays taken after its tensor is erased.
  if (tensor_by_name_.FindOrInsert(id, tensor.name, NameIndex::Hash(tensor.name), tensors_) !=
      kNone) {
    return kNone;
  }
  tensor.producer.id_ = kNone;
  tensor.users.v_.clear();
  tensors_.push_back(std::move(tensor));
  is_output_.push_back(false);
  return id;
}

bool Graph::TryAddTensors(std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) tensor_by_name_.Prefetch(NameIndex::Hash(t.name));
  for (Tensor& t : tensors) {
    if (TryAddTensor(t) == kNone) return false;
  }
  return true;
}

void Graph::FindTensors(const std::string_view* names, size_t n, TensorId* out) const {
  std::array<uint32_t, NameIndex::kBatch> hashes;
  for (size_t done = 0; done < n; done += NameIndex::kBatch) {
    const size_t m = std::min(n - done, NameIndex::kBatch);
    for (size_t i = 0; i < m; ++i) hashes[i] = NameIndex::Hash(names[done + i]);
    tensor_by_name_.FindMany(names + done, hashes.data(), m, tensors_, out + done);
  }
  for (size_t i = 0; i < n; ++i) {
    if (out[i] != kNone && !tensors_[static_cast<size_t>(out[i])].alive) out[i] = kNone;
  }
}

std::optional<TensorId> Graph::FindTensor(std::string_view name) const {
  const TensorId id = tensor_by_name_.Find(name, NameIndex::Hash(name), tensors_);
  if (id == kNone || !tensors_[static_cast<size_t>(id)].alive) return std::nullopt;
  return id;
}

void Graph::Reserve(size_t tensors, size_t ops) {
  tensors_.reserve(tensors);
  is_output_.reserve(tensors);
  ops_.reserve(ops);
  tensor_by_name_.Reserve(tensors);
  op_by_name_.Reserve(ops);
}

OpId Graph::AddOp(Op op) {
  const auto id = static_cast<OpId>(ops_.size());
  for (TensorId out : op.outputs) {
    const Tensor& t = tensor(out);
    HFUSE_CHECK(t.alive && t.producer == kNone);
  }
  if (op_by_name_.FindOrInsert(id, op.name, NameIndex::Hash(op.name), ops_) != kNone) return kNone;
  for (TensorId out : op.outputs) mutable_tensor(out).producer.id_ = id;
  for (TensorId in : op.inputs) {
    // A repeated input pushes to the same list with nothing in between.
    std::vector<OpId>& users = mutable_tensor(in).users.v_;
    if (users.empty() || users.back() != id) users.push_back(id);
  }
  op.alive = true;
  ops_.push_back(std::move(op));
  return id;
}

void Graph::PrefetchForAddOp(const Op& op) const {
  op_by_name_.Prefetch(NameIndex::Hash(op.name));
  for (TensorId t : op.inputs) __builtin_prefetch(&tensors_[static_cast<size_t>(t)].users);
  for (TensorId t : op.outputs) __builtin_prefetch(&tensors_[static_cast<size_t>(t)].producer);
}

std::optional<OpId> Graph::FindOp(std::string_view name) const {
  const OpId id = op_by_name_.Find(name, NameIndex::Hash(name), ops_);
  if (id == kNone || !ops_[static_cast<size_t>(id)].alive) return std::nullopt;
  return id;
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
    if (op_by_name_.Find(name, NameIndex::Hash(name), ops_) == kNone) return name;
  }
}

void Graph::set_outputs(std::vector<TensorId> outputs) {
  for (TensorId id : outputs_) is_output_[static_cast<size_t>(id)] = false;
  outputs_ = std::move(outputs);
  for (TensorId id : outputs_) is_output_[static_cast<size_t>(id)] = true;
}

void Graph::RemoveUser(TensorId tensor, OpId op) {
  std::vector<OpId>& users = mutable_tensor(tensor).users.v_;
  auto it = std::find(users.begin(), users.end(), op);
  if (it != users.end()) users.erase(it);
}

void Graph::ReplaceAllUsesWith(TensorId from, TensorId to) {
  HFUSE_CHECK(from != to);
  std::vector<OpId> users = std::move(mutable_tensor(from).users.v_);
  mutable_tensor(from).users.v_.clear();
  std::vector<OpId>& to_users = mutable_tensor(to).users.v_;
  // Which ops already read `to`: a set when both lists are long.
  std::unordered_set<OpId> reading;
  const bool use_set = users.size() * to_users.size() > 1024;
  if (use_set) reading.insert(to_users.begin(), to_users.end());
  for (OpId user : users) {
    for (TensorId& in : mutable_op(user).inputs) {
      if (in == from) in = to;
    }
    const bool known = use_set
                           ? !reading.insert(user).second
                           : std::find(to_users.begin(), to_users.end(), user) != to_users.end();
    if (!known) to_users.push_back(user);
  }
}

void Graph::SetOperand(OpId id, size_t index, TensorId to) {
  Op& o = mutable_op(id);
  const TensorId from = o.inputs[index];
  if (from == to) return;
  o.inputs[index] = to;
  if (std::find(o.inputs.begin(), o.inputs.end(), from) == o.inputs.end()) RemoveUser(from, id);
  std::vector<OpId>& users = mutable_tensor(to).users.v_;
  if (std::find(users.begin(), users.end(), id) == users.end()) users.push_back(id);
}

void Graph::AddOperand(OpId id, TensorId tensor) {
  mutable_op(id).inputs.push_back(tensor);
  std::vector<OpId>& users = mutable_tensor(tensor).users.v_;
  if (std::find(users.begin(), users.end(), id) == users.end()) users.push_back(id);
}

void Graph::SetOutputs(OpId id, std::vector<TensorId> outputs) {
  for (TensorId out : outputs) HFUSE_CHECK(tensor(out).alive && tensor(out).producer == kNone);
  Op& o = mutable_op(id);
  for (TensorId out : o.outputs) mutable_tensor(out).producer.id_ = kNone;
  o.outputs = std::move(outputs);
  for (TensorId out : o.outputs) mutable_tensor(out).producer.id_ = id;
}

void Graph::TakeOverOutputs(OpId id, OpId from) {
  HFUSE_CHECK(id != from);
  const std::vector<TensorId> outputs = op(from).outputs;
  DetachOp(from);
  SetOutputs(id, outputs);
}

void Graph::DetachOp(OpId id) {
  Op& o = mutable_op(id);
  HFUSE_CHECK(o.alive);
  for (TensorId in : o.inputs) RemoveUser(in, id);
  for (TensorId out : o.outputs) mutable_tensor(out).producer.id_ = kNone;
  o.alive = false;  // its name stays taken, so reports never see it reused
}

void Graph::DetachOps(const std::vector<OpId>& ids) {
  for (OpId id : ids) {
    Op& o = mutable_op(id);
    HFUSE_CHECK(o.alive);  // also: no op listed twice
    for (TensorId out : o.outputs) mutable_tensor(out).producer.id_ = kNone;
    o.alive = false;
  }
  // User lists hold live ops only, so the dead users are exactly these ops.
  // A short list read by several of them is filtered again (cheaply); a long
  // one once.
  std::unordered_set<TensorId> filtered;
  for (OpId id : ids) {
    for (TensorId in : op(id).inputs) {
      std::vector<OpId>& users = mutable_tensor(in).users.v_;
      if (users.size() > 16 && !filtered.insert(in).second) continue;
      std::erase_if(users, [&](OpId user) { return !op(user).alive; });
    }
  }
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
  for (Tensor& t : tensors_) t.users.v_.clear();
  for (size_t i = 0; i < op_order.size(); ++i) {
    if (i + 8 < op_order.size()) PrefetchTensorsOf(op_order[i + 8]);
    const OpId id = op_order[i];
    const Op& o = op(id);
    HFUSE_CHECK(o.alive);
    for (TensorId in : o.inputs) {
      std::vector<OpId>& users = mutable_tensor(in).users.v_;
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

void SpecializeDims(Graph& graph, const std::map<std::string, int64_t>& values) {
  const std::vector<DynamicDim>& dims = graph.dims();
  std::vector<std::optional<int64_t>> fixed(dims.size());
  for (const auto& [name, value] : values) {
    const auto index = graph.FindDim(name);
    if (!index) ThrowInputError("--dim {}: the graph has no dim named '{}'", name, name);
    const DynamicDim& d = dims[static_cast<size_t>(*index)];
    if (!d.product_of.empty()) {
      ThrowInputError("--dim {}: '{}' is the product of other dims; fix those", name, name);
    }
    if (value < d.min || value > d.max) {
      ThrowInputError("--dim {}={}: outside [{}, {}]", name, value, d.min, d.max);
    }
    fixed[static_cast<size_t>(*index)] = value;
  }
  for (size_t i = 0; i < dims.size(); ++i) {  // derived dims follow their factors
    if (dims[i].product_of.empty()) continue;
    int64_t v = dims[i].factor;
    for (int32_t f : dims[i].product_of) {
      if (!fixed[static_cast<size_t>(f)]) {
        v = -1;
        break;
      }
      v *= *fixed[static_cast<size_t>(f)];
    }
    if (v >= 0) fixed[i] = v;
  }
  std::vector<int32_t> renumber(dims.size(), kNone);
  std::vector<DynamicDim> kept;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (fixed[i]) continue;
    renumber[i] = static_cast<int32_t>(kept.size());
    kept.push_back(dims[i]);
  }
  for (DynamicDim& d : kept) {
    for (int32_t& f : d.product_of) {
      if (renumber[static_cast<size_t>(f)] == kNone) {
        ThrowInputError("--dim: '{}' is a product of dims; fix all of them or none", d.name);
      }
      f = renumber[static_cast<size_t>(f)];
    }
  }
  for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
    for (Dim& d : graph.mutable_tensor(id).shape) {
      if (d.is_static()) continue;
      const auto i = static_cast<size_t>(d.dynamic);
      d = fixed[i] ? Dim::Static(*fixed[i]) : Dim::Dynamic(renumber[i]);
    }
  }
  graph.set_dims(std::move(kept));
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

bool IsOnnxGather(const Op& op) {
  if (op.type != OpType::kOpaque || !op.attrs.onnx || op.outputs.size() != 1) return false;
  const OnnxNode& n = *op.attrs.onnx;
  return (n.domain.empty() || n.domain == "ai.onnx") && n.op_type == "Gather";
}

bool GatherOperandsAreInputs(const Op& op) {
  if (!IsOnnxGather(op) || op.inputs.size() != 2) return false;
  const OnnxNode& n = *op.attrs.onnx;
  const bool slots_in_order =
      n.input_slots.empty() ||
      (n.input_slots.size() == 2 && n.input_slots[0] == 0 && n.input_slots[1] == 1);
  const bool one_output = n.output_slots.empty() || (n.output_slots.size() == 1 && n.output_slots[0] == 0);
  return slots_in_order && one_output;
}

int64_t GatherAxis(const Op& op) {
  auto it = op.attrs.onnx->ints.find("axis");
  return it == op.attrs.onnx->ints.end() || it->second.empty() ? 0 : it->second[0];
}

std::vector<TensorId> GroupLayerNormInputs(const std::vector<LayerNormMember>& members) {
  std::vector<TensorId> inputs;
  for (const LayerNormMember& m : members) inputs.push_back(m.x);
  for (const LayerNormMember& m : members) {
    HFUSE_CHECK((m.gamma != kNone) == (members[0].gamma != kNone));
    if (m.gamma != kNone) inputs.push_back(m.gamma);
  }
  for (const LayerNormMember& m : members) {
    HFUSE_CHECK((m.beta != kNone) == (members[0].beta != kNone));
    if (m.beta != kNone) inputs.push_back(m.beta);
  }
  return inputs;
}

}  // namespace hfuse
