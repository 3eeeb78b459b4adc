// Graph JSON version 1 (shared/spec/graph-json.md): reader and writer.
//
// The reader accepts exactly the format of the spec and rejects anything
// else (unknown keys, wrong types, missing or duplicate tensors, a tensor
// with two producers, cycles, shapes that break an op's rules) with an
// InputError that names the file and the offending op, tensor or field.
// The writer is canonical: reading what it wrote and writing again gives the
// same bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hfuse/ir/graph.h"

namespace hfuse {

// `source` names the input in error messages (usually the file path).
Graph ParseGraphJson(std::string_view text, const std::string& source);
Graph ReadGraphJsonFile(const std::string& path);

// Writes live ops in `op_order` (all live ops by id when empty), the tensors
// they use plus graph inputs and outputs (by id), and the graph outputs.
std::string WriteGraphJson(const Graph& graph, const std::vector<OpId>& op_order = {});
// The same text, written to `path` atomically (support/file.h) a megabyte at
// a time, never held whole.
void WriteGraphJsonFile(const std::string& path, const Graph& graph,
                        const std::vector<OpId>& op_order = {});

}  // namespace hfuse
