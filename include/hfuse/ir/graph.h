// The hfuse graph IR: tensors and the operators that read and write them.
//
// Tensors and ops live in two vectors and are named by their index, which is
// their stable id: ids are never reused, and erased entries stay in place
// marked dead, so an id keeps meaning the same thing for the life of a graph.
// Every tensor knows its producer and its users (the ops that read it, each
// once, in the order they were attached); every mutation below keeps both
// directions in sync. Passes learn order only from ids, user lists and the
// queries in this header, never from names.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hfuse {

using TensorId = int32_t;
using OpId = int32_t;
inline constexpr int32_t kNone = -1;

// Float types are what the passes work on. Integer and bool tensors (ids,
// shapes, masks of an ONNX model) are data the passes see only as
// dependencies: no IR op but an opaque one reads or writes them.
enum class DType : uint8_t { kFloat16, kBFloat16, kFloat32, kInt64, kInt32, kBool };
std::string_view DTypeName(DType dtype);
// The float dtypes only: graph JSON has no other (and no op that could read one).
std::optional<DType> ParseDType(std::string_view name);
int DTypeBytes(DType dtype);
bool IsFloat(DType dtype);

// A named dynamic dimension declared in the graph's "dims" list.
struct DynamicDim {
  std::string name;
  int64_t min = 0;
  int64_t max = 0;
  // A derived dim (ONNX import: a Reshape that merges two named dims, such
  // as batch · seq_length; flatten-gemm-inputs: batch · 39): its value is
  // `factor` times the product of these dims', never bound on its own.
  // Empty for a dim of its own (all graph JSON dims).
  std::vector<int32_t> product_of;
  // What `run` and `verify` bind the dim to when no --dim does: 0 means its
  // max. ONNX's symbolic dims range up to 2^31 - 1 and bind to a small batch
  // (OnnxImportOptions::dim_run).
  int64_t run_value = 0;
  int64_t factor = 1;  // of a derived dim (product_of)
};

// One dimension of a shape: a static size, or a reference to a DynamicDim.
struct Dim {
  int64_t value = 0;        // the size when static
  int32_t dynamic = kNone;  // index into Graph::dims() when dynamic

  static Dim Static(int64_t v) { return Dim{v, kNone}; }
  static Dim Dynamic(int32_t index) { return Dim{0, index}; }
  bool is_static() const { return dynamic == kNone; }
  friend bool operator==(const Dim& a, const Dim& b) {
    return a.dynamic == b.dynamic && (a.dynamic != kNone || a.value == b.value);
  }
};
using Shape = std::vector<Dim>;

enum class Role : uint8_t { kIntermediate, kInput, kParam };

// The element-wise functions; the unary ones are also the activations of
// GEMM and LayerNorm kinds, and their values the activation codes of the CPU
// and CUDA kernels.
enum class EwFunc : uint8_t { kRelu, kSigmoid, kTanh, kGelu, kSilu, kAdd, kSub, kMul, kDiv };
std::string_view EwFuncName(EwFunc func);
std::optional<EwFunc> ParseEwFunc(std::string_view name);
bool IsUnary(EwFunc func);

// The op kinds, one per line of op_kinds.def, which says what each column means.
enum class OpType : uint8_t {
#define HFUSE_OP_KIND(Kind, ...) k##Kind,
#include "hfuse/ir/op_kinds.def"
#undef HFUSE_OP_KIND
};
inline constexpr int kNumOpTypes = 0
#define HFUSE_OP_KIND(...) +1
#include "hfuse/ir/op_kinds.def"
#undef HFUSE_OP_KIND
    ;

// What fixes an op's operand layout and attributes.
enum class OpFamily : uint8_t {
  kGemm,            // A, B[, bias] -> Y
  kLayerNorm,       // X[, gamma][, beta] -> Y
  kSplit,
  kConcatenate,
  kElementwise,
  kReshape,
  kGroupGemm,       // member after member: A0, B0[, bias0], A1, ... -> Y0, Y1, ...
                    // (group_gemm_rcr_mixed: bias as each member's kind has)
  kGroupLayerNorm,  // slot after slot: X0, X1, ..., [gamma0, gamma1, ...,] [beta0, ...]
  kGroupGather,     // member after member: table0, ids0, table1, ids1, ... -> Y0, Y1, ...
  kOpaque,
};

