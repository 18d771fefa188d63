#include "base/json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"

namespace zero::json {

Value::Value() = default;
Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;

namespace {

constexpr int kMaxDepth = 200;

// Recursive descent into caller-owned values: each value is built in place in
// its parent, so a deep document is never copied on the way up.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<Value> Document() {
    Value value;
    SkipSpace();
    if (absl::Status s = ParseValue(0, &value); !s.ok()) return s;
    SkipSpace();
    if (i_ < text_.size()) return Error("unexpected " + Describe() + " after the JSON value");
    return value;
  }

 private:
  absl::Status Error(const std::string& what) const { return ErrorAt(pos_, what); }
  static absl::Status ErrorAt(Pos pos, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%d:%d: %s", pos.line, pos.column, what));
  }
  // The character at the cursor, as an error message names it.
  std::string Describe() const {
    if (i_ >= text_.size()) return "end of input";
    const unsigned char c = text_[i_];
    if (c >= 0x20 && c < 0x7f) return absl::StrFormat("'%c'", c);
    return absl::StrFormat("byte 0x%02x", c);
  }

  bool AtEnd() const { return i_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[i_]; }
  void Advance() {
    if (text_[i_] == '\n') {
      ++pos_.line;
      pos_.column = 1;
    } else {
      ++pos_.column;
    }
    ++i_;
  }
  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      Advance();
    }
  }
  absl::Status Expect(char c, const char* context) {
    if (Peek() != c) {
      return Error(absl::StrFormat("expected '%c' %s, found %s", c, context, Describe()));
    }
    Advance();
    return absl::OkStatus();
  }

  absl::Status ParseValue(int depth, Value* v) {
    v->pos = pos_;
    switch (Peek()) {
      case '{':
        return Object(depth, v);
      case '[':
        return Array(depth, v);
      case '"':
        v->kind = Value::Kind::kString;
        return String(&v->text);
      case 't':
      case 'f':
      case 'n':
        return Literal(v);
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) {
          v->kind = Value::Kind::kNumber;
          return Number(&v->text);
        }
        return Error("expected a value, found " + Describe());
    }
  }

  absl::Status Literal(Value* v) {
    for (auto [word, kind, value] : {std::tuple{"true", Value::Kind::kBool, true},
                                     std::tuple{"false", Value::Kind::kBool, false},
                                     std::tuple{"null", Value::Kind::kNull, false}}) {
      const std::string_view w(word);
      if (text_.substr(i_, w.size()) == w) {
        for (size_t k = 0; k < w.size(); ++k) Advance();
        v->kind = kind;
        v->boolean = value;
        return absl::OkStatus();
      }
    }
    return Error("expected a value, found " + Describe());
  }

  absl::Status Digits(const char* what) {
    if (!(Peek() >= '0' && Peek() <= '9')) {
      return Error(absl::StrFormat("expected a digit %s, found %s", what, Describe()));
    }
    while (Peek() >= '0' && Peek() <= '9') Advance();
    return absl::OkStatus();
  }

  absl::Status Number(std::string* literal) {
    const size_t start = i_;
    if (Peek() == '-') Advance();
    if (Peek() == '0') {
      Advance();
      if (Peek() >= '0' && Peek() <= '9') return Error("leading zeros are not allowed in numbers");
    } else if (absl::Status s = Digits("in the number"); !s.ok()) {
      return s;
    }
    if (Peek() == '.') {
      Advance();
      if (absl::Status s = Digits("after the decimal point"); !s.ok()) return s;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      Advance();
      if (Peek() == '+' || Peek() == '-') Advance();
      if (absl::Status s = Digits("in the exponent"); !s.ok()) return s;
    }
    *literal = std::string(text_.substr(start, i_ - start));
    return absl::OkStatus();
  }

  absl::Status Hex4(uint32_t* value) {
    *value = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = Peek();
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) return Error("expected 4 hex digits after \\u, found " + Describe());
      *value = *value * 16 + digit;
      Advance();
    }
    return absl::OkStatus();
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // After a backslash: one escape, appended to `out`.
  absl::Status Escape(std::string* out) {
    const Pos at = pos_;
    const char c = Peek();
    static constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
    if (const size_t k = kFrom.find(c); c != '\0' && k != std::string_view::npos) {
      out->push_back(kTo[k]);
      Advance();
      return absl::OkStatus();
    }
    if (c != 'u') return Error("invalid escape \\" + Describe());
    Advance();
    uint32_t cp = 0;
    if (absl::Status s = Hex4(&cp); !s.ok()) return s;
    if (cp >= 0xdc00 && cp <= 0xdfff) return ErrorAt(at, "lone low surrogate in \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (text_.substr(i_, 2) != "\\u") return ErrorAt(at, "high surrogate without its pair");
      Advance();
      Advance();
      uint32_t low = 0;
      if (absl::Status s = Hex4(&low); !s.ok()) return s;
      if (low < 0xdc00 || low > 0xdfff) return ErrorAt(at, "high surrogate without its pair");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    AppendUtf8(cp, out);
    return absl::OkStatus();
  }

  // One UTF-8 sequence starting at the cursor, copied to `out`.
  absl::Status Utf8(std::string* out) {
    const unsigned char lead = Peek();
    int extra = 0;
    if (lead >= 0xc2 && lead <= 0xdf) {
      extra = 1;
    } else if (lead >= 0xe0 && lead <= 0xef) {
      extra = 2;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      extra = 3;
    } else {
      return Error(absl::StrFormat("invalid UTF-8 byte 0x%02x in string", lead));
    }
    uint32_t cp = lead & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char c = i_ + k < text_.size() ? text_[i_ + k] : 0;
      if ((c & 0xc0) != 0x80) return Error("truncated UTF-8 sequence in string");
      cp = (cp << 6) | (c & 0x3f);
    }
    // Overlong forms and encoded surrogates would let two spellings of one
    // key (or a lone surrogate) past the checks above.
    const uint32_t min = extra == 1 ? 0x80 : extra == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return Error("invalid UTF-8 sequence in string");
    }
    out->append(text_.substr(i_, extra + 1));
    for (int k = 0; k <= extra; ++k) Advance();
    return absl::OkStatus();
  }

  absl::Status String(std::string* out) {
    const Pos start = pos_;
    Advance();  // the opening quote
    while (true) {
      if (AtEnd()) return ErrorAt(start, "unterminated string");
      const unsigned char c = Peek();
      if (c == '"') {
        Advance();
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("control character in string (escape it)");
      absl::Status s = absl::OkStatus();
      if (c == '\\') {
        Advance();
        s = Escape(out);
      } else if (c >= 0x80) {
        s = Utf8(out);
      } else {
        out->push_back(static_cast<char>(c));
        Advance();
      }
      if (!s.ok()) return s;
    }
  }

  // The punctuation arrays and objects share: `element` reads one item or
  // member, the space before it already skipped.
  template <typename Element>
  absl::Status Sequence(int depth, char close, const char* after, Element element) {
    if (depth >= kMaxDepth) return Error("nesting deeper than 200 levels");
    Advance();
    SkipSpace();
    if (Peek() == close) {
      Advance();
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (Peek() == close) return Error(absl::StrFormat("trailing comma before '%c'", close));
      if (absl::Status s = element(); !s.ok()) return s;
      SkipSpace();
      if (Peek() == close) {
        Advance();
        return absl::OkStatus();
      }
      if (absl::Status s = Expect(',', after); !s.ok()) return s;
    }
  }

  absl::Status Array(int depth, Value* v) {
    v->kind = Value::Kind::kArray;
    return Sequence(depth, ']', "or ']' after an array element",
                    [&] { return ParseValue(depth + 1, &v->items.emplace_back()); });
  }

  absl::Status Object(int depth, Value* v) {
    v->kind = Value::Kind::kObject;
    // One object is open per depth at a time: its keys, for the duplicate
    // check (comparing each key with all before it took hours on a large
    // file).
    if (keys_.size() <= static_cast<size_t>(depth)) keys_.resize(depth + 1);
    keys_[depth].clear();
    return Sequence(depth, '}', "or '}' after an object member",
                    [&] { return ObjectMember(depth, v); });
  }

  // `"key": value`, appended to the object `v`.
  absl::Status ObjectMember(int depth, Value* v) {
    if (Peek() != '"') return Error("expected a string key, found " + Describe());
    const Pos key_pos = pos_;
    std::string key;
    if (absl::Status s = String(&key); !s.ok()) return s;
    // Rejected rather than first-wins: a reader that sees the other copy
    // would disagree with this one about the document.
    if (!keys_[depth].insert(key).second) {
      return ErrorAt(key_pos, "duplicate key \"" + key + "\"");
    }
    SkipSpace();
    if (absl::Status s = Expect(':', "after an object key"); !s.ok()) return s;
    SkipSpace();
    v->key_pos.push_back(key_pos);
    return ParseValue(depth + 1, &v->members.emplace_back(std::move(key), Value()).second);
  }

  std::string_view text_;
  size_t i_ = 0;
  Pos pos_;
  std::vector<absl::flat_hash_set<std::string>> keys_;  // by depth
};

