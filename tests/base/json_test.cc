// The strict JSON reader: values, positions, one message per mistake, and
// the typed accessors that name the value and where it stands.
#include "base/json.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"

namespace zero::json {
namespace {

TEST(JsonTest, ReadsEveryKindWithPositions) {
  const std::string text =
      "{\n"
      "  \"name\": \"m\\u00e9\\ud83d\\ude00\\n\",\n"
      "  \"shape\": [4096, -1.5e3, 0],\n"
      "  \"flags\": [true, false, null],\n"
      "  \"empty\": {}, \"none\": []\n"
      "}\n";
  absl::StatusOr<Value> v = Parse(text);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kind, Value::Kind::kObject);
  ASSERT_EQ(v->members.size(), 5u);
  EXPECT_EQ(v->Find("name")->text, "m\xc3\xa9\xf0\x9f\x98\x80\n");
  EXPECT_EQ(v->key_pos[1].line, 3);
  EXPECT_EQ(v->key_pos[1].column, 3);
  const Value& shape = *v->Find("shape");
  EXPECT_EQ(shape.pos.line, 3);
  EXPECT_EQ(shape.pos.column, 12);
  ASSERT_EQ(shape.items.size(), 3u);
  EXPECT_EQ(shape.items[0].AsUint(), 4096u);
  EXPECT_EQ(shape.items[1].text, "-1.5e3");
  EXPECT_FALSE(shape.items[1].AsUint().has_value());
  EXPECT_EQ(shape.items[2].AsUint(), 0u);
  EXPECT_EQ(shape.items[1].pos.column, 19);
  const Value& flags = *v->Find("flags");
  EXPECT_TRUE(flags.items[0].boolean);
  EXPECT_EQ(flags.items[1].kind, Value::Kind::kBool);
  EXPECT_EQ(flags.items[2].kind, Value::Kind::kNull);
  EXPECT_TRUE(v->Find("empty")->members.empty());
  EXPECT_EQ(v->Find("missing"), nullptr);
}

TEST(JsonTest, AsUintRejectsWhatIsNotAPlainInteger) {
  for (const char* text : {"12.0", "1e3", "-1", "18446744073709551616", "\"12\""}) {
    absl::StatusOr<Value> v = Parse(text);
    ASSERT_TRUE(v.ok()) << text;
    EXPECT_FALSE(v->AsUint().has_value()) << text;
  }
  EXPECT_EQ(Parse("18446744073709551615")->AsUint(), UINT64_MAX);
}

struct Bad {
  const char* text;
  const char* message;
};

class MalformedJson : public ::testing::TestWithParam<Bad> {};

TEST_P(MalformedJson, SaysWhatAndWhere) {
  absl::StatusOr<Value> v = Parse(GetParam().text);
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
  EXPECT_TRUE(Parse(std::string(200, '[') + std::string(200, ']')).ok());
  absl::StatusOr<Value> deep = Parse(std::string(201, '[') + std::string(201, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().message(), "1:201: nesting deeper than 200 levels");
}

TEST(JsonTest, QuoteEscapesWhatJsonNeeds) {
  EXPECT_EQ(Quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  const std::string round = "tab\there \xc3\xa9";
  EXPECT_EQ(Parse(Quote(round))->text, round);
}

// A file name can hold any bytes: what is not UTF-8 becomes U+FFFD, so the
// reports stay documents their readers take.
TEST(JsonTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8("bad\xffname"), "bad" + fffd + "name");
  EXPECT_EQ(ValidUtf8("\xc3"), fffd) << "cut short";
  EXPECT_EQ(ValidUtf8("\xc0\xaf"), fffd + fffd) << "overlong";
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), fffd + fffd + fffd) << "a surrogate";
  EXPECT_EQ(ValidUtf8("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd) << "past U+10FFFF";
  const std::string fine = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  EXPECT_EQ(ValidUtf8(fine), fine);
  absl::StatusOr<Value> parsed = Parse(Quote("bad\xffname"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->text, "bad" + fffd + "name");
}

// Typed access: the value's kind and size are checked, and a message names
// both the caller's path to the value and where it stands in the document.
class TypedAccess : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Value> v = Parse(
        "{\"u\": 18446744073709551615, \"neg\": -9223372036854775808,\n"
        " \"big\": 18446744073709551616, \"frac\": 2.5, \"huge\": 1e999,\n"
        " \"s\": \"x\", \"list\": [1, \"two\"], \"nothing\": null}");
    ASSERT_TRUE(v.ok()) << v.status();
    root_ = *std::move(v);
  }
  const Value& At(std::string_view key) const { return *root_.Find(key); }
  static std::string Message(const absl::Status& s) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    return std::string(s.message());
  }