// One line of op_kinds.def.
struct OpKindInfo {
  std::string_view name;
  OpFamily family;
  OpType member;  // a group kind's member kind; else the kind itself
  OpType group;   // a groupable kind's group kind; else the kind itself
  bool bias;
  std::optional<EwFunc> activation;
  std::string_view onnx_name;  // ai.hfuse custom op of a group kind, "" if none
};
// The activation column's words.
namespace op_kind_activation {
inline constexpr std::optional<EwFunc> None, Relu = EwFunc::kRelu, Sigmoid = EwFunc::kSigmoid,
                                             Tanh = EwFunc::kTanh, Gelu = EwFunc::kGelu,
                                             Silu = EwFunc::kSilu;
}  // namespace op_kind_activation
inline constexpr OpKindInfo kOpKinds[] = {
#define HFUSE_OP_KIND(Kind, name, Family, Member, Group, bias, activation, onnx)               \
  {name,  OpFamily::k##Family, OpType::k##Member, OpType::k##Group, bias, \
   op_kind_activation::activation, onnx},
#include "hfuse/ir/op_kinds.def"
#undef HFUSE_OP_KIND
};
inline const OpKindInfo& OpKind(OpType type) { return kOpKinds[static_cast<size_t>(type)]; }

std::string_view OpTypeName(OpType type);
std::optional<OpType> ParseOpType(std::string_view name);
inline OpFamily FamilyOf(OpType type) { return OpKind(type).family; }
inline bool IsGemm(OpType type) { return FamilyOf(type) == OpFamily::kGemm; }
inline bool IsLayerNorm(OpType type) { return FamilyOf(type) == OpFamily::kLayerNorm; }
inline bool IsGroupGemm(OpType type) { return FamilyOf(type) == OpFamily::kGroupGemm; }
inline bool IsGroupLayerNorm(OpType type) { return FamilyOf(type) == OpFamily::kGroupLayerNorm; }
inline bool IsGroupGather(OpType type) { return FamilyOf(type) == OpFamily::kGroupGather; }
inline bool IsGroupOp(OpType type) {
  return IsGroupGemm(type) || IsGroupLayerNorm(type) || IsGroupGather(type);
}
// True for a GEMM kind, grouped or not, that takes a bias.
inline bool GemmHasBias(OpType type) { return OpKind(type).bias; }
// The activation of a GEMM kind (applied to its result) or of a LayerNorm
// kind (y = x * act(layernorm(x))), grouped or not.
inline std::optional<EwFunc> ActivationOf(OpType type) { return OpKind(type).activation; }
OpType GroupOf(OpType member_type);  // gemm_rcr -> group_gemm_rcr, layernorm -> group_layernorm
OpType MemberOf(OpType group_type);  // the inverse
// The GEMM or LayerNorm kind with this family, bias and activation, if the table has one.
std::optional<OpType> FindKind(OpFamily family, bool bias, std::optional<EwFunc> activation);