// "LINE:COL: 'where' is not `expected`", at the offending value.
absl::Status TypeError(const Value& v, const std::string& where, std::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%d:%d: '%s' is not %s", v.pos.line, v.pos.column, where, expected));
}

}  // namespace

const Value* Value::Find(std::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::optional<uint64_t> Value::AsUint() const {
  if (kind != Kind::kNumber || text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = c - '0';
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::string_view KindName(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return "true or false";
    case Value::Kind::kNumber:
      return "a number";
    case Value::Kind::kString:
      return "a string";
    case Value::Kind::kArray:
      return "an array";
    case Value::Kind::kObject:
      return "an object";
  }
  return "?";
}

absl::StatusOr<Value> Parse(std::string_view text) { return Parser(text).Document(); }

namespace {

// The length of the valid UTF-8 sequence at the start of `s`, or 0
// (overlong forms, surrogates and code points past U+10FFFF are invalid).
size_t Utf8Length(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t n = Utf8Length(text);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      text.remove_prefix(1);
    } else {
      out.append(text.substr(0, n));
      text.remove_prefix(n);
    }
  }
  return out;
}

std::string Quote(std::string_view raw) {
  const std::string text = ValidUtf8(raw);
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = ch;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out.push_back(ch);
        }
    }
  }
  return out + "\"";
}

