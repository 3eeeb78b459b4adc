// The CUDA backend's opaque ops: the ONNX operators the importer keeps whole
// (CudaExecutor::Impl, cuda_executor_impl.h). Each operator's planner is the
// one onnx_ops.def names in its Cuda column (PlanOnnx<Cuda>); a planner
// takes the forms its kernels compute and declines the rest, saying why,
// and a declined op, or an operator whose column says Host, runs on the host
// through the CPU executor's own kernel (PlanOnHost), named in the plan's
// stats and labelled "on the host" in the profile.
//
// Operands are read through the view plan's layouts (view_plan.h), so a
// transposed, sliced or broadcast operand, or one cast on load, costs no
// launch of its own; ops that only make views never reach these planners
// unless a reader needed them copied (PlanViewCopy). Values the plan knows
// (plan_constants.h: shapes, axes, a BatchNormalization's statistics) are
// read at plan time.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpu_onnx_ops.h"
#include "cuda_executor_impl.h"
#include "fused_elementwise.h"
#include "grouped_sgemm.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"
#include "kernels.h"
#include "onnx_kernels.h"

namespace hfuse {
namespace {

int64_t AttrInt(const OnnxNode& node, const std::string& name, int64_t fallback) {
  auto it = node.ints.find(name);
  return it == node.ints.end() || it->second.empty() ? fallback : it->second[0];
}
float AttrFloat(const OnnxNode& node, const std::string& name, double fallback) {
  auto it = node.floats.find(name);
  return static_cast<float>(it == node.floats.end() || it->second.empty() ? fallback : it->second[0]);
}
std::optional<size_t> AxisIn(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}
int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d) p *= v[d];
  return p;
}

// Drops dims of one element and merges neighbours that every operand walks
// contiguously, so that the kernel decodes as few dims as it can (a
// contiguous elementwise op runs with rank 1).
void Coalesce(cuda::OnnxElementwiseArgs& a) {
  struct Dim {
    int64_t size;
    int64_t stride[4];
  };
  std::vector<Dim> dims;
  for (int d = 0; d < a.rank; ++d) {
    if (a.shape[d] == 1) continue;
    Dim dim{a.shape[d], {a.out_strides[d], 0, 0, 0}};
    for (int k = 0; k < a.num_inputs; ++k) dim.stride[k + 1] = a.in[k].strides[d];
    if (!dims.empty()) {
      Dim& outer = dims.back();
      bool merge = true;
      for (int k = 0; k <= a.num_inputs; ++k) merge = merge && outer.stride[k] == dim.stride[k] * dim.size;
      if (merge) {
        outer.size *= dim.size;
        for (int k = 0; k <= a.num_inputs; ++k) outer.stride[k] = dim.stride[k];
        continue;
      }
    }
    dims.push_back(dim);
  }
  if (dims.empty()) dims.push_back({1, {0, 0, 0, 0}});
  a.rank = static_cast<int32_t>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    a.shape[d] = dims[d].size;
    a.out_strides[d] = dims[d].stride[0];
    for (int k = 0; k < a.num_inputs; ++k) a.in[k].strides[d] = dims[d].stride[k + 1];
  }
  cuda::ClassifyElementwise(a);
}

bool IntegerType(DType d) { return !IsFloat(d); }

}  // namespace

void CudaExecutor::Impl::PlanOpaque(const Op& op) {
  using Planner = bool (Impl::*)(const Op&, std::string&);
  static const std::map<std::string_view, Planner> kPlanners = {
#define HFUSE_ONNX_OP(Name, Shape, Fold, Cpu, Fast, Cuda) {#Name, &Impl::PlanOnnx##Cuda},
#include "hfuse/ir/onnx_ops.def"
#undef HFUSE_ONNX_OP
  };
  const OnnxNode& node = *op.attrs.onnx;
  std::string why;
  auto it = kPlanners.find(node.op_type);
  if (!node.domain.empty() && node.domain != "ai.onnx") {
    why = fmt::format("domain '{}'", node.domain);
  } else if (it == kPlanners.end()) {
    why = "not in onnx_ops.def";
  } else if ((this->*it->second)(op, why)) {
    return;
  }
  PlanOnHost(op, why);
}

TensorId CudaExecutor::Impl::NodeInput(const Op& op, size_t slot) const {
  const OnnxNode& node = *op.attrs.onnx;
  const int32_t s = node.input_slots.empty() ? static_cast<int32_t>(slot)
                    : slot < node.input_slots.size() ? node.input_slots[slot]
                                                     : kNone;
  return s >= 0 && static_cast<size_t>(s) < op.inputs.size() ? op.inputs[static_cast<size_t>(s)] : kNone;
}

std::optional<std::vector<int64_t>> CudaExecutor::Impl::KnownInts(const Op& op, size_t slot) const {
  std::vector<const HostTensor*> known;
  for (TensorId t : op.inputs) {
    auto it = folded.values.find(t);
    known.push_back(it == folded.values.end() ? nullptr : &it->second);
  }
  return cpu::KnownInts(*op.attrs.onnx, slot, known);
}

std::optional<std::vector<float>> CudaExecutor::Impl::KnownFloats(const Op& op, size_t slot) const {
  const OnnxNode& node = *op.attrs.onnx;
  const HostTensor* t = nullptr;
  HostTensor constant;
  const int32_t s = node.input_slots.empty() ? static_cast<int32_t>(slot)
                    : slot < node.input_slots.size() ? node.input_slots[slot]
                                                     : kNone;
  if (s <= -2) {
    const OnnxNode::Value& v = node.constant_values[static_cast<size_t>(-2 - s)];
    constant = HostTensor(v.dtype, v.dims);
    if (constant.bytes.size() != v.data.size()) return std::nullopt;
    constant.bytes = v.data;
    t = &constant;
  } else if (s >= 0 && static_cast<size_t>(s) < op.inputs.size()) {
    auto it = folded.values.find(op.inputs[static_cast<size_t>(s)]);
    if (it == folded.values.end()) return std::nullopt;
    t = &it->second;
  } else {
    return std::nullopt;
  }
  std::vector<float> out;
  for (int64_t i = 0; i < t->numel(); ++i) {
    out.push_back(IsFloat(t->dtype) ? t->Get(i) : static_cast<float>(t->GetInt(i)));
  }
  return out;
}

cuda::OnnxElementwiseArgs CudaExecutor::Impl::CopyArgs(const cuda::StridedOperand& src, void* dst,
                                                        const std::vector<int64_t>& dst_strides, DType dst_type,
                                                        const std::vector<int64_t>& shape) {
  cuda::OnnxElementwiseArgs a{};
  a.in[0] = src;
  a.num_inputs = 1;
  a.func = cuda::kCopy;
  a.out = dst;
  a.out_type = static_cast<int32_t>(dst_type);
  a.integer = IntegerType(dst_type) ? 1 : 0;
  a.rank = static_cast<int32_t>(shape.size());
  a.numel = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    a.shape[d] = shape[d];
    a.out_strides[d] = dst_strides[d];
    a.numel *= shape[d];
  }
  return a;
}

void CudaExecutor::Impl::PlanBatch(std::vector<cuda::OnnxElementwiseArgs> ops, const std::string& what,
                                   const std::string& note, const std::string& apart) {
  const std::string tail = note.empty() ? "" : "; " + note;
  std::erase_if(ops, [](const cuda::OnnxElementwiseArgs& a) { return a.numel == 0; });
  if (ops.empty()) return;
  for (cuda::OnnxElementwiseArgs& a : ops) Coalesce(a);
  if (ops.size() == 1) {
    const cuda::OnnxElementwiseArgs a = ops[0];
    Add(what + tail, [a](cudaStream_t s) {
      cuda::LaunchOnnxElementwise(a, s);
      HFUSE_LAUNCHED();
    }, apart);
    return;
  }
  int64_t max_numel = 0;
  bool narrow = true;
  for (const cuda::OnnxElementwiseArgs& a : ops) {
    max_numel = std::max(max_numel, a.numel);
    narrow = narrow && a.narrow;
  }
  const cuda::OnnxElementwiseArgs* args = Device(ops);
  const int count = static_cast<int>(ops.size());
  Add(fmt::format("{}, {} parts{}", what, count, tail), [=](cudaStream_t s) {
    cuda::LaunchOnnxElementwiseBatch(args, count, max_numel, narrow, s);
    HFUSE_LAUNCHED();
  }, apart);
}

void CudaExecutor::Impl::PlanElementwiseTo(cuda::OnnxElementwiseArgs a, TensorId y, const std::string& what) {
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  HFUSE_CHECK(ys.size() <= cuda::kMaxOnnxRank);
  a.out = PlaceOf(y).base;
  a.out_type = static_cast<int32_t>(g.tensor(y).dtype);
  a.rank = static_cast<int32_t>(ys.size());
  a.numel = 1;
  // Through y's layout: its own buffer, or its slot in a concatenate
  // written in place (view_plan.h).
  const std::vector<int64_t>& os = views.layout[static_cast<size_t>(y)].strides;
  HFUSE_CHECK(views.layout[static_cast<size_t>(y)].root_dtype == g.tensor(y).dtype);
  for (size_t d = 0; d < ys.size(); ++d) {
    a.shape[d] = ys[d];
    a.out_strides[d] = os[d];
    a.numel *= ys[d];
  }
  if (ChainElementwise(a, y, what)) return;
  PlanBatch({a}, what, "", "elementwise alone: " + ApartWhy(g.tensor(y).producer, y));
}

namespace {

constexpr int32_t kF32 = static_cast<int32_t>(DType::kFloat32);

// The bytes an operand reads over `shape`: [lowest, highest element] of its strides.
std::pair<const char*, const char*> SpanOf(const cuda::StridedOperand& o, const int64_t* shape, int rank,
                                           int64_t esize) {
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < rank; ++d) {
    const int64_t reach = o.strides[d] * (shape[d] - 1);
    (reach < 0 ? lo : hi) += reach;
  }
  const char* p = static_cast<const char*>(o.ptr);
  return {p + lo * esize, p + (hi + 1) * esize};
}

bool Fits32(int64_t v) { return v >= 0 && v < (int64_t{1} << 31); }

// Whether `o` reads, over `shape`, the elements laid out at `ptr` with
// `strides` one for one (a dim of extent 1 may have any stride).
bool SameElements(const cuda::StridedOperand& o, const void* ptr, const int64_t* strides, const int64_t* shape,
                  int rank) {
  if (o.ptr != ptr) return false;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] != 1 && o.strides[d] != strides[d]) return false;
  }
  return true;
}

// The input register of `f` that reads `o` (one per distinct operand),
// added if `o` is new; -1 when every register is taken.
int InputRegister(cuda::FusedElementwiseArgs& f, const cuda::StridedOperand& o) {
  for (int j = 0; j < f.num_inputs; ++j) {
    if (SameElements(f.in[j], o.ptr, o.strides, f.shape, f.rank)) return j;
  }
  if (f.num_inputs == cuda::kMaxFusedInputs) return -1;
  f.in[f.num_inputs] = o;
  return f.num_inputs++;
}

}  // namespace

bool CudaExecutor::Impl::OnlyReadBy(TensorId t, const Op& reader) const {
  if (g.IsGraphOutput(t)) return false;
  for (OpId u : g.tensor(t).users) {
    const Op& op = g.op(u);
    if (&op == &reader) continue;
    if (op.elided || !views.view_op[static_cast<size_t>(u)]) return false;
    for (TensorId out : op.outputs) {
      if (!OnlyReadBy(out, reader)) return false;
    }
  }
  return true;
}

