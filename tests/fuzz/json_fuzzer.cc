// The JSON reader (base/json.h) on any bytes: Parse either fails with a
// message or gives a tree whose typed accessors and re-quoted strings
// round-trip.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/json.h"

namespace {

void Walk(const zero::json::Value& v, int depth) {
  using Kind = zero::json::Value::Kind;
  (void)zero::json::AsUint(v, "v");
  (void)zero::json::AsInt(v, "v");
  (void)zero::json::AsDouble(v, "v");
  if (v.kind == Kind::kString) {
    // Quote then Parse gives the same string back.
    auto again = zero::json::Parse(zero::json::Quote(v.text));
    if (!again.ok() || again->text != v.text) std::abort();
  }
  for (const auto& item : v.items) Walk(item, depth + 1);
  for (size_t i = 0; i < v.members.size(); ++i) {
    if (v.Find(v.members[i].first) != &v.members[i].second) std::abort();
    Walk(v.members[i].second, depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<zero::json::Value> value = zero::json::Parse(text);
  if (value.ok()) Walk(*value, 0);
  return 0;
}
