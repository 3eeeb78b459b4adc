// A mixture's gate in the text notation (hfuse/io/graph_text.h), for the
// fused-region tests of the planner (cuda_plan_test.cc) and of the GPU
// (cuda_executor_test.cc): a softmax over E experts, B rows, read only as
// a broadcast view (the Unsqueeze, here a reshape) by each form of
// fusion_regions.h that weighs experts: the weighted sum over a [B, E, D]
// stack that MMoE and PLE write (a Mul, then a mean over E), and DCNv2's
// matrix-vector product [B, M, E] x [B, E, 1] (with a LogSoftmax, the
// other kind of gate). `extra_outputs` names more graph outputs (", s").
// And DCNv2's mixture whose experts are GEMMs the region computes
// (MixtureOfGemms).
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

// DCNv2's mixture over E experts whose values are GEMMs: expert i is
// x0 * (c_i W_i^T [+ b_i]) ([B, N] products of K, viewed [B, N, 1]; member
// 1 with a bias where `bias`), stacked, weighed by softmax(g) (MatMul by
// [B, E, 1]), plus the residual r. `extra_outputs` as above (", y0").
inline std::string MixtureOfGemms(int64_t b, int64_t n, int64_t k, int e, bool bias,
                                  const std::string& extra_outputs = "") {
  std::string t = fmt::format("input g: float32[{0}, {1}]\ninput x0: float32[{0}, {2}, 1]\ninput r: float32[{0}, {2}, 1]\n",
                              b, e, n);
  std::string parts;
  for (int i = 0; i < e; ++i) {
    const bool with_bias = bias && i == 1;
    t += fmt::format("input c{0}: float32[{1}, {3}]\nparam w{0}: float32[{2}, {3}]\ntensor y{0}: float32[{1}, {2}]\n", i, b,
                     n, k);
    t += with_bias ? fmt::format("param wb{0}: float32[{1}]\ny{0} = gemm_rcr_bias(c{0}, w{0}, wb{0})  # up{0}\n", i, n)
                   : fmt::format("y{0} = gemm_rcr(c{0}, w{0})  # up{0}\n", i);
    t += fmt::format(
        "tensor v{0}: float32[{1}, {2}, 1]\nv{0} = reshape(y{0}) {{shape = [{1}, {2}, 1]}}  # view{0}\n"
        "tensor p{0}: float32[{1}, {2}, 1]\np{0} = opaque(x0, v{0}) {{onnx = Mul}}  # expert{0}\n",
        i, b, n);
    parts += fmt::format("{}p{}", i ? ", " : "", i);
  }
  t += fmt::format(R"(tensor x: float32[{0}, {2}, {1}]
x = opaque({3}) {{onnx = Concat, axis = -1}}  # stack
tensor s: float32[{0}, {1}]
s = opaque(g) {{onnx = Softmax, axis = -1}}  # gate
tensor u: float32[{0}, {1}, 1]
u = reshape(s) {{shape = [{0}, {1}, 1]}}  # unsqueeze
tensor m: float32[{0}, {2}, 1]
m = opaque(x, u) {{onnx = MatMul}}  # mix
tensor y: float32[{0}, {2}, 1]
y = opaque(m, r) {{onnx = Add}}  # res
output y{4}
)",
                   b, e, n, parts, extra_outputs);
  return t;
}

}  // namespace hfuse::test
