// A seeded random graph generator for property tests: RandomGraphJson(seed)
// returns graph JSON v1 text (shared/spec/graph-json.md) that ParseGraphJson
// accepts, built from the patterns of shared/conformance/random: towers of
// GEMMs and layernorms, splits feeding GEMMs (as A and as the weight),
// concatenates, edges across towers, the cycle pattern drawn in the pass's
// comments, bunches of up to 62 layernorms, rank-3 tensors, dynamic batch
// dims, mixed dtypes, alpha other than 1, meaningless op and tensor names,
// GEMMs of different M, negative dims, null gamma, gamma = beta, long chains,
// dead ops and no-op splits and concatenates. The same seed and options give
// the same bytes on every platform (own PRNG helpers, no std distributions).
// Shapes stay moderate (static dims <= 512, GEMM rows <= 256, dynamic dims at
// most 256) so that the graphs can also be run by a CPU executor; small_shapes
// makes them smaller still.
#pragma once

#include <cstdint>
#include <string>

namespace hfuse {

struct RandomGraphOptions {
  // The graph has a number of ops drawn uniformly from [min_ops, max_ops]
  // (exactly, counting dead ops and no-ops); min_ops >= 1.
  int min_ops = 5;
  int max_ops = 200;
  // Many short branches that read each other's tensors (as GEMM A or weight,
  // elementwise operand, concatenate input, layernorm input), so that
  // candidates get related through groups formed earlier and the pass's
  // cycle check fires often.
  bool wide = false;
  // Named dynamic dims ("batch", "seq", "fixed"); off gives static graphs.
  bool dynamic_dims = true;
  // Row counts of at most 16 and feature sizes of at most 64 (the same
  // alignment classes), and at most 2 rows for a bunch of layernorms (their
  // normalized sizes keep the whole range the size rules look at): graphs a
  // CPU executor runs in well under a millisecond, for the pipeline fuzzer.
  bool small_shapes = false;
};

std::string RandomGraphJson(uint64_t seed, const RandomGraphOptions& options = {});

}  // namespace hfuse
