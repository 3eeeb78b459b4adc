// The printer's text back into a graph. See graph_text.h.
#include "hfuse/io/graph_text.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <memory>
#include <optional>

#include "hfuse/ir/verifier.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

struct Token {
  enum Kind { kWord, kQuoted, kPunct } kind;
  std::string text;
};

bool WordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '/' || c == '-' || c == '+';
}

class LineParser {
 public:
  LineParser(std::string_view line, const std::string& source, int number)
      : source_(source), number_(number) {
    Tokenize(line);
  }

  template <typename... Args>
  [[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) const {
    ThrowInputError("{}:{}: {}", source_, number_, fmt::format(format, std::forward<Args>(args)...));
  }

  bool AtEnd() const { return at_ == tokens_.size(); }
  bool Peek(std::string_view punct, size_t ahead = 0) const {
    return at_ + ahead < tokens_.size() && tokens_[at_ + ahead].kind == Token::kPunct &&
           tokens_[at_ + ahead].text == punct;
  }
  bool Accept(std::string_view punct) {
    if (!Peek(punct)) return false;
    ++at_;
    return true;
  }
  void Expect(std::string_view punct) {
    if (!Accept(punct)) Fail("expected '{}'{}", punct, AtEnd() ? " at the end" : "");
  }
  std::string Name() {
    if (AtEnd() || tokens_[at_].kind == Token::kPunct) Fail("expected a name");
    return tokens_[at_++].text;
  }
  bool PeekWord(std::string_view word) const {
    return at_ < tokens_.size() && tokens_[at_].kind == Token::kWord && tokens_[at_].text == word;
  }
  int64_t Int() {
    const std::string w = Name();
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec != std::errc() || end != w.data() + w.size()) Fail("expected an integer, got '{}'", w);
    return v;
  }
  double Number() {
    const std::string w = Name();
    char* end = nullptr;
    const double v = std::strtod(w.c_str(), &end);
    if (w.empty() || end != w.c_str() + w.size()) Fail("expected a number, got '{}'", w);
    return v;
  }
  std::vector<int64_t> Ints() {
    std::vector<int64_t> v;
    Expect("[");
    while (!Accept("]")) {
      if (!v.empty()) Expect(",");
      v.push_back(Int());
    }
    return v;
  }
  size_t at_ = 0;
  std::vector<Token> tokens_;

 private:
  void Tokenize(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i;
      } else if (c == '"') {
        std::string text;
        for (++i;; ++i) {
          if (i >= s.size()) Fail("unterminated quoted name");
          if (s[i] == '"') break;
          if (s[i] == '\\' && i + 1 < s.size()) {
            ++i;
            if (s[i] == 'x' && i + 2 < s.size()) {
              text += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
              i += 2;
              continue;
            }
          }
          text += s[i];
        }
        ++i;
        tokens_.push_back({Token::kQuoted, std::move(text)});
      } else if (WordChar(c)) {
        size_t j = i;
        while (j < s.size() && WordChar(s[j])) ++j;
        tokens_.push_back({Token::kWord, std::string(s.substr(i, j - i))});
        i = j;
      } else if (std::string_view("()[]{},=:#").find(c) != std::string_view::npos) {
        tokens_.push_back({Token::kPunct, std::string(1, c)});
        ++i;
      } else {
        Fail("unexpected character '{}'", c);
      }
    }
  }

  const std::string& source_;
  int number_;
};

class TextReader {
 public:
  explicit TextReader(const std::string& source) : source_(source) {}

  Graph Read(std::string_view text) {
    int number = 0;
    size_t begin = 0;
    while (begin < text.size()) {
      size_t end = text.find('\n', begin);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(begin, end - begin);
      begin = end + 1;
      ++number;
      const size_t first = line.find_first_not_of(" \t\r");
      if (first == std::string_view::npos || line.substr(first, 2) == "//") continue;
      LineParser p(line, source_, number);
      ReadLine(p);
      if (!p.AtEnd()) p.Fail("unexpected '{}'", p.tokens_[p.at_].text);
    }
    if (!have_outputs_) ThrowInputError("{}: no 'output' line", source_);
    try {
      VerifyGraph(graph_);
    } catch (const InputError& e) {
      ThrowInputError("{}: {}", source_, e.what());
    }
    return std::move(graph_);
  }

