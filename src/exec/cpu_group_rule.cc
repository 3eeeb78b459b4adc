// The CPU group rule. See cpu_group_rule.h.
#include "cpu_group_rule.h"

#include <algorithm>
#include <numeric>

namespace hfuse::cpu {

GroupSchedule ScheduleGroup(const std::vector<double>& cost, int threads, GroupMode mode) {
  GroupSchedule s;
  const auto lanes = static_cast<size_t>(std::max(1, std::min<int>(threads, static_cast<int>(cost.size()))));
  if (cost.size() < 2 || lanes < 2 || mode == GroupMode::kOneByOne) return s;
  // Largest first, each to the least loaded thread (ties: the lowest), so
  // the schedule depends on the costs alone.
  std::vector<size_t> order(cost.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(lanes, 0.0);
  s.lanes.resize(lanes);
  for (size_t m : order) {
    const size_t t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[t] += cost[m];
    s.lanes[t].push_back(m);
  }
  const double side = *std::max_element(load.begin(), load.end()) + kRegionCost;
  double one_by_one = 0;
  for (double c : cost) one_by_one += c >= kSplitBelow ? c / static_cast<double>(threads) + kRegionCost : c;
  s.side_by_side = mode == GroupMode::kSideBySide || side <= one_by_one;
  if (!s.side_by_side) s.lanes.clear();
  return s;
}

}  // namespace hfuse::cpu
