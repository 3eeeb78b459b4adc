// Byte ranges a launch reads or writes, for the CUDA planner's checks that
// two waiting lookups may go out in one launch (cuda_executor_impl.h):
// plain C++, unit-tested on any machine (tests/cuda/cuda_plan_test.cc).
#pragma once

#include <cstdint>

namespace hfuse::cuda {

// Bytes [begin, end); with a stride, only rows of `width` bytes every
// `stride` bytes from begin (a part's slot in a concatenate: the slots of
// two parts interleave without overlapping; DIN's target embeddings and
// its sparse features, written by one batch of lookups into the MLP's
// input).
struct ByteSpan {
  const char* begin;
  const char* end;
  int64_t stride = 0, width = 0;

  bool Overlaps(const ByteSpan& o) const {
    if (!(begin < o.end && o.begin < end)) return false;
    if (stride <= 0 || stride != o.stride) return true;  // rows of different strides: taken as overlapping
    // Where o's rows start within a row of ours, on the circle of one stride.
    const int64_t d = (((o.begin - begin) % stride) + stride) % stride;
    return !(d >= width && d + o.width <= stride);
  }
};

}  // namespace hfuse::cuda
