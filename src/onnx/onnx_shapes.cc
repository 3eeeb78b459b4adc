// The importer's shape rules and the algebra of named dims. See onnx_shapes.h.
#include "onnx_shapes.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <string_view>

#include "onnx_util.h"

namespace hfuse::onnx_import {

using onnx_util::IntAttr;
using onnx_util::IntsAttr;

// ---- named dims -------------------------------------------------------------

void DimFactors(const Graph& g, int32_t dim, std::vector<int32_t>& out, int64_t& factor) {
  const DynamicDim& d = g.dims()[static_cast<size_t>(dim)];
  if (d.product_of.empty()) {
    out.push_back(dim);
    return;
  }
  factor = std::min<int64_t>(factor * d.factor, INT32_MAX);
  for (int32_t f : d.product_of) DimFactors(g, f, out, factor);
}

Dim ProductDim(Graph& g, std::vector<int32_t> factors, int64_t factor) {
  if (factors.size() == 1 && factor == 1) return Dim::Dynamic(factors[0]);
  std::sort(factors.begin(), factors.end());
  std::string name;
  int64_t lo = factor, hi = factor;
  for (int32_t f : factors) {
    const DynamicDim& d = g.dims()[static_cast<size_t>(f)];
    name += (name.empty() ? "" : "*") + d.name;
    lo = std::min<int64_t>(lo * d.min, INT32_MAX);
    hi = std::min<int64_t>(hi * d.max, INT32_MAX);
  }
  if (factor != 1) name += fmt::format("*{}", factor);  // as flatten-gemm-inputs names it
  if (auto d = g.FindDim(name)) return Dim::Dynamic(*d);
  DynamicDim dim{name, lo, hi, factors, 0, factor};  // bound through its factors
  return Dim::Dynamic(g.AddDim(std::move(dim)));
}

std::optional<Dim> ProductNamed(Graph& g, const std::string& name) {
  if (name.find('*') == std::string::npos) return std::nullopt;
  std::vector<int32_t> factors;
  int64_t factor = 1;
  for (size_t begin = 0; begin <= name.size();) {
    size_t end = name.find('*', begin);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(begin, end - begin);
    begin = end + 1;
    if (part.empty()) return std::nullopt;
    if (std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      if (part.size() > 9) return std::nullopt;
      factor *= std::stoll(part);
      continue;
    }
    const auto d = g.FindDim(part);
    if (!d || !g.dims()[static_cast<size_t>(*d)].product_of.empty()) return std::nullopt;
    factors.push_back(*d);
  }
  if (factors.empty() || factor < 1 || factor > INT32_MAX) return std::nullopt;
  return ProductDim(g, std::move(factors), factor);
}

// Named dims are taken apart into their factors, so that [batch · seq, 1]
// -> [-1, seq] gives [batch, seq]; a -1 that is left with several factors,
// or with a static factor ([batch, 39, 16] -> [-1, 16]), becomes their
// derived dim.
std::optional<Shape> ReshapeTo(Graph& g, const Shape& in, const std::vector<Dim>& target,
                               bool allow_zero) {
  Shape out;
  std::vector<int32_t> left;
  int64_t static_in = 1, static_out = 1;
  for (const Dim& d : in) {
    if (d.is_static()) {
      static_in *= d.value;
    } else {
      DimFactors(g, d.dynamic, left, static_in);
    }
  }
  size_t infer = SIZE_MAX;
  for (size_t i = 0; i < target.size(); ++i) {
    Dim d = target[i];
    if (d.is_static() && d.value == 0 && !allow_zero) {
      if (i >= in.size()) return std::nullopt;
      d = in[i];
    } else if (d.is_static() && d.value == -1) {
      if (infer != SIZE_MAX) return std::nullopt;
      infer = i;
      out.push_back(d);
      continue;
    } else if (d.is_static() && d.value < 0) {
      return std::nullopt;
    }
    if (d.is_static()) {
      static_out *= d.value;
    } else {
      std::vector<int32_t> factors;
      DimFactors(g, d.dynamic, factors, static_out);
      for (int32_t f : factors) {
        auto it = std::find(left.begin(), left.end(), f);
        if (it == left.end()) return std::nullopt;
        left.erase(it);
      }
    }
    out.push_back(d);
  }
  if (infer != SIZE_MAX) {
    if (left.empty() && static_out != 0 && static_in % static_out == 0) {
      out[infer] = Dim::Static(static_in / static_out);
    } else if (left.size() == 1 && static_in == static_out) {
      out[infer] = Dim::Dynamic(left[0]);
    } else if (left.size() > 1 && static_in == static_out) {
      out[infer] = ProductDim(g, left);
    } else if (!left.empty() && static_out != 0 && static_in % static_out == 0) {
      out[infer] = ProductDim(g, left, static_in / static_out);
    } else {
      return std::nullopt;
    }
  } else if (!left.empty() || static_in != static_out) {
    return std::nullopt;
  }
  return out;
}

// ---- the rules ----------------------------------------------------------------

namespace {

using Result = std::optional<InferredOutput>;

// One member function per value of onnx_ops.def's Shape column.
class ShapeRules {
 public:
  explicit ShapeRules(const ShapeRuleInput& in) : in_(in), node_(in.node) {}

