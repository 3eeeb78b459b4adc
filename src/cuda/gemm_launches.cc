// The CUDA executor's GEMM launches (CudaExecutor::Impl, cuda_executor_impl.h):
// a GEMM or group GEMM op becomes one cuBLASLt call (one member, or members
// of one shape at constant strides: strided batched), else one CUTLASS SM90
// grouped GEMM with bias and activation in its epilogue, else one
// cublasGemmGroupedBatchedEx plus one grouped bias/activation kernel. Which
// members take part is gemm_plan.h's rule, for every path. A mixed group
// (group_gemm_rcr_mixed: members of several epilogues) is one launch of the
// grouped float32 kernel in float32, else one such plan per epilogue: the
// CUTLASS kernel's bias/activation functor takes one activation a launch
// (a launch-wide argument, kept a uniform branch for speed), cuBLASLt one
// epilogue a call.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cuda_executor_impl.h"
#include "grouped_sgemm.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/error.h"
#include "kernels.h"

namespace hfuse {
namespace {
// A float32 group takes its members' activations into the grouped
// float32 kernel (AbsorbActivations; DCNv2's tanh after its experts' down-
// and middle projections) unless FewCallsPay or a strided batched call
// would give it cuBLASLt with K above this: there the GEMM's arithmetic,
// which cuBLAS runs at two to four times the grouped kernel's rate
// (10-20 TFLOP/s on DCNv2's layers, bench/RESULTS.md), outweighs the
// activation's launch (SAINT's intersample FFN, 2048 x 1248 x 4992: about
// 600 us on cuBLAS); at small K (a group of transformer FFNs of
// embeddings of 32) the GEMM is mostly its output's write either way.
constexpr int64_t kAbsorbMaxK = 128;

// A member as the CUTLASS grouped GEMM takes it.
cuda::GroupedGemmMember CutlassMember(const cuda::DeviceGemm& m) {
  return {m.a, m.w, m.bias, m.y, m.m, m.n, m.k, m.lda, m.ldy};
}
}  // namespace

void CudaExecutor::Impl::PlanGemm(const Op& op) {
  const bool group = IsGroupGemm(op.type);
  const DType dtype = g.tensor(op.inputs[0]).dtype;
  std::vector<cuda::DeviceGemm> ms;
  for (size_t i = 0; i < op.outputs.size(); ++i) {
    const hfuse::GemmMember member = GemmMemberOf(op, i);
    const std::optional<EwFunc> activation = ActivationOf(member.kind);
    const std::vector<int64_t> a_shape = ConcreteShape(g.tensor(member.a).shape, dims);
    const cuda::Place a = PlaceOf(member.a), y = PlaceOf(member.y);
    cuda::DeviceGemm m;
    m.a = a.base;
    m.w = PlaceOf(member.w).base;
    m.bias = member.bias != kNone ? PlaceOf(member.bias).base : nullptr;
    m.y = y.base;
    m.k = a_shape.back();
    m.m = NumRows(a_shape);
    m.n = ConcreteShape(g.tensor(member.w).shape, dims)[0];
    m.lda = a.row_stride;
    m.ldy = y.row_stride;
    m.act = activation ? static_cast<int>(*activation) : cuda::kNoActivation;
    ms.push_back(m);
  }
  const float alpha = static_cast<float>(op.attrs.Alpha());
  if (dtype == DType::kFloat32) {
    const std::vector<const Op*> acts = AbsorbActivations(op, ms);
    if (!acts.empty()) {
      // It writes the activations' outputs too, which waiting gathers may read.
      std::vector<TensorId> writes = op.outputs;
      for (const Op* act : acts) writes.push_back(act->outputs[0]);
      if (!LaunchMayPassGathers(op.inputs, writes)) FlushGathers();
      const std::string name = current;
      current = acts.size() == 1 ? fmt::format("{} + {}", op.name, acts[0]->name)
                                 : fmt::format("{} + {} activations ({} to {})", op.name, acts.size(),
                                               acts.front()->name, acts.back()->name);
      PlanGroupedSgemm(ms, alpha);
      current = name;
      return;
    }
  }
  // A single GEMM's residual Add, in its cuBLASLt call as C (FindResidual).
  if (!group) {
    if (const std::optional<Residual> r = FindResidual(op, ms[0])) {
      const Op& add = g.op(r->add_id);
      std::vector<TensorId> reads = op.inputs;
      reads.push_back(r->other);
      if (!LaunchMayPassGathers(reads, {op.outputs[0], add.outputs[0]})) FlushGathers();
      ms[0].c = r->c;
      ms[0].ldc = r->ldc;
      ms[0].y = r->y;
      ms[0].ldy = r->ldy;
      absorbed[static_cast<size_t>(r->add_id)] = true;
      const std::string name = current;
      current = fmt::format("{} + {} (residual)", op.name, add.name);
      current_bytes += static_cast<double>(Bytes(r->other));  // (the Add's output in place of the GEMM's)
      PlanGemmMembers(ms, dtype, alpha, false);
      current = name;
      return;
    }
  }
  // A mixed group (members of several epilogues): float32 runs as one
  // launch of the grouped float32 kernel, which takes an epilogue a member;
  // the other paths (cuBLASLt, CUTLASS, cuBLAS grouped plus the epilogue
  // kernel) take one epilogue a launch, so each epilogue's members are
  // planned as a group of their own, the labels saying so.
  const std::vector<std::vector<cuda::DeviceGemm>> by_epilogue = cuda::SplitByEpilogue(ms);
  if (by_epilogue.size() > 1) {
    if (dtype == DType::kFloat32 && options.gemm_kernel == GemmKernelChoice::kRule && cuda::FewCallsPay(ms, true)) {
      PlanLtEach(ms, dtype, alpha);
      return;
    }
    // An epilogue's members that make one strided batched cuBLASLt call
    // (MMoE's eight experts of one shape) run faster so than inside the
    // grouped float32 kernel (bench/RESULTS.md, 2026-12-04: MMoE at batch
    // 2048, 293.0 us a run as one mixed launch, 201.8 with the experts
    // strided batched): then each epilogue is planned on its own.
    bool strided_part = false;
    for (const std::vector<cuda::DeviceGemm>& sub : by_epilogue) {
      strided_part = strided_part || (sub.size() > 1 && options.strided_batched && cuda::StridedBatchOrder(sub));
    }
    if (dtype == DType::kFloat32 && GroupedSgemmFor() && !strided_part) {
      PlanGroupedSgemm(ms, alpha);
      return;
    }
    const char* why = dtype != DType::kFloat32 ? "CUTLASS grouped takes one epilogue a launch"
                      : strided_part          ? "an epilogue's members are one strided batched call"
                                              : "the grouped float32 kernel is not chosen";
    const std::string op_label = current;
    for (size_t e = 0; e < by_epilogue.size(); ++e) {
      const std::vector<cuda::DeviceGemm>& sub = by_epilogue[e];
      current = fmt::format("{} [epilogue {} of {}: {}; {}]", op_label, e + 1, by_epilogue.size(),
                            EpilogueName(sub[0]), why);
      PlanGemmMembers(sub, dtype, alpha, true);
    }
    current = op_label;
    return;
  }
  PlanGemmMembers(ms, dtype, alpha, group);
}

TensorId CudaExecutor::Impl::WeightParam(const cuda::DeviceGemm& m) const {
  if (!current_op || !(IsGemm(current_op->type) || IsGroupGemm(current_op->type))) return kNone;
  for (size_t i = 0; i < current_op->outputs.size(); ++i) {
    const TensorId w = GemmMemberOf(*current_op, i).w;
    if (g.tensor(w).role == Role::kParam && region[static_cast<size_t>(w)] == 'p' && PlaceOf(w).base == m.w) {
      return w;
    }
  }
  return kNone;
}

void CudaExecutor::Impl::PlanLtEach(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha) {
  std::vector<cuda::DeviceGemm> gemvs;
  for (const cuda::DeviceGemm& m : ms) {
    if (m.n == 1 && m.k > 0) {
      gemvs.push_back(m);
    } else {
      PlanLtGemm({m}, dtype, alpha, m.act);
    }
  }
  // The one-column members of an epilogue: one launch of the GEMV kernel.
  for (const std::vector<cuda::DeviceGemm>& same : cuda::SplitByEpilogue(gemvs)) {
    PlanGemv(same, dtype, alpha, same[0].act);
  }
}

bool CudaExecutor::Impl::ViewOutsideRegions(OpId u) const {
  return views.view_op[static_cast<size_t>(u)] && fusion.region_of[static_cast<size_t>(u)] < 0;
}

bool CudaExecutor::Impl::InGemmOrder(TensorId y, TensorId t) const {
  // A reshape of the GEMM's elements, not a permutation (a Transpose or a
  // reversing Slice is a view too, and its reader reads any strides).
  const cuda::Layout &yl = views.layout[static_cast<size_t>(y)], &tl = views.layout[static_cast<size_t>(t)];
  return yl.root != kNone && tl.root == yl.root && tl.offset == yl.offset &&
         cuda::IsRowMajor(yl, views.shape[static_cast<size_t>(y)]) &&
         cuda::IsRowMajor(tl, views.shape[static_cast<size_t>(t)]);
}

std::optional<int64_t> CudaExecutor::Impl::GemmRowsOf(TensorId z, const cuda::DeviceGemm& m, DType dtype) const {
  if (g.tensor(z).dtype != dtype) return std::nullopt;
  const std::vector<int64_t>& zs = views.shape[static_cast<size_t>(z)];
  const cuda::Layout& zl = views.layout[static_cast<size_t>(z)];
  if (zl.root == kNone || zl.root_dtype != dtype) return std::nullopt;
  // Row-major (any shape of m * n elements), or in rows of n one after
  // another as the GEMM's, at one stride.
  int64_t numel = 1;
  for (int64_t d : zs) numel *= d;
  if (cuda::IsRowMajor(zl, zs) && numel == m.m * m.n) return m.n;
  if (!zs.empty() && zs.back() == m.n && NumRows(zs) == m.m) return cuda::RowStride(zl, zs);
  return std::nullopt;
}

CudaExecutor::Impl::Span CudaExecutor::Impl::RootSpan(TensorId x) const {
  const TensorId root = views.layout[static_cast<size_t>(x)].root;
  const char* b = BufferOf(root);
  return Span{b, b + Bytes(root)};
}

bool CudaExecutor::Impl::OnGemmInputs(const Op& op, TensorId z) const {
  // Each may be dead after the GEMM, so its buffer may be z's (A, or a
  // computed B or bias; a group's members run at once).
  for (size_t j = 0; j < NumMembers(op); ++j) {
    const GemmMember member = GemmMemberOf(op, j);
    for (TensorId in : {member.a, member.w, member.bias}) {
      if (in != kNone && RootSpan(z).Overlaps(RootSpan(in))) return true;
    }
  }
  return false;
}

bool CudaExecutor::Impl::NothingRunsBetween(const Op& op, OpId later, const std::set<OpId>& also_taken) const {
  // The memory plan gives a taken-in op's output its buffer from that op
  // on, which nothing else may use before.
  const auto from = std::find(order.begin(), order.end(), g.tensor(op.outputs[0]).producer);
  const auto to = std::find(order.begin(), order.end(), later);
  if (from == order.end() || to == order.end() || from >= to) return false;
  return std::all_of(from + 1, to, [&](OpId id) { return views.skip[static_cast<size_t>(id)] || also_taken.count(id); });
}

std::optional<CudaExecutor::Impl::Absorbable> CudaExecutor::Impl::FindActivation(const Op& op, size_t i,
                                                                               const cuda::DeviceGemm& m) const {
  // From member i's output through the views (none a region's) that alone read it.
  TensorId t = kNone;
  const OpId act_id = cuda::ActivationReading(
      g, op.outputs[i],
      [&](OpId u) { return ViewOutsideRegions(u); },
      &t);
  if (act_id == kNone) return std::nullopt;
  const Op* act = &g.op(act_id);
  // A member of K 0 runs on the epilogue kernel (PlanGroupedSgemm), which
  // has the EwFunc activations only.
  if (m.k == 0 && cuda::EpilogueActivationOf(*act).act == cuda::kLeakyReluActivation) return std::nullopt;
  if (!InGemmOrder(op.outputs[i], t)) return std::nullopt;
  const TensorId z = act->outputs[0];
  const std::optional<int64_t> rows = GemmRowsOf(z, m, DType::kFloat32);
  if (!rows || OnGemmInputs(op, z)) return std::nullopt;
  return Absorbable{act_id, PlaceOf(z).base, *rows};
}

std::optional<CudaExecutor::Impl::Residual> CudaExecutor::Impl::FindResidual(const Op& op,
                                                                           const cuda::DeviceGemm& m) const {
  if (!options.gemm_residuals || !IsGemm(op.type) || op.outputs.size() != 1 || m.act != cuda::kNoActivation ||
      m.m == 0 || m.n <= 1 || m.k == 0) {
    return std::nullopt;  // (a GEMV or a GEMM of K 0 runs on a kernel of its own, with no C)
  }
  TensorId t = kNone, other = kNone;
  const OpId add_id = cuda::ResidualAddReading(
      g, op.outputs[0],
      [&](OpId u) { return ViewOutsideRegions(u); },
      &t, &other);
  // (An Add the view plan made a view, x + zeros, runs nothing to take in.)
  if (add_id == kNone || views.skip[static_cast<size_t>(add_id)] || fusion.region_of[static_cast<size_t>(add_id)] >= 0 ||
      !InGemmOrder(op.outputs[0], t)) {
    return std::nullopt;
  }
  const DType dtype = g.tensor(op.outputs[0]).dtype;
  const TensorId z = g.op(add_id).outputs[0];
  const std::optional<int64_t> ldc = GemmRowsOf(other, m, dtype), ldy = GemmRowsOf(z, m, dtype);
  if (!ldc || !ldy || OnGemmInputs(op, z) || RootSpan(z).Overlaps(RootSpan(other)) ||
      !NothingRunsBetween(op, add_id, {})) {
    return std::nullopt;
  }
  return Residual{add_id, other, PlaceOf(other).base, *ldc, PlaceOf(z).base, *ldy};
}

std::vector<const Op*> CudaExecutor::Impl::AbsorbActivations(const Op& op, std::vector<cuda::DeviceGemm>& ms) {
  if (!options.gemm_activations || options.gemm_kernel != GemmKernelChoice::kRule || !GroupedSgemmFor()) return {};
  // Not where the members would run on cuBLASLt (a few large ones, or one
  // strided batched call) and K is above kAbsorbMaxK: the GEMMs'
  // arithmetic outweighs the activation's launch there. Nor a single GEMM
  // (which runs on cuBLASLt, PlanGemmMembers), at any size: its call and
  // the activation's launch outran the grouped kernel with the activation
  // (TabTransformer's FFN, 13312 x 128 x 32 with its GELU at batch 512:
  // the model 160.4 against 167.8 us with the activations apart, 379.0
  // against 398.3 at 2048; TabResnet's 512 x 128 x 128 with its LeakyRelu:
  // 58.7 against 64.6 us at 512, bench/RESULTS.md).
  int64_t max_k = 0;
  for (const cuda::DeviceGemm& m : ms) max_k = std::max(max_k, m.k);
  const bool mixed = cuda::SplitByEpilogue(ms).size() > 1;
  const bool strided = ms.size() > 1 && options.strided_batched && cuda::StridedBatchOrder(ms);
  if (ms.size() == 1 || (max_k > kAbsorbMaxK && (cuda::FewCallsPay(ms, mixed) || strided))) {
    // Kept apart by the rule: the profile says so (ApartWhy).
    const std::string where = ms.size() == 1 ? "cuBLASLt (a single GEMM)"
                              : strided      ? "one strided batched cuBLASLt call"
                                             : "cuBLASLt (a few large members: FewCallsPay)";
    for (TensorId y : op.outputs) {
      const OpId act = cuda::ActivationReading(g, y, [&](OpId u) { return views.view_op[static_cast<size_t>(u)]; });
      if (act == kNone) continue;
      kept_apart[act] = fmt::format(
          "kept apart from GEMM '{}' by the rule: it runs on {}, whose epilogue lacks the activation, and that "
          "with the activation's own launch measured faster than the grouped float32 kernel with it in "
          "(gemm_launches.cc, AbsorbActivations)",
          op.name, where);
    }
    return {};
  }
  std::vector<std::optional<Absorbable>> found(ms.size());
  std::set<OpId> acts;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i].act != cuda::kNoActivation) continue;
    found[i] = FindActivation(op, i, ms[i]);
    if (found[i]) acts.insert(found[i]->act_id);
  }
  // An activation a fused region runs goes only with its whole region:
  // each of its ops one of these activations, each output its op's own
  // (no concatenate's slot the region would write).
  std::set<int32_t> regions;
  for (const auto& f : found) {
    const int32_t r = f ? fusion.region_of[static_cast<size_t>(f->act_id)] : -1;
    if (r >= 0) regions.insert(r);
  }
  for (int32_t r : regions) {
    const cuda::FusionRegion& region = fusion.regions[static_cast<size_t>(r)];
    bool whole = !region.Chain();
    for (OpId id : region.ops) whole = whole && acts.count(id);
    for (const cuda::RegionOutput& out : region.outputs) whole = whole && out.place == out.tensor && out.offset == 0;
    if (whole) continue;
    for (auto& f : found) {
      if (f && fusion.region_of[static_cast<size_t>(f->act_id)] == r) {
        acts.erase(f->act_id);
        f.reset();
      }
    }
  }
  // No other launch between the GEMM and its activations.
  for (auto& f : found) {
    if (f && !NothingRunsBetween(op, f->act_id, acts)) return {};  // all or none: a region's activations go together
  }
  std::vector<const Op*> taken;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (!found[i]) continue;
    ms[i].y = found[i]->y;
    ms[i].ldy = found[i]->ldy;
    const Op& act = g.op(found[i]->act_id);
    const cuda::EpilogueActivation e = cuda::EpilogueActivationOf(act);
    ms[i].act = e.act;
    ms[i].act_alpha = e.alpha;
    absorbed[static_cast<size_t>(found[i]->act_id)] = true;
    taken.push_back(&act);
  }
  return taken;
}

