// Checks the CUDA backend's host-side plan of a model against the CPU
// reference, tensor by tensor, on any machine (no GPU):
//
//   plan_check MODEL [--dim NAME=VALUE]... [--inputs IN.npz] [--seed S] [--verbose [--layouts]] [--sources] [--operands-apart]
//
// The model is imported and fused as a CUDA session would (onnx-import,
// then the gpu pipeline, hfuse rules, dims bound), and run on the CPU
// executor keeping every tensor. Then:
//
//  1. every value the plan computes once (plan_constants.h) is the CPU's,
//     byte for byte;
//  2. every view of the view plan (view_plan.h), and every view a copy
//     reads, gives the tensor's CPU values when read from its root through
//     its layout (cast on load where the root's dtype differs);
//  3. the memory plan (memory_plan.h) is replayed: the buffers are host
//     memory, each launch writes its outputs' reference values into their
//     places, and before each launch every input it reads, through its
//     layout, must still hold its reference values: a buffer reused too
//     early, or a view of a dead tensor, fails here.
//
// Prints one line of counts; exit 1 on the first mismatch, naming it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "hfuse/cuda/cuda_executor.h"
#include "hfuse/exec/compare.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/npz.h"
#include "hfuse/exec/plan_constants.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/session/session.h"
#include "hfuse/support/error.h"
#include "fusion_regions.h"
#ifdef HFUSE_HAVE_CUDA
#include "fused_elementwise.h"
#endif
#include "memory_plan.h"
#include "view_plan.h"

namespace hfuse {
namespace {

// Element i (row-major over `shape`) of a tensor laid out as `l` over the
// root's bytes, as a value of `dtype`, written into out at i.
void ReadThrough(const cuda::Layout& l, const std::vector<int64_t>& shape, const HostTensor& root_bytes,
                 HostTensor& out) {
  HostTensor root = root_bytes;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t at = l.offset;
    for (size_t d = 0; d < shape.size(); ++d) at += index[d] * l.strides[d];
    if (IsFloat(out.dtype)) {
      // Through the root's dtype, then this one's (a Cast read on load).
      if (IsFloat(root.dtype)) {
        out.Set(i, root.Get(at));
      } else {
        out.Set(i, static_cast<float>(root.GetInt(at)));
      }
    } else if (out.dtype == DType::kBool) {
      out.SetInt(i, IsFloat(root.dtype) ? root.Get(at) != 0.0f : root.GetInt(at) != 0);
    } else {
      out.SetInt(i, root.GetInt(at));
    }
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

// Writes v (row-major over `shape`) into root's bytes at element `offset`
// + index . strides: where a launch puts a tensor's values.
void WriteThrough(const HostTensor& v, const std::vector<int64_t>& shape, int64_t offset,
                  const std::vector<int64_t>& strides, HostTensor& root) {
  const int64_t esize = DTypeBytes(v.dtype);
  HFUSE_CHECK(v.dtype == root.dtype && strides.size() == shape.size());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < v.numel(); ++i) {
    int64_t at = offset;
    for (size_t d = 0; d < shape.size(); ++d) at += index[d] * strides[d];
    std::memcpy(root.bytes.data() + at * esize, v.bytes.data() + i * esize, static_cast<size_t>(esize));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

struct Checker {
  const Graph& g;
  const DimValues& dims;
  std::vector<HostTensor>& ref;
  int failures = 0;

  void Fail(const std::string& what) {
    if (failures++ < 10) fmt::print(stderr, "plan_check: {}\n", what);
  }
  bool Same(const HostTensor& a, const HostTensor& b) const {
    return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
  }
};

int Main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: plan_check MODEL [--dim NAME=VALUE]... [--inputs IN.npz] [--seed S] [--verbose [--layouts]] [--sources] [--operands-apart]\n");
    return 2;
  }
  SessionOptions options;
  options.device = Device::kCpu;
  options.rules = RuleSet::kHfuse;
  std::string inputs;
  uint64_t seed = 1;
  bool verbose = false;
  bool print_sources = false;  // each fused region's kernel source
  bool print_layouts = false;  // with --verbose: where each op's inputs lie (root, offset, strides)
  bool operands_together = CudaOptions{}.group_operands_together;  // --operands-apart: that option off
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dim" && i + 1 < argc) {
      const std::string spec = argv[++i];
      const size_t eq = spec.find('=');
      options.dims[spec.substr(0, eq)] = std::stoll(spec.substr(eq + 1));
    } else if (a == "--inputs" && i + 1 < argc) {
      inputs = argv[++i];
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--sources") {
      print_sources = true;
    } else if (a == "--layouts") {
      print_layouts = true;
    } else if (a == "--operands-apart") {
      operands_together = false;
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::stoull(argv[++i]);
    } else {
      fmt::print(stderr, "plan_check: unknown argument '{}'\n", a);
      return 2;
    }
  }
  const std::string model = argv[1];
  options.passes = std::getenv("PLAN_PASSES") ? std::getenv("PLAN_PASSES") : model.ends_with(".onnx") ? "onnx-import,gpu" : "gpu";
  Session session = Session::FromFile(model, options);
  const Graph& g = session.graph();
  const DimValues dims = BindDims(g, options.dims);
  TensorMap feeds = RandomFeeds(g, dims, seed);
  if (!inputs.empty()) {
    std::map<std::string, DType> want;  // (a float32 array read into a bfloat16 input, rounded)
    for (TensorId id = 0; id < g.num_tensor_ids(); ++id) {
      if (g.tensor(id).alive) want[g.tensor(id).name] = g.tensor(id).dtype;
    }
    for (auto& [name, value] : ReadNpz(inputs, want)) feeds[name] = std::move(value);
  }
  std::vector<HostTensor> ref = RunOnCpuKeepAll(g, feeds, dims);
  Checker c{g, dims, ref};