  // ONNX's inference alone.
  Result Onnx() { return std::nullopt; }

  // The first input's type and shape (elementwise, along an axis, norms).
  Result SameShape() {
    if (!X()) return std::nullopt;
    return Out(X()->dtype, X()->shape);
  }

  // numpy broadcasting of the two operands; Compare gives bool.
  Result Broadcast() { return Broadcasting(false); }
  Result Compare() { return Broadcasting(true); }

  // numpy's matmul, both operands at least 2-D.
  Result MatMul() {
    const Tensor* x = X();
    const Tensor* y = Input(1);
    if (!x || !y || x->shape.size() < 2 || y->shape.size() < 2) return std::nullopt;
    Shape a(x->shape.begin(), x->shape.end() - 2), b(y->shape.begin(), y->shape.end() - 2);
    if (a.size() < b.size()) a.insert(a.begin(), b.size() - a.size(), Dim::Static(1));
    if (b.size() < a.size()) b.insert(b.begin(), a.size() - b.size(), Dim::Static(1));
    Shape out;
    for (size_t d = 0; d < a.size(); ++d) {
      const bool a1 = a[d].is_static() && a[d].value == 1;
      const bool b1 = b[d].is_static() && b[d].value == 1;
      if (!(a[d] == b[d]) && !a1 && !b1) return std::nullopt;
      out.push_back(a1 ? b[d] : a[d]);
    }
    out.push_back(x->shape[x->shape.size() - 2]);
    out.push_back(y->shape.back());
    return Out(x->dtype, out);
  }

  // An explicit output ("ij,jk->ik"): each output letter's dim from an
  // input that has it (libonnx 1.12 infers no Einsum; "..." is not read).
  Result Einsum() {
    if (!X()) return std::nullopt;
    auto eq = in_.kept.strings.find("equation");
    if (eq == in_.kept.strings.end()) return std::nullopt;
    std::string e;
    for (char c : eq->second) {
      if (c != ' ') e += c;
    }
    const size_t arrow = e.find("->");
    if (arrow == std::string::npos || e.find('.') != std::string::npos) return std::nullopt;
    std::map<char, Dim> dims;
    size_t slot = 0, begin = 0;
    for (size_t end = 0; end <= arrow; ++end) {
      if (end < arrow && e[end] != ',') continue;
      const Tensor* in = Input(slot++);
      if (!in || in->shape.size() != end - begin) return std::nullopt;
      for (size_t i = begin; i < end; ++i) dims.emplace(e[i], in->shape[i - begin]);
      begin = end + 1;
    }
    Shape out;
    for (char c : e.substr(arrow + 2)) {
      auto it = dims.find(c);
      if (it == dims.end()) return std::nullopt;
      out.push_back(it->second);
    }
    return Out(X()->dtype, out);
  }

