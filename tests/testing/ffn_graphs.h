// A feed-forward block in the text notation (hfuse/io/graph_text.h), for
// the FFN region tests of the planner (cuda_plan_test.cc) and of the GPU
// (cuda_executor_test.cc): y = act(x W1^T + b1) W2^T + b2 over rows of
// x [m, in], a hidden row of `hidden`; the first GEMM without its bias
// where `bias1` is false; `extra_outputs` names more graph outputs (", h").
// With `tokens` > 0, x is [m / tokens, tokens, in] and each GEMM reads and
// writes 2-D views of it (SAINT's flattened column FFN: reshape ops around
// both GEMMs). Gated (`gated` 1, or -1 with the gate's half first): the
// first GEMM 2 x hidden wide, split in two halves, y = (v * act(g)) W2^T +
// b2 (FTTransformer's GEGLU: `x, gates = x.chunk(2, -1); x * gelu(gates)`;
// `gated` and `tokens` not both).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace hfuse::test {

struct FfnSizes {
  int64_t m = 37, in = 32, hidden = 128, out = 32;
  std::string act = "gelu";  // an elementwise func of one operand
  bool bias1 = true;
  int64_t tokens = 0;
  int gated = 0;
};

inline std::string FfnBlock(const FfnSizes& n, const std::string& extra_outputs = "") {
  const std::string a = n.tokens == 0 ? "x" : "x2";
  const std::string first = n.bias1 ? fmt::format("gemm_rcr_bias({}, w1, b1)", a) : fmt::format("gemm_rcr({}, w1)", a);
  if (n.tokens == 0) {
    // The activation: of h, or gated, of one half of h times the other.
    const std::string act =
        n.gated == 0
            ? fmt::format("tensor a: float32[{0}, {1}]\na = elementwise(h) {{func = {2}}}  # act\n", n.m, n.hidden,
                          n.act)
            : fmt::format(R"(tensor v: float32[{0}, {1}]
tensor g: float32[{0}, {1}]
{3} = split(h) {{split_sizes = [{1}, {1}], dim = 1}}  # halves
tensor ag: float32[{0}, {1}]
ag = elementwise(g) {{func = {2}}}  # act
tensor a: float32[{0}, {1}]
a = elementwise(v, ag) {{func = mul}}  # gate
)",
                          n.m, n.hidden, n.act, n.gated > 0 ? "(v, g)" : "(g, v)");
    return fmt::format(R"(input x: float32[{0}, {1}]
param w1: float32[{7}, {1}]
param b1: float32[{7}]
param w2: float32[{3}, {2}]
param b2: float32[{3}]
tensor h: float32[{0}, {7}]
h = {4}  # up
{5}tensor y: float32[{0}, {3}]
y = gemm_rcr_bias(a, w2, b2)  # down
output y{6}
)",
                       n.m, n.in, n.hidden, n.out, first, act, extra_outputs, n.gated != 0 ? 2 * n.hidden : n.hidden);
  }
  const int64_t b = n.m / n.tokens;
  return fmt::format(R"(input x: float32[{7}, {8}, {1}]
param w1: float32[{2}, {1}]
param b1: float32[{2}]
param w2: float32[{3}, {2}]
param b2: float32[{3}]
tensor x2: float32[{0}, {1}]
x2 = reshape(x) {{shape = [{0}, {1}]}}  # flatten
tensor h2: float32[{0}, {2}]
h2 = {4}  # up
tensor h: float32[{7}, {8}, {2}]
h = reshape(h2) {{shape = [{7}, {8}, {2}]}}  # unflatten_h
tensor a3: float32[{7}, {8}, {2}]
a3 = elementwise(h) {{func = {5}}}  # act
tensor a: float32[{0}, {2}]
a = reshape(a3) {{shape = [{0}, {2}]}}  # flatten_a
tensor y2: float32[{0}, {3}]
y2 = gemm_rcr_bias(a, w2, b2)  # down
tensor y: float32[{7}, {8}, {3}]
y = reshape(y2) {{shape = [{7}, {8}, {3}]}}  # unflatten_y
output y{6}
)",
                     n.m, n.in, n.hidden, n.out, first, n.act, extra_outputs, b, n.tokens);
}

}  // namespace hfuse::test
