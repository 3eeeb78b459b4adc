// Graph JSON v1 reader and writer. The reader reads the text in place
// (json_text.h: one validating pass, then values read where they lie), so
// that a graph file of hundreds of MB costs little more than the graph; what
// that path leaves aside (malformed text, whose message nlohmann words, and
// rare valid forms) goes through nlohmann's DOM, with the same checks and
// messages, the reader being written once for both. nlohmann also escapes
// strings and prints numbers for the writer, so values round-trip exactly.
#include "hfuse/io/graph_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "json_text.h"

namespace hfuse {
namespace {

using nlohmann::json;

// nlohmann's DOM behind the interface of json_text's values.
struct Dom {
  class Value {
   public:
    explicit Value(const json& v) : v_(&v) {}
    bool is_object() const { return v_->is_object(); }
    bool is_array() const { return v_->is_array(); }
    bool is_string() const { return v_->is_string(); }
    bool is_null() const { return v_->is_null(); }
    bool is_number() const { return v_->is_number(); }
    bool is_number_integer() const { return v_->is_number_integer(); }
    bool is_number_unsigned() const { return v_->is_number_unsigned(); }
    bool is_structured() const { return v_->is_structured(); }
    const char* type_name() const { return v_->type_name(); }
    std::string dump() const { return v_->dump(); }
    std::string get_string() const { return v_->get<std::string>(); }
    std::string_view get_string_view(std::string&) const {
      return v_->get_ref<const std::string&>();
    }
    int64_t get_int64() const { return v_->get<int64_t>(); }
    uint64_t get_uint64() const { return v_->get<uint64_t>(); }
    double get_double() const { return v_->get<double>(); }
    size_t size() const { return v_->size(); }
    template <typename F>
    void for_each(F&& f) const {
      size_t i = 0;
      for (const json& e : *v_) f(i++, Value(e));
    }

   private:
    friend struct Dom;
    const json* v_;
  };
  class Object {
   public:
    explicit Object(const Value& v) : v_(v.v_) {}
    std::optional<Value> find(std::string_view key) const {
      auto it = v_->find(std::string(key));
      if (it == v_->end()) return std::nullopt;
      return Value(*it);
    }
    template <typename F>
    void for_each_key(F&& f) const {
      for (const auto& [key, value] : v_->items()) f(std::string_view(key));
    }
    template <typename F>
    void for_each_key_unordered(F&& f) const {
      for_each_key(f);
    }

   private:
    const json* v_;
  };
};

struct InPlace {
  using Value = json_text::Value;
  using Object = json_text::Object;
};

template <typename... Args>
[[noreturn]] void FailIn(const std::string& source, fmt::format_string<Args...> format,
                         Args&&... args) {
  ThrowInputError("{}: {}", source, fmt::format(format, std::forward<Args>(args)...));
}

// Reads a graph from either front end. Messages name where they are with
// `what` and `where` callables, formatted only when a check fails.
template <typename J>
class Reader {
  using Value = typename J::Value;
  using Object = typename J::Object;

 public:
  explicit Reader(const std::string& source) : source_(source) {}

  Graph Read(const Value& doc) {
    if (!doc.is_object()) Fail("the top level must be an object");
    const Object top(doc);
    auto top_level = [] { return std::string("the top level"); };
    CheckKeys(top, top_level, {"graph_format", "name", "dims", "tensors", "ops", "outputs"});
    const Value format = Required(top, "graph_format", top_level);
    if (!format.is_number_integer() || format.get_int64() != 1) {
      Fail("graph_format must be 1, got {}", Describe(format));
    }
    if (auto name = top.find("name")) graph_.set_name(String(*name, Is("name")));
    if (auto dims = top.find("dims")) ReadDims(Array(*dims, Is("dims")));
    const Value tensors = Array(Required(top, "tensors", top_level), Is("tensors"));
    // Room for all: a graph of a million ops should not grow its arrays step
    // by step, holding old and new copies at once.
    const auto ops = top.find("ops");
    graph_.Reserve(tensors.size(), ops && ops->is_array() ? ops->size() : 0);
    ReadTensors(tensors);
    ReadOps(Array(Required(top, "ops", top_level), Is("ops")));
    ReadOutputs(Array(Required(top, "outputs", top_level), Is("outputs")));
    try {
      VerifyGraph(graph_);
    } catch (const InputError& e) {
      Fail("{}", e.what());
    }
    return std::move(graph_);
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) {
    FailIn(source_, format, std::forward<Args>(args)...);
  }

