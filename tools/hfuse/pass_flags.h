// The pass manager's flags, the same on every command that transforms a
// graph (fuse, verify, bench, print): --passes, --print-after, --verify-each,
// --stop-after, --list-passes, --time-passes. See passes/pass_manager.h.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "hfuse/passes/pass_manager.h"

namespace hfuse {

struct PassFlags {
  std::string passes;  // empty: the command's default pipeline
  PassManagerOptions manager;
};

// Adds the flags to `command`. --verify-each is on when the environment has
// HFUSE_VERIFY_EACH (the test suite sets it).
void AddPassFlags(CLI::App* command, PassFlags& flags);
// --list-passes alone (the tool's top level has it too).
void AddListPassesFlag(CLI::App* command);

// Runs the pipeline --passes names, or `default_pipeline` without it.
PassState RunPasses(Graph& graph, const PassFlags& flags,
                    const std::vector<const PassInfo*>& default_pipeline,
                    const PassOptions& options = {});

}  // namespace hfuse
