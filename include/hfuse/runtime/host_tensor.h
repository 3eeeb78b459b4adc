// A tensor's values in host memory, stored in the tensor's own dtype
// (float16 and bfloat16 as 16-bit patterns), converted to float on load and
// back with round-to-nearest-even on store. Integer and bool tensors are
// read and written exactly through GetInt/SetInt (Get/Set convert).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  // Zero-filled. The size is counted with support/checked.h and held to the
  // memory budget; `what` names the tensor in the error ("tensor 'x'").
  HostTensor(DType d, std::vector<int64_t> s, std::string_view what = "a tensor");

  int64_t numel() const;
  float Get(int64_t i) const;
  void Set(int64_t i, float v);
  std::vector<float> ToFloat() const;
  void FromFloat(const float* values);  // numel() values, rounded to dtype
  // Any dtype: a float is truncated toward zero, a bool is 0 or 1.
  int64_t GetInt(int64_t i) const;
  void SetInt(int64_t i, int64_t v);
};

// Tensors by name: graph inputs and params in, graph outputs out.
using TensorMap = std::map<std::string, HostTensor>;

// Sum of the values (as double) and an FNV-1a hash of the bytes.
double Checksum(const HostTensor& t);
uint64_t BytesHash(const HostTensor& t);

}  // namespace hfuse
