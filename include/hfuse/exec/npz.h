// NumPy .npz files (a zip of .npy arrays): how tensors go in and out of
// `hfuse run`. Reads stored and deflated entries, as np.savez and
// np.savez_compressed write them (zip64 included); writes stored entries.
//
// dtypes: float16 <-> '<f2', float32 <-> '<f4'; bfloat16, which NumPy lacks,
// is stored as its 16-bit patterns in a '<u2' array. On input a '<f4' or
// '<f8' array is also accepted for a float16/bfloat16 tensor and rounded.
#pragma once

#include <string>
#include <vector>

#include "hfuse/runtime/host_tensor.h"

namespace hfuse {

// Arrays in file order. `want` gives, by name, the dtype each array is read
// as (a name missing from it is read in the array's own dtype).
TensorMap ReadNpz(const std::string& path, const std::map<std::string, DType>& want = {});

// Writes arrays (sorted by name, so the file is deterministic) atomically.
void WriteNpz(const std::string& path, const TensorMap& arrays);

}  // namespace hfuse
