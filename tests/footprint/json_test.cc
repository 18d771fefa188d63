// The strict JSON reader: values, positions, and one message per mistake.
#include "bench/footprint/json.h"

#include <string>

#include "gtest/gtest.h"

namespace zero::footprint {
namespace {

TEST(JsonTest, ReadsEveryKindWithPositions) {
  const std::string text =
      "{\n"
      "  \"name\": \"m\\u00e9\\ud83d\\ude00\\n\",\n"
      "  \"shape\": [4096, -1.5e3, 0],\n"
      "  \"flags\": [true, false, null],\n"
      "  \"empty\": {}, \"none\": []\n"
      "}\n";
  absl::StatusOr<JsonValue> v = ParseJson(text);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kind, JsonValue::Kind::kObject);
  ASSERT_EQ(v->members.size(), 5u);
  EXPECT_EQ(v->Find("name")->text, "m\xc3\xa9\xf0\x9f\x98\x80\n");
  EXPECT_EQ(v->key_pos[1].line, 3);
  EXPECT_EQ(v->key_pos[1].column, 3);
  const JsonValue& shape = *v->Find("shape");
  EXPECT_EQ(shape.pos.line, 3);
  EXPECT_EQ(shape.pos.column, 12);
  ASSERT_EQ(shape.items.size(), 3u);
  EXPECT_EQ(shape.items[0].AsUint(), 4096u);
  EXPECT_EQ(shape.items[1].text, "-1.5e3");
  EXPECT_FALSE(shape.items[1].AsUint().has_value());
  EXPECT_EQ(shape.items[2].AsUint(), 0u);
  EXPECT_EQ(shape.items[1].pos.column, 19);
  const JsonValue& flags = *v->Find("flags");
  EXPECT_TRUE(flags.items[0].boolean);
  EXPECT_EQ(flags.items[1].kind, JsonValue::Kind::kBool);
  EXPECT_EQ(flags.items[2].kind, JsonValue::Kind::kNull);
  EXPECT_TRUE(v->Find("empty")->members.empty());
  EXPECT_EQ(v->Find("missing"), nullptr);
}

TEST(JsonTest, AsUintRejectsWhatIsNotAPlainInteger) {
  for (const char* text : {"12.0", "1e3", "-1", "18446744073709551616", "\"12\""}) {
    absl::StatusOr<JsonValue> v = ParseJson(text);
    ASSERT_TRUE(v.ok()) << text;
    EXPECT_FALSE(v->AsUint().has_value()) << text;
  }
  EXPECT_EQ(ParseJson("18446744073709551615")->AsUint(), UINT64_MAX);
}

struct Bad {
  const char* text;
  const char* message;
};

class MalformedJson : public ::testing::TestWithParam<Bad> {};

TEST_P(MalformedJson, SaysWhatAndWhere) {
  absl::StatusOr<JsonValue> v = ParseJson(GetParam().text);
  ASSERT_FALSE(v.ok()) << GetParam().text;
  EXPECT_TRUE(absl::IsInvalidArgument(v.status()));
  EXPECT_EQ(std::string(v.status().message()), GetParam().message) << GetParam().text;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedJson,
    ::testing::Values(Bad{"", "1:1: expected a value, found end of input"},
                      Bad{"  \n ", "2:2: expected a value, found end of input"},
                      Bad{"{\"a\": 1,}", "1:9: trailing comma before '}'"},
                      Bad{"[1, 2,\n]", "2:1: trailing comma before ']'"},
                      Bad{"{\"a\" 1}", "1:6: expected ':' after an object key, found '1'"},
                      Bad{"{\"a\": 1 \"b\": 2}",
                          "1:9: expected ',' or '}' after an object member, found '\"'"},
                      Bad{"[1 2]", "1:4: expected ',' or ']' after an array element, found '2'"},
                      Bad{"{a: 1}", "1:2: expected a string key, found 'a'"},
                      Bad{"{\"a\": 1, \"a\": 2}", "1:10: duplicate key \"a\""},
                      Bad{"[01]", "1:3: leading zeros are not allowed in numbers"},
                      Bad{"[1.]", "1:4: expected a digit after the decimal point, found ']'"},
                      Bad{"[1e]", "1:4: expected a digit in the exponent, found ']'"},
                      Bad{"[-]", "1:3: expected a digit in the number, found ']'"},
                      Bad{"[NaN]", "1:2: expected a value, found 'N'"},
                      Bad{"[tru]", "1:2: expected a value, found 't'"},
                      Bad{"\"abc", "1:1: unterminated string"},
                      Bad{"\"a\tb\"", "1:3: control character in string (escape it)"},
                      Bad{"\"\\x\"", "1:3: invalid escape \\'x'"},
                      Bad{"\"\\u12g4\"", "1:6: expected 4 hex digits after \\u, found 'g'"},
                      Bad{"\"\\udc00\"", "1:3: lone low surrogate in \\u escape"},
                      Bad{"\"\\ud83d x\"", "1:3: high surrogate without its pair"},
                      Bad{"\"\xff\"", "1:2: invalid UTF-8 byte 0xff in string"},
                      Bad{"\"\xc3\"", "1:2: truncated UTF-8 sequence in string"},
                      Bad{"\"\xed\xa0\x80\"", "1:2: invalid UTF-8 sequence in string"},
                      Bad{"{} {}", "1:4: unexpected '{' after the JSON value"},
                      Bad{"// comment\n{}", "1:1: expected a value, found '/'"},
                      Bad{"[1]\n\n  x", "3:3: unexpected 'x' after the JSON value"}));

TEST(JsonTest, NestingIsBounded) {
  EXPECT_TRUE(ParseJson(std::string(200, '[') + std::string(200, ']')).ok());
  absl::StatusOr<JsonValue> deep = ParseJson(std::string(201, '[') + std::string(201, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "1:201: nesting deeper than 200 levels");
}

TEST(JsonTest, QuoteEscapesWhatJsonNeeds) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  const std::string round = "tab\there \xc3\xa9";
  EXPECT_EQ(ParseJson(JsonQuote(round))->text, round);
}

}  // namespace
}  // namespace zero::footprint