  Value root_;
};

TEST_F(TypedAccess, MemberFindsOrSaysWhatIsMissing) {
  absl::StatusOr<const Value*> s = Member(root_, "s", "manifest");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->text, "x");
  EXPECT_EQ(Message(Member(root_, "gone", "manifest").status()),
            "1:1: 'manifest' has no member 'gone'");
  EXPECT_EQ(Message(Member(At("list"), "s", "list").status()), "3:20: 'list' is not an object");
}

TEST_F(TypedAccess, AsUintTakesPlainNonNegativeIntegers) {
  EXPECT_EQ(*AsUint(At("u"), "u"), UINT64_MAX);
  EXPECT_EQ(*AsUint(At("list").items[0], "list[0]"), 1u);
  EXPECT_EQ(Message(AsUint(At("neg"), "neg").status()),
            "1:36: 'neg' is not a non-negative integer");
  EXPECT_EQ(Message(AsUint(At("s"), "s").status()), "3:7: 's' is not a non-negative integer");
  EXPECT_EQ(Message(AsUint(At("big"), "big").status()),
            "2:9: 'big' is not a 64-bit non-negative integer");
  EXPECT_EQ(Message(AsUint(At("frac"), "frac").status()),
            "2:39: 'frac' is not a 64-bit non-negative integer");
}

TEST_F(TypedAccess, AsIntTakesSigned64BitIntegers) {
  EXPECT_EQ(*AsInt(At("neg"), "neg"), INT64_MIN);
  EXPECT_EQ(Message(AsInt(At("u"), "u").status()), "1:7: 'u' is not a 64-bit integer");
  EXPECT_EQ(Message(AsInt(At("frac"), "frac").status()), "2:39: 'frac' is not a 64-bit integer");
  EXPECT_EQ(Message(AsInt(At("nothing"), "nothing").status()), "3:43: 'nothing' is not an integer");
}

TEST_F(TypedAccess, AsDoubleTakesFiniteNumbers) {
  EXPECT_EQ(*AsDouble(At("frac"), "frac"), 2.5);
  EXPECT_EQ(*AsDouble(At("neg"), "neg"), -9223372036854775808.0);
  EXPECT_EQ(Message(AsDouble(At("huge"), "huge").status()), "2:52: 'huge' is not a finite double");
  EXPECT_EQ(Message(AsDouble(At("s"), "s").status()), "3:7: 's' is not a number");
  // %.17g round trips exactly.
  const double third = 1.0 / 3;
  EXPECT_EQ(*AsDouble(*Parse(absl::StrFormat("%.17g", third)), "third"), third);
}

TEST_F(TypedAccess, AsStringAndAsArrayCheckTheKind) {
  EXPECT_EQ(*AsString(At("s"), "s"), "x");
  EXPECT_EQ(Message(AsString(At("u"), "u").status()), "1:7: 'u' is not a string");
  absl::StatusOr<const std::vector<Value>*> list = AsArray(At("list"), "list");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ((*list)->size(), 2u);
  EXPECT_EQ(Message(AsArray(At("s"), "s").status()), "3:7: 's' is not an array");
}

}  // namespace
}  // namespace zero::json