bool CudaExecutor::Impl::ChainElementwise(const cuda::OnnxElementwiseArgs& a, TensorId y, const std::string& what) {
  bool f32 = !a.integer && a.out_type == kF32 && a.numel > 0 && a.num_inputs >= 1 && a.num_inputs <= 3 &&
             Fits32(a.numel) && cuda::FusableFunc(a.func);
  for (int k = 0; k < a.num_inputs; ++k) {
    f32 = f32 && a.in[k].type == kF32 && a.in[k].as == kF32;
    const auto [lo, hi] = SpanOf(a.in[k], a.shape, a.rank, 4);
    f32 = f32 && Fits32((hi - lo) / 4);
  }
  if (!f32 || !options.elementwise_chains) return false;
  // Where the output lies (its own buffer, or its slot in a concatenate).
  cuda::StridedOperand written{};
  written.ptr = a.out;
  for (int d = 0; d < a.rank; ++d) written.strides[d] = a.out_strides[d];
  const std::pair<const char*, const char*> out_span = SpanOf(written, a.shape, a.rank, 4);
  if (!Fits32((out_span.second - out_span.first) / 4)) return false;
  // Joins the chain: the operands that are the chain's result read its
  // last register, the others the chain's inputs (one register per
  // distinct operand).
  if (chain) {
    cuda::FusedElementwiseArgs f = chain->fused;
    bool same_shape = f.rank == a.rank && current_op && OnlyReadBy(chain->y, *current_op);
    for (int d = 0; same_shape && d < a.rank; ++d) same_shape = f.shape[d] == a.shape[d];
    bool reads = false, fits = same_shape && f.num_steps < cuda::kMaxFusedSteps;
    cuda::FusedStep step{a.func, {0, 0, 0}, a.alpha, a.beta};
    for (int k = 0; fits && k < a.num_inputs; ++k) {
      const cuda::StridedOperand& o = a.in[k];
      if (SameElements(o, f.out, f.out_strides, a.shape, a.rank)) {
        reads = true;
        step.arg[k] = static_cast<int8_t>(cuda::kMaxFusedInputs + f.num_steps - 1);
        continue;
      }
      // Any other read of the chain's result (a slice of it, say) would
      // find it unwritten: such an op starts a chain of its own.
      const auto [lo, hi] = SpanOf(o, a.shape, a.rank, 4);
      cuda::StridedOperand result{};
      result.ptr = f.out;
      for (int d = 0; d < f.rank; ++d) result.strides[d] = f.out_strides[d];
      const auto [rlo, rhi] = SpanOf(result, f.shape, f.rank, 4);
      if (lo < rhi && rlo < hi) {
        fits = false;
        break;
      }
      const int at = InputRegister(f, o);
      fits = at >= 0;
      step.arg[k] = static_cast<int8_t>(at);
    }
    // The fused kernel reads every input while it writes the output: the
    // output may not lie on any (the memory plan reuses a buffer once its
    // last reader has run, which inside a chain has not), unless it is that
    // input element for element (a thread reads element e, then writes it).
    for (int j = 0; fits && reads && j < f.num_inputs; ++j) {
      const bool in_place = SameElements(f.in[j], a.out, a.out_strides, a.shape, a.rank);
      const auto [lo, hi] = SpanOf(f.in[j], f.shape, f.rank, 4);
      fits = in_place || !(lo < out_span.second && out_span.first < hi);
    }
    if (fits && reads) {
      for (int k = a.num_inputs; k < 3; ++k) step.arg[k] = step.arg[0];
      f.steps[f.num_steps++] = step;
      f.out = a.out;  // the last op's output, where it lies
      for (int d = 0; d < a.rank; ++d) f.out_strides[d] = a.out_strides[d];
      chain->fused = f;
      chain->y = y;
      chain->ops.push_back(current);
      chain->bytes += current_bytes;
      return true;
    }
    FlushChain();
  }
  PendingChain c;
  c.first = a;
  c.first_what = what;
  c.y = y;
  c.ops = {current};
  c.first_op = g.tensor(y).producer;
  c.bytes = current_bytes;
  cuda::FusedElementwiseArgs& f = c.fused;
  f = cuda::FusedElementwiseArgs{};
  f.rank = a.rank;
  f.numel = a.numel;
  for (int d = 0; d < a.rank; ++d) {
    f.shape[d] = a.shape[d];
    f.out_strides[d] = a.out_strides[d];
  }
  f.out = a.out;
  cuda::FusedStep step{a.func, {0, 0, 0}, a.alpha, a.beta};
  for (int k = 0; k < a.num_inputs; ++k) {
    step.arg[k] = static_cast<int8_t>(InputRegister(f, a.in[k]));  // a.num_inputs <= 3 registers: room
  }
  for (int k = a.num_inputs; k < 3; ++k) step.arg[k] = step.arg[0];
  f.steps[f.num_steps++] = step;
  FlushGathers();
  chain = std::move(c);
  return true;
}

void CudaExecutor::Impl::FlushChain() {
  if (!chain) return;
  FlushRegions();  // planned before the chain's ops
  PendingChain c = std::move(*chain);
  chain.reset();
  const std::string now = current;
  const double now_bytes = current_bytes;
  current = c.ops.front();
  current_bytes = c.bytes;
  const std::string apart = "elementwise alone: " + ApartWhy(c.first_op, c.y);
  if (c.fused.num_steps == 1) {
    PlanBatch({c.first}, c.first_what, "", apart);
  } else {
    const cuda::FusedElementwiseArgs f = c.fused;
    const cudaKernel_t kernel = cuda::FusedElementwiseKernel(f);  // NVRTC, once per chain source
    AddLaunch(fmt::format("{} (fused elementwise kernel, {} ops: {} to {})", c.ops.front(), c.ops.size(),
                          c.ops.front(), c.ops.back()),
              c.bytes, [kernel, f](cudaStream_t s) { cuda::LaunchFusedElementwise(kernel, f, s); }, apart);
  }
  current = now;
  current_bytes = now_bytes;
}

void CudaExecutor::Impl::PlanPartCopies(const std::vector<TensorId>& parts, TensorId whole, size_t axis,
                                        bool split, const std::string& what) {
  if (!split && current_op && ConcatIntoGathers(*current_op, parts, whole, axis)) return;
  const std::vector<int64_t>& ws = views.shape[static_cast<size_t>(whole)];
  const cuda::Layout& wl = views.layout[static_cast<size_t>(whole)];
  const DType dtype = g.tensor(whole).dtype;
  std::vector<cuda::OnnxElementwiseArgs> ops;
  int64_t at = 0;
  const OpId concat = split ? kNone : g.tensor(whole).producer;
  const size_t in_slot = concat == kNone ? 0 : views.in_slot[static_cast<size_t>(concat)].size();
  for (size_t index = 0; index < parts.size(); ++index) {
    const TensorId part = parts[index];
    const std::vector<int64_t>& ps = views.shape[static_cast<size_t>(part)];
    // The part's slab of the whole, as a layout over the part's shape.
    cuda::Layout slab = wl;
    slab.offset += at * wl.strides[axis];
    if (concat != kNone && views.InSlot(concat, index)) {
      at += ps[axis];  // its producer wrote it there
      continue;
    }
    if (split) {
      ops.push_back(CopyArgs(Operand(part, slab, ps, ps), PlaceOf(part).base, cuda::RowMajorStrides(ps),
                             g.tensor(part).dtype, ps));
    } else {
      const cuda::StridedOperand dst = Operand(whole, slab, ps, ps);
      std::vector<int64_t> dst_strides(dst.strides, dst.strides + ps.size());
      ops.push_back(CopyArgs(Operand(part, ps), const_cast<void*>(dst.ptr), dst_strides, dtype, ps));
    }
    at += ps[axis];
  }
  HFUSE_CHECK(at == ws[axis]);
  // A concatenate that copies its parts says why they could not be written
  // in place (view_plan.h), so that the profile names the reason.
  const std::string& why = concat == kNone ? std::string() : views.copied_why[static_cast<size_t>(concat)];
  PlanBatch(std::move(ops), what,
            why.empty()       ? ""
            : in_slot == 0 ? "not in place: " + why
                           : fmt::format("{} of {} parts in place, the others copied: {}", in_slot, parts.size(), why),
            split ? "moves data: a Split's parts its readers could not read in place"
                  : "moves data: a concatenate's parts, copied" + (why.empty() ? std::string() : " (" + why + ")"));
}

// A view op its readers could not read in place: each output's view, copied.
void CudaExecutor::Impl::PlanViewCopy(const Op& op) {
  std::vector<cuda::OnnxElementwiseArgs> copies;
  for (TensorId out : op.outputs) {
    const std::optional<cuda::Layout>& view = views.as_view[static_cast<size_t>(out)];
    const std::vector<int64_t>& shape = views.shape[static_cast<size_t>(out)];
    void* dst = PlaceOf(out).base;
    if (view) {
      copies.push_back(CopyArgs(Operand(out, *view, shape, shape), dst, cuda::RowMajorStrides(shape),
                                g.tensor(out).dtype, shape));
    } else {
      // A reshape its input's strides do not allow as a view: the elements
      // in row-major order of the input's shape are the output's.
      const TensorId in = op.inputs[0];
      const std::vector<int64_t>& from = views.shape[static_cast<size_t>(in)];
      HFUSE_CHECK(Bytes(in) == Bytes(out));
      copies.push_back(CopyArgs(Operand(in, from), dst, cuda::RowMajorStrides(from), g.tensor(out).dtype, from));
    }
  }
  PlanBatch(std::move(copies), "copy kernel", "", "moves data: a view its readers could not read in place");
}

bool CudaExecutor::Impl::PlanOnnxView(const Op& op, std::string& why) {
  if (op.outputs.size() != 1 || NodeInput(op, 0) == kNone || Bytes(NodeInput(op, 0)) != Bytes(op.outputs[0])) {
    why = "its output is not its input's elements";
    return false;
  }
  PlanViewCopy(op);
  return true;
}

bool CudaExecutor::Impl::PlanOnnxCopy(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const std::string& type = node.op_type;
  const TensorId x = NodeInput(op, 0);
  if (x == kNone) {
    why = "no data input";
    return false;
  }
  const std::vector<int64_t>& xs = views.shape[static_cast<size_t>(x)];
  if (type == "Transpose" || type == "Slice" || type == "Expand" || type == "Split") {
    for (TensorId out : op.outputs) {
      if (!views.as_view[static_cast<size_t>(out)]) {
        why = "its starts, ends, axes or steps are not known when the plan is made";
        return false;
      }
    }
    PlanViewCopy(op);
    return true;
  }
  const TensorId y = op.outputs[0];
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  if (type == "Tile") {
    // out[.., r*n + i, ..] = x[.., i, ..]: each dim split into (repeat, n),
    // the repeat read with stride 0.
    if (xs.size() != ys.size() || 2 * xs.size() > cuda::kMaxOnnxRank) {
      why = "rank above 4";
      return false;
    }
    const cuda::StridedOperand in = Operand(x, xs);
    cuda::StridedOperand src = in;
    std::vector<int64_t> shape;
    for (size_t d = 0; d < xs.size(); ++d) {
      if (xs[d] == 0 || ys[d] % xs[d] != 0) {
        why = "the output is no multiple of the input";
        return false;
      }
      shape.push_back(ys[d] / xs[d]);
      shape.push_back(xs[d]);
      src.strides[2 * d] = 0;
      src.strides[2 * d + 1] = in.strides[d];
    }
    PlanStridedCopy(src, PlaceOf(y).base, cuda::RowMajorStrides(shape), g.tensor(y).dtype, shape, "tile kernel",
                    "a Tile its readers could not read as a view");
    return true;
  }
  if (type == "Concat") {
    const std::optional<size_t> axis = AxisIn(AttrInt(node, "axis", 0), ys.size());
    if (!axis) {
      why = "axis out of range";
      return false;
    }
    std::vector<TensorId> parts;
    const size_t slots = node.input_slots.empty() ? op.inputs.size() : node.input_slots.size();
    for (size_t slot = 0; slot < slots; ++slot) {
      const TensorId part = NodeInput(op, slot);
      if (part == kNone) {
        why = "an input is a constant the node keeps";
        return false;
      }
      parts.push_back(part);
    }
    PlanPartCopies(parts, y, *axis, false, "concat kernel");
    return true;
  }
  if (type == "Pad") {
    const std::optional<std::vector<int64_t>> pads = KnownInts(op, 1);
    if (!pads) {
      why = "its pads are not known when the plan is made";
      return false;
    }
    auto mode_it = node.strings.find("mode");
    const std::string mode = mode_it == node.strings.end() ? "constant" : mode_it->second;
    if ((mode != "constant" && mode != "edge" && mode != "reflect") || xs.size() > cuda::kMaxOnnxRank) {
      why = fmt::format("mode '{}'", mode);
      return false;
    }
    cuda::PadArgs a{};
    a.rank = static_cast<int32_t>(xs.size());
    std::vector<int64_t> begin(xs.size(), 0);
    std::optional<std::vector<int64_t>> axes;
    if (NodeInput(op, 3) != kNone || (node.input_slots.size() > 3 && node.input_slots[3] <= -2)) {
      axes = KnownInts(op, 3);
      if (!axes) {
        why = "its axes are not known when the plan is made";
        return false;
      }
    }
    const size_t listed = axes ? axes->size() : xs.size();
    if (pads->size() != 2 * listed) {
      why = "pads do not match the axes";
      return false;
    }
    for (size_t i = 0; i < listed; ++i) {
      const std::optional<size_t> ax = axes ? AxisIn((*axes)[i], xs.size()) : std::optional<size_t>(i);
      if (!ax) {
        why = "an axis is out of range";
        return false;
      }
      begin[*ax] = (*pads)[i];
    }
    if (NodeInput(op, 2) != kNone || (node.input_slots.size() > 2 && node.input_slots[2] <= -2)) {
      const std::optional<std::vector<float>> v = KnownFloats(op, 2);
      if (!v) {
        why = "its constant value is not known when the plan is made";
        return false;
      }
      a.value = v->empty() ? 0.0 : (*v)[0];
    }
    for (size_t d = 0; d < xs.size(); ++d) {
      a.in_shape[d] = xs[d];
      a.out_shape[d] = ys[d];
      a.begin[d] = begin[d];
      if (mode != "constant" && xs[d] == 0 && ys[d] > 0) {
        why = "padding an empty dim";
        return false;
      }
    }
    a.mode = mode == "constant" ? 0 : mode == "edge" ? 1 : 2;
    a.type = static_cast<int32_t>(g.tensor(y).dtype);
    a.x = PlaceOf(x).base;
    a.y = PlaceOf(y).base;
    a.numel = Product(ys, 0, ys.size());
    Add("pad kernel", [a](cudaStream_t s) {
      cuda::LaunchPad(a, s);
      HFUSE_LAUNCHED();
    });
    return true;
  }
  why = "no kernel for this operator";
  return false;
}

