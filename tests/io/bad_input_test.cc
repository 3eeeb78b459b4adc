// Bad input, through the hfuse binary: every class of malformed or invalid
// graph file must give exit status 2 (a normal exit, never a signal), exactly
// one line on stderr, "hfuse: error: ...", that names the file and the
// offending op, tensor or field, and no output: `hfuse fuse IN -o OUT` must
// neither create OUT nor touch an OUT that already exists, and must leave no
// temporary file behind. Most cases are one mutation of a small valid graph
// that uses every plain op type; the rest are raw text or file-system cases.
// A seeded fuzz test then mutates valid graphs at random (a few hundred in
// process through ParseGraphJson, a few dozen through the binary) and allows
// only success or a clean input error.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hfuse/io/graph_json.h"
#include "hfuse/passes/fuse_group_ops.h"
#include "hfuse/support/error.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

using test::Describe;
using test::ExpectInputError;
using test::Quote;
using test::RunTool;
using test::Slurp;
using test::Spit;
using test::TempDir;
using test::ToolRun;

// Feeds `text` to `hfuse fuse` (fresh outputs, then an existing output) and
// to `hfuse check`; every run must fail cleanly naming the file and `needles`.
void ExpectRejected(const std::string& text, std::vector<std::string> needles) {
  TempDir dir;
  const fs::path in = dir / "in.json";
  Spit(in, text);
  needles.insert(needles.begin(), in.string());
  {
    SCOPED_TRACE("fuse -o OUT --report R --dump-dir D");
    const ToolRun run = RunTool(fmt::format("fuse {} -o {} --report {} --dump-dir {}",
                                            Quote(in.string()), Quote((dir / "out.json").string()),
                                            Quote((dir / "report.json").string()),
                                            Quote((dir / "dumps").string())));
    ExpectInputError(run, needles);
    EXPECT_THAT(dir.Listing(), ::testing::ElementsAre("in.json")) << "no output, no temp file";
  }
  {
    SCOPED_TRACE("fuse -o EXISTING");
    const std::string sentinel = "previous contents\n";
    Spit(dir / "existing.json", sentinel);
    const ToolRun run = RunTool(
        fmt::format("fuse {} -o {}", Quote(in.string()), Quote((dir / "existing.json").string())));
    ExpectInputError(run, needles);
    EXPECT_EQ(Slurp(dir / "existing.json"), sentinel);
    EXPECT_THAT(dir.Listing(), ::testing::ElementsAre("existing.json", "in.json"));
  }
  {
    SCOPED_TRACE("check");
    ExpectInputError(RunTool(fmt::format("check {}", Quote(in.string()))), needles);
  }
}

// A valid graph that uses every plain op type:
//   h = gemm_rcr_bias(x, w, b); n = layernorm(h); (s0, s1) = split(n);
//   c = concatenate(s1, s0); e = add(c, h); r = reshape(e)
constexpr const char* kBase = R"({
  "graph_format": 1,
  "name": "base",
  "dims": [{"name": "batch", "min": 1, "max": 64}],
  "tensors": [
    {"name": "x", "shape": ["batch", 8], "dtype": "float16", "role": "input"},
    {"name": "w", "shape": [16, 8], "dtype": "float16", "role": "param"},
    {"name": "b", "shape": [16], "dtype": "float16", "role": "param"},
    {"name": "h", "shape": ["batch", 16], "dtype": "float16"},
    {"name": "gamma", "shape": [16], "dtype": "float16", "role": "param"},
    {"name": "beta", "shape": [16], "dtype": "float16", "role": "param"},
    {"name": "n", "shape": ["batch", 16], "dtype": "float16"},
    {"name": "s0", "shape": ["batch", 6], "dtype": "float16"},
    {"name": "s1", "shape": ["batch", 10], "dtype": "float16"},
    {"name": "c", "shape": ["batch", 16], "dtype": "float16"},
    {"name": "e", "shape": ["batch", 16], "dtype": "float16"},
    {"name": "r", "shape": ["batch", 4, 4], "dtype": "float16"}
  ],
  "ops": [
    {"name": "fc", "op": "gemm_rcr_bias", "inputs": ["x", "w", "b"], "outputs": ["h"],
     "alpha": 1.0},
    {"name": "ln", "op": "layernorm", "inputs": ["h", "gamma", "beta"], "outputs": ["n"],
     "normalized_shape": [16], "eps": 1e-5},
    {"name": "sp", "op": "split", "inputs": ["n"], "outputs": ["s0", "s1"], "split_sizes": [6, 10],
     "dim": 1},
    {"name": "cat", "op": "concatenate", "inputs": ["s1", "s0"], "outputs": ["c"], "dim": -1},
    {"name": "add", "op": "elementwise", "inputs": ["c", "h"], "outputs": ["e"], "func": "add"},
    {"name": "rs", "op": "reshape", "inputs": ["e"], "outputs": ["r"], "shape": [-1, 4, 4]}
  ],
  "outputs": ["r"]
})";
// Indices into kBase.
enum { kX, kW, kB, kH, kGamma, kBeta, kN, kS0, kS1, kC, kE, kR };
enum { kFc, kLn, kSp, kCat, kAdd, kRs };

// kBase with `mutate` applied; a string value "@RAW:<text>@" is written as
// <text> verbatim, for numbers that a JSON library cannot hold.
std::string Mutated(const std::function<void(Json&)>& mutate) {
  Json doc = Json::parse(kBase);
  mutate(doc);
  std::string text = doc.dump(1);
  for (size_t at; (at = text.find("\"@RAW:")) != std::string::npos;) {
    const size_t end = text.find("@\"", at);
    text.replace(at, end + 2 - at, text.substr(at + 6, end - at - 6));
  }
  return text;
}

