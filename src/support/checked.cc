// Checked counts and the memory budget. See checked.h.
#include "hfuse/support/checked.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>

namespace hfuse {
namespace {

std::string DimsText(std::span<const int64_t> dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

int64_t BudgetFromEnvironment() {
  const char* text = std::getenv("HFUSE_MEMORY_BUDGET");
  if (text == nullptr || *text == '\0') return kDefaultMemoryBudget;
  const std::optional<int64_t> bytes = ParseByteSize(text);
  if (!bytes) ThrowInputError("HFUSE_MEMORY_BUDGET='{}' is not a size in bytes (like 512M or 16G)", text);
  return *bytes;
}

// 0: not yet read from the environment.
std::atomic<int64_t> g_budget{0};

}  // namespace

std::optional<int64_t> ElementCount(std::span<const int64_t> dims) {
  // The product of the non-zero dims must fit too: then so does every part
  // of the shape, which the kernels multiply out (outer and inner sizes).
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      zero = true;
    } else if (__builtin_mul_overflow(n, d, &n)) {
      return std::nullopt;
    }
  }
  return zero ? 0 : n;
}

std::optional<int64_t> ByteCount(std::span<const int64_t> dims, int64_t element_bytes) {
  const std::optional<int64_t> n = ElementCount(dims);
  if (!n || element_bytes < 0) return std::nullopt;
  return CheckedMul(*n, element_bytes);
}

int64_t ElementCountOf(std::span<const int64_t> dims, std::string_view what) {
  for (int64_t d : dims) {
    if (d < 0) ThrowInputError("{}: shape {} has a negative dim", what, DimsText(dims));
  }
  const std::optional<int64_t> n = ElementCount(dims);
  if (!n) ThrowInputError("{}: shape {} has more elements than 64 bits count", what, DimsText(dims));
  return *n;
}

int64_t ByteCountOf(std::span<const int64_t> dims, int64_t element_bytes, std::string_view what) {
  const std::optional<int64_t> bytes = CheckedMul(ElementCountOf(dims, what), element_bytes);
  if (!bytes) ThrowInputError("{}: shape {} has more bytes than 64 bits count", what, DimsText(dims));
  return *bytes;
}

int64_t MemoryBudget() {
  int64_t b = g_budget.load(std::memory_order_relaxed);
  if (b == 0) {
    b = BudgetFromEnvironment();
    g_budget.store(b, std::memory_order_relaxed);
  }
  return b;
}

void SetMemoryBudget(int64_t bytes) { g_budget.store(bytes > 0 ? bytes : kDefaultMemoryBudget); }

std::optional<int64_t> ParseByteSize(std::string_view text) {
  int64_t v = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const std::optional<int64_t> next = CheckedMul(v, 10);
    const std::optional<int64_t> sum = next ? CheckedAdd(*next, text[i] - '0') : std::nullopt;
    if (!sum) return std::nullopt;
    v = *sum;
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i + 1 == text.size()) {
    switch (text[i]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: return std::nullopt;
    }
  } else if (i != text.size()) {
    return std::nullopt;
  }
  const std::optional<int64_t> bytes = CheckedMul(v, int64_t{1} << shift);
  if (!bytes || *bytes <= 0) return std::nullopt;
  return bytes;
}

void CheckBudget(int64_t bytes, std::string_view what) {
  const int64_t budget = MemoryBudget();
  if (bytes > budget) {
    ThrowInputError("{} needs {} bytes, over the memory budget of {} bytes "
                    "(HFUSE_MEMORY_BUDGET or --memory-budget)",
                    what, bytes, budget);
  }
}

}  // namespace hfuse
