// hfuse: the command-line tool.
//
//   hfuse fuse IN.json [-o OUT.json] [--report R.json] [--no-group-gemm] [--dump-dir DIR]
//   hfuse check IN.json
//
// Input problems print one line "hfuse: error: ..." and exit with status 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "hfuse/io/graph_json.h"
#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

constexpr const char* kVersion = "0.1.0";
constexpr int kInputErrorExit = 2;

std::string ReportJson(const FuseGroupOpsResult& r) {
  nlohmann::ordered_json report;
  report["groups"] = nlohmann::ordered_json::array();
  for (const FusedGroup& g : r.groups) {
    report["groups"].push_back({{"op", OpTypeName(g.type)}, {"members", g.members}});
  }
  report["ops_before"] = r.ops_before;
  report["ops_after"] = r.ops_after;
  return report.dump(1) + "\n";
}

void PrintTable(const std::string& input, const FuseGroupOpsResult& r) {
  fmt::print("{}: {} ops -> {} ops, {} group{}\n", input, r.ops_before, r.ops_after,
             r.groups.size(), r.groups.size() == 1 ? "" : "s");
  if (r.groups.empty()) return;
  fmt::print("  {:<30} {:>7}  {}\n", "group op", "members", "members (group order)");
  for (const FusedGroup& g : r.groups) {
    std::string names;
    for (size_t i = 0; i < g.members.size(); ++i) {
      if (i == 4 && g.members.size() > 5) {
        names += fmt::format(", ... ({} more)", g.members.size() - 4);
        break;
      }
      names += (i ? ", " : "") + g.members[i];
    }
    fmt::print("  {:<30} {:>7}  {}\n", OpTypeName(g.type), g.members.size(), names);
  }
}

int RunFuse(const std::string& input, const std::string& output, const std::string& report,
            bool no_group_gemm, const std::string& dump_dir) {
  Graph graph = ReadGraphJsonFile(input);
  FuseGroupOpsOptions options;
  options.group_gemm = !no_group_gemm;
  options.want_dumps = !dump_dir.empty();
  FuseGroupOpsResult result = FuseGroupOps(graph, options);
  if (!output.empty()) WriteFileAtomic(output, WriteGraphJson(graph, result.op_order));
  if (!report.empty()) WriteFileAtomic(report, ReportJson(result));
  if (!dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dump_dir, ec);
    if (ec) ThrowInputError("{}: cannot create directory: {}", dump_dir, ec.message());
    for (const auto& [name, text] : result.dumps) {
      WriteFileAtomic((std::filesystem::path(dump_dir) / name).string(), text);
    }
  }
  PrintTable(input, result);
  return 0;
}

int RunCheck(const std::string& input) {
  Graph graph = ReadGraphJsonFile(input);
  int64_t tensors = 0;
  for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) tensors += graph.tensor(t).alive;
  fmt::print("{}: ok: {} ops, {} tensors, {} outputs, {} dynamic dims\n", input,
             graph.NumLiveOps(), tensors, graph.outputs().size(), graph.dims().size());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"hfuse: horizontal fusion of independent GEMMs and LayerNorms"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);

  std::string input, output, report, dump_dir;
  bool no_group_gemm = false;
  CLI::App* fuse = app.add_subcommand("fuse", "fuse a graph JSON file");
  fuse->add_option("input", input, "input graph (graph JSON v1)")->required();
  fuse->add_option("-o,--output", output, "write the fused graph here");
  fuse->add_option("--report", report, "write the JSON report (groups, op counts) here");
  fuse->add_flag("--no-group-gemm", no_group_gemm,
                 "do not group GEMMs (the seed's fuse_group_gemm off); LayerNorms still group");
  fuse->add_option("--dump-dir", dump_dir,
                   "write the pass's debug dumps (dependency graph, groups per op type) here");

  std::string check_input;
  CLI::App* check = app.add_subcommand("check", "parse and verify a graph, print a summary");
  check->add_option("input", check_input, "input graph (graph JSON v1)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kInputErrorExit;
  }
  try {
    if (fuse->parsed()) return RunFuse(input, output, report, no_group_gemm, dump_dir);
    if (check->parsed()) return RunCheck(check_input);
  } catch (const InputError& e) {
    fmt::print(stderr, "hfuse: error: {}\n", e.what());
    return kInputErrorExit;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "hfuse: error: out of memory\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace hfuse

int main(int argc, char** argv) { return hfuse::Main(argc, argv); }