absl::StatusOr<const Value*> Member(const Value& object, std::string_view key,
                                    const std::string& where) {
  if (object.kind != Value::Kind::kObject) return TypeError(object, where, "an object");
  const Value* v = object.Find(key);
  if (v == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d:%d: '%s' has no member '%s'", object.pos.line, object.pos.column, where, key));
  }
  return v;
}

absl::StatusOr<uint64_t> AsUint(const Value& v, const std::string& where) {
  // Two messages, as strtoull would need: a sign is the wrong kind of value,
  // a fraction, exponent or overflow the wrong size.
  if (v.kind != Value::Kind::kNumber || v.text[0] == '-') {
    return TypeError(v, where, "a non-negative integer");
  }
  const std::optional<uint64_t> u = v.AsUint();
  if (!u.has_value()) return TypeError(v, where, "a 64-bit non-negative integer");
  return *u;
}

absl::StatusOr<int64_t> AsInt(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kNumber) return TypeError(v, where, "an integer");
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(v.text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return TypeError(v, where, "a 64-bit integer");
  return static_cast<int64_t>(i);
}

absl::StatusOr<double> AsDouble(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kNumber) return TypeError(v, where, "a number");
  errno = 0;
  const double d = std::strtod(v.text.c_str(), nullptr);
  if (errno != 0 || !std::isfinite(d)) return TypeError(v, where, "a finite double");
  return d;
}

absl::StatusOr<std::string> AsString(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kString) return TypeError(v, where, "a string");
  return v.text;
}

absl::StatusOr<const std::vector<Value>*> AsArray(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kArray) return TypeError(v, where, "an array");
  return &v.items;
}

}  // namespace zero::json
