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

namespace hfuse {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> AllCases() {
  std::vector<std::string> cases;
  const fs::path root = fs::path(HFUSE_SHARED_DIR) / "conformance";
  for (const char* dir : {"ait_tests", "edge", "random", "scale"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& entry : fs::directory_iterator(root / dir)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".json") && !name.ends_with(".expected.json")) {
        cases.push_back((fs::path(dir) / name.substr(0, name.size() - 5)).string());
      }
    }
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

class Conformance : public testing::TestWithParam<std::string> {};

TEST_P(Conformance, SameGroupsAsReference) {
  const fs::path base = fs::path(HFUSE_SHARED_DIR) / "conformance" / GetParam();
  const auto expected = nlohmann::json::parse(ReadFile(base.string() + ".expected.json"));
  Graph graph = ReadGraphJsonFile(base.string() + ".json");
  FuseGroupOpsOptions options;
  for (const auto& o : expected.value("options", nlohmann::json::array())) {
    if (o == "--no-group-gemm") options.group_gemm = false;
  }
  const FuseGroupOpsResult result = FuseGroupOps(graph, options);

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

INSTANTIATE_TEST_SUITE_P(Shared, Conformance, testing::ValuesIn(AllCases()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace hfuse