bool CudaExecutor::Impl::GroupedSgemmFor() const {
  return options.gemm_kernel != GemmKernelChoice::kPerMember &&
         (options.gemm_kernel == GemmKernelChoice::kGroupedSgemm ||
          (options.cutlass && options.gemm_kernel == GemmKernelChoice::kRule));
}

std::string CudaExecutor::Impl::EpilogueName(const cuda::DeviceGemm& m) {
  std::string epi = m.bias ? "bias" : "";
  if (m.act != cuda::kNoActivation) {
    epi += std::string(epi.empty() ? "" : "+") + cuda::ActivationName(m.act, m.act_alpha);
  }
  return epi.empty() ? "none" : epi;
}

void CudaExecutor::Impl::PlanGemmMembers(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha,
                                         bool group) {
  const int act = ms[0].act;  // one epilogue for all (PlanGemm)
  // float32 members at most kSgemmNarrow wide (towers' last layers, GEMVs)
  // whose activation cuBLASLt's epilogue and the GEMV kernel lack (sigmoid,
  // tanh, ...): the grouped float32 kernel applies it in the same launch,
  // where they would take an epilogue kernel after (MMoE's and PLE's
  // sigmoid towers, bench/RESULTS.md, 2026-12-04).
  const bool lt_takes_act = act == cuda::kNoActivation || act == static_cast<int>(EwFunc::kRelu);
  const bool narrow = std::all_of(ms.begin(), ms.end(), [](const cuda::DeviceGemm& m) { return m.n <= cuda::kSgemmNarrow; });
  const bool gemvs = std::all_of(ms.begin(), ms.end(), [](const cuda::DeviceGemm& m) { return m.n == 1; });
  if (dtype == DType::kFloat32 && options.gemm_kernel == GemmKernelChoice::kRule && GroupedSgemmFor() && !lt_takes_act &&
      narrow) {
    if (options.gemv_activations && gemvs && act != cuda::kLeakyReluActivation) {  // (the GEMV kernel takes no alpha)
      PlanGemv(ms, dtype, alpha, act);
    } else {
      PlanGroupedSgemm(ms, alpha);
    }
    return;
  }
  if (!group) {
    const bool single_sgemm = options.gemm_kernel == GemmKernelChoice::kGroupedSgemm ||
                              (options.single_sgemm && options.gemm_kernel == GemmKernelChoice::kRule &&
                               GroupedSgemmFor() && ms[0].n > 1);  // (one column: the GEMV kernel)
    if (dtype == DType::kFloat32 && single_sgemm && !ms[0].c) {
      PlanGroupedSgemm(ms, alpha);  // (a group of one; a residual C stays cuBLASLt's)
      return;
    }
    PlanLtGemm(ms, dtype, alpha, act);
    return;
  }
  if (const auto batch = options.strided_batched ? cuda::StridedBatchOrder(ms) : std::nullopt) {
    PlanLtGemm(*batch, dtype, alpha, act);
    return;
  }
  // float32 groups: the grouped float32 kernel, one launch, unless one
  // call a member is asked for or the rule picks it (FewCallsPay).
  if (dtype == DType::kFloat32 && options.gemm_kernel == GemmKernelChoice::kRule && cuda::FewCallsPay(ms, false)) {
    // GEMVs all: one launch of the GEMV kernel for the lot.
    if (gemvs) {
      PlanGemv(ms, dtype, alpha, act);
    } else {
      PlanLtEach(ms, dtype, alpha);
    }
    return;
  }
  if (dtype == DType::kFloat32 && GroupedSgemmFor()) {
    PlanGroupedSgemm(ms, alpha);
    return;
  }
  if (options.gemm_kernel == GemmKernelChoice::kPerMember) {
    PlanLtEach(ms, dtype, alpha);
    return;
  }
  std::string why = !options.cutlass ? "CUTLASS off" : alpha != 1.0f ? "alpha is not 1" : "";
  if (why.empty() && PlanCutlassGemm(ms, dtype, act, why)) return;
  // float16/bfloat16: the members CUTLASS can take stay one CUTLASS launch
  // where only some cannot (FiBiNet's SENET layer, K 26, grouped with its
  // 325 bilinear products of K 16: 326 cuBLASLt calls before); the others
  // are planned as a group of their own (below: a cuBLASLt call each).
  if (dtype != DType::kFloat32 && options.cutlass && alpha == 1.0f && options.gemm_kernel == GemmKernelChoice::kRule) {
    std::vector<cuda::DeviceGemm> takes, rest;
    for (const cuda::DeviceGemm& m : ms) {
      (cuda::CutlassCannotTake(cuda::KernelType(dtype), {CutlassMember(m)}, act).empty() ? takes : rest).push_back(m);
    }
    std::string unused;
    if (takes.size() > 1 && !rest.empty() && PlanCutlassGemm(takes, dtype, act, unused)) {
      PlanGemmMembers(rest, dtype, alpha, rest.size() > 1);
      return;
    }
  }
  // A few members CUTLASS cannot take (rows not 16-byte aligned) run one cuBLASLt call
  // each where its epilogue does all (bias, ReLU; a sigmoid would cost a
  // kernel a member): cublasGemmGroupedBatchedEx plus
  // the epilogue kernel took 59 us for DeepFM's two float32 members where
  // the two calls unfused took less (bench/RESULTS.md, 2026-12-01), and a
  // group of this size saves at most that many launches.
  // float16/bfloat16 members CUTLASS cannot take run so however many:
  // cublasGemmGroupedBatchedEx took 83 us for DCNv2's eight bfloat16
  // members of K 429 (four 2048 x 32, four GEMVs) at batch 2048, and the
  // model 434 us fused against 387 unfused (bench/RESULTS.md, 2026-12-05).
  if (options.cutlass && options.gemm_kernel == GemmKernelChoice::kRule &&
      (ms.size() <= cuda::kLtMembersMax || dtype != DType::kFloat32) && lt_takes_act) {
    PlanLtEach(ms, dtype, alpha);
    return;
  }
  PlanGroupedGemm(ms, dtype, alpha, act, why);
}