Json Tensor(const std::string& name, Json shape, const char* role = nullptr) {
  Json t = {{"name", name}, {"shape", std::move(shape)}, {"dtype", "float16"}};
  if (role) t["role"] = role;
  return t;
}
Json Relu(const std::string& name, Json inputs, Json outputs) {
  return {{"name", name}, {"op", "elementwise"}, {"inputs", std::move(inputs)},
          {"outputs", std::move(outputs)}, {"func", "relu"}};
}

struct BadCase {
  const char* name;
  std::function<std::string()> text;
  std::vector<std::string> needles;  // besides the file name
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

std::string PrintCaseName(const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; }

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, ExitsTwoWithOneLineNamingTheProblem) {
  const BadCase& c = GetParam();
  ExpectRejected(c.text(), c.needles);
}

std::string Raw(std::string text) { return text; }
auto M(std::function<void(Json&)> f) {
  return [f = std::move(f)] { return Mutated(f); };
}

TEST(BadInputBaseTest, TheBaseGraphIsValid) {
  TempDir dir;
  Spit(dir / "in.json", kBase);
  const ToolRun run = RunTool(fmt::format("fuse {} -o {}", Quote((dir / "in.json").string()),
                                          Quote((dir / "out.json").string())));
  EXPECT_EQ(run.status, 0) << Describe(run);
  EXPECT_TRUE(fs::exists(dir / "out.json"));
  EXPECT_EQ(Mutated([](Json&) {}), Json::parse(kBase).dump(1));
}

// kBase with the byte at `at` replaced.
std::string WithByte(size_t at, char byte) {
  std::string s = kBase;
  s[at] = byte;
  return s;
}

const std::string kTruncated = std::string(kBase).substr(0, std::string(kBase).size() / 2);

INSTANTIATE_TEST_SUITE_P(
    Json, BadInputTest,
    ::testing::Values(
        BadCase{"Truncated", [] { return kTruncated; }, {"malformed JSON"}},
        BadCase{"TruncatedInString", [] { return std::string(kBase).substr(0, 60); },
                {"malformed JSON"}},
        BadCase{"TrailingGarbage", [] { return fmt::format("{} }}", kBase); }, {"malformed JSON"}},
        BadCase{"TwoDocuments", [] { return fmt::format("{}{}", kBase, kBase); },
                {"malformed JSON"}},
        BadCase{"EmptyFile", [] { return Raw(""); }, {"the file is empty"}},
        BadCase{"OnlyWhitespace", [] { return Raw(" \n\t\n"); }, {"the file is empty"}},
        BadCase{"NotAnObjectArray", [] { return Raw("[1, 2]"); }, {"top level must be an object"}},
        BadCase{"NotAnObjectNumber", [] { return Raw("1"); }, {"top level must be an object"}},
        BadCase{"NotAnObjectNull", [] { return Raw("null"); }, {"top level must be an object"}},
        BadCase{"InvalidUtf8", [] { return WithByte(40, '\xff'); },
                {"malformed JSON"}},
        BadCase{"NulByte", [] { return WithByte(40, '\0'); },
                {"malformed JSON"}},
        BadCase{"SingleQuotes", [] { return Raw("{'graph_format': 1}"); }, {"malformed JSON"}},
        BadCase{"Comment", [] { return fmt::format("// a graph\n{}", kBase); }, {"malformed JSON"}},
        BadCase{"NumberBeyondDouble",
                M([](Json& j) { j["ops"][kFc]["alpha"] = "@RAW:1e400@"; }),
                {"malformed JSON", "1e400"}},
        BadCase{"DeeplyNestedValue",
                [] {
                  return fmt::format(R"({{"graph_format": {}{}}})", std::string(300000, '['),
                                     std::string(300000, ']'));
                },
                {"graph_format must be 1", "array"}},
        BadCase{"DeeplyNestedUnclosed",
                [] { return fmt::format(R"({{"graph_format": {})", std::string(300000, '[')); },
                {"malformed JSON"}}),
    PrintCaseName);

INSTANTIATE_TEST_SUITE_P(
    TopLevel, BadInputTest,
    ::testing::Values(
        BadCase{"GraphFormat2", M([](Json& j) { j["graph_format"] = 2; }), {"graph_format", "2"}},
        BadCase{"GraphFormatString", M([](Json& j) { j["graph_format"] = "1"; }),
                {"graph_format", "\"1\""}},
        BadCase{"GraphFormatFloat", M([](Json& j) { j["graph_format"] = 1.5; }),
                {"graph_format", "1.5"}},
        BadCase{"GraphFormatMissing", M([](Json& j) { j.erase("graph_format"); }),
                {"missing key 'graph_format'"}},
        BadCase{"UnknownTopLevelKey", M([](Json& j) { j["version"] = 1; }),
                {"the top level", "unknown key 'version'"}},
        BadCase{"NameNotAString", M([](Json& j) { j["name"] = 7; }), {"name", "string"}},
        BadCase{"TensorsMissing", M([](Json& j) { j.erase("tensors"); }),
                {"missing key 'tensors'"}},
        BadCase{"TensorsNotAnArray", M([](Json& j) { j["tensors"] = Json::object(); }),
                {"tensors must be an array"}},
        BadCase{"OpsNotAnArray", M([](Json& j) { j["ops"] = "fc"; }), {"ops must be an array"}},
        BadCase{"OutputsMissing", M([](Json& j) { j.erase("outputs"); }),
                {"missing key 'outputs'"}},
        BadCase{"DimsNotAnArray", M([](Json& j) { j["dims"] = 3; }), {"dims must be an array"}},
        BadCase{"EmptyGraph", M([](Json& j) { j["ops"] = Json::array(); }), {"no ops"}},
        BadCase{"EmptyEverything",
                [] {
                  return Raw(R"({"graph_format": 1, "tensors": [], "ops": [], "outputs": []})");
                },
                {"no ops"}},
        BadCase{"NoOutputs", M([](Json& j) { j["outputs"] = Json::array(); }),
                {"outputs", "no outputs"}},
        BadCase{"OutputNotATensor", M([](Json& j) { j["outputs"] = {"r", "ghost"}; }),
                {"outputs", "'ghost'", "not declared"}},
        BadCase{"OutputNotAString", M([](Json& j) { j["outputs"] = {3}; }),
                {"outputs", "string"}},
        BadCase{"DuplicateOutput", M([](Json& j) { j["outputs"] = {"r", "h", "r"}; }),
                {"outputs", "'r'", "twice"}}),
    PrintCaseName);

