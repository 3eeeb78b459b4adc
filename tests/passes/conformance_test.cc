// Every case in shared/conformance/: the pass must produce the same set of
// groups as AITemplate's (each with the same op type and the same members in
// the same order) and the same op counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/file.h"
#include "testing/conformance.h"

namespace hfuse {
namespace {

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, SameGroupsAsReference) {
  const std::string base = testing::ConformancePath(GetParam());
  const auto expected = nlohmann::json::parse(ReadFile(base + ".expected.json"));
  Graph graph = ReadGraphJsonFile(base + ".json");
  const FuseGroupOpsResult result = FuseGroupOps(graph, testing::ConformanceOptions(GetParam()));

  using Group = std::pair<std::string, std::vector<std::string>>;
  std::vector<Group> want, got;
  for (const auto& g : expected["groups"]) {
    want.emplace_back(g["op"].get<std::string>(), g["members"].get<std::vector<std::string>>());
  }
  for (const FusedGroup& g : result.groups) got.emplace_back(OpTypeName(g.type), g.members);
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_EQ(result.ops_before, expected["ops_before"].get<int64_t>());
  EXPECT_EQ(result.ops_after, expected["ops_after"].get<int64_t>());
}

INSTANTIATE_TEST_SUITE_P(Shared, Conformance, ::testing::ValuesIn(testing::ConformanceCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return testing::CaseTestName(info.param);
                         });

}  // namespace
}  // namespace hfuse
