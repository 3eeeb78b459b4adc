// Opaque ONNX operators on the CPU. See cpu_onnx_ops.h.
#include "cpu_onnx_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>

#include "cpu_fast_kernels.h"
#include "cpu_kernels.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "hfuse/support/permute.h"

namespace hfuse::cpu {
namespace {

// An int attribute's first value, or `fallback`.
int64_t IntAttr(const OnnxNode& node, const std::string& attr, int64_t fallback) {
  auto it = node.ints.find(attr);
  return it == node.ints.end() || it->second.empty() ? fallback : it->second[0];
}
// An axis in [-rank, rank) as [0, rank), or nothing.
std::optional<size_t> Axis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

// A part of a shape whose tensor was counted whole (HostTensor): it fits.
int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  const std::optional<int64_t> p =
      ElementCount(std::span<const int64_t>(v.data() + begin, end - begin));
  HFUSE_CHECK(p.has_value());
  return *p;
}

// Row-major strides of a shape, in elements.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// Steps a row-major index over `shape`, last dim fastest.
void Next(std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  for (size_t d = shape.size(); d-- > 0;) {
    if (++index[d] < shape[d]) return;
    index[d] = 0;
  }
}

// numpy broadcasting: the strides of `in` over the index of `out` (0 where
// `in` has a 1 or lacks the dim).
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  int64_t stride = 1;
  for (size_t d = in.size(); d-- > 0;) {
    const size_t od = out.size() - in.size() + d;
    s[od] = in[d] == 1 ? 0 : stride;
    stride *= in[d];
  }
  return s;
}

class OnnxOp {
 public:
  OnnxOp(const std::string& name, const OnnxNode& node, const std::vector<const HostTensor*>& in,
         const std::vector<HostTensor*>& out)
      : name_(name), node_(node), in_(in), out_(out) {
    for (const OnnxNode::Value& c : node_.constant_values) {
      HostTensor t(c.dtype, c.dims);
      if (t.bytes.size() == c.data.size()) t.bytes = c.data;
      constants_.push_back(std::move(t));
    }
  }

  // One kernel pair per operator of onnx_ops.def (its Cpu and Fast
  // columns): with `fast`, the fast kernel first; it returns false for a
  // form it does not cover, which the reference then runs.
  void Run(bool fast) {
    if (!node_.domain.empty() && node_.domain != "ai.onnx") Unsupported("");
    struct Kernels {
      void (OnnxOp::*reference)();
      bool (OnnxOp::*fast)();
    };
    static const std::map<std::string_view, Kernels> kKernels = {
#define HFUSE_ONNX_OP(Name, Shape, Fold, Cpu, Fast, Cuda) {#Name, {&OnnxOp::Cpu, &OnnxOp::Fast}},
#include "hfuse/ir/onnx_ops.def"
#undef HFUSE_ONNX_OP
    };
    auto it = kKernels.find(node_.op_type);
    if (it == kKernels.end()) Unsupported("");
    if (fast && (this->*it->second.fast)()) return;
    (this->*it->second.reference)();
  }