  Result Cast() {
    if (!X()) return std::nullopt;
    auto dtype = onnx_util::AnyDTypeOf(static_cast<int32_t>(IntAttr(node_, "to", 0)));
    if (!dtype) return std::nullopt;
    return Out(*dtype, X()->shape);
  }

  // Axes from the attribute or the input; without axes every static 1 goes
  // (a named dim is taken to be more than 1, so it stays).
  Result Squeeze() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    const std::vector<int64_t> axes = Axes();
    const auto rank = static_cast<int64_t>(x->shape.size());
    Shape out;
    for (int64_t d = 0; d < rank; ++d) {
      const Dim& dim = x->shape[static_cast<size_t>(d)];
      const bool listed = std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
        return a == d || a + rank == d;
      });
      const bool one = dim.is_static() && dim.value == 1;
      if (axes.empty() ? one : listed) continue;
      out.push_back(dim);
    }
    return Out(x->dtype, out);
  }

  Result Unsqueeze() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    std::vector<int64_t> axes = Axes();
    const auto out_rank = static_cast<int64_t>(x->shape.size() + axes.size());
    for (int64_t& a : axes) a = a < 0 ? a + out_rank : a;
    Shape out;
    size_t next = 0;
    for (int64_t d = 0; d < out_rank; ++d) {
      if (std::count(axes.begin(), axes.end(), d)) {
        out.push_back(Dim::Static(1));
      } else if (next < x->shape.size()) {
        out.push_back(x->shape[next++]);
      } else {
        return std::nullopt;
      }
    }
    return Out(x->dtype, out);
  }

  // [prod(dims before axis), prod(the rest)], named dims as derived dims.
  Result Flatten() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    const auto rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = IntAttr(node_, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return std::nullopt;
    Shape out;
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, axis}, {axis, rank}}) {
      int64_t product = 1;
      std::vector<int32_t> named;
      for (int64_t d = b; d < e; ++d) {
        const Dim& dim = x->shape[static_cast<size_t>(d)];
        if (dim.is_static()) {
          product *= dim.value;
        } else {
          DimFactors(in_.graph, dim.dynamic, named, product);
        }
      }
      out.push_back(named.empty() ? Dim::Static(product) : ProductDim(in_.graph, named, product));
    }
    return Out(x->dtype, out);
  }

  Result Transpose() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    const auto rank = static_cast<int64_t>(x->shape.size());
    std::vector<int64_t> perm = IntsAttr(node_, "perm");
    if (perm.empty()) {
      for (int64_t d = rank; d-- > 0;) perm.push_back(d);
    }
    if (static_cast<int64_t>(perm.size()) != rank) return std::nullopt;
    Shape out;
    for (int64_t p : perm) {
      if (p < 0 || p >= rank) return std::nullopt;
      out.push_back(x->shape[static_cast<size_t>(p)]);
    }
    return Out(x->dtype, out);
  }

  // The inputs' sizes along a static axis added up.
  Result Concat() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    const auto rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = IntAttr(node_, "axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return std::nullopt;
    Shape out = x->shape;
    int64_t total = 0;
    for (size_t slot = 0; slot < in_.kept.input_slots.size(); ++slot) {
      const Tensor* y = Input(slot);
      if (!y || y->shape.size() != x->shape.size()) return std::nullopt;
      const Dim& d = y->shape[static_cast<size_t>(axis)];
      if (!d.is_static()) return std::nullopt;
      total += d.value;
    }
    out[static_cast<size_t>(axis)] = Dim::Static(total);
    return Out(x->dtype, out);
  }

  // The reductions: axes from the attribute or the input (all without);
  // keepdims; opset 18's noop_with_empty_axes.
  Result Reduce() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    const std::vector<int64_t> axes = Axes();
    const bool keep = IntAttr(node_, "keepdims", 1) != 0;
    if (axes.empty() && IntAttr(node_, "noop_with_empty_axes", 0) != 0) {
      return Out(x->dtype, x->shape);  // opset 18's identity
    }
    const auto rank = static_cast<int64_t>(x->shape.size());
    Shape out;
    for (int64_t d = 0; d < rank; ++d) {
      const bool reduced = axes.empty() || std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
                             return a == d || a + rank == d;
                           });
      if (!reduced) {
        out.push_back(x->shape[static_cast<size_t>(d)]);
      } else if (keep) {
        out.push_back(Dim::Static(1));
      }
    }
    return Out(x->dtype, out);
  }

  // [rank] (Shape-15's start and end cut it), int64: ONNX makes the length
  // up when it lost its input's rank, where hfuse still knows it.
  Result ShapeOf() {
    const Tensor* x = X();
    if (!x) return std::nullopt;
    const auto rank = static_cast<int64_t>(x->shape.size());
    int64_t start = IntAttr(node_, "start", 0), end = IntAttr(node_, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    return Out(DType::kInt64, {Dim::Static(end - start)});
  }

  // A scalar int64.
  Result Scalar() { return Out(DType::kInt64, {}); }

  // Slice-10 and later (starts, ends[, axes[, steps]] as inputs), each
  // from its value where shape arithmetic knows it: what the TorchScript
  // exporter writes for `chunk` and `split` (a static dim cut at
  // Div(Add(d, 1), n) · k, which ONNX 1.12 does not propagate). A static
  // dim is cut as ONNX says (negative bounds from the end, clamped, any
  // step); a named dim only whole (0 to the end, or past it, step 1, or the
  // end to the start, step -1), since its size is not known here; the end
  // may be the named dim itself (Shape -> Gather of the input).
  Result Slice() {
    const Tensor* x = X();
    if (!x || node_.input_size() < 3) return std::nullopt;
    auto starts = in_.value(1), ends = in_.value(2);
    if (!starts || !ends || starts->scalar || ends->scalar ||
        starts->v.size() != ends->v.size()) {
      return std::nullopt;
    }
    const size_t n = starts->v.size();
    const auto rank = static_cast<int64_t>(x->shape.size());
    std::vector<Dim> axes, steps(n, Dim::Static(1));
    if (node_.input_size() > 3 && !node_.input(3).empty()) {
      auto a = in_.value(3);
      if (!a || a->v.size() != n) return std::nullopt;
      axes = a->v;
    } else {
      for (size_t i = 0; i < n; ++i) axes.push_back(Dim::Static(static_cast<int64_t>(i)));
    }
    if (node_.input_size() > 4 && !node_.input(4).empty()) {
      auto s = in_.value(4);
      if (!s || s->v.size() != n) return std::nullopt;
      steps = s->v;
    }
    Shape out = x->shape;
    std::vector<bool> seen(x->shape.size(), false);
    for (size_t i = 0; i < n; ++i) {
      const Dim &a = axes[i], &b = starts->v[i], &e = ends->v[i], &s = steps[i];
      if (!a.is_static() || !s.is_static() || s.value == 0 || a.value < -rank ||
          a.value >= rank) {
        return std::nullopt;
      }
      const auto axis = static_cast<size_t>(a.value < 0 ? a.value + rank : a.value);
      if (seen[axis]) return std::nullopt;  // an axis named twice is invalid
      seen[axis] = true;
      const Dim& d = x->shape[axis];
      if (b.is_static() && e.is_static()) {
        const std::optional<Dim> sliced = SlicedDim(d, b.value, e.value, s.value);
        if (!sliced) return std::nullopt;
        out[axis] = *sliced;
      } else if (!d.is_static() && b == Dim::Static(0) && e == d && s.value == 1) {
        // x[:, :x.shape[1]] on a named dim: the end is the dim itself, so all of it.
      } else {
        return std::nullopt;
      }
    }
    return Out(x->dtype, std::move(out));
  }

  // From the value of the shape operand: 0 copies the input's dim (unless
  // allowzero), -1 is what is left over (ReshapeTo).
  Result Reshape() {
    const Tensor* x = X();
    auto s = in_.value(1);
    if (!x || !s || s->scalar) return std::nullopt;
    auto shape = ReshapeTo(in_.graph, x->shape, s->v, IntAttr(node_, "allowzero", 0) != 0);
    if (!shape) return std::nullopt;
    return FromValues(x->dtype, std::move(*shape));
  }

  // numpy broadcasting of the input against the value of the shape operand.
  Result Expand() {
    const Tensor* x = X();
    auto s = in_.value(1);
    if (!x || !s || s->scalar) return std::nullopt;
    Shape a = x->shape, b(s->v.begin(), s->v.end());
    if (a.size() < b.size()) a.insert(a.begin(), b.size() - a.size(), Dim::Static(1));
    if (b.size() < a.size()) b.insert(b.begin(), a.size() - b.size(), Dim::Static(1));
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d].is_static() && a[d].value == 1) {
        a[d] = b[d];
      } else if (!(b[d].is_static() && b[d].value == 1) && !(a[d] == b[d])) {
        return std::nullopt;
      }
    }
    return FromValues(x->dtype, std::move(a));
  }

  // Range(start, limit, delta): ceil((limit - start) / delta) elements of
  // start's type, where the values are known: static ones, or a named dim
  // counted from 0 by 1 (torch.arange(x.size(0)) over a dynamic batch).
  Result Range() {
    const OnnxNode::Value* kept = KeptConstant(0);
    if (!X() && !kept) return std::nullopt;
    const DType dtype = X() ? X()->dtype : kept->dtype;
    auto a = in_.value(0), b = in_.value(1), c = in_.value(2);
    if (!a || !b || !c || a->v.size() != 1 || b->v.size() != 1 || c->v.size() != 1) return std::nullopt;
    const Dim &lo = a->v[0], &hi = b->v[0], &step = c->v[0];
    if (!lo.is_static() || !step.is_static() || step.value == 0) return std::nullopt;
    if (!hi.is_static()) {
      if (lo.value != 0 || step.value != 1) return std::nullopt;
      return Out(dtype, {hi});
    }
    const int64_t span = hi.value - lo.value;
    const int64_t n = std::max<int64_t>((span + step.value + (step.value > 0 ? -1 : 1)) / step.value, 0);
    return Out(dtype, {Dim::Static(n)});
  }

  // The value of the shape operand; the element type of the `value`
  // attribute (float32 without one).
  Result ConstantOfShape() {
    auto s = in_.value(0);
    if (!s || s->scalar) return std::nullopt;
    DType dtype = DType::kFloat32;
    if (const onnx::AttributeProto* a = onnx_util::FindAttr(node_, "value"); a && a->has_t()) {
      auto d = onnx_util::AnyDTypeOf(a->t().data_type());
      if (!d) return std::nullopt;
      dtype = *d;
    }
    return FromValues(dtype, Shape(s->v.begin(), s->v.end()));
  }

 private:
  const Tensor* Input(size_t slot) const {
    return slot < in_.inputs.size() ? in_.inputs[slot] : nullptr;
  }
  const Tensor* X() const { return Input(0); }
  static Result Out(DType dtype, Shape shape) { return InferredOutput{dtype, std::move(shape)}; }
  static Result FromValues(DType dtype, Shape shape) {
    return InferredOutput{dtype, std::move(shape), true};
  }

  // A constant input the node keeps (int64 axes and the like), by slot.
  const OnnxNode::Value* KeptConstant(size_t slot) const {
    if (slot >= in_.kept.input_slots.size() || in_.kept.input_slots[slot] > -2) return nullptr;
    const auto c = static_cast<size_t>(-2 - in_.kept.input_slots[slot]);
    return c < in_.kept.constant_values.size() ? &in_.kept.constant_values[c] : nullptr;
  }
  std::optional<std::vector<int64_t>> ConstantInts(size_t slot) const {
    if (slot >= in_.kept.input_slots.size() || in_.kept.input_slots[slot] > -2) return std::nullopt;
    const auto c = static_cast<size_t>(-2 - in_.kept.input_slots[slot]);
    onnx::TensorProto t;
    t.ParseFromString(in_.kept.constants[c].second);
    return onnx_util::TensorInts(t);
  }
  // Squeeze's, Unsqueeze's and the reductions' axes: the attribute, or the
  // constant second input (opset 13 and 18 on).
  std::vector<int64_t> Axes() const {
    std::vector<int64_t> axes = IntsAttr(node_, "axes");
    if (auto c = ConstantInts(1)) axes = *c;
    return axes;
  }

  // The length of dim `d` sliced [start, end) by `step` (ONNX's Slice).
  static std::optional<Dim> SlicedDim(const Dim& d, int64_t start, int64_t end, int64_t step) {
    if (!d.is_static()) {
      // Dims are below 2^31: a bound past that is "to the end".
      constexpr int64_t kPast = INT32_MAX;
      if (step == 1 && start == 0 && end >= kPast) return d;
      if (step == -1 && (start == -1 || start >= kPast) && end <= -kPast - 1) return d;
      return std::nullopt;
    }
    const int64_t size = d.value;
    if (size == 0) return Dim::Static(0);
    // Clamp before any arithmetic, so that INT64_MIN and INT64_MAX bounds
    // (PyTorch's "to the end") cannot overflow.
    auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = v < -size ? -size - 1 : v + size;  // from the end
      return std::clamp(v, lo, hi);
    };
    // ceil(span / stride), written so that no step (INT64_MIN included) overflows.
    if (step > 0) {
      const int64_t b = clamp(start, 0, size), e = clamp(end, 0, size);
      return Dim::Static(e > b ? (e - b - 1) / step + 1 : 0);
    }
    const int64_t b = clamp(start, 0, size - 1), e = clamp(end, -1, size - 1);
    const int64_t stride = step == INT64_MIN ? INT64_MAX : -step;
    return Dim::Static(b > e ? (b - e - 1) / stride + 1 : 0);
  }

  Result Broadcasting(bool compare) {
    const Tensor* x = X();
    if (!x || node_.input_size() != 2) return std::nullopt;
    const Tensor* y = Input(1);
    Shape a = x->shape, b;
    if (y) {
      b = y->shape;
    } else if (const OnnxNode::Value* c = KeptConstant(1)) {
      for (int64_t d : c->dims) b.push_back(Dim::Static(d));
    } else {
      return std::nullopt;
    }
    if (b.size() > a.size()) std::swap(a, b);
    b.insert(b.begin(), a.size() - b.size(), Dim::Static(1));
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d].is_static() && a[d].value == 1) a[d] = b[d];
    }
    return Out(compare ? DType::kBool : x->dtype, a);
  }

  const ShapeRuleInput& in_;
  const onnx::NodeProto& node_;
};

}  // namespace

std::optional<InferredOutput> InferOutput(const ShapeRuleInput& in) {
  if (in.node.output_size() != 1 && in.node.op_type() != "Dropout") return std::nullopt;
  if (!onnx_util::IsDefaultDomain(in.node)) return std::nullopt;
  using Rule = Result (ShapeRules::*)();
  // One rule per operator of onnx_ops.def (its Shape column).
  static const std::map<std::string_view, Rule> kRules = {
#define HFUSE_ONNX_OP(Name, Shape, Fold, Cpu, Fast, Cuda) {#Name, &ShapeRules::Shape},
#include "hfuse/ir/onnx_ops.def"
#undef HFUSE_ONNX_OP
  };
  auto it = kRules.find(in.node.op_type());
  if (it == kRules.end()) return std::nullopt;
  ShapeRules rules(in);
  return (rules.*it->second)();
}

}  // namespace hfuse::onnx_import
