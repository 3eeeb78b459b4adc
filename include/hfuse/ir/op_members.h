// The members of GEMM and LayerNorm ops, grouped or not: where each member
// finds its operands among the op's inputs. Every reader of a group op's
// operands goes through here, so the layout is written once.
//
// An ungrouped op is a group of one. A group GEMM lists its members' inputs
// member after member (A0, W0[, b0], A1, W1[, b1], ...; in a mixed group,
// each member with its own kind's operands, GemmKindOf); a group LayerNorm
// slot after slot (X0, X1, ..., then all gammas, then all betas), each slot
// present for every member or for none. Member m's output is outputs[m].
// A LayerNorm without gamma or beta (1 and 0) has kNone there. A group
// gather lists its members' table and ids member after member (T0, I0, T1,
// I1, ...); its members are ONNX Gathers (opaque ops, axis 0), for which
// IsOnnxGather holds.
#pragma once

#include <utility>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

struct GemmMember {
  TensorId a = kNone;
  TensorId w = kNone;     // [N, K]
  TensorId bias = kNone;  // [N]; kNone for a kind without bias
  TensorId y = kNone;
  OpType kind = OpType::kGemmRcr;  // the member's GEMM kind: its bias and activation
};

struct LayerNormMember {
  TensorId x = kNone;
  TensorId gamma = kNone;  // kNone: none given (1)
  TensorId beta = kNone;   // kNone: none given (0)
  TensorId y = kNone;
  const std::vector<int64_t>* normalized_shape = nullptr;
};

struct GatherMember {
  TensorId table = kNone;  // [rows, ...]: the lookup is along axis 0
  TensorId ids = kNone;    // int32 or int64, any shape
  TensorId y = kNone;      // ids' shape + table's shape[1:]
};

inline size_t NumMembers(const Op& op) { return op.outputs.size(); }

// An ONNX Gather kept opaque (one output): what fuse-group-gathers looks at,
// and gives a reason when it stays out. GatherOperandsAreInputs: its data
// and indices are both op inputs, in that order (the form an embedding
// lookup imports as; the importer keeps indices of a type the IR lacks, or
// folded ones, as constants of the node). Its axis is the node's.
bool IsOnnxGather(const Op& op);
bool GatherOperandsAreInputs(const Op& op);
int64_t GatherAxis(const Op& op);  // as written (may be negative)

// Member m of a group gather, or the lookup of an ONNX Gather whose
// operands are inputs (GatherOperandsAreInputs).
inline GatherMember GatherMemberOf(const Op& op, size_t m) {
  return {op.inputs[2 * m], op.inputs[2 * m + 1], op.outputs[m]};
}

// Operands per GEMM member: A, W, and the bias if the kind has one. For a
// group_gemm_rcr_mixed op, ask GemmMemberArity: its members' differ.
inline size_t GemmArity(OpType type) { return GemmHasBias(type) ? 3 : 2; }

// The GEMM kind of member m of a GEMM op, grouped or not: the op's own kind,
// its group kind's member kind, or (group_gemm_rcr_mixed) attrs.member_ops[m].
// Its bias and activation are the member's epilogue.
inline OpType GemmKindOf(const Op& op, size_t m) {
  if (op.type == OpType::kGroupGemmRcrMixed) return op.attrs.member_ops[m];
  return IsGemm(op.type) ? op.type : MemberOf(op.type);
}
inline size_t GemmMemberArity(const Op& op, size_t m) { return GemmArity(GemmKindOf(op, m)); }
// Where member m's operands start among a GEMM op's inputs.
inline size_t GemmMemberOffset(const Op& op, size_t m) {
  if (op.type != OpType::kGroupGemmRcrMixed) return m * GemmArity(op.type);
  size_t at = 0;
  for (size_t i = 0; i < m; ++i) at += GemmArity(op.attrs.member_ops[i]);
  return at;
}
// Whether a group GEMM's members differ in their epilogue (bias or activation).
inline bool IsMixedGemmGroup(const Op& op) { return op.type == OpType::kGroupGemmRcrMixed; }

