// hfuse: the command-line tool.
//
//   hfuse fuse IN.json [-o OUT.json] [--report R.json] [--no-group-gemm] [--dump-dir DIR]
//              [--rules seed|hfuse]
//   hfuse fuse IN.onnx [-o OUT.onnx] [--export hfuse|standard] [--format json|onnx] ...
//   hfuse run M [--device cpu|cuda] [--inputs in.npz] [-o out.npz] [--dim N=V] ...
//   hfuse verify M [--device cpu|cuda] [--fused F] ...
//   hfuse bench M --device cuda ...    (built with the CUDA backend)
//   hfuse check IN.json
//   hfuse explain M [--op NAME]; hfuse dot M [-o F.dot] [--fused] [--collapse];
//   hfuse report M -o report.html [--bench B.json]
//
// Input problems print one line "hfuse: error: ..." and exit with status 2.
#include <fmt/format.h>

#include "hfuse/exec/cpu_executor.h"
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <nlohmann/json.hpp>

#include "exec_commands.h"
#include "explain_commands.h"
#if HFUSE_HAVE_CUDA
#include "bench_command.h"
#endif
#include "hfuse/exec/plan_constants.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/ir/graph.h"
#include "hfuse/ir/onnx_ops.h"
#include "hfuse/ir/printer.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "hfuse/session/pipelines.h"
#include "pass_flags.h"