// The ONNX node an op was imported from (onnx/onnx_import.h), kept so that
// an op the passes leave alone is written back as it was read; for an
// opaque op it is all there is. Stored serialized, so the IR does not depend
// on protobuf; shared between copies of a graph.
struct OnnxNode {
  std::string domain;                    // "" is the default ONNX domain
  std::string op_type;                   // e.g. "Softmax"
  int64_t opset = 0;                     // the model's opset version of `domain`
  OpType imported_as = OpType::kOpaque;  // the node's op type when imported
  // The serialized onnx.NodeProto, names as read. Empty for a node a pass
  // made (einsum-to-matmul's Transpose, MatMul, Reshape), which is all in the
  // decoded fields below: the exporter writes it from them, its constants
  // from constant_values, each int attribute as its operator's schema types it.
  std::string node;
  // Constant inputs the node keeps to itself, by name: int64 shapes, axes
  // and the like, which are no tensors of the IR (serialized onnx.TensorProto;
  // only the name, for a node a pass made).
  std::vector<std::pair<std::string, std::string>> constants;
  // The node's int, float and string attributes, decoded for the CPU
  // executor (a tensor attribute, such as ConstantOfShape's value, as its
  // first element in `floats`).
  std::map<std::string, std::vector<int64_t>> ints;
  std::map<std::string, std::vector<double>> floats;
  std::map<std::string, std::string> strings;
  // For the CPU executor, set by the importer for an opaque op: where each
  // of the node's inputs comes from (kNone: left empty; k >= 0: the op's
  // input k; -2 - c: constants[c], decoded in constant_values), and where
  // each output goes (the op's output k, or kNone: unused, not in the IR).
  struct Value {
    DType dtype = DType::kFloat32;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  std::vector<int32_t> input_slots;
  std::vector<int32_t> output_slots;
  std::vector<Value> constant_values;
  // A group of ONNX operators (group_gather: the ai.hfuse GroupGather node
  // it is written as): each member's op name, in member order, so that an
  // error names the Gather the model had and an unfused export writes it
  // back under its own name. Here, not in Attrs: every Op would grow by it.
  std::vector<std::string> member_names;
};

// Attributes of all op types. Which fields mean something depends on the type;
// optional ones remember whether the graph file spelled them out, so that a
// graph is written back as it was read.
struct Attrs {
  std::optional<double> alpha;                        // gemm family
  std::optional<double> eps;                          // layernorm family and groups
  std::vector<int64_t> normalized_shape;              // layernorm
  std::vector<std::vector<int64_t>> normalized_shapes;  // group layernorm
  // group_gemm_rcr_mixed: each member's GEMM kind (op_kinds.def); read it
  // through GemmKindOf (op_members.h), which knows every GEMM op's.
  std::vector<OpType> member_ops;
  // layernorm: gamma, beta given (not null); read them through op_members.h,
  // which also knows a group's.
  bool has_gamma = true;
  bool has_beta = true;
  std::vector<int64_t> split_sizes;                   // split
  int64_t dim = 0;                                    // split, concatenate (as written)
  EwFunc func = EwFunc::kRelu;                        // elementwise
  std::vector<int64_t> shape;                         // reshape
  std::shared_ptr<const OnnxNode> onnx;               // set by the ONNX importer

  double Alpha() const { return alpha.value_or(1.0); }
  double Eps() const { return eps.value_or(1e-5); }
};

class Graph;

// A tensor's producer and its users, read by anyone and written only by
// Graph's mutations (MLIR's use-def lists), so that the two directions
// cannot drift apart: a pass that wants an op to read or write another
// tensor asks the graph (SetOperand, AddOperand, SetOutputs,
// TakeOverOutputs, ReplaceAllUsesWith).
class ProducerRef {
 public:
  operator OpId() const { return id_; }  // NOLINT: reads as the OpId it is

 private:
  friend class Graph;
  OpId id_ = kNone;
};

class UseList {
 public:
  using value_type = OpId;
  using size_type = size_t;
  using const_reference = const OpId&;
  using reference = const OpId&;
  using const_iterator = std::vector<OpId>::const_iterator;
  using iterator = const_iterator;
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  OpId operator[](size_t i) const { return v_[i]; }
  OpId front() const { return v_.front(); }
  OpId back() const { return v_.back(); }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }
  const OpId* data() const { return v_.data(); }
  operator const std::vector<OpId>&() const { return v_; }  // NOLINT
  friend bool operator==(const UseList& a, const std::vector<OpId>& b) { return a.v_ == b; }

 private:
  friend class Graph;
  std::vector<OpId> v_;
};

// The fields the passes read of every tensor come first and fill one cache
// line, which is where each tensor starts (graphs of millions of tensors
// are walked over and over; a tensor spread over three lines costs three
// misses).
struct alignas(64) Tensor {
  ProducerRef producer;
  DType dtype = DType::kFloat32;
  Role role = Role::kIntermediate;
  bool alive = true;
  int64_t depth = 0;        // AITemplate's tensor depth; see passes/canonical_order.h
  UseList users;  // each reading op once, in attach order
  Shape shape;

  std::string name;
  // A param's values when the graph came with them (ONNX initializers): the
  // tensor's dtype, row-major, little-endian. Graph JSON has no place for them.
  std::shared_ptr<const std::vector<uint8_t>> data;
  // Execution plan (passes/strided_views.h): when set, this tensor's values
  // live in `storage`'s buffer, as the slice [storage_offset, +last dim) of
  // each of its rows (a row = the last dim; leading dims equal).
  TensorId storage = kNone;
  int64_t storage_offset = 0;
};

// As Tensor: what the passes read of every op fills its first cache line.
struct alignas(64) Op {
  OpType type = OpType::kElementwise;
  bool alive = true;
  // Execution plan: a split or concatenate whose outputs or inputs became
  // views of its input or output; it stays in the graph (so every order and
  // check still holds) and runs as nothing.
  bool elided = false;
  std::vector<TensorId> inputs;  // may repeat a tensor
  std::vector<TensorId> outputs;
  std::string name;
  Attrs attrs;
};

