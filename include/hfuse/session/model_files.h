// Graphs in and out of files of either format: graph JSON v1 and ONNX.
//
// The format of a file is its extension (.onnx is ONNX, anything else graph
// JSON) unless --format names one. An ONNX model goes through the importer;
// the passes that run after it are hfuse/session/pipelines.h's.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hfuse/ir/graph.h"

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

// `dims`: the dims the caller binds (name -> value), which an ONNX model's
// import may read to fold an If (OnnxImportOptions::dims).
LoadedModel LoadModel(const std::string& path, const std::string& forced_format = "",
                      const std::map<std::string, int64_t>& dims = {});
Graph LoadGraph(const std::string& path, const std::string& forced_format = "",
                const std::map<std::string, int64_t>& dims = {});
// A model held in memory (the bytes of a graph JSON file or an ONNX model);
// `source` names it in error messages, `model_dir` is where an ONNX model's
// external data files are looked for.
LoadedModel LoadModelBytes(std::string_view bytes, ModelFormat format, const std::string& source,
                           const std::string& model_dir = ".",
                           const std::map<std::string, int64_t>& dims = {});

// The file contents of `graph` (which came from `source`) in `format`;
// `export_mode` is --export ("hfuse" or "standard", ONNX only). `op_order`
// is the order JSON lists ops in (empty: by id). An ONNX model in which no
// group formed is written back as it was read: the GEMM rewrites that run
// before fuse-group-ops only serve grouping, so the model keeps its nodes.
std::string SerializeModel(const LoadedModel& source, const Graph& graph,
                           const std::vector<OpId>& op_order, ModelFormat format,
                           const std::string& export_mode);

}  // namespace hfuse
