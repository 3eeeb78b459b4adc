// The CPU reference executor. See cpu_executor.h.
#include "hfuse/exec/cpu_executor.h"

#include <algorithm>
#include <chrono>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <random>

#include "cpu_fast_kernels.h"
#include "cpu_group_rule.h"
#include "cpu_kernels.h"
#include "cpu_onnx_ops.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/onnx_ops.h"
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

// When a tensor's buffer can go: after the last op that reads it, or reads
// a view of it, or writes a view into it (passes/strided_views.h). Graph
// outputs are kept; a tensor nobody reads goes right after its producer.
// The largest live set is what the run must hold at once: inputs and params
// throughout, each intermediate from its producer to its last use.
struct MemoryPlan {
  std::vector<std::vector<TensorId>> release_after;  // per step of the order
  int64_t largest_live_bytes = 0;
};

}  // namespace

// What a run works out before its first op, from the graph and the dim
// values alone: every tensor's shape and bytes (checked against the budget:
// CheckTensorSizes), the op order and the memory plan.
struct CpuRunPlans::Plan {
  const Graph* graph = nullptr;
  std::vector<std::vector<int64_t>> shapes;  // by tensor id (live ones)
  std::vector<int64_t> bytes;
  std::vector<OpId> order;
  MemoryPlan memory;
};

namespace {

MemoryPlan PlanMemory(const Graph& g, const std::vector<OpId>& order, const DimValues& dims) {
  const auto n = static_cast<size_t>(g.num_tensor_ids());
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t i = 0; i < order.size(); ++i) {
    const Op& op = g.op(order[i]);
    for (TensorId t : op.inputs) last[static_cast<size_t>(t)] = static_cast<int64_t>(i);
    for (TensorId t : op.outputs) {
      first[static_cast<size_t>(t)] = static_cast<int64_t>(i);
      last[static_cast<size_t>(t)] = std::max(last[static_cast<size_t>(t)], static_cast<int64_t>(i));
    }
  }
  // A view's root lives as long as the view is read or written.
  for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
    const Tensor& t = g.tensor(id);
    if (!t.alive || t.storage == kNone) continue;
    auto& root_first = first[static_cast<size_t>(t.storage)];
    auto& root_last = last[static_cast<size_t>(t.storage)];
    const int64_t f = first[static_cast<size_t>(id)], l = last[static_cast<size_t>(id)];
    if (f >= 0) root_first = root_first < 0 ? f : std::min(root_first, f);
    root_last = std::max(root_last, l);
  }
  std::vector<bool> keep(n, false);
  for (TensorId t : g.outputs()) keep[static_cast<size_t>(t)] = true;
  MemoryPlan plan;
  plan.release_after.resize(order.size());
  std::vector<int64_t> delta(order.size() + 1, 0);
  int64_t fixed = 0;
  for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
    const Tensor& t = g.tensor(id);
    if (!t.alive) continue;
    const std::vector<int64_t> shape = ConcreteShape(t.shape, dims);
    const int64_t bytes = ByteCountOf(shape, DTypeBytes(t.dtype), t.name);
    const auto i = static_cast<size_t>(id);
    if (t.role != Role::kIntermediate) {
      fixed += bytes;
      continue;
    }
    if (first[i] < 0) continue;  // never made (an op that did not run)
    const int64_t end = keep[i] ? static_cast<int64_t>(order.size()) - 1 : last[i];
    delta[static_cast<size_t>(first[i])] += bytes;
    delta[static_cast<size_t>(end) + 1] -= bytes;
    if (!keep[i]) plan.release_after[static_cast<size_t>(end)].push_back(id);
  }
  int64_t live = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    live += delta[i];
    plan.largest_live_bytes = std::max(plan.largest_live_bytes, live);
  }
  plan.largest_live_bytes += fixed;
  return plan;
}

std::unique_ptr<CpuRunPlans::Plan> MakePlan(const Graph& g, const DimValues& dims) {
  CheckTensorSizes(g, dims);
  auto plan = std::make_unique<CpuRunPlans::Plan>();
  plan->graph = &g;
  plan->shapes.resize(static_cast<size_t>(g.num_tensor_ids()));
  plan->bytes.resize(plan->shapes.size(), 0);
  for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
    const Tensor& t = g.tensor(id);
    if (!t.alive) continue;
    const auto i = static_cast<size_t>(id);
    plan->shapes[i] = ConcreteShape(t.shape, dims);
    const std::optional<int64_t> bytes = ByteCount(plan->shapes[i], DTypeBytes(t.dtype));
    HFUSE_CHECK(bytes.has_value());  // CheckTensorSizes counted it
    plan->bytes[i] = *bytes;
  }
  plan->order = StableTopologicalOrder(g);
  plan->memory = PlanMemory(g, plan->order, dims);
  return plan;
}

int64_t Bytes(const HostTensor& t) { return static_cast<int64_t>(t.bytes.size()); }

class CpuRun {
 public:
  CpuRun(const Graph& graph, const DimValues& dims, const CpuRunOptions& options)
      : g_(graph), dims_(dims), options_(options), owned_(static_cast<size_t>(graph.num_tensor_ids())),
        value_(owned_.size(), nullptr), kept_param_(owned_.size(), false) {}