INSTANTIATE_TEST_SUITE_P(
    Tensors, BadInputTest,
    ::testing::Values(
        BadCase{"UnknownTensorKey", M([](Json& j) { j["tensors"][kH]["layout"] = "nhwc"; }),
                {"tensor 'h'", "unknown key 'layout'"}},
        BadCase{"UnknownDtype", M([](Json& j) { j["tensors"][kX]["dtype"] = "float64"; }),
                {"tensor 'x'", "dtype", "'float64'"}},
        BadCase{"DtypeNotAString", M([](Json& j) { j["tensors"][kX]["dtype"] = 16; }),
                {"tensor 'x'", "dtype"}},
        BadCase{"MissingDtype", M([](Json& j) { j["tensors"][kX].erase("dtype"); }),
                {"tensor 'x'", "missing key 'dtype'"}},
        BadCase{"UnknownRole", M([](Json& j) { j["tensors"][kW]["role"] = "weight"; }),
                {"tensor 'w'", "role", "'weight'"}},
        BadCase{"RoleNull", M([](Json& j) { j["tensors"][kW]["role"] = nullptr; }),
                {"tensor 'w'", "role"}},
        BadCase{"ShapeNotAnArray", M([](Json& j) { j["tensors"][kW]["shape"] = 16; }),
                {"tensor 'w'", "shape", "array"}},
        BadCase{"ShapeEntryFloat", M([](Json& j) { j["tensors"][kW]["shape"] = {16, 8.5}; }),
                {"tensor 'w'", "shape", "8.5"}},
        BadCase{"ShapeEntryBool", M([](Json& j) { j["tensors"][kW]["shape"] = {16, true}; }),
                {"tensor 'w'", "shape", "true"}},
        BadCase{"NegativeStaticDim", M([](Json& j) { j["tensors"][kW]["shape"] = {-16, 8}; }),
                {"tensor 'w'", "-16", "negative"}},
        BadCase{"HugeDimBeyondInt64",
                M([](Json& j) { j["tensors"][kW]["shape"] = {"@RAW:9223372036854775808@", 8}; }),
                {"tensor 'w'", "shape", "too large", "9223372036854775808"}},
        BadCase{"HugeDimBeyondUint64",
                M([](Json& j) {
                  j["tensors"][kW]["shape"] = {"@RAW:123456789012345678901234@", 8};
                }),
                {"tensor 'w'", "shape", "integer"}},
        BadCase{"HugeButValidDimsStillChecked",
                M([](Json& j) { j["tensors"][kW]["shape"] = {"@RAW:9223372036854775807@", 8}; }),
                {"op 'fc'", "bias 'b'", "[9223372036854775807]"}},
        BadCase{"UnknownDimName", M([](Json& j) { j["tensors"][kX]["shape"] = {"batchh", 8}; }),
                {"tensor 'x'", "'batchh'", "not in dims"}},
        BadCase{"DuplicateTensor", M([](Json& j) { j["tensors"].push_back(j["tensors"][kH]); }),
                {"tensor 'h'", "declared twice"}},
        BadCase{"EmptyTensorName", M([](Json& j) { j["tensors"][kC]["name"] = ""; }),
                {"tensors[9]", "empty"}},
        BadCase{"TensorNameMissing", M([](Json& j) { j["tensors"][kC].erase("name"); }),
                {"tensors[9]", "missing key 'name'"}},
        BadCase{"TensorNotAnObject", M([](Json& j) { j["tensors"][kC] = "c"; }),
                {"tensors[9]", "object"}},
        BadCase{"TensorNameWithNewline",
                M([](Json& j) {
                  j["tensors"][kC]["name"] = "two\nlines";
                  j["tensors"][kE]["name"] = "two\nlines";
                }),
                {"two\\x0alines", "declared twice"}},
        BadCase{"IntermediateWithoutProducer",
                M([](Json& j) { j["tensors"].push_back(Tensor("orphan", {4})); }),
                {"tensor 'orphan'", "no role", "no op produces it"}}),
    PrintCaseName);