namespace hfuse {
namespace {

constexpr const char* kVersion = "0.1.0";
constexpr int kInputErrorExit = 2;
constexpr int kInternalErrorExit = 3;

// The error message as one line: names come from the input and may hold
// newlines or other control characters, which are written as \xNN.
std::string OneLine(std::string_view message) {
  std::string line;
  for (char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      line += fmt::format("\\x{:02x}", u);
    } else {
      line += c;
    }
  }
  return line;
}

std::string ReportJson(const FuseGroupOpsResult& r) {
  nlohmann::ordered_json report;
  report["rules"] = RuleSetName(r.rules);
  report["groups"] = nlohmann::ordered_json::array();
  for (const FusedGroup& g : r.groups) {
    nlohmann::ordered_json group = {{"op", OpTypeName(g.type)}, {"members", g.members}};
    if (!g.member_ops.empty()) {  // a mixed GEMM group: each member's kind (its epilogue)
      std::vector<std::string_view> kinds;
      for (OpType kind : g.member_ops) kinds.push_back(OpTypeName(kind));
      group["member_ops"] = kinds;
    }
    report["groups"].push_back(std::move(group));
  }
  report["ungrouped"] = nlohmann::ordered_json::array();
  for (const Reason& u : r.ungrouped) {
    nlohmann::ordered_json entry = {{"op", u.op},
                                    {"type", KindName(u.type)},
                                    {"reason", ReasonCodeName(u.code)},
                                    {"rule", ReasonRuleName(u.rule)},
                                    {"details", u.details}};
    if (!u.peer.empty()) entry["peer"] = u.peer;
    if (!u.path.empty()) entry["path"] = u.path;
    report["ungrouped"].push_back(std::move(entry));
  }
  report["ops_before"] = r.ops_before;
  report["ops_after"] = r.ops_after;
  return report.dump(1) + "\n";
}

// "; 3 GEMM/LayerNorm ops ungrouped (not-a-candidate 2, ...): hfuse explain"
// ("GEMM/LayerNorm/Gather" once fuse-group-gathers ran), or nothing when
// every one is in a group.
std::string UngroupedSummary(const FuseGroupOpsResult& r) {
  if (r.ungrouped.empty()) return {};
  return fmt::format("; {} {} op{} ungrouped ({}): see hfuse explain", r.ungrouped.size(),
                     UngroupedKinds(r), r.ungrouped.size() == 1 ? "" : "s",
                     TopReasons(r.ungrouped, 3));
}

void PrintTable(const std::string& input, const FuseGroupOpsResult& r) {
  fmt::print("{}: {} ops -> {} ops, {} group{}{}\n", input, r.ops_before, r.ops_after,
             r.groups.size(), r.groups.size() == 1 ? "" : "s", UngroupedSummary(r));
  if (r.groups.empty()) return;
  fmt::print("  {:<30} {:>7}  {}\n", "group op", "members", "members (group order)");
  for (const FusedGroup& g : r.groups) {
    std::string names;
    for (size_t i = 0; i < g.members.size(); ++i) {
      if (i == 4 && g.members.size() > 5) {
        names += fmt::format(", ... ({} more)", g.members.size() - 4);
        break;
      }
      names += (i ? ", " : "") + MemberLabel(g, i);
    }
    fmt::print("  {:<30} {:>7}  {}\n", OpTypeName(g.type), g.members.size(), names);
  }
}

// "name=value" pairs of --dim into a map; throws InputError on bad syntax.
std::map<std::string, int64_t> ParseDims(const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> dims;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    size_t used = 0;
    int64_t value = -1;
    try {
      if (eq != std::string::npos) value = std::stoll(spec.substr(eq + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || eq + 1 + used != spec.size()) {
      ThrowInputError("--dim '{}': expected NAME=VALUE", spec);
    }
    dims[spec.substr(0, eq)] = value;
  }
  return dims;
}

// fuse-group-ops' result, or what stands for it when the pipeline had none.
FuseGroupOpsResult ResultOf(PassState& state) {
  if (state.fused) return std::move(state.fuse_result);
  FuseGroupOpsResult r;
  r.ops_before = r.ops_after = state.graph.NumLiveOps();
  return r;
}

int RunFuse(const std::string& input, const std::string& output, const std::string& report,
            bool no_group_gemm, const std::string& dump_dir, bool verify, uint64_t seed,
            const std::string& format, const std::string& export_mode, RuleSet rules,
            const PassFlags& flags, const std::vector<std::string>& dim_specs) {
  // Never freed: the process ends after the output is written, and freeing a
  // graph of a million ops one allocation at a time takes half a second.
  // Held by globals, so that LeakSanitizer sees them reachable, not leaked.
  static LoadedModel* kept_model = nullptr;
  static PassState* kept_state = nullptr;
  // --format is the output's: the input is ONNX when named so, graph JSON
  // when it starts with '{' (no ONNX protobuf does), else what --format
  // says; so `fuse m.onnx --format json` and `fuse g.json --format onnx`
  // convert.
  std::string in_format = "json";
  if (std::filesystem::path(input).extension() == ".onnx") {
    in_format = "onnx";
  } else if (format == "onnx") {
    std::ifstream in(input, std::ios::binary);
    char c = ' ';
    while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
    }
    if (in && c != '{') in_format = "onnx";
  }
  LoadedModel& model = *(kept_model = new LoadedModel(LoadModel(input, in_format)));
  Graph& graph = model.graph;
  if (!dim_specs.empty()) {
    try {
      SpecializeDims(graph, ParseDims(dim_specs));
      model.as_read = graph;  // "as read" is with the dims fixed
    } catch (const InputError& e) {
      ThrowInputError("{}: {}", input, e.what());
    }
  }
  const Graph original = verify ? graph : Graph();
  PassOptions options;
  options.fuse_group_ops.group_gemm = !no_group_gemm;
  options.fuse_group_ops.want_dumps = !dump_dir.empty();
  options.fuse_group_ops.rules = rules;
  PassState& state =
      *(kept_state = new PassState(RunPasses(graph, flags, FusePipeline(model.format, rules), options)));
  FuseGroupOpsResult result = ResultOf(state);
  // Verify before writing anything, so a failed check leaves no output.
  if (verify && VerifyGraphs(original, graph, seed, {}) != 0) return 1;
  // The fused graph is written last, so that a failure on the way (a dump
  // directory or report that cannot be written) leaves no output behind.
  if (!dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dump_dir, ec);
    if (ec) ThrowInputError("{}: cannot create directory: {}", dump_dir, ec.message());
    for (const auto& [name, text] : result.dumps) {
      WriteFileAtomic((std::filesystem::path(dump_dir) / name).string(), text);
    }
  }
  if (!report.empty()) WriteFileAtomic(report, ReportJson(result));
  if (!output.empty()) {
    if (FormatOf(output, format) == ModelFormat::kJson &&
        (export_mode == "hfuse" || export_mode == "standard")) {
      WriteGraphJsonFile(output, graph, state.op_order);  // streamed, never held whole
    } else {
      WriteFileAtomic(output, SerializeModel(model, graph, state.op_order,
                                             FormatOf(output, format), export_mode));
    }
  }
  PrintTable(input, result);
  return 0;
}

