// Large graphs for measuring the pass at scale, written as graph JSON v1
// (shared/spec/graph-json.md) straight into a string, fast enough that a
// 10^6-op graph takes well under a second. Two shapes:
//
//   Towers  the shape of shared/conformance/scale/towers_1001.json: a split
//           of x [256, 64T] feeding T towers of gemm_rcr_bias_relu ->
//           layernorm -> gemm_rcr_bias_relu, joined by a concatenate
//           (3T + 2 ops; the same tensors and ops, in the same order).
//   Lanes   a wide and deep graph: a split feeds W lanes, each a chain of
//           GEMMs (all four types), layernorms and elementwise ops; with
//           probability `cross` an op also reads (or reads instead) a recent
//           tensor of another lane, so that candidates of one type get
//           related through groups formed earlier and the pass's cycle
//           check drops members. A concatenate joins the lanes.
//
// Both are deterministic: the same options give the same bytes everywhere
// (SplitMix64, no std distributions). Used by the hfuse-gen tool and by
// bench/pass_scale_bench.cc.
#pragma once

#include <cstdint>
#include <string>

namespace hfuse::gen {

struct TowersOptions {
  int64_t towers = 333;
  int64_t rows = 256;
};

// The number of towers of a towers graph of about `ops` ops (3T + 2 <= ops).
int64_t TowersForOps(int64_t ops);

std::string TowersGraphJson(const TowersOptions& options);

struct LanesOptions {
  int64_t ops = 1000;   // exactly this many ops (at least width + 2)
  int64_t width = 64;   // lanes
  double cross = 0.15;  // chance that an op reads another lane's tensor
  uint64_t seed = 1;
  int64_t rows = 64;  // M of every activation
};

std::string LanesGraphJson(const LanesOptions& options);

}  // namespace hfuse::gen