  // 1. The plan's constants.
  const PlanConstants folded = FoldPlanConstants(g, dims);
  for (const auto& [t, v] : folded.values) {
    if (!c.Same(v, ref[static_cast<size_t>(t)])) c.Fail(fmt::format("constant '{}' differs from the CPU's", g.tensor(t).name));
  }
  // 2. Views.
  // The views and regions as the CUDA executor plans them.
  // (GEMMs in regions wherever they can be, so that each is checked; the
  // executor's rule takes them where their tiles fill the device's SMs)
  const cuda::DevicePlan planned = cuda::PlanViewsAndRegions(g, dims, folded, true, 0);
  const cuda::ViewPlan& views = planned.views;
  int64_t checked_views = 0;
  // A root's buffer as the plan lays it out: its CPU values written through
  // its own layout (row-major, or in the order a Transpose reading it wants).
  std::map<TensorId, HostTensor> root_buffers;
  auto root_buffer = [&](TensorId root) -> const HostTensor& {
    auto it = root_buffers.find(root);
    if (it != root_buffers.end()) return it->second;
    const cuda::Layout& own = views.layout[static_cast<size_t>(root)];
    const HostTensor& v = ref[static_cast<size_t>(root)];
    if (own.root != root || own.offset != 0 || cuda::IsRowMajor(own, views.shape[static_cast<size_t>(root)])) {
      return root_buffers.emplace(root, v).first->second;
    }
    HostTensor buf = v;
    WriteThrough(v, views.shape[static_cast<size_t>(root)], 0, own.strides, buf);
    return root_buffers.emplace(root, std::move(buf)).first->second;
  };
  for (TensorId t = 0; t < g.num_tensor_ids(); ++t) {
    if (!g.tensor(t).alive) continue;
    const std::vector<int64_t>& shape = views.shape[static_cast<size_t>(t)];
    for (const cuda::Layout* l : {&views.layout[static_cast<size_t>(t)],
                                  views.as_view[static_cast<size_t>(t)] ? &*views.as_view[static_cast<size_t>(t)]
                                                                        : nullptr}) {
      if (!l || l->root == kNone || l->root == t) continue;
      HostTensor got(g.tensor(t).dtype, shape);
      ReadThrough(*l, shape, root_buffer(l->root), got);
      ++checked_views;
      if (!c.Same(got, ref[static_cast<size_t>(t)])) {
        c.Fail(fmt::format("tensor '{}' read as a view of '{}' differs from the CPU's", g.tensor(t).name,
                           g.tensor(l->root).name));
      }
    }
  }
  // 3. The fused regions: what each computes (the host interpreter of its
  // program, on the CPU's values of its operands) is the CPU's, within
  // rounding (the kernel's sums run in another order). An attention region:
  // the kernel's own row function (attention.h) over the operands' buffers
  // as the plan lays them out, writing O through its layout.
  const cuda::FusionPlan& fusion = planned.fusion;
  // The largest |want| and |got - want| (infinite where got is NaN) of a
  // chain region's output.
  auto MaxError = [](const HostTensor& want, const HostTensor& got) {
    float scale = 0.0f, err = 0.0f;
    for (int64_t i = 0; i < want.numel(); ++i) {
      scale = std::max(scale, std::fabs(want.Get(i)));
      const float e = std::fabs(got.Get(i) - want.Get(i));
      err = std::isnan(e) ? INFINITY : std::max(err, e);
    }
    return std::pair{scale, err};
  };
  int64_t region_ops = 0, attention_regions = 0, ffn_regions = 0;
  for (const cuda::FusionRegion& r : fusion.regions) {
    region_ops += static_cast<int64_t>(r.ops.size());
    if (r.attention) {
      ++attention_regions;
      const cuda::AttentionTensors t = cuda::AttentionTensorsOf(g, r);
      cuda::AttentionArgs a = cuda::AttentionArgsOf(g, views, r);
      const DType type = g.tensor(t.o).dtype;  // (Q's, K's and V's too)
      const int64_t size = DTypeBytes(type);
      auto at = [&](TensorId x) -> const void* {
        const cuda::Layout& l = views.layout[static_cast<size_t>(x)];
        return root_buffer(l.root).bytes.data() + l.offset * size;
      };
      a.q = at(t.q);
      a.kt = at(t.kt);
      a.v = at(t.v);
      const cuda::Layout& ol = views.layout[static_cast<size_t>(t.o)];
      HostTensor out(type, views.shape[static_cast<size_t>(ol.root)]);
      for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, NAN);
      a.o = out.bytes.data() + ol.offset * size;
      for (int64_t b = 0; b < a.batch; ++b) {
        for (int64_t row = 0; row < a.sq; ++row) cuda::AttentionRow<cuda::kMaxAttentionHead>(a, b, row);
      }
      const HostTensor& want = ref[static_cast<size_t>(t.o)];
      HostTensor got(type, views.shape[static_cast<size_t>(t.o)]);
      ReadThrough(ol, views.shape[static_cast<size_t>(t.o)], out, got);
      const auto [scale, err] = MaxError(want, got);
      if (err > (type == DType::kFloat32 ? 1e-5 : Tolerance(type)) * std::max(scale, 1.0f)) {
        c.Fail(fmt::format("fused attention of '{}' to '{}' computes '{}' wrong (error {} at scale {})",
                           g.op(r.ops.front()).name, g.op(r.ops.back()).name, g.tensor(t.o).name, err, scale));
      }
      if (verbose) {
        fmt::print("  attention {} ops ({} to {}), {} x {} rows of {} keys, heads of {} and {}\n", r.ops.size(),
                   g.op(r.ops.front()).name, g.op(r.ops.back()).name, a.batch, a.sq, a.sk, a.d, a.dv);
      }
      continue;
    }
    if (r.ffn) {
      // The FFN kernel's row function (fusion_regions.h, EvaluateFfnRow) over
      // x's buffer as the plan lays it out and the CPU's weights, writing y
      // through its layout.
      ++ffn_regions;
      const cuda::FfnChain& f = *r.ffn;
      cuda::FfnArgs a = cuda::FfnArgsOf(views, r, 0);  // (the SMs pick its rows a thread, which the host ignores)
      const cuda::Layout& xl = views.layout[static_cast<size_t>(f.x)];
      a.x = reinterpret_cast<const float*>(root_buffer(xl.root).bytes.data()) + xl.offset;
      auto weights = [&](TensorId t) {
        return t == kNone ? nullptr : reinterpret_cast<const float*>(ref[static_cast<size_t>(t)].bytes.data());
      };
      a.w1 = weights(f.w1), a.b1 = weights(f.b1), a.w2 = weights(f.w2), a.b2 = weights(f.b2);
      const cuda::Layout& yl = views.layout[static_cast<size_t>(f.y)];
      HostTensor out(DType::kFloat32, views.shape[static_cast<size_t>(yl.root)]);
      for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, NAN);
      a.y = reinterpret_cast<float*>(out.bytes.data()) + yl.offset;
      for (int64_t row = 0; row < a.m; ++row) cuda::EvaluateFfnRow(a, row);
      const HostTensor& want = ref[static_cast<size_t>(f.y)];
      HostTensor got(DType::kFloat32, views.shape[static_cast<size_t>(f.y)]);
      ReadThrough(yl, views.shape[static_cast<size_t>(f.y)], out, got);
      const auto [scale, err] = MaxError(want, got);
      if (err > 1e-5 * std::max(scale, 1.0f)) {
        c.Fail(fmt::format("fused FFN of '{}' to '{}' computes '{}' wrong (error {} at scale {})",
                           g.op(r.ops.front()).name, g.op(r.ops.back()).name, g.tensor(f.y).name, err, scale));
      }
      if (verbose) {
        fmt::print("  ffn {} ops ({} to {}), {} rows of {} -> {} -> {}\n", r.ops.size(), g.op(r.ops.front()).name,
                   g.op(r.ops.back()).name, a.m, a.in, a.hidden, a.out);
      }
      continue;
    }
    std::vector<HostTensor> values;  // per operand: its tensor's, or its node constant's
    for (const cuda::RegionOperand& o : r.operands) {
      const TensorId t = cuda::OperandTensor(g, o);
      if (o.view != kNone) {
        // A gate's input read as its output's view would be: the view's
        // layout over the input's values (row-major, as the output's own
        // buffer holds the gate's).
        const cuda::Layout& l = views.layout[static_cast<size_t>(o.view)];
        HostTensor v(DType::kFloat32, views.shape[static_cast<size_t>(o.view)]);
        ReadThrough(l, v.shape, ref[static_cast<size_t>(t)], v);
        values.push_back(std::move(v));
      } else if (t != kNone) {
        values.push_back(ref[static_cast<size_t>(t)]);
      } else {
        const OnnxNode::Value* v = cuda::OperandConstant(g, o);
        HFUSE_CHECK(v != nullptr);
        HostTensor h(v->dtype, v->dims);
        h.bytes = v->data;
        values.push_back(std::move(h));
      }
    }
    // Operand k at (row, col) of the domain: its index over `over`,
    // broadcast (numpy) into its own shape.
    auto read = [&](size_t k, int64_t row, int64_t col) {
      const cuda::RegionOperand& o = r.operands[k];
      const HostTensor& v = values[k];
      // v's strides over `over` (numpy broadcasting: 0 where v has 1 or no dim)
      // (with its last two dims swapped first where the region reads it so)
      std::vector<int64_t> strides(o.over.size(), 0);
      std::vector<int64_t> shape = v.shape, own = cuda::RowMajorStrides(v.shape);
      if (o.swap_last) {
        std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
        std::swap(own[own.size() - 1], own[own.size() - 2]);
      }
      const size_t pad = o.over.size() - shape.size();
      for (size_t d = 0; d < shape.size(); ++d) strides[pad + d] = shape[d] == 1 ? 0 : own[d];
      return v.Get(cuda::DomainOffset(o.over, strides, o.cols, row, col));
    };
    const std::vector<std::vector<float>> got = cuda::EvaluateRegion(r, read);
    for (size_t o = 0; o < r.outputs.size(); ++o) {
      const HostTensor& want = ref[static_cast<size_t>(r.outputs[o].tensor)];
      float scale = 0.0f, err = 0.0f;
      bool sized = static_cast<int64_t>(got[o].size()) == want.numel();
      for (int64_t i = 0; sized && i < want.numel(); ++i) {
        scale = std::max(scale, std::fabs(want.Get(i)));
        const float e = std::fabs(got[o][static_cast<size_t>(i)] - want.Get(i));
        err = std::isnan(e) ? INFINITY : std::max(err, e);
      }
      // (a 16-bit output against the CPU's, which rounds after every op where the kernel does not: its verify tolerance)
      const double tolerance = r.outputs[o].dtype == DType::kFloat32 ? 1e-5 : Tolerance(r.outputs[o].dtype);
      if (!sized || err > tolerance * std::max(scale, 1.0f)) {
        c.Fail(fmt::format("fused region of '{}' ({} ops) computes '{}' {} (error {} at scale {})",
                           g.op(r.ops.front()).name, r.ops.size(), g.tensor(r.outputs[o].tensor).name,
                           sized ? "wrong" : "at the wrong size", err, scale));
      }
    }
