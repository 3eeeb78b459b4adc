// Byte ranges a launch reads or writes, for the CUDA planner's checks that
// two waiting lookups may go out in one launch (cuda_executor_impl.h):
// plain C++, unit-tested on any machine (tests/cuda/cuda_plan_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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

// The bytes a tensor's elements lie in: `first` the address of element 0,
// through `strides` (elements, any sign) over `shape`: rows at one stride
// where its trailing dims are contiguous and the others one run of rows (a
// concatenate's slot: the slots of two parts do not overlap), else the
// range from its lowest element to its highest.
inline ByteSpan ElementsSpan(const char* first, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                             int64_t element_bytes) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return ByteSpan{first, first};
    (strides[d] > 0 ? hi : lo) += (shape[d] - 1) * strides[d];
  }
  int64_t width = 1;  // the trailing contiguous dims' elements
  size_t d = shape.size();
  while (d > 0 && (shape[d - 1] == 1 || strides[d - 1] == width)) width *= shape[--d];
  int64_t rows = 1, stride = 0;
  bool one_run = true;
  for (size_t e = d; e-- > 0;) {
    if (shape[e] == 1) continue;
    if (stride == 0) {
      stride = strides[e];
    } else if (strides[e] != stride * rows) {
      one_run = false;
    }
    rows *= shape[e];
  }
  if (one_run && rows > 1 && stride > width) {
    return ByteSpan{first, first + ((rows - 1) * stride + width) * element_bytes, stride * element_bytes,
                    width * element_bytes};
  }
  return ByteSpan{first + lo * element_bytes, first + (hi + 1) * element_bytes};
}

}  // namespace hfuse::cuda
