// The fuse-group-gathers driver: one gather round over the pipeline's op
// order, then that order mended. See fuse_group_gathers.h.
#include "hfuse/passes/fuse_group_gathers.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <queue>

#include "hfuse/ir/analysis.h"
#include "hfuse/passes/fusion_reasons.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

// A topological order of the live ops that follows `key` (lower first)
// wherever dependencies allow: Kahn's algorithm taking the ready op of the
// lowest (key, id). Keys are positions in the old order, so the ops the
// pass did not touch keep their relative order unless a group they read
// had to move later.
std::vector<OpId> OrderByKey(const Graph& graph, const std::vector<int64_t>& key) {
  const std::vector<OpId> live = graph.LiveOps();
  std::vector<int32_t> missing(static_cast<size_t>(graph.num_op_ids()), 0);
  std::vector<OpId> last(static_cast<size_t>(graph.num_tensor_ids()), kNone);
  using Entry = std::pair<int64_t, OpId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (OpId id : live) {
    for (TensorId in : graph.op(id).inputs) {
      if (graph.tensor(in).producer == kNone || last[static_cast<size_t>(in)] == id) continue;
      last[static_cast<size_t>(in)] = id;
      ++missing[static_cast<size_t>(id)];
    }
    if (missing[static_cast<size_t>(id)] == 0) ready.emplace(key[static_cast<size_t>(id)], id);
  }
  std::vector<OpId> order;
  order.reserve(live.size());
  while (!ready.empty()) {
    const OpId id = ready.top().second;
    ready.pop();
    order.push_back(id);
    for (TensorId out : graph.op(id).outputs) {
      for (OpId user : graph.tensor(out).users) {
        if (--missing[static_cast<size_t>(user)] == 0) {
          ready.emplace(key[static_cast<size_t>(user)], user);
        }
      }
    }
  }
  HFUSE_CHECK(order.size() == live.size() && "fuse-group-gathers made a cycle");
  return order;
}

}  // namespace

FuseGroupGathersResult FuseGroupGathers(Graph& graph, const FuseGroupGathersOptions& options,
                                        std::vector<OpId>& op_order) {
  FuseGroupGathersResult result;
  if (options.rules != RuleSet::kHfuse) return result;
  const bool had_order = !op_order.empty();
  const std::vector<OpId> sorted = had_order ? op_order : StableTopologicalOrder(graph);
  HFUSE_CHECK(static_cast<int64_t>(sorted.size()) == graph.NumLiveOps());
  std::vector<int64_t> op_number(static_cast<size_t>(graph.num_op_ids()), 0);
  for (size_t i = 0; i < sorted.size(); ++i) {
    op_number[static_cast<size_t>(sorted[i])] = static_cast<int64_t>(i);
  }
  // Where each tensor was made in the old order: a group's outputs are its
  // members'.
  std::vector<int64_t> made_at(static_cast<size_t>(graph.num_tensor_ids()), 0);
  if (had_order) {
    for (OpId id : sorted) {
      for (TensorId t : graph.op(id).outputs) made_at[static_cast<size_t>(t)] = op_number[static_cast<size_t>(id)];
    }
  }
  std::optional<ReasonRecorder> recorder;
  if (options.explain) recorder.emplace(RuleSet::kHfuse);
  TypeRoundResult round = GroupGathers(graph, sorted, op_number, options.want_dumps, options.reach,
                                       recorder ? &*recorder : nullptr);
  result.dropped_by_cycle_check = round.cycle_drops;
  result.ungrouped = std::move(round.reasons);
  for (size_t i = 0; i < round.group_ops.size(); ++i) {
    const Op& group = graph.op(round.group_ops[i]);
    result.groups.push_back({group.type, std::move(round.members[i]), round.group_ops[i], group.name});
  }
  if (options.want_dumps) {
    result.dumps.emplace_back("fuse_group_gather_groups.txt",
                              round.groups_dump.empty()
                                  ? std::string("# no gather group formed: see fuse_group_gather_reasons.txt\n")
                                  : round.groups_dump);
    result.dumps.emplace_back("fuse_group_gather_reasons.txt", ReasonsDump(OpType::kOpaque, result.ungrouped));
  }
  if (had_order && !round.group_ops.empty()) {
    // Each group where its first member was (it is at least as early as any
    // reader of a member's output); Kahn's order moves it later if a
    // member's ids are computed after that point.
    std::vector<int64_t> key(static_cast<size_t>(graph.num_op_ids()), 0);
    for (OpId id : sorted) key[static_cast<size_t>(id)] = op_number[static_cast<size_t>(id)];
    for (OpId group : round.group_ops) {
      int64_t first = INT64_MAX;
      for (TensorId y : graph.op(group).outputs) first = std::min(first, made_at[static_cast<size_t>(y)]);
      key[static_cast<size_t>(group)] = first;
    }
    op_order = OrderByKey(graph, key);
  }
  return result;
}

}  // namespace hfuse