INSTANTIATE_TEST_SUITE_P(
    Dims, BadInputTest,
    ::testing::Values(
        BadCase{"MinAboveMax",
                M([](Json& j) { j["dims"][0] = {{"name", "batch"}, {"min", 9}, {"max", 2}}; }),
                {"dim 'batch'", "min"}},
        BadCase{"NegativeMin",
                M([](Json& j) { j["dims"][0] = {{"name", "batch"}, {"min", -1}, {"max", 2}}; }),
                {"dim 'batch'", "min -1"}},
        BadCase{"NegativeMax",
                M([](Json& j) { j["dims"][0] = {{"name", "batch"}, {"min", -3}, {"max", -1}}; }),
                {"dim 'batch'"}},
        BadCase{"DuplicateDim", M([](Json& j) { j["dims"].push_back(j["dims"][0]); }),
                {"dim 'batch'", "twice"}},
        BadCase{"MissingMax", M([](Json& j) { j["dims"][0].erase("max"); }),
                {"dim 'batch'", "missing key 'max'"}},
        BadCase{"MinNotAnInteger", M([](Json& j) { j["dims"][0]["min"] = "1"; }),
                {"dim 'batch'", "min"}},
        BadCase{"UnknownDimKey", M([](Json& j) { j["dims"][0]["step"] = 8; }),
                {"dim 'batch'", "unknown key 'step'"}},
        BadCase{"EmptyDimName", M([](Json& j) { j["dims"][0]["name"] = ""; }),
                {"dims[0]", "empty"}},
        BadCase{"DimNotAnObject", M([](Json& j) { j["dims"][0] = "batch"; }),
                {"dims[0]", "object"}}),
    PrintCaseName);

INSTANTIATE_TEST_SUITE_P(
    Ops, BadInputTest,
    ::testing::Values(
        BadCase{"UnknownOpType", M([](Json& j) { j["ops"][kAdd]["op"] = "matmul"; }),
                {"op 'add'", "unknown op type 'matmul'"}},
        BadCase{"OpTypeMissing", M([](Json& j) { j["ops"][kAdd].erase("op"); }),
                {"op 'add'", "missing key 'op'"}},
        BadCase{"UnknownOpKey", M([](Json& j) { j["ops"][kFc]["eps"] = 1e-5; }),
                {"op 'fc'", "unknown key 'eps'"}},
        BadCase{"UnknownAttributeOfGroupOp",
                M([](Json& j) { j["ops"][kLn]["group_size"] = 2; }),
                {"op 'ln'", "unknown key 'group_size'"}},
        BadCase{"BadElementwiseFunc", M([](Json& j) { j["ops"][kAdd]["func"] = "pow"; }),
                {"op 'add'", "func", "'pow'"}},
        BadCase{"AlphaAsString", M([](Json& j) { j["ops"][kFc]["alpha"] = "1.0"; }),
                {"op 'fc'", "alpha", "number"}},
        BadCase{"AlphaNull", M([](Json& j) { j["ops"][kFc]["alpha"] = nullptr; }),
                {"op 'fc'", "alpha"}},
        BadCase{"EpsAsBool", M([](Json& j) { j["ops"][kLn]["eps"] = true; }),
                {"op 'ln'", "eps"}},
        BadCase{"DimAsFloat", M([](Json& j) { j["ops"][kSp]["dim"] = 1.0; }),
                {"op 'sp'", "dim", "integer"}},
        BadCase{"DimAsString", M([](Json& j) { j["ops"][kCat]["dim"] = "-1"; }),
                {"op 'cat'", "dim"}},
        BadCase{"NormalizedShapeNotAnArray",
                M([](Json& j) { j["ops"][kLn]["normalized_shape"] = 16; }),
                {"op 'ln'", "normalized_shape", "array"}},
        BadCase{"SplitSizesEntryString",
                M([](Json& j) { j["ops"][kSp]["split_sizes"] = {6, "10"}; }),
                {"op 'sp'", "split_sizes"}},
        BadCase{"ReshapeShapeNested",
                M([](Json& j) { j["ops"][kRs]["shape"] = {{-1}, 4, 4}; }),
                {"op 'rs'", "shape"}},
        BadCase{"MissingNormalizedShape",
                M([](Json& j) { j["ops"][kLn].erase("normalized_shape"); }),
                {"op 'ln'", "missing key 'normalized_shape'"}},
        BadCase{"MissingSplitSizes", M([](Json& j) { j["ops"][kSp].erase("split_sizes"); }),
                {"op 'sp'", "missing key 'split_sizes'"}},
        BadCase{"MissingSplitDim", M([](Json& j) { j["ops"][kSp].erase("dim"); }),
                {"op 'sp'", "missing key 'dim'"}},
        BadCase{"MissingConcatDim", M([](Json& j) { j["ops"][kCat].erase("dim"); }),
                {"op 'cat'", "missing key 'dim'"}},
        BadCase{"MissingFunc", M([](Json& j) { j["ops"][kAdd].erase("func"); }),
                {"op 'add'", "missing key 'func'"}},
        BadCase{"MissingReshapeShape", M([](Json& j) { j["ops"][kRs].erase("shape"); }),
                {"op 'rs'", "missing key 'shape'"}},
        BadCase{"MissingInputs", M([](Json& j) { j["ops"][kFc].erase("inputs"); }),
                {"op 'fc'", "missing key 'inputs'"}},
        BadCase{"MissingOutputs", M([](Json& j) { j["ops"][kFc].erase("outputs"); }),
                {"op 'fc'", "missing key 'outputs'"}},
        BadCase{"InputsNotAnArray", M([](Json& j) { j["ops"][kFc]["inputs"] = "x"; }),
                {"op 'fc'", "inputs", "array"}},
        BadCase{"InputNotAString", M([](Json& j) { j["ops"][kFc]["inputs"] = {"x", 1, "b"}; }),
                {"op 'fc'", "input", "string"}},
        BadCase{"NullInputOfGemm",
                M([](Json& j) { j["ops"][kFc]["inputs"] = {"x", "w", nullptr}; }),
                {"op 'fc'", "input"}},
        BadCase{"NullXOfLayerNorm",
                M([](Json& j) { j["ops"][kLn]["inputs"] = {nullptr, "gamma", "beta"}; }),
                {"op 'ln'", "input"}},
        BadCase{"LayerNormFourInputs",
                M([](Json& j) { j["ops"][kLn]["inputs"] = {"h", "gamma", "beta", "beta"}; }),
                {"op 'ln'", "1 to 3 inputs"}},
        BadCase{"GemmMissingBias", M([](Json& j) { j["ops"][kFc]["inputs"] = {"x", "w"}; }),
                {"op 'fc'", "takes 3 inputs, got 2"}},
        BadCase{"MissingInputTensor", M([](Json& j) { j["ops"][kAdd]["inputs"] = {"c", "ghost"}; }),
                {"op 'add'", "'ghost'", "not declared"}},
        BadCase{"MissingOutputTensor", M([](Json& j) { j["ops"][kAdd]["outputs"] = {"ghost"}; }),
                {"op 'add'", "'ghost'", "not declared"}},
        BadCase{"DuplicateOpName", M([](Json& j) { j["ops"][kRs]["name"] = "fc"; }),
                {"op 'fc'", "declared twice"}},
        BadCase{"CopiedOp", M([](Json& j) { j["ops"].push_back(j["ops"][kAdd]); }),
                {"op 'add'", "declared twice"}},
        BadCase{"EmptyOpName", M([](Json& j) { j["ops"][kCat]["name"] = ""; }),
                {"ops[3]", "empty"}},
        BadCase{"OpNameMissing", M([](Json& j) { j["ops"][kCat].erase("name"); }),
                {"ops[3]", "missing key 'name'"}},
        BadCase{"OpNotAnObject", M([](Json& j) { j["ops"][kCat] = Json::array(); }),
                {"ops[3]", "object"}},
        BadCase{"TensorWithTwoProducers", M([](Json& j) { j["ops"][kRs]["outputs"] = {"e"}; }),
                {"op 'rs'", "'e'", "already produced by op 'add'"}},
        BadCase{"OutputListedTwice", M([](Json& j) { j["ops"][kSp]["outputs"] = {"s0", "s0"}; }),
                {"op 'sp'", "'s0'", "twice"}},
        BadCase{"OpProducesAnInput", M([](Json& j) { j["ops"][kRs]["outputs"] = {"x"}; }),
                {"op 'rs'", "'x'", "input"}},
        BadCase{"OpProducesAParam", M([](Json& j) { j["ops"][kRs]["outputs"] = {"w"}; }),
                {"op 'rs'", "'w'", "param"}},
        BadCase{"TwoOpCycle",
                M([](Json& j) {
                  j["tensors"].push_back(Tensor("p", {4}));
                  j["tensors"].push_back(Tensor("q", {4}));
                  j["ops"].push_back(Relu("cyc_a", {"q"}, {"p"}));
                  j["ops"].push_back(Relu("cyc_b", {"p"}, {"q"}));
                }),
                {"cycle", "op 'cyc_"}},
        BadCase{"CycleBelowOtherOps",
                M([](Json& j) {
                  // "below" reads the cycle and comes first; the message must
                  // name an op that is on the cycle.
                  j["tensors"].push_back(Tensor("p", {4}));
                  j["tensors"].push_back(Tensor("q", {4}));
                  j["tensors"].push_back(Tensor("t", {4}));
                  const Json base_ops = j["ops"];
                  j["ops"] = Json::array({Relu("below", {"q"}, {"t"})});
                  for (const Json& op : base_ops) j["ops"].push_back(op);
                  j["ops"].push_back(Relu("cyc_a", {"q"}, {"p"}));
                  j["ops"].push_back(Relu("cyc_b", {"p"}, {"q"}));
                }),
                {"cycle", "op 'cyc_"}},
        BadCase{"SelfLoop",
                M([](Json& j) {
                  j["tensors"].push_back(Tensor("p", {4}));
                  j["ops"].push_back(Relu("loop", {"p"}, {"p"}));
                }),
                {"cycle through op 'loop'"}}),
    PrintCaseName);

