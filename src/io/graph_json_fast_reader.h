// The graph JSON reader's fast path, for graph JSON in the form hfuse and
// its tools write: top-level keys in the order graph_format, name, dims,
// tensors, ops, outputs; each tensor's and op's keys in the writer's order;
// strings of plain printable ASCII. It reads such a file in one pass,
// checking its syntax and everything the checking reader checks, and builds
// the same graph (in that form, the file order is the reader's order). It
// never reports a problem: on anything else (another key order, an escape, a
// check that fails) it gives up, and the checking reader
// (graph_json_reader.h) reads the file again and words the message. So every
// error message, and every graph of another form, come from one place.
#pragma once

#include <optional>
#include <string_view>

#include "hfuse/ir/graph.h"

namespace hfuse {

// The graph, or nullopt when the text is in another form or has a problem.
std::optional<Graph> TryReadGraphJsonFast(std::string_view text);

}  // namespace hfuse
