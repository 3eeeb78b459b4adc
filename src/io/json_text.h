// JSON read in place, for graph files of hundreds of MB: Validate checks the
// whole text once (grammar, UTF-8, escapes, numbers) without building
// anything, and Value and Object then read values straight out of the text
// when asked. They answer the questions nlohmann::json answers for the graph
// reader (type, type name, dump of a scalar, numbers classified as nlohmann
// classifies them, strings decoded as it decodes them, duplicate keys: the
// last wins, keys listed in std::map order), so that the reader, written
// once for both, gives the same graphs and the same messages either way.
//
// Validate is no looser than nlohmann::json::parse: what it accepts, the
// other accepts. It is stricter on purpose where a case is rare (a byte
// order mark, integers of more than 18 digits): the caller then parses with
// nlohmann, which also words the message for a malformed file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hfuse::json_text {

bool Validate(std::string_view text);

// A value of a validated text: the position of its first character.
class Value {
 public:
  Value(std::string_view text, size_t pos) : text_(text), pos_(pos) {}
  // The document's top-level value.
  static Value Root(std::string_view text);

  bool is_object() const { return at() == '{'; }
  bool is_array() const { return at() == '['; }
  bool is_string() const { return at() == '"'; }
  bool is_null() const { return at() == 'n'; }
  bool is_boolean() const { return at() == 't' || at() == 'f'; }
  bool is_number() const { return at() == '-' || (at() >= '0' && at() <= '9'); }
  bool is_number_integer() const;   // int64 or uint64, as nlohmann reads it
  bool is_number_unsigned() const;  // a non-negative integer
  bool is_structured() const { return is_object() || is_array(); }
  const char* type_name() const;
  std::string dump() const;  // scalars: as nlohmann's dump() writes the value

  std::string get_string() const;
  // The decoded string: a view of the text, or of `scratch` when it has escapes.
  std::string_view get_string_view(std::string& scratch) const;
  int64_t get_int64() const;
  uint64_t get_uint64() const;
  double get_double() const;

  // Arrays.
  size_t size() const;
  template <typename F>
  void for_each(F&& f) const {  // f(index, element)
    size_t p = SkipSpace(pos_ + 1);
    if (text_[p] == ']') return;
    for (size_t i = 0;; ++i) {
      f(i, Value(text_, p));
      p = SkipSpace(SkipValue(p));
      if (text_[p] == ']') return;
      p = SkipSpace(p + 1);  // ','
    }
  }

 private:
  friend class Object;
  char at() const { return text_[pos_]; }
  size_t SkipSpace(size_t p) const;
  size_t SkipValue(size_t p) const;  // the position just after the value at p
  size_t StringEnd(size_t p) const;  // p at the opening quote; just after the closing one
  std::string_view text_;
  size_t pos_;
};

// The members of an object value, parsed once.
class Object {
 public:
  explicit Object(const Value& v);
  std::optional<Value> find(std::string_view key) const;  // the last member of that key
  template <typename F>
  void for_each_key(F&& f) const {  // each key once, in std::map order
    for (size_t i : SortedUnique()) f(Key(i));
  }

 private:
  struct Member {
    size_t key_pos;  // the key's opening quote
    size_t value_pos;
    int32_t decoded = -1;  // into decoded_, when the key has escapes
  };
  std::string_view Key(size_t i) const;
  std::vector<size_t> SortedUnique() const;

  std::string_view text_;
  static constexpr size_t kInline = 12;
  Member inline_[kInline];
  size_t count_ = 0;
  std::vector<Member> more_;  // members past kInline
  std::vector<std::string> decoded_;
  const Member& member(size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }
};

}  // namespace hfuse::json_text