INSTANTIATE_TEST_SUITE_P(
    Shapes, BadInputTest,
    ::testing::Values(
        BadCase{"GemmKMismatch", M([](Json& j) { j["tensors"][kW]["shape"] = {16, 9}; }),
                {"op 'fc'", "K mismatch", "'x'", "'w'"}},
        BadCase{"GemmDtypeMismatch", M([](Json& j) { j["tensors"][kW]["dtype"] = "float32"; }),
                {"op 'fc'", "'w'", "float32"}},
        BadCase{"GemmBiasWrongSize", M([](Json& j) { j["tensors"][kB]["shape"] = {15}; }),
                {"op 'fc'", "bias 'b'", "[16]", "[15]"}},
        BadCase{"GemmBiasWrongRank", M([](Json& j) { j["tensors"][kB]["shape"] = {1, 16}; }),
                {"op 'fc'", "bias 'b'"}},
        BadCase{"GemmOutputWrongShape",
                M([](Json& j) { j["tensors"][kH]["shape"] = {"batch", 17}; }),
                {"op 'fc'", "output 'h'", "[batch, 17]", "[batch, 16]"}},
        BadCase{"GemmOutputWrongDtype", M([](Json& j) { j["tensors"][kH]["dtype"] = "bfloat16"; }),
                {"op 'fc'", "output 'h'", "bfloat16"}},
        BadCase{"GemmRankOneA", M([](Json& j) { j["tensors"][kX]["shape"] = {8}; }),
                {"op 'fc'", "'x'", "rank"}},
        BadCase{"GemmDynamicK",
                M([](Json& j) {
                  j["tensors"][kX]["shape"] = {"batch", "batch"};
                  j["tensors"][kW]["shape"] = {16, "batch"};
                }),
                {"op 'fc'", "K mismatch"}},
        BadCase{"LayerNormNormalizedShapeMismatch",
                M([](Json& j) { j["ops"][kLn]["normalized_shape"] = {8}; }),
                {"op 'ln'", "normalized_shape"}},
        BadCase{"LayerNormNormalizedShapeTooLong",
                M([](Json& j) { j["ops"][kLn]["normalized_shape"] = {4, 16}; }),
                {"op 'ln'", "normalized_shape"}},
        BadCase{"LayerNormNormalizedShapeEmpty",
                M([](Json& j) { j["ops"][kLn]["normalized_shape"] = Json::array(); }),
                {"op 'ln'", "normalized_shape"}},
        BadCase{"GammaWrongShape", M([](Json& j) { j["tensors"][kGamma]["shape"] = {8}; }),
                {"op 'ln'", "'gamma'", "[8]"}},
        BadCase{"GammaWrongDtype", M([](Json& j) { j["tensors"][kGamma]["dtype"] = "float32"; }),
                {"op 'ln'", "'gamma'", "float32"}},
        BadCase{"BetaWrongShape", M([](Json& j) { j["tensors"][kBeta]["shape"] = {1, 16}; }),
                {"op 'ln'", "'beta'"}},
        BadCase{"LayerNormOutputWrongShape",
                M([](Json& j) { j["tensors"][kN]["shape"] = {"batch", 15}; }),
                {"op 'ln'", "output 'n'"}},
        BadCase{"SplitSizesNotSumming", M([](Json& j) { j["ops"][kSp]["split_sizes"] = {6, 9}; }),
                {"op 'sp'", "split_sizes sum to 15", "16"}},
        BadCase{"SplitSizesOverflow",
                M([](Json& j) {
                  j["ops"][kSp]["split_sizes"] = {"@RAW:9223372036854775807@",
                                                  "@RAW:9223372036854775807@", 18};
                  j["ops"][kSp]["outputs"] = {"s0", "s1", "t"};
                  j["tensors"].push_back(Tensor("t", {"batch", 18}));
                }),
                {"op 'sp'", "split_sizes"}},
        BadCase{"SplitSizesNegative", M([](Json& j) { j["ops"][kSp]["split_sizes"] = {22, -6}; }),
                {"op 'sp'", "negative"}},
        BadCase{"SplitSizesCountNotOutputs",
                M([](Json& j) { j["ops"][kSp]["split_sizes"] = {6, 5, 5}; }),
                {"op 'sp'", "3 split_sizes but 2 outputs"}},
        BadCase{"SplitOutputShape",
                M([](Json& j) { j["tensors"][kS1]["shape"] = {"batch", 11}; }),
                {"op 'sp'", "output 's1'", "[batch, 10]"}},
        BadCase{"SplitOnDynamicDim", M([](Json& j) { j["ops"][kSp]["dim"] = 0; }),
                {"op 'sp'", "not static"}},
        BadCase{"SplitDimOutOfRange", M([](Json& j) { j["ops"][kSp]["dim"] = 2; }),
                {"op 'sp'", "dim 2", "out of range"}},
        BadCase{"ConcatMismatchedDims", M([](Json& j) { j["ops"][kCat]["dim"] = 0; }),
                {"op 'cat'", "'s0'", "does not match"}},
        BadCase{"ConcatMismatchedRanks",
                M([](Json& j) {
                  j["tensors"].push_back(Tensor("t3", {"batch", 2, 5}, "input"));
                  j["ops"][kCat]["inputs"] = {"s1", "t3"};
                }),
                {"op 'cat'", "rank"}},
        BadCase{"ConcatDimOutOfRange", M([](Json& j) { j["ops"][kCat]["dim"] = -3; }),
                {"op 'cat'", "dim -3", "out of range"}},
        BadCase{"ConcatOutputShape", M([](Json& j) { j["ops"][kCat]["inputs"] = {"s1", "s1"}; }),
                {"op 'cat'", "output 'c'", "[batch, 20]"}},
        BadCase{"ElementwiseNotBroadcastable",
                M([](Json& j) { j["ops"][kAdd]["inputs"] = {"c", "s0"}; }),
                {"op 'add'", "'s0'", "broadcast"}},
        BadCase{"ElementwiseMixedDtypes",
                M([](Json& j) {
                  j["tensors"].push_back(
                      {{"name", "f32"}, {"shape", {16}}, {"dtype", "float32"}, {"role", "param"}});
                  j["ops"][kAdd]["inputs"] = {"c", "f32"};
                }),
                {"op 'add'", "float16", "float32"}},
        BadCase{"ElementwiseUnaryTwoInputs",
                M([](Json& j) { j["ops"][kAdd]["func"] = "relu"; }),
                {"op 'add'", "relu takes 1 input, got 2"}},
        BadCase{"ElementwiseBinaryOneInput",
                M([](Json& j) { j["ops"][kAdd]["inputs"] = {"c"}; }),
                {"op 'add'", "add takes at least 2 inputs"}},
        BadCase{"ElementwiseOutputShape", M([](Json& j) { j["tensors"][kE]["shape"] = {1, 16}; }),
                {"op 'add'", "output 'e'"}},
        BadCase{"ReshapeElementCount",
                M([](Json& j) {
                  j["ops"][kRs]["shape"] = {-1, 4, 5};
                  j["tensors"][kR]["shape"] = {"batch", 4, 5};
                }),
                {"op 'rs'", "number of elements"}},
        BadCase{"ReshapeTwoMinusOnes", M([](Json& j) { j["ops"][kRs]["shape"] = {-1, -1, 4}; }),
                {"op 'rs'", "more than one -1"}},
        BadCase{"ReshapeShapeDisagreesWithOutput",
                M([](Json& j) { j["ops"][kRs]["shape"] = {-1, 2, 8}; }),
                {"op 'rs'", "output 'r'"}},
        BadCase{"ReshapeHugeDimsWrapToZero",
                [] {
                  return Raw(R"({"graph_format": 1,
                    "tensors": [{"name": "x", "shape": [4294967296, 4294967296], "dtype": "float16",
                                 "role": "input"},
                                {"name": "y", "shape": [0], "dtype": "float16"}],
                    "ops": [{"name": "rs", "op": "reshape", "inputs": ["x"], "outputs": ["y"],
                             "shape": [0]}],
                    "outputs": ["y"]})");
                },
                {"op 'rs'"}},
        BadCase{"GroupGemmWrongGroupSize",
                [] {
                  return Raw(R"({"graph_format": 1,
                    "tensors": [{"name": "a", "shape": [4, 8], "dtype": "float16", "role": "input"},
                                {"name": "w", "shape": [2, 8], "dtype": "float16", "role": "param"},
                                {"name": "y0", "shape": [4, 2], "dtype": "float16"},
                                {"name": "y1", "shape": [4, 2], "dtype": "float16"}],
                    "ops": [{"name": "gg", "op": "group_gemm_rcr", "inputs": ["a", "w", "a", "w"],
                             "outputs": ["y0", "y1"], "group_size": 3}],
                    "outputs": ["y0", "y1"]})");
                },
                {"op 'gg'", "group_size 3"}},
        BadCase{"GroupLayerNormShapesCount",
                [] {
                  return Raw(R"({"graph_format": 1,
                    "tensors": [{"name": "a", "shape": [4, 8], "dtype": "float16", "role": "input"},
                                {"name": "y0", "shape": [4, 8], "dtype": "float16"},
                                {"name": "y1", "shape": [4, 8], "dtype": "float16"}],
                    "ops": [{"name": "gl", "op": "group_layernorm", "inputs": ["a", "a"],
                             "outputs": ["y0", "y1"], "normalized_shapes": [[8]]}],
                    "outputs": ["y0", "y1"]})");
                },
                {"op 'gl'", "normalized_shapes"}}),
    PrintCaseName);

