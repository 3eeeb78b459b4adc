// hfuse explain, dot and report: the pass's decisions as text, as Graphviz
// pictures and as one self-contained HTML page.
//
//   hfuse explain M [--op NAME]        reasons for the ops left out, by code
//   hfuse dot M [-o F.dot] [--fused] [--collapse]
//   hfuse report M -o report.html [--bench B.json]
//
// All three load the model and run the passes exactly as `hfuse fuse` does
// (same options, same decisions), then describe the result.
#pragma once

#include <string>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "pass_flags.h"

namespace hfuse {

struct DescribeOptions {
  std::string format;          // --format: "", "json" or "onnx"
  bool no_group_gemm = false;  // --no-group-gemm
  RuleSet rules = RuleSet::kSeed;  // --rules
  PassFlags passes;  // the pass manager's flags; --passes replaces the seed pipeline
};

int ExplainCommand(const std::string& input, const std::string& op_name,
                   const DescribeOptions& options);

struct DotOptions {
  bool fused = false;     // draw the fused graph (groups as clusters of their members' slots)
  bool collapse = false;  // only GEMMs, LayerNorms and groups; edges where one reaches another
};
int DotCommand(const std::string& input, const std::string& output, const DotOptions& dot,
               const DescribeOptions& options);

int ReportCommand(const std::string& input, const std::string& output,
                  const std::string& bench_json, const DescribeOptions& options);

// The Graphviz text of `graph` (MLIR ViewOpGraph's shape): one node per op,
// coloured by kind; an edge per tensor read; each group a cluster. For the
// graph before fusion (`fused` false) the clusters hold the groups' members
// and every GEMM or LayerNorm left out carries its reason code (tooltip: the
// details); for the fused graph, each group op is a cluster with one node per
// member slot. Graph inputs are drawn, params are not. Exposed for tests.
std::string GraphDot(const Graph& graph, const FuseGroupOpsResult& result, bool fused,
                     bool collapse);

}  // namespace hfuse
