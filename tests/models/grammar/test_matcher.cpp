// The token matcher (models/grammar/matcher.h): at every step of random
// walks its cached mask must equal the brute-force one (each token's bytes
// stepped through a fork of the parse), on a synthetic vocabulary of
// tokens that cross rule ends and split UTF-8 sequences, and on a real
// 50k-token vocabulary when the shared test data is here. Then the pieces
// the sampler relies on: split characters, end and control tokens,
// refused tokens leaving the state alone, forks, the distance to an end.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <random>

#include "ir/error.h"
#include "models/gguf.h"
#include "models/grammar/json_schema.h"
#include "models/tokenizer.h"
#include "support/grammar_vocab.h"

using namespace kiln;
using kiln::test::allowed;
using kiln::test::compile_gbnf;
using kiln::test::mask_vs_brute_force;
using kiln::test::matches;

namespace {

// Walks the grammar from its start, checking the mask against brute force
// at every step. Picks: a uniformly random allowed token, or the allowed
// token that leaves the fewest bytes to the end (so walks reach deep
// structure and finish); the end token once allowed, sometimes.
void check_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int steps,
                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  const TokenVocabulary& v = g->vocab();
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    std::string text;
    for (int s = 0; s < steps; ++s) {
      INFO("walk " << w << " after '" << text << "'");
      REQUIRE(mask_vs_brute_force(m) == "");
      std::vector<uint32_t> mask;
      m.fill_mask(&mask);
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < v.size(); ++t)
        if (allowed(mask, t) && !v.is_end(t)) ok.push_back(t);
      if (m.can_end() && (ok.empty() || rng() % 4 == 0)) {
        REQUIRE(m.accept(v.end_tokens()[0]));
        CHECK(m.is_done());
        break;
      }
      REQUIRE_FALSE(ok.empty());
      int32_t pick = ok[rng() % ok.size()];
      if (rng() % 2) {
        size_t best = SIZE_MAX;
        for (int32_t t : ok) {
          GrammarMatcher probe = m.fork();
          probe.accept(t);
          if (probe.min_bytes_to_end() < best) best = probe.min_bytes_to_end(), pick = t;
        }
      }
      REQUIRE(m.accept(pick));
      text += v.piece(pick);
    }
  }
}

const char* const kArithmetic = R"gbnf(
root ::= expr
expr ::= term (ws [-+] ws term)*
term ::= factor (ws [*/] ws factor)*
factor ::= [0-9]+ ("." [0-9]+)? | "(" ws expr ws ")" | "-" factor
ws ::= [ \t\n]{0,3}
)gbnf";

const char* const kAmbiguous = R"gbnf(
root ::= ("a" | "ab" | "b")* "b" ("c" | "bc")?
)gbnf";

const char* const kUnicode = R"gbnf(
root ::= word (" " word)* "."?
word ::= [a-z\u00e0-\u00ff]+ | [\u4e00-\u9fff]{1,3} | "\U0001F600"
)gbnf";

}  // namespace

