// Seeded mutation fuzzing of the grammar front ends: GBNF text and JSON
// schemas, mutated byte by byte and token by token, must either compile
// (and then a short walk over the allowed tokens must keep every mask equal
// to the brute-force one) or be refused with a kiln::Error. Another
// exception, a crash or a hang fails. tests/fuzz/grammar_fuzzer.cpp is the
// coverage-guided version.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "models/grammar/json_schema.h"
#include "support/grammar_vocab.h"

using namespace kiln;

namespace {

const char* const kSeeds[] = {
    "root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= [a-z]+ \":\" ws [0-9]{1,3}\n"
    "ws ::= [ \\t\\n]*\n",
    "root ::= (\"a\" | [^\\x00-\\x1F\"]+ | \"\\u00e9\"){2,4} . # comment\n",
    "root ::= x? y*\nx ::= \"(\" root \")\" | \"\\U0001F600\"\ny ::= [\\[\\]\\-] x{0,2}\n",
    "root ::= (\n  \"a\" |\n  \"b\"\n)+ [a-zA-Z_]{1,} \"\\\\\\\"\"\n",
};

const char* const kSchemas[] = {
    R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":50},
        "b":{"type":"array","items":{"enum":["x",1,null]},"maxItems":2},
        "c":{"type":"string","pattern":"^[a-c]{1,3}\\d$"},"d":{"anyOf":[{"type":"null"},{"$ref":"#"}]}},
        "required":["a"],"additionalProperties":{"type":"boolean"}})",
    R"({"type":"array","prefixItems":[{"type":"number","exclusiveMinimum":0.5,"maximum":2},
        {"type":"string","format":"date"}],"items":false,"minItems":1})",
    R"({"$defs":{"n":{"type":"object","properties":{"v":{"const":1},"k":{"$ref":"#/$defs/n"}}}},
        "oneOf":[{"$ref":"#/$defs/n"},{"type":"string","minLength":1,"maxLength":3}]})",
};

// Bytes that matter to the syntax, for insertions.
const char kSpecial[] = "\"[]()|*+?{},.-^\\:=#\n\r\t <>!0123456789aAzZ";

std::string mutate(std::string m, std::mt19937_64& rng) {
  const int mutations = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < mutations; ++k) {
    const size_t pos = m.empty() ? 0 : rng() % m.size();
    switch (rng() % 5) {
      case 0:
        if (!m.empty()) m[pos] = static_cast<char>(m[pos] ^ (1 << (rng() % 8)));
        break;
      case 1: m.insert(pos, 1, kSpecial[rng() % (sizeof kSpecial - 1)]); break;
      case 2: m.erase(pos, 1 + rng() % 8); break;
      case 3: m.resize(pos); break;
      default: {  // a slice of the text copied elsewhere
        const size_t from = m.empty() ? 0 : rng() % m.size();
        m.insert(pos, m.substr(from, 1 + rng() % 24));
      }
    }
  }
  return m;
}

using ojson = nlohmann::ordered_json;

// A JSON-level mutation of a schema: some value somewhere replaced, a key
// dropped, or a keyword added, with values that sit at the edges.
void mutate_json(ojson& j, std::mt19937_64& rng, int depth = 0) {
  static const char* const kWords[] = {"type",
                                       "properties",
                                       "required",
                                       "additionalProperties",
                                       "items",
                                       "prefixItems",
                                       "minItems",
                                       "maxItems",
                                       "minLength",
                                       "maxLength",
                                       "pattern",
                                       "format",
                                       "minimum",
                                       "maximum",
                                       "exclusiveMinimum",
                                       "exclusiveMaximum",
                                       "enum",
                                       "const",
                                       "anyOf",
                                       "oneOf",
                                       "allOf",
                                       "$ref",
                                       "$defs",
                                       "uniqueItems",
                                       "title"};
  static const ojson kValues[] = {
      0,
      -1,
      3,
      1.5,
      -0.25,
      1e300,
      123456789012345678,
      "",
      "x",
      "string",
      "integer",
      "number",
      "object",
      "array",
      "date",
      "uuid",
      "^[a-z]+$",
      "(a|b",
      "#",
      "#/$defs/n",
      "#/nope",
      true,
      false,
      nullptr,
      ojson::array(),
      ojson::object(),
      ojson::array({"a", "b"}),
      ojson{{"type", "string"}},
      ojson{{"$ref", "#"}},
      ojson{{"type", "integer"}, {"maximum", -3}},
      ojson::array({ojson{{"type", "null"}}, ojson{{"type", "boolean"}}})};
  const bool container = j.is_object() || j.is_array();
  if (container && !j.empty() && depth < 8 && rng() % 3 != 0) {
    auto it = j.begin();
    std::advance(it, static_cast<long>(rng() % j.size()));
    mutate_json(*it, rng, depth + 1);
    return;
  }
  switch (rng() % 3) {
    case 0: j = kValues[rng() % std::size(kValues)]; break;
    case 1:
      if (j.is_object() && !j.empty()) {
        auto it = j.begin();
        std::advance(it, static_cast<long>(rng() % j.size()));
        j.erase(it);
        break;
      }
      [[fallthrough]];
    default:
      if (j.is_object())
        j[kWords[rng() % std::size(kWords)]] = kValues[rng() % std::size(kValues)];
      else
        j = kValues[rng() % std::size(kValues)];
  }
}

// A few steps of a walk, each mask checked against brute force.
void walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng) {
  GrammarMatcher m(g);
  std::vector<uint32_t> mask;
  for (int s = 0; s < 6; ++s) {
    REQUIRE(test::mask_vs_brute_force(m) == "");
    m.fill_mask(&mask);
    std::vector<int32_t> ok;
    for (int32_t t = 0; t < g->vocab().size(); ++t)
      if (test::allowed(mask, t)) ok.push_back(t);
    if (ok.empty()) return;
    REQUIRE(m.accept(ok[rng() % ok.size()]));
  }
}

}  // namespace

TEST_CASE("grammar fuzz: mutated GBNF compiles or fails with kiln::Error",
          "[models][grammar][fuzz]") {
  std::mt19937_64 rng(20250611);
  int compiled = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const std::string text = mutate(kSeeds[rng() % std::size(kSeeds)], rng);
    INFO(text);
    try {
      auto g = test::compile_gbnf(text, test::mixed_vocab());
      ++compiled;
      if (iter % 10 == 0) walk(g, rng);
    } catch (const Error&) {
      ++refused;
    }
  }
  CHECK(compiled > 100);
  CHECK(refused > 100);
}

TEST_CASE("grammar fuzz: mutated JSON schemas convert or fail with kiln::Error",
          "[models][grammar][fuzz]") {
  std::mt19937_64 rng(20250612);
  int compiled = 0, refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    ojson schema = ojson::parse(kSchemas[rng() % std::size(kSchemas)]);
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) mutate_json(schema, rng);
    INFO(schema.dump());
    try {
      auto g = test::compile_gbnf(json_schema_to_gbnf(schema), test::mixed_vocab());
      ++compiled;
      if (iter % 10 == 0) walk(g, rng);
    } catch (const Error&) {
      ++refused;
    }
  }
  CHECK(compiled > 50);
  CHECK(refused > 50);
}
