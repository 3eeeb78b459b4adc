// Opaque ONNX operators on the CPU. See cpu_onnx_ops.h.
#include "cpu_onnx_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>

#include "cpu_kernels.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"

namespace hfuse::cpu {
namespace {

// A part of a shape whose tensor was counted whole (HostTensor): it fits.
int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  const std::optional<int64_t> p =
      ElementCount(std::span<const int64_t>(v.data() + begin, end - begin));
  HFUSE_CHECK(p.has_value());
  return *p;
}

class OnnxOp {
 public:
  OnnxOp(const std::string& name, const OnnxNode& node, const std::vector<const HostTensor*>& in,
         const std::vector<HostTensor*>& out)
      : name_(name), node_(node), in_(in), out_(out) {}

  void Run() {
    if (!node_.domain.empty() && node_.domain != "ai.onnx") Unsupported("");
    const std::string& type = node_.op_type;
    if (type == "Identity" || type == "Reshape" || type == "Flatten" || type == "Squeeze" ||
        type == "Unsqueeze") {
      // Same data, new shape (the output's, from the graph); the shape or
      // axes operand is a constant the op keeps, not an input here.
      Arity(1, 1);
      if (in_[0]->numel() != out_[0]->numel()) Unsupported("the sizes differ");
      out_[0]->bytes = in_[0]->bytes;
    } else if (type == "Transpose") {
      Arity(1, 1);
      Transpose();
    } else if (type == "MatMul") {
      Arity(2, 1);
      MatMul();
    } else if (type == "Softmax") {
      Arity(1, 1);
      Softmax();
    } else {
      Unsupported("");
    }
  }

 private:
  [[noreturn]] void Unsupported(const std::string& why) {
    ThrowInputError(
        "op '{}' is the ONNX operator {}{}{}, which hfuse keeps opaque and the CPU "
        "executor cannot run{}{}",
        name_, node_.domain, node_.domain.empty() ? "" : ".", node_.op_type,
        why.empty() ? "" : ": ", why);
  }
  void Arity(size_t inputs, size_t outputs) {
    if (in_.size() != inputs || out_.size() != outputs) {
      Unsupported(fmt::format("expected {} inputs and {} outputs, got {} and {}", inputs, outputs,
                              in_.size(), out_.size()));
    }
  }
  int64_t Int(const std::string& attr, int64_t fallback) const {
    auto it = node_.ints.find(attr);
    return it == node_.ints.end() || it->second.empty() ? fallback : it->second[0];
  }

  void Transpose() {
    const HostTensor& x = *in_[0];
    HostTensor& y = *out_[0];
    const size_t rank = x.shape.size();
    std::vector<int64_t> perm;
    if (auto it = node_.ints.find("perm"); it != node_.ints.end()) perm = it->second;
    if (perm.empty()) {
      for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    if (perm.size() != rank) Unsupported("perm does not match the input's rank");
    // A permutation of 0..rank-1: each index once, none out of range (an
    // index past the rank would read past the input's strides).
    std::vector<bool> seen(rank, false);
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) {
        Unsupported(fmt::format("perm [{}] is not a permutation of the input's {} dims",
                                fmt::join(perm, ", "), rank));
      }
      seen[static_cast<size_t>(p)] = true;
    }
    // The output's shape is the input's, permuted.
    if (y.shape.size() != rank) Unsupported("the output's rank is not the input's");
    for (size_t d = 0; d < rank; ++d) {
      if (y.shape[d] != x.shape[static_cast<size_t>(perm[d])]) {
        Unsupported("the output's shape is not the input's permuted by perm");
      }
    }
    // in_stride[d]: the input stride of output dim d.
    std::vector<int64_t> stride(rank, 1), in_stride(rank);
    for (size_t d = rank; d-- > 1;) stride[d - 1] = stride[d] * x.shape[d];
    for (size_t d = 0; d < rank; ++d) in_stride[d] = stride[static_cast<size_t>(perm[d])];
    const auto bytes = static_cast<size_t>(DTypeBytes(x.dtype));
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t src = 0;
      for (size_t d = 0; d < rank; ++d) src += index[d] * in_stride[d];
      std::memcpy(y.bytes.data() + static_cast<size_t>(i) * bytes,
                  x.bytes.data() + static_cast<size_t>(src) * bytes, bytes);
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < y.shape[d]) break;
        index[d] = 0;
      }
    }
  }

  // numpy.matmul: rank-1 operands are promoted and their dim dropped again,
  // the batch dims broadcast.
  void MatMul() {
    std::vector<int64_t> a = in_[0]->shape, b = in_[1]->shape;
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
    const std::optional<int64_t> batches = ElementCount(batch);
    const std::optional<int64_t> mn = CheckedMul(m, n);
    const std::optional<int64_t> total = batches && mn ? CheckedMul(*batches, *mn) : std::nullopt;
    if (!total || *total != out_[0]->numel()) {
      Unsupported("the output's shape does not match");
    }
    const std::vector<float> af = in_[0]->ToFloat(), bf = in_[1]->ToFloat();
    std::vector<float> yf(static_cast<size_t>(out_[0]->numel()));
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
      for (size_t d = batch.size(); d-- > 0;) {
        if (++index[d] < batch[d]) break;
        index[d] = 0;
      }
    }
    out_[0]->FromFloat(yf.data());
  }

  // Opset 13 normalises along one axis; earlier opsets flatten the input to
  // 2-D at the axis and normalise each row.
  void Softmax() {
    const HostTensor& x = *in_[0];
    const auto rank = static_cast<int64_t>(x.shape.size());
    int64_t axis = Int("axis", node_.opset >= 13 ? -1 : 1);
    if (axis < -rank || axis >= rank) Unsupported("axis is out of range");
    if (axis < 0) axis += rank;
    const auto ax = static_cast<size_t>(axis);
    const int64_t outer = Product(x.shape, 0, ax);
    const int64_t len = node_.opset >= 13 ? x.shape[ax] : Product(x.shape, ax, x.shape.size());
    const int64_t inner = node_.opset >= 13 ? Product(x.shape, ax + 1, x.shape.size()) : 1;
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
        for (int64_t j = 0; j < len; ++j) yf[static_cast<size_t>(base + j * inner)] /= sum;
      }
    }
    out_[0]->FromFloat(yf.data());
  }

  const std::string& name_;
  const OnnxNode& node_;
  const std::vector<const HostTensor*>& in_;
  const std::vector<HostTensor*>& out_;
};

}  // namespace

void RunOnnxOp(const std::string& op_name, const OnnxNode& node,
               const std::vector<const HostTensor*>& inputs,
               const std::vector<HostTensor*>& outputs) {
  OnnxOp(op_name, node, inputs, outputs).Run();
}

}  // namespace hfuse::cpu