bool CudaExecutor::Impl::PlanOnnxElementwise(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const std::string& type = node.op_type;
  const TensorId y = op.outputs[0];
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  if (op.outputs.size() != 1 || ys.size() > cuda::kMaxOnnxRank) {
    why = "rank above 8";
    return false;
  }
  if (type == "Cast" && views.as_view[static_cast<size_t>(y)]) {
    PlanViewCopy(op);
    return true;
  }
  const std::optional<cuda::ElementwiseFunction> fn = cuda::ElementwiseFunctionOf(node, why);
  if (!fn) return false;
  cuda::OnnxElementwiseArgs a{};
  a.func = fn->func;
  a.alpha = fn->alpha;
  a.beta = fn->beta;
  const bool ternary = type == "Where";
  const size_t inputs = fn->inputs;
  const size_t slots = node.input_slots.empty() ? op.inputs.size() : node.input_slots.size();
  if ((type != "Clip" && slots != inputs) || (type == "Clip" && slots > 3)) {
    why = fmt::format("{} inputs", slots);
    return false;
  }
  for (size_t k = 0; k < inputs; ++k) {
    const TensorId in = NodeInput(op, k);
    if (in != kNone && views.shape[static_cast<size_t>(in)].size() > ys.size()) {
      why = "an input has more dims than the output";
      return false;
    }
    const std::optional<cuda::StridedOperand> o = SlotOperand(op, k, ys);
    if (!o) {
      why = "an input is missing";
      return false;
    }
    a.in[k] = *o;
  }
  a.num_inputs = static_cast<int32_t>(inputs);
  const DType in_type = static_cast<DType>(a.in[ternary ? 1 : 0].as);
  const bool compare = a.func >= cuda::kEqual && a.func <= cuda::kXor;
  a.integer = IntegerType(compare ? in_type : g.tensor(y).dtype) ? 1 : 0;
  if (a.integer && a.func >= cuda::kRelu &&
      !(a.func == cuda::kRelu || a.func == cuda::kNeg || a.func == cuda::kAbs || a.func == cuda::kClip ||
        a.func == cuda::kNot || a.func == cuda::kSign)) {
    why = "an integer form of a float function";
    return false;
  }
  if (a.integer && (a.func == cuda::kPRelu)) {
    why = "integer PRelu";
    return false;
  }
  if (type == "Clip") {
    if (node.opset >= 11) {
      for (size_t slot = 1; slot < 3; ++slot) {
        const bool given = slot < slots && (NodeInput(op, slot) != kNone ||
                                            (slot < node.input_slots.size() && node.input_slots[slot] <= -2));
        if (!given) continue;
        const std::optional<std::vector<float>> v = KnownFloats(op, slot);
        if (!v || v->size() != 1) {
          why = "its bounds are not known when the plan is made";
          return false;
        }
        (slot == 1 ? a.alpha : a.beta) = (*v)[0];
      }
    }
    if (a.integer) {  // an integer Clip's bounds, as the CPU reads them
      a.alpha = std::max(a.alpha, -9.2e18f);
      a.beta = std::min(a.beta, 9.2e18f);
    }
  }
  if (AddIntoGather(op, {NodeInput(op, 0), NodeInput(op, 1)}, a, y)) return true;
  PlanElementwiseTo(a, y, fmt::format("{} kernel", type));
  return true;
}

std::optional<cuda::StridedOperand> CudaExecutor::Impl::SlotOperand(const Op& op, size_t slot,
                                                                     const std::vector<int64_t>& shape) {
  const TensorId in = cuda::InputOf(op, slot);
  if (in != kNone) return Operand(in, shape);
  // A constant the node keeps: uploaded once.
  const OnnxNode::Value* c = cuda::ConstantOf(op, slot);
  if (!c || c->dims.size() > shape.size()) return std::nullopt;
  const OnnxNode::Value& v = *c;
  cuda::StridedOperand o{};
  o.ptr = Device(v.data);
  o.type = o.as = static_cast<int32_t>(v.dtype);
  const std::vector<int64_t> s = cuda::RowMajorStrides(v.dims);
  for (size_t d = 0; d < v.dims.size(); ++d) {
    o.strides[shape.size() - v.dims.size() + d] = v.dims[d] == 1 ? 0 : s[d];
  }
  return o;
}

