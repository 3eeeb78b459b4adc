// hfuse bench (built with the CUDA backend only).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "pass_flags.h"

namespace hfuse {

struct BenchOptions {
  std::string device = "cuda";
  int warmup = 20;
  int reps = 200;
  uint64_t seed = 0;
  std::string inputs_npz;   // arrays that replace the seeded inputs (ids in range, say)
  bool check = true;        // compare each variant with the CPU reference first
  bool grouped_too = false; // also time the fused graph with strided batching off
  // Also time the hfuse-rules graph with each group GEMM path forced:
  // cuBLAS grouped, CUTLASS 128x128 tiles, CUTLASS 128x64 tiles.
  bool gemm_paths = false;
  bool profile = false;     // print each launch's time for the fused graph
  std::map<std::string, int64_t> dims;
  std::string json;         // write the figures here
  PassFlags passes;         // default: the gpu pipeline
  std::string rules = "both";  // the fused variants: seed, hfuse or both rule sets
};

int BenchCommand(const std::string& path, const BenchOptions& options);

}  // namespace hfuse