  // A `what` that is a fixed text.
  static auto Is(const char* text) {
    return [text] { return std::string(text); };
  }
  // `where` followed by a suffix.
  template <typename Where>
  static auto Then(const Where& where, const char* suffix) {
    return [&where, suffix] { return where() + suffix; };
  }

  // Reports the first unknown key in std::map order (nlohmann's), after a
  // quick look in the text's order for the usual case of none.
  template <typename Where>
  void CheckKeys(const Object& obj, const Where& where,
                 std::initializer_list<std::string_view> allowed) {
    auto known = [&](std::string_view key) {
      return std::find(allowed.begin(), allowed.end(), key) != allowed.end();
    };
    bool all_known = true;
    obj.for_each_key_unordered([&](std::string_view key) { all_known = all_known && known(key); });
    if (all_known) return;
    obj.for_each_key([&](std::string_view key) {
      if (!known(key)) Fail("{}: unknown key '{}'", where(), key);
    });
  }
  // A value for an error message: scalars as written, arrays and objects by
  // type only (dumping them recurses once per level and can overflow the stack
  // on deeply nested input), long strings cut short.
  static std::string Describe(const Value& v) {
    if (v.is_structured()) return fmt::format("an {}", v.type_name());
    std::string text = v.dump();
    if (text.size() > 80) text = text.substr(0, 80) + "...";
    return text;
  }
  template <typename Where>
  Value Required(const Object& obj, const char* key, const Where& where) {
    auto v = obj.find(key);
    if (!v) Fail("{}: missing key '{}'", where(), key);
    return *v;
  }
  template <typename What>
  Value Array(const Value& v, const What& what) {
    if (!v.is_array()) Fail("{} must be an array, got {}", what(), v.type_name());
    return v;
  }
  template <typename What>
  std::string String(const Value& v, const What& what) {
    if (!v.is_string()) Fail("{} must be a string, got {}", what(), v.type_name());
    return v.get_string();
  }
  template <typename What>
  std::string_view StringView(const Value& v, const What& what) {
    if (!v.is_string()) Fail("{} must be a string, got {}", what(), v.type_name());
    return v.get_string_view(scratch_);
  }
  template <typename What>
  int64_t Int(const Value& v, const What& what) {
    if (!v.is_number_integer()) Fail("{} must be an integer, got {}", what(), Describe(v));
    if (v.is_number_unsigned() && v.get_uint64() > static_cast<uint64_t>(INT64_MAX)) {
      Fail("{} is too large: {}", what(), Describe(v));
    }
    return v.get_int64();
  }
  template <typename What>
  double Number(const Value& v, const What& what) {
    if (!v.is_number()) Fail("{} must be a number, got {}", what(), Describe(v));
    return v.get_double();
  }
  template <typename What>
  std::vector<int64_t> IntArray(const Value& v, const What& what) {
    Array(v, what);
    std::vector<int64_t> out;
    const auto entry = Then(what, " entry");
    v.for_each([&](size_t, const Value& e) { out.push_back(Int(e, entry)); });
    return out;
  }

  void ReadDims(const Value& dims) {
    dims.for_each([&](size_t i, const Value& d) {
      // Until the name is known, the entry is named by its position.
      auto at = [i] { return fmt::format("dims[{}]", i); };
      if (!d.is_object()) Fail("{} must be an object, got {}", at(), Describe(d));
      const Object obj(d);
      DynamicDim dim;
      dim.name = String(Required(obj, "name", at), Then(at, " name"));
      if (dim.name.empty()) Fail("{}: the name is empty", at());
      auto where = [&] { return fmt::format("dim '{}'", dim.name); };
      CheckKeys(obj, where, {"name", "min", "max"});
      dim.min = Int(Required(obj, "min", where), Then(where, " min"));
      dim.max = Int(Required(obj, "max", where), Then(where, " max"));
      if (dim.min < 0 || dim.max < dim.min) {
        Fail("{}: needs 0 <= min <= max, got min {} max {}", where(), dim.min, dim.max);
      }
      if (graph_.FindDim(dim.name)) Fail("dims: dim '{}' is declared twice", dim.name);
      graph_.AddDim(std::move(dim));
    });
  }

