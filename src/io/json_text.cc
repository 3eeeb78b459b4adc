// JSON read in place. See json_text.h.
#include "json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hfuse/support/error.h"

namespace hfuse::json_text {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Eight bytes at a time: the loops below skip plain runs of a text by words,
// with the usual "which byte is zero" arithmetic.
constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHigh = 0x8080808080808080ULL;
uint64_t Load8(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint64_t HasZero(uint64_t v) { return (v - kOnes) & ~v & kHigh; }
uint64_t HasByte(uint64_t v, char c) {
  return HasZero(v ^ (kOnes * static_cast<unsigned char>(c)));
}

// The first quote or backslash at or after p (there is one: the text is
// validated). string_view::find_first_of would call memchr per character.
size_t QuoteOrBackslash(std::string_view text, size_t p) {
  while (p + 8 <= text.size()) {
    const uint64_t v = Load8(text.data() + p);
    if (HasByte(v, '"') | HasByte(v, '\\')) break;
    p += 8;
  }
  while (text[p] != '"' && text[p] != '\\') ++p;
  return p;
}

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
    while (p + 8 <= n) {  // the common case: plain ASCII, a word at a time
      const uint64_t v = Load8(text.data() + p);
      // A quote, a backslash, a control character or a non-ASCII byte.
      if (HasByte(v, '"') | HasByte(v, '\\') | ((v - kOnes * 0x20) & ~v & kHigh) | (v & kHigh))
        break;
      p += 8;
    }
    while (p < n) {
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
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
          e == 't') {
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

// Decodes the raw (validated) contents of a string that has escapes.
void DecodeString(std::string_view text, size_t p, std::string& out) {
  out.clear();
  while (true) {
    const size_t stop = QuoteOrBackslash(text, p);
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

bool Validate(std::string_view text, Layout* layout) {
  const size_t n = text.size();
  if (n >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") return false;  // nlohmann skips it
  std::vector<char> stack;  // the open containers: '{' or '['
  size_t p = 0;
  // Noted while the top level is an object: the array being directly in it.
  bool top_object = false;
  bool in_top_array = false;
  enum { kValue, kKey, kAfter } state = kValue;
  while (true) {
    while (p < n && IsSpace(text[p])) ++p;
    if (state == kKey) {
      if (p >= n || text[p] != '"') return false;
      p = ScanString(text, p);
      if (p == std::string_view::npos) return false;
      while (p < n && IsSpace(text[p])) ++p;
      if (p >= n || text[p] != ':') return false;
      ++p;
      state = kValue;
      continue;
    }
    if (state == kValue) {
      if (p >= n) return false;
      if (in_top_array) layout->arrays.back().elements.push_back(p);
      const char c = text[p];
      if (c == '{' || c == '[') {
        const size_t open = p;
        ++p;
        while (p < n && IsSpace(text[p])) ++p;
        const bool empty = p < n && text[p] == (c == '{' ? '}' : ']');
        const bool member_of_top = top_object && stack.size() == 1;
        if (c == '[' && member_of_top && layout) {
          layout->arrays.push_back({open, 0, {}});
        }
        if (empty) {
          ++p;
          if (c == '[' && member_of_top && layout)
            layout->arrays.back().end = p;
          state = kAfter;
        } else {
          if (stack.empty()) top_object = c == '{';
          stack.push_back(c);
          in_top_array = layout && top_object && stack.size() == 2 && c == '[';
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
      if (in_top_array) layout->arrays.back().end = p;
      stack.pop_back();
      in_top_array = layout && top_object && stack.size() == 2 && stack.back() == '[';
    } else {
      return false;
    }
  }
}

Document::Document(std::string_view text, const Layout* layout) : text_(text), layout_(layout) {
  size_t p = 0;
  while (IsSpace(text[p])) ++p;
  Parse(p, root_, layout != nullptr);
}

std::vector<Token>& Document::ElementTape(size_t depth) const {
  while (element_tapes_.size() <= depth)
    element_tapes_.push_back(std::make_unique<std::vector<Token>>());
  return *element_tapes_[depth];
}

void Document::Parse(size_t p, std::vector<Token>& tape, bool lazy) const {
  std::vector<uint32_t> open;  // the containers not yet closed
  auto space = [&] {
    while (IsSpace(text_[p])) ++p;
  };
  auto push = [&](Token::Type type) -> Token& {
    // Token indices are 32-bit; only an element of more than 8 GiB has more.
    if (tape.size() >= UINT32_MAX) ThrowInputError("a JSON value holds more than 2^32 - 1 values");
    Token& t = tape.emplace_back();
    t.type = type;
    t.integer = 0;
    return t;
  };
  auto string = [&] {
    Token& t = push(Token::kString);
    t.pos = p + 1;
    size_t q = p + 1;
    while (true) {
      q = QuoteOrBackslash(text_, q);
      if (text_[q] == '"') break;
      t.escaped = true;
      q += 2;
    }
    t.len = q - p - 1;
    p = q + 1;
  };
  bool want_key = false;
  while (true) {
    space();
    if (want_key) {
      string();
      space();
      ++p;  // ':'
      space();
    }
    // A value.
    const char c = text_[p];
    if (c == '{' || c == '[') {
      const Layout::Array* elements = nullptr;
      if (c == '[' && lazy && open.size() == 1 && tape[open[0]].type == Token::kObject) {
        for (const Layout::Array& a : layout_->arrays) {
          if (a.begin == p) elements = &a;
        }
      }
      if (elements) {
        Token& t = push(Token::kElements);
        t.len = static_cast<uint64_t>(elements - layout_->arrays.data());
        t.end = static_cast<uint32_t>(tape.size());
        p = elements->end;
      } else {
        open.push_back(static_cast<uint32_t>(tape.size()));
        push(c == '{' ? Token::kObject : Token::kArray);
        ++p;
        space();
        if (text_[p] != (c == '{' ? '}' : ']')) {
          want_key = c == '{';
          continue;
        }
        // Empty: closed below.
        tape[open.back()].end = static_cast<uint32_t>(tape.size());
        open.pop_back();
        ++p;
      }
    } else if (c == '"') {
      string();
    } else if (c == 't') {
      push(Token::kTrue);
      p += 4;
    } else if (c == 'f') {
      push(Token::kFalse);
      p += 5;
    } else if (c == 'n') {
      push(Token::kNull);
      p += 4;
    } else {  // a number, as nlohmann's lexer reads it
      size_t q = p;
      bool is_float = false;
      // Bounded: a number at the very end of the text (a top-level scalar)
      // has nothing after it to stop at.
      while (q < text_.size()) {
        const char d = text_[q];
        if (IsDigit(d) || d == '-' || d == '+') {
          ++q;
        } else if (d == '.' || d == 'e' || d == 'E') {
          is_float = true;
          ++q;
        } else {
          break;
        }
      }
      if (is_float) {
        const std::string token(text_.substr(p, q - p));
        push(Token::kFloat).real = std::strtod(token.c_str(), nullptr);
      } else {
        // At most 18 digits (Validate): no overflow.
        const bool negative = c == '-';
        uint64_t v = 0;
        for (size_t i = p + (negative ? 1 : 0); i < q; ++i)
          v = v * 10 + static_cast<uint64_t>(text_[i] - '0');
        if (negative) {
          push(Token::kInteger).integer = -static_cast<int64_t>(v);
        } else {
          push(Token::kUnsigned).unsigned_value = v;
        }
      }
      p = q;
    }
    // After a value: commas and closings.
    while (true) {
      if (open.empty()) return;
      space();
      if (text_[p] == ',') {
        ++p;
        want_key = tape[open.back()].type == Token::kObject;
        break;
      }
      tape[open.back()].end = static_cast<uint32_t>(tape.size());
      open.pop_back();
      ++p;  // '}' or ']'
    }
  }
}

bool Value::is_number() const {
  const Token::Type type = t().type;
  return type == Token::kInteger || type == Token::kUnsigned || type == Token::kFloat;
}

const char* Value::type_name() const {
  switch (t().type) {
    case Token::kNull: return "null";
    case Token::kTrue:
    case Token::kFalse: return "boolean";
    case Token::kInteger:
    case Token::kUnsigned:
    case Token::kFloat: return "number";
    case Token::kString: return "string";
    case Token::kArray:
    case Token::kElements: return "array";
    case Token::kObject: return "object";
  }
  return "?";
}

std::string Value::dump() const {
  const Token& tok = t();
  switch (tok.type) {
    case Token::kNull: return "null";
    case Token::kTrue: return "true";
    case Token::kFalse: return "false";
    case Token::kInteger: return nlohmann::json(tok.integer).dump();
    case Token::kUnsigned: return nlohmann::json(tok.unsigned_value).dump();
    case Token::kFloat: return nlohmann::json(tok.real).dump();
    case Token::kString: return nlohmann::json(get_string()).dump();
    default: return nlohmann::json(type_name()).dump();  // not asked for containers
  }
}

std::string Value::get_string() const {
  std::string scratch;
  return std::string(get_string_view(scratch));
}

std::string_view Value::get_string_view(std::string& scratch) const {
  const Token& tok = t();
  if (!tok.escaped) return doc_->Raw(tok);
  DecodeString(doc_->text_, tok.pos, scratch);
  return scratch;
}

int64_t Value::get_int64() const {
  const Token& tok = t();
  if (tok.type == Token::kInteger) return tok.integer;
  if (tok.type == Token::kUnsigned) return static_cast<int64_t>(tok.unsigned_value);
  return static_cast<int64_t>(tok.real);
}

uint64_t Value::get_uint64() const {
  const Token& tok = t();
  if (tok.type == Token::kInteger) return static_cast<uint64_t>(tok.integer);
  if (tok.type == Token::kUnsigned) return tok.unsigned_value;
  return static_cast<uint64_t>(tok.real);
}

double Value::get_double() const {
  const Token& tok = t();
  if (tok.type == Token::kInteger) return static_cast<double>(tok.integer);
  if (tok.type == Token::kUnsigned) return static_cast<double>(tok.unsigned_value);
  return tok.real;
}

size_t Value::size() const {
  const Token& a = t();
  if (a.type == Token::kElements) return doc_->layout_->arrays[a.len].elements.size();
  size_t count = 0;
  for (uint32_t k = index_ + 1; k < a.end; k = Next(k)) ++count;
  return count;
}

uint32_t Value::Next(uint32_t k) const {
  const Token& tok = (*tape_)[k];
  return tok.type == Token::kArray || tok.type == Token::kObject ? tok.end : k + 1;
}

Object::Object(const Value& v) : v_(v) {
  const Token& obj = v.t();
  for (uint32_t k = v.index_ + 1; k < obj.end; k = v.Next(k + 1)) {
    if (count_ < kInline) {
      inline_[count_] = k;
    } else {
      more_.push_back(k);
    }
    if ((*v.tape_)[k].escaped) {
      decoded_.resize(count_ + 1);
      DecodeString(v.doc_->text_, (*v.tape_)[k].pos, decoded_[count_]);
    }
    ++count_;
  }
}

std::string_view Object::Key(size_t i) const {
  const Token& key = (*v_.tape_)[member(i)];
  if (key.escaped) return decoded_[i];
  return v_.doc_->Raw(key);
}

std::optional<Value> Object::find(std::string_view key) const {
  std::optional<Value> found;
  for (size_t i = 0; i < count_; ++i) {
    if (Key(i) == key) found = Value(v_.doc_, v_.tape_, member(i) + 1);
  }
  return found;
}

std::vector<size_t> Object::SortedUnique() const {
  std::vector<size_t> order(count_);
  for (size_t i = 0; i < count_; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return Key(a) < Key(b); });
  order.erase(
      std::unique(order.begin(), order.end(), [&](size_t a, size_t b) { return Key(a) == Key(b); }),
      order.end());
  return order;
}

}  // namespace hfuse::json_text
