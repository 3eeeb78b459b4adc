// libFuzzer target: the graph JSON reader, both paths (src/io/graph_json.cc).
// Any input must give a graph or an InputError, never a crash, a hang or a
// sanitizer report. When the input is JSON, it is also read with the keys of
// every object in sorted order, which the fast path gives up on, so that the
// general reader (json_text.h, 64-bit token positions) reads it: both must
// agree (the same graph, written back to the same bytes, or both an error).
// A graph read back from what the writer wrote is the same graph.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/support/error.h"

namespace {

std::optional<std::string> Written(std::string_view text) {
  try {
    return hfuse::WriteGraphJson(hfuse::ParseGraphJson(text, "fuzz.json"));
  } catch (const hfuse::InputError&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hfuse::fuzz::Init();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<std::string> as_is = Written(text);
  if (as_is) {
    HFUSE_FUZZ_EXPECT(Written(*as_is) == as_is, "the writer's output reads back differently");
  }
  // The same document, keys sorted (nlohmann::json's std::map objects).
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  std::string sorted;
  try {
    sorted = doc.dump();
  } catch (const nlohmann::json::exception&) {
    return 0;  // invalid UTF-8 in a string: dump refuses it
  }
  const std::optional<std::string> general = Written(sorted);
  HFUSE_FUZZ_EXPECT(general.has_value() == as_is.has_value(),
                    "the fast and the general reader disagree on whether the graph is valid");
  if (general) HFUSE_FUZZ_EXPECT(*general == *as_is, "the two readers read different graphs");
  return 0;
}
