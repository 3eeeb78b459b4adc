// The executing subcommands of hfuse: run a model through the inference
// session (session/session.h) on the CPU or on CUDA, and verify that a fused
// model computes what the original computed.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hfuse/ir/graph.h"
#include "pass_flags.h"
#include "hfuse/passes/group_planner.h"

namespace hfuse {

struct RunOptions {
  std::string inputs_npz;   // inputs and params; random (seeded) when empty
  uint64_t seed = 0;
  std::map<std::string, int64_t> dims;
  std::string output_npz;   // graph outputs
  std::string save_inputs;  // the inputs and params used
  std::string device = "cpu";
  std::string rules;        // "", "seed" or "hfuse" ("": the session's, kSessionRules)
  bool fuse = true;
  bool cuda_graph = true;
  // CPU: --profile (each op's time, bytes and FLOPs over `profile_reps`
  // runs, and the run's memory), --threads, --cpu-groups (auto, side, serial).
  bool profile = false;
  int profile_reps = 10;
  int threads = 0;
  std::string cpu_groups = "auto";
  bool poison_buffers = false;  // --poison-buffers (SessionOptions::cpu_poison_buffers)
};

// `hfuse run`: prints what ran, then each output's dtype, shape, sum and byte hash.
int RunGraphCommand(const std::string& path, const RunOptions& options);

// Runs `original` and `fused` on the same seeded inputs and prints one line
// per output with its error; returns 0 on PASS, 1 on FAIL.
int VerifyGraphs(const Graph& original, const Graph& fused, uint64_t seed,
                 const std::map<std::string, int64_t>& dims);

struct VerifyOptions {
  std::string fused_path;  // compare with this model instead of fusing
  bool group_gemm = true;
  std::string rules;       // "", "seed" or "hfuse" ("": the session's, kSessionRules)
  std::string device = "cpu";
  uint64_t seed = 0;
  std::string inputs_npz;  // arrays that replace the seeded ones (ids in range, say)
  std::map<std::string, int64_t> dims;
  PassFlags flags;         // --passes and the pass manager's debug flags
};

// `hfuse verify G [--fused F] [--device cuda]`: fuses G for the device (or
// takes F as it is) and runs it there through the session, against the CPU
// reference of G on the same seeded inputs.
int VerifyCommand(const std::string& path, const VerifyOptions& options);

}  // namespace hfuse