int RunPrint(const std::string& input, const std::string& format, const PassFlags& flags) {
  LoadedModel model = LoadModel(input, format);
  PassState state = RunPasses(model.graph, flags, {});
  fmt::print("{}", PrintGraph(model.graph, state.op_order));
  return 0;
}

int RunCheck(const std::string& input) {
  const LoadedModel model = LoadModel(input);
  const Graph& graph = model.graph;
  int64_t tensors = 0;
  // The dims a live tensor has (a derived dim, batch·seq, counts through its
  // factors): a dim declared but unused, or one --dim fixed, is not dynamic.
  std::set<int32_t> dynamic;
  std::function<void(int32_t)> use = [&](int32_t d) {
    const auto& product = graph.dims()[static_cast<size_t>(d)].product_of;
    if (product.empty()) dynamic.insert(d);
    for (int32_t f : product) use(f);
  };
  for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) {
    if (!graph.tensor(t).alive) continue;
    ++tensors;
    for (const Dim& d : graph.tensor(t).shape) {
      if (!d.is_static()) use(d.dynamic);
    }
  }
  fmt::print("{}: ok: {} ops, {} tensors, {} outputs, {} dynamic dims\n", input,
             graph.NumLiveOps(), tensors, graph.outputs().size(), dynamic.size());
  // What --device cuda would run on the host, by operator (onnx_ops.def):
  // after the import passes, which lower some (an Einsum to MatMuls).
  // `run --device cuda` names, besides, the forms a kernel declines.
  if (model.format != ModelFormat::kOnnx) return 0;  // graph JSON has no opaque ops
  Graph planned = model.graph;
  PassOptions options;
  options.fuse_group_ops.rules = RuleSet::kHfuse;
  RunPasses(planned, PassFlags{}, DevicePipeline(model.format, Target::kGpu), options);
  // What a plan computes once (at the dims' defaults: whether an op folds
  // does not depend on their values) never runs, on the host or anywhere.
  const PlanConstants folded = FoldPlanConstants(planned, BindDims(planned));
  std::map<std::string, std::vector<std::string>> host;
  for (OpId id : planned.LiveOps()) {
    const Op& op = planned.op(id);
    if (FamilyOf(op.type) != OpFamily::kOpaque || !op.attrs.onnx || folded.folded[static_cast<size_t>(id)]) continue;
    const OnnxNode& node = *op.attrs.onnx;
    const bool standard = node.domain.empty() || node.domain == "ai.onnx";
    const OnnxOpInfo* info = standard ? FindOnnxOp(node.op_type) : nullptr;
    if (!info || info->cuda == "Host") {
      host[standard ? node.op_type : node.domain + "." + node.op_type].push_back(op.name);
    }
  }
  for (const auto& [type, ops] : host) {
    fmt::print("  on the host under --device cuda: {} ({}: {})\n", type, ops.size(), fmt::join(ops, ", "));
  }
  return 0;
}

// `hfuse --list-ops`: onnx_ops.def as a table.
void ListOps() {
  fmt::print("{:<20} {:<10} {:<6} {:<16} {:<14} {}\n", "ONNX operator", "shape", "fold", "CPU kernel",
             "CPU fast", "CUDA");
  for (const OnnxOpInfo& op : OnnxOps()) {
    fmt::print("{:<20} {:<10} {:<6} {:<16} {:<14} {}\n", op.name, op.shape, op.fold, op.cpu,
               op.fast == "Ref" ? "(reference)" : std::string(op.fast),
               op.cuda == "Host" ? "on the host (no kernel)" : std::string(op.cuda));
  }
  fmt::print("Any other operator is refused by the CPU executor and runs on neither device.\n");
}