// Names to ids, for Graph: an open-addressing table of ids hashed by name,
// so that each name is stored once, with its tensor or op (a map of strings
// would copy every name and allocate a node per entry: a third of the memory
// of a graph of a million ops).
class NameIndex {
 public:
  static uint32_t Hash(std::string_view name);
  // The id in `items` (a vector of things with a `name`) named `name`, or kNone.
  template <typename Item>
  int32_t Find(std::string_view name, uint32_t hash, const std::vector<Item>& items) const;
  // The id of the item named `name` if there is one; if not, adds `id`
  // under that name and returns kNone. One probe for both.
  template <typename Item>
  int32_t FindOrInsert(int32_t id, std::string_view name, uint32_t hash,
                       const std::vector<Item>& items);
  static constexpr size_t kBatch = 64;
  // Find for n <= kBatch names at once: out[i] for names[i]. The table and the items
  // are touched in a few sweeps over all n, prefetched ahead, so that the
  // cache misses of a batch overlap instead of following one another.
  template <typename Item>
  void FindMany(const std::string_view* names, const uint32_t* hashes, size_t n,
                const std::vector<Item>& items, int32_t* out) const;
  // Starts loading the slot where a probe for `hash` begins.
  void Prefetch(uint32_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[hash & (slots_.size() - 1)]);
  }
  void Reserve(size_t count);

 private:
  // The hash sits next to the id, so that a probe costs one cache miss and
  // most probes compare no names.
  struct Slot {
    uint32_t hash = 0;
    int32_t id = kNone;  // kNone: empty
  };
  // Slots of large tables are asked to live on huge pages: lookups land
  // anywhere in tens of MB, and with 4 KB pages nearly each one would also
  // miss the TLB.
  static void* AllocateSlots(size_t bytes);
  static void FreeSlots(void* p, size_t bytes);
  template <typename T>
  struct SlotAllocator {
    using value_type = T;
    SlotAllocator() = default;
    template <typename U>
    SlotAllocator(const SlotAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(AllocateSlots(n * sizeof(T))); }
    void deallocate(T* p, size_t n) { FreeSlots(p, n * sizeof(T)); }
    friend bool operator==(const SlotAllocator&, const SlotAllocator&) { return true; }
  };
  void Rehash(size_t capacity);

  std::vector<Slot, SlotAllocator<Slot>> slots_;
  size_t count_ = 0;
};

class Graph {
 public:
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  const std::vector<DynamicDim>& dims() const { return dims_; }
  int32_t AddDim(DynamicDim dim);
  // Replaces the dims list (SpecializeDims renumbers it); shapes must agree.
  void set_dims(std::vector<DynamicDim> dims) { dims_ = std::move(dims); }
  std::optional<int32_t> FindDim(std::string_view name) const;

  // Tensors. AddTensor fails (returns kNone) if the name is taken.
  TensorId AddTensor(Tensor tensor);
  // As AddTensor, but `tensor` is moved from only when it is added.
  TensorId TryAddTensor(Tensor& tensor);
  // TryAddTensor for each of `tensors`, in order, their name lookups
  // overlapped (the table's slots prefetched first). False at the first name
  // that is taken; the tensors before it have been added.
  bool TryAddTensors(std::vector<Tensor>& tensors);
  std::optional<TensorId> FindTensor(std::string_view name) const;
  // FindTensor for n names at once: out[i] is names[i]'s id, or kNone.
  void FindTensors(const std::string_view* names, size_t n, TensorId* out) const;
  const Tensor& tensor(TensorId id) const { return tensors_[static_cast<size_t>(id)]; }
  Tensor& mutable_tensor(TensorId id) { return tensors_[static_cast<size_t>(id)]; }
  int32_t num_tensor_ids() const { return static_cast<int32_t>(tensors_.size()); }

