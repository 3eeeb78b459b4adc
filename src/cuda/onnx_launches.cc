// The CUDA backend's opaque ops: the ONNX operators the importer keeps whole
// (CudaExecutor::Impl, cuda_executor_impl.h). kNative below lists the ones
// with a kernel or a device copy, each planned by a function that takes the
// forms its kernel computes and declines the rest; everything else, and
// every declined form, runs on the host through the CPU executor's own
// operator (PlanOnHost). The shape semantics both executors share (the
// axis views, the reduced dims) are cpu_onnx_ops.h's.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cpu_onnx_ops.h"
#include "cuda_executor_impl.h"
#include "hfuse/support/error.h"
#include "kernels.h"

namespace hfuse {

void CudaExecutor::Impl::PlanOpaque(const Op& op) {
  using Planner = bool (Impl::*)(const Op&);
  static const std::map<std::string, Planner> kNative = {
      {"Identity", &Impl::PlanOnnxReshape},   {"Reshape", &Impl::PlanOnnxReshape},
      {"Flatten", &Impl::PlanOnnxReshape},    {"Squeeze", &Impl::PlanOnnxReshape},
      {"Unsqueeze", &Impl::PlanOnnxReshape},  {"Gather", &Impl::PlanGather},
      {"Softmax", &Impl::PlanSoftmax},        {"LogSoftmax", &Impl::PlanSoftmax},
      {"ReduceSum", &Impl::PlanReduce},       {"ReduceMean", &Impl::PlanReduce},
      {"ReduceMax", &Impl::PlanReduce},       {"ReduceMin", &Impl::PlanReduce},
      {"Pow", &Impl::PlanOnnxMath},           {"Max", &Impl::PlanOnnxMath},
      {"Min", &Impl::PlanOnnxMath},           {"Sqrt", &Impl::PlanOnnxMath},
      {"Exp", &Impl::PlanOnnxMath},           {"Log", &Impl::PlanOnnxMath},
      {"Neg", &Impl::PlanOnnxMath},           {"Abs", &Impl::PlanOnnxMath},
      {"Reciprocal", &Impl::PlanOnnxMath},    {"MatMul", &Impl::PlanBatchedMatMul}};
  const OnnxNode& node = *op.attrs.onnx;
  const bool default_domain = node.domain.empty() || node.domain == "ai.onnx";
  if (auto it = kNative.find(node.op_type);
      default_domain && op.outputs.size() == 1 && it != kNative.end() && (this->*it->second)(op)) {
    return;
  }
  PlanOnHost(op);
}

bool CudaExecutor::Impl::Plain(const Op& op, size_t inputs) const {
  const OnnxNode& node = *op.attrs.onnx;
  if (op.inputs.size() != inputs || g.tensor(op.outputs[0]).storage != kNone) return false;
  for (size_t k = 0; k < inputs; ++k) {
    if (g.tensor(op.inputs[k]).storage != kNone) return false;
    if (!node.input_slots.empty() &&
        (node.input_slots.size() <= k || node.input_slots[k] != static_cast<int32_t>(k))) {
      return false;
    }
  }
  return true;
}

// Same bytes, another shape: the data is input 0 (the shape or axes a constant or an input).
bool CudaExecutor::Impl::PlanOnnxReshape(const Op& op) {
  if (op.inputs.empty() || g.tensor(op.inputs[0]).storage != kNone ||
      g.tensor(op.outputs[0]).storage != kNone || Bytes(op.inputs[0]) != Bytes(op.outputs[0])) {
    return false;
  }
  PlanReshapeCopy(op);
  return true;
}

bool CudaExecutor::Impl::PlanGather(const Op& op) {
  if (!Plain(op, 2)) return false;
  const Tensor& data = g.tensor(op.inputs[0]);
  const Tensor& at = g.tensor(op.inputs[1]);
  const Tensor& y = g.tensor(op.outputs[0]);
  if (data.dtype != y.dtype || (at.dtype != DType::kInt64 && at.dtype != DType::kInt32)) return false;
  const std::optional<cpu::AxisView> v = cpu::GatherView(*op.attrs.onnx, ConcreteShape(data.shape, dims));
  const int64_t esize = DTypeBytes(y.dtype);
  const int64_t count = Bytes(op.inputs[1]) / DTypeBytes(at.dtype);
  if (!v || Bytes(op.outputs[0]) != v->outer * count * v->inner * esize) return false;
  descriptors.push_back(std::make_unique<cuda::DeviceBuffer>());
  descriptors.back()->Upload(std::vector<int>{0});
  int* bad = static_cast<int*>(descriptors.back()->ptr);
  index_checks.push_back({op.name, v->len, bad});
  const void* x = PlaceOf(op.inputs[0]).base;
  const void* index = PlaceOf(op.inputs[1]).base;
  void* out = PlaceOf(op.outputs[0]).base;
  const bool index32 = at.dtype == DType::kInt32;
  const auto [outer, len, inner] = *v;
  Add("gather kernel", [=](cudaStream_t s) {
    cuda::LaunchGather(x, index, index32, out, outer, len, count, inner * esize, bad, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

bool CudaExecutor::Impl::PlanSoftmax(const Op& op) {
  const Tensor& y = g.tensor(op.outputs[0]);
  if (!Plain(op, 1) || !IsFloat(y.dtype) || g.tensor(op.inputs[0]).dtype != y.dtype) return false;
  const std::optional<cpu::AxisView> v = cpu::SoftmaxView(*op.attrs.onnx, ConcreteShape(y.shape, dims));
  if (!v) return false;
  const void* x = PlaceOf(op.inputs[0]).base;
  void* out = PlaceOf(op.outputs[0]).base;
  const int dtype = cuda::KernelType(y.dtype);
  const bool log = op.attrs.onnx->op_type == "LogSoftmax";
  const auto [outer, len, inner] = *v;
  Add(fmt::format("{} kernel", op.attrs.onnx->op_type), [=](cudaStream_t s) {
    cuda::LaunchSoftmax(dtype, x, out, outer, len, inner, log, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

// Axes from the attribute or a constant the node keeps; axes computed at run time go to the host.
bool CudaExecutor::Impl::PlanReduce(const Op& op) {
  static const std::map<std::string, cuda::ReduceKind> kKinds = {
      {"ReduceSum", cuda::kReduceSum}, {"ReduceMean", cuda::kReduceMean},
      {"ReduceMax", cuda::kReduceMax}, {"ReduceMin", cuda::kReduceMin}};
  const OnnxNode& node = *op.attrs.onnx;
  const Tensor& y = g.tensor(op.outputs[0]);
  if (!Plain(op, 1) || !IsFloat(y.dtype) || g.tensor(op.inputs[0]).dtype != y.dtype) return false;
  const std::vector<int64_t> xs = ConcreteShape(g.tensor(op.inputs[0]).shape, dims);
  const int32_t axes_slot = node.input_slots.size() >= 2 ? node.input_slots[1] : kNone;
  if (xs.size() > 6 || (axes_slot != kNone && axes_slot > -2)) return false;
  std::optional<std::vector<int64_t>> axes;
  if (axes_slot != kNone) {
    axes = cpu::ConstantInts(node, axes_slot);
    if (!axes) return false;
  }
  const std::optional<std::vector<bool>> reduced =
      cpu::ReducedDims(node, xs.size(), axes ? &*axes : nullptr);
  if (!reduced) return false;
  cuda::ReduceArgs a{};
  a.x = PlaceOf(op.inputs[0]).base;
  a.y = PlaceOf(op.outputs[0]).base;
  a.rank = static_cast<int32_t>(xs.size());
  a.kind = kKinds.at(node.op_type);
  a.out_numel = 1;
  a.count = 1;
  for (size_t d = 0; d < xs.size(); ++d) {
    a.shape[d] = xs[d];
    a.reduced[d] = (*reduced)[d] ? 1 : 0;
    ((*reduced)[d] ? a.count : a.out_numel) *= xs[d];
  }
  if (a.out_numel * DTypeBytes(y.dtype) != Bytes(op.outputs[0])) return false;
  const int dtype = cuda::KernelType(y.dtype);
  Add(fmt::format("{} kernel", node.op_type), [=](cudaStream_t s) {
    cuda::LaunchReduce(dtype, a, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

// Float math with numpy broadcasting that the IR has no EwFunc for.
bool CudaExecutor::Impl::PlanOnnxMath(const Op& op) {
  static const std::map<std::string, std::pair<cuda::OnnxMath, size_t>> kMath = {
      {"Pow", {cuda::kPow, 2}},   {"Max", {cuda::kMax, 2}}, {"Min", {cuda::kMin, 2}},
      {"Sqrt", {cuda::kSqrt, 1}}, {"Exp", {cuda::kExp, 1}}, {"Log", {cuda::kLog, 1}},
      {"Neg", {cuda::kNeg, 1}},   {"Abs", {cuda::kAbs, 1}}, {"Reciprocal", {cuda::kReciprocal, 1}}};
  const auto [func, inputs] = kMath.at(op.attrs.onnx->op_type);
  const Tensor& y = g.tensor(op.outputs[0]);
  if (!Plain(op, inputs) || !IsFloat(y.dtype) || y.shape.size() > 6) return false;
  for (TensorId in : op.inputs) {
    if (g.tensor(in).dtype != y.dtype || g.tensor(in).shape.size() > y.shape.size()) return false;
  }
  cuda::ElementwiseArgs args = BroadcastArgs(op);
  args.func = func;
  const int dtype = cuda::KernelType(y.dtype);
  Add(fmt::format("{} kernel", op.attrs.onnx->op_type), [=](cudaStream_t s) {
    cuda::LaunchOnnxMath(dtype, args, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

// A batched MatMul whose batch dims broadcast whole (each operand's batch is
// the output's or a single matrix): one strided-batched cuBLAS GEMM,
// row-major C = A B computed as C^T = B^T A^T.
bool CudaExecutor::Impl::PlanBatchedMatMul(const Op& op) {
  const Tensor& y = g.tensor(op.outputs[0]);
  if (!Plain(op, 2) || !IsFloat(y.dtype) || g.tensor(op.inputs[0]).dtype != y.dtype ||
      g.tensor(op.inputs[1]).dtype != y.dtype) {
    return false;
  }
  const std::vector<int64_t> as = ConcreteShape(g.tensor(op.inputs[0]).shape, dims);
  const std::vector<int64_t> bs = ConcreteShape(g.tensor(op.inputs[1]).shape, dims);
  const std::vector<int64_t> ys = ConcreteShape(y.shape, dims);
  if (as.size() < 2 || bs.size() < 2 || ys.size() != std::max(as.size(), bs.size())) return false;
  auto batch = [](const std::vector<int64_t>& v) {
    int64_t n = 1;
    for (size_t d = 0; d + 2 < v.size(); ++d) n *= v[d];
    return n;
  };
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back(), batches = batch(ys);
  const int64_t ba = batch(as), bb = batch(bs);
  if (bs[bs.size() - 2] != k || ys[ys.size() - 2] != m || ys.back() != n || batches <= 0 ||
      (ba != batches && ba != 1) || (bb != batches && bb != 1) || m <= 0 || n <= 0 || k <= 0 ||
      m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batches > INT32_MAX) {
    return false;
  }
  const void* a = PlaceOf(op.inputs[0]).base;
  const void* b = PlaceOf(op.inputs[1]).base;
  void* c = PlaceOf(op.outputs[0]).base;
  const long long stride_a = ba == 1 ? 0 : m * k, stride_b = bb == 1 ? 0 : k * n, stride_c = m * n;
  const cudaDataType_t t = cuda::CudaType(y.dtype);
  cublasHandle_t handle = blas;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int count = static_cast<int>(batches);
  Add("cublasGemmStridedBatchedEx", [=](cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    HFUSE_CUBLAS(cublasSetStream(handle, s));
    HFUSE_CUBLAS(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, mi, ki, &one, b, t, ni,
                                            stride_b, a, t, ki, stride_a, &zero, c, t, ni, stride_c,
                                            count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
  return true;
}

void CudaExecutor::Impl::CopyPlace(TensorId t, void* host, bool to_host, cudaStream_t s) const {
  const std::vector<int64_t> shape = ConcreteShape(g.tensor(t).shape, dims);
  const int64_t esize = DTypeBytes(g.tensor(t).dtype);
  const int64_t bytes = Bytes(t);
  if (bytes == 0) return;
  const cuda::Place p = PlaceOf(t);
  const int64_t last = shape.empty() ? 1 : shape.back();
  const auto width = static_cast<size_t>(last * esize);
  const auto pitch = static_cast<size_t>(p.row_stride * esize);
  const auto rows = static_cast<size_t>(bytes / (last * esize));
  if (to_host) {
    HFUSE_CUDA(cudaMemcpy2DAsync(host, width, p.base, pitch, width, rows, cudaMemcpyDeviceToHost, s));
  } else {
    HFUSE_CUDA(cudaMemcpy2DAsync(p.base, pitch, host, width, width, rows, cudaMemcpyHostToDevice, s));
  }
}

namespace {
// The host function of a HostOp: staged inputs in, the CPU's operator, outputs staged out.
void CUDART_CB RunHostOp(void* data) {
  auto* h = static_cast<cuda::HostOp*>(data);
  try {
    std::vector<const HostTensor*> in;
    std::vector<HostTensor*> out;
    for (size_t k = 0; k < h->in.size(); ++k) {
      if (!h->in[k].bytes.empty()) std::memcpy(h->in[k].bytes.data(), h->in_staged[k]->ptr, h->in[k].bytes.size());
      in.push_back(&h->in[k]);
    }
    for (HostTensor& t : h->out) out.push_back(&t);
    cpu::RunOnnxOp(h->name, *h->node, in, out);
    for (size_t k = 0; k < h->out.size(); ++k) {
      if (!h->out[k].bytes.empty()) std::memcpy(h->out_staged[k]->ptr, h->out[k].bytes.data(), h->out[k].bytes.size());
    }
  } catch (const std::exception& e) {
    if (h->error.empty()) h->error = e.what();
  }
}
}  // namespace

void CudaExecutor::Impl::PlanOnHost(const Op& op) {
  auto h = std::make_unique<cuda::HostOp>();
  h->name = op.name;
  h->node = op.attrs.onnx;
  for (TensorId t : op.inputs) {
    h->in.emplace_back(g.tensor(t).dtype, ConcreteShape(g.tensor(t).shape, dims), g.tensor(t).name);
    h->in_staged.push_back(std::make_unique<cuda::PinnedBuffer>(Bytes(t)));
  }
  for (TensorId t : op.outputs) {
    h->out.emplace_back(g.tensor(t).dtype, ConcreteShape(g.tensor(t).shape, dims), g.tensor(t).name);
    h->out_staged.push_back(std::make_unique<cuda::PinnedBuffer>(Bytes(t)));
  }
  cuda::HostOp* raw = h.get();
  host_ops.push_back(std::move(h));
  const std::vector<TensorId> ins = op.inputs, outs = op.outputs;
  Add(fmt::format("on the host: ONNX {}", op.attrs.onnx->op_type), [this, raw, ins, outs](cudaStream_t s) {
    for (size_t k = 0; k < ins.size(); ++k) CopyPlace(ins[k], raw->in_staged[k]->ptr, true, s);
    HFUSE_CUDA(cudaLaunchHostFunc(s, RunHostOp, raw));
    for (size_t k = 0; k < outs.size(); ++k) CopyPlace(outs[k], raw->out_staged[k]->ptr, false, s);
  });
}

void CudaExecutor::Impl::CheckHostOps() {
  for (const IndexCheck& c : index_checks) {
    int bad = 0;
    HFUSE_CUDA(cudaMemcpy(&bad, c.bad, sizeof(int), cudaMemcpyDeviceToHost));
    if (bad) {
      HFUSE_CUDA(cudaMemset(c.bad, 0, sizeof(int)));
      ThrowInputError("op '{}' (ONNX Gather): an index is out of range for a dim of {}", c.op, c.len);
    }
  }
  for (const auto& h : host_ops) {
    if (!h->error.empty()) {
      const std::string error = std::move(h->error);
      h->error.clear();
      ThrowInputError("{}", error);
    }
  }
}

}  // namespace hfuse
