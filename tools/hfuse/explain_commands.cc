// hfuse explain, dot and report. See explain_commands.h.
#include "explain_commands.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "hfuse/ir/op_members.h"
#include "hfuse/passes/fusion_reasons.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "hfuse/session/pipelines.h"

namespace hfuse {
namespace {

// The model, the graph as fuse-group-ops got it, and what the pass did.
struct Described {
  Graph before;
  Graph fused;
  FuseGroupOpsResult result;
  std::string input;
};

Described Describe(const std::string& input, const DescribeOptions& options) {
  Described d;
  d.input = input;
  LoadedModel model = LoadModel(input, options.format);
  PassOptions pass_options;
  pass_options.fuse_group_ops.group_gemm = !options.no_group_gemm;
  pass_options.fuse_group_ops.rules = options.rules;
  // ONNX input first goes through onnx-import; `before` is what seed gets.
  if (model.format == ModelFormat::kOnnx) {
    PassFlags import;
    import.manager = options.passes.manager;  // --print-after, --verify-each, --time-passes
    import.manager.stop_after.clear();
    RunPasses(model.graph, import, PipelineNamed("onnx-import"), pass_options);
  }
  d.before = model.graph;
  PassState state =
      RunPasses(model.graph, options.passes, FusionPipeline(Target::kCpu, options.rules), pass_options);
  if (state.fused) {
    d.result = std::move(state.fuse_result);
  } else {
    d.result.ops_before = d.result.ops_after = model.graph.NumLiveOps();
  }
  d.fused = std::move(model.graph);
  return d;
}

std::string Summary(const Described& d) {
  const FuseGroupOpsResult& r = d.result;
  std::string line = fmt::format("{}: {} ops -> {} ops, {} group{}", d.input, r.ops_before,
                                 r.ops_after, r.groups.size(), r.groups.size() == 1 ? "" : "s");
  const std::string_view kinds = UngroupedKinds(r);
  if (r.ungrouped.empty()) {
    return line + (kinds == "GEMM/LayerNorm" ? "; every GEMM and LayerNorm is in a group"
                                             : "; every GEMM, LayerNorm and Gather is in a group");
  }
  return line + fmt::format("; {} {} op{} ungrouped ({})", r.ungrouped.size(), kinds,
                            r.ungrouped.size() == 1 ? "" : "s", TopReasons(r.ungrouped, 3));
}

// An ONNX Gather (the ops fuse-group-gathers looks at).
bool IsGather(const Op& op) { return IsOnnxGather(op); }

bool IsCandidateKind(const Op& op) {
  const OpType t = op.type;
  return IsGemm(t) || IsLayerNorm(t) || IsGroupOp(t) || IsGather(op);
}

// Node colours by op kind.
const char* FillOf(const Op& op) {
  const OpType t = op.type;
  if (IsGemm(t) || IsGroupGemm(t)) return "#cfe2ff";
  if (IsLayerNorm(t) || IsGroupLayerNorm(t)) return "#d3f9d8";
  if (IsGroupGather(t) || IsGather(op)) return "#ffe8cc";
  switch (t) {
    case OpType::kSplit:
    case OpType::kConcatenate: return "#fff3bf";
    case OpType::kElementwise: return "#f1f3f5";
    case OpType::kReshape: return "#ffffff";
    default: return "#e5dbff";
  }
}

// A string as a Graphviz quoted string.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::string ShapeText(const Graph& g, const Tensor& t) {
  std::vector<std::string> dims;
  for (const Dim& d : t.shape) {
    dims.push_back(d.is_static() ? fmt::format("{}", d.value)
                                 : g.dims()[static_cast<size_t>(d.dynamic)].name);
  }
  return fmt::format("{}: [{}] {}", t.name, fmt::join(dims, ", "), DTypeName(t.dtype));
}

class DotWriter {
 public:
  DotWriter(const Graph& g, const FuseGroupOpsResult& r, bool fused, bool collapse)
      : g_(g), r_(r), fused_(fused), collapse_(collapse) {
    for (const Reason& u : r.ungrouped) reason_of_[u.op] = &u;
    if (fused_) {
      for (size_t i = 0; i < r.groups.size(); ++i) group_index_[r.groups[i].op] = i;
    } else {
      for (size_t i = 0; i < r.groups.size(); ++i) {
        for (const std::string& m : r.groups[i].members) {
          if (auto id = g.FindOp(m)) member_group_[*id] = i;
        }
      }
    }
  }