#ifdef HFUSE_HAVE_CUDA
    // Its kernel's source compiles (NVRTC, for the H100/H200; no device needed).
    std::vector<std::vector<int64_t>> strides;
    for (const cuda::RegionOperand& o : r.operands) strides.push_back(cuda::OperandStrides(g, views, o));
    try {
      const std::string source = cuda::FusedRegionSource(r, strides);
      if (print_sources) fmt::print("{}\n", source);
      cuda::CompileFusedSource(source, "sm_90");
    } catch (const std::exception& e) {
      c.Fail(fmt::format("fused region of '{}': {}", g.op(r.ops.front()).name, e.what()));
    }
#endif
    if (verbose) {
      fmt::print("  region {} ops ({} to {}), {} rows of {}{}, {} operands, {} outputs\n", r.ops.size(),
                 g.op(r.ops.front()).name, g.op(r.ops.back()).name, r.rows, r.cols,
                 r.one_lane ? " (a row a thread)" : "", r.operands.size(), r.outputs.size());
    }
  }
  // 4. The memory plan, replayed on host buffers; a region reads its
  // operands, then writes its outputs, as one launch.
  const cuda::MemoryPlan mem = cuda::PlanDeviceMemory(g, dims, &views, &fusion, operands_together);
  std::map<char, std::vector<uint8_t>> buffers = {
      {'i', std::vector<uint8_t>(static_cast<size_t>(mem.input_bytes))},
      {'p', std::vector<uint8_t>(static_cast<size_t>(mem.param_bytes))},
      {'o', std::vector<uint8_t>(static_cast<size_t>(mem.output_bytes))},
      {'c', std::vector<uint8_t>(static_cast<size_t>(mem.constant_bytes))},
      {'a', std::vector<uint8_t>(static_cast<size_t>(mem.arena_bytes), 0xFF)}};
  auto bytes_of = [&](TensorId root) -> uint8_t* {
    const char r = mem.region[static_cast<size_t>(root)];
    HFUSE_CHECK(r != 0);
    return buffers.at(r).data() + mem.offset[static_cast<size_t>(root)];
  };
  // A root's whole buffer as a tensor of its own shape.
  auto root_value = [&](TensorId root) {
    HostTensor v(g.tensor(root).dtype, views.shape[static_cast<size_t>(root)]);
    std::memcpy(v.bytes.data(), bytes_of(root), v.bytes.size());
    return v;
  };
  // Writes t's reference values through its layout.
  auto write = [&](TensorId t) {
    const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
    HostTensor root = root_value(l.root);
    HFUSE_CHECK(l.root_dtype == g.tensor(t).dtype);
    WriteThrough(ref[static_cast<size_t>(t)], views.shape[static_cast<size_t>(t)], l.offset, l.strides, root);
    std::memcpy(bytes_of(l.root), root.bytes.data(), root.bytes.size());
  };
  for (TensorId t = 0; t < g.num_tensor_ids(); ++t) {
    const char r = mem.region[static_cast<size_t>(t)];
    if (r == 'i' || r == 'p' || r == 'c') {
      const HostTensor& v = r == 'c' ? folded.values.at(t) : ref[static_cast<size_t>(t)];
      std::memcpy(bytes_of(t), v.bytes.data(), v.bytes.size());
    }
  }
  int64_t launches = 0;
  for (OpId id : mem.order) {
    const Op& op = g.op(id);
    // The node's inputs by slot (a Concat's parts), or the IR op's.
    const size_t slots = !op.attrs.onnx || op.attrs.onnx->input_slots.empty() ? op.inputs.size()
                                                                             : op.attrs.onnx->input_slots.size();
    if (verbose) {
      const std::string type = FamilyOf(op.type) == OpFamily::kOpaque ? op.attrs.onnx->op_type
                                                                     : std::string(OpTypeName(op.type));
      const char* what = folded.folded[static_cast<size_t>(id)] ? "folded"
                         : views.view_op[static_cast<size_t>(id)] ? "view"
                         : views.in_place[static_cast<size_t>(id)] ? "in place"
                         : views.unread[static_cast<size_t>(id)]   ? "unread"
                         : op.elided                               ? "elided"
                                                                   : "launch";
      const std::string& why = views.copied_why[static_cast<size_t>(id)];
      const size_t in_slot = views.in_slot[static_cast<size_t>(id)].size();
      fmt::print("  {:8} {:20} {}{}\n", what, type, op.name,
                 why.empty() || views.skip[static_cast<size_t>(id)] || fusion.region_of[static_cast<size_t>(id)] >= 0
                     ? ""
                 : in_slot == 0 ? fmt::format(" (not in place: {})", why)
                                : fmt::format(" ({} of {} parts in place, the others copied: {})", in_slot, slots, why));
      if (print_layouts) {
        for (TensorId t : op.inputs) {
          const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
          fmt::print("      in  {} {} root {} off {} strides {}\n", g.tensor(t).name, fmt::join(views.shape[static_cast<size_t>(t)], "x"),
                     l.root == kNone ? std::string("-") : g.tensor(l.root).name, l.offset, fmt::join(l.strides, ","));
        }
      }
    }
    if (views.skip[static_cast<size_t>(id)]) continue;
    const int32_t region = fusion.region_of[static_cast<size_t>(id)];
    std::vector<TensorId> reads = op.inputs, writes = op.outputs;
    const cuda::FusionRegion* writer = nullptr;  // a region: its outputs, each where it puts it
    if (region >= 0) {
      const cuda::FusionRegion& r = fusion.regions[static_cast<size_t>(region)];
      if (r.ops.front() != id) continue;
      reads.clear();
      writes.clear();
      for (const cuda::RegionOperand& o : r.operands) {
        // (a product the region computes: its GEMM's operands instead, below)
        if (o.product < 0 && cuda::OperandTensor(g, o) != kNone) reads.push_back(cuda::OperandTensor(g, o));
      }
      for (const cuda::RegionProduct& q : r.products) {
        for (TensorId t : {q.a, q.w, q.bias}) {
          if (t != kNone) reads.push_back(t);
        }
      }
      writer = &r;
    }
    ++launches;
    // A concatenate some of whose parts their producers wrote in place
    // copies the others only: each into its slab of the output.
    std::vector<std::pair<TensorId, cuda::Layout>> copied_parts;
    if (!views.in_slot[static_cast<size_t>(id)].empty()) {
      const TensorId y = op.outputs[0];
      const std::vector<int64_t>& ys = views.shape[static_cast<size_t>(y)];
      const size_t axis = *cuda::ConcatAxisOf(op, ys.size());
      int64_t at = 0;
      for (size_t k = 0; k < slots; ++k) {
        const TensorId part = cuda::InputOf(op, k);
        cuda::Layout slab = views.layout[static_cast<size_t>(y)];
        slab.offset += at * slab.strides[axis];
        at += views.shape[static_cast<size_t>(part)][axis];
        if (!views.InSlot(id, k)) copied_parts.emplace_back(part, slab);
      }
      writes.clear();
    }
    for (TensorId in : reads) {
      const cuda::Layout& l = views.layout[static_cast<size_t>(in)];
      HostTensor got(g.tensor(in).dtype, views.shape[static_cast<size_t>(in)]);
      ReadThrough(l, views.shape[static_cast<size_t>(in)], root_value(l.root), got);
      if (!c.Same(got, ref[static_cast<size_t>(in)])) {
        c.Fail(fmt::format("op '{}' reads '{}' (in '{}') after its buffer was overwritten", op.name,
                           g.tensor(in).name, g.tensor(l.root).name));
      }
    }
    for (TensorId out : writes) {
      if (views.layout[static_cast<size_t>(out)].root != kNone) write(out);
    }
    for (const auto& [part, slab] : copied_parts) {
      HostTensor root = root_value(slab.root);
      WriteThrough(ref[static_cast<size_t>(part)], views.shape[static_cast<size_t>(part)], slab.offset, slab.strides, root);
      std::memcpy(bytes_of(slab.root), root.bytes.data(), root.bytes.size());
    }
    // A region writes each output's values (over its shape, row-major) at
    // `offset` + index . `strides` of its place's buffer, and nothing else
    // there (a slot it does not fill keeps what it held).
    for (const cuda::RegionOutput& o : writer ? writer->outputs : std::vector<cuda::RegionOutput>{}) {
      HostTensor root = root_value(o.place);
      WriteThrough(ref[static_cast<size_t>(o.tensor)], o.shape, o.offset, o.strides, root);
      std::memcpy(bytes_of(o.place), root.bytes.data(), root.bytes.size());
    }
  }
  for (TensorId t : g.outputs()) {
    const cuda::Layout& l = views.layout[static_cast<size_t>(t)];
    HostTensor got(g.tensor(t).dtype, views.shape[static_cast<size_t>(t)]);
    ReadThrough(l, views.shape[static_cast<size_t>(t)], root_value(l.root), got);
    if (!c.Same(got, ref[static_cast<size_t>(t)])) c.Fail(fmt::format("graph output '{}' is wrong", g.tensor(t).name));
    if (mem.region[static_cast<size_t>(l.root)] != 'o') c.Fail(fmt::format("graph output '{}' is outside the outputs", g.tensor(t).name));
  }
  fmt::print("{}: {} ops, {} launches, {} folded, {} views ({} checked), {} regions of {} ops ({} attention, {} ffn), "
             "{} constant bytes, arena {} of {} bytes: {}\n",
             model, g.LiveOps().size(), launches, folded.folded_ops, views.views, checked_views,
             fusion.regions.size(), region_ops, attention_regions, ffn_regions,
             mem.constant_bytes, mem.arena_bytes, mem.tensor_bytes, c.failures ? "FAIL" : "ok");
  return c.failures ? 1 : 0;
}

}  // namespace
}  // namespace hfuse

int main(int argc, char** argv) {
  try {
    return hfuse::Main(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "plan_check: error: {}\n", e.what());
    return 2;
  }
}
