#include "zero/checkpoint/json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zero::json {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<Value> Document() {
    Value v;
    if (absl::Status s = ParseValue(v, 0); !s.ok()) return s;
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the document");
    return v;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("JSON error at byte %d: %s", pos_, what));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::Status ParseValue(Value& v, int depth) {
    if (depth > kMaxDepth) return Error("nested too deeply");
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return ParseObject(v, depth);
    if (c == '[') return ParseArray(v, depth);
    if (c == '"') {
      v.kind = Value::Kind::kString;
      return ParseString(v.text);
    }
    if (ConsumeWord("true") || ConsumeWord("false")) {
      v.kind = Value::Kind::kBool;
      v.boolean = text_[pos_ - 4] == 't';  // the word just consumed was "true"
      return absl::OkStatus();
    }
    if (ConsumeWord("null")) return absl::OkStatus();
    return ParseNumber(v);
  }

  absl::Status ParseObject(Value& v, int depth) {
    v.kind = Value::Kind::kObject;
    ++pos_;
    if (Consume('}')) return absl::OkStatus();
    do {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a member name");
      std::string key;
      if (absl::Status s = ParseString(key); !s.ok()) return s;
      if (!Consume(':')) return Error("expected ':'");
      v.members.emplace_back(std::move(key), Value());
      if (absl::Status s = ParseValue(v.members.back().second, depth + 1); !s.ok()) return s;
    } while (Consume(','));
    return Consume('}') ? absl::OkStatus() : Error("expected ',' or '}'");
  }

  absl::Status ParseArray(Value& v, int depth) {
    v.kind = Value::Kind::kArray;
    ++pos_;
    if (Consume(']')) return absl::OkStatus();
    do {
      v.items.emplace_back();
      if (absl::Status s = ParseValue(v.items.back(), depth + 1); !s.ok()) return s;
    } while (Consume(','));
    return Consume(']') ? absl::OkStatus() : Error("expected ',' or ']'");
  }

  absl::Status ParseNumber(Value& v) {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (!digits()) return Error("expected a value");
    if (pos_ < text_.size() && text_[pos_] == '.' && (++pos_, !digits())) {
      return Error("expected digits after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits()) return Error("expected an exponent");
    }
    v.kind = Value::Kind::kNumber;
    v.text = std::string(text_.substr(start, pos_ - start));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> Hex4() {
    if (pos_ + 4 > text_.size()) return Error("truncated \\u escape");
    uint32_t u = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) return Error("bad \\u escape");
      u = u * 16 + d;
    }
    return u;
  }

  absl::Status AppendCodePoint(std::string& out) {
    absl::StatusOr<uint32_t> u = Hex4();
    if (!u.ok()) return u.status();
    uint32_t cp = *u;
    if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
      if (!ConsumeWord("\\u")) return Error("lone surrogate");
      absl::StatusOr<uint32_t> lo = Hex4();
      if (!lo.ok()) return lo.status();
      if (*lo < 0xDC00 || *lo >= 0xE000) return Error("bad surrogate pair");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (*lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      return Error("lone surrogate");
    }
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
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string& out) {
    ++pos_;  // the opening quote
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (absl::Status s = AppendCodePoint(out); !s.ok()) return s;
          break;
        default:
          return Error("bad escape");
      }
    }
    return Error("unterminated string");
  }

  std::string_view text_;
  size_t pos_ = 0;
};

absl::Status TypeError(const std::string& where, std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrFormat("'%s' is not %s", where, expected));
}

}  // namespace

const Value* Value::Find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

absl::StatusOr<Value> Parse(std::string_view text) { return Parser(text).Document(); }

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
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
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

absl::StatusOr<const Value*> Member(const Value& object, std::string_view key,
                                    const std::string& where) {
  if (object.kind != Value::Kind::kObject) return TypeError(where, "an object");
  const Value* v = object.Find(key);
  if (v == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s' has no member '%s'", where, key));
  }
  return v;
}

absl::StatusOr<uint64_t> AsUint(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kNumber || v.text[0] == '-') {
    return TypeError(where, "a non-negative integer");
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long u = std::strtoull(v.text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return TypeError(where, "a 64-bit non-negative integer");
  return static_cast<uint64_t>(u);
}

absl::StatusOr<int64_t> AsInt(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kNumber) return TypeError(where, "an integer");
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(v.text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return TypeError(where, "a 64-bit integer");
  return static_cast<int64_t>(i);
}

absl::StatusOr<double> AsDouble(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kNumber) return TypeError(where, "a number");
  errno = 0;
  const double d = std::strtod(v.text.c_str(), nullptr);
  if (errno != 0 || !std::isfinite(d)) return TypeError(where, "a finite double");
  return d;
}

absl::StatusOr<std::string> AsString(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kString) return TypeError(where, "a string");
  return v.text;
}

absl::StatusOr<const std::vector<Value>*> AsArray(const Value& v, const std::string& where) {
  if (v.kind != Value::Kind::kArray) return TypeError(where, "an array");
  return &v.items;
}

}  // namespace zero::json