  std::string Write() {
    out_ = "digraph hfuse {\n  rankdir=TB;\n  compound=true;\n"
           "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
           "  edge [color=\"#868e96\", arrowsize=0.6];\n";
    out_ += fmt::format("  label={};\n  labelloc=t;\n  fontname=\"Helvetica\";\n",
                        Quote(fmt::format("{} ({})", g_.name().empty() ? "graph" : g_.name(),
                                          fused_ ? "after fuse-group-ops" : "before fuse-group-ops")));
    const std::vector<OpId> ops = g_.LiveOps();
    // Clusters first, in creation order of the groups.
    std::vector<std::vector<OpId>> clusters(r_.groups.size());
    for (OpId id : ops) {
      if (!Drawn(id)) continue;
      if (fused_) {
        if (auto it = group_index_.find(id); it != group_index_.end()) clusters[it->second].push_back(id);
      } else if (auto it = member_group_.find(id); it != member_group_.end()) {
        clusters[it->second].push_back(id);
      }
    }
    for (size_t i = 0; i < clusters.size(); ++i) {
      if (clusters[i].empty()) continue;
      const FusedGroup& group = r_.groups[i];
      out_ += fmt::format(
          "  subgraph cluster_{} {{\n    label={};\n    style=\"rounded,filled\";\n"
          "    color=\"#495057\";\n    fillcolor=\"{}\";\n    fontsize=11;\n",
          i,
          Quote(fmt::format("{}{} ({} members)", fused_ ? "" : "will be ", group.name,
                            group.members.size())),
          fused_ ? "#e7f5ff" : "#f8f9fa");
      for (OpId id : clusters[i]) WriteOpNodes(id, "    ");
      out_ += "  }\n";
    }
    for (OpId id : ops) {
      if (!Drawn(id)) continue;
      if (fused_ ? group_index_.count(id) : member_group_.count(id)) continue;
      WriteOpNodes(id, "  ");
    }
    if (!collapse_) {
      for (TensorId t : InputTensors()) {
        out_ += fmt::format("  t{} [shape=ellipse, style=filled, fillcolor=\"#ffffff\", label={}];\n",
                            t, Quote(g_.tensor(t).name));
      }
    }
    WriteEdges(ops);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  bool Drawn(OpId id) const { return !collapse_ || IsCandidateKind(g_.op(id)); }

  // The node of op `id` that produces tensor output number `slot`.
  std::string SourceNode(OpId id, size_t slot) const {
    if (fused_ && group_index_.count(id)) return fmt::format("op{}_{}", id, slot);
    return fmt::format("op{}", id);
  }
  // The node of op `id` that reads its input number `index`.
  std::string TargetNode(OpId id, size_t index) const {
    if (!fused_ || !group_index_.count(id)) return fmt::format("op{}", id);
    return fmt::format("op{}_{}", id, MemberOfInput(g_.op(id), index));
  }

  void WriteOpNodes(OpId id, const char* indent) {
    const Op& op = g_.op(id);
    if (fused_ && group_index_.count(id)) {
      const FusedGroup& group = r_.groups[group_index_.at(id)];
      for (size_t m = 0; m < op.outputs.size(); ++m) {
        const std::string member = m < group.members.size() ? group.members[m] : "?";
        const std::string_view kind = IsGroupGather(op.type) ? std::string_view("Gather")
                                      : IsGroupGemm(op.type)  ? OpTypeName(GemmKindOf(op, m))
                                                              : OpTypeName(MemberOf(op.type));
        out_ += fmt::format("{}op{}_{} [label={}, fillcolor=\"{}\", tooltip={}];\n", indent, id, m,
                            Quote(fmt::format("{}\n{}", member, kind)), FillOf(op),
                            Quote(ShapeText(g_, g_.tensor(op.outputs[m]))));
      }
      return;
    }
    std::string label =
        fmt::format("{}\n{}", op.name, op.type == OpType::kOpaque && op.attrs.onnx
                                            ? std::string_view(op.attrs.onnx->op_type)
                                            : OpTypeName(op.type));
    std::string extra;
    if (auto it = reason_of_.find(op.name); it != reason_of_.end()) {
      label += fmt::format("\n[{}]", ReasonCodeName(it->second->code));
      extra = fmt::format(", color=\"#c92a2a\", penwidth=2.5, tooltip={}",
                          Quote(fmt::format("{}: {}", ReasonCodeName(it->second->code),
                                            it->second->details)));
    } else if (!op.outputs.empty()) {
      extra = fmt::format(", tooltip={}", Quote(ShapeText(g_, g_.tensor(op.outputs[0]))));
    }
    out_ += fmt::format("{}op{} [label={}, fillcolor=\"{}\"{}];\n", indent, id, Quote(label),
                        FillOf(op), extra);
  }

  std::vector<TensorId> InputTensors() const {
    std::vector<TensorId> ins;
    for (TensorId t = 0; t < g_.num_tensor_ids(); ++t) {
      const Tensor& x = g_.tensor(t);
      if (x.alive && x.role == Role::kInput && !x.users.empty()) ins.push_back(t);
    }
    return ins;
  }

  void WriteEdges(const std::vector<OpId>& ops) {
    std::set<std::pair<std::string, std::string>> seen;
    auto edge = [&](const std::string& from, const std::string& to, const Tensor& t) {
      if (!seen.emplace(from, to).second) return;
      out_ += fmt::format("  {} -> {} [tooltip={}];\n", from, to, Quote(ShapeText(g_, t)));
    };
    auto source_of = [&](TensorId t) -> std::string {
      const Tensor& x = g_.tensor(t);
      if (x.producer != kNone) {
        const Op& p = g_.op(x.producer);
        for (size_t s = 0; s < p.outputs.size(); ++s) {
          if (p.outputs[s] == t) return SourceNode(x.producer, s);
        }
      }
      return x.role == Role::kInput ? fmt::format("t{}", t) : std::string();
    };
    if (!collapse_) {
      for (OpId id : ops) {
        const Op& op = g_.op(id);
        for (size_t i = 0; i < op.inputs.size(); ++i) {
          const std::string from = source_of(op.inputs[i]);
          if (!from.empty()) edge(from, TargetNode(id, i), g_.tensor(op.inputs[i]));
        }
      }
      return;
    }
    // Collapsed: an edge from a drawn op to each drawn op it reaches through
    // ops that are not drawn.
    std::vector<uint32_t> stamp(static_cast<size_t>(g_.num_tensor_ids()), 0);
    uint32_t now = 0;
    for (OpId id : ops) {
      if (!Drawn(id)) continue;
      const Op& op = g_.op(id);
      for (size_t s = 0; s < op.outputs.size(); ++s) {
        ++now;
        std::vector<TensorId> stack = {op.outputs[s]};
        while (!stack.empty()) {
          const TensorId t = stack.back();
          stack.pop_back();
          if (stamp[static_cast<size_t>(t)] == now) continue;
          stamp[static_cast<size_t>(t)] = now;
          for (OpId user : g_.tensor(t).users) {
            const Op& u = g_.op(user);
            if (Drawn(user)) {
              for (size_t i = 0; i < u.inputs.size(); ++i) {
                if (u.inputs[i] == t) edge(SourceNode(id, s), TargetNode(user, i), g_.tensor(t));
              }
            } else {
              for (TensorId o : u.outputs) stack.push_back(o);
            }
          }
        }
      }
    }
  }

  const Graph& g_;
  const FuseGroupOpsResult& r_;
  bool fused_, collapse_;
  std::unordered_map<std::string, const Reason*> reason_of_;
  std::unordered_map<OpId, size_t> group_index_;   // fused: group op -> group
  std::unordered_map<OpId, size_t> member_group_;  // before: member op -> group
  std::string out_;
};

// Runs `dot -Tsvg` on `dot_text` and returns the <svg> element.
std::string RenderSvg(const std::string& dot_text) {
  char dot_path[] = "/tmp/hfuse-dot-XXXXXX";
  const int fd = mkstemp(dot_path);
  if (fd < 0) throw std::runtime_error("report: cannot make a temporary file");
  {
    std::ofstream f(dot_path);
    f << dot_text;
  }
  close(fd);
  const std::string command = fmt::format("dot -Tsvg '{}' 2>/dev/null", dot_path);
  FILE* pipe = popen(command.c_str(), "r");
  std::string svg;
  if (pipe) {
    char buffer[65536];
    for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) svg.append(buffer, n);
    const int status = pclose(pipe);
    if (status != 0) svg.clear();
  }
  std::filesystem::remove(dot_path);
  const size_t start = svg.find("<svg");
  if (start == std::string::npos) {
    throw std::runtime_error(
        "report: Graphviz 'dot' failed or is missing (install graphviz: scripts/setup.sh)");
  }
  return svg.substr(start);
}

std::string Html(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Graphs above this many ops are drawn collapsed in the report.
constexpr int64_t kCollapseAbove = 300;

std::string BenchSection(const std::string& path) {
  nlohmann::json bench;
  try {
    bench = nlohmann::json::parse(ReadFile(path));
  } catch (const nlohmann::json::exception& e) {
    ThrowInputError("{}: not a bench JSON (hfuse bench --json): {}", path, e.what());
  }
  if (!bench.is_object() || !bench.contains("variants") || !bench["variants"].is_array()) {
    ThrowInputError("{}: not a bench JSON (hfuse bench --json): no \"variants\" list", path);
  }
  std::string html = "<h2>Timings</h2>\n<table>\n<tr><th>variant</th><th>plain launches (us)</th>"
                     "<th>CUDA graph (us)</th><th>floor (us)</th><th>launches</th></tr>\n";
  auto num = [&](const nlohmann::json& v, const char* key) -> std::string {
    if (!v.is_object() || !v.contains(key) || !v[key].is_number()) {
      ThrowInputError("{}: a variant without a number \"{}\"", path, key);
    }
    return fmt::format("{:.1f}", v[key].get<double>());
  };
  for (const auto& v : bench["variants"]) {
    if (!v.contains("name") || !v["name"].is_string()) {
      ThrowInputError("{}: a variant without a \"name\"", path);
    }
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        Html(v["name"].get<std::string>()), num(v, "plain_us"),
                        num(v, "cudagraph_us"), num(v, "floor_us"),
                        v.contains("launches") ? v["launches"].dump() : "");
  }
  html += "</table>\n";
  // "profile": per launch of a fused variant, {variant: [{launch, us}]}
  // (hfuse bench --profile), or one list from older versions.
  auto launches = [&](const std::string& title, const nlohmann::json& list) {
    if (!list.is_array()) ThrowInputError("{}: \"profile\" of {} is not a list", path, title);
    html += fmt::format("<h3>Per launch: {}</h3>\n<table>\n<tr><th>launch</th><th>us</th></tr>\n",
                        Html(title));
    for (const auto& p : list) {
      if (!p.is_object() || !p.contains("launch") || !p["launch"].is_string()) {
        ThrowInputError("{}: a profile entry without a \"launch\"", path);
      }
      html += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", Html(p["launch"].get<std::string>()),
                          num(p, "us"));
    }
    html += "</table>\n";
  };
  if (bench.contains("profile")) {
    if (bench["profile"].is_array()) {
      launches("fused", bench["profile"]);
    } else if (bench["profile"].is_object()) {
      for (const auto& [variant, list] : bench["profile"].items()) launches(variant, list);
    } else {
      ThrowInputError("{}: \"profile\" is neither a list nor an object", path);
    }
  }
  return html;
}

}  // namespace