namespace {

// What a grouped float32 launch's label says of its kernel's tiles.
const char* TilesText(cuda::SgemmKernel kernel) {
  switch (kernel) {
    case cuda::SgemmKernel::kSliced: return " of two slices of K";
    case cuda::SgemmKernel::kTensor: return " on the tensor cores (3xTF32)";
    case cuda::SgemmKernel::kTensorSliced: return " of two slices of K on the tensor cores (3xTF32)";
    default: return "";
  }
}

}  // namespace

bool CudaExecutor::Impl::MakeWeightParts(const cuda::SgemmTiling& tiling, std::vector<cuda::SgemmMember>& members) {
  if (tiling.kernel != cuda::SgemmKernel::kTensor && tiling.kernel != cuda::SgemmKernel::kTensorSliced) return false;
  // The weights the tensor tiles read (a merged member's, its members').
  std::set<const float*> tensor_w;
  for (const cuda::SgemmTile& t : tiling.tiles) {
    if (t.config != static_cast<int32_t>(cuda::SgemmConfig::kTensor64x64)) continue;
    const cuda::SgemmMember& u = tiling.members[static_cast<size_t>(t.member)];
    if (u.count == 0) tensor_w.insert(u.w);
    for (int32_t i = 0; i < u.count; ++i) tensor_w.insert(tiling.members[static_cast<size_t>(u.first + i)].w);
  }
  bool any = false;
  for (cuda::SgemmMember& m : members) {
    if (!tensor_w.count(m.w)) continue;
    cuda::DeviceGemm probe{};
    probe.w = reinterpret_cast<const char*>(m.w);
    const TensorId w_param = WeightParam(probe);
    if (w_param == kNone) continue;  // (computed: the tile splits it)
    m.w3 = WeightParts(w_param, m.w, m.n, m.k);
    any = true;
  }
  return any;
}

