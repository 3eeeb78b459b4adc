// The CUDA backend's memory plan (memory_plan.h): host code only.
#include "memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "gemm_plan.h"
#include "hfuse/ir/analysis.h"
#include "hfuse/ir/onnx_ops.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/checked.h"

namespace hfuse::cuda {
namespace {

int64_t AlignUp(int64_t v) { return (v + kBufferAlign - 1) / kBufferAlign * kBufferAlign; }

}  // namespace

int64_t DeviceTensorBytes(const Graph& g, const DimValues& dims, TensorId t) {
  // Checked (support/checked.h): a wrapped size would plan a buffer too small.
  return ByteCountOf(ConcreteShape(g.tensor(t).shape, dims), DTypeBytes(g.tensor(t).dtype),
                     fmt::format("tensor '{}'", g.tensor(t).name));
}

TensorId StorageOf(const Graph& g, TensorId t) {
  return g.tensor(t).storage == kNone ? t : g.tensor(t).storage;
}

MemoryPlan PlanDeviceMemory(const Graph& g, const DimValues& dims, const ViewPlan* views, const FusionPlan* fusion,
                            bool group_operands_together) {
  MemoryPlan plan;
  // Where each tensor's bytes live, and which ops write or read them.
  auto root = [&](TensorId t) {
    return views ? views->layout[static_cast<size_t>(t)].root : StorageOf(g, t);
  };
  auto runs = [&](OpId id) {
    return !g.op(id).elided && !(views && views->skip[static_cast<size_t>(id)]);
  };
  std::vector<OpId>& order = plan.order;
  std::vector<int64_t>& offset = plan.offset;
  std::vector<char>& region = plan.region;
  order = fusion ? fusion->order : StableTopologicalOrder(g);
  const auto n = static_cast<size_t>(g.num_tensor_ids());
  offset.assign(n, -1);
  region.assign(n, 0);
  // Inputs and params in order of first use (a group's members' weights
  // then sit at a constant stride), outputs, then the arena.
  int64_t in_bytes = 0, param_bytes = 0, out_bytes = 0, const_bytes = 0;
  auto place = [&](TensorId t, char r, int64_t& top) {
    if (t == kNone || region[static_cast<size_t>(t)]) return;
    region[static_cast<size_t>(t)] = r;
    offset[static_cast<size_t>(t)] = top;
    top += AlignUp(DeviceTensorBytes(g, dims, t));
  };
  for (OpId id : order) {
    if (!runs(id)) continue;
    for (TensorId in : g.op(id).inputs) {
      const TensorId s = root(in);
      if (s == kNone) continue;
      if (g.tensor(s).role == Role::kInput) place(s, 'i', in_bytes);
      if (g.tensor(s).role == Role::kParam) place(s, 'p', param_bytes);
      if (views && views->constant[static_cast<size_t>(s)]) place(s, 'c', const_bytes);
    }
  }
  // Every input has a buffer (a feed goes somewhere); a param only where a launch reads it.
  for (TensorId t = 0; t < g.num_tensor_ids(); ++t) {
    if (g.tensor(t).alive && g.tensor(t).role == Role::kInput) place(t, 'i', in_bytes);
    if (!views && g.tensor(t).alive && g.tensor(t).role == Role::kParam) place(t, 'p', param_bytes);
  }
  for (TensorId t : g.outputs()) place(root(t), 'o', out_bytes);

  // Intermediates: one unit per op (its non-view outputs, together), alive
  // from the first op writing into it to the last op reading it.
  std::vector<int64_t> pos(static_cast<size_t>(g.num_op_ids()), -1);
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  // A region's members all run at once: from its first position to its last.
  std::vector<int64_t> begin = pos, end = pos;
  if (fusion) {
    for (const FusionRegion& r : fusion->regions) {
      const int64_t b = pos[static_cast<size_t>(r.ops.front())], e = pos[static_cast<size_t>(r.ops.back())];
      for (OpId o : r.ops) {
        begin[static_cast<size_t>(o)] = b;
        end[static_cast<size_t>(o)] = e;
      }
    }
  }
  std::vector<int64_t> first(n, INT64_MAX), last(n, -1);
  for (OpId id : order) {
    const Op& op = g.op(id);
    if (!runs(id)) continue;
    for (TensorId out : op.outputs) {
      if (root(out) == kNone) continue;
      const auto s = static_cast<size_t>(root(out));
      first[s] = std::min(first[s], begin[static_cast<size_t>(id)]);
    }
    for (TensorId in : op.inputs) {
      if (root(in) == kNone) continue;
      const auto s = static_cast<size_t>(root(in));
      last[s] = std::max(last[s], end[static_cast<size_t>(id)]);
    }
  }
  // A GEMM's inputs live on to the activations (GELU, tanh, SiLU) and the
  // residual Adds that alone read its outputs through views: the GEMM may
  // take them in (gemm_launches.cc, AbsorbActivations and FindResidual),
  // writing their outputs while its members still read (DCNv2's tanh after
  // its experts' middle projections, whose inputs are the tanh before).
  if (views) {
    const auto passes = [&](OpId u) { return views->view_op[static_cast<size_t>(u)]; };
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (!runs(id) || !(IsGemm(op.type) || IsGroupGemm(op.type))) continue;
      int64_t until = -1;
      for (TensorId t : op.outputs) {
        const OpId act = ActivationReading(g, t, passes);
        if (act != kNone) until = std::max(until, end[static_cast<size_t>(act)]);
        // (A residual Add goes in only where it runs: no view, no fused region's.)
        const OpId add = IsGemm(op.type) ? ResidualAddReading(g, t, passes) : kNone;
        if (add != kNone && runs(add) && !(fusion && fusion->region_of[static_cast<size_t>(add)] >= 0)) {
          until = std::max(until, end[static_cast<size_t>(add)]);
        }
      }
      for (TensorId in : op.inputs) {
        if (until < 0 || root(in) == kNone) continue;
        int64_t& l = last[static_cast<size_t>(root(in))];
        l = std::max(l, until);
      }
    }
  }
  // Runs of elementwise ops (the IR's, and the ONNX operators the CUDA
  // planner runs on the elementwise kernel), views between them skipped.
  auto elementwise = [&](OpId id) {
    const Op& op = g.op(id);
    if (FamilyOf(op.type) == OpFamily::kElementwise) return true;
    const OnnxOpInfo* info = op.attrs.onnx ? FindOnnxOp(op.attrs.onnx->op_type) : nullptr;
    return FamilyOf(op.type) == OpFamily::kOpaque && info && info->cuda == "Elementwise";
  };
  std::vector<OpId> run;
  auto close_run = [&]() {
    for (size_t j = 0; j < run.size(); ++j) {
      const size_t until = std::min(run.size() - 1, j + kMaxChainOps - 1);
      const int64_t end = pos[static_cast<size_t>(run[until])];
      for (TensorId in : g.op(run[j]).inputs) {
        if (root(in) == kNone) continue;
        int64_t& l = last[static_cast<size_t>(root(in))];
        l = std::max(l, end);
      }
    }
    run.clear();
  };
  for (OpId id : order) {
    if (!runs(id)) continue;
    if (!elementwise(id)) close_run();
    else run.push_back(id);
  }
  close_run();
  struct Unit {
    std::vector<TensorId> tensors;
    int64_t start, end, bytes;
  };
  std::vector<Unit> units;
  std::vector<bool> taken(n, false);
  // An attention region's scores and probabilities, an FFN region's hidden
  // values, and the products a region computes, live in its kernel's
  // registers: no buffer (the region has no fallback that would write them).
  if (fusion) {
    for (const FusionRegion& r : fusion->regions) {
      for (const RegionProduct& q : r.products) {
        if (root(q.y) == q.y) taken[static_cast<size_t>(q.y)] = true;
      }
      if (!r.Chain()) continue;
      for (size_t i = 0; i + 1 < r.ops.size(); ++i) {
        for (TensorId out : g.op(r.ops[i]).outputs) {
          if (root(out) == out) taken[static_cast<size_t>(out)] = true;
        }
      }
    }
  }
  // With group_operands_together: the A operands of a group GEMM's members,
  // when one fused region writes them all (each its own buffer, of one
  // size), are one unit in the members' order, so that they lie at a
  // constant stride and one strided-batched call can run the group (DIN's
  // two attention units' second layers, whose inputs one Dice region
  // writes; apart, the arena puts them anywhere).
  std::vector<std::vector<TensorId>> together;
  std::vector<int32_t> together_of(n, -1);
  if (fusion && group_operands_together) {
    for (OpId id : order) {
      const Op& op = g.op(id);
      if (!runs(id) || !IsGroupGemm(op.type) || NumMembers(op) < 2) continue;
      std::vector<TensorId> as;
      int32_t writer = -1;
      const int64_t bytes = DeviceTensorBytes(g, dims, GemmMemberOf(op, 0).a);
      for (size_t m = 0; m < NumMembers(op); ++m) {
        const TensorId a = GemmMemberOf(op, m).a;
        const OpId p = g.tensor(a).producer;
        const int32_t r = p == kNone ? -1 : fusion->region_of[static_cast<size_t>(p)];
        if (root(a) != a || r < 0 || (writer >= 0 && r != writer) || region[static_cast<size_t>(a)] ||
            taken[static_cast<size_t>(a)] || together_of[static_cast<size_t>(a)] >= 0 ||
            std::find(as.begin(), as.end(), a) != as.end() ||
            DeviceTensorBytes(g, dims, a) != bytes) {
          as.clear();
          break;
        }
        writer = r;
        as.push_back(a);
      }
      if (as.empty()) continue;
      for (TensorId a : as) together_of[static_cast<size_t>(a)] = static_cast<int32_t>(together.size());
      together.push_back(std::move(as));
    }
  }
  for (OpId id : order) {
    // (A concatenate written in place runs nothing; its output is a unit, which its parts' producers fill.)
    if (views && !runs(id) && !g.op(id).elided && !views->in_place[static_cast<size_t>(id)]) continue;
    Unit u{{}, begin[static_cast<size_t>(id)], end[static_cast<size_t>(id)], 0};
    auto add = [&](TensorId s) {
      taken[static_cast<size_t>(s)] = true;
      u.tensors.push_back(s);
      u.start = std::min(u.start, first[static_cast<size_t>(s)]);
      u.end = std::max(u.end, last[static_cast<size_t>(s)]);
      u.bytes += AlignUp(DeviceTensorBytes(g, dims, s));
    };
    for (TensorId out : g.op(id).outputs) {
      const TensorId s = root(out);
      if (s == kNone || region[static_cast<size_t>(s)] || taken[static_cast<size_t>(s)]) continue;
      if (together_of[static_cast<size_t>(s)] < 0) {
        add(s);
      } else {  // (the first of them written: all of them, in the members' order)
        for (TensorId t : together[static_cast<size_t>(together_of[static_cast<size_t>(s)])]) add(t);
      }
    }
    if (!u.tensors.empty()) units.push_back(std::move(u));
  }
  // Best-fit free list over the arena, in execution order.
  std::sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.start < b.start; });
  std::vector<std::pair<int64_t, int64_t>> free_list;  // (offset, bytes)
  std::vector<std::pair<int64_t, size_t>> live;        // (end, unit index)
  std::vector<int64_t> unit_offset(units.size());
  int64_t top = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    // Free units that ended before this one starts.
    std::sort(live.begin(), live.end());
    while (!live.empty() && live.front().first < units[i].start) {
      const size_t j = live.front().second;
      free_list.emplace_back(unit_offset[j], units[j].bytes);
      live.erase(live.begin());
    }
    std::sort(free_list.begin(), free_list.end());
    for (size_t k = 1; k < free_list.size();) {  // merge neighbours
      if (free_list[k - 1].first + free_list[k - 1].second == free_list[k].first) {
        free_list[k - 1].second += free_list[k].second;
        free_list.erase(free_list.begin() + static_cast<ptrdiff_t>(k));
      } else {
        ++k;
      }
    }
    int best = -1;
    for (size_t k = 0; k < free_list.size(); ++k) {
      if (free_list[k].second >= units[i].bytes &&
          (best < 0 || free_list[k].second < free_list[static_cast<size_t>(best)].second)) {
        best = static_cast<int>(k);
      }
    }
    if (best >= 0) {
      auto& f = free_list[static_cast<size_t>(best)];
      unit_offset[i] = f.first;
      f.first += units[i].bytes;
      f.second -= units[i].bytes;
    } else {
      unit_offset[i] = top;
      top += units[i].bytes;
    }
    live.emplace_back(units[i].end, i);
    int64_t at = unit_offset[i];
    for (TensorId t : units[i].tensors) {
      region[static_cast<size_t>(t)] = 'a';
      offset[static_cast<size_t>(t)] = at;
      at += AlignUp(DeviceTensorBytes(g, dims, t));
    }
    plan.tensor_bytes += units[i].bytes;
  }
  plan.input_bytes = in_bytes;
  plan.param_bytes = param_bytes;
  plan.output_bytes = out_bytes;
  plan.constant_bytes = const_bytes;
  plan.arena_bytes = top;
  return plan;
}

}  // namespace hfuse::cuda
