// A small builder of graph JSON for unit tests.
//
// Tests describe a graph in a few lines, with output shapes worked out from
// the op's rules, and get back an hfuse::Graph read by the real reader, so the
// reader's checks run on every test graph and a test can never build a graph
// that a user could not write:
//
//   GraphBuilder b;
//   std::string x = b.Input("x", {256, 64});
//   b.Outputs({b.Fc("fc0", x, 32), b.Fc("fc1", x, 32)});
//   Graph g = b.Build();
//
// Ops go into the JSON in the order they are added (that order is the
// construction order of the spec), tensors in the order they are declared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hfuse/ir/graph.h"
#include "hfuse/passes/fuse_group_ops.h"

namespace hfuse::test {

// One shape entry: a static size, or the name of a dynamic dim declared with
// GraphBuilder::Dim. Implicit so that shapes read {256, 64} or {"batch", 64}.
struct DimSpec {
  DimSpec(int64_t v) : value(v) {}               // NOLINT(google-explicit-constructor)
  DimSpec(int v) : value(v) {}                   // NOLINT(google-explicit-constructor)
  DimSpec(const char* n) : value(0), name(n) {}  // NOLINT(google-explicit-constructor)
  int64_t value;
  std::string name;  // empty when static
};
using ShapeSpec = std::vector<DimSpec>;

// Options are meant for designated initializers ({.alpha = 0.5}); every field
// has an explicit default so that -Wmissing-field-initializers stays quiet.
struct FcOptions {
  OpType type = OpType::kGemmRcrBias;
  std::optional<double> alpha = std::nullopt;  // written only when set
};

// Marks a LayerNorm gamma or beta as absent (written as null).
inline const std::string kNoParam = "<null>";

struct LnOptions {
  OpType type = OpType::kLayerNorm;
  int normalized_rank = 1;
  std::optional<double> eps = std::nullopt;  // written only when set
  // Parameter names; empty means "g_<op>" / "be_<op>". A name not declared yet
  // becomes a param of the right shape; kNoParam writes null.
  std::string gamma = "";
  std::string beta = "";
};

class GraphBuilder {
 public:
  // Declarations. Each returns the tensor's name, so calls nest.
  void Dim(const std::string& name, int64_t min, int64_t max);
  std::string Input(const std::string& name, ShapeSpec shape, DType dtype = DType::kFloat16);
  std::string Param(const std::string& name, ShapeSpec shape, DType dtype = DType::kFloat16);
  // An op output declared ahead of its op, to add ops out of dependency order.
  std::string Declare(const std::string& name, ShapeSpec shape, DType dtype = DType::kFloat16);

  // A GEMM of any gemm type; `bias` is ignored for gemm_rcr. Output "<name>_y"
  // unless `out` is given.
  std::string Gemm(const std::string& name, OpType type, const std::string& a, const std::string& w,
                   const std::string& bias = "", const std::string& out = "",
                   std::optional<double> alpha = std::nullopt);
  // A GEMM of width `n` with fresh params "w_<name>" [n, K] and "b_<name>" [n]
  // of A's dtype.
  std::string Fc(const std::string& name, const std::string& a, int64_t n, FcOptions options = {});
  std::string LayerNorm(const std::string& name, const std::string& x, LnOptions options = {});
  // Outputs "<name>_y0", "<name>_y1", ...
  std::vector<std::string> Split(const std::string& name, const std::string& x,
                                 std::vector<int64_t> sizes, int64_t dim);
  std::string Concat(const std::string& name, std::vector<std::string> inputs, int64_t dim);
  // Output shaped like the first input.
  std::string Elementwise(const std::string& name, const std::string& func,
                          std::vector<std::string> inputs);
  // Any op, verbatim: its outputs must be declared; `attrs` is extra JSON
  // members such as "\"group_size\": 2".
  void RawOp(const std::string& name, const std::string& type, std::vector<std::string> inputs,
             std::vector<std::string> outputs, const std::string& attrs = "");

  void Outputs(std::vector<std::string> names) { outputs_ = std::move(names); }

  std::string Json() const;
  Graph Build() const;  // reads Json() with hfuse::ParseGraphJson

  ShapeSpec ShapeOf(const std::string& tensor) const;  // a copy: adding tensors moves them
  DType DTypeOf(const std::string& tensor) const;

 private:
  struct TensorSpec {
    std::string name;
    ShapeSpec shape;
    DType dtype;
    std::string role;  // "input", "param" or empty
  };
  std::string AddTensor(const std::string& name, ShapeSpec shape, DType dtype, std::string role);
  // The named output: declared ahead, or declared now.
  std::string Output(const std::string& name, ShapeSpec shape, DType dtype);
  const TensorSpec& Find(const std::string& name) const;

  std::vector<std::string> dims_;  // JSON objects
  std::vector<TensorSpec> tensors_;
  std::vector<std::string> ops_;  // JSON objects
  std::vector<std::string> outputs_;
};

// The groups of a FuseGroupOps run: (group op type, member names), in
// creation order.
using Groups = std::vector<std::pair<std::string, std::vector<std::string>>>;
Groups FuseAndGetGroups(Graph& graph, const FuseGroupOpsOptions& options = {});

// Names of ops or tensors given by id, for readable expectations.
std::vector<std::string> OpNames(const Graph& graph, const std::vector<OpId>& ops);
std::vector<std::string> TensorNames(const Graph& graph, const std::vector<TensorId>& tensors);
// The id of a live op or tensor by name; fails the test (throws) when absent.
OpId OpNamed(const Graph& graph, const std::string& name);
TensorId TensorNamed(const Graph& graph, const std::string& name);

}  // namespace hfuse::test