// Which of gamma and beta a LayerNorm op, grouped or not, is given.
struct LayerNormAffine {
  bool gamma = false;
  bool beta = false;
};
inline LayerNormAffine AffineOf(const Op& op) {
  if (IsLayerNorm(op.type)) return {op.attrs.has_gamma, op.attrs.has_beta};
  const size_t per = op.inputs.size() / op.outputs.size();  // 1, 2 or 3 (the verifier's rule)
  return {per >= 2, per >= 3};
}

inline GemmMember GemmMemberOf(const Op& op, size_t m) {
  const OpType kind = GemmKindOf(op, m);
  const size_t per = GemmArity(kind);
  const TensorId* in = op.inputs.data() + GemmMemberOffset(op, m);
  return {in[0], in[1], per == 3 ? in[2] : kNone, op.outputs[m], kind};
}

inline LayerNormMember LayerNormMemberOf(const Op& op, size_t m) {
  if (IsLayerNorm(op.type)) {
    return {op.inputs[0], op.attrs.has_gamma ? op.inputs[1] : kNone,
            op.attrs.has_beta ? op.inputs.back() : kNone, op.outputs[0],
            &op.attrs.normalized_shape};
  }
  const size_t members = op.outputs.size();
  const size_t per = op.inputs.size() / members;
  return {op.inputs[m], per >= 2 ? op.inputs[members + m] : kNone,
          per >= 3 ? op.inputs[2 * members + m] : kNone, op.outputs[m],
          &op.attrs.normalized_shapes[m]};
}

// Calls f(input index) for each operand of member m of a GEMM or LayerNorm
// op, grouped or not, in operand order; for any other op, for every input.
template <typename F>
void ForEachMemberInput(const Op& op, size_t m, F&& f) {
  if (IsGroupGemm(op.type)) {
    const size_t per = GemmMemberArity(op, m), at = GemmMemberOffset(op, m);
    for (size_t k = 0; k < per; ++k) f(at + k);
  } else if (IsGroupLayerNorm(op.type)) {
    const size_t members = op.outputs.size();
    for (size_t k = m; k < op.inputs.size(); k += members) f(k);
  } else if (IsGroupGather(op.type)) {
    f(2 * m);
    f(2 * m + 1);
  } else {
    for (size_t k = 0; k < op.inputs.size(); ++k) f(k);
  }
}

// The member of a group op (GEMM, LayerNorm or gather) that reads input `index`.
inline size_t MemberOfInput(const Op& op, size_t index) {
  if (IsMixedGemmGroup(op)) {
    size_t m = 0;
    for (size_t at = GemmMemberArity(op, 0); at <= index; at += GemmMemberArity(op, ++m)) {
    }
    return m;
  }
  if (IsGroupGemm(op.type)) return index / GemmArity(op.type);
  if (IsGroupGather(op.type)) return index / 2;
  return index % op.outputs.size();  // group LayerNorm: slot after slot
}

// Whether input `index` of a GEMM or LayerNorm op, grouped or not, is a
// member's first operand (A, or X).
inline bool IsMemberActivation(const Op& op, size_t index) {
  if (IsGemm(op.type) || IsLayerNorm(op.type)) return index == 0;
  if (IsMixedGemmGroup(op)) return index == GemmMemberOffset(op, MemberOfInput(op, index));
  if (IsGroupGemm(op.type)) return index % GemmArity(op.type) == 0;
  if (IsGroupLayerNorm(op.type)) return index < op.outputs.size();
  return false;
}

// The inputs of a group op of these members, in the layout above.
inline std::vector<TensorId> GroupGemmInputs(const std::vector<GemmMember>& members) {
  std::vector<TensorId> inputs;
  inputs.reserve(members.size() * 3);
  for (const GemmMember& m : members) {
    inputs.push_back(m.a);
    inputs.push_back(m.w);
    if (m.bias != kNone) inputs.push_back(m.bias);
  }
  return inputs;
}
std::vector<TensorId> GroupLayerNormInputs(const std::vector<LayerNormMember>& members);
inline std::vector<TensorId> GroupGatherInputs(const std::vector<GatherMember>& members) {
  std::vector<TensorId> inputs;
  inputs.reserve(members.size() * 2);
  for (const GatherMember& m : members) {
    inputs.push_back(m.table);
    inputs.push_back(m.ids);
  }
  return inputs;
}

}  // namespace hfuse
