// The executing subcommands of hfuse: run a graph on the CPU, and verify that
// a fused graph computes what the original computed.
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
};

// `hfuse run`: prints each output's dtype, shape, sum and byte hash.
int RunGraphCommand(const std::string& path, const RunOptions& options);

// Runs `original` and `fused` on the same seeded inputs and prints one line
// per output with its error; returns 0 on PASS, 1 on FAIL.
int VerifyGraphs(const Graph& original, const Graph& fused, uint64_t seed,
                 const std::map<std::string, int64_t>& dims);

// `hfuse verify G [--fused F]`: fuses G (or reads F, and `rules` is moot)
// and verifies.
int VerifyCommand(const std::string& path, const std::string& fused_path, bool group_gemm,
                  RuleSet rules, uint64_t seed, const std::map<std::string, int64_t>& dims,
                  const PassFlags& flags);

}  // namespace hfuse
