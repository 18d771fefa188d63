// The project's one JSON reader and string quoter: a strict parser (RFC 8259)
// into a plain tree that remembers where every value starts, so errors in a
// model file or a checkpoint manifest can say LINE:COLUMN, plus typed
// accessors whose errors name the value (`where`) and its position.
//
// Strict means: no comments, no trailing commas, no leading zeros, no NaN, no
// control characters or invalid UTF-8 in strings, no lone surrogates, no
// duplicate keys in an object, nothing after the top-level value, at most 200
// levels of nesting. Numbers keep their text, so 64-bit integers and doubles
// written with %.17g come back exact. Not a streaming parser: the inputs are
// files of at most a few hundred MiB.
//
// Why hand-written rather than on nlohmann-json (issue 16; the figures come
// from `bazel run -c opt //bench:json_bench` and a probe of the 27 malformed
// inputs in tests/memory/json_test.cc against nlohmann 3.11.2):
// - Positions: its SAX callbacks carry none, so every Pos here would need a
//   second scanner walking beside it.
// - Messages: its errors say where it stopped, not where the mistake is: of
//   those 27 inputs it accepts one (a duplicate key: the last wins) and puts
//   7 of the other 26 at another LINE:COL ("[tru]" at 1:5, not 1:2; an
//   unterminated string at its end, not its quote); none has this wording.
//   Keeping these messages means re-scanning the failing token, i.e. this
//   tokenizer's error paths again.
// - Speed: building this same tree through its SAX parser, with no positions
//   and no messages, takes 3.1 s on a 50 MB manifest; this reader 2.2 s.
// - It has no nesting limit (a handler could add one).
// The parser below is about 280 lines; a nlohmann-based one would be a SAX
// handler, a position scanner and a message translator of about as many.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zero::json {

// 1-based; columns count bytes (a tab is one column).
struct Pos {
  int line = 1;
  int column = 1;
};

struct Value {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  // Defined in json.cc, where Value is complete: clang 14 with libstdc++ 12
  // otherwise instantiates the members' destructors inside this class, on
  // std::pair<std::string, Value> while Value is still incomplete.
  Value();
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();

  Kind kind = Kind::kNull;
  Pos pos;  // where the value starts
  bool boolean = false;
  // kString: the decoded string (UTF-8); kNumber: the literal as written.
  std::string text;
  std::vector<Value> items;                            // kArray
  std::vector<std::pair<std::string, Value>> members;  // kObject, in document order
  std::vector<Pos> key_pos;                            // kObject: where each key starts

  // The member named `key` of an object, or null.
  const Value* Find(std::string_view key) const;
  // A number written as a plain non-negative integer ("12", not "12.0" or
  // "1.2e1") that fits in 64 bits.
  std::optional<uint64_t> AsUint() const;
};

// "an object", "an array", "a string", "a number", "true or false", "null".
std::string_view KindName(Value::Kind kind);

// InvalidArgument "LINE:COL: what is wrong" on malformed input.
absl::StatusOr<Value> Parse(std::string_view text);

// `text` as a JSON string literal, quotes included (valid UTF-8 passes
// through; bytes that are not, as ValidUtf8 gives them).
std::string Quote(std::string_view text);

// `text` with each byte that is not part of a valid UTF-8 sequence replaced
// by U+FFFD (a file name can hold any bytes; JSON, XML and the CSV readers
// of the reports take only UTF-8).
std::string ValidUtf8(std::string_view text);

// Typed access: `where` names the value in messages, e.g. "params[3].numel";
// errors are InvalidArgument "LINE:COL: 'where' is not ..." at the value (at
// the object for a missing member).
absl::StatusOr<const Value*> Member(const Value& object, std::string_view key,
                                    const std::string& where);
// A non-negative integer that fits in 64 bits ("12", not "12.0" or "1e1").
absl::StatusOr<uint64_t> AsUint(const Value& v, const std::string& where);
// An integer that fits in 64 bits, sign allowed.
absl::StatusOr<int64_t> AsInt(const Value& v, const std::string& where);
// Any number whose double is finite and not out of range (strtod's ERANGE).
absl::StatusOr<double> AsDouble(const Value& v, const std::string& where);
absl::StatusOr<std::string> AsString(const Value& v, const std::string& where);
absl::StatusOr<const std::vector<Value>*> AsArray(const Value& v, const std::string& where);

}  // namespace zero::json