float* CudaExecutor::Impl::WeightParts(TensorId w_param, const float* w, int64_t n, int64_t k) {
  const std::tuple<const float*, int64_t, int64_t> key{w, n, k};
  if (const auto it = weight_parts.find(key); it != weight_parts.end()) return it->second;
  const cuda::Tf32Split split{.x = w, .rows = n, .cols = k, .ld = k, .k_along_rows = false, .w_order = true};
  descriptors.push_back(std::make_unique<cuda::DeviceBuffer>());
  descriptors.back()->Allocate(split.OutFloats() * static_cast<int64_t>(sizeof(float)));
  float* w3 = static_cast<float*>(descriptors.back()->ptr);
  derived.push_back({w_param, [=](cudaStream_t s) {
                       cuda::LaunchSplitTf32(split, w3, s);
                       HFUSE_LAUNCHED();
                     }});
  weight_parts[key] = w3;
  return w3;
}

void CudaExecutor::Impl::PlanGroupedSgemm(const std::vector<cuda::DeviceGemm>& ms, float alpha) {
  const cuda::GemmMemberSplit split = cuda::SplitGemmMembers(ms);
  for (const std::vector<cuda::DeviceGemm>& same : cuda::SplitByEpilogue(split.bias_only)) {
    PlanEpilogue(same, DType::kFloat32, same[0].act, true);
  }
  if (split.products.empty()) return;
  std::vector<cuda::SgemmMember> members;
  bool mixed = false;
  for (const cuda::DeviceGemm& m : split.products) {  // each member with its own epilogue
    members.push_back({reinterpret_cast<const float*>(m.a), reinterpret_cast<const float*>(m.w),
                       reinterpret_cast<const float*>(m.bias), reinterpret_cast<float*>(m.y), m.m, m.n, m.k, m.lda,
                       m.ldy, m.act, m.act_alpha});
    mixed = mixed || m.act != split.products[0].act || m.act_alpha != split.products[0].act_alpha ||
            !m.bias != !split.products[0].bias;
  }
  const cuda::SgemmOptions sgemm{.config = options.sgemm_config,
                                 .split = options.sgemm_split,
                                 .tiled = options.sgemm_tiled,
                                 .merge = options.sgemm_merge,
                                 .sms = cuda::NumSms(),
                                 .staged = options.sgemm_staged,
                                 .tensor = options.sgemm_tensor,
                                 .tensor_short = options.sgemm_tensor_short,
                                 .tensor_split = options.sgemm_tensor_split};
  cuda::SgemmTiling tiling = cuda::SgemmTiles(members, sgemm);
  if (options.sgemm_parts_w && MakeWeightParts(tiling, members)) tiling = cuda::SgemmTiles(members, sgemm);
  const cuda::SgemmMember* d_members = Device(tiling.members);
  // Merged members (SgemmOptions::merge): "(8 as one, reading one A)",
  // "(8 and 3 as one each, reading one A)".
  std::string merged;
  int merges = 0;
  for (const cuda::SgemmMember& m : tiling.members) {
    if (m.count > 0) merged += fmt::format("{}{}", merges++ == 0 ? "" : " and ", m.count);
  }
  const cuda::SgemmTile* d_tiles = Device(tiling.tiles);
  // The split-K workspace, its counters zero (SgemmTiling::WorkspaceBytes),
  // this launch's own: two launches sharing it could not run at once.
  void* workspace = tiling.WorkspaceBytes() > 0
                        ? const_cast<uint8_t*>(Device(std::vector<uint8_t>(tiling.WorkspaceBytes())))
                        : nullptr;
  const int count = static_cast<int>(tiling.tiles.size());
  const cuda::SgemmKernel kernel = tiling.kernel;
  const int64_t workspace_floats = tiling.workspace_floats;
  const bool parts_w = tiling.parts_w;
  if (kernel == cuda::SgemmKernel::kTensor || kernel == cuda::SgemmKernel::kTensorSliced) ++stats.tf32x3_launches;
  const auto parts_tiles = std::count_if(tiling.tiles.begin(), tiling.tiles.end(), [](const cuda::SgemmTile& t) {
    return t.config == static_cast<int32_t>(cuda::SgemmConfig::kTensor64x64) && (t.flags & cuda::kSgemmPartsW) != 0;
  });
  Add(fmt::format("grouped float32 GEMM, {} members{}, {} tiles{}{}{}{}", members.size(),
                  merged.empty() ? "" : fmt::format(" ({} as one{}, reading one A)", merged, merges > 1 ? " each" : ""),
                  count, TilesText(kernel),
                  parts_tiles == 0 ? "" : fmt::format(", W's parts made once ({} tiles)", parts_tiles),
                  tiling.counters > 0 ? ", split-K" : "", mixed ? ", an epilogue a member" : ""),
      [=](cudaStream_t s) {
    cuda::LaunchGroupedSgemm(kernel, d_members, d_tiles, count, alpha, workspace, workspace_floats, parts_w, s);
    HFUSE_LAUNCHED();
  });
}