// File-system cases: the input is not a readable file.
TEST(BadInputFileTest, MissingFile) {
  TempDir dir;
  const std::string in = (dir / "no_such.json").string();
  const std::string out = (dir / "out.json").string();
  ExpectInputError(RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote(out))),
                        {in, "cannot open"});
  EXPECT_THAT(dir.Listing(), ::testing::IsEmpty());
  ExpectInputError(RunTool(fmt::format("check {}", Quote(in))), {in, "cannot open"});
}

TEST(BadInputFileTest, DirectoryAsInput) {
  TempDir dir;
  fs::create_directories(dir / "graph.json");
  const std::string in = (dir / "graph.json").string();
  const std::string out = (dir / "out.json").string();
  ExpectInputError(RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote(out))),
                        {in, "directory"});
  EXPECT_THAT(dir.Listing(), ::testing::ElementsAre("graph.json"));
  ExpectInputError(RunTool(fmt::format("check {}", Quote(in))), {in, "directory"});
}

TEST(BadInputFileTest, NameTooLong) {
  TempDir dir;
  const std::string in = (dir / std::string(5000, 'a')).string();
  ExpectInputError(RunTool(fmt::format("check {}", Quote(in))), {"cannot open"});
}

TEST(BadInputFileTest, FileInPlaceOfADirectory) {
  TempDir dir;
  Spit(dir / "file", "x");
  const std::string in = (dir / "file" / "graph.json").string();
  ExpectInputError(RunTool(fmt::format("check {}", Quote(in))), {in, "cannot open"});
}