void CudaExecutor::Impl::PlanRegion(const cuda::FusionRegion& r) {
  const Op& first = g.op(r.ops.front());
  current = first.name;
  current_op = &first;
  if (r.attention) {
    PlanAttention(r);
    return;
  }
  if (r.ffn) {
    PlanFfn(r);
    return;
  }
  // Its operands, each as the kernel reads it. (The planner took only
  // tensors of these types and constants of at most the operand's rank;
  // its members could not run one by one instead: the view plan may have
  // laid their outputs out for a region, which writes through any strides.)
  std::vector<const void*> operands;
  std::vector<std::vector<int64_t>> strides;
  std::vector<TensorId> reads, writes;
  std::vector<TensorId> touched;
  for (const cuda::RegionOperand& o : r.operands) {
    const Op& op = g.op(o.op);
    if (o.product >= 0) {  // computed by the kernel: its tensor has no buffer
      operands.push_back(nullptr);
      strides.push_back(cuda::OperandStrides(g, views, o));
      continue;
    }
    const std::optional<cuda::StridedOperand> so = SlotOperand(op, static_cast<size_t>(o.slot), o.over);
    HFUSE_CHECK(so && so->type == static_cast<int32_t>(o.dtype) && so->as == so->type);
    operands.push_back(so->ptr);
    strides.push_back(cuda::OperandStrides(g, views, o));
    const TensorId t = cuda::InputOf(op, static_cast<size_t>(o.slot));
    if (t != kNone) {
      reads.push_back(t);
      touched.push_back(views.layout[static_cast<size_t>(t)].root);
    }
  }
  std::vector<void*> outputs;
  std::vector<Span> write_spans;
  for (const cuda::RegionOutput& o : r.outputs) {
    const int64_t esize = DTypeBytes(o.dtype);
    outputs.push_back(PlaceOf(o.place).base + o.offset * esize);  // its first element (FusedRegionSource)
    write_spans.push_back(cuda::ElementsSpan(static_cast<const char*>(outputs.back()), o.shape, o.strides, esize));
    writes.push_back(o.place);
    touched.push_back(o.place);
  }
  std::vector<const void*> products;
  for (const cuda::RegionProduct& q : r.products) {
    for (TensorId t : {q.a, q.w, q.bias}) {
      if (t == kNone) continue;
      products.push_back(PlaceOf(t).base);
      reads.push_back(t);
      touched.push_back(views.layout[static_cast<size_t>(t)].root);
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  current_bytes = 0;
  for (TensorId t : touched) current_bytes += static_cast<double>(Bytes(t));
  const std::string source = cuda::FusedRegionSource(r, strides);
  if (!LaunchMayPassGathers(reads, writes)) FlushGathers();
  if (chain) FlushChain();  // (which sends the waiting regions out first)
  const int64_t rows = r.rows;
  const int lanes = cuda::LanesOf(r).lanes;
  const int rows_per_thread = cuda::RegionRowsPerThread(r);
  std::string label = fmt::format("{} (fused region kernel, {} ops: {} to {}, {} rows of {}{}", first.name, r.ops.size(),
                                  first.name, g.op(r.ops.back()).name, rows, r.cols, r.one_lane ? ", a row a thread" : "");
  // The activation of a feed-forward block the FFN kernel's rule left out
  // (FusionPlan::ffn_below_rule): the FFN kernel would have taken it in.
  std::string ffn_apart;
  for (OpId id : r.ops) {
    const std::string note = FfnNote(id);
    if (ffn_apart.empty() && !note.empty()) ffn_apart = "a feed-forward block in more than one launch" + note;
  }
  if (r.products.empty()) {
    PendingRegion p{label + ")", first.name, g.op(r.ops.back()).name, current_bytes, operands, {},
                    std::move(write_spans), {}};
    for (OpId id : r.ops) {
      const auto it = kept_apart.find(id);
      if (it != kept_apart.end() && p.apart.empty()) p.apart = "elementwise alone: " + it->second + FfnNote(id);
    }
    if (p.apart.empty()) p.apart = ffn_apart;
    p.pointers.insert(p.pointers.end(), outputs.begin(), outputs.end());
    for (TensorId t : reads) {
      const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
      p.reads.push_back(cuda::ElementsSpan(PlaceOf(t).base, views.shape[static_cast<size_t>(t)], l.strides,
                                     DTypeBytes(l.root_dtype)));
    }
    // Into the waiting batch where it is of the same kernel and touches
    // nothing a member writes, nor writes what one reads.
    bool joins = pending_regions && options.region_batches && pending_regions->source == source &&
                 pending_regions->rows == rows && pending_regions->lanes == lanes &&
                 pending_regions->rows_per_thread == rows_per_thread &&
                 pending_regions->members.size() < kMaxRegionBatch;
    for (size_t i = 0; joins && i < pending_regions->members.size(); ++i) {
      const PendingRegion& q = pending_regions->members[i];
      for (const Span& w : p.writes) {
        for (const Span& x : q.reads) joins = joins && !w.Overlaps(x);
        for (const Span& x : q.writes) joins = joins && !w.Overlaps(x);
      }
      for (const Span& x : p.reads) {
        for (const Span& w : q.writes) joins = joins && !x.Overlaps(w);
      }
    }
    if (!joins) FlushRegions();
    if (!pending_regions) pending_regions = PendingRegions{source, &r, strides, rows, r.cols, lanes, rows_per_thread, {}};
    pending_regions->members.push_back(std::move(p));
    return;
  }
  FlushRegions();
  if (!LaunchMayPassGathers(reads, writes)) FlushGathers();
  FlushChain();
  const cudaKernel_t kernel = cuda::CompiledKernel(source, "hfuse_region");
  // The GEMMs it computes, whose outputs are never written.
  const cuda::RegionProduct& q = r.products.front();
  std::vector<std::string> gemms;
  for (const cuda::RegionProduct& p : r.products) {
    const std::string& name = g.op(p.gemm).name;
    if (std::find(gemms.begin(), gemms.end(), name) == gemms.end()) gemms.push_back(name);
  }
  label += fmt::format(", computing {} GEMMs of {} x {} ({})", r.products.size(), q.m, q.n, fmt::join(gemms, ", "));
  std::vector<const void*> pointers(operands);
  pointers.insert(pointers.end(), outputs.begin(), outputs.end());
  pointers.insert(pointers.end(), products.begin(), products.end());
  const int64_t m = q.m, n = q.n;
  AddLaunch(label + ")", current_bytes,
            [=](cudaStream_t s) { cuda::LaunchProductRegion(kernel, m, n, pointers, s); }, ffn_apart);
}

void CudaExecutor::Impl::FlushRegions() {
  if (!pending_regions) return;
  PendingRegions batch = std::move(*pending_regions);
  pending_regions.reset();
  const int64_t rows = batch.rows;
  const int lanes = batch.lanes, rows_per_thread = batch.rows_per_thread;
  if (batch.members.size() == 1) {
    PendingRegion& p = batch.members.front();
    const cudaKernel_t kernel = cuda::CompiledKernel(batch.source, "hfuse_region");
    const size_t num_operands = batch.region->operands.size();
    const std::vector<const void*> operands(p.pointers.begin(), p.pointers.begin() + static_cast<ptrdiff_t>(num_operands));
    std::vector<void*> outputs;
    for (size_t i = num_operands; i < p.pointers.size(); ++i) outputs.push_back(const_cast<void*>(p.pointers[i]));
    AddLaunch(std::move(p.label), p.bytes, [=](cudaStream_t s) {
      cuda::LaunchFusedRegion(kernel, rows, lanes, rows_per_thread, operands, outputs, s);
    }, p.apart);
    return;
  }
  const cudaKernel_t kernel =
      cuda::CompiledKernel(cuda::FusedRegionGroupSource(*batch.region, batch.strides), "hfuse_region_group");
  std::vector<const void*> table;
  double bytes = 0;
  for (const PendingRegion& p : batch.members) {
    table.insert(table.end(), p.pointers.begin(), p.pointers.end());
    bytes += p.bytes;
  }
  const void* const* d_table = Device(table);
  const int count = static_cast<int>(batch.members.size());
  std::string apart;
  for (const PendingRegion& p : batch.members) {
    if (apart.empty()) apart = p.apart;
  }
  AddLaunch(fmt::format("{} (fused region kernel, {} regions alike in one launch, {} ops: {} to {}, {} rows of {} each)",
                        batch.members.front().first, count, batch.region->ops.size(), batch.members.front().first,
                        batch.members.back().last, rows, batch.cols),
            bytes, [=](cudaStream_t s) {
              cuda::LaunchFusedRegionGroup(kernel, rows, lanes, rows_per_thread, d_table, count, s);
            }, apart);
}

// An attention region (fusion_regions.h): one launch of the attention
// kernel, each operand and O through its layout.
void CudaExecutor::Impl::PlanAttention(const cuda::FusionRegion& r) {
  const cuda::AttentionTensors t = cuda::AttentionTensorsOf(g, r);
  cuda::AttentionArgs a = cuda::AttentionArgsOf(g, views, r);
  auto at = [&](TensorId x) { return PlaceOf(x).base; };  // its first element
  a.q = at(t.q);
  a.kt = at(t.kt);
  a.v = at(t.v);
  a.o = at(t.o);
  std::vector<TensorId> reads = {t.q, t.kt, t.v}, writes = {views.layout[static_cast<size_t>(t.o)].root};
  current_bytes = 0;
  for (TensorId x : {t.q, t.kt, t.v, t.o}) current_bytes += static_cast<double>(Bytes(x));
  FlushRegions();
  if (!LaunchMayPassGathers(reads, writes)) FlushGathers();
  FlushChain();
  const Op& first = g.op(r.ops.front());
  AddLaunch(fmt::format("{} (fused attention kernel, {} ops: {} to {}, {} x {} rows of {} keys, heads of {})", first.name,
                        r.ops.size(), first.name, g.op(r.ops.back()).name, a.batch, a.sq, a.sk, a.d),
            current_bytes, [=](cudaStream_t s) { cuda::LaunchAttention(a, s); });
}

// An FFN region (fusion_regions.h): one launch of the FFN kernel, x read
// and y written through their layouts.
void CudaExecutor::Impl::PlanFfn(const cuda::FusionRegion& r) {
  const cuda::FfnChain& c = *r.ffn;
  cuda::FfnArgs a = cuda::FfnArgsOf(views, r, cuda::NumSms());
  auto at = [&](TensorId x) { return reinterpret_cast<const float*>(x == kNone ? nullptr : PlaceOf(x).base); };
  a.x = at(c.x);
  a.w1 = at(c.w1);
  a.b1 = at(c.b1);
  a.w2 = at(c.w2);
  a.b2 = at(c.b2);
  a.y = reinterpret_cast<float*>(PlaceOf(c.y).base);
  std::vector<TensorId> reads, writes = {views.layout[static_cast<size_t>(c.y)].root};
  current_bytes = 0;
  for (TensorId x : {c.x, c.w1, c.b1, c.w2, c.b2, c.y}) {
    if (x == kNone) continue;
    if (x != c.y) reads.push_back(x);
    current_bytes += static_cast<double>(Bytes(x));
  }
  FlushRegions();
  if (!LaunchMayPassGathers(reads, writes)) FlushGathers();
  FlushChain();
  const Op& first = g.op(r.ops.front());
  AddLaunch(fmt::format("{} (fused FFN kernel, {} ops: {} to {}, {} rows of {} -> {}{} -> {}, {} a thread)", first.name,
                        r.ops.size(), first.name, g.op(r.ops.back()).name, a.m, a.in, a.hidden,
                        c.Gated() ? " gated" : "", a.out, a.rows_per_thread),
            current_bytes, [=](cudaStream_t s) { cuda::LaunchFfn(a, s); });
}

bool CudaExecutor::Impl::PlanOnnxGather(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const TensorId data = NodeInput(op, 0), index = NodeInput(op, 1);
  const TensorId y = op.outputs[0];
  if (data == kNone || op.outputs.size() != 1) {
    why = "its data is a constant the node keeps";
    return false;
  }
  const std::vector<int64_t>& ds = views.shape[static_cast<size_t>(data)];
  const std::optional<cpu::AxisView> v = cpu::GatherView(node, ds);
  if (!v || g.tensor(data).dtype != g.tensor(y).dtype) {
    why = "axis out of range";
    return false;
  }
  std::optional<std::vector<int64_t>> ids;
  if (index == kNone) {
    ids = KnownInts(op, 1);
    if (!ids) {
      why = "no indices";
      return false;
    }
  }
  std::optional<PendingGather> p = GatherLaunch(op.name, data, index, ids, *v, y, why);
  if (!p) return false;
  QueueGather(std::move(*p));
  return true;
}

std::optional<CudaExecutor::Impl::PendingGather> CudaExecutor::Impl::GatherLaunch(
    const std::string& name, TensorId data, TensorId index, const std::optional<std::vector<int64_t>>& ids,
    const cpu::AxisView& v, TensorId y, std::string& why) {
  cuda::GatherArgs a{};
  if (index != kNone) {
    const std::vector<int64_t>& is = views.shape[static_cast<size_t>(index)];
    if (is.size() > cuda::kMaxOnnxRank) {
      why = "indices of rank above 8";
      return std::nullopt;
    }
    a.index = Operand(index, is);
    a.index_rank = static_cast<int32_t>(is.size());
    a.count = 1;
    for (size_t d = 0; d < is.size(); ++d) {
      a.index_shape[d] = is[d];
      a.count *= is[d];
    }
  } else {
    a.index = cuda::StridedOperand{};
    a.index.ptr = Device(*ids);
    a.index.type = a.index.as = static_cast<int32_t>(DType::kInt64);
    a.index.strides[0] = 1;
    a.index_rank = 1;
    a.index_shape[0] = static_cast<int64_t>(ids->size());
    a.count = static_cast<int64_t>(ids->size());
  }
  const int64_t esize = DTypeBytes(g.tensor(y).dtype);
  if (Bytes(y) != v.outer * a.count * v.inner * esize) {
    why = "its output's size does not match";
    return std::nullopt;
  }
  a.data = PlaceOf(data).base;
  a.y = PlaceOf(y).base;
  a.outer = v.outer;
  a.len = v.len;
  a.inner_bytes = v.inner * esize;
  a.y_row_bytes = a.inner_bytes;
  a.bad = NextIndexFlag(name, "ONNX Gather");
  PendingGather p{a, name, current_bytes, {}, {}, y, {}, {}};
  const char* table = static_cast<const char*>(a.data);
  p.reads.push_back({table, table + Bytes(data)});
  if (index != kNone) {
    const char* ids_at = BufferOf(views.layout[static_cast<size_t>(index)].root);
    p.reads.push_back({ids_at, ids_at + Bytes(views.layout[static_cast<size_t>(index)].root)});
  }
  const char* out = static_cast<const char*>(a.y);
  p.write = {out, out + Bytes(y)};
  return p;
}

void CudaExecutor::Impl::PlanGroupGather(const Op& op) {
  // Every member as the lookup its Gather was (its flag under its name),
  // then all of them into the waiting batch at once: the group is one
  // launch, whatever gather_batches says, and the bias Adds and the Concat
  // that follow are taken in as after unfused lookups.
  std::vector<PendingGather> members;
  const double bytes = current_bytes;
  for (size_t m = 0; m < NumMembers(op); ++m) {
    const GatherMember mem = GatherMemberOf(op, m);
    const std::string& name = op.attrs.onnx->member_names[m];
    const std::vector<int64_t>& ts = views.shape[static_cast<size_t>(mem.table)];
    const int64_t rows = ts[0];  // the verifier's: rank >= 1
    const cpu::AxisView v{1, rows, Product(ts, 1, ts.size())};  // axis 0 (the pass's rule)
    std::string why;
    std::optional<PendingGather> p = GatherLaunch(name, mem.table, mem.ids, std::nullopt, v, mem.y, why);
    if (!p) {
      ThrowInputError("op '{}' (group_gather): member '{}' cannot run on the gather kernel: {}", op.name,
                      name, why);
    }
    p->bytes = m == 0 ? bytes : 0;  // the group's bytes once, on its first member
    members.push_back(std::move(*p));
  }
  FlushChain();
  bool flush = pending_gathers.size() + members.size() > kMaxGatherBatch;
  for (const PendingGather& p : members) flush = flush || ClashesWithWaiting(p);
  if (flush) FlushGathers();
  for (PendingGather& p : members) {
    if (pending_gathers.size() == kMaxGatherBatch) FlushGathers();  // a group above a batch's gathers
    pending_gathers.push_back(std::move(p));
  }
}

void CudaExecutor::Impl::QueueGather(PendingGather p) {
  FlushChain();
  if (!options.gather_batches || pending_gathers.size() >= kMaxGatherBatch || ClashesWithWaiting(p)) {
    FlushGathers();
  }
  pending_gathers.push_back(std::move(p));
}

bool CudaExecutor::Impl::ClashesWithWaiting(const PendingGather& p) const {
  for (const PendingGather& q : pending_gathers) {
    // (a row + bias is added as float words: a batch with one moves words only)
    bool clash = p.write.Overlaps(q.write) || (!q.add.empty() && !cuda::GatherWords(p.args));
    for (const Span& r : q.reads) clash = clash || p.write.Overlaps(r);
    for (const Span& r : p.reads) clash = clash || r.Overlaps(q.write);
    if (clash) return true;
  }
  return false;
}

void CudaExecutor::Impl::FlushGathers() {
  if (pending_gathers.empty()) return;
  // Waiting regions first: a lookup queued after them may read their
  // outputs, and one queued before them touches nothing they touch.
  FlushRegions();
  std::vector<PendingGather> batch = std::move(pending_gathers);
  pending_gathers.clear();
  // What the batch took in, for its label: "+ 26 adds, into node_cat".
  int adds = 0;
  std::string an_add;
  std::vector<std::string> into;
  for (const PendingGather& p : batch) {
    if (!p.add.empty()) {
      ++adds;
      an_add = p.add;
    }
    if (!p.into.empty() && std::find(into.begin(), into.end(), p.into) == into.end()) into.push_back(p.into);
  }
  std::string also = adds == 0 ? "" : adds == 1 ? fmt::format(" + {}", an_add) : fmt::format(" + {} adds", adds);
  if (!into.empty()) also += fmt::format(", into {}", fmt::join(into, ", "));
  // A batch of copies alone (PartCopyGather) only moves data.
  const bool copies = std::all_of(batch.begin(), batch.end(), [](const PendingGather& p) { return p.copy; });
  const std::string apart =
      copies ? "moves data: parts in buffers no launch writes, copied into their concatenate's slots; no lookup "
               "waits beside them to take the copy into its launch"
             : "";
  if (batch.size() == 1) {
    const cuda::GatherArgs a = batch[0].args;
    HFUSE_CHECK(a.add == nullptr || cuda::GatherWords(a));
    AddLaunch(fmt::format("{} (gather kernel{})", batch[0].op, also), batch[0].bytes, [a](cudaStream_t s) {
      cuda::LaunchOnnxGather(a, s);
      HFUSE_LAUNCHED();
    }, apart);
    return;
  }
  std::vector<cuda::GatherArgs> args;
  double bytes = 0;
  for (const PendingGather& p : batch) {
    args.push_back(p.args);
    bytes += p.bytes;
  }
  const std::vector<int32_t> block_gather = cuda::LayGatherBatch(args);
  for (size_t g = 0; g < batch.size(); ++g) {
    HFUSE_CHECK(args[g].word_bytes >= 4 || batch[g].add.empty());  // the planner keeps adds off bytes
  }
  const cuda::GatherArgs* device_args = Device(args);
  const int32_t* device_blocks = Device(block_gather);
  const auto blocks = static_cast<int64_t>(block_gather.size());
  AddLaunch(fmt::format("{} (gather kernel, {} tables: {} to {}{})", batch.front().op, args.size(), batch.front().op,
                        batch.back().op, also),
            bytes, [=](cudaStream_t s) {
              cuda::LaunchOnnxGatherBatch(device_args, device_blocks, blocks, s);
              HFUSE_LAUNCHED();
            }, apart);
}

CudaExecutor::Impl::PendingGather* CudaExecutor::Impl::WaitingGatherOf(TensorId t) {
  for (PendingGather& q : pending_gathers) {
    if (q.y != kNone && q.y == t) return &q;
  }
  return nullptr;
}

bool CudaExecutor::Impl::LaunchMayPassGathers() const {
  if (pending_gathers.empty()) return true;
  if (!current_op) return false;
  return LaunchMayPassGathers(current_op->inputs, current_op->outputs);
}

bool CudaExecutor::Impl::LaunchMayPassGathers(const std::vector<TensorId>& reads,
                                              const std::vector<TensorId>& writes) const {
  if (pending_gathers.empty()) return true;
  if (!options.gather_batches) return false;
  // The whole buffer of t's root (a view's elements lie somewhere in it).
  const auto span_of = [&](TensorId t) -> std::optional<Span> {
    const TensorId root = views.layout[static_cast<size_t>(t)].root;
    if (root == kNone || std::string_view("ipoca").find(region[static_cast<size_t>(root)]) == std::string_view::npos) {
      return std::nullopt;
    }
    const char* base = BufferOf(root);
    return Span{base, base + Bytes(root)};
  };
  for (TensorId t : reads) {
    if (t == kNone) continue;
    const std::optional<Span> s = span_of(t);
    if (!s) return false;
    for (const PendingGather& q : pending_gathers) {
      if (s->Overlaps(q.write)) return false;
    }
  }
  for (TensorId t : writes) {
    const std::optional<Span> s = span_of(t);
    if (!s || GathersTouch(*s, {})) return false;
  }
  return true;
}

bool CudaExecutor::Impl::GathersTouch(const Span& span, const std::vector<const PendingGather*>& except) const {
  for (const PendingGather& q : pending_gathers) {
    for (const Span& r : q.reads) {
      if (span.Overlaps(r)) return true;
    }
    if (std::find(except.begin(), except.end(), &q) == except.end() && span.Overlaps(q.write)) return true;
  }
  return false;
}

bool CudaExecutor::Impl::AddIntoGather(const Op& op, const std::vector<TensorId>& operands,
                                       const cuda::OnnxElementwiseArgs& a, TensorId y) {
  if (!options.gather_batches || pending_gathers.empty() || a.func != cuda::kAdd || a.num_inputs != 2 ||
      operands.size() != 2 ||
      a.integer || g.tensor(y).dtype != DType::kFloat32 || views.layout[static_cast<size_t>(y)].root != y) {
    return false;
  }
  for (const PendingGather& q : pending_gathers) {
    if (!cuda::GatherWords(q.args)) return false;  // the add is done on float words
  }
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  const int rank = static_cast<int>(ys.size());
  for (size_t k = 0; k < 2; ++k) {
    // Operand k: a waiting gather's result, element for element; only this Add reads it.
    const TensorId t = operands[k];
    if (t == kNone) continue;
    const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
    PendingGather* p = WaitingGatherOf(l.root);
    if (!p || !p->add.empty() || views.shape[static_cast<size_t>(t)] != ys ||
        l.offset != 0 || l.root_dtype != DType::kFloat32 || !cuda::IsRowMajor(l, ys) ||
        Product(ys, 0, ys.size()) * 4 != p->args.outer * p->args.count * p->args.inner_bytes ||
        !OnlyReadBy(l.root, op)) {
      continue;
    }
    // The other operand: one row of the gathered width, the same for every row.
    const cuda::StridedOperand& b = a.in[1 - k];
    const int64_t width = p->args.inner_bytes / 4;
    if (b.type != kF32 || b.as != kF32) continue;
    int64_t run = 1;
    int d = rank - 1;
    bool row = true;
    for (; d >= 0 && run < width; --d) {
      row = row && (ys[static_cast<size_t>(d)] == 1 || b.strides[d] == run);
      run *= ys[static_cast<size_t>(d)];
    }
    for (; d >= 0; --d) row = row && (ys[static_cast<size_t>(d)] == 1 || b.strides[d] == 0);
    if (!row || run != width) continue;
    char* out = PlaceOf(y).base;
    const Span write{out, out + Bytes(y)};
    const char* bias = static_cast<const char*>(b.ptr);
    const Span read{bias, bias + width * 4};
    // Its new output may lie on nothing a waiting gather reads or writes (the
    // memory plan may have given it the buffer of ids read before).
    if (GathersTouch(write, {p}) || read.Overlaps(write)) return false;
    for (const PendingGather& q : pending_gathers) {
      if (read.Overlaps(q.write)) return false;  // p's too: its result is never written now
    }
    p->args.y = out;
    p->args.add = static_cast<const float*>(b.ptr);
    p->write = write;
    p->reads.push_back(read);
    p->y = y;
    p->add = current;
    p->bytes += current_bytes;
    return true;
  }
  return false;
}

bool CudaExecutor::Impl::ConcatIntoGathers(const Op& op, const std::vector<TensorId>& parts, TensorId y,
                                           size_t axis) {
  if (!options.gather_batches || parts.empty()) return false;
  // A waiting chain launches first: it may read a buffer the copies below
  // write (the memory plan's order puts it before the concatenate), and a
  // chain and waiting gathers never wait together (Add launches gathers
  // first).
  FlushChain();
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  const DType dtype = g.tensor(y).dtype;
  const int64_t esize = DTypeBytes(dtype);
  // The output's rows (the dims from `axis` on) at one stride: its own
  // buffer, or its slot in an outer concatenate written in place (view_plan.h).
  const cuda::Layout& yl = views.layout[static_cast<size_t>(y)];
  const int64_t outer = Product(ys, 0, axis), row = Product(ys, axis, ys.size());
  const std::optional<cuda::Layout> rows = cuda::ReshapeLayout(yl, ys, {outer, row});
  if (yl.root == kNone || yl.root_dtype != dtype || !rows || rows->strides[1] != 1) return false;
  // A part that lies in a buffer no launch writes (a graph input, a
  // weight, a constant of the plan: a ranking model's dense features beside
  // its lookups' rows) is copied by a gather of its own in the same batch
  // (one id, 0, a row), so that the concatenate launches nothing.
  const auto fixed = [&](TensorId root) {
    return root != kNone && std::string_view("ipc").find(region[static_cast<size_t>(root)]) != std::string_view::npos;
  };
  // Each part a waiting gather's whole result whose rows are the part's
  // blocks along `axis`: row r goes to row r of the output, at the part's
  // column; or a lookup of k ids an output row (FTTransformer's [B, n, D]
  // beside its numeric columns' part): rows r k .. r k + k - 1 go to row r,
  // one after another from the part's column (GatherArgs::y_block_rows);
  // or a part in a buffer no launch writes, copied (PartCopyGather: rows,
  // or columns of wider rows). (Parts their producers wrote in their slots
  // already: skipped.)
  std::vector<PendingGather*> members;
  std::vector<PendingGather> part_copies;
  std::vector<int64_t> at, copy_at, blocks, widths, copy_widths;  // widths: along `axis`
  int64_t column = 0;
  for (size_t index = 0; index < parts.size(); ++index) {
    const TensorId part = parts[index];
    const cuda::Layout& l = views.layout[static_cast<size_t>(part)];
    const std::vector<int64_t>& ps = views.shape[static_cast<size_t>(part)];
    if (views.InSlot(g.tensor(y).producer, index)) {
      column += ps[axis];
      continue;
    }
    if (ps.size() != ys.size() || l.root == kNone || l.root_dtype != dtype) return false;
    PendingGather* p = cuda::IsRowMajor(l, ps) ? WaitingGatherOf(l.root) : nullptr;
    if (!p) {
      if (!fixed(l.root)) return false;
      std::optional<PendingGather> c = PartCopyGather(fmt::format("{} part '{}'", op.name, g.tensor(part).name),
                                                      part, Product(ps, 0, axis), Product(ps, axis, ps.size()));
      if (!c) return false;
      part_copies.push_back(std::move(*c));
      copy_at.push_back(column);
      copy_widths.push_back(ps[axis]);
      column += ps[axis];
      continue;
    }
    const int64_t part_row_bytes = Product(ps, axis, ps.size()) * esize;  // an output row's part
    if (std::find(members.begin(), members.end(), p) != members.end() || l.offset != 0 ||
        p->args.inner_bytes == 0 || part_row_bytes % p->args.inner_bytes != 0 ||
        Product(ps, 0, ps.size()) * esize != p->args.outer * p->args.count * p->args.inner_bytes ||
        !OnlyReadBy(l.root, op)) {
      return false;
    }
    members.push_back(p);
    blocks.push_back(part_row_bytes / p->args.inner_bytes);
    at.push_back(column);
    widths.push_back(ps[axis]);
    column += ps[axis];
  }
  if (column != ys[axis] || (members.empty() && part_copies.empty())) return false;
  if (pending_gathers.size() + part_copies.size() > kMaxGatherBatch) return false;
  char* out = PlaceOf(y).base;
  const int64_t row_bytes = (outer > 1 ? rows->strides[0] : row) * esize;
  const int64_t slot_bytes = Product(ys, axis + 1, ys.size()) * esize;
  // What each gather writes: its slot's columns of every output row (the
  // others' slots, written by gathers already waiting or by launches
  // before, interleave with it: the lookups of a concatenate inside this
  // one beside a copied part of the input).
  const auto slot = [&](int64_t column_at, int64_t columns) {
    char* begin = out + column_at * slot_bytes;
    const int64_t width = columns * slot_bytes;
    return outer > 1 ? Span{begin, begin + (outer - 1) * row_bytes + width, row_bytes, width}
                     : Span{begin, begin + width};
  };
  // (A copy reads a buffer no launch writes: no waiting gather writes it either.)
  for (size_t i = 0; i < members.size(); ++i) {
    if (GathersTouch(slot(at[i], widths[i]), {members.begin(), members.end()})) return false;
  }
  for (size_t i = 0; i < part_copies.size(); ++i) {
    if (GathersTouch(slot(copy_at[i], copy_widths[i]), {members.begin(), members.end()})) return false;
  }
  // A slot off the 4-byte grid makes its gather move bytes; a batch with
  // an add (done on float words) keeps every gather on words (the rule
  // from when a batch moved one word size; each now moves its own).
  const bool adds = std::any_of(pending_gathers.begin(), pending_gathers.end(),
                                [](const PendingGather& q) { return !q.add.empty(); });
  auto place = [&](cuda::GatherArgs a, int64_t column_at, int64_t block) -> std::optional<cuda::GatherArgs> {
    a.y = out + column_at * slot_bytes;
    if (block > 1) {
      a.y_block_rows = block;
      a.y_block_bytes = row_bytes;
      a.y_row_bytes = a.inner_bytes;
    } else {
      a.y_row_bytes = row_bytes;
    }
    if (adds && !cuda::GatherWords(a)) return std::nullopt;
    return a;
  };
  std::vector<cuda::GatherArgs> placed;
  for (size_t i = 0; i < members.size(); ++i) {
    const std::optional<cuda::GatherArgs> a = place(members[i]->args, at[i], blocks[i]);
    if (!a) return false;
    placed.push_back(*a);
  }
  for (size_t i = 0; i < part_copies.size(); ++i) {
    const std::optional<cuda::GatherArgs> a = place(part_copies[i].args, copy_at[i], part_copies[i].args.count);
    if (!a) return false;
    part_copies[i].args = *a;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    members[i]->args = placed[i];
    members[i]->write = slot(at[i], widths[i]);
    members[i]->y = kNone;
    members[i]->into = current;
  }
  for (size_t i = 0; i < part_copies.size(); ++i) {
    part_copies[i].write = slot(copy_at[i], copy_widths[i]);
    part_copies[i].into = current;
  }
  (members.empty() ? part_copies[0].bytes : members[0]->bytes) += current_bytes;
  for (PendingGather& c : part_copies) pending_gathers.push_back(std::move(c));  // `members` no longer used
  return true;
}

std::optional<CudaExecutor::Impl::PendingGather> CudaExecutor::Impl::PartCopyGather(const std::string& name,
                                                                                     TensorId part, int64_t outer,
                                                                                     int64_t inner) {
  // Row-major: y[o, 0, :] = part[o, ids[0] = 0, :], a gather of one id
  // along a dim of 1. Columns of a wider row (a view [outer, inner] at
  // row stride S > inner: pytorch-widedeep's continuous columns X[:, c]):
  // y[o, j] = part[o, ids[j] = j] along a dim of S, one element a row.
  static const std::vector<int64_t> kZero = {0};
  const cuda::Layout& l = views.layout[static_cast<size_t>(part)];
  const std::optional<cuda::Layout> rows =
      cuda::ReshapeLayout(l, views.shape[static_cast<size_t>(part)], {outer, inner});
  const int64_t esize = DTypeBytes(g.tensor(part).dtype);
  const bool row_major = cuda::IsRowMajor(l, views.shape[static_cast<size_t>(part)]);
  if (!row_major && (!rows || inner < 1 || rows->strides[1] != 1 || rows->strides[0] < inner)) return std::nullopt;
  cuda::GatherArgs a{};
  a.index.type = a.index.as = static_cast<int32_t>(DType::kInt64);
  a.index.strides[0] = 1;
  a.index_rank = 1;
  a.data = PlaceOf(part).base;
  a.outer = outer;
  if (row_major) {
    a.index.ptr = Device(kZero);
    a.count = a.index_shape[0] = 1;
    a.len = 1;
    a.inner_bytes = inner * esize;
  } else {
    std::vector<int64_t> columns(static_cast<size_t>(inner));
    for (int64_t j = 0; j < inner; ++j) columns[static_cast<size_t>(j)] = j;
    a.index.ptr = Device(columns);
    a.count = a.index_shape[0] = inner;
    a.len = rows->strides[0];
    a.inner_bytes = esize;
  }
  a.y_row_bytes = a.inner_bytes;
  a.bad = never_bad;  // ids below len by construction: never out of range
  PendingGather p{a, name, 0.0, {}, {}, kNone, {}, {}};
  p.copy = true;
  const char* from = static_cast<const char*>(a.data);
  const int64_t read = outer == 0 ? 0 : row_major ? outer * inner * esize : ((outer - 1) * a.len + inner) * esize;
  p.reads.push_back({from, from + read});
  return p;
}

bool CudaExecutor::Impl::PlanOnnxGatherElements(const Op& op, std::string& why) {
  const TensorId data = NodeInput(op, 0), index = NodeInput(op, 1), y = op.outputs[0];
  if (data == kNone || index == kNone || IsFloat(g.tensor(index).dtype) || g.tensor(index).dtype == DType::kBool) {
    why = "indices are no int tensor";
    return false;
  }
  const std::vector<int64_t>& ds = views.shape[static_cast<size_t>(data)];
  const std::vector<int64_t>& is = views.shape[static_cast<size_t>(index)];
  const std::optional<size_t> axis = AxisIn(AttrInt(*op.attrs.onnx, "axis", 0), ds.size());
  if (!axis || is.size() != ds.size() || ds.size() > cuda::kMaxOnnxRank) {
    why = "axis out of range, or ranks differ";
    return false;
  }
  cuda::GatherElementsArgs a{};
  const std::vector<int64_t> strides = cuda::RowMajorStrides(ds);
  for (size_t d = 0; d < ds.size(); ++d) {
    if (d != *axis && is[d] > ds[d]) {
      why = "indices exceed data's shape";
      return false;
    }
    a.shape[d] = is[d];
    a.data_strides[d] = strides[d];
  }
  a.data = PlaceOf(data).base;
  a.index = PlaceOf(index).base;
  a.index64 = g.tensor(index).dtype == DType::kInt64 ? 1 : 0;
  a.y = PlaceOf(y).base;
  a.rank = static_cast<int32_t>(ds.size());
  a.axis = static_cast<int32_t>(*axis);
  a.axis_len = ds[*axis];
  a.numel = Product(is, 0, is.size());
  a.elem_bytes = DTypeBytes(g.tensor(y).dtype);
  a.bad = NextIndexFlag(op, "ONNX GatherElements");
  Add("gather-elements kernel", [a](cudaStream_t s) {
    cuda::LaunchGatherElements(a, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

bool CudaExecutor::Impl::PlanOnnxGatherND(const Op& op, std::string& why) {
  const TensorId data = NodeInput(op, 0), index = NodeInput(op, 1), y = op.outputs[0];
  cuda::GatherNdArgs a{};
  const std::vector<int64_t>* is = nullptr;
  std::vector<int64_t> constant_shape;
  if (index != kNone) {
    if (IsFloat(g.tensor(index).dtype) || g.tensor(index).dtype == DType::kBool) {
      why = "indices are no int tensor";
      return false;
    }
    is = &views.shape[static_cast<size_t>(index)];
    a.index = PlaceOf(index).base;
    a.index64 = g.tensor(index).dtype == DType::kInt64 ? 1 : 0;
  } else {
    const OnnxNode& node = *op.attrs.onnx;
    const std::optional<std::vector<int64_t>> ids = KnownInts(op, 1);
    if (!ids || node.input_slots.size() < 2 || node.input_slots[1] > -2) {
      why = "no indices";
      return false;
    }
    constant_shape = node.constant_values[static_cast<size_t>(-2 - node.input_slots[1])].dims;
    is = &constant_shape;
    a.index = Device(*ids);
    a.index64 = 1;
  }
  if (data == kNone || is->empty()) {
    why = "indices are a scalar";
    return false;
  }
  const std::vector<int64_t>& ds = views.shape[static_cast<size_t>(data)];
  const auto batch = static_cast<size_t>(AttrInt(*op.attrs.onnx, "batch_dims", 0));
  const auto k = static_cast<size_t>(is->back());
  if (batch + k > ds.size() || batch >= is->size() || k > cuda::kMaxOnnxRank) {
    why = "indices do not fit data's rank";
    return false;
  }
  const int64_t esize = DTypeBytes(g.tensor(data).dtype);
  for (size_t q = 0; q < k; ++q) a.dims[q] = ds[batch + q];
  a.k = static_cast<int32_t>(k);
  a.batches = Product(ds, 0, batch);
  a.per_batch = Product(*is, batch, is->size() - 1);
  a.slice_bytes = Product(ds, batch + k, ds.size()) * esize;
  a.data_batch_bytes = Product(ds, batch, ds.size()) * esize;
  if (Bytes(y) != a.batches * a.per_batch * a.slice_bytes) {
    why = "its output's size does not match";
    return false;
  }
  a.data = PlaceOf(data).base;
  a.y = PlaceOf(y).base;
  a.bad = NextIndexFlag(op, "ONNX GatherND");
  Add("gather-nd kernel", [a](cudaStream_t s) {
    cuda::LaunchGatherNd(a, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

// Shape, Size, ConstantOfShape: computed at plan time unless they write a
// graph output or more than plan_constants.h's bound.
bool CudaExecutor::Impl::PlanOnnxFolded(const Op&, std::string& why) {
  why = "not computed at plan time (a graph output, or above the plan's constant bound)";
  return false;
}

bool CudaExecutor::Impl::PlanOnnxSoftmax(const Op& op, std::string& why) {
  const TensorId x = NodeInput(op, 0), y = op.outputs[0];
  if (x == kNone || !IsFloat(g.tensor(y).dtype) || g.tensor(x).dtype != g.tensor(y).dtype) {
    why = "not a float tensor";
    return false;
  }
  const std::optional<cpu::AxisView> v = cpu::SoftmaxView(*op.attrs.onnx, views.shape[static_cast<size_t>(x)]);
  if (!v) {
    why = "axis out of range";
    return false;
  }
  const void* in = PlaceOf(x).base;
  void* out = PlaceOf(y).base;
  const int dtype = cuda::KernelType(g.tensor(y).dtype);
  const bool log = op.attrs.onnx->op_type == "LogSoftmax";
  const auto [outer, len, inner] = *v;
  Add(fmt::format("{} kernel", op.attrs.onnx->op_type), [=](cudaStream_t s) {
    cuda::LaunchSoftmax(dtype, in, out, outer, len, inner, log, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

bool CudaExecutor::Impl::PlanOnnxReduce(const Op& op, std::string& why) {
  static const std::map<std::string_view, cuda::ReduceKind> kKinds = {
      {"ReduceSum", cuda::kReduceSum},   {"ReduceMean", cuda::kReduceMean},
      {"ReduceMax", cuda::kReduceMax},   {"ReduceMin", cuda::kReduceMin},
      {"ReduceProd", cuda::kReduceProd}, {"ReduceL1", cuda::kReduceL1},
      {"ReduceL2", cuda::kReduceL2},     {"ReduceSumSquare", cuda::kReduceSumSquare}};
  const OnnxNode& node = *op.attrs.onnx;
  const TensorId x = NodeInput(op, 0), y = op.outputs[0];
  if (x == kNone || !IsFloat(g.tensor(y).dtype) || g.tensor(x).dtype != g.tensor(y).dtype) {
    why = "not a float tensor";
    return false;
  }
  const std::vector<int64_t>& xs = views.shape[static_cast<size_t>(x)];
  std::optional<std::vector<int64_t>> axes;
  const bool axes_given = NodeInput(op, 1) != kNone || (node.input_slots.size() > 1 && node.input_slots[1] <= -2);
  if (axes_given) {
    axes = KnownInts(op, 1);
    if (!axes) {
      why = "its axes are not known when the plan is made";
      return false;
    }
  }
  const std::optional<std::vector<bool>> reduced = cpu::ReducedDims(node, xs.size(), axes ? &*axes : nullptr);
  if (!reduced || xs.size() > 6) {
    why = "an axis is out of range, or rank above 6";
    return false;
  }
  cuda::ReduceArgs a{};
  a.x = PlaceOf(x).base;
  a.y = PlaceOf(y).base;
  a.rank = static_cast<int32_t>(xs.size());
  a.kind = kKinds.at(node.op_type);
  a.out_numel = 1;
  a.count = 1;
  for (size_t d = 0; d < xs.size(); ++d) {
    a.shape[d] = xs[d];
    a.reduced[d] = (*reduced)[d] ? 1 : 0;
    ((*reduced)[d] ? a.count : a.out_numel) *= xs[d];
  }
  if (a.out_numel * DTypeBytes(g.tensor(y).dtype) != Bytes(y)) {
    why = "its output's size does not match";
    return false;
  }
  const int dtype = cuda::KernelType(g.tensor(y).dtype);
  Add(fmt::format("{} kernel", node.op_type), [=](cudaStream_t s) {
    cuda::LaunchReduce(dtype, a, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

bool CudaExecutor::Impl::PlanOnnxCumSum(const Op& op, std::string& why) {
  const TensorId x = NodeInput(op, 0), y = op.outputs[0];
  const std::optional<std::vector<int64_t>> axis_value = KnownInts(op, 1);
  if (x == kNone || !axis_value || axis_value->size() != 1) {
    why = "its axis is not known when the plan is made";
    return false;
  }
  const std::vector<int64_t>& xs = views.shape[static_cast<size_t>(x)];
  const std::optional<size_t> axis = AxisIn((*axis_value)[0], xs.size());
  if (!axis || g.tensor(x).dtype != g.tensor(y).dtype) {
    why = "axis out of range";
    return false;
  }
  cuda::CumSumArgs a{};
  a.x = PlaceOf(x).base;
  a.y = PlaceOf(y).base;
  a.type = static_cast<int32_t>(g.tensor(y).dtype);
  a.exclusive = AttrInt(*op.attrs.onnx, "exclusive", 0) != 0;
  a.reverse = AttrInt(*op.attrs.onnx, "reverse", 0) != 0;
  a.outer = Product(xs, 0, *axis);
  a.len = xs[*axis];
  a.inner = Product(xs, *axis + 1, xs.size());
  Add("cumsum kernel", [a](cudaStream_t s) {
    cuda::LaunchCumSum(a, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

// LayerNormalization the importer kept (the ones it did not make layernorm
// ops): the group LayerNorm kernel with one member.
bool CudaExecutor::Impl::PlanOnnxLayerNorm(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const TensorId x = NodeInput(op, 0), scale = NodeInput(op, 1), bias = NodeInput(op, 2);
  const TensorId y = op.outputs[0];
  const DType dtype = g.tensor(y).dtype;
  const bool stats_used = cuda::ExtraOutputsUsed(node);
  if (x == kNone || scale == kNone || stats_used || !IsFloat(dtype) || g.tensor(x).dtype != dtype ||
      g.tensor(scale).dtype != dtype || (bias != kNone && g.tensor(bias).dtype != dtype)) {
    why = "its mean or deviation output is used, or its operands' types differ";
    return false;
  }
  const std::vector<int64_t>& xs = views.shape[static_cast<size_t>(x)];
  const std::optional<size_t> axis = AxisIn(AttrInt(node, "axis", -1), xs.size());
  if (!axis) {
    why = "axis out of range";
    return false;
  }
  const int64_t n = Product(xs, *axis, xs.size()), rows = Product(xs, 0, *axis);
  if (rows == 0 || n == 0) return true;
  const int esize = static_cast<int>(DTypeBytes(dtype));
  cuda::LayerNormDesc d{PlaceOf(x).base, PlaceOf(y).base, PlaceOf(scale).base,
                        bias != kNone ? PlaceOf(bias).base : nullptr, rows, n, n, n, 0, 32};
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  d.vec = n % (16 / esize) == 0 && aligned(d.x) && aligned(d.y) && aligned(d.gamma) && (!d.beta || aligned(d.beta));
  d.lanes = cuda::LayerNormLanes(n, esize, d.vec != 0);
  std::vector<cuda::LayerNormTile> tiles;
  const int64_t per_tile = cuda::kLayerNormThreads / d.lanes;
  for (int64_t r = 0; r < rows; r += per_tile) {
    tiles.push_back({0, static_cast<int32_t>(std::min(per_tile, rows - r)), r});
  }
  const cuda::LayerNormDesc* dd = Device(std::vector<cuda::LayerNormDesc>{d});
  const cuda::LayerNormTile* tt = Device(tiles);
  const int num_tiles = static_cast<int>(tiles.size());
  const float eps = AttrFloat(node, "epsilon", 1e-5);
  const int type = cuda::KernelType(dtype);
  Add("layernorm kernel", [=](cudaStream_t s) {
    cuda::LaunchGroupLayerNorm(type, dd, tt, num_tiles, eps, false, s);
    HFUSE_LAUNCHED();
  });
  return true;
}

// Inference BatchNormalization: y = x * a + b per channel (dim 1), with
// a = scale / sqrt(var + eps) and b = B - mean * a computed at plan time.
bool CudaExecutor::Impl::PlanOnnxBatchNorm(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const TensorId x = NodeInput(op, 0), y = op.outputs[0];
  const bool stats_used = cuda::ExtraOutputsUsed(node);
  std::optional<std::vector<float>> stats[4];
  for (size_t k = 0; k < 4; ++k) stats[k] = KnownFloats(op, k + 1);
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  if (x == kNone || stats_used || ys.size() < 2 || ys.size() > cuda::kMaxOnnxRank ||
      !IsFloat(g.tensor(y).dtype)) {
    why = "training outputs are used, or the input is not a float tensor of rank 2 or more";
    return false;
  }
  const int64_t c = ys[1];
  for (const auto& s : stats) {
    if (!s || static_cast<int64_t>(s->size()) != c) {
      why = "its statistics are not known when the plan is made";
      return false;
    }
  }
  const float eps = AttrFloat(node, "epsilon", 1e-5);
  std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
  for (size_t i = 0; i < scale.size(); ++i) {
    scale[i] = (*stats[0])[i] / std::sqrt((*stats[3])[i] + eps);
    shift[i] = (*stats[1])[i] - (*stats[2])[i] * scale[i];
  }
  cuda::OnnxElementwiseArgs a{};
  a.func = cuda::kMulAdd;
  a.num_inputs = 3;
  a.in[0] = Operand(x, ys);
  for (int k = 1; k < 3; ++k) {
    a.in[k] = cuda::StridedOperand{};
    a.in[k].ptr = Device(k == 1 ? scale : shift);
    a.in[k].type = a.in[k].as = static_cast<int32_t>(DType::kFloat32);
    a.in[k].strides[1] = 1;
  }
  PlanElementwiseTo(a, y, "batchnorm kernel");
  return true;
}

void CudaExecutor::Impl::PlanBatchedGemm(const MatrixOperand& a, const MatrixOperand& b, const MatrixOperand& c,
                                         int64_t m, int64_t n, int64_t k, int64_t batch, DType dtype, float alpha,
                                         float beta) {
  // Row-major C = A B is column-major C^T = B^T A^T: B first.
  const cublasOperation_t op_b = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t t = cuda::CudaType(dtype);
  cublasHandle_t handle = blas;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int lda = static_cast<int>(a.ld), ldb = static_cast<int>(b.ld), ldci = static_cast<int>(c.ld);
  const int count = static_cast<int>(batch);
  auto stride_of = [&](const std::vector<int64_t>& offsets) -> std::optional<long long> {
    const int64_t s = offsets.size() > 1 ? offsets[1] - offsets[0] : 0;
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (offsets[i] != offsets[0] + static_cast<int64_t>(i) * s) return std::nullopt;
    }
    return s;
  };
  const int64_t esize = DTypeBytes(dtype);
  const std::optional<long long> sa = stride_of(a.batch_offsets), sb = stride_of(b.batch_offsets),
                                 sc = stride_of(c.batch_offsets);
  char* const cbase = const_cast<char*>(c.base);
  if (sa && sb && sc && *sa % esize == 0 && *sb % esize == 0 && *sc % esize == 0) {
    const char* pa = a.base + a.batch_offsets[0];
    const char* pb = b.base + b.batch_offsets[0];
    char* pc = cbase + c.batch_offsets[0];
    const long long ea = *sa / esize, eb = *sb / esize, ec = *sc / esize;
    // Each run splits A and B (a broadcast one once, not once a matrix).
    const int64_t split = (ea == 0 ? 1 : batch) * m * k + (eb == 0 ? 1 : batch) * k * n;
    if (dtype == DType::kFloat32 && batch <= 65535 && options.tf32x3_batched &&
        (options.tf32x3 > 0 || (options.tf32x3 < 0 && cuda::Tf32x3Pays(m, n, k, batch, split, 2)))) {
      PlanBatchedTf32x3(a, b, pa, pb, pc, ea, eb, ec, m, n, k, batch, alpha, beta, ldci);
      return;
    }
    Add("cublasGemmStridedBatchedEx", [=](cudaStream_t s) {
      HFUSE_CUBLAS(cublasSetStream(handle, s));
      HFUSE_CUBLAS(cublasGemmStridedBatchedEx(handle, op_b, op_a, ni, mi, ki, &alpha, pb, t, ldb, eb, pa, t, lda,
                                              ea, &beta, pc, t, ldci, ec, count, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));
    });
    return;
  }
  // Batch dims at strides one stride cannot describe (a transposed head
  // dim, read or written): a pointer per matrix, made at plan time.
  std::vector<const void*> pa, pb;
  std::vector<void*> pc;
  for (int64_t i = 0; i < batch; ++i) {
    pa.push_back(a.base + a.batch_offsets[static_cast<size_t>(i)]);
    pb.push_back(b.base + b.batch_offsets[static_cast<size_t>(i)]);
    pc.push_back(cbase + c.batch_offsets[static_cast<size_t>(i)]);
  }
  const void* const* da = Device(pa);
  const void* const* db = Device(pb);
  void* const* dc = Device(pc);
  Add("cublasGemmBatchedEx", [=](cudaStream_t s) {
    HFUSE_CUBLAS(cublasSetStream(handle, s));
    HFUSE_CUBLAS(cublasGemmBatchedEx(handle, op_b, op_a, ni, mi, ki, &alpha, db, t, ldb, da, t, lda, &beta, dc, t,
                                     ldci, count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  });
}

void CudaExecutor::Impl::AddTf32Split(const cuda::Tf32Split& split, int64_t at, std::string label) {
  tf32x3_scratch_bytes = std::max(tf32x3_scratch_bytes, at + split.OutFloats() * static_cast<int64_t>(sizeof(float)));
  const cuda::DeviceBuffer* scratch = &tf32x3_scratch;
  Add(std::move(label), [=](cudaStream_t s) {
    cuda::LaunchSplitTf32(split, reinterpret_cast<float*>(static_cast<char*>(scratch->ptr) + at), s);
    HFUSE_LAUNCHED();
  }, "moves data: cuBLAS's TF32 GEMM reads the operand's high and low TF32 parts from memory (3xTF32)");
}

// PlanBatchedGemm's strided float32 call in 3xTF32 (CudaOptions::tf32x3,
// grouped_sgemm.h's LaunchSplitTf32): each run splits A and B along K into
// the scratch buffer (a broadcast operand once, not once a matrix), then
// one TF32 strided batched call of depth 3 kp. SAINT's intersample
// attention: 4 heads of 2048 x 2048 x 312 and 2048 x 312 x 2048.
void CudaExecutor::Impl::PlanBatchedTf32x3(const MatrixOperand& a, const MatrixOperand& b, const char* pa,
                                           const char* pb, char* pc, long long ea, long long eb, long long ec,
                                           int64_t m, int64_t n, int64_t k, int64_t batch, float alpha, float beta,
                                           int ldc) {
  // A [m, k] (stored [k, m] where transposed); B [k, n] (stored [n, k] where transposed).
  const cuda::Tf32Split as{.x = reinterpret_cast<const float*>(pa), .batch = ea == 0 ? 1 : batch,
                           .batch_stride = ea, .rows = a.transposed ? k : m, .cols = a.transposed ? m : k,
                           .ld = a.ld, .k_along_rows = a.transposed, .w_order = false};
  const cuda::Tf32Split bs{.x = reinterpret_cast<const float*>(pb), .batch = eb == 0 ? 1 : batch,
                           .batch_stride = eb, .rows = b.transposed ? n : k, .cols = b.transposed ? k : n,
                           .ld = b.ld, .k_along_rows = !b.transposed, .w_order = true};
  const int64_t kp = as.Kp(), depth = 3 * kp;
  const int64_t a_bytes = as.OutFloats() * static_cast<int64_t>(sizeof(float));
  const int64_t b_at = (a_bytes + 255) / 256 * 256;
  const cuda::DeviceBuffer* scratch = &tf32x3_scratch;
  AddTf32Split(as, 0, fmt::format("3xTF32 split kernel, A's TF32 parts, {} of {} x {}", as.batch, m, k));
  AddTf32Split(bs, b_at, fmt::format("3xTF32 split kernel, B's TF32 parts, {} of {} x {}", bs.batch, k, n));
  // Row-major C = A B is column-major C^T = B^T A^T: B first.
  const cublasOperation_t op_b = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(a.transposed ? m : depth), ldb = static_cast<int>(b.transposed ? depth : n);
  const long long sa = ea == 0 ? 0 : depth * m, sb = eb == 0 ? 0 : depth * n;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(depth);
  const int count = static_cast<int>(batch);
  cublasHandle_t handle = blas;
  Add(fmt::format("cublasGemmStridedBatchedEx 3xTF32 on the tensor cores, {} of {} x {} x {}", batch, m, n, k),
      [=](cudaStream_t s) {
        const char* base = static_cast<const char*>(scratch->ptr);
        HFUSE_CUBLAS(cublasSetStream(handle, s));
        HFUSE_CUBLAS(cublasGemmStridedBatchedEx(handle, op_b, op_a, ni, mi, ki, &alpha, base + b_at, CUDA_R_32F, ldb,
                                                sb, base, CUDA_R_32F, lda, sa, &beta, pc, CUDA_R_32F, ldc, ec, count,
                                                CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
      });
  ++stats.tf32x3_launches;
}

// numpy's matmul of operands of rank >= 2: the batch dims broadcast, each
// operand's matrices read in place through their layout.
bool CudaExecutor::Impl::PlanOnnxMatMul(const Op& op, std::string& why) {
  const TensorId ta = NodeInput(op, 0), tb = NodeInput(op, 1), y = op.outputs[0];
  const DType dtype = g.tensor(y).dtype;
  if (ta == kNone || tb == kNone || !IsFloat(dtype) || g.tensor(ta).dtype != dtype || g.tensor(tb).dtype != dtype) {
    why = "not float tensors of one type";
    return false;
  }
  const std::vector<int64_t>& as = views.shape[static_cast<size_t>(ta)];
  const std::vector<int64_t>& bs = views.shape[static_cast<size_t>(tb)];
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  if (as.size() < 2 || bs.size() < 2 || ys.size() != std::max(as.size(), bs.size())) {
    why = "an operand of rank 1";
    return false;
  }
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k || ys[ys.size() - 2] != m || ys.back() != n) {
    why = "shapes do not match";
    return false;
  }
  const std::vector<int64_t> batch_shape(ys.begin(), ys.end() - 2);
  const int64_t batch = Product(batch_shape, 0, batch_shape.size());
  if (batch == 0 || m == 0 || n == 0) return true;
  if (k == 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) {
    why = "a dim of 0 or above 2^31";
    return false;
  }
  auto operand = [&](TensorId t, const std::vector<int64_t>& s, MatrixOperand& out) {
    const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
    const std::optional<cuda::MatrixView> mv = cuda::AsMatrix(l, s);
    if (!mv) return false;
    out.base = BufferOf(l.root) + l.offset * DTypeBytes(l.root_dtype);
    out.transposed = mv->transposed;
    out.ld = mv->ld;
    // The byte offset of each output batch's matrix (broadcast dims: 0).
    const size_t lead = batch_shape.size() - (s.size() - 2);
    std::vector<int64_t> index(batch_shape.size(), 0);
    for (int64_t i = 0; i < batch; ++i) {
      int64_t off = 0;
      for (size_t d = lead; d < batch_shape.size(); ++d) {
        const size_t sd = d - lead;
        if (s[sd] != 1) off += index[d] * l.strides[sd];
      }
      out.batch_offsets.push_back(off * DTypeBytes(dtype));
      for (size_t d = batch_shape.size(); d-- > 0;) {
        if (++index[d] < batch_shape[d]) break;
        index[d] = 0;
      }
    }
    return true;
  };
  MatrixOperand a, b, c;
  if (!operand(ta, as, a) || !operand(tb, bs, b)) {
    why = "an operand's matrix has no unit stride";
    return false;
  }
  // C through its layout: row-major, or in the order of the Transpose that
  // reads it (view_plan.h), a pointer per matrix where one stride cannot
  // step between them.
  HFUSE_CHECK(operand(y, ys, c) && !c.transposed);
  PlanBatchedGemm(a, b, c, m, n, k, batch, dtype, 1.0f, 0.0f);
  return true;
}

// Gemm in the forms the importer did not make gemm_rcr ops of:
// Y = alpha op(A) op(B) + beta C, C broadcast into Y first.
bool CudaExecutor::Impl::PlanOnnxGemm(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const TensorId ta = NodeInput(op, 0), tb = NodeInput(op, 1), tc = NodeInput(op, 2), y = op.outputs[0];
  const DType dtype = g.tensor(y).dtype;
  const bool c_kept = node.input_slots.size() > 2 && node.input_slots[2] <= -2;
  if (ta == kNone || tb == kNone || c_kept || !IsFloat(dtype) || g.tensor(ta).dtype != dtype ||
      g.tensor(tb).dtype != dtype) {
    why = "not float tensors of one type";
    return false;
  }
  const std::vector<int64_t>& as = views.shape[static_cast<size_t>(ta)];
  const std::vector<int64_t>& bs = views.shape[static_cast<size_t>(tb)];
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  if (as.size() != 2 || bs.size() != 2 || ys.size() != 2) {
    why = "A or B not 2-D";
    return false;
  }
  const bool trans_a = AttrInt(node, "transA", 0) != 0, trans_b = AttrInt(node, "transB", 0) != 0;
  const int64_t m = ys[0], n = ys[1], k = trans_a ? as[0] : as[1];
  if (m == 0 || n == 0) return true;
  if (k == 0 || (trans_b ? bs[1] : bs[0]) != k) {
    why = "inner dims differ, or are 0";
    return false;
  }
  float beta = 0.0f;
  if (tc != kNone) {
    const std::vector<int64_t>& cs = views.shape[static_cast<size_t>(tc)];
    if (cs.size() > 2) {
      why = "C of rank above 2";
      return false;
    }
    PlanStridedCopy(Operand(tc, ys), PlaceOf(y).base, cuda::RowMajorStrides(ys), dtype, ys, "gemm C kernel",
                    "Gemm's C, copied into Y for the GEMM to add to");
    beta = AttrFloat(node, "beta", 1.0);
  }
  MatrixOperand a{PlaceOf(ta).base, {0}, trans_a, as[1]};
  MatrixOperand b{PlaceOf(tb).base, {0}, trans_b, bs[1]};
  const MatrixOperand c{PlaceOf(y).base, {0}, false, n};
  PlanBatchedGemm(a, b, c, m, n, k, 1, dtype, AttrFloat(node, "alpha", 1.0), beta);
  return true;
}

// A Conv with kernel 1 (stride 1, no padding, one group), such as xDeepFM's
// CIN: per batch element y[b] = W [O, C] . x[b] [C, L], one strided-batched
// GEMM with W broadcast, then the bias added in place.
bool CudaExecutor::Impl::PlanOnnxConv(const Op& op, std::string& why) {
  const OnnxNode& node = *op.attrs.onnx;
  const TensorId x = NodeInput(op, 0), w = NodeInput(op, 1), bias = NodeInput(op, 2), y = op.outputs[0];
  const DType dtype = g.tensor(y).dtype;
  if (x == kNone || w == kNone || !IsFloat(dtype) || g.tensor(x).dtype != dtype || g.tensor(w).dtype != dtype) {
    why = "not float tensors of one type";
    return false;
  }
  const std::vector<int64_t>& xs = views.shape[static_cast<size_t>(x)];
  const std::vector<int64_t>& ws = views.shape[static_cast<size_t>(w)];
  const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
  auto all = [&](const std::string& attr, int64_t v) {
    auto it = node.ints.find(attr);
    return it == node.ints.end() || std::all_of(it->second.begin(), it->second.end(), [&](int64_t e) { return e == v; });
  };
  auto pad = node.strings.find("auto_pad");
  const bool pointwise = xs.size() >= 3 && xs.size() <= cuda::kMaxOnnxRank && ws.size() == xs.size() &&
                         std::all_of(ws.begin() + 2, ws.end(), [](int64_t d) { return d == 1; }) &&
                         all("strides", 1) && all("dilations", 1) && all("pads", 0) && all("group", 1) &&
                         (pad == node.strings.end() || pad->second == "NOTSET" || pad->second == "VALID");
  if (!pointwise || ws[1] != xs[1] || ys[0] != xs[0] || ys[1] != ws[0]) {
    why = "a kernel of more than one element, or strides, padding, dilations or groups";
    return false;
  }
  const int64_t batch = xs[0], c = xs[1], o = ws[0], len = Product(xs, 2, xs.size());
  if (batch == 0 || o == 0 || len == 0) return true;
  if (c == 0 || batch > INT32_MAX || len > INT32_MAX) {
    why = "no channels, or a dim above 2^31";
    return false;
  }
  const int64_t esize = DTypeBytes(dtype);
  MatrixOperand a{PlaceOf(w).base, std::vector<int64_t>(static_cast<size_t>(batch), 0), false, c};
  MatrixOperand b{PlaceOf(x).base, {}, false, len};
  for (int64_t i = 0; i < batch; ++i) b.batch_offsets.push_back(i * c * len * esize);
  char* out = PlaceOf(y).base;
  MatrixOperand into{out, {}, false, len};
  for (int64_t i = 0; i < batch; ++i) into.batch_offsets.push_back(i * o * len * esize);
  PlanBatchedGemm(a, b, into, o, len, c, batch, dtype, 1.0f, 0.0f);
  if (bias != kNone) {
    cuda::OnnxElementwiseArgs e{};
    e.func = cuda::kAdd;
    e.num_inputs = 2;
    e.in[0] = Operand(y, ys);
    e.in[1] = cuda::StridedOperand{};
    const cuda::StridedOperand bo = Operand(bias, std::vector<int64_t>{o});
    e.in[1].ptr = bo.ptr;
    e.in[1].type = bo.type;
    e.in[1].as = bo.as;
    e.in[1].strides[1] = bo.strides[0];
    PlanElementwiseTo(e, y, "conv bias kernel");
  }
  return true;
}

bool CudaExecutor::Impl::PlanOnnxHost(const Op&, std::string& why) {
  why = "no CUDA kernel (onnx_ops.def)";
  return false;
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

void CudaExecutor::Impl::PlanOnHost(const Op& op, const std::string& why) {
  stats.host_ops.push_back(fmt::format("{} (ONNX {}): {}", op.name, op.attrs.onnx->op_type, why));
  auto h = std::make_unique<cuda::HostOp>();
  h->name = op.name;
  h->node = op.attrs.onnx;
  // An input that is a view its rows cannot describe (a transposed
  // operand, a Cast read on load: readers of any view are planned so even
  // where their op then falls back here) is first copied row-major into a
  // device buffer of its own, which the host copy then reads.
  std::vector<const void*> gathered;
  for (TensorId t : op.inputs) {
    const std::vector<int64_t> shape = ConcreteShape(g.tensor(t).shape, dims);
    h->in.emplace_back(g.tensor(t).dtype, shape, g.tensor(t).name);
    h->in_staged.push_back(std::make_unique<cuda::PinnedBuffer>(Bytes(t)));
    const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
    const void* from = nullptr;
    if (Bytes(t) > 0 && (l.root_dtype != g.tensor(t).dtype || !cuda::RowStride(l, views.shape[static_cast<size_t>(t)]))) {
      descriptors.push_back(std::make_unique<cuda::DeviceBuffer>());
      descriptors.back()->Allocate(Bytes(t));
      PlanStridedCopy(Operand(t, shape), descriptors.back()->ptr, cuda::RowMajorStrides(shape), g.tensor(t).dtype, shape,
                      "copy kernel (a view for the host)", "a view copied for an op run on the host");
      from = descriptors.back()->ptr;
    }
    gathered.push_back(from);
  }
  for (TensorId t : op.outputs) {
    // Written back as rows (CopyPlace): the view plan lays out no host op's
    // output otherwise.
    HFUSE_CHECK(cuda::RowStride(views.layout[static_cast<size_t>(t)], views.shape[static_cast<size_t>(t)]));
    h->out.emplace_back(g.tensor(t).dtype, ConcreteShape(g.tensor(t).shape, dims), g.tensor(t).name);
    h->out_staged.push_back(std::make_unique<cuda::PinnedBuffer>(Bytes(t)));
  }
  cuda::HostOp* raw = h.get();
  host_ops.push_back(std::move(h));
  const std::vector<TensorId> ins = op.inputs, outs = op.outputs;
  Add(fmt::format("on the host: ONNX {}", op.attrs.onnx->op_type), [this, raw, ins, outs, gathered](cudaStream_t s) {
    for (size_t k = 0; k < ins.size(); ++k) {
      if (gathered[k]) {
        HFUSE_CUDA(cudaMemcpyAsync(raw->in_staged[k]->ptr, gathered[k], static_cast<size_t>(Bytes(ins[k])),
                                   cudaMemcpyDeviceToHost, s));
      } else {
        CopyPlace(ins[k], raw->in_staged[k]->ptr, true, s);
      }
    }
    HFUSE_CUDA(cudaLaunchHostFunc(s, RunHostOp, raw));
    for (size_t k = 0; k < outs.size(); ++k) CopyPlace(outs[k], raw->out_staged[k]->ptr, false, s);
  });
}

void CudaExecutor::Impl::CheckHostOps() {
  if (!index_checks.empty()) {
    std::vector<int> bad(index_checks.size(), 0);
    HFUSE_CUDA(cudaMemcpy(bad.data(), index_flags.ptr, bad.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bad.size(); ++i) {
      if (!bad[i]) continue;
      HFUSE_CUDA(cudaMemset(index_flags.ptr, 0, static_cast<size_t>(index_flags.bytes)));
      ThrowInputError("op '{}' ({}): an index is out of range", index_checks[i].op, index_checks[i].what);
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

std::string CudaExecutor::Impl::FfnNote(OpId act) const {
  const auto below = fusion.ffn_below_rule.find(act);
  if (below == fusion.ffn_below_rule.end()) return "";
  const cuda::FusionPlan::FfnBelow& b = below->second;
  return fmt::format("; its FFN block, {} rows, is below the FFN kernel's rule of {} (ffn.h, {})", b.rows, b.min_rows,
                     b.gated ? "kFfnGatedMinRows" : "kFfnMinRows");
}

std::string CudaExecutor::Impl::ApartWhy(OpId first, TensorId y) const {
  return ApartNeighbours(first, y) + (first == kNone ? "" : FfnNote(first));
}

std::string CudaExecutor::Impl::ApartNeighbours(OpId first, TensorId y) const {
  if (first == kNone) return "no neighbour's kernel took it";
  if (const auto it = kept_apart.find(first); it != kept_apart.end()) return it->second;
  const auto name = [&](const Op& op) {
    return op.attrs.onnx ? op.attrs.onnx->op_type : std::string(OpTypeName(op.type));
  };
  const auto is_gemm = [&](const Op& op) { return IsGemm(op.type) || IsGroupGemm(op.type); };
  // The op that made its first computed input, back through views.
  std::string before = "graph inputs or constants";
  for (TensorId in : g.op(first).inputs) {
    OpId p = in == kNone ? kNone : g.tensor(in).producer;
    while (p != kNone && views.view_op[static_cast<size_t>(p)] && !g.op(p).inputs.empty() &&
           g.op(p).inputs[0] != kNone) {
      p = g.tensor(g.op(p).inputs[0]).producer;
    }
    if (p == kNone) continue;
    const Op& q = g.op(p);
    if (is_gemm(q)) {
      return fmt::format("after GEMM '{}', whose kernel's epilogue takes no {}", q.name, name(g.op(first)));
    }
    before = fmt::format("'{}' ({})", q.name, name(q));
    break;
  }
  // What reads y, forward through views.
  std::string after = "the graph's output";
  TensorId t = y;
  while (!g.IsGraphOutput(t) && !g.tensor(t).users.empty()) {
    const Op& u = g.op(g.tensor(t).users[0]);
    if (views.view_op[static_cast<size_t>(g.tensor(t).users[0])] && u.outputs.size() == 1 &&
        g.tensor(t).users.size() == 1) {
      t = u.outputs[0];
      continue;
    }
    if (is_gemm(u)) return fmt::format("before GEMM '{}', which reads its operands from memory (after {})", u.name, before);
    after = fmt::format("'{}' ({})", u.name, name(u));
    break;
  }
  return fmt::format("after {}, before {}: neither kernel takes an elementwise op in, and no fused region took it",
                     before, after);
}

}  // namespace hfuse