  // Every live tensor's value (views gathered from their storage).
  std::vector<HostTensor> All() {
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      if (g_.tensor(id).alive && g_.tensor(id).storage != kNone) In(id);
    }
    std::vector<HostTensor> all(owned_.size());
    for (size_t i = 0; i < owned_.size(); ++i) {
      if (value_[i] == &owned_[i]) {
        all[i] = std::move(owned_[i]);
      } else if (value_[i]) {
        all[i] = *value_[i];
      }
    }
    return all;
  }

  TensorMap Run(const TensorMap& feeds) {
    if (options_.plans) {
      plan_ = &options_.plans->For(g_, dims_);
    } else {
      own_plan_ = MakePlan(g_, dims_);
      plan_ = own_plan_.get();
    }
    if (options_.pool) options_.pool->BeginRun();
    if (!options_.reference) cpu::fast::SetThreads(options_.threads);
    // The fast kernels' pool splits products, not OpenBLAS; the reference
    // kernels keep OpenBLAS's own threads.
    std::optional<cpu::fast::SingleThreadedBlas> blas;
    if (!options_.reference) blas.emplace();
    for (TensorId id = 0; id < g_.num_tensor_ids(); ++id) {
      const Tensor& t = g_.tensor(id);
      if (!t.alive || t.role == Role::kIntermediate) continue;
      const HostTensor* given = nullptr;
      if (auto it = feeds.find(t.name); it != feeds.end()) {
        given = &it->second;
      } else if (options_.params) {
        if (auto p = options_.params->find(t.name); p != options_.params->end()) {
          given = &p->second;
          kept_param_[static_cast<size_t>(id)] = true;
        }
      }
      if (!given && t.data) {  // a param that came with its values
        owned_[static_cast<size_t>(id)] = ParamValue(t, dims_);
        value_[static_cast<size_t>(id)] = &owned_[static_cast<size_t>(id)];
        continue;
      }
      if (!given) ThrowInputError("no value given for {} '{}'", RoleName(t), t.name);
      const HostTensor& v = *given;
      const std::vector<int64_t>& want = plan_->shapes[static_cast<size_t>(id)];
      if (v.dtype != t.dtype || v.shape != want) {
        ThrowInputError("value for '{}' is {} [{}], expected {} [{}]", t.name,
                        DTypeName(v.dtype), fmt::join(v.shape, ", "), DTypeName(t.dtype),
                        fmt::join(want, ", "));
      }
      value_[static_cast<size_t>(id)] = &v;  // read in place, never copied
    }
    const std::vector<OpId>& order = plan_->order;
    for (size_t step = 0; step < order.size(); ++step) {
      step_ = step;
      const Op& op = g_.op(order[step]);
      if (options_.profile) {
        Profiled(op);
      } else {
        Execute(op);
      }
      if (!options_.keep_all) {
        for (TensorId t : plan_->memory.release_after[step]) Release(t);
      }
    }
    if (!options_.reference) cpu::fast::ParkThreads();  // nothing more to split until the next run
    if (options_.memory) {
      options_.memory->largest_live_bytes = plan_->memory.largest_live_bytes;
      options_.memory->peak_bytes = peak_;
    }
    TensorMap out;
    int64_t handed_over = 0;
    for (TensorId id : g_.outputs()) {
      const size_t i = static_cast<size_t>(id);
      HostTensor& v = owned_[i];
      // Moved out, unless the run keeps every value (All() hands them over).
      const bool move = value_[i] == &v && !options_.keep_all;
      if (move) handed_over += Bytes(v);
      out[g_.tensor(id).name] = move ? std::move(v) : *value_[i];
    }
    if (options_.pool) options_.pool->Trim(static_cast<size_t>(std::max<int64_t>(0, footprint_ - handed_over)));
    return out;
  }

 private:
  static const char* RoleName(const Tensor& t) { return t.role == Role::kInput ? "input" : "param"; }

  // A view (passes/strided_views.h) is gathered from its storage when first
  // read, and scattered into it right after its producer wrote it.
  const HostTensor& In(TensorId id) {
    const auto i = static_cast<size_t>(id);
    const Tensor& tensor = g_.tensor(id);
    if (tensor.storage != kNone && !value_[i]) {
      HostTensor& t = Own(id);
      CopyRows(*value_[static_cast<size_t>(tensor.storage)], tensor.storage_offset, t, 0, true);
    }
    HFUSE_CHECK(value_[i] != nullptr);
    return *value_[i];
  }
  HostTensor& Out(TensorId id) { return Own(id); }
  HostTensor& Own(TensorId id) {
    const auto i = static_cast<size_t>(id);
    HostTensor& t = owned_[i];
    live_ -= Bytes(t);
    if (options_.pool && g_.tensor(id).role == Role::kIntermediate) {
      Give(t);
      t.dtype = g_.tensor(id).dtype;
      t.shape = plan_->shapes[i];
      const int64_t n = plan_->bytes[i];
      t.bytes = Allocate(n, [&] { return Named(id); }, [&] { return options_.pool->Take(static_cast<size_t>(n)); });
    } else {
      t = HostTensor(g_.tensor(id).dtype, plan_->shapes[i], Named(id));
      if (options_.pool && options_.pool->poison()) std::fill(t.bytes.begin(), t.bytes.end(), uint8_t{0xFF});
    }
    value_[i] = &t;
    live_ += Bytes(t);
    peak_ = std::max(peak_, live_);
    if (options_.pool) footprint_ = std::max(footprint_, live_ + static_cast<int64_t>(options_.pool->bytes()));
    return t;
  }
  void Release(TensorId id) {
    const auto i = static_cast<size_t>(id);
    if (value_[i] != &owned_[i]) return;
    live_ -= Bytes(owned_[i]);
    Give(owned_[i]);
    owned_[i] = HostTensor();
    value_[i] = nullptr;
  }
  void Give(HostTensor& t) {
    if (options_.pool && !t.bytes.empty()) options_.pool->Give(std::move(t.bytes));
    t.bytes = {};
  }
  // Whether `id`'s buffer may be taken over by the op at this step: an
  // intermediate, no view, no graph output, read for the last time here.
  bool LastRead(TensorId id) const {
    const auto i = static_cast<size_t>(id);
    if (options_.keep_all || value_[i] != &owned_[i] || g_.tensor(id).storage != kNone) return false;
    const std::vector<TensorId>& going = plan_->memory.release_after[step_];
    // (A root's release waits for the last read of its views: PlanMemory.)
    return std::find(going.begin(), going.end(), id) != going.end();
  }
  // The output takes the input's bytes (a reshape): moved when this is the
  // input's last read, copied otherwise.
  void SameBytes(TensorId in, TensorId out) {
    if (!options_.reference && LastRead(in) && g_.tensor(out).storage == kNone) {
      HostTensor& x = owned_[static_cast<size_t>(in)];
      HostTensor& y = owned_[static_cast<size_t>(out)];
      Give(y);
      y.dtype = g_.tensor(out).dtype;
      y.shape = plan_->shapes[static_cast<size_t>(out)];
      y.bytes = std::move(x.bytes);
      x = HostTensor();
      value_[static_cast<size_t>(in)] = nullptr;
      value_[static_cast<size_t>(out)] = &y;  // live_ unchanged: the bytes moved
      return;
    }
    const HostTensor& x = In(in);
    HostTensor& y = Out(out);
    HFUSE_CHECK(y.bytes.size() == x.bytes.size());
    if (!x.bytes.empty()) std::memcpy(y.bytes.data(), x.bytes.data(), x.bytes.size());
  }
  std::string Named(TensorId id) const { return fmt::format("tensor '{}'", g_.tensor(id).name); }
  void ScatterViews(const Op& op) {
    for (TensorId out : op.outputs) {
      const Tensor& tensor = g_.tensor(out);
      if (tensor.storage == kNone) continue;
      const auto root = static_cast<size_t>(tensor.storage);
      if (!value_[root]) Own(tensor.storage);
      CopyRows(*value_[static_cast<size_t>(out)], 0, owned_[root], tensor.storage_offset, false);
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

  // Execute, timed, with the op's bytes (every operand read and result
  // written once) and FLOPs (2 per multiply-add of a product; 1 per
  // element of the rest).
  void Profiled(const Op& op) {
    const auto start = std::chrono::steady_clock::now();
    Execute(op);
    const auto end = std::chrono::steady_clock::now();
    CpuOpProfile p;
    p.op = op.name;
    p.kind = op.type == OpType::kOpaque && op.attrs.onnx ? op.attrs.onnx->op_type
                                                         : std::string(OpTypeName(op.type));
    if (NumMembers(op) > 1 && IsGroupOp(op.type)) {
      p.kind += fmt::format(" x{} {}", NumMembers(op), group_path_);
    }
    p.us = std::chrono::duration<double, std::micro>(end - start).count();
    if (!op.elided) {
      for (TensorId t : op.inputs) p.bytes += TensorBytes(t);
      for (TensorId t : op.outputs) p.bytes += TensorBytes(t);
      p.flops = Flops(op);
    }
    options_.profile->push_back(std::move(p));
  }
  // From the run's plan (its shapes counted once, when it was made).
  int64_t TensorBytes(TensorId id) const { return plan_->bytes[static_cast<size_t>(id)]; }
  int64_t Numel(TensorId id) const {
    return plan_->bytes[static_cast<size_t>(id)] / DTypeBytes(g_.tensor(id).dtype);
  }
  const std::vector<int64_t>& Shape(TensorId id) const { return plan_->shapes[static_cast<size_t>(id)]; }
  int64_t Flops(const Op& op) const {
    if (IsGemm(op.type) || IsGroupGemm(op.type)) {
      int64_t f = 0;
      for (size_t m = 0; m < NumMembers(op); ++m) {
        const GemmMember mem = GemmMemberOf(op, m);
        f += 2 * Numel(mem.y) * Shape(mem.a).back();
      }
      return f;
    }
    if (op.type == OpType::kOpaque && op.attrs.onnx && !op.outputs.empty() && !op.inputs.empty()) {
      const std::string& type = op.attrs.onnx->op_type;
      const int64_t y = Numel(op.outputs[0]);
      if (type == "MatMul" || type == "Gemm") {
        const std::vector<int64_t> a = Shape(op.inputs[0]);
        const bool ta = type == "Gemm" && !op.attrs.onnx->ints.empty() &&
                        op.attrs.onnx->ints.count("transA") && op.attrs.onnx->ints.at("transA")[0] != 0;
        const int64_t k = a.empty() ? 1 : ta ? a[0] : a.back();
        return 2 * y * k;
      }
      if (type == "Conv" && op.inputs.size() >= 2) {
        const std::vector<int64_t> w = Shape(op.inputs[1]);
        int64_t per = 1;
        for (size_t d = 1; d < w.size(); ++d) per *= w[d];
        return 2 * y * per;
      }
      return y;
    }
    return op.outputs.empty() ? 0 : Numel(op.outputs[0]);
  }

  void ExecuteOp(const Op& op) {
    switch (FamilyOf(op.type)) {
      case OpFamily::kGemm:
      case OpFamily::kGroupGemm:
        if (!options_.reference && FastGemms(op)) break;
        for (size_t m = 0; m < NumMembers(op); ++m) Gemm(op, GemmMemberOf(op, m));
        break;
      case OpFamily::kLayerNorm:
      case OpFamily::kGroupLayerNorm:
        if (!options_.reference && FastLayerNorms(op)) break;
        for (size_t m = 0; m < NumMembers(op); ++m) {
          LayerNorm(LayerNormMemberOf(op, m), op.attrs.Eps(),
                    ActivationOf(op.type) == EwFunc::kSigmoid);
        }
        break;
      case OpFamily::kSplit: Split(op); break;
      case OpFamily::kConcatenate: Concatenate(op); break;
      case OpFamily::kElementwise:
        if (!options_.reference && FastElementwise(op)) break;
        Elementwise(op);
        break;
      case OpFamily::kReshape: SameBytes(op.inputs[0], op.outputs[0]); break;
      case OpFamily::kGroupGather:
        if (!options_.reference && FastGathers(op)) break;
        for (size_t m = 0; m < NumMembers(op); ++m) MemberGather(op, m);
        break;
      case OpFamily::kOpaque: Opaque(op); break;
    }
  }

  // Member m of a group gather, by the ONNX Gather's own kernel under the
  // member's name: the bytes, and the error for an id out of range, of the
  // Gather the model had.
  void MemberGather(const Op& op, size_t m) {
    static const OnnxNode kGather = [] {
      OnnxNode n;
      n.op_type = "Gather";  // axis 0, the only one fuse-group-gathers groups
      return n;
    }();
    const GatherMember mem = GatherMemberOf(op, m);
    cpu::RunOnnxOp(op.attrs.onnx->member_names[m], kGather, {&In(mem.table), &In(mem.ids)},
                   {&Out(mem.y)});
  }

  // A group gather's members side by side (cpu_group_rule.h, by bytes
  // moved), each a row copy per id as the reference's. The ids are all read
  // and checked first, on one thread, so that a bad one is reported by the
  // reference kernel (MemberGather) with its message before anything runs.
  bool FastGathers(const Op& op) {
    struct Job {
      const uint8_t* table;
      uint8_t* y;
      std::vector<int64_t> rows;
      size_t width;  // bytes per row
    };
    std::vector<Job> jobs(NumMembers(op));
    std::vector<double> cost;
    for (size_t m = 0; m < jobs.size(); ++m) {
      const GatherMember mem = GatherMemberOf(op, m);
      const HostTensor& table = In(mem.table);
      const HostTensor& ids = In(mem.ids);
      const int64_t len = table.shape[0];
      Job& j = jobs[m];
      j.table = table.bytes.data();
      j.width = static_cast<size_t>(Product(table.shape, 1, table.shape.size()) * DTypeBytes(table.dtype));
      j.rows.resize(static_cast<size_t>(ids.numel()));
      for (int64_t i = 0; i < ids.numel(); ++i) {
        int64_t at = ids.GetInt(i);
        if (at < 0) at += len;
        if (at < 0 || at >= len) {
          MemberGather(op, m);  // throws the Gather's own error
          HFUSE_CHECK(false && "the reference accepted an id the fast path did not");
        }
        j.rows[static_cast<size_t>(i)] = at;
      }
      cost.push_back(static_cast<double>(j.rows.size() * j.width));
    }
    for (size_t m = 0; m < jobs.size(); ++m) jobs[m].y = Out(GatherMemberOf(op, m).y).bytes.data();
    RunMembers(cost, [&](size_t m, bool parallel) {
      const Job& j = jobs[m];
      const auto copy = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          std::memcpy(j.y + static_cast<size_t>(i) * j.width,
                      j.table + static_cast<size_t>(j.rows[static_cast<size_t>(i)]) * j.width, j.width);
        }
      };
      const auto n = static_cast<int64_t>(j.rows.size());
      if (parallel) {  // parts of at least 64 KiB
        const auto width = std::max<int64_t>(1, static_cast<int64_t>(j.width));
        cpu::fast::ParallelFor(n, std::max<int64_t>(1, (int64_t{1} << 16) / width), copy);
      } else {
        copy(0, n);
      }
    });
    return true;
  }

  void Opaque(const Op& op) {
    const OnnxNode& node = *op.attrs.onnx;
    // Same bytes, another shape: the output takes the input's buffer.
    if (!options_.reference && op.outputs.size() == 1 && !op.inputs.empty() &&
        (node.input_slots.empty() || node.input_slots[0] == 0) && (node.domain.empty() || node.domain == "ai.onnx")) {
      const OnnxOpInfo* info = FindOnnxOp(node.op_type);
      if (info && info->cpu == "SameBytes" && (node.output_slots.empty() || node.output_slots[0] == 0) &&
          Numel(op.inputs[0]) == Numel(op.outputs[0]) &&
          g_.tensor(op.inputs[0]).dtype == g_.tensor(op.outputs[0]).dtype) {
        SameBytes(op.inputs[0], op.outputs[0]);
        return;
      }
    }
    std::vector<const HostTensor*> in;
    for (TensorId t : op.inputs) in.push_back(&In(t));
    std::vector<HostTensor*> out;
    for (TensorId t : op.outputs) out.push_back(&Out(t));
    cpu::RunOnnxOp(op.name, node, in, out, !options_.reference);
  }

  // ---- fast paths of the IR ops (float32; others take the reference) ----
  bool AllF32(const Op& op) const {
    for (TensorId t : op.inputs) {
      if (g_.tensor(t).dtype != DType::kFloat32) return false;
    }
    for (TensorId t : op.outputs) {
      if (g_.tensor(t).dtype != DType::kFloat32) return false;
    }
    return true;
  }
  static const float* F(const HostTensor& t) { return reinterpret_cast<const float*>(t.bytes.data()); }
  static float* F(HostTensor& t) { return reinterpret_cast<float*>(t.bytes.data()); }

  struct GemmJob {
    const float *a, *w, *bias;
    float* y;
    int64_t rows, n, k;
    const float* packed;  // w packed (CpuPackedWeights), or null
    std::optional<EwFunc> act;  // the member's activation (its GEMM kind's)
  };
  // A GEMM or a group of them on the tensors' bytes. A group's members run
  // side by side, one thread each with a single-threaded product, when that
  // balances (cpu_group_rule.h); else one after another, each split over the
  // threads. The result is the same bytes either way.
  bool FastGemms(const Op& op) {
    if (!AllF32(op)) return false;
    std::vector<GemmJob> jobs;
    for (size_t m = 0; m < NumMembers(op); ++m) {
      const GemmMember mem = GemmMemberOf(op, m);
      const HostTensor& a = In(mem.a);
      const HostTensor& w = In(mem.w);
      const int64_t k = a.shape.back(), n = w.shape[0];
      const int64_t rows = k > 0 ? a.numel() / k : Product(a.shape, 0, a.shape.size() - 1);
      if (rows > INT32_MAX || n > INT32_MAX || k > INT32_MAX) return false;  // the reference says why
      const float* bias = mem.bias != kNone ? F(In(mem.bias)) : nullptr;
      // A weight the session keeps is packed once (here, before the members
      // may run side by side), not on every call.
      const float* packed = options_.packed && kept_param_[static_cast<size_t>(mem.w)] &&
                                    cpu::fast::PackedGemm(n, k, false)
                                ? options_.packed->Get(F(w), k, true, n, k)
                                : nullptr;
      jobs.push_back({F(a), F(w), bias, nullptr, rows, n, k, packed, ActivationOf(mem.kind)});
    }
    for (size_t m = 0; m < jobs.size(); ++m) jobs[m].y = F(Out(GemmMemberOf(op, m).y));
    const float alpha = static_cast<float>(op.attrs.Alpha());
    if (PackedTiles(jobs, alpha)) return true;
    const auto gemm = [&](const GemmJob& j, bool parallel) {
      cpu::fast::Gemm({j.a, j.k, false}, {j.w, j.k, true}, j.y, j.n, j.rows, j.n, j.k, alpha, j.bias, j.act,
                      parallel, j.packed);
    };
    // A mixed group can hold members the packed kernel takes beside members
    // it does not (DCN's DNN layer beside its cross layer's GEMV, MMoE's
    // experts beside its 8-wide gates): the first run on their own (their
    // tiles in one loop, or one member over all the threads), the rest after
    // them, so that a large member is not left to one thread.
    std::vector<GemmJob> tiled, others;
    for (const GemmJob& j : jobs) (cpu::fast::PackedGemm(j.n, j.k, false) ? tiled : others).push_back(j);
    if (!tiled.empty() && !others.empty()) {
      if (!PackedTiles(tiled, alpha)) {
        for (const GemmJob& j : tiled) gemm(j, true);
      }
      jobs = std::move(others);
    }
    std::vector<double> cost;
    for (const GemmJob& j : jobs) cost.push_back(static_cast<double>(j.rows) * j.n * std::max<int64_t>(j.k, 1));
    RunMembers(cost, [&](size_t m, bool parallel) { gemm(jobs[m], parallel); });
    return true;
  }

  // A group whose members all take the packed kernel (cpu_fast_kernels.h)
  // runs every member's tiles in one loop, each tile claimed by whichever
  // thread is free: members side by side with no fixed schedule, and no
  // thread waits on one the OS has not scheduled. A member's tiles are in
  // row-major order, so a thread's next tile usually reads the rows of a it
  // just read. (Not with --cpu-groups serial: members one after another.)
  // Each member's tiles apply its own bias and activation (a mixed group's
  // members differ in them).
  bool PackedTiles(const std::vector<GemmJob>& jobs, float alpha) {
    if (jobs.size() < 2 || options_.group_mode == static_cast<uint8_t>(cpu::GroupMode::kOneByOne)) return false;
    double flops = 0;
    for (const GemmJob& j : jobs) {
      if (!cpu::fast::PackedGemm(j.n, j.k, false)) return false;
      flops += static_cast<double>(j.rows) * static_cast<double>(j.n) * static_cast<double>(j.k);
    }
    // The weights the session did not pack (no session, or fed): packed here.
    std::vector<std::vector<float>> packings(jobs.size());
    std::vector<const float*> packed(jobs.size());
    std::vector<std::pair<size_t, int64_t>> tiles;  // (member, tile)
    for (size_t m = 0; m < jobs.size(); ++m) {
      const GemmJob& j = jobs[m];
      packed[m] = j.packed;
      if (!packed[m]) {
        packings[m].resize(static_cast<size_t>(cpu::fast::PackedSize(j.n, j.k)));
        cpu::fast::PackB({j.w, j.k, true}, j.n, j.k, packings[m].data());
        packed[m] = packings[m].data();
      }
      for (int64_t t = 0; t < cpu::fast::PackedTiles(j.rows, j.n); ++t) tiles.emplace_back(m, t);
    }
    const auto run = [&](int64_t i) {
      const auto [m, t] = tiles[static_cast<size_t>(i)];
      const GemmJob& j = jobs[m];
      cpu::fast::PackedGemmTile({j.a, j.k, false}, packed[m], j.y, j.n, j.rows, j.n, j.k, alpha, j.bias, j.act, t);
    };
    if (flops < static_cast<double>(cpu::kRegionCost) || cpu::fast::Threads() == 1) {
      group_path_ = "one by one";
      for (size_t i = 0; i < tiles.size(); ++i) run(static_cast<int64_t>(i));
    } else {
      group_path_ = "side by side";
      cpu::fast::ParallelItems(static_cast<int64_t>(tiles.size()), run);
    }
    return true;
  }

  bool FastLayerNorms(const Op& op) {
    if (!AllF32(op)) return false;
    struct Job {
      const float *x, *gamma, *beta;
      float* y;
      int64_t rows, n;
    };
    std::vector<Job> jobs;
    std::vector<double> cost;
    for (size_t m = 0; m < NumMembers(op); ++m) {
      const LayerNormMember mem = LayerNormMemberOf(op, m);
      const HostTensor& x = In(mem.x);
      const int64_t n = Product(*mem.normalized_shape, 0, mem.normalized_shape->size());
      jobs.push_back({F(x), mem.gamma != kNone ? F(In(mem.gamma)) : nullptr,
                      mem.beta != kNone ? F(In(mem.beta)) : nullptr, nullptr, n > 0 ? x.numel() / n : 0, n});
      cost.push_back(static_cast<double>(x.numel()));
    }
    for (size_t m = 0; m < jobs.size(); ++m) jobs[m].y = F(Out(LayerNormMemberOf(op, m).y));
    const auto eps = static_cast<float>(op.attrs.Eps());
    const bool sigmoid_mul = ActivationOf(op.type) == EwFunc::kSigmoid;
    RunMembers(cost, [&](size_t m, bool parallel) {
      const Job& j = jobs[m];
      cpu::fast::LayerNorm(j.x, j.gamma, j.beta, j.y, j.rows, j.n, eps, sigmoid_mul, parallel);
    });
    return true;
  }

  // The group rule (cpu_group_rule.h): side by side or one by one.
  template <typename F>
  void RunMembers(const std::vector<double>& cost, F&& run) {
    const cpu::GroupSchedule s = cpu::ScheduleGroup(cost, cpu::fast::Threads(), static_cast<cpu::GroupMode>(options_.group_mode));
    group_path_ = s.side_by_side ? "side by side" : "one by one";
    if (!s.side_by_side) {
      for (size_t m = 0; m < cost.size(); ++m) run(m, true);
      return;
    }
    const auto threads = static_cast<int64_t>(s.lanes.size());
    cpu::fast::ParallelFor(threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        for (size_t m : s.lanes[static_cast<size_t>(t)]) run(m, false);
      }
    });
  }

  bool FastElementwise(const Op& op) {
    if (!AllF32(op)) return false;
    const EwFunc func = op.attrs.func;
    if (op.inputs.size() == 1 && IsUnary(func)) {
      const HostTensor& x = In(op.inputs[0]);
      HostTensor& y = Out(op.outputs[0]);
      if (x.numel() != y.numel()) return false;
      cpu::fast::Unary(func, F(x), F(y), y.numel());
      return true;
    }
    const std::optional<cpu::fast::BinOp> bin = cpu::fast::BinOpOf(func);
    if (op.inputs.size() != 2 || !bin) return false;
    const HostTensor& a = In(op.inputs[0]);
    const HostTensor& b = In(op.inputs[1]);
    HostTensor& y = Out(op.outputs[0]);
    if (a.shape.size() > y.shape.size() || b.shape.size() > y.shape.size()) return false;
    if (y.numel() > 0) cpu::fast::Binary(*bin, F(a), a.shape, F(b), b.shape, F(y), y.shape);
    return true;
  }

  // ---- the reference kernels ----
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
              static_cast<float>(op.attrs.Alpha()), ActivationOf(member.kind));
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

  // Split and concatenate: one strided copy per part (fast: typed loops
  // over the threads, cpu_fast_kernels.h; reference: a memcpy a row).
  void CopyPart(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t rows,
                int64_t width) {
    if (width <= 0 || rows <= 0) return;  // an empty part's data() may be null
    if (!options_.reference) {
      cpu::fast::CopyRows(dst, dst_stride, src, src_stride, rows, width);
      return;
    }
    for (int64_t o = 0; o < rows; ++o) {
      std::memcpy(dst + o * dst_stride, src + o * src_stride, static_cast<size_t>(width));
    }
  }

  void Split(const Op& op) {
    const HostTensor& x = In(op.inputs[0]);
    const size_t axis = Axis(op.attrs.dim, x.shape.size());
    const int64_t outer = Product(x.shape, 0, axis);
    const int64_t inner = Product(x.shape, axis + 1, x.shape.size()) * DTypeBytes(x.dtype);
    if (x.bytes.empty()) {  // nothing to split (outer 0 or an empty axis): the parts are empty too
      for (TensorId out : op.outputs) (void)Out(out);
      return;
    }
    int64_t offset = 0;
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      HostTensor& y = Out(op.outputs[i]);
      const int64_t chunk = op.attrs.split_sizes[i] * inner;
      CopyPart(y.bytes.data(), chunk, x.bytes.data() + offset, x.shape[axis] * inner, outer, chunk);
      offset += chunk;
    }
  }

  void Concatenate(const Op& op) {
    HostTensor& y = Out(op.outputs[0]);
    if (y.bytes.empty()) return;  // an empty result (outer 0): no part has bytes to place
    const size_t axis = Axis(op.attrs.dim, y.shape.size());
    const int64_t outer = Product(y.shape, 0, axis);
    const int64_t inner = Product(y.shape, axis + 1, y.shape.size()) * DTypeBytes(y.dtype);
    const int64_t row = y.shape[axis] * inner;
    int64_t widest = 0;  // the widest part's run of bytes in an output row
    for (TensorId in : op.inputs) {
      if (Shape(in).size() > axis) widest = std::max(widest, Shape(in)[axis] * inner);
    }
    if (!options_.reference && outer > 1 && (row <= 256 || widest <= 256)) {
      // Narrow parts (a stack along a new last axis; FiBiNet's 325 pairs of
      // 16 floats): output row by output row, so that writes are contiguous,
      // not one strided pass of short copies per part (a 21 MB concatenate
      // of 325 parts took 4.7 ms that way at batch 512).
      std::vector<std::pair<const uint8_t*, int64_t>> parts;
      for (TensorId in : op.inputs) {
        const HostTensor& x = In(in);
        if (x.shape[axis] > 0) parts.emplace_back(x.bytes.data(), x.shape[axis] * inner);
      }
      uint8_t* out = y.bytes.data();
      const auto all = [&](int64_t unit) {
        return std::all_of(parts.begin(), parts.end(), [unit](const auto& p) { return p.second % unit == 0; });
      };
      const bool lines = all(16), words = all(4);
      const int64_t grain = row <= 256 ? 4096 : std::max<int64_t>(1, (int64_t{1} << 18) / row);
      // Blocks of output rows of about 16 KB (in L1), each filled part by
      // part: a part's loop over the block's rows has one fixed width, where
      // a loop over the parts of each row paid its overhead per element
      // (DCNv2's stacks of 4 floats: 7 MB in 1 ms).
      const int64_t block = std::max<int64_t>(1, (int64_t{1} << 14) / row);
      cpu::fast::ParallelFor(outer, grain, [&](int64_t o0, int64_t o1) {
        for (int64_t b0 = o0; b0 < o1; b0 += block) {
          const int64_t b1 = std::min(o1, b0 + block);
          int64_t offset = 0;
          for (const auto& [src, width] : parts) {
            // Fixed-size copies, inlined: a call per part costs more than its copy.
            if (width == 4) {  // one word a row (a stack of floats): no inner loop
              for (int64_t o = b0; o < b1; ++o) std::memcpy(out + o * row + offset, src + o * 4, 4);
              offset += width;
              continue;
            }
            for (int64_t o = b0; o < b1; ++o) {
              uint8_t* dst = out + o * row + offset;
              const uint8_t* from = src + o * width;
              if (lines) {
                for (int64_t b = 0; b < width; b += 16) std::memcpy(dst + b, from + b, 16);
              } else if (words) {
                for (int64_t b = 0; b < width; b += 4) std::memcpy(dst + b, from + b, 4);
              } else {
                std::memcpy(dst, from, static_cast<size_t>(width));
              }
            }
            offset += width;
          }
        }
      });
      return;
    }
    int64_t offset = 0;
    for (TensorId in : op.inputs) {
      const HostTensor& x = In(in);
      const int64_t chunk = x.shape[axis] * inner;
      CopyPart(y.bytes.data() + offset, y.shape[axis] * inner, x.bytes.data(), chunk, outer, chunk);
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
  const CpuRunOptions& options_;
  std::vector<HostTensor> owned_;          // what the run allocated, by tensor id
  std::vector<const HostTensor*> value_;   // every tensor's value: owned_, a feed or a param
  std::vector<bool> kept_param_;           // its value is options_.params' (the same every run)
  const CpuRunPlans::Plan* plan_ = nullptr;  // the session's, or own_plan_
  std::unique_ptr<CpuRunPlans::Plan> own_plan_;
  size_t step_ = 0;
  int64_t live_ = 0, peak_ = 0;            // bytes of owned_, now and at most
  int64_t footprint_ = 0;                  // live_ and the pool's buffers together, at most
  std::string group_path_;
};

}  // namespace

