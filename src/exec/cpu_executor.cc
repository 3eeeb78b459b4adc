// The CPU reference executor. See cpu_executor.h.
#include "hfuse/exec/cpu_executor.h"

#include <cstring>
#include <optional>
#include <span>
#include <random>

#include "cpu_kernels.h"
#include "cpu_onnx_ops.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

// A part of a shape that Run's budget check counted whole: it fits.
int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  const std::optional<int64_t> p =
      ElementCount(std::span<const int64_t>(v.data() + begin, end - begin));
  HFUSE_CHECK(p.has_value());
  return *p;
}

size_t Axis(int64_t dim, size_t rank) {
  return static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(rank) : dim);
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class CpuRun {
 public:
  CpuRun(const Graph& graph, const DimValues& dims)
      : g_(graph), dims_(dims), values_(static_cast<size_t>(graph.num_tensor_ids())) {}

  // Every live tensor's value (views gathered from their storage).
  std::vector<HostTensor> All() {
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      if (g_.tensor(id).alive && g_.tensor(id).storage != kNone) In(id);
    }
    return std::move(values_);
  }

  TensorMap Run(const TensorMap& feeds) {
    CheckTensorSizes(g_, dims_);
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      const Tensor& t = g_.tensor(id);
      if (!t.alive || t.role == Role::kIntermediate) continue;
      auto it = feeds.find(t.name);
      if (it == feeds.end() && t.data) {  // a param that came with its values
        values_[static_cast<size_t>(id)] = ParamValue(t, dims_);
        continue;
      }
      if (it == feeds.end()) ThrowInputError("no value given for {} '{}'", RoleName(t), t.name);
      const HostTensor& v = it->second;
      const std::vector<int64_t> want = ConcreteShape(t.shape, dims_);
      if (v.dtype != t.dtype || v.shape != want) {
        ThrowInputError("value for '{}' is {} [{}], expected {} [{}]", t.name,
                        DTypeName(v.dtype), fmt::join(v.shape, ", "), DTypeName(t.dtype),
                        fmt::join(want, ", "));
      }
      values_[static_cast<size_t>(id)] = v;
    }
    for (OpId op : StableTopologicalOrder(g_)) Execute(g_.op(op));
    TensorMap out;
    for (TensorId id : g_.outputs()) out[g_.tensor(id).name] = values_[static_cast<size_t>(id)];
    return out;
  }

 private:
  static const char* RoleName(const Tensor& t) { return t.role == Role::kInput ? "input" : "param"; }

  // A view (passes/strided_views.h) is gathered from its storage when first
  // read, and scattered into it right after its producer wrote it.
  const HostTensor& In(TensorId id) {
    HostTensor& t = values_[static_cast<size_t>(id)];
    const Tensor& tensor = g_.tensor(id);
    if (tensor.storage != kNone && t.bytes.empty()) {
      t = HostTensor(tensor.dtype, ConcreteShape(tensor.shape, dims_), Named(id));
      CopyRows(values_[static_cast<size_t>(tensor.storage)], tensor.storage_offset, t, 0, true);
    }
    return t;
  }
  HostTensor& Out(TensorId id) {
    HostTensor& t = values_[static_cast<size_t>(id)];
    t = HostTensor(g_.tensor(id).dtype, ConcreteShape(g_.tensor(id).shape, dims_), Named(id));
    return t;
  }
  std::string Named(TensorId id) const { return fmt::format("tensor '{}'", g_.tensor(id).name); }
  void ScatterViews(const Op& op) {
    for (TensorId out : op.outputs) {
      const Tensor& tensor = g_.tensor(out);
      if (tensor.storage == kNone) continue;
      HostTensor& base = values_[static_cast<size_t>(tensor.storage)];
      if (base.bytes.empty()) {
        base = HostTensor(g_.tensor(tensor.storage).dtype,
                          ConcreteShape(g_.tensor(tensor.storage).shape, dims_), Named(tensor.storage));
      }
      CopyRows(values_[static_cast<size_t>(out)], 0, base, tensor.storage_offset, false);
    }
  }
  // Copies the rows of the narrower of `wide` and `narrow` between them: the
  // narrow tensor's row r is wide's row r from column `wide_offset`.
  static void CopyRows(const HostTensor& src, int64_t src_offset, HostTensor& dst,
                       int64_t dst_offset, bool gather) {
    const HostTensor& narrow = gather ? dst : src;
    const HostTensor& wide = gather ? src : dst;
    const int64_t width = narrow.shape.back(), wide_width = wide.shape.back();
    const int64_t rows = width > 0 ? narrow.numel() / width : 0;
    const int64_t bytes = DTypeBytes(narrow.dtype);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(dst.bytes.data() + (r * (gather ? width : wide_width) + dst_offset) * bytes,
                  src.bytes.data() + (r * (gather ? wide_width : width) + src_offset) * bytes,
                  static_cast<size_t>(width * bytes));
    }
  }

  void Execute(const Op& op) {
    if (op.elided) return;  // its views carry the data
    ExecuteOp(op);
    ScatterViews(op);
  }

  void ExecuteOp(const Op& op) {
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
      case OpFamily::kGroupGemm:
        for (size_t m = 0; m < NumMembers(op); ++m) Gemm(op, GemmMemberOf(op, m));
        break;
      case OpFamily::kLayerNorm:
      case OpFamily::kGroupLayerNorm:
        for (size_t m = 0; m < NumMembers(op); ++m) {
          LayerNorm(LayerNormMemberOf(op, m), op.attrs.Eps(),
                    ActivationOf(op.type) == EwFunc::kSigmoid);
        }
        break;
      case OpFamily::kSplit: Split(op); break;
      case OpFamily::kConcatenate: Concatenate(op); break;
      case OpFamily::kElementwise: Elementwise(op); break;
      case OpFamily::kReshape: Out(op.outputs[0]).bytes = In(op.inputs[0]).bytes; break;
      case OpFamily::kOpaque: Opaque(op); break;
    }
  }

  void Opaque(const Op& op) {
    std::vector<const HostTensor*> in;
    for (TensorId t : op.inputs) in.push_back(&In(t));
    std::vector<HostTensor*> out;
    for (TensorId t : op.outputs) out.push_back(&Out(t));
    cpu::RunOnnxOp(op.name, *op.attrs.onnx, in, out);
  }

  void Gemm(const Op& op, const GemmMember& member) {
    const bool bias = member.bias != kNone;
    const HostTensor& a = In(member.a);
    const HostTensor& b = In(member.w);
    const int64_t k = a.shape.back();
    const int64_t n = b.shape[0];
    const int64_t rows = k > 0 ? a.numel() / k : Product(a.shape, 0, a.shape.size() - 1);
    if (rows > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
      ThrowInputError("op '{}': a GEMM of {} x {} x {} has a dim over 2^31 - 1, more than BLAS takes",
                      op.name, rows, n, k);
    }
    const std::vector<float> af = a.ToFloat(), bf = b.ToFloat();
    const std::vector<float> cf = bias ? In(member.bias).ToFloat() : std::vector<float>();
    std::vector<float> yf(static_cast<size_t>(rows * n));
    cpu::Gemm(af.data(), bf.data(), bias ? cf.data() : nullptr, yf.data(), rows, n, k,
              static_cast<float>(op.attrs.Alpha()), ActivationOf(op.type));
    Out(member.y).FromFloat(yf.data());
  }

  // With sigmoid_mul, y = x * sigmoid(layernorm(x)).
  void LayerNorm(const LayerNormMember& member, double eps, bool sigmoid_mul) {
    const auto [x, gamma, beta, y, normalized_shape] = member;
    const std::vector<int64_t>& normalized = *normalized_shape;
    const HostTensor& xv = In(x);
    const int64_t n = Product(normalized, 0, normalized.size());
    const int64_t rows = n > 0 ? xv.numel() / n : 0;
    const std::vector<float> xf = xv.ToFloat();
    const std::vector<float> gf = gamma != kNone ? In(gamma).ToFloat() : std::vector<float>();
    const std::vector<float> bf = beta != kNone ? In(beta).ToFloat() : std::vector<float>();
    std::vector<float> yf(xf.size());
    cpu::LayerNorm(xf.data(), gamma != kNone ? gf.data() : nullptr,
                   beta != kNone ? bf.data() : nullptr, yf.data(), rows, n,
                   static_cast<float>(eps), sigmoid_mul);
    Out(y).FromFloat(yf.data());
  }

  void Split(const Op& op) {
    const HostTensor& x = In(op.inputs[0]);
    const size_t axis = Axis(op.attrs.dim, x.shape.size());
    const int64_t outer = Product(x.shape, 0, axis);
    const int64_t inner = Product(x.shape, axis + 1, x.shape.size()) * DTypeBytes(x.dtype);
    int64_t offset = 0;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      HostTensor& y = Out(op.outputs[i]);
      const int64_t chunk = op.attrs.split_sizes[i] * inner;
      // An empty output's data() may be null: memcpy gets no null pointer.
      for (int64_t o = 0; chunk > 0 && o < outer; ++o) {
        std::memcpy(y.bytes.data() + o * chunk,
                    x.bytes.data() + o * x.shape[axis] * inner + offset, static_cast<size_t>(chunk));
      }
      offset += chunk;
    }
  }

  void Concatenate(const Op& op) {
    HostTensor& y = Out(op.outputs[0]);
    const size_t axis = Axis(op.attrs.dim, y.shape.size());
    const int64_t outer = Product(y.shape, 0, axis);
    const int64_t inner = Product(y.shape, axis + 1, y.shape.size()) * DTypeBytes(y.dtype);
    int64_t offset = 0;
    for (TensorId in : op.inputs) {
      const HostTensor& x = In(in);
      const int64_t chunk = x.shape[axis] * inner;
      for (int64_t o = 0; chunk > 0 && o < outer; ++o) {
        std::memcpy(y.bytes.data() + o * y.shape[axis] * inner + offset,
                    x.bytes.data() + o * chunk, static_cast<size_t>(chunk));
      }
      offset += chunk;
    }
  }

  void Elementwise(const Op& op) {
    HostTensor& y = Out(op.outputs[0]);
    const size_t rank = y.shape.size();
    // Per input: float values and broadcast strides over the output's index.
    std::vector<std::vector<float>> xs;
    std::vector<std::vector<int64_t>> strides;
    for (TensorId in : op.inputs) {
      const HostTensor& x = In(in);
      xs.push_back(x.ToFloat());
      std::vector<int64_t> s(rank, 0);
      int64_t stride = 1;
      for (size_t d = x.shape.size(); d-- > 0;) {
        const size_t od = rank - x.shape.size() + d;
        s[od] = x.shape[d] == 1 ? 0 : stride;
        stride *= x.shape[d];
      }
      strides.push_back(std::move(s));
    }
    const int64_t n = y.numel();
    std::vector<float> yf(static_cast<size_t>(n));
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0;
      for (size_t k = 0; k < xs.size(); ++k) {
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) off += index[d] * strides[k][d];
        const float v = xs[k][static_cast<size_t>(off)];
        acc = k == 0 ? (IsUnary(op.attrs.func) ? cpu::Apply(op.attrs.func, v) : v)
                     : cpu::Apply(op.attrs.func, acc, v);
      }
      yf[static_cast<size_t>(i)] = acc;
      for (size_t d = rank; d-- > 0;) {  // next index, last dim fastest
        if (++index[d] < y.shape[d]) break;
        index[d] = 0;
      }
    }
    y.FromFloat(yf.data());
  }

  const Graph& g_;
  const DimValues& dims_;
  std::vector<HostTensor> values_;
};

}  // namespace