TEST_CASE("matcher: masks equal brute force on a synthetic vocabulary") {
  const auto v = test::mixed_vocab();
  SECTION("any JSON object") { check_walks(compile_gbnf(json_object_gbnf(), v), 12, 60, 1); }
  SECTION("a JSON schema") {
    const nlohmann::json schema = {
        {"type", "object"},
        {"properties",
         {{"name", {{"type", "string"}, {"minLength", 2}, {"maxLength", 9}}},
          {"id", {{"type", "integer"}, {"minimum", -20}, {"maximum", 345}}},
          {"tags", {{"type", "array"}, {"items", {{"enum", {"foo", "bar", "a\"b"}}}}}},
          {"ok", {{"type", "boolean"}}},
          {"x", {{"type", "number"}, {"exclusiveMinimum", 0.5}}}}},
        {"required", {"name", "id"}}};
    check_walks(compile_gbnf(json_schema_to_gbnf(schema), v), 12, 60, 2);
  }
  SECTION("arithmetic") { check_walks(compile_gbnf(kArithmetic, v), 12, 40, 3); }
  SECTION("an ambiguous grammar") { check_walks(compile_gbnf(kAmbiguous, v), 12, 30, 4); }
  SECTION("Unicode classes") { check_walks(compile_gbnf(kUnicode, v), 12, 30, 5); }
  SECTION("counted repetitions") {
    // Near both bounds, with bodies of several lengths, ambiguous ones,
    // nested counts, and a body that may be empty (unrolled instead).
    for (const char* g :
         {"root ::= \"\\\"\" [a-z ]{3,12} \"\\\"\" [0-9]{0,4}",
          "root ::= ([a-c] | \"ab\" | \"b\"){2,7} \"z\"", "root ::= (\"(\" [a-z]{1,3} \")\"){2,4}",
          "root ::= x{1,3}\nx ::= [a-z]{2} \",\"", "root ::= (\"a\"?){2,3} \"b\"",
          "root ::= [^\"]{5,9} \"\\\"\"",
          // A rule ending where a repeat starts: that entry is not a pass.
          "root ::= \"[\" x (\",\" x){1,3} \"]\"\nx ::= \"{\" [a-c]? \"}\""})
      check_walks(compile_gbnf(g, v), 12, 40, 8);
  }
}

TEST_CASE("matcher: masks equal brute force on a real vocabulary") {
  const std::string path =
      std::string(KILN_SOURCE_DIR) + "/../shared/data/vocab/ggml-vocab-gpt-2.gguf";
  if (!std::ifstream(path)) {
    WARN("skipped: " << path << " is absent");
    return;
  }
  GgufFile f = GgufFile::open(path);
  auto v = TokenVocabulary::from_tokenizer(*Tokenizer::from_gguf(f));
  REQUIRE(v->size() == 50257);
  const nlohmann::json schema = {
      {"type", "object"},
      {"properties",
       {{"text", {{"type", "string"}}},
        {"n", {{"type", "integer"}}},
        {"list", {{"type", "array"}, {"items", {{"type", "number"}}}, {"maxItems", 2}}}}},
      {"required", {"text", "n", "list"}}};
  check_walks(compile_gbnf(json_schema_to_gbnf(schema), v), 2, 8, 6);
  check_walks(compile_gbnf(json_object_gbnf(), v), 2, 8, 7);
  // Counted repetitions, where multi-character tokens use up the count.
  check_walks(compile_gbnf("root ::= [a-c]{2,4} (\"x\" | \"yz\")?", v), 4, 6, 8);
  const nlohmann::json lengths = {
      {"type", "array"},
      {"items", {{"type", "string"}, {"minLength", 3}, {"maxLength", 7}}},
      {"maxItems", 3}};
  check_walks(compile_gbnf(json_schema_to_gbnf(lengths), v), 2, 10, 9);
}

TEST_CASE("matcher: characters split across tokens") {
  // Tokens: the bytes of "é" (C3 A9), "è" (C3 A8), "世" (E4 B8 96) one by one.
  std::vector<std::string> pieces = {"\xC3",     "\xA9",     "\xA8", "\xE4",      "\xB8",
                                     "\x96",     "\xB8\x96", "!",    "\xC3\xA9!", "\xED",
                                     "\xA0\x80", "\xC0",     "\x80", "<eos>"};
  auto v = std::make_shared<const TokenVocabulary>(pieces, std::vector<int32_t>{13});
  auto g = compile_gbnf("root ::= [^\\u00e8!]+ \"!\"", v);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask;
  m.fill_mask(&mask);
  CHECK(allowed(mask, 0));         // C3: é or è may follow
  CHECK(allowed(mask, 3));         // E4
  CHECK(allowed(mask, 8));         // "é!" whole
  CHECK_FALSE(allowed(mask, 1));   // a continuation byte cannot start a character
  CHECK_FALSE(allowed(mask, 7));   // "!" needs a character first
  CHECK(allowed(mask, 9));         // ED starts U+D000-D7FF...
  CHECK_FALSE(allowed(mask, 11));  // C0 80 is an overlong NUL
  {
    GrammarMatcher surrogate = m.fork();
    REQUIRE(surrogate.accept(9));
    CHECK_FALSE(surrogate.accept(10));  // ...but ED A0 80 would be the surrogate U+D800
  }
  CHECK_FALSE(allowed(mask, 13));  // not complete
  REQUIRE(m.accept(0));            // half of a character
  CHECK_FALSE(m.can_end());
  m.fill_mask(&mask);
  CHECK(allowed(mask, 1));        // é
  CHECK_FALSE(allowed(mask, 2));  // è is excluded
  CHECK_FALSE(allowed(mask, 7));  // "!" cannot finish half a character
  CHECK_FALSE(m.accept(2));
  REQUIRE(m.accept(1));
  REQUIRE(m.accept(3));  // 世 over three tokens: E4, then B8 96
  CHECK_FALSE(m.accept(7));
  REQUIRE(m.accept(6));
  REQUIRE(m.accept(7));
  CHECK(m.can_end());
  CHECK(mask_vs_brute_force(m) == "");
  REQUIRE(m.accept(13));
  CHECK(m.is_done());
}