  void ReadTensors(const Value& tensors) {
    tensors.for_each([&](size_t i, const Value& t) {
      auto at = [i] { return fmt::format("tensors[{}]", i); };
      if (!t.is_object()) Fail("{} must be an object, got {}", at(), Describe(t));
      const Object obj(t);
      Tensor tensor;
      tensor.name = String(Required(obj, "name", at), Then(at, " name"));
      if (tensor.name.empty()) Fail("{}: the name is empty", at());
      auto where = [&] { return fmt::format("tensor '{}'", tensor.name); };
      CheckKeys(obj, where, {"name", "shape", "dtype", "role"});
      const auto shape_entry = Then(where, " shape entry");
      dims_.clear();  // then one allocation of the right size
      Array(Required(obj, "shape", where), Then(where, " shape"))
          .for_each([&](size_t, const Value& d) {
            if (d.is_string()) {
              const std::string name = d.get_string();
              auto dim = graph_.FindDim(name);
              if (!dim) Fail("{}: shape names dim '{}', which is not in dims", where(), name);
              dims_.push_back(Dim::Dynamic(*dim));
            } else {
              const int64_t v = Int(d, shape_entry);
              if (v < 0) Fail("{}: shape entry {} is negative", where(), v);
              dims_.push_back(Dim::Static(v));
            }
          });
      tensor.shape.assign(dims_.begin(), dims_.end());
      const std::string_view dtype =
          StringView(Required(obj, "dtype", where), Then(where, " dtype"));
      auto parsed = ParseDType(dtype);
      if (!parsed) Fail("{}: unknown dtype '{}' (float16, bfloat16 or float32)", where(), dtype);
      tensor.dtype = *parsed;
      if (auto role_value = obj.find("role")) {
        const std::string_view role = StringView(*role_value, Then(where, " role"));
        if (role == "input")
          tensor.role = Role::kInput;
        else if (role == "param")
          tensor.role = Role::kParam;
        else
          Fail("{}: unknown role '{}' (input or param)", where(), role);
      }
      if (graph_.TryAddTensor(tensor) == kNone) Fail("{} is declared twice", where());
    });
  }

  template <typename Where>
  TensorId TensorRef(const Value& v, const Where& where) {
    const std::string_view name = StringView(v, where);
    auto id = graph_.FindTensor(name);
    if (!id) Fail("{}: tensor '{}' is not declared", where(), name);
    return *id;
  }

  void ReadOps(const Value& ops) {
    // Per tensor, the index of the last op that listed it as an output.
    std::vector<int64_t> listed;
    int64_t count = 0;
    ops.for_each([&](size_t i, const Value& o) {
      ++count;
      auto at = [i] { return fmt::format("ops[{}]", i); };
      if (!o.is_object()) Fail("{} must be an object, got {}", at(), Describe(o));
      const Object obj(o);
      Op op;
      op.name = String(Required(obj, "name", at), Then(at, " name"));
      if (op.name.empty()) Fail("{}: the name is empty", at());
      auto where = [&] { return fmt::format("op '{}'", op.name); };
      // Before its outputs, which a copied op would report as produced twice.
      if (graph_.FindOp(op.name)) Fail("{} is declared twice", where());
      const std::string_view type = StringView(Required(obj, "op", where), Then(where, " op"));
      auto parsed = ParseOpType(type);
      if (!parsed) Fail("{}: unknown op type '{}'", where(), type);
      op.type = *parsed;
      ReadAttrs(obj, op, where);
      const Value inputs = Array(Required(obj, "inputs", where), Then(where, " inputs"));
      const bool layernorm = IsLayerNorm(op.type);
      if (layernorm) {
        const size_t n = inputs.size();
        if (n == 0 || n > 3) {
          Fail("{}: layernorm takes X, gamma, beta (1 to 3 inputs), got {}", where(), n);
        }
        if (n < 3) op.attrs.has_beta = false;
        if (n < 2) op.attrs.has_gamma = false;
      }
      const auto input = Then(where, " input");
      ids_.clear();  // then one allocation of the right size
      inputs.for_each([&](size_t k, const Value& in) {
        if (layernorm && k > 0 && in.is_null()) {
          (k == 1 ? op.attrs.has_gamma : op.attrs.has_beta) = false;
          return;
        }
        ids_.push_back(TensorRef(in, input));
      });
      op.inputs.assign(ids_.begin(), ids_.end());
      ids_.clear();
      const auto output = Then(where, " output");
      Array(Required(obj, "outputs", where), Then(where, " outputs"))
          .for_each([&](size_t, const Value& out) {
            const TensorId id = TensorRef(out, output);
            const Tensor& t = graph_.tensor(id);
            if (t.role != Role::kIntermediate) {
              Fail("{}: output '{}' is a graph {}, which no op may produce", where(), t.name,
                   t.role == Role::kInput ? "input" : "param");
            }
            if (t.producer != kNone) {
              Fail("{}: tensor '{}' is already produced by op '{}'", where(), t.name,
                   graph_.op(t.producer).name);
            }
            listed.resize(static_cast<size_t>(graph_.num_tensor_ids()), -1);
            int64_t& last = listed[static_cast<size_t>(id)];
            if (last == count) Fail("{}: output '{}' is listed twice", where(), t.name);
            last = count;
            ids_.push_back(id);
          });
      op.outputs.assign(ids_.begin(), ids_.end());
      if (IsGroupGemm(op.type) && group_size_ != static_cast<int64_t>(op.outputs.size())) {
        Fail("{} ({}): group_size {} does not match its {} outputs", where(), OpTypeName(op.type),
             group_size_, op.outputs.size());
      }
      graph_.AddOp(std::move(op));
    });
    if (graph_.num_op_ids() == 0) Fail("the graph has no ops");
  }

