// Checked element and byte counts, and the memory budget: the one place
// where hfuse multiplies dims. A count that overflows 64 bits or comes from
// a negative dim is an input error, never a wrapped number that then sizes
// a buffer too small for the loop that fills it. The graph reader, the
// ONNX importer, the verifier, the .npz reader and both executors count
// through these functions.
//
// The memory budget bounds what hfuse allocates for tensor values (the CPU
// executor's tensors, an .npz entry, an initializer's external data): a
// tensor larger than the budget is refused before anything is allocated,
// naming the tensor and its size. The default is kDefaultMemoryBudget; the
// environment variable HFUSE_MEMORY_BUDGET (bytes, or with a K, M, G or T
// suffix, powers of 1024) or `hfuse --memory-budget` changes it.
#pragma once

#include <cstdint>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "hfuse/support/error.h"

namespace hfuse {

// a * b and a + b, or nothing when the result does not fit in int64_t.
inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The product of `dims`, or nothing when a dim is negative or the product
// of the non-zero dims overflows (so that every partial product of a shape
// that counts fits as well; a zero dim makes the count 0).
std::optional<int64_t> ElementCount(std::span<const int64_t> dims);
// ElementCount(dims) * element_bytes, or nothing as above.
std::optional<int64_t> ByteCount(std::span<const int64_t> dims, int64_t element_bytes);

// The same, throwing InputError "WHAT: shape [..] ..." when there is nothing.
int64_t ElementCountOf(std::span<const int64_t> dims, std::string_view what);
int64_t ByteCountOf(std::span<const int64_t> dims, int64_t element_bytes, std::string_view what);

// 16 GiB: more than any CPU run of a real ranking model needs, less than
// what a 2^62-row tensor would ask of the allocator.
inline constexpr int64_t kDefaultMemoryBudget = int64_t{16} << 30;

// The budget in bytes (HFUSE_MEMORY_BUDGET, or SetMemoryBudget's value).
int64_t MemoryBudget();
void SetMemoryBudget(int64_t bytes);
// "123", "64K", "512M", "16G", "1T" -> bytes; nothing when malformed or
// not positive.
std::optional<int64_t> ParseByteSize(std::string_view text);

// Throws InputError "WHAT needs N bytes, over the memory budget of M bytes
// (HFUSE_MEMORY_BUDGET)" when bytes > MemoryBudget().
void CheckBudget(int64_t bytes, std::string_view what);

// Runs `allocate` (which allocates about `bytes` bytes for WHAT); an
// allocation failure becomes InputError "WHAT: cannot allocate N bytes:
// out of memory", after the budget check. WHAT is a string, or a function
// that makes it, called only for a message (an executor allocating a
// tensor per op should not format its name each time).
template <typename What, typename F>
auto Allocate(int64_t bytes, What&& what, F&& allocate) -> decltype(allocate()) {
  const auto name = [&what]() -> std::string {
    if constexpr (std::is_invocable_v<What&>) {
      return std::string(what());
    } else {
      return std::string(std::string_view(what));
    }
  };
  if (bytes > MemoryBudget()) CheckBudget(bytes, name());
  try {
    return allocate();
  } catch (const std::bad_alloc&) {
    ThrowInputError("{}: cannot allocate {} bytes: out of memory", name(), bytes);
  } catch (const std::length_error&) {
    ThrowInputError("{}: cannot allocate {} bytes: out of memory", name(), bytes);
  }
}

}  // namespace hfuse
