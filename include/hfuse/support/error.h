// Error handling for hfuse.
//
// Two kinds of failure exist. Problems caused by the input (a malformed file,
// an unknown op, a shape that does not fit) are reported by throwing
// InputError; the command-line tool catches it at its boundary, prints the
// one-line message and exits with status 2. Broken internal invariants are
// bugs: HFUSE_CHECK aborts with the file and line so they are found at once.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace hfuse {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// A broken IR invariant found by a check that reports instead of aborting
// (the verifier run after each pass, --verify-each): a bug, named by where
// it was found. The tool prints "hfuse: internal error: ..." and exits 3.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

template <typename... Args>
[[noreturn]] void ThrowInputError(fmt::format_string<Args...> format, Args&&... args) {
  throw InputError(fmt::format(format, std::forward<Args>(args)...));
}

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "hfuse: internal error at %s:%d: check failed: %s\n", file, line, condition);
  std::abort();
}

}  // namespace hfuse

#define HFUSE_CHECK(condition) \
  ((condition) ? (void)0 : ::hfuse::CheckFailed(__FILE__, __LINE__, #condition))