int64_t CudaExecutor::Impl::NumRows(const std::vector<int64_t>& shape) {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
  return r;
}

bool CudaExecutor::Impl::PlanCutlassGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, int act, std::string& why) {
  const cuda::GemmMemberSplit split = cuda::SplitGemmMembers(ms);
  std::vector<cuda::GroupedGemmMember> members;
  for (const cuda::DeviceGemm& m : split.products) members.push_back(CutlassMember(m));
  const int type = cuda::KernelType(dtype);
  why = cuda::CutlassCannotTake(type, members, act);
  if (!why.empty()) return false;
  if (!split.bias_only.empty()) PlanEpilogue(split.bias_only, dtype, act, true);
  if (members.empty()) return true;
  const cuda::GemmKernel kernel =
      options.gemm_kernel == GemmKernelChoice::k128x128 || type != 0 ? cuda::GemmKernel::kTile128x128
      : options.gemm_kernel == GemmKernelChoice::k128x64             ? cuda::GemmKernel::kTile128x64
                                                                     : cuda::ChooseGemmKernel(type, members, cuda::NumSms());
  cutlass_gemms.push_back(cuda::MakeCutlassGroupedGemm(type, kernel, members, act));
  cuda::CutlassGroupedGemm* gemm = cutlass_gemms.back().get();
  std::string epi = ms[0].bias ? "bias" : "";
  if (act != cuda::kNoActivation) {
    epi += std::string(epi.empty() ? "" : "+") + std::string(EwFuncName(static_cast<EwFunc>(act)));
  }
  Add(fmt::format("CUTLASS grouped {}{}", cuda::GemmKernelName(kernel), epi.empty() ? "" : ", " + epi + " in epilogue"),
      [gemm](cudaStream_t s) {
        gemm->Run(s);
        HFUSE_LAUNCHED();
      });
  return true;
}

