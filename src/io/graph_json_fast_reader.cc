// The graph JSON reader's fast path (graph_json_fast_reader.h): one pass
// over text in the form hfuse writes, with no message of its own.
#include "graph_json_fast_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

class FastReader {
 public:
  struct GiveUp {};

  explicit FastReader(std::string_view text) : s_(text.data()), n_(text.size()) {}

  Graph Read() {
    Space();
    Expect('{');
    Key("graph_format");
    if (Int() != 1) throw GiveUp{};
    Comma();
    if (IsKey("name")) {
      Key("name");
      graph_.set_name(std::string(String()));
      Comma();
    }
    if (IsKey("dims")) {
      Key("dims");
      Array([&] { ReadDim(); });
      Comma();
    }
    Key("tensors");
    // Room for all, so that the graph's arrays do not grow step by step:
    // in this form each tensor and op is one object, and no other '{'
    // follows (a quick count; were it wrong, only the room would be).
    size_t objects = 0;
    for (const char* c = s_ + p_; (c = static_cast<const char*>(std::memchr(c, '{', s_ + n_ - c)));
         ++c)
      ++objects;
    graph_.Reserve(objects, 0);
    // Tensors and ops are added in batches, so that their name lookups
    // overlap (Graph::TryAddTensors, FindTensors).
    std::vector<Tensor> tensors;
    auto add_tensors = [&] {
      if (!graph_.TryAddTensors(tensors)) throw GiveUp{};
      tensors.clear();
    };
    Array([&] {
      tensors.push_back(ReadTensor());
      if (tensors.size() == kBatch) add_tensors();
    });
    add_tensors();
    graph_.Reserve(static_cast<size_t>(graph_.num_tensor_ids()),
                   objects - std::min(objects, static_cast<size_t>(graph_.num_tensor_ids())));
    Comma();
    Key("ops");
    Array([&] {
      ops_.push_back(ReadOp());
      if (ops_.size() == kBatch) AddOps();
    });
    AddOps();
    if (graph_.num_op_ids() == 0) throw GiveUp{};
    Comma();
    Key("outputs");
    std::vector<TensorId> outputs;
    std::vector<bool> listed(static_cast<size_t>(graph_.num_tensor_ids()), false);
    Array([&] {
      const TensorId id = Ref();
      if (listed[static_cast<size_t>(id)]) throw GiveUp{};
      listed[static_cast<size_t>(id)] = true;
      outputs.push_back(id);
    });
    if (outputs.empty()) throw GiveUp{};
    graph_.set_outputs(std::move(outputs));
    Expect('}');
    if (p_ != n_) throw GiveUp{};
    try {
      VerifyGraph(graph_);
    } catch (const InputError&) {
      throw GiveUp{};
    }
    return std::move(graph_);
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
  void Space() {
    while (p_ < n_ && IsSpace(s_[p_])) ++p_;
  }
  // c, then white space.
  void Expect(char c) {
    if (p_ >= n_ || s_[p_] != c) throw GiveUp{};
    ++p_;
    Space();
  }
  bool Peek(char c) const { return p_ < n_ && s_[p_] == c; }
  void Comma() { Expect(','); }
  // Keys are literals, so that comparing them compiles to a few loads.
  template <size_t N>
  bool IsKey(const char (&key)[N]) const {
    return p_ + N + 1 <= n_ && s_[p_] == '"' && std::memcmp(s_ + p_ + 1, key, N - 1) == 0 &&
           s_[p_ + N] == '"';
  }
  // "key" :
  template <size_t N>
  void Key(const char (&key)[N]) {
    if (!IsKey(key)) throw GiveUp{};
    p_ += N + 1;
    Space();
    Expect(':');
  }
  // A string of printable ASCII without escapes, then white space.
  std::string_view String() {
    if (!Peek('"')) throw GiveUp{};
    const size_t begin = ++p_;
    while (true) {
      if (p_ >= n_) throw GiveUp{};
      const auto c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') break;
      // c - 0x20 wraps below 0x20: one compare for both ends of the range.
      if (static_cast<unsigned char>(c - 0x20) >= 0x5F || c == '\\') throw GiveUp{};
      ++p_;
    }
    const std::string_view v(s_ + begin, p_ - begin);
    ++p_;
    Space();
    return v;
  }
  bool IsNumberStart() const {
    return p_ < n_ && (s_[p_] == '-' || (s_[p_] >= '0' && s_[p_] <= '9'));
  }
  // An integer as JSON writes it (-?(0|[1-9][0-9]*)), of at most 18 digits.
  int64_t Int() {
    const bool negative = Peek('-');
    if (negative) ++p_;
    const size_t begin = p_;
    while (p_ < n_ && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
    const size_t digits = p_ - begin;
    // Counted before they are added up: 19 digits could overflow.
    if (digits == 0 || digits > 18 || (digits > 1 && s_[begin] == '0')) throw GiveUp{};
    int64_t v = 0;
    for (size_t i = begin; i < p_; ++i) v = v * 10 + (s_[i] - '0');
    if (p_ < n_ && (s_[p_] == '.' || s_[p_] == 'e' || s_[p_] == 'E')) throw GiveUp{};
    Space();
    return negative ? -v : v;
  }
  // Any JSON number, as a double (what the reader's Number() returns).
  double Number() {
    const size_t begin = p_;
    if (Peek('-')) ++p_;
    const size_t int_begin = p_;
    while (p_ < n_ && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
    const size_t digits = p_ - int_begin;
    if (digits == 0 || (digits > 1 && s_[int_begin] == '0')) throw GiveUp{};
    bool is_float = false;
    if (Peek('.')) {
      ++p_;
      const size_t f = p_;
      while (p_ < n_ && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
      if (p_ == f) throw GiveUp{};
      is_float = true;
    }
    if (Peek('e') || Peek('E')) {
      ++p_;
      if (Peek('+') || Peek('-')) ++p_;
      const size_t e = p_;
      while (p_ < n_ && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
      if (p_ == e) throw GiveUp{};
      is_float = true;
    }
    // Integers become doubles as nlohmann converts them; long ones are left
    // to the reader (nlohmann reads them as floats or as 64-bit integers).
    if (!is_float && digits > 18) throw GiveUp{};
    const std::string token(s_ + begin, p_ - begin);
    const double v = is_float ? std::strtod(token.c_str(), nullptr)
                              : static_cast<double>(std::strtoll(token.c_str(), nullptr, 10));
    if (!std::isfinite(v)) throw GiveUp{};
    Space();
    return v;
  }
  // [ element, ... ], then white space.
  template <typename F>
  void Array(F&& element) {
    Expect('[');
    if (Peek(']')) {
      Expect(']');
      return;
    }
    while (true) {
      element();
      if (Peek(']')) break;
      Comma();
    }
    Expect(']');
  }
  std::vector<int64_t> Ints() {
    std::vector<int64_t> v;
    Array([&] { v.push_back(Int()); });
    return v;
  }
  TensorId Ref() {
    const std::optional<TensorId> id = graph_.FindTensor(String());
    if (!id) throw GiveUp{};
    return *id;
  }

  void ReadDim() {
    Expect('{');
    DynamicDim dim;
    Key("name");
    dim.name = std::string(String());
    Comma();
    Key("min");
    dim.min = Int();
    Comma();
    Key("max");
    dim.max = Int();
    Expect('}');
    if (dim.name.empty() || dim.min < 0 || dim.max < dim.min || graph_.FindDim(dim.name))
      throw GiveUp{};
    graph_.AddDim(std::move(dim));
  }

  Tensor ReadTensor() {
    Expect('{');
    Tensor t;
    Key("name");
    t.name = std::string(String());
    if (t.name.empty()) throw GiveUp{};
    Comma();
    Key("shape");
    dims_.clear();
    Array([&] {
      if (Peek('"')) {
        const std::optional<int32_t> dim = graph_.FindDim(String());
        if (!dim) throw GiveUp{};
        dims_.push_back(Dim::Dynamic(*dim));
      } else {
        const int64_t v = Int();
        if (v < 0) throw GiveUp{};
        dims_.push_back(Dim::Static(v));
      }
    });
    t.shape.assign(dims_.begin(), dims_.end());
    Comma();
    Key("dtype");
    const std::optional<DType> dtype = ParseDType(String());
    if (!dtype) throw GiveUp{};
    t.dtype = *dtype;
    if (Peek(',')) {
      Comma();
      Key("role");
      const std::string_view role = String();
      if (role == "input")
        t.role = Role::kInput;
      else if (role == "param")
        t.role = Role::kParam;
      else
        throw GiveUp{};
    }
    Expect('}');
    return t;
  }

  Op ReadOp() {
    Expect('{');
    Op op;
    Key("name");
    op.name = std::string(String());
    if (op.name.empty()) throw GiveUp{};
    Comma();
    Key("op");
    const std::optional<OpType> type = ParseOpType(String());
    if (!type || *type == OpType::kOpaque) throw GiveUp{};
    op.type = *type;
    Comma();
    Key("inputs");
    const bool layernorm = IsLayerNorm(op.type);
    ids_.clear();
    size_t count = 0;
    Array([&] {
      if (layernorm && count > 0 && Peek('n')) {
        if (p_ + 4 > n_ || std::string_view(s_ + p_, 4) != "null") throw GiveUp{};
        p_ += 4;
        Space();
        (count == 1 ? op.attrs.has_gamma : op.attrs.has_beta) = false;
      } else {
        ids_.push_back(RefLater());
      }
      ++count;
    });
    if (layernorm) {
      if (count == 0 || count > 3) throw GiveUp{};
      if (count < 3) op.attrs.has_beta = false;
      if (count < 2) op.attrs.has_gamma = false;
    }
    op.inputs.assign(ids_.begin(), ids_.end());
    Comma();
    Key("outputs");
    ids_.clear();
    Array([&] { ids_.push_back(RefLater()); });
    op.outputs.assign(ids_.begin(), ids_.end());
    ReadAttrs(op);
    Expect('}');
    return op;
  }

  // A tensor name read for the batch of ops being read: its index among the
  // batch's names, which AddOps turns into the tensor's id.
  TensorId RefLater() {
    refs_.push_back(String());
    return static_cast<TensorId>(refs_.size() - 1);
  }

  // Resolves the names of the batch of ops read, and adds the ops.
  void AddOps() {
    ref_ids_.resize(refs_.size());
    graph_.FindTensors(refs_.data(), refs_.size(), ref_ids_.data());
    for (Op& op : ops_) {
      for (TensorId& id : op.inputs) id = ref_ids_[static_cast<size_t>(id)];
      for (TensorId& id : op.outputs) id = ref_ids_[static_cast<size_t>(id)];
      if (std::find(op.inputs.begin(), op.inputs.end(), kNone) != op.inputs.end() ||
          std::find(op.outputs.begin(), op.outputs.end(), kNone) != op.outputs.end()) {
        throw GiveUp{};  // a tensor that is not there
      }
      graph_.PrefetchForAddOp(op);
    }
    for (Op& op : ops_) AddOp(std::move(op));
    ops_.clear();
    refs_.clear();
  }

  // The checks that need the ops before it: a name not taken, outputs that no op produces yet, each listed once.
  void AddOp(Op op) {
    ++op_count_;
    listed_.resize(static_cast<size_t>(graph_.num_tensor_ids()), 0);
    for (TensorId id : op.outputs) {
      const Tensor& t = graph_.tensor(id);
      if (t.role != Role::kIntermediate || t.producer != kNone) throw GiveUp{};
      if (listed_[static_cast<size_t>(id)] == op_count_) throw GiveUp{};
      listed_[static_cast<size_t>(id)] = op_count_;
    }
    if (graph_.AddOp(std::move(op)) == kNone) throw GiveUp{};  // the name is taken
  }

  // The attributes, in the writer's order; each after a comma.
  void ReadAttrs(Op& op) {
    Attrs& a = op.attrs;
    auto next = [&](const auto& key) {
      if (!Peek(',')) return false;
      Comma();
      Key(key);
      return true;
    };
    auto need = [&](const auto& key) {
      if (!next(key)) throw GiveUp{};
    };
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
        if (next("alpha")) a.alpha = Number();
        break;
      case OpFamily::kLayerNorm:
        need("normalized_shape");
        a.normalized_shape = Ints();
        if (next("eps")) a.eps = Number();
        break;
      case OpFamily::kSplit:
        need("split_sizes");
        a.split_sizes = Ints();
        need("dim");
        a.dim = Int();
        break;
      case OpFamily::kConcatenate:
        need("dim");
        a.dim = Int();
        break;
      case OpFamily::kElementwise: {
        need("func");
        const std::optional<EwFunc> f = ParseEwFunc(String());
        if (!f) throw GiveUp{};
        a.func = *f;
        break;
      }
      case OpFamily::kReshape:
        need("shape");
        a.shape = Ints();
        break;
      case OpFamily::kGroupGemm:
        need("group_size");
        if (Int() != static_cast<int64_t>(op.outputs.size())) throw GiveUp{};
        if (op.type == OpType::kGroupGemmRcrMixed) {
          need("member_ops");
          Array([&] {
            const std::optional<OpType> t = ParseOpType(String());
            if (!t || !IsGemm(*t)) throw GiveUp{};
            a.member_ops.push_back(*t);
          });
        }
        break;
      case OpFamily::kGroupLayerNorm:
        need("normalized_shapes");
        Array([&] { a.normalized_shapes.push_back(Ints()); });
        if (next("eps")) a.eps = Number();
        break;
      case OpFamily::kOpaque:
      case OpFamily::kGroupGather: throw GiveUp{};
    }
  }

  const char* s_;
  size_t n_;
  size_t p_ = 0;
  Graph graph_;
  std::vector<Dim> dims_;
  static constexpr size_t kBatch = 16;
  std::vector<TensorId> ids_;
  std::vector<Op> ops_;                // the batch of ops read, their tensors not yet found
  std::vector<std::string_view> refs_;  // the tensor names they read and write
  std::vector<TensorId> ref_ids_;
  std::vector<int64_t> listed_;  // per tensor: the last op (count) listing it as an output
  int64_t op_count_ = 0;
};

}  // namespace

std::optional<Graph> TryReadGraphJsonFast(std::string_view text) {
  try {
    return FastReader(text).Read();
  } catch (const FastReader::GiveUp&) {
    return std::nullopt;  // another form, or a problem
  }
}

}  // namespace hfuse