// An output that cannot be written: a clean error, and no temp file left.
TEST(BadInputFileTest, UnwritableOutput) {
  TempDir dir;
  Spit(dir / "in.json", kBase);
  fs::create_directories(dir / "out_is_a_dir");
  const std::string in = (dir / "in.json").string();
  ExpectInputError(
      RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote((dir / "out_is_a_dir").string()))),
      {(dir / "out_is_a_dir").string(), "cannot write"});
  ExpectInputError(
      RunTool(fmt::format("fuse {} -o {}", Quote(in), Quote((dir / "no" / "out.json").string()))),
      {(dir / "no" / "out.json").string(), "cannot write"});
  EXPECT_THAT(dir.Listing(), ::testing::ElementsAre("in.json", "out_is_a_dir"));
  EXPECT_TRUE(fs::is_empty(dir / "out_is_a_dir"));
}

// A report or dump directory that cannot be written fails before the output is.
TEST(BadInputFileTest, UnwritableReportOrDumpDirLeavesNoOutput) {
  TempDir dir;
  Spit(dir / "in.json", kBase);
  Spit(dir / "file", "x");
  const std::string in = (dir / "in.json").string();
  const std::string out = (dir / "out.json").string();
  ExpectInputError(RunTool(fmt::format("fuse {} -o {} --report {}", Quote(in), Quote(out),
                                            Quote((dir / "file" / "r.json").string()))),
                        {"r.json", "cannot write"});
  ExpectInputError(RunTool(fmt::format("fuse {} -o {} --dump-dir {}", Quote(in), Quote(out),
                                            Quote((dir / "file" / "dumps").string()))),
                        {"dumps", "cannot create directory"});
  EXPECT_THAT(dir.Listing(), ::testing::ElementsAre("file", "in.json"));
}

// ---- Fuzz: random mutations of valid graphs -------------------------------