  template <typename Where>
  void ReadAttrs(const Object& o, Op& op, const Where& where) {
    Attrs& a = op.attrs;
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "alpha"});
        if (auto alpha = o.find("alpha")) a.alpha = Number(*alpha, Then(where, " alpha"));
        break;
      case OpFamily::kLayerNorm:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "normalized_shape", "eps"});
        a.normalized_shape =
            IntArray(Required(o, "normalized_shape", where), Then(where, " normalized_shape"));
        if (auto eps = o.find("eps")) a.eps = Number(*eps, Then(where, " eps"));
        break;
      case OpFamily::kSplit:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "split_sizes", "dim"});
        a.split_sizes = IntArray(Required(o, "split_sizes", where), Then(where, " split_sizes"));
        a.dim = Int(Required(o, "dim", where), Then(where, " dim"));
        break;
      case OpFamily::kConcatenate:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "dim"});
        a.dim = Int(Required(o, "dim", where), Then(where, " dim"));
        break;
      case OpFamily::kElementwise: {
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "func"});
        const std::string_view func = StringView(Required(o, "func", where), Then(where, " func"));
        auto f = ParseEwFunc(func);
        if (!f) Fail("{}: unknown func '{}'", where(), func);
        a.func = *f;
        break;
      }
      case OpFamily::kReshape:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "shape"});
        a.shape = IntArray(Required(o, "shape", where), Then(where, " shape"));
        break;
      case OpFamily::kGroupGemm:
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "group_size"});
        // Checked against the outputs once they are read: the member count
        // is the outputs', not stored twice.
        group_size_ = Int(Required(o, "group_size", where), Then(where, " group_size"));
        break;
      case OpFamily::kGroupLayerNorm: {
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "normalized_shapes", "eps"});
        const auto entry = Then(where, " normalized_shapes entry");
        Array(Required(o, "normalized_shapes", where), Then(where, " normalized_shapes"))
            .for_each(
                [&](size_t, const Value& s) { a.normalized_shapes.push_back(IntArray(s, entry)); });
        if (auto eps = o.find("eps")) a.eps = Number(*eps, Then(where, " eps"));
        break;
      }
      case OpFamily::kOpaque:
        Fail(
            "{}: op type 'opaque' stands for an unknown ONNX operator, which graph JSON v1 "
            "cannot hold (read the .onnx model instead)",
            where());
    }
  }

  void ReadOutputs(const Value& outputs) {
    std::vector<TensorId> ids;
    std::vector<bool> seen(static_cast<size_t>(graph_.num_tensor_ids()), false);
    outputs.for_each([&](size_t, const Value& o) {
      const TensorId id = TensorRef(o, Is("outputs"));
      if (seen[static_cast<size_t>(id)]) {
        Fail("outputs: tensor '{}' is listed twice", graph_.tensor(id).name);
      }
      seen[static_cast<size_t>(id)] = true;
      ids.push_back(id);
    });
    if (ids.empty()) Fail("outputs: the graph has no outputs");
    graph_.set_outputs(std::move(ids));
  }

  const std::string& source_;
  Graph graph_;
  int64_t group_size_ = 0;     // the last group GEMM's, as read
  std::string scratch_;        // decoded strings with escapes
  std::vector<Dim> dims_;      // a shape being read
  std::vector<TensorId> ids_;  // an op's inputs or outputs being read
};

