// JSON read in place. See json_text.h.
#include "json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

namespace hfuse::json_text {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNumberChar(char c) { return IsDigit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The four hex digits at p, or -1.
int32_t Hex4(std::string_view text, size_t p) {
  if (p + 4 > text.size()) return -1;
  int32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    const int h = HexValue(text[p + i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Checks the string whose opening quote is at p; returns the position after
// its closing quote, or npos. UTF-8 as RFC 3629 has it, and \u escapes whose
// surrogates pair up, as nlohmann's lexer requires.
size_t ScanString(std::string_view text, size_t p) {
  const size_t n = text.size();
  ++p;
  while (true) {
    while (p < n) {  // the common case: plain ASCII
      const auto c = static_cast<unsigned char>(text[p]);
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
      ++p;
    }
    if (p >= n) return std::string_view::npos;
    const auto c = static_cast<unsigned char>(text[p]);
    if (c == '"') return p + 1;
    if (c < 0x20) return std::string_view::npos;
    if (c == '\\') {
      if (p + 1 >= n) return std::string_view::npos;
      const char e = text[p + 1];
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        p += 2;
        continue;
      }
      if (e != 'u') return std::string_view::npos;
      const int32_t u = Hex4(text, p + 2);
      if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF)) return std::string_view::npos;
      p += 6;
      if (u >= 0xD800 && u <= 0xDBFF) {
        if (p + 1 >= n || text[p] != '\\' || text[p + 1] != 'u') return std::string_view::npos;
        const int32_t low = Hex4(text, p + 2);
        if (low < 0xDC00 || low > 0xDFFF) return std::string_view::npos;
        p += 6;
      }
      continue;
    }
    // A multi-byte sequence: lead byte, then the allowed range of the second
    // byte, then plain continuation bytes.
    int more = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c == 0xE0) {
      more = 2, lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      more = 2;
    } else if (c == 0xED) {
      more = 2, hi = 0x9F;
    } else if (c == 0xF0) {
      more = 3, lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      more = 3;
    } else if (c == 0xF4) {
      more = 3, hi = 0x8F;
    } else {
      return std::string_view::npos;
    }
    if (p + static_cast<size_t>(more) >= n) return std::string_view::npos;
    for (int i = 1; i <= more; ++i) {
      const auto b = static_cast<unsigned char>(text[p + static_cast<size_t>(i)]);
      if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return std::string_view::npos;
    }
    p += static_cast<size_t>(more) + 1;
  }
}

// Checks the number at p; returns the position after it, or npos. Integers
// of more than 18 digits and numbers beyond double are left to nlohmann.
size_t ScanNumber(std::string_view text, size_t p) {
  const size_t n = text.size();
  const size_t start = p;
  if (text[p] == '-') ++p;
  if (p >= n || !IsDigit(text[p])) return std::string_view::npos;
  size_t digits = 0;
  if (text[p] == '0') {
    ++p, ++digits;
  } else {
    while (p < n && IsDigit(text[p])) ++p, ++digits;
  }
  bool is_float = false;
  if (p < n && text[p] == '.') {
    ++p;
    if (p >= n || !IsDigit(text[p])) return std::string_view::npos;
    while (p < n && IsDigit(text[p])) ++p;
    is_float = true;
  }
  if (p < n && (text[p] == 'e' || text[p] == 'E')) {
    ++p;
    if (p < n && (text[p] == '+' || text[p] == '-')) ++p;
    if (p >= n || !IsDigit(text[p])) return std::string_view::npos;
    while (p < n && IsDigit(text[p])) ++p;
    is_float = true;
  }
  if (!is_float) return digits <= 18 ? p : std::string_view::npos;
  const std::string token(text.substr(start, p - start));
  return std::isfinite(std::strtod(token.c_str(), nullptr)) ? p : std::string_view::npos;
}

// The number at p, as nlohmann's lexer classifies it.
struct Number {
  enum Kind { kInteger, kUnsigned, kFloat } kind;
  int64_t integer = 0;
  uint64_t unsigned_value = 0;
  double real = 0;
};

Number ParseNumber(std::string_view text, size_t p) {
  size_t q = p;
  bool is_float = false;
  while (q < text.size() && IsNumberChar(text[q])) {
    is_float = is_float || text[q] == '.' || text[q] == 'e' || text[q] == 'E';
    ++q;
  }
  Number num{Number::kFloat};
  if (is_float) {
    const std::string token(text.substr(p, q - p));
    num.real = std::strtod(token.c_str(), nullptr);
    return num;
  }
  // At most 18 digits (Validate): no overflow.
  const bool negative = text[p] == '-';
  uint64_t v = 0;
  for (size_t i = p + (negative ? 1 : 0); i < q; ++i) v = v * 10 + static_cast<uint64_t>(text[i] - '0');
  if (negative) {
    num.kind = Number::kInteger;
    num.integer = -static_cast<int64_t>(v);
  } else {
    num.kind = Number::kUnsigned;
    num.unsigned_value = v;
  }
  return num;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes the validated string whose opening quote is at p.
void DecodeString(std::string_view text, size_t p, std::string& out) {
  out.clear();
  ++p;
  while (true) {
    const size_t stop = text.find_first_of("\"\\", p);
    out.append(text.substr(p, stop - p));
    p = stop;
    if (text[p] == '"') return;
    const char e = text[p + 1];
    p += 2;
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto cp = static_cast<uint32_t>(Hex4(text, p));
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          const auto low = static_cast<uint32_t>(Hex4(text, p + 2));
          p += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        AppendUtf8(out, cp);
        break;
      }
      default: out += e; break;  // " \ /
    }
  }
}

}  // namespace

