// .npz reader and writer. See npz.h.
#include "hfuse/exec/npz.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <optional>
#include <string_view>

#include "hfuse/support/checked.h"
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
        const uint64_t field_end = x + 4 + len;
        if (id == 0x0001) {
          // Each 8-byte field inside the extra field, which lies inside the file.
          auto next = [&](uint64_t& v) {
            if (f + 8 > field_end || f + 8 > z_.size()) Fail("bad zip64 extra field for '{}'", name);
            v = U64(z_, f);
            f += 8;
          };
          if (usize == 0xffffffff) next(usize);
          if (csize == 0xffffffff) next(csize);
          if (local == 0xffffffff) next(local);
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
    // Deflate expands at most 1032:1, so a size beyond that is a lie; and
    // what it may expand to is held to the memory budget before allocating.
    if (usize > csize * 1032 + 1024) {
      Fail("entry '{}' declares {} bytes from {} compressed, more than deflate can give", name,
           usize, csize);
    }
    if (csize > UINT32_MAX || usize > UINT32_MAX) Fail("entry '{}' is over 4 GB", name);
    const std::string what = fmt::format("{}: entry '{}'", path_, name);
    std::string out = Allocate(static_cast<int64_t>(usize), what, [&] { return std::string(usize, '\0'); });
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

  // The value of `key` in a .npy header, a Python dict literal such as
  // {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }: the text
  // after "'key':" and any spaces. Read by hand, in one pass: a regex
  // recurses per character and a long header overflowed the stack.
  static std::optional<std::string_view> After(std::string_view header, std::string_view key) {
    const std::string quoted = fmt::format("'{}'", key);
    size_t at = header.find(quoted);
    if (at == std::string_view::npos) return std::nullopt;
    at += quoted.size();
    while (at < header.size() && header[at] == ' ') ++at;
    if (at >= header.size() || header[at] != ':') return std::nullopt;
    ++at;
    while (at < header.size() && header[at] == ' ') ++at;
    return header.substr(at);
  }

  HostTensor ParseNpy(const std::string& name, const std::string& npy, std::optional<DType> want) {
    if (npy.size() < 10 || npy.compare(0, 6, "\x93NUMPY") != 0) Fail("'{}' is not a .npy array", name);
    const int major = static_cast<uint8_t>(npy[6]);
    const size_t start = major == 1 ? 10 : 12;
    if (npy.size() < start) Fail("'{}': truncated .npy header", name);
    const size_t header_len = major == 1 ? U16(npy, 8) : U32(npy, 8);
    if (npy.size() - start < header_len) Fail("'{}': truncated .npy header", name);
    const std::string_view header(npy.data() + start, header_len);
    const std::optional<std::string_view> d = After(header, "descr");
    if (!d || d->empty() || (*d)[0] != '\'' || d->find('\'', 1) == std::string_view::npos) {
      Fail("'{}': no descr", name);
    }
    const std::string descr(d->substr(1, d->find('\'', 1) - 1));
    if (const auto f = After(header, "fortran_order"); f && f->starts_with("True")) {
      Fail("'{}': Fortran-ordered arrays are not supported", name);
    }
    const std::optional<std::string_view> sh = After(header, "shape");
    if (!sh || sh->empty() || (*sh)[0] != '(' || sh->find(')') == std::string_view::npos) {
      Fail("'{}': no shape", name);
    }
    std::vector<int64_t> shape;
    const std::string_view dims = sh->substr(1, sh->find(')') - 1);
    for (size_t i = 0; i < dims.size();) {
      if (dims[i] < '0' || dims[i] > '9') {
        if (dims[i] != ',' && dims[i] != ' ' && dims[i] != 'L') Fail("'{}': bad shape", name);
        ++i;
        continue;
      }
      size_t j = i;
      while (j < dims.size() && dims[j] >= '0' && dims[j] <= '9') ++j;
      // 18 digits always fit in int64_t; a longer dim is too large anyway.
      if (j - i > 18) Fail("'{}': shape dim {} is too large", name, dims.substr(i, j - i));
      int64_t v = 0;
      for (size_t k = i; k < j; ++k) v = v * 10 + (dims[k] - '0');
      shape.push_back(v);
      i = j;
    }
    const char* data = npy.data() + start + header_len;
    const size_t avail = npy.size() - start - header_len;
    const std::string what = fmt::format("{}: array '{}'", path_, name);
    const int64_t n = ElementCountOf(shape, what);
    // Checked against the data there is before the array is allocated.
    auto need = [&](int64_t elem) {
      const std::optional<int64_t> bytes = CheckedMul(n, elem);
      if (!bytes || avail < static_cast<uint64_t>(*bytes)) Fail("'{}': array data is truncated", name);
    };
    const bool half = descr == "<f2" || descr == "|f2";
    if ((half && (!want || *want == DType::kFloat16)) ||
        (descr == "<u2" && (!want || *want == DType::kBFloat16)) ||
        (descr == "<f4" && (!want || *want == DType::kFloat32))) {
      const DType d = half ? DType::kFloat16 : descr == "<u2" ? DType::kBFloat16 : DType::kFloat32;
      need(DTypeBytes(d));
      HostTensor t(d, shape, what);
      if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
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
        need(DTypeBytes(own));
        HostTensor src(own, shape, what);
        if (!src.bytes.empty()) std::memcpy(src.bytes.data(), data, src.bytes.size());
        if (same) return src;
        HostTensor t(*want, shape, what);
        for (int64_t i = 0; i < n; ++i) t.SetInt(i, src.GetInt(i));
        return t;
      }
    }
    if ((descr == "<f4" || descr == "<f8") && want && IsFloat(*want)) {  // round into the wanted dtype
      need(descr == "<f4" ? 4 : 8);
      HostTensor t(*want, shape, what);
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