TEST_CASE("matcher: end and control tokens, refusals, forks") {
  auto v = test::byte_vocab();  // 256: end token, 257: control token
  auto g = compile_gbnf("root ::= \"ab\" \"c\"?", v);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask;
  m.fill_mask(&mask);
  CHECK(mask.size() == (258 + 31) / 32);
  CHECK(allowed(mask, 'a'));
  CHECK_FALSE(allowed(mask, 256));
  CHECK_FALSE(allowed(mask, 257));
  CHECK_FALSE(m.accept(256));
  CHECK_FALSE(m.accept(257));
  CHECK_FALSE(m.accept('b'));  // refused: the state stays at the start
  CHECK_FALSE(m.accept(-1));
  CHECK_FALSE(m.accept(9999));
  REQUIRE(m.accept('a'));
  CHECK(m.min_bytes_to_end() == 1);
  REQUIRE(m.accept('b'));
  CHECK(m.can_end());
  CHECK_FALSE(m.is_done());  // "c" may still come
  CHECK(m.min_bytes_to_end() == 0);
  m.fill_mask(&mask);
  CHECK(allowed(mask, 256));
  CHECK(allowed(mask, 'c'));
  CHECK_FALSE(allowed(mask, 257));

  GrammarMatcher other = m.fork();
  REQUIRE(other.accept('c'));
  CHECK(other.is_done());  // only the end token can follow
  other.fill_mask(&mask);
  for (int32_t t = 0; t < v->size(); ++t) CHECK(allowed(mask, t) == (t == 256));
  // The original did not move.
  m.fill_mask(&mask);
  CHECK(allowed(mask, 'c'));
  REQUIRE(m.accept(256));
  CHECK(m.is_done());
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.accept('c'));
  m.fill_mask(&mask);
  for (uint32_t w : mask) CHECK(w == 0);

  std::vector<float> logits(258, 1.0f);
  other.fill_mask(&mask);
  apply_token_mask(mask, logits.data(), 258);
  for (int32_t t = 0; t < 258; ++t) CHECK(std::isinf(logits[t]) == (t != 256));
}

TEST_CASE("matcher: forks are independent, long texts keep the pool small") {
  auto g = compile_gbnf(json_object_gbnf(), test::byte_vocab());
  GrammarMatcher m(g);
  REQUIRE(m.accept_bytes("{\"k\": ["));
  GrammarMatcher a = m.fork(), b = m.fork();
  REQUIRE(a.accept_bytes("1, 2]}"));
  REQUIRE(b.accept_bytes("\"x\", {\"y\": null}]}"));
  CHECK(a.can_end());
  CHECK(b.can_end());
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.accept_bytes("]]"));
  REQUIRE(m.accept_bytes("]}"));
  // Many steps: the frames no stack uses are dropped as the text grows.
  GrammarMatcher big(g);
  REQUIRE(big.accept_bytes("{\"a\": ["));
  std::vector<uint32_t> mask;
  for (int i = 0; i < 3000; ++i) {
    REQUIRE(big.accept_bytes(i ? ", [1, {\"b\": \"c\"}]" : "[1, {\"b\": \"c\"}]"));
    if (i % 100 == 0) big.fill_mask(&mask);
  }
  REQUIRE(big.accept_bytes("]}"));
  CHECK(big.can_end());
}

