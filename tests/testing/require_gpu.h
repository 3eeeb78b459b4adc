// REQUIRE_GPU(): the first line of a GPU test. Without a CUDA device the
// test is skipped, saying why (the standard: GPU tests skip only without a
// GPU, and say so); with one it runs.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "hfuse/session/session.h"

#define REQUIRE_GPU()                                                           \
  do {                                                                          \
    std::string why;                                                            \
    if (!::hfuse::CudaAvailable(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)
