// JSON read in place, for graph files of hundreds of MB. Validate checks the
// whole text once (grammar, UTF-8, escapes, numbers) without building
// anything, noting where the top-level members and the elements of the
// top-level arrays start. A Document then reads values out of the text when
// asked: the top-level object and each element of a top-level array (a
// tensor, an op) are parsed into a small token tape, one element at a time,
// so that memory stays at the text plus one element.
//
// Values answer the questions nlohmann::json answers for the graph reader
// (type, type name, dump of a scalar, numbers classified as nlohmann
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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hfuse::json_text {

// What Validate notes for a document whose top level is an object. Positions
// are 64-bit: a graph of more than 4 GiB is read like any other.
struct Layout {
  struct Array {
    uint64_t begin, end;             // the array's '[' and the position after its ']'
    std::vector<uint64_t> elements;  // where each element starts
  };
  std::vector<Array> arrays;  // the arrays that are values of top-level members
};

bool Validate(std::string_view text, Layout* layout = nullptr);

class Document;

// One parsed value: a string, a number, a literal, or a container and all it
// holds, in pre-order.
struct Token {
  enum Type : uint8_t {
    kNull,
    kTrue,
    kFalse,
    kInteger,
    kUnsigned,
    kFloat,
    kString,
    kArray,
    kObject,
    kElements
  };
  Type type = kNull;
  bool escaped = false;  // strings: has backslashes
  uint32_t end = 0;      // containers: the index after the last token they hold
  uint64_t pos = 0;      // strings: the first character after the quote (64-bit: texts over 4 GiB)
  uint64_t len = 0;      // strings: raw length; kElements: which Layout::Array
  union {
    int64_t integer = 0;
    uint64_t unsigned_value;
    double real;
  };
};

// A value of a Document: a token of one of its tapes.
class Value {
 public:
  Value(const Document* doc, const std::vector<Token>* tape, uint32_t index)
      : doc_(doc), tape_(tape), index_(index) {}

  bool is_object() const { return t().type == Token::kObject; }
  bool is_array() const { return t().type == Token::kArray || t().type == Token::kElements; }
  bool is_string() const { return t().type == Token::kString; }
  bool is_null() const { return t().type == Token::kNull; }
  bool is_number() const;
  bool is_number_integer() const {
    return t().type == Token::kInteger || t().type == Token::kUnsigned;
  }
  bool is_number_unsigned() const { return t().type == Token::kUnsigned; }
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
  void for_each(F&& f) const;  // f(index, element)

 private:
  friend class Object;
  const Token& t() const { return (*tape_)[index_]; }
  uint32_t Next(uint32_t index) const;  // the token after this value
  const Document* doc_;
  const std::vector<Token>* tape_;
  uint32_t index_;
};

// The members of an object value.
class Object {
 public:
  explicit Object(const Value& v);
  std::optional<Value> find(std::string_view key) const;  // the last member of that key
  template <typename F>
  void for_each_key(F&& f) const {  // each key once, in std::map order
    for (size_t i : SortedUnique()) f(Key(i));
  }
  template <typename F>
  void for_each_key_unordered(F&& f) const {  // in the text's order, repeats included
    for (size_t i = 0; i < count_; ++i) f(Key(i));
  }

 private:
  std::string_view Key(size_t i) const;
  std::vector<size_t> SortedUnique() const;
  uint32_t member(size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }

  Value v_;
  static constexpr size_t kInline = 12;
  uint32_t inline_[kInline];  // the members' key tokens; the value follows each
  size_t count_ = 0;
  std::vector<uint32_t> more_;        // members past kInline
  std::vector<std::string> decoded_;  // keys with escapes, by member
};

// A validated text and the layout Validate noted.
class Document {
 public:
  Document(std::string_view text, const Layout* layout);
  Value root() const { return Value(this, &root_, 0); }

 private:
  friend class Value;
  friend class Object;
  // Parses the value at `pos` onto `tape`; with `lazy`, the arrays under the
  // top level become kElements tokens, their elements parsed when visited.
  void Parse(size_t pos, std::vector<Token>& tape, bool lazy) const;
  std::string_view Raw(const Token& t) const { return text_.substr(t.pos, t.len); }
  // The tape of the element being visited, per depth of element visits.
  std::vector<Token>& ElementTape(size_t depth) const;

  std::string_view text_;
  const Layout* layout_;
  std::vector<Token> root_;
  mutable std::vector<std::unique_ptr<std::vector<Token>>> element_tapes_;
  mutable size_t visiting_ = 0;  // element visits in progress
};

template <typename F>
void Value::for_each(F&& f) const {
  const Token& a = t();
  if (a.type == Token::kElements) {
    const Layout::Array& array = doc_->layout_->arrays[a.len];
    std::vector<Token>& tape = doc_->ElementTape(doc_->visiting_++);
    struct Leave {
      const Document* doc;
      ~Leave() { --doc->visiting_; }
    } leave{doc_};
    for (size_t i = 0; i < array.elements.size(); ++i) {
      tape.clear();
      doc_->Parse(array.elements[i], tape, false);
      f(i, Value(doc_, &tape, 0));
    }
    return;
  }
  size_t i = 0;
  for (uint32_t k = index_ + 1; k < a.end; k = Next(k)) f(i++, Value(doc_, tape_, k));
}

}  // namespace hfuse::json_text
