// Graph JSON v1 (include/hfuse/io/graph_json.h): how a text is read. Two
// readers build the same graph: the fast path (graph_json_fast_reader.h)
// reads text in the form hfuse writes in one pass and never reports a
// problem; on anything else it gives up, and the checking reader
// (graph_json_reader.h), which accepts every valid form, reads the text
// again and words the message. So every error message comes from one place.
// The writer is graph_json_writer.cc.
#include "hfuse/io/graph_json.h"

#include <optional>

#include "graph_json_fast_reader.h"
#include "graph_json_reader.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {

Graph ParseGraphJson(std::string_view text, const std::string& source) {
  // nlohmann's message for this one ("unexpected end of input") hides the cause.
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    ThrowInputError("{}: the file is empty", source);
  if (std::optional<Graph> graph = TryReadGraphJsonFast(text)) return std::move(*graph);
  return ReadGraphJsonChecked(text, source);
}

Graph ReadGraphJsonFile(const std::string& path) {
  const FileText text(path);
  return ParseGraphJson(text.view(), path);
}

}  // namespace hfuse