// Every object of a document, depth first, with its JSON pointer (pointers
// stay valid while no container above them changes size).
void CollectObjects(Json& v, const std::string& path,
                    std::vector<std::pair<Json*, std::string>>& out) {
  if (v.is_object()) {
    out.emplace_back(&v, path);
    for (auto it = v.begin(); it != v.end(); ++it) CollectObjects(*it, path + "/" + it.key(), out);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) CollectObjects(v[i], fmt::format("{}/{}", path, i), out);
  }
}

// One random mutation of `text`: delete, flip or set a character, truncate,
// or (when it parses) swap the values of two keys of one object, or of one
// key between two objects.
std::string Mutate(const std::string& text, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  std::string s = text;
  if (s.empty()) return s;
  switch (pick(6)) {
    case 0: s.erase(pick(s.size()), 1); return s;
    case 1: s[pick(s.size())] = static_cast<char>(pick(256)); return s;
    case 2: s[pick(s.size())] = "{}[],:\"0123456789-.eE ntf"[pick(25)]; return s;
    case 3: s.resize(pick(s.size())); return s;
    default: break;
  }
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return s.substr(0, pick(s.size()));
  std::vector<std::pair<Json*, std::string>> objects;
  CollectObjects(doc, "", objects);
  const auto& [a, path_a] = objects[pick(objects.size())];
  if (a->empty()) return doc.dump();
  std::vector<std::string> keys;
  for (auto it = a->begin(); it != a->end(); ++it) keys.push_back(it.key());
  const std::string k1 = keys[pick(keys.size())];
  const auto& [b, path_b] = objects[pick(objects.size())];
  // Within one object; or across two objects neither of which holds the other.
  const bool nested = path_a.starts_with(path_b + "/") || path_b.starts_with(path_a + "/");
  if (pick(2) == 0 || a == b || nested) {
    const std::string k2 = keys[pick(keys.size())];
    Json tmp = (*a)[k1];
    (*a)[k1] = (*a)[k2];
    (*a)[k2] = std::move(tmp);
  } else if (b->contains(k1)) {
    Json tmp = (*a)[k1];
    (*a)[k1] = (*b)[k1];
    (*b)[k1] = std::move(tmp);
  } else {
    (*b)[k1] = (*a)[k1];
  }
  return doc.dump(pick(2) ? -1 : 1);
}

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds = {kBase};
  for (const char* path : {"conformance/edge/split_feeds_weights.json",
                           "conformance/edge/layernorm_gamma_is_beta.json",
                           "conformance/random/case_3.json",
                           "conformance/ait_tests/group_fusions__gemm_0_float16.json",
                           "conformance/ait_tests/strided_group_gemm__0_prefused.json"}) {
    const fs::path p = fs::path(HFUSE_SHARED_DIR) / path;
    if (fs::exists(p)) seeds.push_back(Slurp(p));
  }
  return seeds;
}

TEST(BadInputFuzzTest, InProcessMutationsParseOrFailCleanly) {
  const std::vector<std::string> seeds = FuzzSeeds();
  ASSERT_GE(seeds.size(), 4u);
  std::mt19937_64 rng(20240601);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 600; ++i) {
    std::string text = seeds[static_cast<size_t>(i) % seeds.size()];
    const int rounds = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < rounds; ++r) text = Mutate(text, rng);
    try {
      Graph g = ParseGraphJson(text, "mutant.json");
      ++accepted;
      // What the reader accepts the pass and the writer must handle.
      const FuseGroupOpsResult result = FuseGroupOps(g);
      const std::string written = WriteGraphJson(g, result.op_order);
      EXPECT_NO_THROW(ParseGraphJson(written, "rewritten.json")) << "mutant " << i;
    } catch (const InputError& e) {
      ++rejected;
      const std::string message = e.what();
      EXPECT_THAT(message, StartsWith("mutant.json: ")) << "mutant " << i;
      EXPECT_EQ(message.find('\n'), std::string::npos) << "mutant " << i << ": " << message;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << i << " threw a non-input error: " << e.what() << "\n" << text;
    }
  }
  EXPECT_GT(rejected, 300);
  EXPECT_GT(accepted, 5) << "some mutations (e.g. swapped names) are still valid graphs";
}

TEST(BadInputFuzzTest, BinaryExitsZeroOrTwoNeverASignal) {
  const std::vector<std::string> seeds = FuzzSeeds();
  std::mt19937_64 rng(77);
  TempDir dir;
  for (int i = 0; i < 40; ++i) {
    std::string text = seeds[static_cast<size_t>(i) % seeds.size()];
    const int rounds = 1 + static_cast<int>(rng() % 3);
    for (int r = 0; r < rounds; ++r) text = Mutate(text, rng);
    const fs::path in = dir / fmt::format("m{}.json", i);
    const fs::path out = dir / fmt::format("m{}.out.json", i);
    Spit(in, text);
    const ToolRun run =
        RunTool(fmt::format("fuse {} -o {}", Quote(in.string()), Quote(out.string())));
    ASSERT_TRUE(WIFEXITED(run.status)) << "mutant " << i << ": " << Describe(run) << "\n" << text;
    const int code = WEXITSTATUS(run.status);
    ASSERT_TRUE(code == 0 || code == 2) << "mutant " << i << ": " << Describe(run);
    if (code == 2) {
      ExpectInputError(run, {in.string()});
      EXPECT_FALSE(fs::exists(out)) << "mutant " << i;
    } else {
      EXPECT_TRUE(fs::exists(out)) << "mutant " << i;
    }
  }
  for (const std::string& name : dir.Listing()) {
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << "leftover temp file " << name;
  }
}

}  // namespace
}  // namespace hfuse
