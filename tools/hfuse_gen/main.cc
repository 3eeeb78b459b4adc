// hfuse-gen: writes large graphs (graph JSON v1) for measuring the pass at
// scale; see gen_graphs.h for the two shapes. Graphs of 10^6 ops are a few
// hundred MB: write them under /tmp, never into the repository.
//
//   hfuse-gen towers --ops 1000000 -o /tmp/towers_1e6.json
//   hfuse-gen lanes --ops 100000 --width 64 --cross 0.15 --seed 1 -o /tmp/lanes_1e5.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "gen_graphs.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace {

int Main(int argc, char** argv) {
  CLI::App app{"hfuse-gen: large graphs (graph JSON v1) for measuring the pass at scale"};
  app.require_subcommand(1);

  std::string output = "-";
  int64_t ops = 0;
  hfuse::gen::TowersOptions towers;
  CLI::App* towers_cmd = app.add_subcommand(
      "towers", "a split feeding T towers of gemm -> layernorm -> gemm, joined by a concatenate");
  towers_cmd->add_option("--towers", towers.towers, "number of towers T (3T + 2 ops)");
  towers_cmd->add_option("--ops", ops, "about this many ops instead: T = (ops - 2) / 3");
  towers_cmd->add_option("--rows", towers.rows, "M of every activation");
  towers_cmd->add_option("-o,--output", output, "output file ('-': stdout)");

  hfuse::gen::LanesOptions lanes;
  CLI::App* lanes_cmd = app.add_subcommand(
      "lanes", "W lanes of GEMMs, layernorms and elementwise ops with edges across lanes");
  lanes_cmd->add_option("--ops", lanes.ops, "exactly this many ops")->required();
  lanes_cmd->add_option("--width", lanes.width, "number of lanes W");
  lanes_cmd->add_option("--cross", lanes.cross, "chance that an op reads another lane's tensor");
  lanes_cmd->add_option("--seed", lanes.seed, "random seed");
  lanes_cmd->add_option("--rows", lanes.rows, "M of every activation");
  lanes_cmd->add_option("-o,--output", output, "output file ('-': stdout)");

  CLI11_PARSE(app, argc, argv);

  std::string text;
  if (towers_cmd->parsed()) {
    if (ops > 0) towers.towers = hfuse::gen::TowersForOps(ops);
    text = hfuse::gen::TowersGraphJson(towers);
  } else {
    text = hfuse::gen::LanesGraphJson(lanes);
  }
  try {
    if (output == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      hfuse::WriteFileAtomic(output, text);
    }
  } catch (const hfuse::InputError& e) {
    fmt::print(stderr, "hfuse-gen: error: {}\n", e.what());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
