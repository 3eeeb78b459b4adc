// Comparing the outputs of two runs: how `hfuse verify` decides PASS/FAIL.
//
// For each output, the error is max|a - b| normalised by max|reference|
// (at least 1e-30), the test is that it is at most the dtype's tolerance
// (float32 1e-5, float16 1e-2, bfloat16 2e-2), and NaN or infinity where the
// reference has none fails. A run that sums float32 products on the tensor
// cores in 3xTF32 (CudaRunStats::tf32x3_launches) gets 3e-5 in float32:
// each product keeps float32's bits, but the tensor cores' float32 sums
// measured 2-3x the CUDA cores' error (a 600 x 520 x 1030 GEMM: 3.4e-6
// against 1.4e-6 of the CPU's result; SAINT at batch 512: 1.3e-5 against
// 5.2e-6; H100, bench/RESULTS.md, 2026-12-06).
#pragma once

#include <string>
#include <vector>

#include "hfuse/runtime/host_tensor.h"

namespace hfuse {

double Tolerance(DType dtype, bool tf32x3 = false);

struct OutputComparison {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  double max_abs = 0;
  double normalized = 0;  // max_abs / max|reference|
  bool bitwise_equal = false;
  bool pass = false;
  std::string problem;  // set when shapes, dtypes or names do not match
};

// Compares `actual` against `reference`, output by output (by name).
std::vector<OutputComparison> CompareOutputs(const TensorMap& reference, const TensorMap& actual,
                                             bool tf32x3 = false);

}  // namespace hfuse