 private:
  [[noreturn]] void Unsupported(const std::string& why) {
    ThrowInputError(
        "op '{}' is the ONNX operator {}{}{}, which hfuse keeps opaque and the CPU "
        "executor cannot run{}{}",
        name_, node_.domain, node_.domain.empty() ? "" : ".", node_.op_type,
        why.empty() ? "" : ": ", why);
  }
  int64_t Int(const std::string& attr, int64_t fallback) const {
    return IntAttr(node_, attr, fallback);
  }
  double Float(const std::string& attr, double fallback) const {
    auto it = node_.floats.find(attr);
    return it == node_.floats.end() || it->second.empty() ? fallback : it->second[0];
  }
  // Transpose's perm: the attribute, or the dims reversed where it is absent.
  std::vector<int64_t> TransposePerm(size_t rank) const {
    std::vector<int64_t> perm = Ints("perm");
    if (perm.empty()) {
      for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    return perm;
  }

  std::vector<int64_t> Ints(const std::string& attr) const {
    auto it = node_.ints.find(attr);
    return it == node_.ints.end() ? std::vector<int64_t>() : it->second;
  }

  // The node's input `slot`: an input of the op, or a constant it keeps;
  // null when the slot is empty or absent. Nodes imported before the slots
  // were recorded map their inputs in order.
  const HostTensor* Input(size_t slot) const {
    if (node_.input_slots.empty()) return slot < in_.size() ? in_[slot] : nullptr;
    if (slot >= node_.input_slots.size()) return nullptr;
    const int32_t s = node_.input_slots[slot];
    if (s == kNone) return nullptr;
    if (s >= 0) return static_cast<size_t>(s) < in_.size() ? in_[static_cast<size_t>(s)] : nullptr;
    return &constants_[static_cast<size_t>(-2 - s)];
  }
  const HostTensor& X(size_t slot) {
    const HostTensor* t = Input(slot);
    if (!t) Unsupported(fmt::format("input {} is missing", slot));
    return *t;
  }
  HostTensor* Output(size_t slot) const {
    if (node_.output_slots.empty()) return slot < out_.size() ? out_[slot] : nullptr;
    if (slot >= node_.output_slots.size() || node_.output_slots[slot] == kNone) return nullptr;
    return out_[static_cast<size_t>(node_.output_slots[slot])];
  }
  HostTensor& Y(size_t slot) {
    HostTensor* t = Output(slot);
    if (!t) Unsupported(fmt::format("output {} is not in the graph", slot));
    return *t;
  }
  std::vector<int64_t> IntValues(const HostTensor& t) const {
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.GetInt(i);
    return v;
  }
  static double GetDouble(const HostTensor& t, int64_t i) {
    return IsFloat(t.dtype) ? static_cast<double>(t.Get(i)) : static_cast<double>(t.GetInt(i));
  }
  static void SetDouble(HostTensor& t, int64_t i, double v) {
    if (IsFloat(t.dtype)) {
      t.Set(i, static_cast<float>(v));
    } else if (t.dtype == DType::kBool) {
      t.SetInt(i, v != 0.0);
    } else {
      t.SetInt(i, static_cast<int64_t>(v));
    }
  }
  // An axis attribute (or value) in [0, rank).
  size_t AxisOf(int64_t axis, size_t rank) {
    const std::optional<size_t> a = Axis(axis, rank);
    if (!a) Unsupported(fmt::format("axis {} is out of range", axis));
    return *a;
  }
  void SameSize(const HostTensor& y, int64_t numel) {
    if (y.numel() != numel) {
      Unsupported(fmt::format("it computes {} values where the graph's shape holds {}", numel,
                              y.numel()));
    }
  }

  // Same data, new shape (the output's, from the graph); the shape or axes
  // operand is a constant the op keeps or an int tensor whose values the
  // graph's shapes already reflect.
  void SameBytes() {
    if (node_.op_type == "Dropout" && Output(1)) Unsupported("its mask output is used");
    HostTensor& y = Y(0);
    if (X(0).numel() != y.numel()) Unsupported("the sizes differ");
    y.bytes = X(0).bytes;
  }

  void Transpose() {
    const HostTensor& x = X(0);
    HostTensor& y = Y(0);
    const size_t rank = x.shape.size();
    const std::vector<int64_t> perm = TransposePerm(rank);
    if (perm.size() != rank) Unsupported("perm does not match the input's rank");
    // A permutation of 0..rank-1: each index once, none out of range (an
    // index past the rank would read past the input's strides).
    if (!IsPermutation(perm, rank)) {
      Unsupported(fmt::format("perm [{}] is not a permutation of the input's {} dims",
                              fmt::join(perm, ", "), rank));
    }
    // The output's shape is the input's, permuted.
    if (y.shape.size() != rank) Unsupported("the output's rank is not the input's");
    for (size_t d = 0; d < rank; ++d) {
      if (y.shape[d] != x.shape[static_cast<size_t>(perm[d])]) {
        Unsupported("the output's shape is not the input's permuted by perm");
      }
    }
    PermuteBytes(x.bytes.data(), y.bytes.data(), x.shape, perm,
                 static_cast<size_t>(DTypeBytes(x.dtype)));
  }

  // numpy.matmul: rank-1 operands are promoted and their dim dropped again,
  // the batch dims broadcast.
  void MatMul() {
    std::vector<int64_t> a = X(0).shape, b = X(1).shape;
    if (a.empty() || b.empty()) Unsupported("an operand is a scalar");
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
    if (b[b.size() - 2] != k) Unsupported("inner dims differ");
    const size_t rank = std::max(a.size(), b.size());
    a.insert(a.begin(), rank - a.size(), 1);
    b.insert(b.begin(), rank - b.size(), 1);
    std::vector<int64_t> batch(rank - 2);
    for (size_t d = 0; d + 2 < rank; ++d) {
      if (a[d] != b[d] && a[d] != 1 && b[d] != 1) Unsupported("the batch dims do not broadcast");
      batch[d] = std::max(a[d], b[d]);
    }
    HostTensor& y = Y(0);
    const std::optional<int64_t> batches = ElementCount(batch);
    const std::optional<int64_t> mn = CheckedMul(m, n);
    const std::optional<int64_t> total = batches && mn ? CheckedMul(*batches, *mn) : std::nullopt;
    if (!total || *total != y.numel()) Unsupported("the output's shape does not match");
    const std::vector<float> af = X(0).ToFloat(), bf = X(1).ToFloat();
    std::vector<float> yf(static_cast<size_t>(y.numel()));
    std::vector<float> bt(static_cast<size_t>(k * n));
    std::vector<int64_t> index(batch.size(), 0);
    for (int64_t i = 0; i < Product(batch, 0, batch.size()); ++i) {
      int64_t ao = 0, bo = 0;  // offsets of this batch's matrices, in matrices
      for (size_t d = 0; d < batch.size(); ++d) {
        ao = ao * a[d] + (a[d] == 1 ? 0 : index[d]);
        bo = bo * b[d] + (b[d] == 1 ? 0 : index[d]);
      }
      const float* bm = bf.data() + bo * k * n;
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t j = 0; j < n; ++j) bt[static_cast<size_t>(j * k + p)] = bm[p * n + j];
      }
      Gemm(af.data() + ao * m * k, bt.data(), nullptr, yf.data() + i * m * n, m, n, k, 1.0f,
           std::nullopt);
      Next(index, batch);
    }
    y.FromFloat(yf.data());
  }

  // Gemm in its general form: Y = alpha · op(A) · op(B) + beta · C.
  void GemmNode() {
    const HostTensor& a = X(0);
    const HostTensor& b = X(1);
    if (a.shape.size() != 2 || b.shape.size() != 2) Unsupported("A and B must be 2-D");
    const bool ta = Int("transA", 0) != 0, tb = Int("transB", 0) != 0;
    const int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
    const int64_t n = tb ? b.shape[0] : b.shape[1];
    if ((tb ? b.shape[1] : b.shape[0]) != k) Unsupported("inner dims differ");
    HostTensor& y = Y(0);
    SameSize(y, m * n);
    const std::vector<float> af = a.ToFloat(), bf = b.ToFloat();
    std::vector<float> at(static_cast<size_t>(m * k)), bt(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) at[static_cast<size_t>(i * k + p)] = ta ? af[p * m + i] : af[i * k + p];
    }
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) bt[static_cast<size_t>(j * k + p)] = tb ? bf[j * k + p] : bf[p * n + j];
    }
    std::vector<float> yf(static_cast<size_t>(m * n));
    Gemm(at.data(), bt.data(), nullptr, yf.data(), m, n, k, static_cast<float>(Float("alpha", 1.0)),
         std::nullopt);
    if (const HostTensor* c = Input(2)) {
      const float beta = static_cast<float>(Float("beta", 1.0));
      const std::vector<int64_t> s = BroadcastStrides(c->shape, y.shape);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) yf[static_cast<size_t>(i * n + j)] += beta * c->Get(i * s[0] + j * s[1]);
      }
    }
    y.FromFloat(yf.data());
  }

  // Opset 13 normalises along one axis; earlier opsets flatten the input to
  // 2-D at the axis and normalise each row.
  void Softmax() {
    const bool log = node_.op_type == "LogSoftmax";
    const HostTensor& x = X(0);
    const std::optional<AxisView> view = SoftmaxView(node_, x.shape);
    if (!view) Unsupported(fmt::format("axis {} is out of range", Int("axis", node_.opset >= 13 ? -1 : 1)));
    const auto [outer, len, inner] = *view;
    const std::vector<float> xf = x.ToFloat();
    std::vector<float> yf(xf.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        float high = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          high = std::max(high, xf[static_cast<size_t>(base + j * inner)]);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < len; ++j) {
          const auto at = static_cast<size_t>(base + j * inner);
          yf[at] = std::exp(xf[at] - high);
          sum += yf[at];
        }
        for (int64_t j = 0; j < len; ++j) {
          const auto at = static_cast<size_t>(base + j * inner);
          yf[at] = log ? xf[at] - high - std::log(sum) : yf[at] / sum;
        }
      }
    }
    Y(0).FromFloat(yf.data());
  }

  void Cast() {
    const HostTensor& x = X(0);
    HostTensor& y = Y(0);
    SameSize(y, x.numel());
    if (x.dtype == y.dtype) {
      y.bytes = x.bytes;
    } else if (IsFloat(x.dtype) && IsFloat(y.dtype)) {
      y.FromFloat(x.ToFloat().data());
    } else if (IsFloat(y.dtype)) {
      for (int64_t i = 0; i < x.numel(); ++i) y.Set(i, static_cast<float>(x.GetInt(i)));
    } else if (y.dtype == DType::kBool) {
      for (int64_t i = 0; i < x.numel(); ++i) y.SetInt(i, GetDouble(x, i) != 0.0);
    } else {
      for (int64_t i = 0; i < x.numel(); ++i) {
        y.SetInt(i, IsFloat(x.dtype) ? static_cast<int64_t>(x.Get(i)) : x.GetInt(i));
      }
    }
  }

  // data[..., indices, ...] along `axis`: an embedding lookup when data is
  // a table and indices are ids. Negative indices count from the end.
  void Gather() {
    const HostTensor& data = X(0);
    const HostTensor& ind = X(1);
    const std::optional<AxisView> view = GatherView(node_, data.shape);
    if (!view) Unsupported(fmt::format("axis {} is out of range", Int("axis", 0)));
    const auto [outer, len, inner] = *view;
    HostTensor& y = Y(0);
    SameSize(y, outer * ind.numel() * inner);
    const auto width = static_cast<size_t>(inner * DTypeBytes(data.dtype));
    // The indices read and checked once (where there is a row to copy), then a row copy each.
    const int64_t count = outer > 0 ? ind.numel() : 0;
    std::vector<int64_t> rows(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t at = ind.GetInt(i);
      if (at < 0) at += len;
      if (at < 0 || at >= len) {
        Unsupported(fmt::format("index {} is out of range for a dim of {}", ind.GetInt(i), len));
      }
      rows[static_cast<size_t>(i)] = at;
    }
    uint8_t* out = y.bytes.data();
    const uint8_t* table = data.bytes.data();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < count; ++i) {
        std::memcpy(out + static_cast<size_t>(o * count + i) * width,
                    table + static_cast<size_t>(o * len + rows[static_cast<size_t>(i)]) * width, width);
      }
    }
  }

  // y[i..] = data[i.. with index[i..] on `axis`] (indices the output's shape).
  void GatherElements() {
    const HostTensor& data = X(0);
    const HostTensor& ind = X(1);
    HostTensor& y = Y(0);
    const size_t rank = data.shape.size();
    const size_t axis = AxisOf(Int("axis", 0), rank);
    if (ind.shape.size() != rank) Unsupported("indices differ in rank from data");
    SameSize(y, ind.numel());
    const std::vector<int64_t> stride = Strides(data.shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(data.dtype));
    const int64_t len = data.shape[axis];
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < ind.numel(); ++i) {
      int64_t at = ind.GetInt(i);
      if (at < 0) at += len;
      if (at < 0 || at >= len) {
        Unsupported(fmt::format("index {} is out of range for a dim of {}", ind.GetInt(i), len));
      }
      int64_t src = 0;
      for (size_t d = 0; d < rank; ++d) {
        if (d != axis && index[d] >= data.shape[d]) Unsupported("indices exceed data's shape");
        src += (d == axis ? at : index[d]) * stride[d];
      }
      std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                  data.bytes.data() + static_cast<size_t>(src) * bytes, bytes);
      Next(index, ind.shape);
    }
  }

  // indices [..., k]: each last-dim vector of k indices picks a slice of
  // data's trailing dims (batch_dims leading dims shared).
  void GatherND() {
    const HostTensor& data = X(0);
    const HostTensor& ind = X(1);
    HostTensor& y = Y(0);
    const auto batch = static_cast<size_t>(Int("batch_dims", 0));
    if (ind.shape.empty()) Unsupported("indices are a scalar");
    const auto k = static_cast<size_t>(ind.shape.back());
    if (batch + k > data.shape.size() || batch >= ind.shape.size()) {
      Unsupported("indices do not fit data's rank");
    }
    for (size_t d = 0; d < batch; ++d) {
      if (ind.shape[d] != data.shape[d]) Unsupported("batch dims differ");
    }
    const int64_t batches = Product(data.shape, 0, batch);
    const int64_t per_batch = Product(ind.shape, batch, ind.shape.size() - 1);
    const int64_t slice = Product(data.shape, batch + k, data.shape.size()) * DTypeBytes(data.dtype);
    const int64_t data_batch = Product(data.shape, batch, data.shape.size()) * DTypeBytes(data.dtype);
    SameSize(y, batches * per_batch * (slice / DTypeBytes(data.dtype)));
    for (int64_t b = 0; b < batches; ++b) {
      for (int64_t j = 0; j < per_batch; ++j) {
        int64_t at = 0;
        for (size_t q = 0; q < k; ++q) {
          const int64_t dim = data.shape[batch + q];
          int64_t v = ind.GetInt((b * per_batch + j) * static_cast<int64_t>(k) + static_cast<int64_t>(q));
          if (v < 0) v += dim;
          if (v < 0 || v >= dim) Unsupported(fmt::format("index {} is out of range for a dim of {}", v, dim));
          at = at * dim + v;
        }
        std::memcpy(y.bytes.data() + (b * per_batch + j) * slice,
                    data.bytes.data() + b * data_batch + at * slice, static_cast<size_t>(slice));
      }
    }
  }

  // Running sums along an axis (a scalar input): exclusive and reverse as attributes.
  void CumSum() {
    const HostTensor& x = X(0);
    HostTensor& y = Y(0);
    SameSize(y, x.numel());
    const std::vector<int64_t> axis_value = IntValues(X(1));
    if (axis_value.size() != 1) Unsupported("axis is not a scalar");
    const size_t axis = AxisOf(axis_value[0], x.shape.size());
    const bool exclusive = Int("exclusive", 0) != 0, reverse = Int("reverse", 0) != 0;
    const int64_t outer = Product(x.shape, 0, axis), len = x.shape[axis];
    const int64_t inner = Product(x.shape, axis + 1, x.shape.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t jj = reverse ? len - 1 - j : j;
          const int64_t at = (o * len + jj) * inner + i;
          const double v = GetDouble(x, at);
          if (!exclusive) acc += v;
          SetDouble(y, at, acc);
          if (exclusive) acc += v;
        }
      }
    }
  }

  // LayerNormalization as ONNX writes it (the importer makes the last-axis
  // float ones layernorm ops): over the dims from `axis` on, statistics in
  // fp32, two-pass; the mean and inverse-deviation outputs when used.
  void LayerNorm() {
    const HostTensor& x = X(0);
    const size_t rank = x.shape.size();
    const size_t axis = AxisOf(Int("axis", -1), rank);
    const int64_t rows = Product(x.shape, 0, axis), n = Product(x.shape, axis, rank);
    const HostTensor& scale = X(1);
    const HostTensor* bias = Input(2);
    if (scale.numel() != n || (bias && bias->numel() != n)) Unsupported("scale or bias does not match");
    const auto eps = static_cast<float>(Float("epsilon", 1e-5));
    const std::vector<float> xf = x.ToFloat(), sf = scale.ToFloat();
    const std::vector<float> bf = bias ? bias->ToFloat() : std::vector<float>(static_cast<size_t>(n), 0.0f);
    std::vector<float> yf(xf.size());
    HostTensor* mean_out = Output(1);
    HostTensor* inv_out = Output(2);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = xf.data() + r * n;
      float mean = 0;
      for (int64_t j = 0; j < n; ++j) mean += row[j];
      mean /= static_cast<float>(n);
      float var = 0;
      for (int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
      var /= static_cast<float>(n);
      const float inv = 1.0f / std::sqrt(var + eps);
      for (int64_t j = 0; j < n; ++j) {
        yf[static_cast<size_t>(r * n + j)] = (row[j] - mean) * inv * sf[static_cast<size_t>(j)] + bf[static_cast<size_t>(j)];
      }
      if (mean_out && mean_out->numel() == rows) mean_out->Set(r, mean);
      if (inv_out && inv_out->numel() == rows) inv_out->Set(r, inv);
    }
    Y(0).FromFloat(yf.data());
  }

  void Shape() {
    const HostTensor& x = X(0);
    const auto rank = static_cast<int64_t>(x.shape.size());
    int64_t start = Int("start", 0), end = Int("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    HostTensor& y = Y(0);
    SameSize(y, end - start);
    for (int64_t d = start; d < end; ++d) y.SetInt(d - start, x.shape[static_cast<size_t>(d)]);
  }

  // The number of elements of the input, an int64 scalar.
  void Size() {
    HostTensor& y = Y(0);
    SameSize(y, 1);
    y.SetInt(0, X(0).numel());
  }

  void ConstantOfShape() {
    HostTensor& y = Y(0);
    const double v = Float("value", 0.0);
    for (int64_t i = 0; i < y.numel(); ++i) SetDouble(y, i, v);
  }

  void Range() {
    HostTensor& y = Y(0);
    const double start = GetDouble(X(0), 0), delta = GetDouble(X(2), 0);
    for (int64_t i = 0; i < y.numel(); ++i) SetDouble(y, i, start + static_cast<double>(i) * delta);
  }

  void Expand() { Broadcast(X(0), Y(0)); }

  // Any dtype, element by element (numpy broadcasting to the output's shape).
  void Broadcast(const HostTensor& x, HostTensor& y) {
    if (x.shape.size() > y.shape.size()) Unsupported("the input has more dims than the output");
    const std::vector<int64_t> s = BroadcastStrides(x.shape, y.shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(x.dtype));
    std::vector<int64_t> index(y.shape.size(), 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t src = 0;
      for (size_t d = 0; d < index.size(); ++d) src += index[d] * s[d];
      std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                  x.bytes.data() + static_cast<size_t>(src) * bytes, bytes);
      Next(index, y.shape);
    }
  }

  void Tile() {
    const HostTensor& x = X(0);
    HostTensor& y = Y(0);
    if (x.shape.size() != y.shape.size()) Unsupported("the output's rank differs");
    const std::vector<int64_t> stride = Strides(x.shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(x.dtype));
    std::vector<int64_t> index(y.shape.size(), 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t src = 0;
      for (size_t d = 0; d < index.size(); ++d) src += (index[d] % x.shape[d]) * stride[d];
      std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                  x.bytes.data() + static_cast<size_t>(src) * bytes, bytes);
      Next(index, y.shape);
    }
  }

  // Pad (opset 11+: pads, constant_value and, from 18, axes as inputs);
  // constant, reflect and edge modes; a negative pad crops.
  void Pad() {
    if (node_.opset < 11) Unsupported("before opset 11 (pads as an attribute)");
    const HostTensor& x = X(0);
    const size_t rank = x.shape.size();
    const std::vector<int64_t> pads = IntValues(X(1));
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    if (const HostTensor* a = Input(3)) {
      const std::vector<int64_t> axes = IntValues(*a);
      if (pads.size() != 2 * axes.size()) Unsupported("pads do not match the axes");
      for (size_t i = 0; i < axes.size(); ++i) {
        const size_t ax = AxisOf(axes[i], rank);
        begin[ax] = pads[i];
        end[ax] = pads[i + axes.size()];
      }
    } else {
      if (pads.size() != 2 * rank) Unsupported("pads do not match the rank");
      for (size_t d = 0; d < rank; ++d) {
        begin[d] = pads[d];
        end[d] = pads[d + rank];
      }
    }
    auto mode_it = node_.strings.find("mode");
    const std::string mode = mode_it == node_.strings.end() ? "constant" : mode_it->second;
    if (mode != "constant" && mode != "reflect" && mode != "edge") {
      Unsupported(fmt::format("mode '{}'", mode));
    }
    const HostTensor* value = Input(2);
    const double fill = value && value->numel() > 0 ? GetDouble(*value, 0) : 0.0;
    HostTensor& y = Y(0);
    if (y.shape.size() != rank) Unsupported("the output's rank differs");
    for (size_t d = 0; d < rank; ++d) {
      if (y.shape[d] != x.shape[d] + begin[d] + end[d]) Unsupported("the output's shape differs");
      if (mode != "constant" && x.shape[d] == 0 && y.shape[d] > 0) Unsupported("padding an empty dim");
    }
    const std::vector<int64_t> stride = Strides(x.shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(x.dtype));
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t src = 0;
      bool outside = false;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t n = x.shape[d];
        int64_t at = index[d] - begin[d];
        if (at < 0 || at >= n) {
          if (mode == "constant") {
            outside = true;
            break;
          }
          if (mode == "edge" || n == 1) {
            at = std::clamp<int64_t>(at, 0, n - 1);
          } else {  // reflect, without repeating the edge
            const int64_t period = 2 * (n - 1);
            at = ((at % period) + period) % period;
            if (at >= n) at = period - at;
          }
        }
        src += at * stride[d];
      }
      if (outside) {
        SetDouble(y, i, fill);
      } else {
        std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                    x.bytes.data() + static_cast<size_t>(src) * bytes, bytes);
      }
      Next(index, y.shape);
    }
  }

  // Slice (opset 10+: starts, ends, axes, steps as inputs).
  void Slice() {
    const HostTensor& x = X(0);
    const size_t rank = x.shape.size();
    const std::vector<int64_t> starts = IntValues(X(1)), ends = IntValues(X(2));
    std::vector<int64_t> axes, steps;
    if (const HostTensor* a = Input(3)) axes = IntValues(*a);
    if (const HostTensor* s = Input(4)) steps = IntValues(*s);
    const std::optional<SliceRange> range = SliceRanges(x.shape, starts, ends, axes, steps);
    if (!range) Unsupported("starts, ends, axes and steps do not describe a slice of the input");
    const auto& [first, step, count] = *range;
    HostTensor& y = Y(0);
    SameSize(y, Product(count, 0, rank));
    const std::vector<int64_t> stride = Strides(x.shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(x.dtype));
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t src = 0;
      for (size_t d = 0; d < rank; ++d) src += (first[d] + index[d] * step[d]) * stride[d];
      std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                  x.bytes.data() + static_cast<size_t>(src) * bytes, bytes);
      Next(index, count);
    }
  }

  // Concat of any dtype (the float ones of static shapes are concatenate ops).
  void Concat() {
    HostTensor& y = Y(0);
    const size_t axis = AxisOf(Int("axis", 0), y.shape.size());
    const int64_t outer = Product(y.shape, 0, axis);
    const int64_t inner = Product(y.shape, axis + 1, y.shape.size()) * DTypeBytes(y.dtype);
    int64_t offset = 0, total = 0;
    for (size_t slot = 0; slot < NumInputSlots(); ++slot) {
      const HostTensor* x = Input(slot);
      if (!x) continue;
      if (x->shape.size() != y.shape.size()) Unsupported("an input's rank differs");
      total += x->shape[axis];
    }
    if (total != y.shape[axis]) Unsupported("the inputs do not add up to the output");
    for (size_t slot = 0; slot < NumInputSlots(); ++slot) {
      const HostTensor* x = Input(slot);
      if (!x) continue;
      const int64_t chunk = x->shape[axis] * inner;
      if (chunk > 0) {
        fast::CopyRows(y.bytes.data() + offset, y.shape[axis] * inner, x->bytes.data(), chunk, outer, chunk);
      }
      offset += chunk;
    }
  }
  size_t NumInputSlots() const {
    return node_.input_slots.empty() ? in_.size() : node_.input_slots.size();
  }

  // Split of any form (sizes as an attribute or an input, equal parts,
  // num_outputs): each output's size is its shape in the graph.
  void Split() {
    const HostTensor& x = X(0);
    const size_t axis = AxisOf(Int("axis", 0), x.shape.size());
    const int64_t outer = Product(x.shape, 0, axis);
    const int64_t inner = Product(x.shape, axis + 1, x.shape.size()) * DTypeBytes(x.dtype);
    const size_t outputs = node_.output_slots.empty() ? out_.size() : node_.output_slots.size();
    std::vector<int64_t> sizes;
    if (const HostTensor* s = Input(1)) {
      sizes = IntValues(*s);
    } else {
      sizes = Ints("split");
    }
    if (sizes.empty()) {  // equal parts, the last one smaller (num_outputs)
      const auto n = static_cast<int64_t>(outputs);
      const int64_t part = (x.shape[axis] + n - 1) / n;
      for (int64_t i = 0; i < n; ++i) sizes.push_back(std::min(part, x.shape[axis] - i * part));
    }
    if (sizes.size() != outputs) Unsupported("the split sizes do not match the outputs");
    int64_t offset = 0;
    for (size_t i = 0; i < outputs; ++i) {
      const int64_t chunk = sizes[i] * inner;
      if (HostTensor* y = Output(i)) {
        SameSize(*y, outer * sizes[i] * (inner / DTypeBytes(x.dtype)));
        if (chunk > 0) {
          fast::CopyRows(y->bytes.data(), chunk, x.bytes.data() + offset, x.shape[axis] * inner, outer, chunk);
        }
      }
      offset += chunk;
    }
  }

  // Reductions: axes as an attribute (ReduceSum before opset 13, the others
  // before 18) or as an input; keepdims; noop_with_empty_axes.
  void Reduce() {
    const std::string& type = node_.op_type;
    const HostTensor& x = X(0);
    const size_t rank = x.shape.size();
    std::vector<int64_t> axes_input;
    if (const HostTensor* a = Input(1)) axes_input = IntValues(*a);
    const std::optional<std::vector<bool>> dims =
        ReducedDims(node_, rank, Input(1) ? &axes_input : nullptr);
    if (!dims) Unsupported("an axis is out of range");
    const std::vector<bool>& reduced = *dims;
    std::vector<int64_t> out_shape(rank);
    for (size_t d = 0; d < rank; ++d) out_shape[d] = reduced[d] ? 1 : x.shape[d];
    HostTensor& y = Y(0);
    SameSize(y, Product(out_shape, 0, rank));
    const std::vector<int64_t> ostride = Strides(out_shape);
    const bool max = type == "ReduceMax", min = type == "ReduceMin", prod = type == "ReduceProd";
    const bool l1 = type == "ReduceL1", squares = type == "ReduceL2" || type == "ReduceSumSquare";
    std::vector<double> acc(static_cast<size_t>(y.numel()),
                            max ? -INFINITY : min ? INFINITY : prod ? 1.0 : 0.0);
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t o = 0;
      for (size_t d = 0; d < rank; ++d) o += (reduced[d] ? 0 : index[d]) * ostride[d];
      double v = GetDouble(x, i);
      if (l1) v = std::fabs(v);
      if (squares) v *= v;
      double& a = acc[static_cast<size_t>(o)];
      a = max ? std::max(a, v) : min ? std::min(a, v) : prod ? a * v : a + v;
      Next(index, x.shape);
    }
    const int64_t count = y.numel() > 0 ? x.numel() / y.numel() : 0;
    for (int64_t o = 0; o < y.numel(); ++o) {
      double v = acc[static_cast<size_t>(o)];
      if (type == "ReduceMean") v /= static_cast<double>(std::max<int64_t>(count, 1));
      if (type == "ReduceL2") v = std::sqrt(v);
      SetDouble(y, o, v);
    }
  }

  // Inference BatchNormalization: y = (x - mean) / sqrt(var + eps) * scale + B
  // over channel dim 1.
  void BatchNorm() {
    if (Output(1) || Output(2)) Unsupported("its running statistics outputs are used (training)");
    const HostTensor& x = X(0);
    if (x.shape.size() < 2) Unsupported("the input has fewer than 2 dims");
    const int64_t c = x.shape[1];
    const int64_t inner = Product(x.shape, 2, x.shape.size());
    const std::vector<float> scale = X(1).ToFloat(), bias = X(2).ToFloat(),
                             mean = X(3).ToFloat(), var = X(4).ToFloat();
    if (static_cast<int64_t>(scale.size()) != c || static_cast<int64_t>(bias.size()) != c ||
        static_cast<int64_t>(mean.size()) != c || static_cast<int64_t>(var.size()) != c) {
      Unsupported("the statistics do not match the channels");
    }
    const auto eps = static_cast<float>(Float("epsilon", 1e-5));
    std::vector<float> xf = x.ToFloat();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const auto ch = static_cast<size_t>((i / inner) % c);
      xf[static_cast<size_t>(i)] =
          (xf[static_cast<size_t>(i)] - mean[ch]) / std::sqrt(var[ch] + eps) * scale[ch] + bias[ch];
    }
    Y(0).FromFloat(xf.data());
  }

  // Conv of any spatial rank, with groups, strides, pads and dilations
  // (explicit pads; auto_pad NOTSET or VALID), direct loops.
  void Conv() {
    const HostTensor& x = X(0);
    const HostTensor& w = X(1);
    const HostTensor* b = Input(2);
    const size_t sp = x.shape.size() - 2;
    if (x.shape.size() < 3 || w.shape.size() != x.shape.size()) Unsupported("unexpected ranks");
    auto it = node_.strings.find("auto_pad");
    if (it != node_.strings.end() && it->second != "NOTSET" && it->second != "VALID") {
      Unsupported("auto_pad " + it->second);
    }
    const int64_t n = x.shape[0], cin = x.shape[1], cout = w.shape[0];
    const int64_t groups = Int("group", 1);
    if (groups <= 0 || cin % groups != 0 || cout % groups != 0 || w.shape[1] != cin / groups) {
      Unsupported("the weight does not match the input's channels and groups");
    }
    std::vector<int64_t> strides = Ints("strides"), dil = Ints("dilations"), pads = Ints("pads");
    strides.resize(sp, 1);
    dil.resize(sp, 1);
    pads.resize(2 * sp, 0);
    std::vector<int64_t> in_sp(x.shape.begin() + 2, x.shape.end());
    std::vector<int64_t> k_sp(w.shape.begin() + 2, w.shape.end());
    std::vector<int64_t> out_sp(sp);
    for (size_t d = 0; d < sp; ++d) {
      out_sp[d] = (in_sp[d] + pads[d] + pads[sp + d] - dil[d] * (k_sp[d] - 1) - 1) / strides[d] + 1;
    }
    HostTensor& y = Y(0);
    SameSize(y, n * cout * Product(out_sp, 0, sp));
    const std::vector<float> xf = x.ToFloat(), wf = w.ToFloat();
    const std::vector<float> bf = b ? b->ToFloat() : std::vector<float>();
    const int64_t in_size = Product(in_sp, 0, sp), k_size = Product(k_sp, 0, sp),
                  out_size = Product(out_sp, 0, sp);
    const int64_t cpg = cin / groups, opg = cout / groups;
    std::vector<float> yf(static_cast<size_t>(y.numel()));
    std::vector<int64_t> opos(sp), kpos(sp);
    for (int64_t bn = 0; bn < n; ++bn) {
      for (int64_t oc = 0; oc < cout; ++oc) {
        const int64_t g = oc / opg;
        std::fill(opos.begin(), opos.end(), 0);
        for (int64_t o = 0; o < out_size; ++o) {
          double acc = b ? bf[static_cast<size_t>(oc)] : 0.0;
          for (int64_t ic = 0; ic < cpg; ++ic) {
            const float* xc = xf.data() + (bn * cin + g * cpg + ic) * in_size;
            const float* wc = wf.data() + (oc * cpg + ic) * k_size;
            std::fill(kpos.begin(), kpos.end(), 0);
            for (int64_t kk = 0; kk < k_size; ++kk) {
              int64_t at = 0;
              bool inside = true;
              for (size_t d = 0; d < sp; ++d) {
                const int64_t p = opos[d] * strides[d] - pads[d] + kpos[d] * dil[d];
                if (p < 0 || p >= in_sp[d]) inside = false;
                at = at * in_sp[d] + p;
              }
              if (inside) acc += static_cast<double>(xc[at]) * wc[kk];
              Next(kpos, k_sp);
            }
          }
          yf[static_cast<size_t>((bn * cout + oc) * out_size + o)] = static_cast<float>(acc);
          Next(opos, out_sp);
        }
      }
    }
    y.FromFloat(yf.data());
  }

  // Einsum, explicit ("ij,jk->ik") or implicit form, no ellipsis: a sum over
  // every label not in the output, by direct loops over all labels.
  void Einsum() {
    auto eq_it = node_.strings.find("equation");
    if (eq_it == node_.strings.end()) Unsupported("no equation");
    std::string eq;
    for (char ch : eq_it->second) {
      if (ch != ' ') eq += ch;
    }
    if (eq.find('.') != std::string::npos) Unsupported("an ellipsis in the equation");
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t at = 0;;) {
      const size_t comma = lhs.find(',', at);
      terms.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    std::string out;
    if (arrow != std::string::npos) {
      out = eq.substr(arrow + 2);
    } else {  // implicit: the labels seen once, in alphabetical order
      std::map<char, int> seen;
      for (const std::string& t : terms) {
        for (char ch : t) ++seen[ch];
      }
      for (const auto& [ch, n] : seen) {
        if (n == 1) out += ch;
      }
    }
    if (terms.size() != NumInputSlots()) Unsupported("the equation's operands do not match");
    std::map<char, int64_t> size;
    std::vector<const HostTensor*> xs;
    for (size_t t = 0; t < terms.size(); ++t) {
      const HostTensor& x = X(t);
      if (x.shape.size() != terms[t].size()) Unsupported("an operand's rank does not match");
      for (size_t d = 0; d < terms[t].size(); ++d) size[terms[t][d]] = x.shape[d];
      xs.push_back(&x);
    }
    std::string labels = out;
    for (const auto& [ch, n] : size) {
      if (out.find(ch) == std::string::npos) labels += ch;
    }
    std::vector<int64_t> dims;
    for (char ch : labels) dims.push_back(size[ch]);
    HostTensor& y = Y(0);
    SameSize(y, Product(dims, 0, out.size()));
    // Per operand: its stride for each label.
    std::vector<std::vector<int64_t>> strides;
    std::vector<std::vector<float>> values;
    for (size_t t = 0; t < terms.size(); ++t) {
      const std::vector<int64_t> s = Strides(xs[t]->shape);
      std::vector<int64_t> per(labels.size(), 0);
      for (size_t d = 0; d < terms[t].size(); ++d) per[labels.find(terms[t][d])] += s[d];
      strides.push_back(std::move(per));
      values.push_back(xs[t]->ToFloat());
    }
    const int64_t inner = Product(dims, out.size(), dims.size());
    std::vector<float> yf(static_cast<size_t>(y.numel()), 0.0f);
    std::vector<int64_t> index(labels.size(), 0);
    for (int64_t o = 0; o < y.numel(); ++o) {
      double acc = 0;
      for (int64_t r = 0; r < inner; ++r) {
        double prod = 1;
        for (size_t t = 0; t < terms.size(); ++t) {
          int64_t at = 0;
          for (size_t d = 0; d < labels.size(); ++d) at += index[d] * strides[t][d];
          prod *= values[t][static_cast<size_t>(at)];
        }
        acc += prod;
        Next(index, dims);
      }
      yf[static_cast<size_t>(o)] = static_cast<float>(acc);
    }
    y.FromFloat(yf.data());
  }

  void Where() {
    const HostTensor &c = X(0), &a = X(1), &b = X(2);
    HostTensor& y = Y(0);
    const std::vector<int64_t> sc = BroadcastStrides(c.shape, y.shape),
                               sa = BroadcastStrides(a.shape, y.shape),
                               sb = BroadcastStrides(b.shape, y.shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(y.dtype));
    std::vector<int64_t> index(y.shape.size(), 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t oc = 0, oa = 0, ob = 0;
      for (size_t d = 0; d < index.size(); ++d) {
        oc += index[d] * sc[d];
        oa += index[d] * sa[d];
        ob += index[d] * sb[d];
      }
      const bool pick = c.GetInt(oc) != 0;
      std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                  (pick ? a : b).bytes.data() + static_cast<size_t>(pick ? oa : ob) * bytes, bytes);
      Next(index, y.shape);
    }
  }

  // Elementwise binary ops of any dtype, numpy-broadcast: in double for
  // float operands, in int64 for integer ones (division truncates, as ONNX's
  // integer Div does); comparisons write bool.
  void Binary() {
    const std::string& type = node_.op_type;
    const HostTensor &a = X(0), &b = X(1);
    HostTensor& y = Y(0);
    const std::vector<int64_t> sa = BroadcastStrides(a.shape, y.shape),
                               sb = BroadcastStrides(b.shape, y.shape);
    const bool ints = !IsFloat(a.dtype);
    std::vector<int64_t> index(y.shape.size(), 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t oa = 0, ob = 0;
      for (size_t d = 0; d < index.size(); ++d) {
        oa += index[d] * sa[d];
        ob += index[d] * sb[d];
      }
      if (ints) {
        const int64_t x = a.GetInt(oa), z = b.GetInt(ob);
        int64_t r = 0;
        if (type == "Add") r = x + z;
        else if (type == "Sub") r = x - z;
        else if (type == "Mul") r = x * z;
        else if (type == "Div") r = z == 0 ? 0 : x / z;
        else if (type == "Mod") {  // fmod=0: the sign of the divisor, as Python's %
          r = z == 0 ? 0 : x % z;
          if (Int("fmod", 0) == 0 && r != 0 && (r < 0) != (z < 0)) r += z;
        }
        else if (type == "Max") r = std::max(x, z);
        else if (type == "Min") r = std::min(x, z);
        else if (type == "Pow") r = static_cast<int64_t>(std::pow(static_cast<double>(x), static_cast<double>(z)));
        else if (type == "Equal") r = x == z;
        else if (type == "Less") r = x < z;
        else if (type == "Greater") r = x > z;
        else if (type == "LessOrEqual") r = x <= z;
        else if (type == "GreaterOrEqual") r = x >= z;
        else if (type == "And") r = x && z;
        else if (type == "Or") r = x || z;
        else if (type == "Xor") r = (x != 0) != (z != 0);
        else Unsupported("on integers");
        y.SetInt(i, r);
      } else {
        const double x = a.Get(oa), z = IsFloat(b.dtype) ? b.Get(ob) : static_cast<double>(b.GetInt(ob));
        double r = 0;
        if (type == "Add") r = static_cast<float>(x) + static_cast<float>(z);
        else if (type == "Sub") r = static_cast<float>(x) - static_cast<float>(z);
        else if (type == "Mul") r = static_cast<float>(x) * static_cast<float>(z);
        else if (type == "Div") r = static_cast<float>(x) / static_cast<float>(z);
        else if (type == "Pow") r = std::pow(static_cast<float>(x), static_cast<float>(z));
        else if (type == "Max") r = std::max(x, z);
        else if (type == "Min") r = std::min(x, z);
        else if (type == "Mod") r = Int("fmod", 0) != 0 ? std::fmod(x, z) : x - std::floor(x / z) * z;
        else if (type == "PRelu") r = x < 0 ? x * z : x;
        else if (type == "Equal") r = x == z;
        else if (type == "Less") r = x < z;
        else if (type == "Greater") r = x > z;
        else if (type == "LessOrEqual") r = x <= z;
        else if (type == "GreaterOrEqual") r = x >= z;
        else Unsupported("on floats");
        SetDouble(y, i, r);
      }
      Next(index, y.shape);
    }
  }

  void Unary() {
    const std::string& type = node_.op_type;
    const HostTensor& x = X(0);
    HostTensor& y = Y(0);
    SameSize(y, x.numel());
    double lo = -INFINITY, hi = INFINITY;
    if (type == "Clip") {
      if (node_.opset >= 11) {
        if (const HostTensor* m = Input(1)) lo = GetDouble(*m, 0);
        if (const HostTensor* m = Input(2)) hi = GetDouble(*m, 0);
      } else {
        lo = Float("min", lo);
        hi = Float("max", hi);
      }
    }
    const double alpha = Float("alpha", type == "LeakyRelu" ? 0.01 : type == "HardSigmoid" ? 0.2 : 1.0);
    const double beta = Float("beta", 0.5);
    const auto approximate = node_.strings.find("approximate");
    const bool tanh_gelu = approximate != node_.strings.end() && approximate->second == "tanh";
    if (type == "Gelu" && approximate != node_.strings.end() && approximate->second != "none" &&
        !tanh_gelu) {
      Unsupported(fmt::format("approximate '{}'", approximate->second));
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = GetDouble(x, i);
      const auto f = static_cast<float>(v);
      double r = v;
      if (type == "Relu") r = std::max(f, 0.0f);
      else if (type == "Sigmoid") r = 1.0f / (1.0f + std::exp(-f));
      else if (type == "Tanh") r = std::tanh(f);
      else if (type == "Sqrt") r = std::sqrt(f);
      else if (type == "Exp") r = std::exp(f);
      else if (type == "Log") r = std::log(f);
      else if (type == "Neg") r = -v;
      else if (type == "Abs") r = std::fabs(v);
      else if (type == "Erf") r = std::erf(f);
      else if (type == "Reciprocal") r = 1.0f / f;
      else if (type == "Softplus") r = std::log1p(std::exp(-std::fabs(f))) + std::max(f, 0.0f);
      else if (type == "LeakyRelu") r = f < 0 ? f * alpha : f;
      else if (type == "Clip") r = std::min(std::max(v, lo), hi);
      else if (type == "Not") r = v == 0;
      else if (type == "Floor") r = std::floor(v);
      else if (type == "Ceil") r = std::ceil(v);
      else if (type == "Elu") r = f < 0 ? alpha * std::expm1(f) : f;
      else if (type == "HardSigmoid") r = std::clamp(alpha * f + beta, 0.0, 1.0);
      else if (type == "Sign") r = (v > 0) - (v < 0);
      else if (type == "Gelu" && tanh_gelu) {  // approximate="tanh" (opset 20)
        r = 0.5f * f * (1.0f + std::tanh(0.79788456080286536f * (f + 0.044715f * f * f * f)));
      } else if (type == "Gelu") r = 0.5f * f * (1.0f + std::erf(f * 0.70710678118654752f));
      else if (type == "Swish") r = f / (1.0f + std::exp(-static_cast<float>(alpha) * f));  // opset 24
      else if (type == "Mish") r = f * std::tanh(std::log1p(std::exp(-std::fabs(f))) + std::max(f, 0.0f));
      else if (type == "Selu") {
        const double a = Float("alpha", 1.67326319217681884765625), g = Float("gamma", 1.05070102214813232421875);
        r = f > 0 ? g * f : g * a * std::expm1(f);
      } else if (type == "Softsign") r = f / (1.0f + std::fabs(f));
      SetDouble(y, i, r);
    }
  }


  // ---- fast kernels (onnx_ops.def's Fast column) ------------------------
  // float32 only, on the tensors' bytes; each returns false, computing
  // nothing, for a form it does not cover (the reference kernel runs it and
  // reports what is wrong with it).
  bool Ref() { return false; }
  static bool F32(const HostTensor* t) { return t && t->dtype == DType::kFloat32; }
  static const float* P(const HostTensor& t) { return reinterpret_cast<const float*>(t.bytes.data()); }
  static float* P(HostTensor& t) { return reinterpret_cast<float*>(t.bytes.data()); }
  bool OutF32(size_t slot, int64_t numel) {
    HostTensor* y = Output(slot);
    return F32(y) && y->numel() == numel;
  }

  bool FastMatMul() {
    const HostTensor* xa = Input(0);
    const HostTensor* xb = Input(1);
    if (!F32(xa) || !F32(xb) || xa->shape.empty() || xb->shape.empty()) return false;
    std::vector<int64_t> a = xa->shape, b = xb->shape;
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
    if (b[b.size() - 2] != k) return false;
    const size_t rank = std::max(a.size(), b.size());
    a.insert(a.begin(), rank - a.size(), 1);
    b.insert(b.begin(), rank - b.size(), 1);
    std::vector<int64_t> batch(rank - 2);
    for (size_t d = 0; d + 2 < rank; ++d) {
      if (a[d] != b[d] && a[d] != 1 && b[d] != 1) return false;
      batch[d] = std::max(a[d], b[d]);
    }
    const int64_t batches = Product(batch, 0, batch.size());
    if (!OutF32(0, batches * m * n)) return false;
    if (m == 0 || n == 0 || batches == 0) return true;
    float* y = P(*Output(0));
    if (k == 0) {
      std::fill(y, y + batches * m * n, 0.0f);
      return true;
    }
    const bool b_shared = std::all_of(b.begin(), b.end() - 2, [](int64_t d) { return d == 1; });
    const bool a_full = std::equal(batch.begin(), batch.end(), a.begin());
    if (b_shared && a_full) {  // one weight for every matrix of a: one product of all rows
      fast::Gemm({P(*xa), k, false}, {P(*xb), n, false}, y, n, batches * m, n, k, 1.0f, nullptr,
                 std::nullopt);
      return true;
    }
    std::vector<int64_t> a_off, b_off, index(batch.size(), 0);
    for (int64_t i = 0; i < batches; ++i) {
      int64_t ao = 0, bo = 0;  // this batch's matrices, in matrices
      for (size_t d = 0; d < batch.size(); ++d) {
        ao = ao * a[d] + (a[d] == 1 ? 0 : index[d]);
        bo = bo * b[d] + (b[d] == 1 ? 0 : index[d]);
      }
      a_off.push_back(ao * m * k);
      b_off.push_back(bo * k * n);
      Next(index, batch);
    }
    fast::BatchedGemm(P(*xa), a_off, k, false, P(*xb), b_off, n, false, y, m, n, k);
    return true;
  }

  bool FastGemm() {
    const HostTensor* a = Input(0);
    const HostTensor* b = Input(1);
    const HostTensor* c = Input(2);
    if (!F32(a) || !F32(b) || (c && !F32(c)) || a->shape.size() != 2 || b->shape.size() != 2) return false;
    const bool ta = Int("transA", 0) != 0, tb = Int("transB", 0) != 0;
    const int64_t m = ta ? a->shape[1] : a->shape[0], k = ta ? a->shape[0] : a->shape[1];
    const int64_t n = tb ? b->shape[0] : b->shape[1];
    if ((tb ? b->shape[1] : b->shape[0]) != k || !OutF32(0, m * n)) return false;
    HostTensor& y = *Output(0);
    if (y.shape.size() != 2 || (c && c->shape.size() > 2)) return false;
    fast::Gemm({P(*a), a->shape[1], ta}, {P(*b), b->shape[1], tb}, P(y), n, m, n, k,
               static_cast<float>(Float("alpha", 1.0)), nullptr, std::nullopt);
    if (c) {  // + beta * C, C broadcast to [m, n]
      const float beta = static_cast<float>(Float("beta", 1.0));
      const std::vector<int64_t> s = BroadcastStrides(c->shape, y.shape);
      const float* cp = P(*c);
      float* yp = P(y);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) yp[i * n + j] += beta * cp[i * s[0] + j * s[1]];
      }
    }
    return true;
  }

  // Conv as GEMMs: each image and group is W_g [opg, cpg*K] . cols [cpg*K, L],
  // where cols is the input itself for a kernel-1 Conv of stride 1 without
  // padding (xDeepFM's CIN, 1x1-conv towers) and its im2col otherwise.
  bool FastConv() {
    const HostTensor* x = Input(0);
    const HostTensor* w = Input(1);
    const HostTensor* b = Input(2);
    if (!F32(x) || !F32(w) || (b && !F32(b)) || x->shape.size() < 3 || w->shape.size() != x->shape.size()) {
      return false;
    }
    auto it = node_.strings.find("auto_pad");
    if (it != node_.strings.end() && it->second != "NOTSET" && it->second != "VALID") return false;
    const size_t sp = x->shape.size() - 2;
    const int64_t batch = x->shape[0], cin = x->shape[1], cout = w->shape[0];
    const int64_t groups = Int("group", 1);
    if (groups <= 0 || cin % groups != 0 || cout % groups != 0 || w->shape[1] != cin / groups) return false;
    if (b && b->numel() != cout) return false;
    std::vector<int64_t> strides = Ints("strides"), dil = Ints("dilations"), pads = Ints("pads");
    strides.resize(sp, 1);
    dil.resize(sp, 1);
    pads.resize(2 * sp, 0);
    const std::vector<int64_t> in_sp(x->shape.begin() + 2, x->shape.end());
    const std::vector<int64_t> k_sp(w->shape.begin() + 2, w->shape.end());
    std::vector<int64_t> out_sp(sp);
    bool pointwise = true;
    for (size_t d = 0; d < sp; ++d) {
      if (strides[d] <= 0 || dil[d] <= 0) return false;
      out_sp[d] = (in_sp[d] + pads[d] + pads[sp + d] - dil[d] * (k_sp[d] - 1) - 1) / strides[d] + 1;
      if (out_sp[d] < 0) return false;
      pointwise = pointwise && k_sp[d] == 1 && strides[d] == 1 && pads[d] == 0 && pads[sp + d] == 0;
    }
    const int64_t in_size = Product(in_sp, 0, sp), k_size = Product(k_sp, 0, sp),
                  out_size = Product(out_sp, 0, sp);
    if (!OutF32(0, batch * cout * out_size)) return false;
    const int64_t cpg = cin / groups, opg = cout / groups, depth = cpg * k_size;
    float* y = P(*Output(0));
    const float* xp = P(*x);
    const float* wp = P(*w);
    if (pointwise) {
      if (out_size == 1) {  // [batch, cin] . W^T: one product (groups = 1)
        if (groups == 1) {
          fast::Gemm({xp, cin, false}, {wp, cin, true}, y, cout, batch, cout, cin, 1.0f, b ? P(*b) : nullptr,
                     std::nullopt);
          return true;
        }
      }
      std::vector<int64_t> a_off, b_off;
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          a_off.push_back(g * opg * cpg);
          b_off.push_back((n * cin + g * cpg) * in_size);
        }
      }
      fast::BatchedGemm(wp, a_off, cpg, false, xp, b_off, in_size, false, y, opg, out_size, cpg);
    } else {
      std::vector<float> cols(static_cast<size_t>(depth * out_size));
      std::vector<int64_t> opos(sp), kpos(sp);
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          // cols[(ic * K + kk), o] = x[n, g*cpg + ic, o*stride - pad + kk*dil] (0 outside)
          for (int64_t ic = 0; ic < cpg; ++ic) {
            const float* xc = xp + (n * cin + g * cpg + ic) * in_size;
            std::fill(kpos.begin(), kpos.end(), 0);
            for (int64_t kk = 0; kk < k_size; ++kk) {
              float* row = cols.data() + (ic * k_size + kk) * out_size;
              std::fill(opos.begin(), opos.end(), 0);
              for (int64_t o = 0; o < out_size; ++o) {
                int64_t at = 0;
                bool inside = true;
                for (size_t d = 0; d < sp; ++d) {
                  const int64_t p = opos[d] * strides[d] - pads[d] + kpos[d] * dil[d];
                  inside = inside && p >= 0 && p < in_sp[d];
                  at = at * in_sp[d] + p;
                }
                row[o] = inside ? xc[at] : 0.0f;
                Next(opos, out_sp);
              }
              Next(kpos, k_sp);
            }
          }
          fast::Gemm({wp + g * opg * depth, depth, false}, {cols.data(), out_size, false},
                     y + (n * cout + g * opg) * out_size, out_size, opg, out_size, depth, 1.0f, nullptr,
                     std::nullopt);
        }
      }
    }
    if (b) {
      const float* bp = P(*b);
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t oc = 0; oc < cout; ++oc) {
          float* row = y + (n * cout + oc) * out_size;
          for (int64_t o = 0; o < out_size; ++o) row[o] += bp[oc];
        }
      }
    }
    return true;
  }

  bool FastSoftmax() {
    const HostTensor* x = Input(0);
    if (!F32(x)) return false;
    const std::optional<AxisView> view = SoftmaxView(node_, x->shape);
    if (!view || view->inner != 1 || !OutF32(0, x->numel())) return false;
    fast::SoftmaxRows(P(*x), P(*Output(0)), view->outer, view->len, node_.op_type == "LogSoftmax");
    return true;
  }

  bool FastLayerNorm() {
    const HostTensor* x = Input(0);
    const HostTensor* scale = Input(1);
    const HostTensor* bias = Input(2);
    if (!F32(x) || !F32(scale) || (bias && !F32(bias)) || Output(1) || Output(2)) return false;
    const size_t rank = x->shape.size();
    const std::optional<size_t> axis = Axis(Int("axis", -1), rank);
    if (!axis) return false;
    const int64_t rows = Product(x->shape, 0, *axis), n = Product(x->shape, *axis, rank);
    if (scale->numel() != n || (bias && bias->numel() != n) || !OutF32(0, x->numel())) return false;
    fast::LayerNorm(P(*x), P(*scale), bias ? P(*bias) : nullptr, P(*Output(0)), rows, n,
                    static_cast<float>(Float("epsilon", 1e-5)), false);
    return true;
  }

  // Elementwise ops on float32, numpy broadcasting: the reference's
  // arithmetic (float ops), in runs.
  bool FastBinary() {
    const HostTensor* a = Input(0);
    const HostTensor* b = Input(1);
    HostTensor* y = Output(0);
    if (!F32(a) || !b || !F32(y) || a->shape.size() > y->shape.size() || b->shape.size() > y->shape.size()) {
      return false;
    }
    static const std::map<std::string_view, fast::BinOp> kOps = {
        {"Add", fast::BinOp::kAdd}, {"Sub", fast::BinOp::kSub}, {"Mul", fast::BinOp::kMul},
        {"Div", fast::BinOp::kDiv}, {"Max", fast::BinOp::kMax}, {"Min", fast::BinOp::kMin},
        {"Pow", fast::BinOp::kPow}};
    auto it = kOps.find(node_.op_type);
    if (it == kOps.end() || NumInputSlots() != 2) return false;
    // Every operand dim is 1 or the output's (the reference checks nothing more).
    for (const HostTensor* t : {a, b}) {
      for (size_t d = 0; d < t->shape.size(); ++d) {
        const int64_t od = y->shape[y->shape.size() - t->shape.size() + d];
        if (t->shape[d] != 1 && t->shape[d] != od) return false;
      }
    }
    if (y->numel() == 0) return true;
    // A small integer operand (Pow's exponent) as floats, as the reference reads it.
    std::vector<float> b_values;
    const float* bp = nullptr;
    if (F32(b)) {
      bp = P(*b);
    } else if (it->second == fast::BinOp::kPow && !IsFloat(b->dtype) && b->numel() <= 4096) {
      for (int64_t i = 0; i < b->numel(); ++i) b_values.push_back(static_cast<float>(b->GetInt(i)));
      bp = b_values.data();
    } else {
      return false;
    }
    // x ** 2 (a sum of squares, FM's second order): a product.
    if (it->second == fast::BinOp::kPow && b->numel() == 1 && bp[0] == 2.0f) {
      fast::Binary(fast::BinOp::kMul, P(*a), a->shape, P(*a), a->shape, P(*y), y->shape);
      return true;
    }
    fast::Binary(it->second, P(*a), a->shape, bp, b->shape, P(*y), y->shape);
    return true;
  }

  bool FastUnary() {
    const HostTensor* x = Input(0);
    if (!F32(x) || !OutF32(0, x->numel())) return false;
    const float* in = P(*x);
    float* out = P(*Output(0));
    const int64_t n = x->numel();
    const std::string& type = node_.op_type;
    const auto map = [&](auto f) {
      fast::ParallelFor(n, int64_t{1} << 14, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) out[i] = f(in[i]);
      });
      return true;
    };
    // Functions without a call in them: the loop vectorised whatever the
    // optimiser's cost model (the same IEEE operations a lane, so the same bytes).
    const auto simd_map = [&](auto f) {
      fast::ParallelFor(n, int64_t{1} << 14, [&](int64_t i0, int64_t i1) {
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) out[i] = f(in[i]);
      });
      return true;
    };
    // The reference's float expressions, one loop each.
    if (type == "Relu") return simd_map([](float f) { return std::max(f, 0.0f); });
    const auto vec = [&](fast::VecFunc f) {
      fast::VecMath(f, in, out, n);
      return true;
    };
    if (type == "Sigmoid") return vec(fast::VecFunc::kSigmoid);
    if (type == "Tanh") return map([](float f) { return std::tanh(f); });
    if (type == "Sqrt") return map([](float f) { return std::sqrt(f); });
    if (type == "Exp") return vec(fast::VecFunc::kExp);
    if (type == "Log") return map([](float f) { return std::log(f); });
    if (type == "Neg") return simd_map([](float f) { return -f; });
    if (type == "Abs") return simd_map([](float f) { return std::fabs(f); });
    if (type == "Erf") return vec(fast::VecFunc::kErf);
    if (type == "Reciprocal") return simd_map([](float f) { return 1.0f / f; });
    if (type == "Softplus") {
      return map([](float f) { return std::log1p(std::exp(-std::fabs(f))) + std::max(f, 0.0f); });
    }
    if (type == "LeakyRelu") {
      // The reference's (float)(x * alpha) in double, four lanes at a time
      // (GCC vector types: the same IEEE operations, so the same bytes);
      // the optimiser leaves the plain loop a branch per element.
      const double alpha = Float("alpha", 0.01);
      fast::ParallelFor(n, int64_t{1} << 14, [&](int64_t i0, int64_t i1) {
        using F4 = float __attribute__((vector_size(16)));
        using D4 = double __attribute__((vector_size(32)));
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) {
          F4 x;
          std::memcpy(&x, in + i, sizeof x);
          const F4 scaled = __builtin_convertvector(__builtin_convertvector(x, D4) * alpha, F4);
          const F4 y = x < 0 ? scaled : x;
          std::memcpy(out + i, &y, sizeof y);
        }
        for (; i < i1; ++i) out[i] = in[i] < 0 ? static_cast<float>(in[i] * alpha) : in[i];
      });
      return true;
    }
    if (type == "Gelu") {
      auto approximate = node_.strings.find("approximate");
      if (approximate != node_.strings.end() && approximate->second != "none") return false;
      return vec(fast::VecFunc::kGelu);
    }
    return false;
  }

  // Reductions over one block of adjacent dims ([outer, len, inner]):
  // in double, element order, as the reference sums.
  bool FastReduce() {
    const HostTensor* x = Input(0);
    if (!F32(x)) return false;
    const size_t rank = x->shape.size();
    std::vector<int64_t> axes_input;
    if (const HostTensor* a = Input(1)) axes_input = IntValues(*a);
    const std::optional<std::vector<bool>> dims = ReducedDims(node_, rank, Input(1) ? &axes_input : nullptr);
    if (!dims) return false;
    size_t first = rank, last = 0;
    for (size_t d = 0; d < rank; ++d) {
      if ((*dims)[d] && x->shape[d] != 1) {
        first = std::min(first, d);
        last = d;
      }
    }
    if (first == rank) first = last = 0;  // nothing (but dims of 1) reduced
    for (size_t d = first; d <= last && rank > 0; ++d) {
      if (!(*dims)[d] && x->shape[d] != 1) return false;  // not one block
    }
    const int64_t outer = rank ? Product(x->shape, 0, first) : 1;
    const int64_t len = rank ? Product(x->shape, first, last + 1) : 1;
    const int64_t inner = rank ? Product(x->shape, last + 1, rank) : 1;
    if (!OutF32(0, outer * inner)) return false;
    const std::string& type = node_.op_type;
    const bool max = type == "ReduceMax", min = type == "ReduceMin";
    const bool l1 = type == "ReduceL1", squares = type == "ReduceL2" || type == "ReduceSumSquare";
    const float* in = P(*x);
    float* out = P(*Output(0));
    const double init = max ? -INFINITY : min ? INFINITY : 0.0;
    const ReduceKind kind = max ? ReduceKind::kMax : min ? ReduceKind::kMin : l1 ? ReduceKind::kL1
                          : squares ? ReduceKind::kSquares : ReduceKind::kSum;
    const bool mean = type == "ReduceMean", root = type == "ReduceL2";
    // The accumulated value as the op's result (the reference's finish).
    const auto finish = [&](double v) {
      if (mean) v /= static_cast<double>(std::max<int64_t>(len, 1));
      if (root) v = std::sqrt(v);
      return static_cast<float>(v);
    };
    fast::ParallelFor(outer, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(len * inner, 1)),
                      [&](int64_t o0, int64_t o1) {
      std::vector<double> acc(static_cast<size_t>(inner));
      int64_t o = o0;
      if (inner == 1) {
        // Rows reduced whole (the last axis): kRowLanes rows at once, each
        // summed in its own order, so that their chains of dependent adds
        // overlap instead of following one another.
        for (; o + kRowLanes <= o1; o += kRowLanes) {
          double lanes[kRowLanes];
          std::fill(lanes, lanes + kRowLanes, init);
          const float* rows = in + o * len;
          switch (kind) {
            case ReduceKind::kSum: ReduceRows<ReduceKind::kSum>(rows, lanes, len); break;
            case ReduceKind::kMax: ReduceRows<ReduceKind::kMax>(rows, lanes, len); break;
            case ReduceKind::kMin: ReduceRows<ReduceKind::kMin>(rows, lanes, len); break;
            case ReduceKind::kL1: ReduceRows<ReduceKind::kL1>(rows, lanes, len); break;
            case ReduceKind::kSquares: ReduceRows<ReduceKind::kSquares>(rows, lanes, len); break;
          }
          for (int k = 0; k < kRowLanes; ++k) out[o + k] = finish(lanes[k]);
        }
      }
      for (; o < o1; ++o) {
        std::fill(acc.begin(), acc.end(), init);
        switch (kind) {  // one loop per kind, without a branch inside, so that each vectorises
          case ReduceKind::kSum: ReduceBlock<ReduceKind::kSum>(in + o * len * inner, acc.data(), len, inner); break;
          case ReduceKind::kMax: ReduceBlock<ReduceKind::kMax>(in + o * len * inner, acc.data(), len, inner); break;
          case ReduceKind::kMin: ReduceBlock<ReduceKind::kMin>(in + o * len * inner, acc.data(), len, inner); break;
          case ReduceKind::kL1: ReduceBlock<ReduceKind::kL1>(in + o * len * inner, acc.data(), len, inner); break;
          case ReduceKind::kSquares:
            ReduceBlock<ReduceKind::kSquares>(in + o * len * inner, acc.data(), len, inner);
            break;
        }
        for (int64_t i = 0; i < inner; ++i) out[o * inner + i] = finish(acc[static_cast<size_t>(i)]);
      }
    });
    return true;
  }

  // acc[i] (op)= f(block[j, i]) for j in order: the reference's element
  // order, in double, so the same bytes.
  enum class ReduceKind : uint8_t { kSum, kMax, kMin, kL1, kSquares };
  template <ReduceKind kKind>
  static double ReduceStep(double acc, float x) {
    double v = x;
    if constexpr (kKind == ReduceKind::kL1) v = std::fabs(v);
    if constexpr (kKind == ReduceKind::kSquares) v *= v;
    if constexpr (kKind == ReduceKind::kMax) return std::max(acc, v);
    if constexpr (kKind == ReduceKind::kMin) return std::min(acc, v);
    return acc + v;
  }
  // lanes[k] (op)= f(rows[k, j]) for j in order, k < kRowLanes: rows of
  // `len` side by side, each in the reference's order.
  static constexpr int kRowLanes = 8;
  template <ReduceKind kKind>
  static void ReduceRows(const float* rows, double* lanes, int64_t len) {
    for (int64_t j = 0; j < len; ++j) {
      for (int k = 0; k < kRowLanes; ++k) lanes[k] = ReduceStep<kKind>(lanes[k], rows[k * len + j]);
    }
  }
  template <ReduceKind kKind>
  static void ReduceBlock(const float* block, double* acc, int64_t len, int64_t inner) {
    for (int64_t j = 0; j < len; ++j) {
      const float* row = block + j * inner;
      for (int64_t i = 0; i < inner; ++i) acc[i] = ReduceStep<kKind>(acc[i], row[i]);
    }
  }

  // Transpose as blocked copies (fast::Transpose), for the forms the
  // reference takes.
  bool FastTranspose() {
    const HostTensor* x = Input(0);
    HostTensor* y = Output(0);
    if (!x || !y || y->dtype != x->dtype) return false;
    const size_t rank = x->shape.size();
    const std::vector<int64_t> perm = TransposePerm(rank);
    if (perm.size() != rank || !IsPermutation(perm, rank) || y->shape.size() != rank) return false;
    for (size_t d = 0; d < rank; ++d) {
      if (y->shape[d] != x->shape[static_cast<size_t>(perm[d])]) return false;
    }
    if (y->bytes.size() != x->bytes.size()) return false;
    return fast::Transpose(x->bytes.data(), y->bytes.data(), x->shape, perm, static_cast<size_t>(DTypeBytes(x->dtype)));
  }

  // Slice as copies of runs: the last dims taken whole (step 1) are one run.
  bool FastSlice() {
    const HostTensor* x = Input(0);
    const HostTensor* s = Input(1);
    const HostTensor* e = Input(2);
    if (!x || !s || !e || x->shape.empty()) return false;
    const size_t rank = x->shape.size();
    std::vector<int64_t> axes, steps;
    if (const HostTensor* a = Input(3)) axes = IntValues(*a);
    if (const HostTensor* st = Input(4)) steps = IntValues(*st);
    const std::optional<SliceRange> range = SliceRanges(x->shape, IntValues(*s), IntValues(*e), axes, steps);
    if (!range) return false;
    const auto& [first, step, count] = *range;
    HostTensor* y = Output(0);
    if (!y || y->dtype != x->dtype || y->numel() != Product(count, 0, rank)) return false;
    if (y->numel() == 0) return true;
    // The run: the innermost dims, while they are taken whole, then one more at step 1.
    size_t d0 = rank;
    int64_t run = 1;
    while (d0 > 0 && first[d0 - 1] == 0 && step[d0 - 1] == 1 && count[d0 - 1] == x->shape[d0 - 1]) {
      run *= x->shape[--d0];
    }
    if (d0 > 0 && step[d0 - 1] == 1) run *= count[--d0];
    const std::vector<int64_t> stride = Strides(x->shape);
    const auto bytes = static_cast<size_t>(DTypeBytes(x->dtype));
    const std::vector<int64_t> outer_count(count.begin(), count.begin() + static_cast<std::ptrdiff_t>(d0));
    const int64_t runs = Product(outer_count, 0, d0);
    std::vector<int64_t> index(d0, 0);
    int64_t base = 0;  // the first element's offset
    for (size_t d = 0; d < rank; ++d) base += first[d] * stride[d];
    for (int64_t r = 0; r < runs; ++r) {
      int64_t src = base;
      for (size_t d = 0; d < d0; ++d) src += index[d] * step[d] * stride[d];
      std::memcpy(y->bytes.data() + static_cast<size_t>(r * run) * bytes,
                  x->bytes.data() + static_cast<size_t>(src) * bytes, static_cast<size_t>(run) * bytes);
      Next(index, outer_count);
    }
    return true;
  }

  // Expand of any dtype: the input's innermost run copied whole, or one
  // value repeated over a broadcast innermost run.
  bool FastExpand() {
    const HostTensor* x = Input(0);
    HostTensor* y = Output(0);
    if (!x || !y || x->dtype != y->dtype || x->shape.size() > y->shape.size()) return false;
    const size_t rank = y->shape.size();
    std::vector<int64_t> xs(rank, 1);
    std::copy(x->shape.begin(), x->shape.end(), xs.begin() + static_cast<std::ptrdiff_t>(rank - x->shape.size()));
    for (size_t d = 0; d < rank; ++d) {
      if (xs[d] != 1 && xs[d] != y->shape[d]) return false;
    }
    if (y->numel() == 0) return true;
    // The innermost dims the input has whole are one run.
    size_t d0 = rank;
    int64_t run = 1;
    while (d0 > 0 && xs[d0 - 1] == y->shape[d0 - 1]) run *= xs[--d0];
    const auto bytes = static_cast<size_t>(DTypeBytes(x->dtype));
    const std::vector<int64_t> s = BroadcastStrides(xs, y->shape);
    const std::vector<int64_t> outer(y->shape.begin(), y->shape.begin() + static_cast<std::ptrdiff_t>(d0));
    const int64_t runs = Product(outer, 0, d0);
    std::vector<int64_t> index(d0, 0);
    for (int64_t r = 0; r < runs; ++r) {
      int64_t src = 0;
      for (size_t d = 0; d < d0; ++d) src += index[d] * s[d];
      std::memcpy(y->bytes.data() + static_cast<size_t>(r * run) * bytes,
                  x->bytes.data() + static_cast<size_t>(src) * bytes, static_cast<size_t>(run) * bytes);
      Next(index, outer);
    }
    return true;
  }

  bool FastBatchNorm() {
    if (Output(1) || Output(2)) return false;
    const HostTensor* x = Input(0);
    if (!F32(x) || x->shape.size() < 2 || !OutF32(0, x->numel())) return false;
    const int64_t c = x->shape[1];
    const int64_t inner = Product(x->shape, 2, x->shape.size());
    for (size_t slot = 1; slot <= 4; ++slot) {
      if (!F32(Input(slot)) || Input(slot)->numel() != c) return false;
    }
    const float *scale = P(*Input(1)), *bias = P(*Input(2)), *mean = P(*Input(3)), *var = P(*Input(4));
    const auto eps = static_cast<float>(Float("epsilon", 1e-5));
    const float* in = P(*x);
    float* out = P(*Output(0));
    const int64_t outer = x->shape[0];
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const float m = mean[ch], sd = std::sqrt(var[ch] + eps), sc = scale[ch], bi = bias[ch];
        const int64_t at = (o * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i) out[at + i] = (in[at + i] - m) / sd * sc + bi;
      }
    }
    return true;
  }

  // Where with a bool condition on float32 operands, all of the output's shape
  // or scalars (the masks ranking models write).
  bool FastWhere() {
    const HostTensor *c = Input(0), *a = Input(1), *b = Input(2);
    HostTensor* y = Output(0);
    if (!c || c->dtype != DType::kBool || !F32(a) || !F32(b) || !F32(y)) return false;
    const int64_t n = y->numel();
    for (const HostTensor* t : {c, a, b}) {
      if (t->numel() != n && t->numel() != 1) return false;
      if (t->numel() == n && t->shape != y->shape) return false;
    }
    const uint8_t* cp = c->bytes.data();
    const float *ap = P(*a), *bp = P(*b);
    float* yp = P(*y);
    const int64_t sc = c->numel() == n ? 1 : 0, sa = a->numel() == n ? 1 : 0, sb = b->numel() == n ? 1 : 0;
    for (int64_t i = 0; i < n; ++i) yp[i] = cp[i * sc] ? ap[i * sa] : bp[i * sb];
    return true;
  }

  // Cast between float32 and int64 (ids fed as floats, and back), and to bool.
  bool FastCast() {
    const HostTensor* x = Input(0);
    HostTensor* y = Output(0);
    if (!x || !y || y->numel() != x->numel()) return false;
    const int64_t n = x->numel();
    if (x->dtype == y->dtype) {
      y->bytes = x->bytes;
      return true;
    }
    if (x->dtype == DType::kFloat32 && y->dtype == DType::kInt64) {
      const float* in = P(*x);
      auto* out = reinterpret_cast<int64_t*>(y->bytes.data());
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(in[i]);
      return true;
    }
    if (x->dtype == DType::kInt64 && y->dtype == DType::kFloat32) {
      const auto* in = reinterpret_cast<const int64_t*>(x->bytes.data());
      float* out = P(*y);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
      return true;
    }
    return false;
  }

  const std::string& name_;
  const OnnxNode& node_;
  const std::vector<const HostTensor*>& in_;
  const std::vector<HostTensor*>& out_;
  std::vector<HostTensor> constants_;
};

}  // namespace

