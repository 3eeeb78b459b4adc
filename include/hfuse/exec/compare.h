// Comparing the outputs of two runs: how `hfuse verify` decides PASS/FAIL.
//
// For each output, the error is max|a - b| normalised by max|reference|
// (at least 1e-30), the test is that it is at most the dtype's tolerance
// (float32 1e-5, float16 1e-2, bfloat16 2e-2), and NaN or infinity where the
// reference has none fails.
#pragma once

#include <string>
#include <vector>

#include "hfuse/runtime/host_tensor.h"

namespace hfuse {

double Tolerance(DType dtype);

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
std::vector<OutputComparison> CompareOutputs(const TensorMap& reference, const TensorMap& actual);

}  // namespace hfuse
