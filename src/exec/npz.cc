// .npz reader and writer. See npz.h.
#include "hfuse/exec/npz.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <regex>

#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

namespace hfuse {
namespace {

uint32_t U16(const std::string& s, size_t at) {
  return static_cast<uint8_t>(s[at]) | static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 8;
}
uint32_t U32(const std::string& s, size_t at) { return U16(s, at) | U16(s, at + 2) << 16; }
uint64_t U64(const std::string& s, size_t at) {
  return U32(s, at) | static_cast<uint64_t>(U32(s, at + 4)) << 32;
}
void Put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>((v >> 8) & 0xff));
}
void Put32(std::string& s, uint32_t v) {
  Put16(s, v & 0xffff);
  Put16(s, v >> 16);
}

class NpzReader {
 public:
  NpzReader(const std::string& path, std::string data) : path_(path), z_(std::move(data)) {}

  TensorMap Read(const std::map<std::string, DType>& want) {
    // End of central directory: the last "PK\5\6" (a comment may follow it).
    if (z_.size() < 22) Fail("not a zip archive (.npz)");
    size_t eocd = std::string::npos;
    const size_t lowest = z_.size() > 22 + 65535 ? z_.size() - 22 - 65535 : 0;
    for (size_t i = z_.size() - 21; i-- > lowest;) {
      if (U32(z_, i) == 0x06054b50) {
        eocd = i;
        break;
      }
    }
    if (eocd == std::string::npos) Fail("not a zip archive (.npz)");
    uint64_t count = U16(z_, eocd + 10);
    uint64_t cd = U32(z_, eocd + 16);
    if (cd == 0xffffffff || count == 0xffff) {  // zip64 end record via its locator
      if (eocd < 20 || U32(z_, eocd - 20) != 0x07064b50) Fail("bad zip64 locator");
      const uint64_t rec = U64(z_, eocd - 12);
      Need(rec, 56);
      count = U64(z_, rec + 32);
      cd = U64(z_, rec + 48);
    }
    TensorMap out;
    uint64_t at = cd;
    for (uint64_t e = 0; e < count; ++e) {
      Need(at, 46);
      if (U32(z_, at) != 0x02014b50) Fail("bad central directory entry");
      const uint32_t method = U16(z_, at + 10);
      uint64_t csize = U32(z_, at + 20), usize = U32(z_, at + 24);
      const uint32_t name_len = U16(z_, at + 28), extra_len = U16(z_, at + 30),
                     comment_len = U16(z_, at + 32);
      uint64_t local = U32(z_, at + 42);
      Need(at + 46, name_len + extra_len);
      std::string name = z_.substr(at + 46, name_len);
      // Zip64 extra field: the 0xffffffff fields, in order.
      for (uint64_t x = at + 46 + name_len; x + 4 <= at + 46 + name_len + extra_len;) {
        const uint32_t id = U16(z_, x), len = U16(z_, x + 2);
        uint64_t f = x + 4;
        if (id == 0x0001) {
          if (usize == 0xffffffff) { usize = U64(z_, f); f += 8; }
          if (csize == 0xffffffff) { csize = U64(z_, f); f += 8; }
          if (local == 0xffffffff) { local = U64(z_, f); }
        }
        x += 4 + len;
      }
      at += 46 + name_len + extra_len + comment_len;
      Need(local, 30);
      if (U32(z_, local) != 0x04034b50) Fail("bad local header for '{}'", name);
      const uint64_t data = local + 30 + U16(z_, local + 26) + U16(z_, local + 28);
      Need(data, csize);
      std::string npy;
      if (method == 0) {
        npy = z_.substr(data, csize);
      } else if (method == 8) {
        npy = Inflate(data, csize, usize, name);
      } else {
        Fail("entry '{}' uses zip method {}, only stored and deflate are supported", name, method);
      }
      if (name.ends_with(".npy")) name.resize(name.size() - 4);
      auto it = want.find(name);
      out[name] = ParseNpy(name, npy, it == want.end() ? std::nullopt : std::optional(it->second));
    }
    return out;
  }

