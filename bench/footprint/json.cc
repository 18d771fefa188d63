#include "bench/footprint/json.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "memory/status_macros.h"

namespace zero::footprint {
namespace {

constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> Document() {
    SkipSpace();
    ASSIGN_OR_RETURN(JsonValue value, Value(0));
    SkipSpace();
    if (i_ < text_.size()) return Error("unexpected " + Describe() + " after the JSON value");
    return value;
  }

 private:
  absl::Status Error(const std::string& what) const { return ErrorAt(pos_, what); }
  static absl::Status ErrorAt(JsonPos pos, const std::string& what) {
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

  absl::StatusOr<JsonValue> Value(int depth) {
    JsonValue v;
    v.pos = pos_;
    switch (Peek()) {
      case '{': return Object(depth);
      case '[': return Array(depth);
      case '"':
        v.kind = JsonValue::Kind::kString;
        RETURN_IF_ERROR(String(&v.text));
        return v;
      case 't':
      case 'f':
      case 'n': {
        RETURN_IF_ERROR(Literal(&v));
        return v;
      }
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) {
          v.kind = JsonValue::Kind::kNumber;
          RETURN_IF_ERROR(Number(&v.text));
          return v;
        }
        return Error("expected a value, found " + Describe());
    }
  }

  absl::Status Literal(JsonValue* v) {
    for (auto [word, kind, value] : {std::tuple{"true", JsonValue::Kind::kBool, true},
                                     std::tuple{"false", JsonValue::Kind::kBool, false},
                                     std::tuple{"null", JsonValue::Kind::kNull, false}}) {
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
    } else {
      RETURN_IF_ERROR(Digits("in the number"));
    }
    if (Peek() == '.') {
      Advance();
      RETURN_IF_ERROR(Digits("after the decimal point"));
    }
    if (Peek() == 'e' || Peek() == 'E') {
      Advance();
      if (Peek() == '+' || Peek() == '-') Advance();
      RETURN_IF_ERROR(Digits("in the exponent"));
    }
    *literal = std::string(text_.substr(start, i_ - start));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> Hex4() {
    uint32_t value = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = Peek();
      int digit = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
      if (digit < 0) return Error("expected 4 hex digits after \\u, found " + Describe());
      value = value * 16 + digit;
      Advance();
    }
    return value;
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
    const JsonPos at = pos_;
    const char c = Peek();
    static constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
    if (const size_t k = kFrom.find(c); c != '\0' && k != std::string_view::npos) {
      out->push_back(kTo[k]);
      Advance();
      return absl::OkStatus();
    }
    if (c != 'u') return Error("invalid escape \\" + Describe());
    Advance();
    ASSIGN_OR_RETURN(uint32_t cp, Hex4());
    if (cp >= 0xdc00 && cp <= 0xdfff) return ErrorAt(at, "lone low surrogate in \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (text_.substr(i_, 2) != "\\u") return ErrorAt(at, "high surrogate without its pair");
      Advance();
      Advance();
      ASSIGN_OR_RETURN(uint32_t low, Hex4());
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
    const uint32_t min = extra == 1 ? 0x80 : extra == 2 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return Error("invalid UTF-8 sequence in string");
    }
    out->append(text_.substr(i_, extra + 1));
    for (int k = 0; k <= extra; ++k) Advance();
    return absl::OkStatus();
  }

  absl::Status String(std::string* out) {
    const JsonPos start = pos_;
    Advance();  // the opening quote
    while (true) {
      if (AtEnd()) return ErrorAt(start, "unterminated string");
      const unsigned char c = Peek();
      if (c == '"') {
        Advance();
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("control character in string (escape it)");
      if (c == '\\') {
        Advance();
        RETURN_IF_ERROR(Escape(out));
      } else if (c >= 0x80) {
        RETURN_IF_ERROR(Utf8(out));
      } else {
        out->push_back(static_cast<char>(c));
        Advance();
      }
    }
  }

  absl::StatusOr<JsonValue> Array(int depth) {
    JsonValue v;
    v.kind = JsonValue::Kind::kArray;
    v.pos = pos_;
    if (depth >= kMaxDepth) return Error("nesting deeper than 200 levels");
    Advance();
    SkipSpace();
    if (Peek() == ']') {
      Advance();
      return v;
    }
    while (true) {
      SkipSpace();
      if (Peek() == ']') return Error("trailing comma before ']'");
      ASSIGN_OR_RETURN(JsonValue item, Value(depth + 1));
      v.items.push_back(std::move(item));
      SkipSpace();
      if (Peek() == ']') {
        Advance();
        return v;
      }
      RETURN_IF_ERROR(Expect(',', "or ']' after an array element"));
    }
  }

  absl::StatusOr<JsonValue> Object(int depth) {
    JsonValue v;
    v.kind = JsonValue::Kind::kObject;
    v.pos = pos_;
    if (depth >= kMaxDepth) return Error("nesting deeper than 200 levels");
    Advance();
    SkipSpace();
    if (Peek() == '}') {
      Advance();
      return v;
    }
    while (true) {
      SkipSpace();
      if (Peek() == '}') return Error("trailing comma before '}'");
      if (Peek() != '"') return Error("expected a string key, found " + Describe());
      const JsonPos key_pos = pos_;
      std::string key;
      RETURN_IF_ERROR(String(&key));
      if (v.Find(key) != nullptr) return ErrorAt(key_pos, "duplicate key \"" + key + "\"");
      SkipSpace();
      RETURN_IF_ERROR(Expect(':', "after an object key"));
      SkipSpace();
      ASSIGN_OR_RETURN(JsonValue member, Value(depth + 1));
      v.members.emplace_back(std::move(key), std::move(member));
      v.key_pos.push_back(key_pos);
      SkipSpace();
      if (Peek() == '}') {
        Advance();
        return v;
      }
      RETURN_IF_ERROR(Expect(',', "or '}' after an object member"));
    }
  }

  std::string_view text_;
  size_t i_ = 0;
  JsonPos pos_;
};

}  // namespace

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::optional<uint64_t> JsonValue::AsUint() const {
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

std::string_view KindName(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::kNull: return "null";
    case JsonValue::Kind::kBool: return "true or false";
    case JsonValue::Kind::kNumber: return "a number";
    case JsonValue::Kind::kString: return "a string";
    case JsonValue::Kind::kArray: return "an array";
    case JsonValue::Kind::kObject: return "an object";
  }
  return "?";
}

absl::StatusOr<JsonValue> ParseJson(std::string_view text) { return Parser(text).Document(); }

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (const char ch : text) {
    const unsigned char c = ch;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
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

}  // namespace zero::footprint
