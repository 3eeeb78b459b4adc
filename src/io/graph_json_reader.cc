// The graph JSON reader that checks everything and words every message: the
// reader for any valid text the fast path (graph_json_fast_reader.h) leaves
// aside, and for every problem. It reads the text in place (json_text.h: one
// validating pass, then values read where they lie), so that a graph file of
// hundreds of MB costs little more than the graph; what that path leaves
// aside (malformed text, whose message nlohmann words, and rare valid forms)
// goes through nlohmann's DOM, with the same checks and messages, the reader
// being written once for both front ends (a template over their values).
#include "graph_json_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/error.h"
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
        CheckKeys(o, where, {"name", "op", "inputs", "outputs", "group_size", "member_ops"});
        // Checked against the outputs once they are read: the member count
        // is the outputs', not stored twice.
        group_size_ = Int(Required(o, "group_size", where), Then(where, " group_size"));
        if (op.type == OpType::kGroupGemmRcrMixed) {  // each member's GEMM kind
          Array(Required(o, "member_ops", where), Then(where, " member_ops"))
              .for_each([&](size_t, const Value& v) {
                const std::string_view kind = StringView(v, Then(where, " member_ops entry"));
                const std::optional<OpType> t = ParseOpType(kind);
                if (!t || !IsGemm(*t)) Fail("{}: member_ops: '{}' is not a GEMM op type", where(), kind);
                a.member_ops.push_back(*t);
              });
        } else if (o.find("member_ops")) {
          Fail("{}: member_ops is for {} only", where(), OpTypeName(OpType::kGroupGemmRcrMixed));
        }
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
      case OpFamily::kGroupGather:
        Fail("{}: op type 'group_gather' groups ONNX Gathers, which graph JSON v1 cannot hold "
             "(read the .onnx model instead)",
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

}  // namespace

Graph ReadGraphJsonChecked(std::string_view text, const std::string& source) {
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

}  // namespace hfuse
