// A mixture's gate in the text notation (hfuse/io/graph_text.h), for the
// fused-region tests of the planner (cuda_plan_test.cc) and of the GPU
// (cuda_executor_test.cc): a softmax over E experts, B rows, read only as
// a broadcast view (the Unsqueeze, here a reshape) by each form of
// fusion_regions.h that weighs experts: the weighted sum over a [B, E, D]
// stack that MMoE and PLE write (a Mul, then a mean over E), and DCNv2's
// matrix-vector product [B, M, E] x [B, E, 1] (with a LogSoftmax, the
// other kind of gate). `extra_outputs` names more graph outputs (", s").
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace hfuse::test {

inline std::string GateWeighsAStack(int64_t b, int64_t e, int64_t d, const std::string& extra_outputs = "") {
  return fmt::format(R"(input g: float32[{0}, {1}]
input x: float32[{0}, {1}, {2}]
tensor s: float32[{0}, {1}]
s = opaque(g) {{onnx = Softmax, axis = -1}}  # gate
tensor u: float32[{0}, {1}, 1]
u = reshape(s) {{shape = [{0}, {1}, 1]}}  # unsqueeze
tensor m: float32[{0}, {1}, {2}]
m = opaque(u, x) {{onnx = Mul}}  # weigh
tensor y: float32[{0}, {2}]
y = opaque(m) {{onnx = ReduceMean, axes = [1], keepdims = 0}}  # mix
output y{3}
)",
                     b, e, d, extra_outputs);
}

inline std::string GateTimesExperts(int64_t b, int64_t e, int64_t m, const std::string& extra_outputs = "") {
  return fmt::format(R"(input g: float32[{0}, {1}]
input x: float32[{0}, {2}, {1}]
tensor s: float32[{0}, {1}]
s = opaque(g) {{onnx = LogSoftmax, axis = -1}}  # gate
tensor u: float32[{0}, {1}, 1]
u = reshape(s) {{shape = [{0}, {1}, 1]}}  # unsqueeze
tensor y: float32[{0}, {2}, 1]
y = opaque(x, u) {{onnx = MatMul}}  # mix
output y{3}
)",
                     b, e, m, extra_outputs);
}

}  // namespace hfuse::test