// The activation (a tower's sigmoid: AITM's and ESMM's heads) in the same
// launch, as the epilogue kernel would apply it after.
void CudaExecutor::Impl::PlanGemv(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act) {
  std::vector<cuda::GemvMember> members;
  for (const cuda::DeviceGemm& m : ms) {
    if (m.m > 0) members.push_back({m.a, m.w, m.bias, m.y, m.lda, m.ldy, m.m, m.k});
  }
  if (members.empty()) return;
  const int type = cuda::KernelType(dtype);
  const std::string in_it = act == cuda::kNoActivation
                                ? ""
                                : fmt::format(", {} in it", EwFuncName(static_cast<EwFunc>(act)));
  Add(members.size() == 1 ? fmt::format("GEMV kernel (N = 1{})", in_it)
                          : fmt::format("GEMV kernel (N = 1, {} members{})", members.size(), in_it),
      [=](cudaStream_t s) {
        cuda::LaunchGemv(type, members.data(), static_cast<int>(members.size()), alpha, act, s);
        HFUSE_LAUNCHED();
      });
}

void CudaExecutor::Impl::PlanLtGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act) {
  const cuda::DeviceGemm& m = ms[0];
  const int64_t batch = static_cast<int64_t>(ms.size());
  const int64_t esize = DTypeBytes(dtype);
  if (m.m == 0 || m.n == 0) return;
  if (m.k == 0) {  // no products: y = bias, then the activation
    PlanEpilogue(ms, dtype, act, /*zero_first=*/true);
    return;
  }
  if (m.n == 1) {  // one output column: the GEMV kernel (kernels.h, LaunchGemv)
    PlanGemv(ms, dtype, alpha, act);
    return;
  }
  const bool relu = act == static_cast<int>(EwFunc::kRelu);
  // 3xTF32 (CudaOptions::tf32x3): one TF32 GEMM of depth 3 kp over the
  // split operands, A's parts in the scratch buffer, W's derived once.
  const TensorId w_param = batch == 1 && dtype == DType::kFloat32 ? WeightParam(m) : kNone;
  const bool x3 = w_param != kNone && (options.tf32x3 > 0 ||
                                       (options.tf32x3 < 0 && cuda::Tf32x3Pays(m.m, m.n, m.k, 1, m.m * m.k, 1)));
  const int64_t kp = (m.k + 3) / 4 * 4, depth = x3 ? 3 * kp : m.k;
  cublasLtMatmulDesc_t desc;
  HFUSE_CUBLAS(cublasLtMatmulDescCreate(&desc, x3 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  lt_descs.push_back(desc);
  const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
  HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (m.bias) epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (m.bias) {
    const void* bias = m.bias;
    HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    const cudaDataType_t bt = cuda::CudaType(dtype);
    HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    if (batch > 1) {
      const int64_t stride = (ms[1].bias - m.bias) / esize;
      HFUSE_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &stride, sizeof(stride)));
    }
  }
  // Column-major view: D (n x m, ld ldy) = op(W) (n x k) . A^T (k x m).
  auto layout = [&](uint64_t rows, uint64_t cols, int64_t ld, int64_t stride) {
    cublasLtMatrixLayout_t l;
    HFUSE_CUBLAS(cublasLtMatrixLayoutCreate(&l, cuda::CudaType(dtype), rows, cols, ld));
    if (batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      HFUSE_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      HFUSE_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
    lt_layouts.push_back(l);
    return l;
  };
  auto stride_of = [&](auto member_ptr) -> int64_t {
    return batch > 1 ? (ms[1].*member_ptr - m.*member_ptr) / esize : 0;
  };
  const cublasLtMatrixLayout_t lw =
      layout(static_cast<uint64_t>(depth), static_cast<uint64_t>(m.n), depth, stride_of(&cuda::DeviceGemm::w));
  const cublasLtMatrixLayout_t la = layout(static_cast<uint64_t>(depth), static_cast<uint64_t>(m.m),
                                           x3 ? depth : m.lda, stride_of(&cuda::DeviceGemm::a));
  const cublasLtMatrixLayout_t ly = layout(static_cast<uint64_t>(m.n), static_cast<uint64_t>(m.m), m.ldy, stride_of(&cuda::DeviceGemm::y));
  cublasLtMatmulPreference_t pref;
  HFUSE_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = cuda::kWorkspaceBytes;
  HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  // The heuristic assumes 256-byte aligned operands unless told otherwise;
  // views and packed params can sit at any element offset.
  auto alignment = [&](auto member_ptr) {
    uint32_t a = 256;
    for (const cuda::DeviceGemm& mm : ms) {
      while (a > 1 && reinterpret_cast<uintptr_t>(mm.*member_ptr) % a != 0) a /= 2;
    }
    return a;
  };
  // The split parts: 256-byte aligned buffers, rows of 3 kp floats (16 bytes a 4).
  const uint32_t align_w = x3 ? 16 : alignment(&cuda::DeviceGemm::w),
                 align_a = x3 ? 16 : alignment(&cuda::DeviceGemm::a), align_y = alignment(&cuda::DeviceGemm::y),
                 align_c = m.c ? alignment(&cuda::DeviceGemm::c) : align_y;
  HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w, sizeof(align_w)));
  HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a, sizeof(align_a)));
  HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  HFUSE_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_y, sizeof(align_y)));
  // C: the residual taken in (a single GEMM's, FindResidual), added at
  // beta 1; else C is D at beta 0 (not read).
  HFUSE_CHECK(!m.c || batch == 1);
  const cublasLtMatrixLayout_t lc = m.c ? layout(static_cast<uint64_t>(m.n), static_cast<uint64_t>(m.m), m.ldc, 0) : ly;
  const void* c = m.c ? static_cast<const void*>(m.c) : static_cast<const void*>(m.y);
  const float beta = m.c ? 1.0f : 0.0f;
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, lw, la, lc, ly, pref, 1, &heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  HFUSE_CUBLAS(hs);
  if (found == 0) throw CudaError("cuBLASLt found no algorithm for a GEMM");
  const cublasLtMatmulAlgo_t algo = heur.algo;
  const void *w = m.w, *a = m.a;
  void* y = m.y;
  void* wsp = workspace_ptr;
  cublasLtHandle_t handle = lt;
  if (x3) {
    // W's parts, made again whenever the param is written.
    w = WeightParts(w_param, reinterpret_cast<const float*>(m.w), m.n, m.k);
    // A's, each run, into the scratch buffer (allocated once planned).
    const cuda::Tf32Split as_split{.x = reinterpret_cast<const float*>(m.a), .rows = m.m, .cols = m.k, .ld = m.lda,
                                   .k_along_rows = false, .w_order = false};
    const cuda::DeviceBuffer* scratch = &tf32x3_scratch;
    // A group's members that read one A (SAINT's K and V projections), one
    // after another: the parts the one before split are still there.
    const std::tuple<const char*, int64_t, int64_t, int64_t> key{m.a, m.m, m.k, m.lda};
    if (key != tf32x3_last_split || launches.size() != tf32x3_last_end) {
      AddTf32Split(as_split, 0, fmt::format("3xTF32 split kernel, A's TF32 parts, {} x {}", m.m, m.k));
    }
    Add(fmt::format("cublasLt 3xTF32 on the tensor cores, {} x {} x {}", m.m, m.n, m.k), [=](cudaStream_t s) {
      HFUSE_CUBLAS(cublasLtMatmul(handle, desc, &alpha, w, lw, scratch->ptr, la, &beta, c, lc, y, ly, &algo, wsp,
                                  ws, s));
    });
    tf32x3_last_split = key;
    tf32x3_last_end = launches.size();
    ++stats.tf32x3_launches;
  } else {
    // The strides and alignments the heuristic saw, in the label (a profile
    // that finds a call slow can then tell its operands' placement apart).
    const std::string label =
        batch > 1
            ? fmt::format("cublasLt strided batched, {} of {} x {} x {}, strides A {} W {} Y {}, aligned A {} W {} Y {}",
                          batch, m.m, m.n, m.k, stride_of(&cuda::DeviceGemm::a), stride_of(&cuda::DeviceGemm::w),
                          stride_of(&cuda::DeviceGemm::y), align_a, align_w, align_y)
            : "cublasLt";
    Add(label, [=](cudaStream_t s) {
      HFUSE_CUBLAS(cublasLtMatmul(handle, desc, &alpha, w, lw, a, la, &beta, c, lc, y, ly, &algo, wsp, ws, s));
    });
  }
  if (act != cuda::kNoActivation && !relu) {  // cuBLASLt's only activation epilogue is relu
    std::vector<cuda::DeviceGemm> no_bias = ms;
    for (auto& mm : no_bias) mm.bias = nullptr;
    PlanEpilogue(no_bias, dtype, act, false);
  }
}

