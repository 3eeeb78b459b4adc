// The pass manager's command-line flags. See pass_flags.h.
#include "pass_flags.h"

#include <fmt/format.h>

#include <cstdlib>

namespace hfuse {

void AddListPassesFlag(CLI::App* command) {
  // Runs while parsing, before the check that the input was given.
  command->add_flag_callback(
      "--list-passes",
      [] {
        fmt::print("{}", ListPassesText());
        throw CLI::Success();
      },
      "list the passes and pipelines, then exit");
}

void AddPassFlags(CLI::App* command, PassFlags& flags) {
  command->add_option("--passes", flags.passes,
                      "run these passes and pipelines, comma-separated, instead of the "
                      "command's default (--list-passes lists them)");
  command->add_option("--print-after", flags.manager.print_after,
                      "print the graph to stderr after this pass (or after every pass: all)");
  command->add_flag("--verify-each", flags.manager.verify_each,
                    "verify the graph after every pass; a failure is an internal error naming "
                    "the pass (exit 3)");
  command->add_option("--stop-after", flags.manager.stop_after,
                      "run no pass after this one (the output is the graph at that point)");
  command->add_flag("--time-passes", flags.manager.time_passes,
                    "print each pass's time and statistics to stderr");
  AddListPassesFlag(command);
  if (std::getenv("HFUSE_VERIFY_EACH") != nullptr) flags.manager.verify_each = true;  // ctest sets it

}

PassState RunPasses(Graph& graph, const PassFlags& flags,
                    const std::vector<const PassInfo*>& default_pipeline,
                    const PassOptions& options) {
  PassState state(graph);
  PassManager manager(flags.passes.empty() ? default_pipeline : ParsePassList(flags.passes),
                      flags.manager);
  manager.Run(state, options);
  return state;
}

}  // namespace hfuse
