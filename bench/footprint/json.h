// A small, strict JSON reader (RFC 8259) that remembers where every value
// starts, so a model file's errors can say file:line:column. Strict means:
// no comments, no trailing commas, no leading zeros, no NaN, no control
// characters or invalid UTF-8 in strings, no lone surrogates, no duplicate
// keys in an object, nothing after the top-level value, at most 200 levels
// of nesting. Plus JsonQuote for writers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zero::footprint {

// 1-based; columns count bytes (a tab is one column).
struct JsonPos {
  int line = 1;
  int column = 1;
};

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  JsonPos pos;  // where the value starts
  bool boolean = false;
  // kString: the decoded string (UTF-8); kNumber: the literal as written.
  std::string text;
  std::vector<JsonValue> items;                            // kArray
  std::vector<std::pair<std::string, JsonValue>> members;  // kObject, in file order
  std::vector<JsonPos> key_pos;                            // kObject: where each key starts

  // The member named `key` of an object, or null.
  const JsonValue* Find(std::string_view key) const;
  // A number written as a plain non-negative integer ("12", not "12.0" or
  // "1.2e1") that fits in 64 bits.
  std::optional<uint64_t> AsUint() const;
};

// "an object", "an array", "a string", "a number", "true or false", "null".
std::string_view KindName(JsonValue::Kind kind);

// InvalidArgument "LINE:COL: what is wrong" on malformed input.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

// `text` as a JSON string literal, quotes included (UTF-8 passes through).
std::string JsonQuote(std::string_view text);

}  // namespace zero::footprint