HostTensor ParamValue(const Tensor& t, const DimValues& dims) {
  HostTensor v(t.dtype, ConcreteShape(t.shape, dims), fmt::format("param '{}'", t.name));
  // The importer checks sizes; a graph built by hand might not.
  if (!t.data || t.data->size() != v.bytes.size()) {
    ThrowInputError("param '{}' has {} bytes of data, expected {}", t.name,
                    t.data ? t.data->size() : 0, v.bytes.size());
  }
  v.bytes = *t.data;
  return v;
}

void CheckTensorSizes(const Graph& graph, const DimValues& dims) {
  int64_t total = 0;
  for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
    const Tensor& t = graph.tensor(id);
    if (!t.alive) continue;
    const std::string what = fmt::format("tensor '{}'", t.name);
    const int64_t bytes = ByteCountOf(ConcreteShape(t.shape, dims), DTypeBytes(t.dtype), what);
    CheckBudget(bytes, what);
    const std::optional<int64_t> sum = CheckedAdd(total, bytes);
    total = sum ? *sum : INT64_MAX;
  }
  CheckBudget(total, fmt::format("graph '{}' (all its tensors together)", graph.name()));
}

TensorMap RandomFeeds(const Graph& graph, const DimValues& dims, uint64_t seed) {
  CheckTensorSizes(graph, dims);
  std::vector<bool> is_gamma(static_cast<size_t>(graph.num_tensor_ids()), false);
  for (OpId id : graph.LiveOps()) {
    const Op& op = graph.op(id);
    if (!IsLayerNorm(op.type) && !IsGroupLayerNorm(op.type)) continue;
    for (size_t m = 0; m < NumMembers(op); ++m) {
      const TensorId gamma = LayerNormMemberOf(op, m).gamma;
      if (gamma != kNone) is_gamma[static_cast<size_t>(gamma)] = true;
    }
  }
  TensorMap feeds;
  for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
    const Tensor& t = graph.tensor(id);
    if (!t.alive || t.role == Role::kIntermediate) continue;
    if (t.data) {
      feeds[t.name] = ParamValue(t, dims);
      continue;
    }
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : t.name) h = (h ^ c) * 1099511628211ull;
    std::mt19937_64 rng(SplitMix(seed ^ SplitMix(h)));
    HostTensor v(t.dtype, ConcreteShape(t.shape, dims), 
                 fmt::format("{} '{}'", t.role == Role::kInput ? "input" : "param", t.name));
    const float low = is_gamma[static_cast<size_t>(id)] ? 0.5f : -1.0f;
    std::vector<float> values(static_cast<size_t>(v.numel()));
    for (float& x : values) {
      // 24 random bits -> [0, 1): the same on every platform.
      const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
      x = low + 2.0f * u * (is_gamma[static_cast<size_t>(id)] ? 0.5f : 1.0f);
    }
    v.FromFloat(values.data());
    feeds[t.name] = std::move(v);
  }
  return feeds;
}

TensorMap RunOnCpu(const Graph& graph, const TensorMap& feeds, const DimValues& dims) {
  return CpuRun(graph, dims).Run(feeds);
}

std::vector<HostTensor> RunOnCpuKeepAll(const Graph& graph, const TensorMap& feeds, const DimValues& dims) {
  CpuRun run(graph, dims);
  run.Run(feeds);
  return run.All();
}

}  // namespace hfuse
