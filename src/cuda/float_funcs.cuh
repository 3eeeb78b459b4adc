// float_funcs.def's formulas as one device function, by OnnxFunc code: what
// the elementwise kernels compute (onnx_kernels.cu), the FFN kernel's
// activation (ffn.cu), and the GELU launch of bench/fused_ffn_bench.cu.
#pragma once

#include <cstdint>

#include "kernel_codes.h"

namespace hfuse::cuda {

// The CPU executor's formulas (cpu_onnx_ops.cc, Binary and Unary), in fp32.
__device__ __forceinline__ float FloatFuncOf(int32_t func, float alpha, float beta, const float* x) {
  const float u = x[0], v = x[1], w = x[2];
  switch (func) {
#define HFUSE_FLOAT_FUNC(Func, expression) \
  case Func: return expression;
#include "float_funcs.def"
#undef HFUSE_FLOAT_FUNC
    default: return 0.0f;
  }
}

}  // namespace hfuse::cuda