// The reader's fast path, for graph JSON in the form hfuse and its tools
// write: top-level keys in the order graph_format, name, dims, tensors, ops,
// outputs; each tensor's and op's keys in the writer's order; strings of
// plain printable ASCII. It reads such a file in one pass, checking its
// syntax and everything the reader checks, and builds the same graph (in
// that form, the file order is the reader's order). It never reports a
// problem: on anything else (another key order, an escape, a check that
// fails) it gives up, and the reader above reads the file again, and words
// the message. So every error message, and every graph of another form,
// come from one place.
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
        break;
      case OpFamily::kGroupLayerNorm:
        need("normalized_shapes");
        Array([&] { a.normalized_shapes.push_back(Ints()); });
        if (next("eps")) a.eps = Number();
        break;
      case OpFamily::kOpaque: throw GiveUp{};
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

// A SAX handler that keeps nothing: parsing with it finds nlohmann's message
// for a malformed text without building the document.
struct NullSax {
  std::optional<std::string> error;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(json::string_t&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    error = e.what();
    return false;
  }
};

// Appends JSON text to a buffer, one tensor or op per line; with a sink,
// hands the buffer over whenever it passes a megabyte, so that a fused graph
// of hundreds of MB is never held whole.
class Writer {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit Writer(const Graph& g, const Sink* sink = nullptr) : g_(g), sink_(sink) {}

  std::string Write(const std::vector<OpId>& order) {
    std::vector<bool> used(static_cast<size_t>(g_.num_tensor_ids()), false);
    for (OpId id : order) {
      for (TensorId t : g_.op(id).inputs) used[static_cast<size_t>(t)] = true;
      for (TensorId t : g_.op(id).outputs) used[static_cast<size_t>(t)] = true;
    }
    for (TensorId t : g_.outputs()) used[static_cast<size_t>(t)] = true;

    Put("{\n \"graph_format\": 1,\n");
    if (!g_.name().empty()) {
      Put(" \"name\": ");
      Str(g_.name());
      Put(",\n");
    }
    Put(" \"dims\": [");
    for (size_t i = 0; i < g_.dims().size(); ++i) {
      const DynamicDim& d = g_.dims()[i];
      Put(i ? ",\n  {\"name\": " : "\n  {\"name\": ");
      Str(d.name);
      Put(", \"min\": ");
      Int(d.min);
      Put(", \"max\": ");
      Int(d.max);
      Put("}");
    }
    Put(g_.dims().empty() ? "],\n" : "\n ],\n");
    Put(" \"tensors\": [");
    bool first = true;
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      const Tensor& t = g_.tensor(id);
      if (!t.alive || !(used[static_cast<size_t>(id)] || t.role == Role::kInput)) continue;
      Put(first ? "\n  {\"name\": " : ",\n  {\"name\": ");
      first = false;
      Str(t.name);
      Put(", \"shape\": [");
      for (size_t i = 0; i < t.shape.size(); ++i) {
        if (i) Put(", ");
        const Dim& d = t.shape[i];
        if (d.is_static()) {
          Int(d.value);
        } else {
          Str(g_.dims()[static_cast<size_t>(d.dynamic)].name);
        }
      }
      Put("], \"dtype\": \"");
      Put(DTypeName(t.dtype));
      Put("\"");
      if (t.role == Role::kInput) Put(", \"role\": \"input\"");
      if (t.role == Role::kParam) Put(", \"role\": \"param\"");
      Put("}");
      Flush(false);
    }
    Put("\n ],\n \"ops\": [");
    for (size_t i = 0; i < order.size(); ++i) {
      Put(i ? ",\n  " : "\n  ");
      WriteOp(g_.op(order[i]));
      Flush(false);
    }
    Put("\n ],\n \"outputs\": [");
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      Put(i ? ", " : "");
      Str(g_.tensor(g_.outputs()[i]).name);
    }
    Put("]\n}\n");
    Flush(true);
    return std::move(out_);
  }

 private:
  void Put(std::string_view s) { out_.append(s); }
  void Flush(bool last) {
    if (sink_ && (last || out_.size() >= (size_t{1} << 20))) {
      (*sink_)(out_);
      out_.clear();
    }
  }
  // A string as nlohmann writes it: printable ASCII other than quote and
  // backslash as it is, anything else through nlohmann's escaping.
  void Str(std::string_view s) {
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7F || c == '"' || c == '\\') {
        Put(json(std::string(s)).dump());
        return;
      }
    }
    out_ += '"';
    out_.append(s);
    out_ += '"';
  }
  void Int(int64_t v) {
    char buf[24];
    const auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
    out_.append(buf, end);
  }
  void Num(double v) { Put(json(v).dump()); }
  void Ints(const std::vector<int64_t>& v) {
    Put("[");
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) Put(", ");
      Int(v[i]);
    }
    Put("]");
  }
  void Names(const std::vector<TensorId>& ids, bool null_second) {
    Put("[");
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) Put(", ");
      Str(g_.tensor(ids[i]).name);
      if (i == 0 && null_second) Put(", null");
    }
    Put("]");
  }

  void WriteOp(const Op& op) {
    Put("{\"name\": ");
    Str(op.name);
    Put(", \"op\": \"");
    Put(OpTypeName(op.type));
    Put("\", \"inputs\": ");
    // A LayerNorm with beta but no gamma: null where gamma would be.
    Names(op.inputs, IsLayerNorm(op.type) && !op.attrs.has_gamma && op.attrs.has_beta);
    Put(", \"outputs\": ");
    Names(op.outputs, false);
    const Attrs& a = op.attrs;
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
        if (a.alpha) {
          Put(", \"alpha\": ");
          Num(*a.alpha);
        }
        break;
      case OpFamily::kLayerNorm:
        Put(", \"normalized_shape\": ");
        Ints(a.normalized_shape);
        if (a.eps) {
          Put(", \"eps\": ");
          Num(*a.eps);
        }
        break;
      case OpFamily::kSplit:
        Put(", \"split_sizes\": ");
        Ints(a.split_sizes);
        Put(", \"dim\": ");
        Int(a.dim);
        break;
      case OpFamily::kConcatenate:
        Put(", \"dim\": ");
        Int(a.dim);
        break;
      case OpFamily::kElementwise:
        Put(", \"func\": \"");
        Put(EwFuncName(a.func));
        Put("\"");
        break;
      case OpFamily::kReshape:
        Put(", \"shape\": ");
        Ints(a.shape);
        break;
      case OpFamily::kGroupGemm:
        Put(", \"group_size\": ");
        Int(static_cast<int64_t>(op.outputs.size()));
        break;
      case OpFamily::kGroupLayerNorm: {
        Put(", \"normalized_shapes\": [");
        for (size_t i = 0; i < a.normalized_shapes.size(); ++i) {
          if (i) Put(", ");
          Ints(a.normalized_shapes[i]);
        }
        Put("]");
        if (a.eps) {
          Put(", \"eps\": ");
          Num(*a.eps);
        }
        break;
      }
      case OpFamily::kOpaque:
        ThrowInputError(
            "op '{}' is the ONNX operator {}, which hfuse keeps opaque and graph "
            "JSON v1 cannot hold; write ONNX (.onnx) instead",
            op.name, a.onnx ? a.onnx->op_type : "?");
    }
    Put("}");
  }

  const Graph& g_;
  const Sink* sink_;
  std::string out_;
};

}  // namespace