 private:
  template <typename... Args>
  [[noreturn]] void Fail(fmt::format_string<Args...> format, Args&&... args) {
    ThrowInputError("{}: {}", path_, fmt::format(format, std::forward<Args>(args)...));
  }
  void Need(uint64_t at, uint64_t n) {
    if (at > z_.size() || n > z_.size() - at) Fail("truncated archive");
  }

  std::string Inflate(uint64_t at, uint64_t csize, uint64_t usize, const std::string& name) {
    std::string out(usize, '\0');
    z_stream s{};
    if (inflateInit2(&s, -15) != Z_OK) Fail("zlib init failed");
    s.next_in = reinterpret_cast<Bytef*>(z_.data() + at);
    s.avail_in = static_cast<uInt>(csize);
    s.next_out = reinterpret_cast<Bytef*>(out.data());
    s.avail_out = static_cast<uInt>(usize);
    const int rc = inflate(&s, Z_FINISH);
    inflateEnd(&s);
    if (rc != Z_STREAM_END || s.total_out != usize) Fail("entry '{}' does not inflate", name);
    return out;
  }

  HostTensor ParseNpy(const std::string& name, const std::string& npy, std::optional<DType> want) {
    if (npy.size() < 10 || npy.compare(0, 6, "\x93NUMPY") != 0) Fail("'{}' is not a .npy array", name);
    const int major = static_cast<uint8_t>(npy[6]);
    const size_t header_len = major == 1 ? U16(npy, 8) : U32(npy, 8);
    const size_t start = major == 1 ? 10 : 12;
    if (npy.size() < start + header_len) Fail("'{}': truncated .npy header", name);
    const std::string header = npy.substr(start, header_len);
    std::smatch m;
    if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']*)'"))) Fail("'{}': no descr", name);
    const std::string descr = m[1];
    if (std::regex_search(header, std::regex("'fortran_order':\\s*True"))) {
      Fail("'{}': Fortran-ordered arrays are not supported", name);
    }
    if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)"))) Fail("'{}': no shape", name);
    std::vector<int64_t> shape;
    const std::string dims = m[1];
    const std::regex number("\\d+");
    for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
      shape.push_back(std::stoll(it->str()));
    }
    const char* data = npy.data() + start + header_len;
    const size_t avail = npy.size() - start - header_len;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    auto need = [&](size_t elem) {
      if (avail < static_cast<size_t>(n) * elem) Fail("'{}': array data is truncated", name);
    };
    const bool half = descr == "<f2" || descr == "|f2";
    if ((half && (!want || *want == DType::kFloat16)) ||
        (descr == "<u2" && (!want || *want == DType::kBFloat16)) ||
        (descr == "<f4" && (!want || *want == DType::kFloat32))) {
      const DType d = half ? DType::kFloat16 : descr == "<u2" ? DType::kBFloat16 : DType::kFloat32;
      HostTensor t(d, shape);
      need(t.bytes.size() / std::max<int64_t>(n, 1));
      std::memcpy(t.bytes.data(), data, t.bytes.size());
      return t;
    }
    // Integer and bool arrays: int64 as <i8, int32 as <i4, bool as |b1; an
    // integer array of the other width is converted when that is wanted.
    const bool is_int = descr == "<i8" || descr == "<i4" || descr == "|b1";
    if (is_int) {
      const DType own = descr == "<i8" ? DType::kInt64 : descr == "<i4" ? DType::kInt32 : DType::kBool;
      const bool same = !want || *want == own;
      const bool widen = want && (*want == DType::kInt64 || *want == DType::kInt32) && own != DType::kBool;
      if (same || widen) {
        HostTensor src(own, shape);
        need(static_cast<size_t>(DTypeBytes(own)));
        std::memcpy(src.bytes.data(), data, src.bytes.size());
        if (same) return src;
        HostTensor t(*want, shape);
        for (int64_t i = 0; i < n; ++i) t.SetInt(i, src.GetInt(i));
        return t;
      }
    }
    if ((descr == "<f4" || descr == "<f8") && want && IsFloat(*want)) {  // round into the wanted dtype
      HostTensor t(*want, shape);
      need(descr == "<f4" ? 4 : 8);
      for (int64_t i = 0; i < n; ++i) {
        double v;
        if (descr == "<f4") {
          float f;
          std::memcpy(&f, data + 4 * i, 4);
          v = f;
        } else {
          std::memcpy(&v, data + 8 * i, 8);
        }
        t.Set(i, static_cast<float>(v));
      }
      return t;
    }
    Fail("'{}': dtype '{}' cannot be read as {}", name, descr,
         want ? std::string(DTypeName(*want))
              : "a tensor (use <f2, <f4, <u2 for bfloat16, <i8, <i4 or |b1)");
  }

  std::string path_;
  std::string z_;
};