std::vector<uint8_t> CpuBufferPool::Take(size_t n) {
  // A buffer of at least n bytes and at most twice that; small ones are
  // malloc's business.
  auto it = n >= 4096 ? free_.lower_bound(n) : free_.end();
  std::vector<uint8_t> b;
  if (it == free_.end() || it->first > 2 * n) {
    b.resize(n);
  } else {
    b = std::move(it->second.buffer);
    bytes_ -= it->first;
    free_.erase(it);
    // Not zeroed (a memset of every buffer was a tenth of a run): resize
    // zeroes only what lies past the buffer's last size.
    b.resize(n);
  }
  if (poison_) std::fill(b.begin(), b.end(), uint8_t{0xFF});
  return b;
}

void CpuBufferPool::Trim(size_t bytes) {
  for (auto it = free_.begin(); it != free_.end();) {
    if (it->second.run == run_) {
      ++it;
      continue;
    }
    bytes_ -= it->first;
    it = free_.erase(it);
  }
  while (bytes_ > bytes && !free_.empty()) {
    auto last = std::prev(free_.end());
    bytes_ -= last->first;
    free_.erase(last);
  }
}

const float* CpuPackedWeights::Get(const float* data, int64_t ld, bool trans, int64_t n, int64_t k) {
  std::vector<float>& p = packed_[{data, ld, trans, n, k}];
  if (p.empty()) {
    p.resize(static_cast<size_t>(cpu::fast::PackedSize(n, k)));
    cpu::fast::PackB({data, ld, trans}, n, k, p.data());
  }
  return p.data();
}

