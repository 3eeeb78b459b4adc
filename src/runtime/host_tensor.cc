// HostTensor storage and conversions.
#include "hfuse/runtime/host_tensor.h"

#include <cstring>

#include "hfuse/support/checked.h"
#include "hfuse/support/half.h"

namespace hfuse {

HostTensor::HostTensor(DType d, std::vector<int64_t> s, std::string_view what)
    : dtype(d), shape(std::move(s)) {
  const int64_t n = ByteCountOf(shape, DTypeBytes(dtype), what);
  Allocate(n, what, [&] { bytes.assign(static_cast<size_t>(n), 0); });
}

int64_t HostTensor::numel() const {
  // Every shape that reaches here was counted when its bytes were allocated.
  const std::optional<int64_t> n = ElementCount(shape);
  HFUSE_CHECK(n.has_value());
  return *n;
}

float HostTensor::Get(int64_t i) const {
  const uint8_t* p = bytes.data() + i * DTypeBytes(dtype);
  if (!IsFloat(dtype)) return static_cast<float>(GetInt(i));
  if (dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

void HostTensor::Set(int64_t i, float v) {
  uint8_t* p = bytes.data() + i * DTypeBytes(dtype);
  if (dtype == DType::kBool) {
    *p = v != 0.0f;
    return;
  }
  if (!IsFloat(dtype)) {
    SetInt(i, static_cast<int64_t>(v));
    return;
  }
  if (dtype == DType::kFloat32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(v) : FloatToBFloat16(v);
  std::memcpy(p, &h, 2);
}

// Whole-tensor conversions switch on the dtype once, not once per element,
// and count the shape (checked arithmetic) once: the CPU executor converts
// every operand this way.
std::vector<float> HostTensor::ToFloat() const {
  const auto n = static_cast<size_t>(numel());
  std::vector<float> out(n);
  const uint8_t* p = bytes.data();
  switch (dtype) {
    case DType::kFloat32:
      // An empty vector's data() may be null, which memcpy must not get.
      if (!bytes.empty()) std::memcpy(out.data(), p, bytes.size());
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const bool half = dtype == DType::kFloat16;
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = half ? HalfToFloat(h) : BFloat16ToFloat(h);
      }
      break;
    }
    default:
      for (size_t i = 0; i < n; ++i) out[i] = Get(static_cast<int64_t>(i));
  }
  return out;
}

void HostTensor::FromFloat(const float* values) {
  const auto n = static_cast<size_t>(numel());
  uint8_t* p = bytes.data();
  switch (dtype) {
    case DType::kFloat32:
      if (!bytes.empty()) std::memcpy(p, values, bytes.size());
      break;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const bool half = dtype == DType::kFloat16;
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = half ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      break;
    }
    default:
      for (size_t i = 0; i < n; ++i) Set(static_cast<int64_t>(i), values[i]);
  }
}

int64_t HostTensor::GetInt(int64_t i) const {
  const uint8_t* p = bytes.data() + i * DTypeBytes(dtype);
  switch (dtype) {
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kBool: return *p != 0;
    default: return static_cast<int64_t>(Get(i));
  }
}

void HostTensor::SetInt(int64_t i, int64_t v) {
  uint8_t* p = bytes.data() + i * DTypeBytes(dtype);
  switch (dtype) {
    case DType::kInt64: std::memcpy(p, &v, 8); break;
    case DType::kInt32: {
      const auto w = static_cast<int32_t>(v);
      std::memcpy(p, &w, 4);
      break;
    }
    case DType::kBool: *p = v != 0; break;
    default: Set(i, static_cast<float>(v));
  }
}

double Checksum(const HostTensor& t) {
  double sum = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) sum += t.Get(i);
  return sum;
}

uint64_t BytesHash(const HostTensor& t) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : t.bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace hfuse
