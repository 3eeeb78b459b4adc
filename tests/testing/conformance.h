// The conformance cases in shared/conformance/: listing them and loading one.
#pragma once

#include <string>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"

namespace hfuse::testing {

// "dir/name" for every case, sorted (dir: ait_tests, edge, random, scale).
std::vector<std::string> ConformanceCases();

std::string ConformancePath(const std::string& id);  // without ".json"

// The pass options the case's expectation was made with.
FuseGroupOpsOptions ConformanceOptions(const std::string& id);

// A gtest-friendly test name for a case id.
std::string CaseTestName(const std::string& id);

}  // namespace hfuse::testing