Graph ParseGraphJson(std::string_view text, const std::string& source) {
  // nlohmann's message for this one ("unexpected end of input") hides the cause.
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    FailIn(source, "the file is empty");
  try {
    return FastReader(text).Read();
  } catch (const FastReader::GiveUp&) {
    // Another form, or a problem: the reader below reads it, or words it.
  }
  json_text::Layout layout;
  if (json_text::Validate(text, &layout)) {
    const json_text::Document doc(text, &layout);
    return Reader<InPlace>(source).Read(doc.root());
  }
  // Malformed (its message, without building a document), or valid in a
  // form that the in-place path leaves to nlohmann.
  NullSax sax;
  json::sax_parse(text.begin(), text.end(), &sax);
  // parse_error, and out_of_range for a number beyond double (1e400).
  if (sax.error) FailIn(source, "malformed JSON: {}", *sax.error);
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    FailIn(source, "malformed JSON: {}", e.what());
  }
  return Reader<Dom>(source).Read(Dom::Value(doc));
}

Graph ReadGraphJsonFile(const std::string& path) {
  const FileText text(path);
  return ParseGraphJson(text.view(), path);
}

std::string WriteGraphJson(const Graph& graph, const std::vector<OpId>& op_order) {
  return Writer(graph).Write(op_order.empty() ? graph.LiveOps() : op_order);
}

void WriteGraphJsonFile(const std::string& path, const Graph& graph,
                        const std::vector<OpId>& op_order) {
  WriteFileAtomic(path, [&](const std::function<void(std::string_view)>& put) {
    Writer(graph, &put).Write(op_order.empty() ? graph.LiveOps() : op_order);
  });
}

}  // namespace hfuse
