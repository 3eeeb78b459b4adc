// The CUDA backend: runs a graph (original or fused, with or without
// strided views) on one GPU.
//
// Construction plans everything once: a memory plan (inputs, params and
// outputs get their own buffers; intermediates share an arena, reusing the
// space of tensors whose lifetimes have ended; the outputs of one op are
// laid out together, params in order of first use, so a group's members
// often sit at a constant stride), one launch plan per op (cuBLASLt GEMMs
// with BIAS / RELU_BIAS epilogues; a group GEMM as one strided-batched
// cuBLASLt call when its members have one shape and constant strides, else
// one cublasGemmGroupedBatchedEx plus one grouped bias/activation kernel;
// one launch for any LayerNorm group; copies for splits and concatenates
// that are not views), and the device-side descriptor arrays those launches
// read. Run() then only enqueues launches on one stream, and can be
// captured once into a CUDA graph and replayed. Every CUDA and cuBLAS call
// is checked, and the last error after each launch; failures throw
// CudaError.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/ir/graph.h"

namespace hfuse {

class CudaError : public std::runtime_error {
 public:
  explicit CudaError(const std::string& message) : std::runtime_error(message) {}
};

// True when a CUDA device is usable; `why` says why not otherwise.
bool CudaDeviceAvailable(std::string* why = nullptr);

struct CudaRunStats {
  int64_t launches = 0;       // kernel launches and copies per run
  int64_t arena_bytes = 0;    // intermediates' arena
  int64_t tensor_bytes = 0;   // what the intermediates would take unshared
};

struct CudaOptions {
  // Group GEMMs of one shape at constant strides run as one strided-batched
  // cuBLASLt call; off, they take the grouped path like any other group.
  bool strided_batched = true;
};

class CudaExecutor {
 public:
  CudaExecutor(const Graph& graph, const DimValues& dims, CudaOptions options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Uploads every input and param (checked like RunOnCpu).
  void SetFeeds(const TensorMap& feeds);
  // Fills every output and intermediate buffer with 0xFF bytes (NaN for
  // float types), so that elements a kernel fails to write show up.
  void Poison();
  // Enqueues one run and waits for it.
  void Run();
  // Runs through a CUDA graph captured on first use.
  void RunGraph();
  TensorMap Outputs() const;

  // The device address of an input's, param's or output's buffer (dense,
  // row-major, in the tensor's dtype), for callers that copy feeds in or
  // read outputs in place (the session's device path). Run and RunGraph read
  // and write these buffers on Stream().
  void* TensorAddress(TensorId id) const;
  void* Stream() const;  // the cudaStream_t launches go on

  // Median microseconds of `reps` runs after `warmup` runs, timed with CUDA
  // events around each run (plain launches, or graph replays).
  double MedianMicros(int warmup, int reps, bool use_graph);

  const CudaRunStats& stats() const;

  // Each launch timed on its own (median of `reps`), labelled by op.
  std::vector<std::pair<std::string, double>> ProfileLaunches(int reps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hfuse
