// The small JSON subset the checkpoint files use (the manifest and the
// safetensors header): a parser into a plain tree and typed accessors whose
// errors say where in the document a value was expected. Numbers keep their
// text, so 64-bit integers and doubles (written with %.17g) come back exact.
// Not a general-purpose library: no streaming, inputs are at most a few
// hundred MiB (a manifest), and nesting is capped at 64 levels.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zero::json {

struct Value {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;          // a number's text or a string's decoded value
  std::vector<Value> items;  // kArray
  std::vector<std::pair<std::string, Value>> members;  // kObject, in document order

  // The first member named `key`, or null.
  const Value* Find(std::string_view key) const;
};

// InvalidArgument naming the byte offset of the first error; trailing
// non-space text is an error.
absl::StatusOr<Value> Parse(std::string_view text);

// `s` as a JSON string literal, quotes included.
std::string Quote(std::string_view s);

// Typed access: `where` names the value in messages, e.g. "params[3].numel".
absl::StatusOr<const Value*> Member(const Value& object, std::string_view key,
                                    const std::string& where);
absl::StatusOr<uint64_t> AsUint(const Value& v, const std::string& where);
absl::StatusOr<int64_t> AsInt(const Value& v, const std::string& where);
absl::StatusOr<double> AsDouble(const Value& v, const std::string& where);
absl::StatusOr<std::string> AsString(const Value& v, const std::string& where);
absl::StatusOr<const std::vector<Value>*> AsArray(const Value& v, const std::string& where);

}  // namespace zero::json