 private:
  TensorId Ref(LineParser& p) {
    const std::string name = p.Name();
    const auto id = graph_.FindTensor(name);
    if (!id) p.Fail("tensor '{}' is not declared", name);
    return *id;
  }

  void ReadLine(LineParser& p) {
    const bool op_line = p.Peek("(") || p.Peek("=", 1);
    if (op_line) return ReadOp(p);
    const std::string keyword = p.Name();
    if (keyword == "graph") {
      graph_.set_name(p.Name());
    } else if (keyword == "dim") {
      DynamicDim d;
      d.name = p.Name();
      const std::vector<int64_t> range = p.Ints();
      if (range.size() != 2 || range[0] < 0 || range[0] > range[1]) p.Fail("expected [min, max]");
      d.min = range[0];
      d.max = range[1];
      graph_.AddDim(std::move(d));
    } else if (keyword == "input" || keyword == "param" || keyword == "tensor") {
      Tensor t;
      t.role = keyword == "input" ? Role::kInput : keyword == "param" ? Role::kParam : Role::kIntermediate;
      t.name = p.Name();
      p.Expect(":");
      const std::string dtype = p.Name();
      // Graph JSON holds float tensors only; the text also reads the int and
      // bool tensors of ONNX models (the ids an opaque Gather reads).
      std::optional<DType> parsed = ParseDType(dtype);
      for (DType d : {DType::kInt64, DType::kInt32, DType::kBool}) {
        if (dtype == DTypeName(d)) parsed = d;
      }
      if (!parsed) p.Fail("unknown dtype '{}'", dtype);
      t.dtype = *parsed;
      p.Expect("[");
      while (!p.Accept("]")) {
        if (!t.shape.empty()) p.Expect(",");
        const std::string d = p.Name();
        if (!d.empty() && (d[0] == '-' || (d[0] >= '0' && d[0] <= '9'))) {
          int64_t v = 0;
          const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), v);
          if (ec != std::errc() || end != d.data() + d.size() || v < 0) p.Fail("bad dim '{}'", d);
          t.shape.push_back(Dim::Static(v));
        } else {
          const auto dim = graph_.FindDim(d);
          if (!dim) p.Fail("dim '{}' is not declared", d);
          t.shape.push_back(Dim::Dynamic(*dim));
        }
      }
      if (p.PeekWord("view")) {  // a strided view: set after all tensors exist
        p.Name();
        p.Expect("(");
        views_.push_back({t.name, p.Name(), 0});
        p.Expect(",");
        views_.back().offset = p.Int();
        p.Expect(")");
      }
      const std::string name = t.name;
      if (graph_.AddTensor(std::move(t)) == kNone) p.Fail("tensor '{}' is declared twice", name);
    } else if (keyword == "output") {
      std::vector<TensorId> outs;
      do {
        outs.push_back(Ref(p));
      } while (p.Accept(","));
      graph_.set_outputs(std::move(outs));
      have_outputs_ = true;
    } else {
      p.Fail("expected graph, dim, input, param, tensor, output or an op, got '{}'", keyword);
    }
  }

  void ReadOp(LineParser& p) {
    Op op;
    if (p.Accept("(")) {
      do {
        op.outputs.push_back(Ref(p));
      } while (p.Accept(","));
      p.Expect(")");
    } else {
      op.outputs.push_back(Ref(p));
    }
    p.Expect("=");
    const std::string type = p.Name();
    const auto parsed = ParseOpType(type);
    if (!parsed) p.Fail("unknown op type '{}'", type);
    op.type = *parsed;
    p.Expect("(");
    size_t count = 0;
    while (!p.Accept(")")) {
      if (count > 0) p.Expect(",");
      if (IsLayerNorm(op.type) && count == 1 && p.PeekWord("null")) {
        p.Name();
        op.attrs.has_gamma = false;
      } else {
        op.inputs.push_back(Ref(p));
      }
      ++count;
    }
    if (IsLayerNorm(op.type)) {
      if (count < 3) op.attrs.has_beta = false;
      if (count < 2) op.attrs.has_gamma = false;
    }
    if (p.Accept("{")) {
      while (!p.Accept("}")) {
        if (p.Peek(",")) p.Expect(",");
        ReadAttr(p, op);
      }
    }
    op.name = p.Accept("#") ? p.Name() : fmt::format("op{}", ops_);
    ++ops_;
    if (op.type == OpType::kOpaque && !op.attrs.onnx) p.Fail("an opaque op needs {{onnx = OPERATOR}}");
    if (op.type == OpType::kGroupGather && !op.attrs.onnx) p.Fail("a group_gather needs {{members = [...]}}");
    for (TensorId out : op.outputs) {
      if (graph_.tensor(out).producer != kNone) {
        p.Fail("tensor '{}' is already produced", graph_.tensor(out).name);
      }
    }
    const std::string name = op.name;
    if (graph_.AddOp(std::move(op)) == kNone) p.Fail("op '{}' is declared twice", name);
    ApplyViews();
  }

  void ReadAttr(LineParser& p, Op& op) {
    const std::string key = p.Name();
    if (key == "elided") {
      op.elided = true;
      return;
    }
    p.Expect("=");
    Attrs& a = op.attrs;
    if (key == "alpha") {
      a.alpha = p.Number();
    } else if (key == "eps") {
      a.eps = p.Number();
    } else if (key == "normalized_shape") {
      a.normalized_shape = p.Ints();
    } else if (key == "normalized_shapes") {
      p.Expect("[");
      while (!p.Accept("]")) {
        if (!a.normalized_shapes.empty()) p.Expect(",");
        a.normalized_shapes.push_back(p.Ints());
      }
    } else if (key == "member_ops") {
      p.Expect("[");
      while (!p.Accept("]")) {
        if (!a.member_ops.empty()) p.Expect(",");
        const std::string kind = p.Name();
        const auto parsed = ParseOpType(kind);
        if (!parsed || !IsGemm(*parsed)) p.Fail("member_ops: '{}' is not a GEMM op type", kind);
        a.member_ops.push_back(*parsed);
      }
    } else if (key == "split_sizes") {
      a.split_sizes = p.Ints();
    } else if (key == "dim") {
      a.dim = p.Int();
    } else if (key == "shape") {
      a.shape = p.Ints();
    } else if (key == "func") {
      const std::string f = p.Name();
      const auto func = ParseEwFunc(f);
      if (!func) p.Fail("unknown func '{}'", f);
      a.func = *func;
    } else if (key == "onnx" && op.type == OpType::kOpaque) {
      // A node of that operator made from its text (the printer's: the op
      // type, then int attributes such as axis = 1, which it does not print),
      // its inputs and output in slot order, at opset 17.
      auto node = std::make_shared<OnnxNode>();
      node->op_type = p.Name();
      node->opset = 17;
      for (size_t i = 0; i < op.inputs.size(); ++i) node->input_slots.push_back(static_cast<int32_t>(i));
      for (size_t i = 0; i < op.outputs.size(); ++i) node->output_slots.push_back(static_cast<int32_t>(i));
      a.onnx = std::move(node);
    } else if (key == "members" && op.type == OpType::kGroupGather) {
      auto node = std::make_shared<OnnxNode>();
      node->domain = "ai.hfuse";
      node->op_type = std::string(OpKind(op.type).onnx_name);
      node->opset = 1;
      p.Expect("[");
      while (!p.Accept("]")) {
        if (!node->member_names.empty()) p.Expect(",");
        node->member_names.push_back(p.Name());
      }
      a.onnx = std::move(node);
    } else if (op.type == OpType::kOpaque && a.onnx) {
      std::vector<int64_t> value = p.Peek("[") ? p.Ints() : std::vector<int64_t>{p.Int()};
      std::const_pointer_cast<OnnxNode>(a.onnx)->ints[key] = std::move(value);
    } else {
      p.Fail("unknown attribute '{}'", key);
    }
  }

  // Views name tensors that may be declared later; each is set once both exist.
  void ApplyViews() {
    for (const View& v : views_) {
      const auto t = graph_.FindTensor(v.tensor);
      const auto s = graph_.FindTensor(v.storage);
      if (!t || !s) ThrowInputError("{}: view of unknown tensor '{}'", source_, v.storage);
      graph_.mutable_tensor(*t).storage = *s;
      graph_.mutable_tensor(*t).storage_offset = v.offset;
    }
    views_.clear();
  }

  struct View {
    std::string tensor, storage;
    int64_t offset;
  };
  const std::string& source_;
  Graph graph_;
  std::vector<View> views_;
  int ops_ = 0;
  bool have_outputs_ = false;
};

}  // namespace

Graph ParseGraphText(std::string_view text, const std::string& source) {
  return TextReader(source).Read(text);
}

}  // namespace hfuse