void CpuBufferPool::Give(std::vector<uint8_t>&& buffer) {
  const size_t capacity = buffer.capacity();
  if (capacity < 4096) return;
  bytes_ += capacity;
  free_.emplace(capacity, Free{std::move(buffer), run_});
}

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

CpuRunPlans::CpuRunPlans() = default;
CpuRunPlans::~CpuRunPlans() = default;

const CpuRunPlans::Plan& CpuRunPlans::For(const Graph& graph, const DimValues& dims) {
  auto it = plans_.find(dims);
  if (it != plans_.end() && it->second->graph == &graph) return *it->second;
  if (plans_.size() >= 16) plans_.clear();  // a few batch sizes, not every one
  std::unique_ptr<Plan>& plan = plans_[dims];
  plan = MakePlan(graph, dims);
  return *plan;
}

void CheckTensorSizes(const Graph& graph, const DimValues& dims) {
  int64_t total = 0;
  for (TensorId id = 0; id < graph.num_tensor_ids(); ++id) {
    const Tensor& t = graph.tensor(id);
    if (!t.alive) continue;
    const std::vector<int64_t> shape = ConcreteShape(t.shape, dims);
    const std::optional<int64_t> count = ByteCount(shape, DTypeBytes(t.dtype));
    const int64_t bytes = count ? *count : ByteCountOf(shape, DTypeBytes(t.dtype), fmt::format("tensor '{}'", t.name));
    if (bytes > MemoryBudget()) CheckBudget(bytes, fmt::format("tensor '{}'", t.name));
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
    // float32 straight into the tensor (no second copy of a large input).
    std::vector<float> values(t.dtype == DType::kFloat32 ? 0 : static_cast<size_t>(v.numel()));
    float* out = t.dtype == DType::kFloat32 ? reinterpret_cast<float*>(v.bytes.data()) : values.data();
    for (int64_t i = 0; i < v.numel(); ++i) {
      // 24 random bits -> [0, 1): the same on every platform.
      const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
      out[i] = low + 2.0f * u * (is_gamma[static_cast<size_t>(id)] ? 0.5f : 1.0f);
    }
    if (t.dtype != DType::kFloat32) v.FromFloat(values.data());
    feeds[t.name] = std::move(v);
  }
  return feeds;
}

