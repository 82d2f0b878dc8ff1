// JSON Schema to GBNF (models/grammar/json_schema.h): the exact parts
// checked value by value (integer ranges over every integer near them,
// number bounds at and around each bound, every calendar day of leap and
// common years), the shape of objects (order, optional and extra
// properties), and each refusal's message naming the keyword and its JSON
// pointer. tests/models/grammar_schemas.py validates random walks of many
// schemas with jsonschema itself.
#include <catch2/catch.hpp>
#include <string>

#include "ir/error.h"
#include "models/grammar/json_schema.h"
#include "support/grammar_vocab.h"

using namespace kiln;
using kiln::test::compile_gbnf;
using kiln::test::matches;
using json = nlohmann::ordered_json;

namespace {

std::shared_ptr<const CompiledGrammar> schema_grammar(const json& schema) {
  return compile_gbnf(json_schema_to_gbnf(schema));
}

std::string error_of(const json& schema) {
  try {
    json_schema_to_gbnf(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

}  // namespace

TEST_CASE("json schema: integer bounds hold exactly") {
  const struct {
    json bounds;
    int64_t lo, hi;
  } cases[] = {
      {{{"minimum", 0}, {"maximum", 9}}, 0, 9},
      {{{"minimum", -50}, {"maximum", 50}}, -50, 50},
      {{{"minimum", 7}, {"maximum", 7}}, 7, 7},
      {{{"minimum", 95}, {"maximum", 1005}}, 95, 1005},
      {{{"minimum", -999}, {"maximum", -10}}, -999, -10},
      {{{"exclusiveMinimum", 0}, {"maximum", 1200}}, 1, 1200},
      {{{"minimum", -1200}, {"exclusiveMaximum", -3}}, -1200, -4},
      {{{"minimum", 2.5}, {"exclusiveMaximum", 7.5}}, 3, 7},
      {{{"exclusiveMinimum", -2.5}, {"maximum", 10.9}}, -2, 10},
      {{{"minimum", 100}, {"exclusiveMinimum", 100}, {"maximum", 300}, {"exclusiveMaximum", 300}},
       101,
       299},
  };
  for (const auto& c : cases) {
    json schema = {{"type", "integer"}};
    for (const auto& [k, v] : c.bounds.items()) schema[k] = v;
    INFO(schema.dump());
    auto g = schema_grammar(schema);
    for (int64_t n = -1300; n <= 1300; ++n) {
      INFO(n);
      CHECK(matches(g, std::to_string(n)) == (n >= c.lo && n <= c.hi));
    }
    CHECK_FALSE(matches(g, "-0"));
    CHECK_FALSE(matches(g, "007"));
  }
  // One-sided: every integer of up to 15 digits past the bound.
  auto positive = schema_grammar({{"type", "integer"}, {"exclusiveMinimum", 0}});
  for (const char* s : {"1", "9", "10", "123456789012345"}) CHECK(matches(positive, s));
  for (const char* s : {"0", "-1", "1234567890123456", "01"}) CHECK_FALSE(matches(positive, s));
}

TEST_CASE("json schema: number bounds hold at and around each bound") {
  const struct {
    json schema;
    std::vector<std::string> yes, no;
  } cases[] = {
      {{{"minimum", 0}, {"maximum", 1}},
       {"0", "0.0", "0.5", "1", "1.0", "1.00", "0.99999999999999"},
       {"-0.1", "1.01", "1.000000000001", "-1", "2", "1e0", "-0"}},
      {{{"exclusiveMinimum", -1.5}, {"exclusiveMaximum", 2.25}},
       {"-1.4", "-1.49999", "0", "2.24", "2.2499999", "2", "-1"},
       {"-1.5", "-1.50", "2.25", "2.250", "2.3", "-2"}},
      {{{"minimum", 0.001}},
       {"0.001", "0.0010", "0.0011", "0.01", "1", "123456789012345"},
       {"0", "0.0009", "0.00099999", "-0.001"}},
      {{{"exclusiveMaximum", 0}},
       {"-1", "-0.5", "-0.001", "-123.25"},
       {"0", "0.0", "-0", "-0.0", "1"}},
      {{{"minimum", -10.75}, {"maximum", -0.5}},
       {"-10.75", "-10.7", "-5", "-0.5", "-0.50", "-0.75"},
       {"-10.76", "-11", "-0.49", "0", "-0.4999"}},
      {{{"exclusiveMinimum", 3}, {"maximum", 3.0001}},
       {"3.0001", "3.00005", "3.00001"},
       {"3", "3.0", "3.00000", "3.00011", "3.0002", "4"}},
  };
  for (const auto& c : cases) {
    json schema = {{"type", "number"}};
    for (const auto& [k, v] : c.schema.items()) schema[k] = v;
    INFO(schema.dump());
    auto g = schema_grammar(schema);
    for (const std::string& s : c.yes) CHECK(matches(g, s));
    for (const std::string& s : c.no) CHECK_FALSE(matches(g, s));
  }
  // Unbounded numbers: JSON's forms, exponents included.
  auto any = schema_grammar({{"type", "number"}});
  for (const char* s : {"0", "-0", "12.5", "1e5", "-2.5E-3", "3e+10"}) CHECK(matches(any, s));
  for (const char* s : {"01", "1.", ".5", "+1", "1e", "NaN"}) CHECK_FALSE(matches(any, s));
  CHECK(error_of({{"type", "number"}, {"minimum", 0.30000000000000004}})
            .find("'minimum' at /minimum is not supported (a bound needs at most 15") !=
        std::string::npos);
  CHECK(
      error_of({{"type", "integer"}, {"minimum", 1e16}}).find("no integer of at most 15 digits") !=
      std::string::npos);
}

TEST_CASE("json schema: dates are calendar days, times and uuids their RFC forms") {
  auto date = schema_grammar({{"type", "string"}, {"format", "date"}});
  const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  char buf[32];
  for (int y : {1, 4, 100, 400, 1900, 2000, 2023, 2024, 9999}) {
    for (int m = 0; m <= 13; ++m) {
      for (int d = 0; d <= 32; ++d) {
        const bool valid = m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] + (m == 2 && leap(y));
        std::snprintf(buf, sizeof buf, "\"%04d-%02d-%02d\"", y, m, d);
        INFO(buf);
        CHECK(matches(date, buf) == valid);
      }
    }
  }
  CHECK_FALSE(matches(date, "\"0000-01-01\""));
  auto time = schema_grammar({{"type", "string"}, {"format", "time"}});
  for (const char* s : {"\"00:00:00Z\"", "\"23:59:59.123+05:30\"", "\"12:30:00-00:00\""})
    CHECK(matches(time, s));
  for (const char* s : {"\"24:00:00Z\"", "\"12:60:00Z\"", "\"12:00:00\"", "\"1:00:00Z\""})
    CHECK_FALSE(matches(time, s));
  auto dt = schema_grammar({{"type", "string"}, {"format", "date-time"}});
  CHECK(matches(dt, "\"2024-02-29T23:59:60Z\"") == false);
  CHECK(matches(dt, "\"2024-02-29T23:59:59Z\""));
  auto uuid = schema_grammar({{"type", "string"}, {"format", "uuid"}});
  CHECK(matches(uuid, "\"123e4567-e89b-12d3-A456-426614174000\""));
  CHECK_FALSE(matches(uuid, "\"123e4567e89b12d3a456426614174000\""));
}

TEST_CASE("json schema: strings count code points and never split surrogates") {
  auto g = schema_grammar({{"type", "string"}, {"minLength", 2}, {"maxLength", 3}});
  for (const char* s :
       {"\"ab\"", "\"abc\"", "\"\xC3\xA9\xE4\xB8\x96\"", "\"a\\n\"", "\"\\u00e9x\""})
    CHECK(matches(g, s));
  for (const char* s : {"\"a\"", "\"abcd\"", "\"\\ud83d\\ude00\"", "\"a\\ud800\"", "\"a\nb\""})
    CHECK_FALSE(matches(g, s));
  auto p = schema_grammar({{"type", "string"}, {"pattern", "^[a-c]+\\d?$"}});
  CHECK(matches(p, "\"abc7\""));
  CHECK_FALSE(matches(p, "\"abd\""));
}

TEST_CASE("json schema: objects keep order, optional and extra properties") {
  const json schema = {
      {"type", "object"},
      {"properties",
       {{"b", {{"type", "integer"}}}, {"a", {{"type", "integer"}}}, {"c", {{"type", "boolean"}}}}},
      {"required", {"c", "a"}},
      {"additionalProperties", {{"type", "null"}}}};
  auto g = schema_grammar(schema);
  // Required ones first in the schema's order (a, c), then optional b, then extras.
  CHECK(matches(g, "{\"a\":1,\"c\":true}"));
  CHECK(matches(g, "{\"a\": 1, \"c\": true, \"b\": 2, \"zz\": null, \"ab\": null}"));
  CHECK(matches(g, "{\n  \"a\": 1,\n  \"c\": false\n}"));
  CHECK_FALSE(matches(g, "{\"c\":true,\"a\":1}"));
  CHECK_FALSE(matches(g, "{\"a\":1}"));
  CHECK_FALSE(matches(g, "{\"a\":1,\"c\":true,\"zz\":1}"));
  // An extra key may not repeat a listed name (the last value would win).
  CHECK_FALSE(matches(g, "{\"a\":1,\"c\":true,\"a\":null}"));
  CHECK_FALSE(matches(g, "{\"a\":1,\"c\":true,\"b\":null}"));
  // Whitespace is bounded: a newline then at most 20 spaces or tabs.
  CHECK(matches(g, "{\"a\":" + std::string("\n") + std::string(20, ' ') + "1,\"c\":true}"));
  CHECK_FALSE(matches(g, "{\"a\":" + std::string("\n") + std::string(21, ' ') + "1,\"c\":true}"));
  CHECK_FALSE(matches(g, "{\"a\":  1,\"c\":true}"));

  auto optional = schema_grammar(
      {{"properties", {{"x", {{"type", "integer"}}}, {"y", {{"type", "integer"}}}}}});
  for (const char* s : {"{}", "{\"x\":1}", "{\"y\":2}", "{\"x\":1,\"y\":2}"})
    CHECK(matches(optional, s));
  for (const char* s : {"{\"y\":2,\"x\":1}", "{,}", "{\"x\":1,}", "{\"z\":1}"})
    CHECK_FALSE(matches(optional, s));

  auto object = compile_gbnf(json_object_gbnf());
  for (const char* s : {"{}", "{\"a\": [1, {\"b\": null}], \"c\": \"\\u00e9\"}"})
    CHECK(matches(object, s));
  for (const char* s : {"[]", "1", "{\"a\"}", "{\"a\":1,}"}) CHECK_FALSE(matches(object, s));
}

TEST_CASE("json schema: arrays, enums, references") {
  auto tuple = schema_grammar({{"type", "array"},
                               {"prefixItems", {{{"type", "integer"}}, {{"type", "string"}}}},
                               {"items", false},
                               {"minItems", 1}});
  for (const char* s : {"[1]", "[1,\"a\"]", "[ 1 , \"a\" ]"}) CHECK(matches(tuple, s));
  for (const char* s : {"[]", "[\"a\"]", "[1,\"a\",2]"}) CHECK_FALSE(matches(tuple, s));
  auto counted = schema_grammar(
      {{"type", "array"}, {"items", {{"const", 0}}}, {"minItems", 2}, {"maxItems", 3}});
  for (const char* s : {"[0,0]", "[0,0,0]"}) CHECK(matches(counted, s));
  for (const char* s : {"[0]", "[0,0,0,0]", "[]"}) CHECK_FALSE(matches(counted, s));
  auto e = schema_grammar({{"enum", {"a\"b", 1.5, nullptr, json::array({1, "x"})}}});
  for (const char* s : {"\"a\\\"b\"", "1.5", "null", "[1,\"x\"]"}) CHECK(matches(e, s));
  CHECK_FALSE(matches(e, "[1, \"x\"]"));
  auto tree =
      schema_grammar({{"$defs", {{"t", {{"type", "array"}, {"items", {{"$ref", "#/$defs/t"}}}}}}},
                      {"$ref", "#/$defs/t"}});
  for (const char* s : {"[]", "[[],[[[]]]]"}) CHECK(matches(tree, s));
  CHECK_FALSE(matches(tree, "[[]"));
}

TEST_CASE("json schema: refusals name the keyword and its JSON pointer") {
  const std::pair<json, const char*> cases[] = {
      {{{"type", "integer"}, {"multipleOf", 3}},
       "JSON schema keyword 'multipleOf' at /multipleOf is not supported"},
      {{{"properties", {{"a/b", {{"not", {}}}}}}},
       "keyword 'not' at /properties/a~1b/not is not supported"},
      {{{"type", "array"}, {"items", {{"uniqueItems", true}}}},
       "'uniqueItems' at /items/uniqueItems"},
      {{{"type", "string"}, {"format", "email"}}, "'format' at /format is not supported ('email'"},
      {{{"oneOf", {{{"type", "integer"}}, {{"type", "number"}}}}},
       "'oneOf' at /oneOf is not supported (branches 0 and 1"},
      {{{"$ref", "https://x/y.json"}}, "'$ref' at /$ref is not supported"},
      {{{"$ref", "#/$defs/missing"}},
       "JSON schema at /$ref: reference '#/$defs/missing' does not point"},
      {{{"type", "strin"}}, "JSON schema at /type: unknown type 'strin'"},
      {{{"type", "string"}, {"pattern", "(a)\\1"}},
       "'pattern' at /pattern is not supported (pattern '(a)\\1' at offset"},
      {{{"type", "string"}, {"minLength", 5}, {"maxLength", 2}},
       "JSON schema at /: minLength is above maxLength"},
      {{{"type", "array"},
        {"minItems", 3},
        {"prefixItems", json::array({json::object()})},
        {"items", false}},
       "no array length satisfies minItems, maxItems and items"},
      {{{"type", "object"}, {"required", {"x"}}, {"additionalProperties", false}},
       "JSON schema at /required: required property 'x' is not in properties"},
      {{{"allOf", {{{"properties", {{"a", {}}}}}, {{"additionalProperties", false}}}}},
       "additionalProperties would reject property 'a'"},
      {false, "JSON schema at /: the schema false accepts no value"},
      {{{"enum", {1, 2}}, {"minimum", 2}}, "'minimum' at /minimum is not supported"},
      {{{"type", "integer"}, {"exclusiveMinimum", true}},
       "'exclusiveMinimum' at /exclusiveMinimum"},
  };
  for (const auto& [schema, message] : cases) {
    INFO(schema.dump());
    const std::string e = error_of(schema);
    CHECK(e.find(message) != std::string::npos);
    if (e.find(message) == std::string::npos) WARN(e);
  }
  json deep = {{"type", "integer"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  CHECK(error_of(deep).find("nests more than 128 levels") != std::string::npos);
  json cycle = {{"$defs", {{"a", {{"allOf", {{{"$ref", "#/$defs/a"}}}}}}}}, {"$ref", "#/$defs/a"}};
  CHECK(error_of(cycle).find("nest too deeply (a reference cycle?)") != std::string::npos);
}
