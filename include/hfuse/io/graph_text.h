// Reads the printer's text (ir/printer.h) back into a graph: the input of
// the textual pass tests (tests/passes/textual/), so that a test is written
// in the notation it is checked in.
//
// Lines starting with "//" and blank lines are skipped; an op line's "# NAME"
// may be left off (the op is then named "op<N>", N counting op lines from
// 0). The graph is verified as graph JSON's reader verifies it; errors are
// InputErrors naming `source` and the line. Opaque ops (ONNX operators
// hfuse keeps whole) print, but do not read back: their node is not text.
#pragma once

#include <string>
#include <string_view>

#include "hfuse/ir/graph.h"

namespace hfuse {

Graph ParseGraphText(std::string_view text, const std::string& source);

}  // namespace hfuse