TensorMap RunOnCpu(const Graph& graph, const TensorMap& feeds, const DimValues& dims,
                   const CpuRunOptions& options) {
  return CpuRun(graph, dims, options).Run(feeds);
}

const char* CpuBlasCoreType() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return nullptr;
  const bool fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
  if (!fma || !osxsave || !avx) return nullptr;
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  if ((xcr0 & 0x6) != 0x6) return nullptr;  // the OS saves no YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return nullptr;
  const bool avx2 = (b >> 5) & 1;
  const bool avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 28) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
  if (avx512 && (xcr0 & 0xe6) == 0xe6) return "SkylakeX";
  return avx2 ? "Haswell" : nullptr;
#else
  return nullptr;
#endif
}

const char* CpuBlasCoreToAskFor() {
  if (std::getenv("OPENBLAS_CORETYPE")) return nullptr;
  const char* running = cpu::fast::BlasCoreName();
  if (!running || std::string_view(running) != "Prescott") return nullptr;
  return CpuBlasCoreType();
}

const char* CpuBlasCoreName() { return cpu::fast::BlasCoreName(); }

int CpuFastThreads(int n) { return cpu::fast::SetThreads(n); }

TensorMap RunOnCpuReference(const Graph& graph, const TensorMap& feeds, const DimValues& dims) {
  CpuRunOptions options;
  options.reference = true;
  return CpuRun(graph, dims, options).Run(feeds);
}

std::vector<HostTensor> RunOnCpuKeepAll(const Graph& graph, const TensorMap& feeds, const DimValues& dims) {
  CpuRunOptions options;
  options.reference = true;
  options.keep_all = true;
  CpuRun run(graph, dims, options);
  run.Run(feeds);
  return run.All();
}

}  // namespace hfuse