bool Validate(std::string_view text) {
  const size_t n = text.size();
  if (n >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") return false;  // nlohmann skips it
  std::vector<char> stack;  // the open containers: '{' or '['
  size_t p = 0;
  auto skip = [&] {
    while (p < n && IsSpace(text[p])) ++p;
  };
  enum { kValue, kKey, kAfter } state = kValue;
  while (true) {
    skip();
    if (state == kKey) {
      if (p >= n || text[p] != '"') return false;
      p = ScanString(text, p);
      if (p == std::string_view::npos) return false;
      skip();
      if (p >= n || text[p] != ':') return false;
      ++p;
      state = kValue;
      continue;
    }
    if (state == kValue) {
      if (p >= n) return false;
      const char c = text[p];
      if (c == '{' || c == '[') {
        ++p;
        skip();
        if (p < n && text[p] == (c == '{' ? '}' : ']')) {
          ++p;
          state = kAfter;
        } else {
          stack.push_back(c);
          state = c == '{' ? kKey : kValue;
        }
        continue;
      }
      if (c == '"') {
        p = ScanString(text, p);
      } else if (c == 't' || c == 'f' || c == 'n') {
        const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
        p = text.substr(p, word.size()) == word ? p + word.size() : std::string_view::npos;
      } else if (c == '-' || IsDigit(c)) {
        p = ScanNumber(text, p);
      } else {
        return false;
      }
      if (p == std::string_view::npos) return false;
      state = kAfter;
      continue;
    }
    // After a value.
    if (stack.empty()) return p == n;
    if (p >= n) return false;
    const char c = text[p++];
    if (c == ',') {
      state = stack.back() == '{' ? kKey : kValue;
    } else if ((c == '}' && stack.back() == '{') || (c == ']' && stack.back() == '[')) {
      stack.pop_back();
    } else {
      return false;
    }
  }
}

Value Value::Root(std::string_view text) {
  size_t p = 0;
  while (IsSpace(text[p])) ++p;
  return Value(text, p);
}

bool Value::is_number_integer() const { return is_number() && ParseNumber(text_, pos_).kind != Number::kFloat; }
bool Value::is_number_unsigned() const { return is_number() && ParseNumber(text_, pos_).kind == Number::kUnsigned; }

const char* Value::type_name() const {
  if (is_object()) return "object";
  if (is_array()) return "array";
  if (is_string()) return "string";
  if (is_boolean()) return "boolean";
  if (is_null()) return "null";
  return "number";
}

std::string Value::dump() const {
  if (is_string()) return nlohmann::json(get_string()).dump();
  if (is_boolean()) return at() == 't' ? "true" : "false";
  if (is_null()) return "null";
  const Number num = ParseNumber(text_, pos_);
  switch (num.kind) {
    case Number::kInteger: return nlohmann::json(num.integer).dump();
    case Number::kUnsigned: return nlohmann::json(num.unsigned_value).dump();
    case Number::kFloat: break;
  }
  return nlohmann::json(num.real).dump();
}

std::string Value::get_string() const {
  std::string s;
  DecodeString(text_, pos_, s);
  return s;
}

std::string_view Value::get_string_view(std::string& scratch) const {
  const size_t end = StringEnd(pos_);
  const std::string_view raw = text_.substr(pos_ + 1, end - pos_ - 2);
  if (raw.find('\\') == std::string_view::npos) return raw;
  DecodeString(text_, pos_, scratch);
  return scratch;
}

int64_t Value::get_int64() const {
  const Number num = ParseNumber(text_, pos_);
  switch (num.kind) {
    case Number::kInteger: return num.integer;
    case Number::kUnsigned: return static_cast<int64_t>(num.unsigned_value);
    case Number::kFloat: break;
  }
  return static_cast<int64_t>(num.real);
}

uint64_t Value::get_uint64() const {
  const Number num = ParseNumber(text_, pos_);
  switch (num.kind) {
    case Number::kInteger: return static_cast<uint64_t>(num.integer);
    case Number::kUnsigned: return num.unsigned_value;
    case Number::kFloat: break;
  }
  return static_cast<uint64_t>(num.real);
}

double Value::get_double() const {
  const Number num = ParseNumber(text_, pos_);
  switch (num.kind) {
    case Number::kInteger: return static_cast<double>(num.integer);
    case Number::kUnsigned: return static_cast<double>(num.unsigned_value);
    case Number::kFloat: break;
  }
  return num.real;
}

size_t Value::size() const {
  size_t count = 0;
  for_each([&](size_t, const Value&) { ++count; });
  return count;
}

size_t Value::SkipSpace(size_t p) const {
  while (p < text_.size() && IsSpace(text_[p])) ++p;
  return p;
}

size_t Value::StringEnd(size_t p) const {
  ++p;
  while (true) {
    p = text_.find_first_of("\"\\", p);
    if (text_[p] == '"') return p + 1;
    p += 2;
  }
}

size_t Value::SkipValue(size_t p) const {
  switch (text_[p]) {
    case '"': return StringEnd(p);
    case 't':
    case 'n': return p + 4;
    case 'f': return p + 5;
    case '{':
    case '[': {
      // Iterative: a validated text nests as deep as it likes.
      size_t depth = 0;
      while (true) {
        const char c = text_[p];
        if (c == '"') {
          p = StringEnd(p);
          continue;
        }
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) return p + 1;
        ++p;
      }
    }
    default:
      while (p < text_.size() && IsNumberChar(text_[p])) ++p;
      return p;
  }
}

