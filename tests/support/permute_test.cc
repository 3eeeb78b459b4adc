// PermuteBytes against the definition (output index i of dims perm[...]
// reads the input at the same coordinates, unpermuted) for every perm of a
// 4-D array of 2-byte elements, and the edge cases: rank 0, a zero dim.
#include "hfuse/support/permute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace hfuse {
namespace {

TEST(PermuteBytesTest, EveryPermOfA4dArrayMatchesTheDefinition) {
  const std::vector<int64_t> dims = {2, 3, 4, 5};
  std::vector<uint16_t> in(120);
  std::iota(in.begin(), in.end(), uint16_t{1000});
  std::vector<int64_t> perm = {0, 1, 2, 3};
  int checked = 0;
  do {
    ASSERT_TRUE(IsPermutation(perm, 4));
    std::vector<uint16_t> out(120, 0);
    PermuteBytes(reinterpret_cast<const uint8_t*>(in.data()), reinterpret_cast<uint8_t*>(out.data()),
                 dims, perm, 2);
    std::vector<int64_t> out_dims(4), c(4, 0);
    for (size_t d = 0; d < 4; ++d) out_dims[d] = dims[static_cast<size_t>(perm[d])];
    for (int64_t i = 0; i < 120; ++i) {
      // c: the coordinates of output element i; input coordinate perm[d] is c[d].
      int64_t rest = i;
      for (size_t d = 4; d-- > 0;) {
        c[d] = rest % out_dims[d];
        rest /= out_dims[d];
      }
      std::vector<int64_t> at(4);
      for (size_t d = 0; d < 4; ++d) at[static_cast<size_t>(perm[d])] = c[d];
      const int64_t j = ((at[0] * 3 + at[1]) * 4 + at[2]) * 5 + at[3];
      ASSERT_EQ(out[static_cast<size_t>(i)], in[static_cast<size_t>(j)]) << "element " << i;
    }
    ++checked;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(checked, 24);
}

TEST(PermuteBytesTest, RankZeroCopiesOneElementAndAZeroDimNone) {
  const float x = 3.5f;
  float y = 0;
  PermuteBytes(reinterpret_cast<const uint8_t*>(&x), reinterpret_cast<uint8_t*>(&y), {}, {}, 4);
  EXPECT_EQ(y, 3.5f);
  PermuteBytes(nullptr, nullptr, {4, 0, 3}, {2, 0, 1}, 4);  // reads and writes nothing
}

TEST(PermuteBytesTest, IsPermutationRefusesRepeatsAndOutOfRange) {
  EXPECT_TRUE(IsPermutation({}, 0));
  EXPECT_TRUE(IsPermutation({2, 0, 1}, 3));
  EXPECT_FALSE(IsPermutation({0, 0, 1}, 3));
  EXPECT_FALSE(IsPermutation({0, 1, 3}, 3));
  EXPECT_FALSE(IsPermutation({-1, 0, 1}, 3));
  EXPECT_FALSE(IsPermutation({0, 1}, 3));
}

}  // namespace
}  // namespace hfuse