int Main(int argc, char** argv) {
  CLI::App app{"hfuse: horizontal fusion of independent GEMMs and LayerNorms"};
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  AddListPassesFlag(&app);
  app.add_flag_callback(
      "--list-ops",
      [] {
        ListOps();
        throw CLI::Success();
      },
      "list the ONNX operators hfuse runs, where each runs, then exit");
  std::string memory_budget;
  app.add_option("--memory-budget", memory_budget,
                 "most bytes for tensor values: one tensor, all of a run's, or a file read "
                 "(e.g. 512M, 16G; default 16G or HFUSE_MEMORY_BUDGET)");

  std::string input, output, report, dump_dir;
  bool no_group_gemm = false;
  CLI::App* fuse = app.add_subcommand("fuse", "fuse a graph JSON file or an ONNX model");
  fuse->add_option("input", input, "input graph (graph JSON v1, or an .onnx model)")->required();
  fuse->add_option("-o,--output", output, "write the fused graph here");
  fuse->add_option("--report", report, "write the JSON report (groups, op counts) here");
  fuse->add_flag("--no-group-gemm", no_group_gemm,
                 "do not group GEMMs (the seed's fuse_group_gemm off); LayerNorms still group");
  fuse->add_option("--dump-dir", dump_dir,
                   "write the pass's debug dumps (dependency graph, groups per op type) here");
  std::string format, export_mode = "hfuse";
  fuse->add_option("--format", format,
                   "json or onnx: the output's format (default: by its extension, .onnx is "
                   "ONNX); an input named .onnx is read as ONNX, another as this format")
      ->check(CLI::IsMember({"json", "onnx"}));
  fuse->add_option("--export", export_mode,
                   "ONNX output: hfuse (group ops in domain ai.hfuse) or standard (standard ONNX "
                   "only: same-shape GEMM groups batched, other groups unfused)")
      ->check(CLI::IsMember({"hfuse", "standard"}));

  // `default_is`: the command's default, said in its help.
  const auto add_rules = [](CLI::App* cmd, std::string& rules, const std::string& default_is,
                            const std::string& extra = "") {
    std::vector<std::string> names = {"seed", "hfuse"};
    if (!extra.empty()) names.push_back(extra);
    cmd->add_option("--rules", rules,
                    "grouping rules: seed (AITemplate's: GEMMs at static shapes only) or hfuse "
                    "(GEMMs of the same named dynamic batch too, LayerNorm groups uncapped, of any "
                    "mix of sizes)" +
                        (extra.empty() ? std::string() : "; " + extra + ": time both") + "; default " +
                        default_is)
        ->check(CLI::IsMember(names));
  };
  std::string fuse_rules = "seed";
  add_rules(fuse, fuse_rules, "seed");

  bool verify = false;
  uint64_t seed = 0;
  fuse->add_flag("--verify", verify,
                 "run the original and the fused graph on the CPU on the same random inputs and "
                 "compare (exit 1 on a mismatch)");
  fuse->add_option("--seed", seed, "seed of the random inputs of --verify");
  PassFlags fuse_passes;
  AddPassFlags(fuse, fuse_passes);
  std::vector<std::string> fuse_dims;
  fuse->add_option("--dim", fuse_dims,
                   "NAME=VALUE: fix a named dim before the passes run (the output has it static)");

  RunOptions run_options;
  std::string run_input;
  std::vector<std::string> dim_specs;
  CLI::App* run = app.add_subcommand(
      "run", "run a model through the inference session (CPU or CUDA), print each output's checksum");
  run->add_option("input", run_input, "graph (graph JSON v1, or an .onnx model)")->required();
  run->add_option("--inputs", run_options.inputs_npz,
                  ".npz with the graph's inputs and params (default: random, seeded)");
  run->add_option("--seed", run_options.seed, "seed of the random inputs");
  run->add_option("--dim", dim_specs, "NAME=VALUE: bind a dynamic dim (default: its max)");
  run->add_option("-o,--output", run_options.output_npz, "write the outputs to this .npz");
  run->add_option("--save-inputs", run_options.save_inputs, "write the inputs used to this .npz");
  const auto add_device = [](CLI::App* cmd, std::string& device) {
    cmd->add_option("--device", device,
                    "cpu (the CPU executor, the default) or cuda (the CUDA backend; exit 2 "
                    "without a GPU)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
  };
  add_device(run, run_options.device);
  std::string run_rules;
  add_rules(run, run_rules, "hfuse, on either device");
  bool run_no_fuse = false, run_no_cuda_graph = false;
  run->add_flag("--no-fuse", run_no_fuse, "run the model as imported, unfused");
  run->add_flag("--no-cuda-graph", run_no_cuda_graph,
                "cuda: plain launches instead of replaying a CUDA graph");
  run->add_flag("--profile", run_options.profile,
                "cpu: each op's time, bytes and FLOPs (median of --reps runs), and the run's memory");
  run->add_option("--reps", run_options.profile_reps, "runs that --profile times")->check(CLI::Range(1, 100000));
  run->add_option("--threads", run_options.threads, "cpu: threads of the fast kernels (0: OMP_NUM_THREADS or the cores)")
      ->check(CLI::Range(0, 1024));
  run->add_option("--cpu-groups", run_options.cpu_groups,
                  "cpu: how group ops run: auto (the rule), side (members side by side), serial (one by one)");
  run->add_flag("--poison-buffers", run_options.poison_buffers,
                "cpu, for testing kernels: fill every buffer with 0xFF bytes (NaN) before its op writes it, so "
                "that an op that leaves part of its output unwritten shows in the outputs");

  std::string verify_input, fused_input;
  bool verify_no_group_gemm = false;
  uint64_t verify_seed = 0;
  std::vector<std::string> verify_dims;
  CLI::App* verify_cmd = app.add_subcommand(
      "verify", "fuse a graph, run both on the CPU on the same random inputs, compare");
  verify_cmd->add_option("input", verify_input, "original graph (JSON or .onnx)")->required();
  verify_cmd->add_option("--fused", fused_input, "compare with this graph instead of fusing");
  verify_cmd->add_flag("--no-group-gemm", verify_no_group_gemm, "do not group GEMMs");
  verify_cmd->add_option("--seed", verify_seed, "seed of the random inputs");
  std::string verify_inputs;
  verify_cmd->add_option("--inputs", verify_inputs,
                         ".npz of inputs to use instead of random ones (others stay random)");
  std::string verify_rules;
  add_rules(verify_cmd, verify_rules, "hfuse, on either device (what run runs)");
  verify_cmd->add_option("--dim", verify_dims, "NAME=VALUE: bind a dynamic dim (default: its max)");
  std::string verify_device = "cpu";
  add_device(verify_cmd, verify_device);
  PassFlags verify_passes;
  AddPassFlags(verify_cmd, verify_passes);

#if HFUSE_HAVE_CUDA
  BenchOptions bench_options;
  std::string bench_input;
  std::vector<std::string> bench_dims;
  bool bench_no_check = false;
  CLI::App* bench = app.add_subcommand(
      "bench", "time a graph on the GPU: unfused and fused, plain launches and CUDA graph");
  bench->add_option("input", bench_input, "graph (graph JSON v1, or an .onnx model)")->required();
  bench->add_option("--device", bench_options.device, "device (cuda)");
  bench->add_option("--reps", bench_options.reps,
                    "timed runs of each variant (median reported), in 10 turns taken by the variants in rotation")
      ->check(CLI::Range(1, 1000000));
  bench->add_option("--warmup", bench_options.warmup, "untimed runs first")->check(CLI::Range(0, 1000000));
  bench->add_option("--seed", bench_options.seed, "seed of the random inputs");
  bench->add_option("--inputs", bench_options.inputs_npz,
                    ".npz of inputs to use instead of random ones (others stay random)");
  bench->add_option("--dim", bench_dims, "NAME=VALUE: bind a dynamic dim (default: its max)");
  bench->add_option("--json", bench_options.json, "write the figures to this JSON file");
  bench->add_flag("--no-check", bench_no_check, "skip the comparison with the CPU reference");
  bench->add_flag("--profile", bench_options.profile, "print each launch's time (fused graph)");
  bench->add_flag("--grouped-too", bench_options.grouped_too,
                  "also time the fused graph with grouped GEMMs only (no strided batching)");
  add_rules(bench, bench_options.rules, "both", "both");
  AddPassFlags(bench, bench_options.passes);
  bench->add_flag("--gemm-paths", bench_options.gemm_paths,
                  "also time the hfuse-rules graph with each group GEMM path forced (cuBLAS "
                  "grouped, CUTLASS 128x128 tiles, CUTLASS 128x64 tiles, the grouped float32 "
                  "kernel, cuBLASLt a member; the float32 kernel's tiles with K split in 1, 2 "
                  "or 4, its members reading one A apart), with activations apart from "
                  "their GEMMs, 3xTF32 forced either way, and a launch a fused region");
#endif

  std::string print_input, print_format;
  PassFlags print_passes;
  CLI::App* print = app.add_subcommand(
      "print", "print a graph in the compact notation of the pass tests (after --passes, if given)");
  print->add_option("input", print_input, "graph (graph JSON v1 or .onnx)")->required();
  print->add_option("--format", print_format, "json or onnx (default: by extension)")
      ->check(CLI::IsMember({"json", "onnx"}));
  AddPassFlags(print, print_passes);
  DescribeOptions describe;
  std::string explain_input, explain_op;
  CLI::App* explain = app.add_subcommand(
      "explain", "fuse a graph and say why each GEMM and LayerNorm left out of every group was");
  explain->add_option("input", explain_input, "graph (graph JSON v1, or an .onnx model)")->required();
  explain->add_option("--op", explain_op, "explain only this op (grouped or not)");
  std::string dot_input, dot_output;
  DotOptions dot_options;
  CLI::App* dot = app.add_subcommand(
      "dot", "draw a graph as Graphviz: groups as clusters, left-out ops with their reason");
  dot->add_option("input", dot_input, "graph (graph JSON v1, or an .onnx model)")->required();
  dot->add_option("-o,--output", dot_output, "write the .dot here (default: standard output)");
  dot->add_flag("--fused", dot_options.fused, "draw the fused graph instead of the original");
  dot->add_flag("--collapse", dot_options.collapse,
                "only GEMMs, LayerNorms and groups, joined where one reaches another");
  std::string report_input, report_output, report_bench;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "write one self-contained HTML page: summary, groups, reasons, pictures");
  report_cmd->add_option("input", report_input, "graph (graph JSON v1, or an .onnx model)")
      ->required();
  report_cmd->add_option("-o,--output", report_output, "the HTML file")->required();
  report_cmd->add_option("--bench", report_bench,
                         "a JSON of hfuse bench --json: add its timings, per launch too");
  std::string describe_rules = "seed";
  for (CLI::App* cmd : {explain, dot, report_cmd}) {
    add_rules(cmd, describe_rules, "seed (as fuse)");
    cmd->add_flag("--no-group-gemm", describe.no_group_gemm, "do not group GEMMs (as fuse)");
    cmd->add_option("--format", describe.format, "json or onnx (default: by extension)")
        ->check(CLI::IsMember({"json", "onnx"}));
    AddPassFlags(cmd, describe.passes);
  }

  std::string check_input;
  CLI::App* check = app.add_subcommand("check", "parse and verify a graph, print a summary");
  check->add_option("input", check_input, "input graph (graph JSON v1 or .onnx)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kInputErrorExit;
  }
  // What an allocation failure the budget did not foresee names.
  const std::string& subject = fuse->parsed()         ? input
                               : print->parsed()      ? print_input
                               : run->parsed()        ? run_input
                               : verify_cmd->parsed() ? verify_input
                               : check->parsed()      ? check_input
                                                      : memory_budget;
  try {
    if (!memory_budget.empty()) {
      const std::optional<int64_t> bytes = ParseByteSize(memory_budget);
      if (!bytes) ThrowInputError("--memory-budget {}: not a size in bytes (like 512M or 16G)", memory_budget);
      SetMemoryBudget(*bytes);
    }
    if (fuse->parsed()) {
      RuleSet rules = RuleSet::kSeed;
      ParseRuleSet(fuse_rules, rules);  // checked by CLI11
      return RunFuse(input, output, report, no_group_gemm, dump_dir, verify, seed, format,
                     export_mode, rules, fuse_passes, fuse_dims);
    }
    if (print->parsed()) return RunPrint(print_input, print_format, print_passes);
#if HFUSE_HAVE_CUDA
    if (bench->parsed()) {
      bench_options.dims = ParseDims(bench_dims);
      bench_options.check = !bench_no_check;
      return BenchCommand(bench_input, bench_options);
    }
#endif
    if (run->parsed()) {
      run_options.dims = ParseDims(dim_specs);
      run_options.rules = run_rules;
      run_options.fuse = !run_no_fuse;
      run_options.cuda_graph = !run_no_cuda_graph;
      return RunGraphCommand(run_input, run_options);
    }
    if (verify_cmd->parsed()) {
      VerifyOptions options;
      options.fused_path = fused_input;
      options.group_gemm = !verify_no_group_gemm;
      options.rules = verify_rules;
      options.device = verify_device;
      options.seed = verify_seed;
      options.inputs_npz = verify_inputs;
      options.dims = ParseDims(verify_dims);
      options.flags = verify_passes;
      return VerifyCommand(verify_input, options);
    }
    if (check->parsed()) return RunCheck(check_input);
    ParseRuleSet(describe_rules, describe.rules);  // checked by CLI11
    if (explain->parsed()) return ExplainCommand(explain_input, explain_op, describe);
    if (dot->parsed()) return DotCommand(dot_input, dot_output, dot_options, describe);
    if (report_cmd->parsed()) {
      return ReportCommand(report_input, report_output, report_bench, describe);
    }
  } catch (const InputError& e) {
    fmt::print(stderr, "hfuse: error: {}\n", OneLine(e.what()));
    return kInputErrorExit;
  } catch (const InternalError& e) {  // --verify-each found a pass's bug
    fmt::print(stderr, "hfuse: internal error: {}\n", OneLine(e.what()));
    return kInternalErrorExit;
  } catch (const std::bad_alloc&) {
    // Input that needs more memory than there is: an input error too.
    fmt::print(stderr, "hfuse: error: {}: out of memory while reading or processing it\n",
               OneLine(subject));
    return kInputErrorExit;
  } catch (const std::exception& e) {  // a CUDA or library failure, not the input's fault
    fmt::print(stderr, "hfuse: error: {}\n", OneLine(e.what()));
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace hfuse

int main(int argc, char** argv) {
  // Large blocks from the heap, not from mmap: on a graph of millions of ops
  // each phase allocates and frees arrays of tens to hundreds of MB, and a
  // freed mmap block goes back to the kernel, so that the next phase pays a
  // page fault per 4 KB again (about 8% of fusing a 10^6-op graph).
  mallopt(M_MMAP_MAX, 0);
  // OpenBLAS on its slowest kernels (a CPU model it does not know): again,
  // with the kernel set the CPU runs (cpu_executor.h), once.
  if (const char* core = hfuse::CpuBlasCoreToAskFor()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);  // on failure, run as we are
  }
  return hfuse::Main(argc, argv);
}
