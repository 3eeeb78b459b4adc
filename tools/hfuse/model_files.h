// Graphs in and out of files of either format: graph JSON v1 and ONNX.
//
// The format of a file is its extension (.onnx is ONNX, anything else graph
// JSON) unless --format names one. An ONNX model goes through the importer,
// and before fuse-group-ops through fuse-mm-elementwise and
// flatten-gemm-inputs (a Linear layer arrives as Gemm/MatMul + Add +
// activation; graph JSON spells fused GEMMs out already, so JSON input skips
// them, which keeps the conformance cases as they were).
#pragma once

#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/pass_manager.h"

namespace hfuse {

enum class ModelFormat { kJson, kOnnx };

// `forced` is the --format value: "", "json" or "onnx".
ModelFormat FormatOf(const std::string& path, const std::string& forced);

struct LoadedModel {
  Graph graph;
  ModelFormat format = ModelFormat::kJson;
  std::string onnx_shell;  // ONNX input: the model around the graph
  Graph as_read;           // ONNX input: the graph as imported (params shared)
};

LoadedModel LoadModel(const std::string& path, const std::string& forced_format = "");
Graph LoadGraph(const std::string& path, const std::string& forced_format = "");

// The pipeline `hfuse fuse` and `verify` run on a model of this format:
// seed, after onnx-import for ONNX (passes/pass_manager.h).
std::vector<const PassInfo*> FusePipeline(ModelFormat format);

// The file contents of `graph` (which came from `source`) in `format`;
// `export_mode` is --export ("hfuse" or "standard", ONNX only). `op_order`
// is the order JSON lists ops in (empty: by id). An ONNX model in which no
// group formed is written back as it was read: the GEMM rewrites that run
// before fuse-group-ops only serve grouping, so the model keeps its nodes.
std::string SerializeModel(const LoadedModel& source, const Graph& graph,
                           const std::vector<OpId>& op_order, ModelFormat format,
                           const std::string& export_mode);

}  // namespace hfuse
