// The graph reader's two paths agree (src/io/graph_json.cc): the fast path,
// which reads files in the form hfuse writes in one pass and gives up on
// anything else, and the general reader, which reads any key order through
// json_text.h (or nlohmann's DOM) and words every error. The same document
// is read as it is (the fast path, when it is in that form) and with the
// keys of every object in sorted order (which the fast path gives up on),
// and the two results must be the same graph, or the same error: for every
// conformance graph, for random graphs, for graphs the writer wrote, and for
// thousands of seeded mutations of them (values swapped between keys, keys
// dropped, numbers and names changed).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"
#include "testing/conformance.h"
#include "testing/random_graph.h"

namespace hfuse {
namespace {

using Json = nlohmann::json;  // std::map objects: dump() sorts every object's keys

// The graph as the writer writes it (with every tensor, used or not, and the
// counts), or the error.
std::string Outcome(const std::string& text) {
  try {
    const Graph g = ParseGraphJson(text, "in.json");
    std::string s = fmt::format("{} tensors, {} ops, {} dims\n", g.num_tensor_ids(), g.num_op_ids(),
                                g.dims().size());
    for (TensorId t = 0; t < g.num_tensor_ids(); ++t) s += g.tensor(t).name + "\n";
    return s + WriteGraphJson(g);
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

// `text` read as it is and with sorted keys (when it is JSON at all);
// returns whether it was a graph.
bool ExpectPathsAgree(const std::string& text, const std::string& what) {
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return false;
  const std::string outcome = Outcome(text);
  EXPECT_EQ(outcome, Outcome(doc.dump())) << what;
  EXPECT_EQ(outcome, Outcome(doc.dump(1))) << what << " (indented)";
  return !outcome.starts_with("error: ");
}

TEST(GraphJsonPaths, ConformanceGraphsAndTheirFusedGraphs) {
  for (const std::string& id : testing::ConformanceCases()) {
    const std::string text = ReadFile(testing::ConformancePath(id) + ".json");
    ExpectPathsAgree(text, id);
    Graph g = ParseGraphJson(text, id);
    Graph h = g;
    const FuseGroupOpsResult r = FuseGroupOps(g, testing::ConformanceOptions(id));
    ExpectPathsAgree(WriteGraphJson(g, r.op_order), id + " fused");
    // The hfuse rules' groups too: group_gemm_rcr_mixed and its member_ops.
    FuseGroupOpsOptions hfuse = testing::ConformanceOptions(id);
    hfuse.rules = RuleSet::kHfuse;
    const FuseGroupOpsResult rh = FuseGroupOps(h, hfuse);
    ExpectPathsAgree(WriteGraphJson(h, rh.op_order), id + " fused (hfuse rules)");
  }
}

TEST(GraphJsonPaths, RandomGraphs) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    RandomGraphOptions options;
    options.wide = seed % 2 == 0;
    const std::string text = RandomGraphJson(seed, options);
    ExpectPathsAgree(text, fmt::format("random seed {}", seed));
    ExpectPathsAgree(WriteGraphJson(ParseGraphJson(text, "in.json")),
                     fmt::format("rewritten seed {}", seed));
  }
}

// Every object of a document, depth first.
void CollectObjects(Json& v, std::vector<Json*>& out) {
  if (v.is_object()) {
    out.push_back(&v);
    for (auto& [key, value] : v.items()) CollectObjects(value, out);
  } else if (v.is_array()) {
    for (Json& e : v) CollectObjects(e, out);
  }
}

// One mutation of a valid document, in the writer's form again (so that the
// fast path reads it, and gives up or not).
std::string Mutate(const std::string& text, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  Json doc = Json::parse(text);
  std::vector<Json*> objects;
  CollectObjects(doc, objects);
  Json& obj = *objects[pick(objects.size())];
  std::vector<std::string> keys;
  for (auto& [key, value] : obj.items()) keys.push_back(key);
  if (keys.empty()) return text;
  const std::string& key = keys[pick(keys.size())];
  switch (pick(8)) {
    case 0: obj.erase(key); break;
    case 1: obj[key] = obj[keys[pick(keys.size())]]; break;
    case 2: obj[key] = -1; break;
    case 3: obj[key] = 1.5; break;
    case 4: obj[key] = "t0"; break;
    case 5: obj[key] = nullptr; break;
    case 6: obj[key] = Json::array(); break;
    default: obj["extra"] = 1; break;
  }
  // Back to a graph, then to the writer's key order when it still reads.
  const std::string mutated = doc.dump();
  try {
    return WriteGraphJson(ParseGraphJson(mutated, "m.json"));
  } catch (const InputError&) {
    return mutated;
  }
}

TEST(GraphJsonPaths, Mutations) {
  std::vector<std::string> seeds;
  for (const char* id : {"edge/split_feeds_weights", "edge/layernorm_gamma_is_beta",
                         "random/case_3", "ait_tests/group_fusions__gemm_0_float16"}) {
    const std::string path = testing::ConformancePath(id) + ".json";
    if (std::filesystem::exists(path)) seeds.push_back(ReadFile(path));
  }
  {  // a graph with group_gemm_rcr_mixed ops (member_ops mutated too)
    Graph g = ParseGraphJson(ReadFile(testing::ConformancePath("random/case_3") + ".json"), "case_3");
    FuseGroupOpsOptions hfuse;
    hfuse.rules = RuleSet::kHfuse;
    const FuseGroupOpsResult r = FuseGroupOps(g, hfuse);
    seeds.push_back(WriteGraphJson(g, r.op_order));
  }
  for (uint64_t seed = 1; seed <= 8; ++seed) seeds.push_back(RandomGraphJson(seed));
  std::mt19937_64 rng(4242);
  int graphs = 0, errors = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string text =
        WriteGraphJson(ParseGraphJson(seeds[static_cast<size_t>(i) % seeds.size()], "s.json"));
    // Then a small edit of the text itself, now and then: a key renamed or
    // moved, which the fast path must give up on.
    text = Mutate(text, rng);
    if (i % 5 == 0) {
      const size_t at = text.find("\"dtype\"");
      if (at != std::string::npos) text.replace(at, 7, "\"dtypo\"");
    }
    (ExpectPathsAgree(text, fmt::format("mutant {}", i)) ? graphs : errors) += 1;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(graphs, 25) << "mutants that are still graphs";
  EXPECT_GT(errors, 500) << "mutants that are not";
}

}  // namespace
}  // namespace hfuse