TEST_CASE("matcher: an exponentially ambiguous grammar is refused, not followed") {
  auto g =
      compile_gbnf("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"", test::byte_vocab());
  GrammarMatcher m(g);
  CHECK(m.accept_bytes(std::string(10, 'a')));
  CHECK_THROWS_WITH(m.accept_bytes(std::string(20, 'a')),
                    Catch::Contains("grammar is too ambiguous"));
}

TEST_CASE("matcher: strings against the language") {
  auto g = compile_gbnf(kArithmetic);
  for (const char* s : {"1", "1+2", "(1 + 2) * -3.5", "((4))/2", "1 +\t2"}) CHECK(matches(g, s));
  for (const char* s : {"", "+1", "1+", "(1", "1..2", "1    + 2"}) CHECK_FALSE(matches(g, s));
  auto amb = compile_gbnf(kAmbiguous);
  for (const char* s : {"b", "abb", "ababb", "bbbc", "abbc"}) CHECK(matches(amb, s));
  for (const char* s : {"", "a", "c", "abc "}) CHECK_FALSE(matches(amb, s));
}

TEST_CASE("matcher: the closing mask completes a text within the bytes it needs") {
  // Walks with a token budget, as the server samples under max_tokens: a
  // uniformly random allowed token, replaced by one of the closing mask's
  // when it would leave more bytes to write than tokens left, and only
  // closing tokens once no more tokens are left than bytes needed. Every
  // walk whose budget covers the shortest text must end complete; the
  // closing mask must be a non-empty subset of the mask whenever the text
  // is incomplete, each of its tokens bringing the end closer by its length.
  const auto v = test::mixed_vocab();
  const nlohmann::json schema = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"minLength", 2}, {"maxLength", 9}}},
        {"tags", {{"type", "array"}, {"items", {{"enum", {"foo", "bar"}}}}}},
        {"n", {{"type", "integer"}}}}},
      {"required", {"name", "tags"}}};
  for (const std::string& gbnf : {json_object_gbnf(), json_schema_to_gbnf(schema)}) {
    auto g = compile_gbnf(gbnf, v);
    std::mt19937_64 rng(5);
    for (int w = 0; w < 40; ++w) {
      GrammarMatcher m(g);
      const int budget = 3 + static_cast<int>(rng() % 40);
      std::string text;
      for (int used = 0; used < budget && !m.is_done(); ++used) {
        INFO("walk " << w << ", budget " << budget << ", after '" << text << "'");
        const size_t need = m.min_bytes_to_end();
        if (need == 0) break;  // complete
        const int left = budget - used;
        std::vector<uint32_t> mask, closing;
        m.fill_mask(&mask);
        m.fill_closing_mask(&closing);
        std::vector<int32_t> any, close;
        for (int32_t t = 0; t < v->size(); ++t) {
          if (v->is_end(t)) continue;
          if (allowed(mask, t)) any.push_back(t);
          if (allowed(closing, t)) {
            CHECK(allowed(mask, t));
            close.push_back(t);
          }
        }
        REQUIRE_FALSE(close.empty());
        int32_t pick = any[rng() % any.size()];
        GrammarMatcher probe = m.fork();
        REQUIRE(probe.accept(pick));
        if (left <= static_cast<int>(need) ||
            static_cast<int>(probe.min_bytes_to_end()) > left - 1) {
          pick = close[rng() % close.size()];
          GrammarMatcher p2 = m.fork();
          REQUIRE(p2.accept(pick));
          CHECK(p2.min_bytes_to_end() + v->piece(pick).size() == need);
        }
        REQUIRE(m.accept(pick));
        text += v->piece(pick);
      }
      INFO("walk " << w << ", budget " << budget << ": '" << text << "'");
      if (GrammarMatcher(g).min_bytes_to_end() <= static_cast<size_t>(budget))
        CHECK(m.min_bytes_to_end() == 0);
    }
  }
}
