// The codes the CUDA kernels and their host-side planners share, in a
// header with no CUDA in it, so that the planning built on every machine
// (fusion_regions.h) and the CPU checks of it (tests/cuda/plan_check.cc)
// speak the kernels' language: the elementwise functions (OnnxFunc, whose
// float32 formulas are float_funcs.def) and the reduction kinds.
#pragma once

#include <cstdint>

namespace hfuse::cuda {

enum OnnxFunc : int32_t {
  kCopy,  // y = x (converted to y's type): Cast, and every copy
  // binary (numpy broadcasting)
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kMod, kFMod, kPRelu,
  kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor,
  kWhere,   // ternary: in[0] ? in[1] : in[2]
  kMulAdd,  // ternary: in[0] * in[1] + in[2] (an inference BatchNormalization)
  // unary
  kRelu, kSigmoid, kTanh, kSqrt, kExp, kLog, kNeg, kAbs, kErf, kReciprocal, kSoftplus,
  kLeakyRelu, kClip, kNot, kFloor, kCeil, kElu, kHardSigmoid, kSign, kGelu, kGeluTanh,
  kSelu, kSoftsign, kSwish, kMish,
  kRsqrtAdd,  // 1 / sqrt(u + alpha): a LayerNorm's scale from its variance (alpha its epsilon), in fused regions
};

// A GEMM epilogue's activation beyond the EwFunc codes (kernels.h's
// kNoActivation): ONNX LeakyRelu, which only the grouped float32 kernel
// applies (grouped_sgemm.h, its slope SgemmMember::act_alpha; the IR's
// EwFunc has no LeakyRelu, and cuBLASLt's epilogues none either).
inline constexpr int32_t kLeakyReluActivation = 32;

// ONNX ReduceSum / Mean / Max / Min / Prod / L1 / L2 / SumSquare.
enum ReduceKind : int32_t {
  kReduceSum, kReduceMean, kReduceMax, kReduceMin, kReduceProd, kReduceL1, kReduceL2, kReduceSumSquare
};

}  // namespace hfuse::cuda