std::optional<AxisView> SoftmaxView(const OnnxNode& node, const std::vector<int64_t>& x) {
  const std::optional<size_t> ax = Axis(IntAttr(node, "axis", node.opset >= 13 ? -1 : 1), x.size());
  if (!ax) return std::nullopt;
  if (node.opset >= 13) return AxisView{Product(x, 0, *ax), x[*ax], Product(x, *ax + 1, x.size())};
  return AxisView{Product(x, 0, *ax), Product(x, *ax, x.size()), 1};
}

std::optional<std::vector<bool>> ReducedDims(const OnnxNode& node, size_t rank,
                                             const std::vector<int64_t>* axes) {
  std::vector<int64_t> from_attr;
  if (auto it = node.ints.find("axes"); it != node.ints.end()) from_attr = it->second;
  const std::vector<int64_t>& list = axes ? *axes : from_attr;
  // No axes: every dim, or none (the input as it is) with noop_with_empty_axes.
  std::vector<bool> reduced(rank, list.empty() && IntAttr(node, "noop_with_empty_axes", 0) == 0);
  for (int64_t a : list) {
    const std::optional<size_t> d = Axis(a, rank);
    if (!d) return std::nullopt;
    reduced[*d] = true;
  }
  return reduced;
}

std::optional<std::vector<int64_t>> ConstantInts(const OnnxNode& node, int32_t slot) {
  const int64_t c = -2 - static_cast<int64_t>(slot);
  if (c < 0 || c >= static_cast<int64_t>(node.constant_values.size())) return std::nullopt;
  const OnnxNode::Value& v = node.constant_values[static_cast<size_t>(c)];
  if (IsFloat(v.dtype)) return std::nullopt;
  HostTensor t(v.dtype, v.dims);
  if (t.bytes.size() != v.data.size()) return std::nullopt;
  t.bytes = v.data;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.GetInt(i));
  return out;
}

