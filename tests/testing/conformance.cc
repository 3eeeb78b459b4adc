// Conformance case helpers. See conformance.h.
#include "testing/conformance.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hfuse/support/file.h"

namespace hfuse::testing {

namespace fs = std::filesystem;

std::vector<std::string> ConformanceCases() {
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

std::string ConformancePath(const std::string& id) {
  return (fs::path(HFUSE_SHARED_DIR) / "conformance" / id).string();
}

FuseGroupOpsOptions ConformanceOptions(const std::string& id) {
  const auto expected = nlohmann::json::parse(ReadFile(ConformancePath(id) + ".expected.json"));
  FuseGroupOpsOptions options;
  for (const auto& o : expected.value("options", nlohmann::json::array())) {
    if (o == "--no-group-gemm") options.group_gemm = false;
  }
  return options;
}

std::string CaseTestName(const std::string& id) {
  std::string name = id;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace hfuse::testing
