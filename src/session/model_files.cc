// Graphs in and out of files. See model_files.h.
#include "hfuse/session/model_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "hfuse/io/graph_json.h"
#include "hfuse/support/error.h"

#if HFUSE_HAVE_ONNX
#include "hfuse/onnx/onnx_export.h"
#include "hfuse/onnx/onnx_import.h"
#endif

namespace hfuse {
namespace {

#if !HFUSE_HAVE_ONNX
[[noreturn]] void NoOnnx(const std::string& path) {
  ThrowInputError("{}: this hfuse was built without ONNX support (libonnx-dev)", path);
}
#endif

}  // namespace

ModelFormat FormatOf(const std::string& path, const std::string& forced) {
  if (forced == "onnx") return ModelFormat::kOnnx;
  if (forced == "json") return ModelFormat::kJson;
  if (!forced.empty()) ThrowInputError("--format '{}': expected json or onnx", forced);
  return std::filesystem::path(path).extension() == ".onnx" ? ModelFormat::kOnnx
                                                            : ModelFormat::kJson;
}

LoadedModel LoadModel(const std::string& path, const std::string& forced_format,
                      const std::map<std::string, int64_t>& dims) {
  LoadedModel model;
  model.format = FormatOf(path, forced_format);
  if (model.format == ModelFormat::kJson && std::filesystem::path(path).extension() == ".onnx") {
    // A JSON parse of a protobuf says nothing useful ("invalid literal").
    ThrowInputError(
        "{}: --format json reads graph JSON, and this file is named as an ONNX model; leave "
        "--format out (a file named .onnx is read as ONNX)",
        path);
  }
  if (model.format == ModelFormat::kJson) {
    model.graph = ReadGraphJsonFile(path);
    return model;
  }
#if HFUSE_HAVE_ONNX
  OnnxImportOptions options;
  options.dims = dims;
  OnnxModel onnx = ReadOnnxFile(path, options);
  model.graph = std::move(onnx.graph);
  model.onnx_shell = std::move(onnx.shell);
  model.as_read = model.graph;
  return model;
#else
  (void)dims;
  NoOnnx(path);
#endif
}

Graph LoadGraph(const std::string& path, const std::string& forced_format,
                const std::map<std::string, int64_t>& dims) {
  return LoadModel(path, forced_format, dims).graph;
}

LoadedModel LoadModelBytes(std::string_view bytes, ModelFormat format, const std::string& source,
                           const std::string& model_dir, const std::map<std::string, int64_t>& dims) {
  LoadedModel model;
  model.format = format;
  if (format == ModelFormat::kJson) {
    model.graph = ParseGraphJson(bytes, source);
    return model;
  }
#if HFUSE_HAVE_ONNX
  OnnxImportOptions options;
  options.dims = dims;
  OnnxModel onnx = ImportOnnx(bytes, source, model_dir, options);
  model.graph = std::move(onnx.graph);
  model.onnx_shell = std::move(onnx.shell);
  model.as_read = model.graph;
  return model;
#else
  (void)model_dir;
  (void)dims;
  NoOnnx(source);
#endif
}

std::string SerializeModel(const LoadedModel& source, const Graph& graph,
                           const std::vector<OpId>& op_order, ModelFormat format,
                           const std::string& export_mode) {
  if (export_mode != "hfuse" && export_mode != "standard") {
    ThrowInputError("--export '{}': expected hfuse or standard", export_mode);
  }
  if (format == ModelFormat::kJson) return WriteGraphJson(graph, op_order);
#if HFUSE_HAVE_ONNX
  OnnxExportOptions options;
  options.mode = export_mode == "standard" ? OnnxExportMode::kStandard : OnnxExportMode::kHfuse;
  const std::vector<OpId> ops = graph.LiveOps();
  const bool grouped = std::any_of(ops.begin(), ops.end(), [&](OpId id) {
    return IsGroupOp(graph.op(id).type);
  });
  const bool as_read = !grouped && source.format == ModelFormat::kOnnx;
  OnnxExportResult result =
      ExportOnnx(as_read ? source.as_read : graph, source.onnx_shell, options);
  if (options.mode == OnnxExportMode::kStandard) {
    fmt::print("standard ONNX: {} group{} as batched MatMul, {} left unfused\n",
               result.groups_batched, result.groups_batched == 1 ? "" : "s", result.groups_unfused);
  }
  return std::move(result.bytes);
#else
  (void)source;
  NoOnnx("the output");
#endif
}

}  // namespace hfuse
