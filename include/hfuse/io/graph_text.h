// Reads the printer's text (ir/printer.h) back into a graph: the input of
// the textual pass tests (tests/passes/textual/), so that a test is written
// in the notation it is checked in.
//
// Lines starting with "//" and blank lines are skipped; an op line's "# NAME"
// may be left off (the op is then named "op<N>", N counting op lines from
// 0). The graph is verified as graph JSON's reader verifies it; errors are
// InputErrors naming `source` and the line. Tensors may also be int64,
// int32 or bool (an ONNX model's ids and masks). An opaque op (an ONNX
// operator hfuse keeps whole) reads back as a node of its operator at opset
// 17 with its inputs and output in order and the int attributes written
// after it (`y = opaque(table, ids) {onnx = Gather, axis = 1}`), for the
// textual tests of passes that look at such ops; the printer writes no
// attribute of the node, so a printed opaque op with attributes reads back
// without them. A group_gather reads its members' names.
#pragma once

#include <string>
#include <string_view>

#include "hfuse/ir/graph.h"

namespace hfuse {

Graph ParseGraphText(std::string_view text, const std::string& source);

}  // namespace hfuse