std::string GraphDot(const Graph& graph, const FuseGroupOpsResult& result, bool fused,
                     bool collapse) {
  return DotWriter(graph, result, fused, collapse).Write();
}

int ExplainCommand(const std::string& input, const std::string& op_name,
                   const DescribeOptions& options) {
  const Described d = Describe(input, options);
  if (op_name.empty()) {
    fmt::print("{}\n{}", Summary(d), ReasonsByCode(d.result.ungrouped));
    return 0;
  }
  const std::optional<OpId> id = d.before.FindOp(op_name);
  if (!id) ThrowInputError("{}: --op {}: no op of that name", input, op_name);
  for (const Reason& r : d.result.ungrouped) {
    if (r.op != op_name) continue;
    fmt::print("{} ({}): {} [{}]: {}\n", r.op, KindName(r.type), ReasonCodeName(r.code),
               ReasonRuleName(r.rule), r.details);
    if (!r.path.empty()) fmt::print("  path: {}\n", fmt::join(r.path, " -> "));
    return 0;
  }
  for (const FusedGroup& g : d.result.groups) {
    for (const std::string& m : g.members) {
      if (m != op_name) continue;
      fmt::print("{} ({}): grouped in {} ({}, {} members: {})\n", op_name,
                 KindName(d.before.op(*id).type), g.name, OpTypeName(g.type),
                 g.members.size(), fmt::join(MemberLabels(g), ", "));
      return 0;
    }
  }
  const OpType type = d.before.op(*id).type;
  if (IsGemm(type) || IsLayerNorm(type)) {
    // Only an op the clean-up removed (dead) gets here.
    fmt::print("{} ({}): removed before grouping (its outputs reach no graph output)\n", op_name,
               OpTypeName(type));
  } else if (IsGather(d.before.op(*id))) {
    fmt::print("{} (Gather): fuse-group-gathers groups Gathers under --rules hfuse only\n", op_name);
  } else {
    fmt::print("{} ({}): not a GEMM or LayerNorm; fuse-group-ops groups only those (and "
               "fuse-group-gathers, under --rules hfuse, ONNX Gathers)\n",
               op_name, OpTypeName(type));
  }
  return 0;
}