std::string NpyBytes(const HostTensor& t) {
  const char* descr = "<f4";
  switch (t.dtype) {
    case DType::kFloat16: descr = "<f2"; break;
    case DType::kBFloat16: descr = "<u2"; break;
    case DType::kFloat32: descr = "<f4"; break;
    case DType::kInt64: descr = "<i8"; break;
    case DType::kInt32: descr = "<i4"; break;
    case DType::kBool: descr = "|b1"; break;
  }
  const std::string shape = t.shape.size() == 1 ? fmt::format("{},", t.shape[0])
                                                : fmt::format("{}", fmt::join(t.shape, ", "));
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  Put16(out, static_cast<uint32_t>(header.size()));
  out += header;
  out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

}  // namespace

TensorMap ReadNpz(const std::string& path, const std::map<std::string, DType>& want) {
  return NpzReader(path, ReadFile(path)).Read(want);
}

void WriteNpz(const std::string& path, const TensorMap& arrays) {
  std::string zip, central;
  uint32_t count = 0;
  for (const auto& [name, tensor] : arrays) {
    const std::string data = NpyBytes(tensor);
    const std::string file = name + ".npy";
    if (data.size() > 0xfffffffeull || zip.size() > 0xfffffffeull) {
      ThrowInputError("{}: arrays over 4 GB are not supported", path);
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const auto offset = static_cast<uint32_t>(zip.size());
    std::string local;
    Put32(local, 0x04034b50);
    Put16(local, 20); Put16(local, 0); Put16(local, 0);  // version, flags, stored
    Put16(local, 0); Put16(local, 0x21);                 // time 00:00:00, date 1980-01-01
    Put32(local, crc);
    Put32(local, static_cast<uint32_t>(data.size()));
    Put32(local, static_cast<uint32_t>(data.size()));
    Put16(local, static_cast<uint32_t>(file.size()));
    Put16(local, 0);
    zip += local + file + data;
    Put32(central, 0x02014b50);
    Put16(central, 20); Put16(central, 20); Put16(central, 0); Put16(central, 0);
    Put16(central, 0); Put16(central, 0x21);
    Put32(central, crc);
    Put32(central, static_cast<uint32_t>(data.size()));
    Put32(central, static_cast<uint32_t>(data.size()));
    Put16(central, static_cast<uint32_t>(file.size()));
    Put16(central, 0); Put16(central, 0); Put16(central, 0); Put16(central, 0);
    Put32(central, 0);
    Put32(central, offset);
    central += file;
    ++count;
  }
  const auto cd_offset = static_cast<uint32_t>(zip.size());
  zip += central;
  Put32(zip, 0x06054b50);
  Put16(zip, 0); Put16(zip, 0);
  Put16(zip, count); Put16(zip, count);
  Put32(zip, static_cast<uint32_t>(central.size()));
  Put32(zip, cd_offset);
  Put16(zip, 0);
  WriteFileAtomic(path, zip);
}

}  // namespace hfuse
