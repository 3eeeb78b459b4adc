// What the fuzz targets share: a failed invariant ends the run as a crash
// (libFuzzer saves the input), an input error is an ordinary outcome, and a
// small memory budget keeps every execution quick.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "hfuse/support/checked.h"

namespace hfuse::fuzz {

// 64 MiB: enough for every seed graph on the CPU, small enough that a
// mutated shape is refused at once instead of allocated.
inline constexpr int64_t kFuzzMemoryBudget = int64_t{64} << 20;

inline void Init() {
  static bool done = [] {
    SetMemoryBudget(kFuzzMemoryBudget);
    return true;
  }();
  (void)done;
}

[[noreturn]] inline void InvariantFailed(const char* what, const char* detail = "") {
  std::fprintf(stderr, "hfuse fuzz: invariant failed: %s %s\n", what, detail);
  std::abort();
}

}  // namespace hfuse::fuzz

#define HFUSE_FUZZ_EXPECT(condition, detail) \
  ((condition) ? (void)0 : ::hfuse::fuzz::InvariantFailed(#condition, detail))