int DotCommand(const std::string& input, const std::string& output, const DotOptions& dot,
               const DescribeOptions& options) {
  const Described d = Describe(input, options);
  const std::string text = GraphDot(dot.fused ? d.fused : d.before, d.result, dot.fused, dot.collapse);
  if (output.empty()) {
    fmt::print("{}", text);
  } else {
    WriteFileAtomic(output, text);
  }
  return 0;
}

int ReportCommand(const std::string& input, const std::string& output,
                  const std::string& bench_json, const DescribeOptions& options) {
  const Described d = Describe(input, options);
  const std::string bench = bench_json.empty() ? std::string() : BenchSection(bench_json);
  const bool collapse = d.result.ops_before > kCollapseAbove;
  const std::string before = RenderSvg(GraphDot(d.before, d.result, false, collapse));
  const std::string after = RenderSvg(GraphDot(d.fused, d.result, true, collapse));
  const FuseGroupOpsResult& r = d.result;
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>hfuse report: {0}</title>\n<style>\n"
      "body {{ font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #212529; }}\n"
      "table {{ border-collapse: collapse; margin: 1em 0; }}\n"
      "td, th {{ border: 1px solid #dee2e6; padding: 0.3em 0.6em; text-align: left; "
      "vertical-align: top; font-size: 0.9em; }}\n"
      "th {{ background: #f1f3f5; }}\n code {{ background: #f1f3f5; padding: 0 0.2em; }}\n"
      ".picture {{ overflow: auto; border: 1px solid #dee2e6; margin: 1em 0; }}\n"
      "</style>\n</head>\n<body>\n<h1>hfuse report: {0}</h1>\n<p id=\"summary\">{1}</p>\n",
      Html(input), Html(Summary(d)));
  html += fmt::format("<h2>Groups ({})</h2>\n<table id=\"groups\">\n"
                      "<tr><th>#</th><th>group op</th><th>type</th><th>members</th>"
                      "<th>members (group order)</th></tr>\n",
                      r.groups.size());
  for (size_t i = 0; i < r.groups.size(); ++i) {
    const FusedGroup& g = r.groups[i];
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", i,
                        Html(g.name), OpTypeName(g.type), g.members.size(),
                        Html(fmt::format("{}", fmt::join(MemberLabels(g), ", "))));
  }
  html += "</table>\n";
  html += fmt::format("<h2>Left out ({})</h2>\n<table id=\"ungrouped\">\n"
                      "<tr><th>op</th><th>type</th><th>reason</th><th>rule</th><th>details</th>"
                      "</tr>\n",
                      r.ungrouped.size());
  for (const Reason& u : r.ungrouped) {
    html += fmt::format("<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td>"
                        "</tr>\n",
                        Html(u.op), KindName(u.type), ReasonCodeName(u.code),
                        ReasonRuleName(u.rule), Html(u.details));
  }
  html += "</table>\n<h3>Reason codes</h3>\n<table>\n";
  for (ReasonCode code : AllReasonCodes()) {
    html += fmt::format("<tr><td><code>{}</code></td><td>{}</td></tr>\n", ReasonCodeName(code),
                        Html(ReasonCodeDescription(code)));
  }
  html += "</table>\n";
  html += bench;
  const char* note = collapse ? " (collapsed: GEMMs, LayerNorms, Gathers and groups only)" : "";
  html += fmt::format("<h2>Before fusion{}</h2>\n<div class=\"picture\" id=\"before\">\n{}</div>\n",
                      note, before);
  html += fmt::format("<h2>After fusion{}</h2>\n<div class=\"picture\" id=\"after\">\n{}</div>\n",
                      note, after);
  html += "</body>\n</html>\n";
  WriteFileAtomic(output, html);
  fmt::print("wrote {}: {}\n", output, Summary(d));
  return 0;
}

}  // namespace hfuse