std::optional<SliceRange> SliceRanges(const std::vector<int64_t>& x, const std::vector<int64_t>& starts,
                                      const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                                      std::vector<int64_t> steps) {
  const size_t rank = x.size();
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return std::nullopt;
  }
  SliceRange r{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), x};
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::optional<size_t> ax = Axis(axes[i], rank);
    if (!ax || steps[i] == 0) return std::nullopt;
    const int64_t dim = x[*ax], st = steps[i];
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      r.count[*ax] = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      r.count[*ax] = b > e ? (b - e - st - 1) / -st : 0;
    }
    r.first[*ax] = b;
    r.step[*ax] = st;
  }
  return r;
}

std::optional<std::vector<int64_t>> KnownInts(const OnnxNode& node, size_t slot,
                                              const std::vector<const HostTensor*>& known) {
  int32_t s = static_cast<int32_t>(slot);
  if (!node.input_slots.empty()) {
    if (slot >= node.input_slots.size()) return std::nullopt;
    s = node.input_slots[slot];
  }
  if (s <= -2) return ConstantInts(node, s);
  if (s < 0 || static_cast<size_t>(s) >= known.size() || !known[static_cast<size_t>(s)]) return std::nullopt;
  const HostTensor& t = *known[static_cast<size_t>(s)];
  if (IsFloat(t.dtype)) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.GetInt(i));
  return out;
}

std::optional<AxisView> GatherView(const OnnxNode& node, const std::vector<int64_t>& data) {
  const std::optional<size_t> ax = Axis(IntAttr(node, "axis", 0), data.size());
  if (!ax) return std::nullopt;
  return AxisView{Product(data, 0, *ax), data[*ax], Product(data, *ax + 1, data.size())};
}

void RunOnnxOp(const std::string& op_name, const OnnxNode& node,
               const std::vector<const HostTensor*>& inputs,
               const std::vector<HostTensor*>& outputs, bool fast) {
  OnnxOp(op_name, node, inputs, outputs).Run(fast);
}

}  // namespace hfuse::cpu
