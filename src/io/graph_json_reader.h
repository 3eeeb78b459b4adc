// The graph JSON reader's checking path (graph_json_reader.cc): reads any
// valid graph JSON v1 text and turns every problem into an InputError that
// names `source` and the offending op, tensor or field. ParseGraphJson
// (graph_json.cc) calls it when the fast path gives up.
#pragma once

#include <string>
#include <string_view>

#include "hfuse/ir/graph.h"

namespace hfuse {

Graph ReadGraphJsonChecked(std::string_view text, const std::string& source);

}  // namespace hfuse