void CudaExecutor::Impl::PlanGroupedGemm(const std::vector<cuda::DeviceGemm>& ms, DType dtype, float alpha, int act,
                                         const std::string& why) {
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m_arr, n_arr, k_arr, lda, ldb, ldc, sizes;
  std::vector<float> alphas, betas;
  std::vector<const void*> a_ptrs, b_ptrs;
  std::vector<void*> c_ptrs;
  const cuda::GemmMemberSplit split = cuda::SplitGemmMembers(ms);
  for (const cuda::DeviceGemm& m : split.products) {
    ta.push_back(CUBLAS_OP_T);
    tb.push_back(CUBLAS_OP_N);
    m_arr.push_back(static_cast<int>(m.n));
    n_arr.push_back(static_cast<int>(m.m));
    k_arr.push_back(static_cast<int>(m.k));
    lda.push_back(static_cast<int>(m.k));
    ldb.push_back(static_cast<int>(m.lda));
    ldc.push_back(static_cast<int>(m.ldy));
    alphas.push_back(alpha);
    betas.push_back(0.0f);
    a_ptrs.push_back(m.w);
    b_ptrs.push_back(m.a);
    c_ptrs.push_back(m.y);
    sizes.push_back(1);
  }
  if (!split.bias_only.empty()) PlanEpilogue(split.bias_only, dtype, act, true);
  if (!ta.empty()) {
    const void* const* da = Device(a_ptrs);
    const void* const* db = Device(b_ptrs);
    void* const* dc = const_cast<void* const*>(Device(c_ptrs));
    const cudaDataType_t type = cuda::CudaType(dtype);
    cublasHandle_t handle = blas;
    const int count = static_cast<int>(ta.size());
    Add(why.empty() ? std::string("cublasGemmGroupedBatchedEx")
                    : fmt::format("cublasGemmGroupedBatchedEx, not CUTLASS: {}", why),
        [=](cudaStream_t s) {
      HFUSE_CUBLAS(cublasSetStream(handle, s));
      HFUSE_CUBLAS(cublasGemmGroupedBatchedEx(handle, ta.data(), tb.data(), m_arr.data(), n_arr.data(),
                                              k_arr.data(), alphas.data(), da, type, lda.data(), db, type,
                                              ldb.data(), betas.data(), dc, type, ldc.data(), count,
                                              sizes.data(), CUBLAS_COMPUTE_32F));
    });
  }
  const std::vector<cuda::DeviceGemm>& rest = split.products;
  if (!rest.empty() && (rest[0].bias || act != cuda::kNoActivation)) PlanEpilogue(rest, dtype, act, false);
}

