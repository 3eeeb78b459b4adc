// The shape-arithmetic evaluator. See shape_arithmetic.h.
#include "shape_arithmetic.h"

#include <algorithm>
#include <climits>
#include <set>

#include "onnx_util.h"

namespace hfuse::onnx_import {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;
using onnx_util::IntAttr;

std::optional<SymValue> ConstantSym(const TensorProto& c) {
  if (c.dims_size() > 1 || onnx_util::TensorNumel(c) > 64) return std::nullopt;
  std::vector<int64_t> ints;
  if (c.data_type() == TensorProto::BOOL) {
    auto data = onnx_util::TensorData(c);
    if (!data) return std::nullopt;
    for (uint8_t b : *data) ints.push_back(b != 0);
  } else if (auto v = onnx_util::TensorInts(c)) {
    ints = *v;
  } else {
    return std::nullopt;
  }
  SymValue s;
  s.scalar = c.dims_size() == 0;
  for (int64_t i : ints) s.v.push_back(Dim::Static(i));
  return s;
}

namespace {

// [start, end) of a Shape node on a rank-`rank` input, clamped as ONNX does.
std::pair<int64_t, int64_t> ShapeRange(const NodeProto& node, int64_t rank) {
  int64_t start = IntAttr(node, "start", 0), end = IntAttr(node, "end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  return {start, end};
}

// Add, Sub, Mul and Div of two elements: static numbers, or a named dim
// with the identity of the operation (d · 1, d + 0, 1 · d, 0 + d, d / 1).
std::optional<Dim> Arithmetic(const std::string& t, const Dim& x, const Dim& y) {
  if (x.is_static() && y.is_static()) {
    // Checked: a model's constants may be anything, and a value that wraps has none.
    const int64_t p = x.value, q = y.value;
    int64_t r = 0;
    if (t == "Div") {
      if (q == 0 || (p == INT64_MIN && q == -1)) return std::nullopt;
      return Dim::Static(p / q);
    }
    const bool wrapped = t == "Add"   ? __builtin_add_overflow(p, q, &r)
                         : t == "Sub" ? __builtin_sub_overflow(p, q, &r)
                                      : __builtin_mul_overflow(p, q, &r);
    if (wrapped) return std::nullopt;
    return Dim::Static(r);
  }
  if (!y.is_static()) {
    if ((t == "Mul" || t == "Add") && x.is_static() && x.value == (t == "Mul" ? 1 : 0)) return y;
    return std::nullopt;
  }
  if ((t == "Mul" || t == "Div") ? y.value == 1 : y.value == 0) return x;
  return std::nullopt;
}

// A comparison of two elements, when it follows from what is known: a
// static number is itself, a named dim lies in [1, ∞) and equals itself.
std::optional<bool> Comparison(const std::string& t, const Dim& x, const Dim& y) {
  if (x == y) return t == "Equal" || t == "LessOrEqual" || t == "GreaterOrEqual";
  constexpr int64_t kUnbounded = INT64_MAX;
  auto lo = [](const Dim& d) { return d.is_static() ? d.value : int64_t{1}; };
  auto hi = [](const Dim& d) { return d.is_static() ? d.value : kUnbounded; };
  // a < b: true when every a is below every b, false when none is.
  auto less = [&](const Dim& a, const Dim& b) -> std::optional<bool> {
    if (hi(a) < lo(b)) return true;
    if (lo(a) >= hi(b)) return false;
    return std::nullopt;
  };
  auto negate = [](std::optional<bool> v) -> std::optional<bool> {
    if (!v) return std::nullopt;
    return !*v;
  };
  if (t == "Less") return less(x, y);
  if (t == "Greater") return less(y, x);
  if (t == "GreaterOrEqual") return negate(less(x, y));
  if (t == "LessOrEqual") return negate(less(y, x));
  // Equal: false when one lies wholly below the other.
  if (less(x, y) == true || less(y, x) == true) return false;
  if (x.is_static() && y.is_static()) return x.value == y.value;
  return std::nullopt;
}

const std::set<std::string> kArithmetic = {"Add", "Sub", "Mul", "Div"};
const std::set<std::string> kComparisons = {"Equal", "Less", "Greater", "LessOrEqual",
                                            "GreaterOrEqual"};
const std::set<std::string> kLogic = {"And", "Or", "Xor"};

// A binary op element by element, with numpy broadcasting of a 1-element side.
std::optional<SymValue> Binary(const std::string& t, const SymValue& a, const SymValue& b) {
  const size_t n = std::max(a.v.size(), b.v.size());
  if ((a.v.size() != 1 && a.v.size() != n) || (b.v.size() != 1 && b.v.size() != n)) {
    return std::nullopt;
  }
  SymValue out{{}, a.scalar && b.scalar};
  for (size_t i = 0; i < n; ++i) {
    const Dim& x = a.v[a.v.size() == 1 ? 0 : i];
    const Dim& y = b.v[b.v.size() == 1 ? 0 : i];
    if (kArithmetic.count(t)) {
      const std::optional<Dim> d = Arithmetic(t, x, y);
      if (!d) return std::nullopt;
      out.v.push_back(*d);
    } else if (kComparisons.count(t)) {
      const std::optional<bool> c = Comparison(t, x, y);
      if (!c) return std::nullopt;
      out.v.push_back(Dim::Static(*c));
    } else {  // And, Or, Xor on bools
      if (!x.is_static() || !y.is_static()) return std::nullopt;
      const bool p = x.value != 0, q = y.value != 0;
      out.v.push_back(Dim::Static(t == "And" ? p && q : t == "Or" ? p || q : p != q));
    }
  }
  return out;
}

}  // namespace

std::optional<SymValue> EvalShapeArithmetic(const NodeProto& node, const SymInputs& sym) {
  const std::string& t = node.op_type();
  auto in = [&](int i) {
    return i < node.input_size() ? sym.value(node.input(i)) : std::nullopt;
  };
  if (t == "Shape") {
    const std::optional<Shape> shape = sym.shape(node.input(0));
    if (!shape) {
      auto x = in(0);  // the shape of a shape value
      if (!x) return std::nullopt;
      return SymValue{x->scalar ? std::vector<Dim>{}
                                : std::vector<Dim>{Dim::Static(static_cast<int64_t>(x->v.size()))},
                      false};
    }
    const auto [start, end] = ShapeRange(node, static_cast<int64_t>(shape->size()));
    return SymValue{{shape->begin() + start, shape->begin() + end}, false};
  }
  if (t == "Size") {  // the element count: of a static shape, or a shape value's length
    const std::optional<Shape> shape = sym.shape(node.input(0));
    int64_t n = 1;
    if (shape) {
      for (const Dim& d : *shape) {
        if (!d.is_static() || __builtin_mul_overflow(n, d.value, &n)) return std::nullopt;
      }
    } else if (auto x = in(0)) {
      n = static_cast<int64_t>(x->v.size());
    } else {
      return std::nullopt;
    }
    return SymValue{{Dim::Static(n)}, true};
  }
  if (t == "Reshape") {  // a shape value to 1-D
    auto x = in(0), target = in(1);
    if (!x || !target || target->v.size() != 1) return std::nullopt;
    return SymValue{x->v, false};
  }
  if (t == "Identity" || t == "Cast") {
    auto x = in(0);
    if (!x || t == "Identity") return x;
    const int64_t to = IntAttr(node, "to", 0);
    if (to == TensorProto::BOOL) {  // a condition: nonzero is true
      for (Dim& d : x->v) d = Dim::Static(!d.is_static() || d.value != 0);  // a named dim is >= 1
      return x;
    }
    if (to != TensorProto::INT64 && to != TensorProto::INT32) return std::nullopt;
    return x;
  }
  if (t == "Not") {
    auto x = in(0);
    if (!x) return std::nullopt;
    for (Dim& d : x->v) d = Dim::Static(d.is_static() && d.value == 0);  // a named dim is >= 1
    return x;
  }
  if (t == "Gather") {
    auto data = in(0);
    auto index = in(1);
    if (!data || !index || data->scalar || IntAttr(node, "axis", 0) != 0) return std::nullopt;
    SymValue out{{}, index->scalar};
    const auto n = static_cast<int64_t>(data->v.size());
    for (const Dim& i : index->v) {
      if (!i.is_static()) return std::nullopt;
      const int64_t at = i.value < 0 ? i.value + n : i.value;
      if (at < 0 || at >= n) return std::nullopt;
      out.v.push_back(data->v[static_cast<size_t>(at)]);
    }
    return out;
  }
  if (t == "Unsqueeze" || t == "Squeeze") {
    auto x = in(0);
    if (!x) return std::nullopt;
    if (t == "Unsqueeze" && x->scalar) return SymValue{x->v, false};
    if (t == "Squeeze" && !x->scalar && x->v.size() == 1) return SymValue{x->v, true};
    return std::nullopt;
  }
  if (t == "Concat") {
    SymValue out;
    for (int i = 0; i < node.input_size(); ++i) {
      auto x = in(i);
      if (!x || x->scalar) return std::nullopt;
      out.v.insert(out.v.end(), x->v.begin(), x->v.end());
    }
    return out;
  }
  if (t == "Slice") {
    auto x = in(0), starts = in(1), ends = in(2);
    if (!x || !starts || !ends || starts->v.size() != 1 || ends->v.size() != 1 ||
        !starts->v[0].is_static() || !ends->v[0].is_static()) {
      return std::nullopt;
    }
    if (node.input_size() > 4 && !node.input(4).empty()) {
      auto steps = in(4);
      if (!steps || steps->v.size() != 1 || !(steps->v[0] == Dim::Static(1))) return std::nullopt;
    }
    const auto n = static_cast<int64_t>(x->v.size());
    int64_t b = starts->v[0].value, e = ends->v[0].value;
    if (b < 0) b += n;
    if (e < 0) e += n;
    b = std::clamp<int64_t>(b, 0, n);
    e = std::clamp<int64_t>(e, b, n);
    return SymValue{{x->v.begin() + b, x->v.begin() + e}, false};
  }
  if (t == "ConstantOfShape") {
    auto shape = in(0);
    if (!shape || shape->v.size() != 1 || !shape->v[0].is_static() || shape->v[0].value > 64) {
      return std::nullopt;
    }
    const AttributeProto* a = onnx_util::FindAttr(node, "value");
    int64_t value = 0;
    if (a) {
      auto ints = onnx_util::TensorInts(a->t());
      if (!ints || ints->empty()) return std::nullopt;
      value = (*ints)[0];
    }
    return SymValue{std::vector<Dim>(static_cast<size_t>(shape->v[0].value), Dim::Static(value)),
                    false};
  }
  if (t == "Where") {
    auto c = in(0), a = in(1), b = in(2);
    if (!c || !a || !b) return std::nullopt;
    const size_t n = std::max({c->v.size(), a->v.size(), b->v.size()});
    SymValue out{{}, c->scalar && a->scalar && b->scalar};
    for (size_t i = 0; i < n; ++i) {
      const Dim& ci = c->v[c->v.size() == 1 ? 0 : i];
      if (!ci.is_static()) return std::nullopt;
      const SymValue& pick = ci.value != 0 ? *a : *b;
      if (pick.v.size() != 1 && pick.v.size() != n) return std::nullopt;
      out.v.push_back(pick.v[pick.v.size() == 1 ? 0 : i]);
    }
    return out;
  }
  if (kArithmetic.count(t) || kComparisons.count(t) || kLogic.count(t)) {
    auto a = in(0), b = in(1);
    if (!a || !b) return std::nullopt;
    return Binary(t, *a, *b);
  }
  return std::nullopt;
}

bool IsLogicOp(const std::string& op_type) {
  return op_type == "Not" || kComparisons.count(op_type) != 0 || kLogic.count(op_type) != 0;
}

}  // namespace hfuse::onnx_import
