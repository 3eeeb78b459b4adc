// How the CPU executor runs a group op (a group GEMM or LayerNorm): its
// members side by side, one thread each (a single-threaded product or
// row loop per member, members dealt to threads largest first), or one
// after another, each split over all the threads. Both give the same bytes
// (each member's rows are computed the same way either way), so the choice
// is speed only.
//
// The rule, in multiply-adds (GEMM) or elements (LayerNorm): side by side
// costs the busiest thread's load plus one parallel region; one by one
// costs each member's share of the threads plus one parallel region per
// member that is split (members below the split threshold run on one
// thread). Side by side wins whenever members are small or many and
// balanced, which is the case of the groups fusion forms (eight experts of
// one shape); a group dominated by one large member runs one by one.
// bench/RESULTS.md ("CPU group ops") has the measurement behind it.
//
// A group GEMM whose members all take the packed kernel is not scheduled
// here: its members' tiles go in one loop that the pool's threads claim
// tile by tile (cpu_executor.cc, PackedTiles), which balances as it runs
// and never waits for a thread the OS has not scheduled. In a mixed group
// (members of several epilogues) the members the packed kernel takes run
// so first, and only the rest (a GEMV, 8-wide gates) are scheduled here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hfuse::cpu {

enum class GroupMode : uint8_t { kAuto, kSideBySide, kOneByOne };

struct GroupSchedule {
  bool side_by_side = false;
  std::vector<std::vector<size_t>> lanes;  // side by side: the members each thread runs
};

// A parallel region's cost (wake-up and barrier on a 2-core machine, a few
// microseconds) and the size below which a member is not split, in the
// units of `cost`.
inline constexpr double kRegionCost = 1 << 17;
inline constexpr double kSplitBelow = 1 << 18;

GroupSchedule ScheduleGroup(const std::vector<double>& cost, int threads, GroupMode mode);

}  // namespace hfuse::cpu