Object::Object(const Value& v) : text_(v.text_) {
  size_t p = v.SkipSpace(v.pos_ + 1);
  if (text_[p] == '}') return;
  while (true) {
    Member m{p, 0};
    const size_t key_end = v.StringEnd(p);
    if (text_.substr(p + 1, key_end - p - 2).find('\\') != std::string_view::npos) {
      m.decoded = static_cast<int32_t>(decoded_.size());
      decoded_.emplace_back();
      DecodeString(text_, p, decoded_.back());
    }
    p = v.SkipSpace(v.SkipSpace(key_end) + 1);  // past ':'
    m.value_pos = p;
    if (count_ < kInline) {
      inline_[count_] = m;
    } else {
      more_.push_back(m);
    }
    ++count_;
    p = v.SkipSpace(v.SkipValue(p));
    if (text_[p] == '}') return;
    p = v.SkipSpace(p + 1);
  }
}

std::string_view Object::Key(size_t i) const {
  const Member& m = member(i);
  if (m.decoded >= 0) return decoded_[static_cast<size_t>(m.decoded)];
  const size_t end = text_.find('"', m.key_pos + 1);
  return text_.substr(m.key_pos + 1, end - m.key_pos - 1);
}

std::optional<Value> Object::find(std::string_view key) const {
  std::optional<Value> found;
  for (size_t i = 0; i < count_; ++i) {
    if (Key(i) == key) found = Value(text_, member(i).value_pos);
  }
  return found;
}

std::vector<size_t> Object::SortedUnique() const {
  std::vector<size_t> order(count_);
  for (size_t i = 0; i < count_; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return Key(a) < Key(b); });
  order.erase(std::unique(order.begin(), order.end(), [&](size_t a, size_t b) { return Key(a) == Key(b); }),
              order.end());
  return order;
}

}  // namespace hfuse::json_text