  // Ops. AddOp sets each output's producer (which must be unset) and appends
  // the op once to each distinct input's user list.
  OpId AddOp(Op op);
  // Starts loading the records of the tensors op `id` reads and writes, if
  // it is an op: a loop over ops in id order calls it for an op some steps
  // ahead, so that its tensors (anywhere in a large array) are there in time.
  void PrefetchTensorsOf(OpId id) const {
    if (id >= num_op_ids()) return;
    const Op& o = ops_[static_cast<size_t>(id)];
    for (TensorId t : o.inputs) __builtin_prefetch(&tensors_[static_cast<size_t>(t)]);
    for (TensorId t : o.outputs) __builtin_prefetch(&tensors_[static_cast<size_t>(t)]);
  }
  // Starts loading what AddOp(op) will touch (its name's slot, its tensors),
  // so that a caller adding a batch of ops overlaps their cache misses.
  void PrefetchForAddOp(const Op& op) const;
  std::optional<OpId> FindOp(std::string_view name) const;
  const Op& op(OpId id) const { return ops_[static_cast<size_t>(id)]; }
  Op& mutable_op(OpId id) { return ops_[static_cast<size_t>(id)]; }
  int32_t num_op_ids() const { return static_cast<int32_t>(ops_.size()); }
  int64_t NumLiveOps() const;
  std::vector<OpId> LiveOps() const;  // by id
  // Room for this many tensors and ops in all, so that a reader that knows
  // the counts builds a large graph without growing its arrays step by step.
  void Reserve(size_t tensors, size_t ops);

  // A name of the form "<base>_<n>" that no op of this graph has had.
  std::string UniqueOpName(std::string_view base);

  const std::vector<TensorId>& outputs() const { return outputs_; }
  void set_outputs(std::vector<TensorId> outputs);
  bool IsGraphOutput(TensorId id) const { return is_output_[static_cast<size_t>(id)]; }

  // Mutations: the only writers of producers and user lists.
  // Input `index` of `op` reads `to` instead; `op` leaves the old tensor's
  // users unless another of its inputs still reads it, and joins `to`'s.
  void SetOperand(OpId op, size_t index, TensorId to);
  // `op` reads `tensor` as a new last input.
  void AddOperand(OpId op, TensorId tensor);
  // `op` writes `outputs` (none produced yet) instead of its outputs, which
  // are left without a producer, for the caller to erase or hand on.
  void SetOutputs(OpId op, std::vector<TensorId> outputs);
  // `op` takes over the outputs of `from`, which is detached (DetachOp);
  // op's own outputs are left without a producer.
  void TakeOverOutputs(OpId op, OpId from);
  // Every user of `from` reads `to` instead; each such user is appended to
  // `to`'s user list unless already there. Graph outputs are not touched.
  void ReplaceAllUsesWith(TensorId from, TensorId to);
  // Unlinks `op` from its inputs' user lists and its outputs' producer and
  // marks it dead; the output tensors stay, ready to be produced by another op.
  void DetachOp(OpId op);
  // DetachOp for each of `ops`, with one pass over each input's user list
  // (detaching ops one by one costs a pass per op on a tensor they share).
  void DetachOps(const std::vector<OpId>& ops);
  // Erases an op none of whose outputs has users or is a graph output, along
  // with its output tensors. Erasing an op that is still used is a bug.
  void EraseOp(OpId op);
  // Erases a tensor that has neither producer nor users.
  void EraseTensor(TensorId id);
  // Rebuilds every user list so that users appear in `op_order`
  // (which must list every live op exactly once).
  void ReorderUsers(const std::vector<OpId>& op_order);

 private:
  void RemoveUser(TensorId tensor, OpId op);

  std::string name_;
  std::vector<DynamicDim> dims_;
  std::vector<Tensor> tensors_;
  std::vector<Op> ops_;
  std::vector<TensorId> outputs_;
  std::vector<bool> is_output_;
  NameIndex tensor_by_name_;
  NameIndex op_by_name_;
  int64_t next_unique_ = 0;
};

// Fixes named dims to values (`hfuse fuse --dim`): every use of one becomes
// a static dim, as does a derived dim whose factors are all fixed, and the
// fixed dims leave the graph's dims list (the others keep their order).
// Throws InputError for a name the graph lacks, a value outside the dim's
// range, or a derived dim named directly.
void SpecializeDims(Graph& graph, const std::map<std::string, int64_t>& values);

// Size of a tensor in bytes, a dynamic dim taken at its max.
// Saturates instead of overflowing.
int64_t TensorBytes(const Graph& graph, TensorId id);
// Number of elements, with dynamic dims at their max (saturating).
int64_t NumElements(const Graph& graph, const Shape& shape);
// "[256, batch, 64]"
std::string ShapeString(const Graph& graph, const Shape& shape);

}  // namespace hfuse