void CudaExecutor::Impl::PlanEpilogue(const std::vector<cuda::DeviceGemm>& ms, DType dtype, int act, bool zero_first) {
  std::vector<cuda::EpilogueDesc> descs;
  std::vector<cuda::EpilogueTile> tiles;
  const int vec = 16 / DTypeBytes(dtype);
  for (const cuda::DeviceGemm& m : ms) {
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const int32_t v = m.n % vec == 0 && m.ldy % vec == 0 && aligned(m.y) && (!m.bias || aligned(m.bias));
    descs.push_back({m.y, m.bias, m.m, m.n, m.ldy, v});
    // About 16K elements a tile.
    const int64_t rows_per_tile = std::max<int64_t>(1, 16384 / std::max<int64_t>(m.n, 1));
    for (int64_t r = 0; r < m.m; r += rows_per_tile) {
      tiles.push_back({static_cast<int32_t>(descs.size() - 1), static_cast<int32_t>(r),
                       static_cast<int32_t>(std::min(rows_per_tile, m.m - r))});
    }
    if (zero_first) {
      char* y = m.y;
      const size_t pitch = static_cast<size_t>(m.ldy * DTypeBytes(dtype));
      const size_t width = static_cast<size_t>(m.n * DTypeBytes(dtype));
      const size_t rows = static_cast<size_t>(m.m);
      Add("clear", [=](cudaStream_t s) { HFUSE_CUDA(cudaMemset2DAsync(y, pitch, 0, width, rows, s)); });
    }
  }
  const cuda::EpilogueDesc* d = Device(descs);
  const cuda::EpilogueTile* t = Device(tiles);
  const int num_tiles = static_cast<int>(tiles.size());
  const int type = cuda::KernelType(dtype);
  const int a = act;
  Add("epilogue kernel", [=](cudaStream_t s) {
    cuda::LaunchGroupEpilogue(type, d, t, num_tiles, a, s);
    HFUSE_LAUNCHED();
  });
}

}  // namespace hfuse
