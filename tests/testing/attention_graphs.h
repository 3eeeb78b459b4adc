// An attention chain in the text notation (hfuse/io/graph_text.h), for the
// fused-region tests of the planner (cuda_plan_test.cc) and of the GPU
// (cuda_executor_test.cc): softmax(q k^T) v over [B, H] batch matrices of
// Sq queries and Sk keys, heads of D (q, k) and Dv (v), K read transposed
// through a Transpose view of k, v one for all heads (broadcast).
// `extra_outputs` names more graph outputs (", s").
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace hfuse::test {

struct AttentionSizes {
  int64_t b = 2, h = 3, sq = 5, sk = 6, d = 4, dv = 7;
};

inline std::string AttentionChain(const AttentionSizes& n, const std::string& extra_outputs = "") {
  return fmt::format(R"(input q: float32[{0}, {1}, {2}, {4}]
input k: float32[{0}, {1}, {3}, {4}]
input v: float32[{0}, 1, {3}, {5}]
tensor kt: float32[{0}, {1}, {4}, {3}]
kt = opaque(k) {{onnx = Transpose, perm = [0, 1, 3, 2]}}  # kt
tensor s: float32[{0}, {1}, {2}, {3}]
s = opaque(q, kt) {{onnx = MatMul}}  # scores
tensor p: float32[{0}, {1}, {2}, {3}]
p = opaque(s) {{onnx = Softmax, axis = -1}}  # softmax
tensor y: float32[{0}, {1}, {2}, {5}]
y = opaque(p, v) {{onnx = MatMul}}  # mix
output y{6}
)",
                     n.b, n.h, n.sq, n.sk, n.d, n.dv, extra_outputs);
}

}  // namespace hfuse::test
