// Why memory/json.cc is not built on nlohmann-json (issue 16): parse time of
// a checkpoint-manifest-shaped document, best of 3, for
//   - zero::json::Parse (values, positions, duplicate keys refused);
//   - nlohmann's SAX parser building the same zero::json::Value tree, without
//     positions (SAX callbacks carry none) and without this reader's
//     messages: a lower bound for a reader put on nlohmann;
//   - nlohmann's SAX parser with a handler that keeps nothing (its lexer).
// Plus what nlohmann's own parser accepts that json.h refuses.
//   bazel run -c opt //bench:json_bench -- --mb=50
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "base/json.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, mb, 50, "size of the generated document, in MB (1e6 bytes)");

namespace {

using zero::json::Value;

// Shaped like zero/checkpoint/internal/manifest.cc's output: one line per parameter,
// six chunk records each, 64-bit offsets and checksums.
std::string Manifest(size_t bytes) {
  std::string out = "{\"format\": \"zero-checkpoint\", \"version\": 1, \"params\": [";
  uint64_t x = 88172645463325252ull;  // xorshift64: the same document every run
  auto next = [&x] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
  for (int i = 0; out.size() < bytes; ++i) {
    absl::StrAppendFormat(&out, "%s{\"name\": \"model.layers.%d.mlp.w%d.weight\", \"numel\": %d, "
                          "\"chunks\": [", i ? ",\n  " : "\n  ", i / 4, i % 4, next() >> 34);
    for (int c = 0; c < 6; ++c) {
      absl::StrAppendFormat(&out,
                            "%s{\"buffer\": %d, \"begin\": %d, \"end\": %d, \"file\": %d, "
                            "\"offset\": %d, \"crc32c\": %d}",
                            c ? ", " : "", c / 2, (c % 2) << 20, ((c % 2) + 1) << 20,
                            next() % 64, next() >> 24, next() >> 32);
    }
    out += "]}";
  }
  return out + "\n]}\n";
}

// Builds zero::json::Value with nlohmann's SAX callbacks; refuses duplicate
// keys as json.h does. Number text comes back from the binary value, since
// integer callbacks carry no text.
class TreeSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  Value root;

  bool null() override { return Put(Value::Kind::kNull) != nullptr; }
  bool boolean(bool b) override { return (Put(Value::Kind::kBool)->boolean = b, true); }
  bool number_integer(int64_t i) override { return Number(std::to_string(i)); }
  bool number_unsigned(uint64_t u) override { return Number(std::to_string(u)); }
  bool number_float(double, const std::string& text) override { return Number(text); }
  bool string(std::string& s) override { return (Put(Value::Kind::kString)->text = s, true); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return Open(Value::Kind::kObject); }
  bool key(std::string& k) override {
    Value* object = open_.back();
    if (object->Find(k) != nullptr) return false;
    object->members.emplace_back(std::move(k), Value());
    return true;
  }
  bool end_object() override { return (open_.pop_back(), true); }
  bool start_array(std::size_t) override { return Open(Value::Kind::kArray); }
  bool end_array() override { return (open_.pop_back(), true); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  Value* Put(Value::Kind kind) {
    Value* v = open_.empty()                                ? &root
               : open_.back()->kind == Value::Kind::kArray ? &open_.back()->items.emplace_back()
                                                            : &open_.back()->members.back().second;
    v->kind = kind;
    return v;
  }
  bool Number(std::string text) { return (Put(Value::Kind::kNumber)->text = std::move(text), true); }
  bool Open(Value::Kind kind) { return (open_.push_back(Put(kind)), true); }

  std::vector<Value*> open_;
};

class NullSax : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(int64_t) override { return true; }
  bool number_unsigned(uint64_t) override { return true; }
  bool number_float(double, const std::string&) override { return true; }
  bool string(std::string&) override { return true; }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return true; }
  bool key(std::string&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

template <typename F>
void Time(const char* what, double mb, F parse) {
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    if (!parse()) {
      std::printf("%s: failed\n", what);
      return;
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  std::printf("%-52s %6.3f s  %5.0f MB/s\n", what, best, mb / best);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string text = Manifest(static_cast<size_t>(absl::GetFlag(FLAGS_mb)) * 1000000);
  const double mb = text.size() / 1e6;
  std::printf("%.1f MB manifest-shaped document, best of 3\n", mb);
  Time("zero::json::Parse (positions, strict messages)", mb,
       [&] { return zero::json::Parse(text).ok(); });
  Time("nlohmann SAX -> the same tree, no positions", mb, [&] {
    TreeSax sax;
    return nlohmann::json::sax_parse(text, &sax);
  });
  Time("nlohmann SAX, handler keeps nothing (lexer alone)", mb, [&] {
    NullSax sax;
    return nlohmann::json::sax_parse(text, &sax);
  });
  const char* dup = R"({"a": 1, "a": 2})";
  std::printf("duplicate keys %s: zero::json %s, nlohmann::json::parse %s\n", dup,
              zero::json::Parse(dup).ok() ? "accepts" : "refuses",
              nlohmann::json::accept(dup) ? "accepts (last one wins)" : "refuses");
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  std::printf("1000 levels of nesting: zero::json %s, nlohmann %s\n",
              zero::json::Parse(deep).ok() ? "accepts" : "refuses (over 200)",
              nlohmann::json::accept(deep) ? "accepts (no limit)" : "refuses");
  return 0;
}
