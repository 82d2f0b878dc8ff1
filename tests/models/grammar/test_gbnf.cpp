// The GBNF reader (models/grammar/gbnf.h): every construct of llama.cpp's
// syntax, checked by the strings the compiled grammar accepts and refuses,
// Grammar::to_gbnf's text reading back to the same language, and each
// error's message with its line and column.
#include <catch2/catch.hpp>
#include <string>

#include "ir/error.h"
#include "support/grammar_vocab.h"

using namespace kiln;
using kiln::test::compile_gbnf;
using kiln::test::matches;

namespace {

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* gbnf;
  std::vector<std::string> yes, no;
};

}  // namespace

TEST_CASE("gbnf: llama.cpp's constructs match what they should") {
  const Case cases[] = {
      {"root ::= \"abc\"", {"abc"}, {"", "ab", "abcd"}},
      {"root ::= \"a\" | \"b\" | \"\"", {"a", "b", ""}, {"ab"}},
      {"root ::= (\"a\" | \"b\") \"c\"", {"ac", "bc"}, {"c", "abc"}},
      {"root ::= \"x\"? \"y\"* \"z\"+", {"z", "xz", "yyz", "xyyzzz"}, {"", "x", "xxz", "zy"}},
      {"root ::= \"ab\"{2}", {"abab"}, {"ab", "ababab"}},
      {"root ::= [0-9]{2,}", {"12", "123456"}, {"1", ""}},
      {"root ::= [0-9]{1,3}", {"1", "12", "123"}, {"", "1234"}},
      {"root ::= [0-9]{0,2} \"x\"", {"x", "1x", "12x"}, {"123x"}},
      {"root ::= (\"a\" \"b\"?){2}", {"aa", "aba", "abab", "aab"}, {"a", "ababa"}},
      {"root ::= [a-cx-z_]", {"a", "c", "y", "_"}, {"d", "w", "A"}},
      {"root ::= [^a-c\\n]", {"d", "\xC3\xA9", "\xF0\x9F\x98\x80", "\t"}, {"a", "\n", ""}},
      {"root ::= .",
       {"a", "\n", "\xE4\xB8\x96", "\xF0\x9F\x98\x80"},
       {"", "ab", "\xC3", "\xED\xA0\x80"}},
      {"root ::= [\\u00e9-\\u00ea] \"\\U0001F600\"",
       {"\xC3\xA9\xF0\x9F\x98\x80", "\xC3\xAA\xF0\x9F\x98\x80"},
       {"e\xF0\x9F\x98\x80"}},
      {"root ::= \"\\x41\\t\\r\\n\\\\\\\"\\[\\]\\-\"", {"A\t\r\n\\\"[]-"}, {}},
      {"root ::= [\\[\\]\\-\\\\]+", {"[", "]", "-", "\\", "[-]"}, {"a"}},
      {"root ::= [-a] [a-]", {"-a", "a-", "--"}, {"b-"}},
      {"root ::= \"\xC3\xA9t\xC3\xA9\" [\xCE\xB1-\xCF\x89]",
       {"\xC3\xA9t\xC3\xA9\xCE\xB2"},
       {"ete\xCE\xB2"}},
      // Rules, references in any order, comments, newlines inside groups and after |.
      {"# a grammar\nroot ::= item (\",\" item)* # items\nitem ::= [a-z]+ |\n  \"(\" root \")\"\n",
       {"a", "a,b", "(a,b),c", "((x))"},
       {"", "a,", "(a", "A"}},
      {"root ::= (\n  \"a\"\n  | \"b\"\n)\n\n\n", {"a", "b"}, {"ab"}},
      {"root ::= \"a\"\r\nroot2 ::= \"b\"\r\n", {"a"}, {"b"}},
      {"root ::= x\nx ::= y y\ny ::= \"1\" | \"22\"", {"11", "122", "2222"}, {"1", "222"}},
      {"root ::= \"\"", {""}, {"a"}},
  };
  for (const Case& c : cases) {
    INFO(c.gbnf);
    auto g = compile_gbnf(c.gbnf);
    for (const std::string& s : c.yes) CHECK(matches(g, s));
    for (const std::string& s : c.no) CHECK_FALSE(matches(g, s));
    // The printed grammar reads back to the same language.
    auto again = compile_gbnf(parse_gbnf(c.gbnf).to_gbnf());
    for (const std::string& s : c.yes) CHECK(matches(again, s));
    for (const std::string& s : c.no) CHECK_FALSE(matches(again, s));
  }
}

TEST_CASE("gbnf: bounded counts stay counted, other repetitions expand as llama.cpp's do") {
  Grammar g = parse_gbnf("root ::= \"ab\"{1,300}");
  REQUIRE(g.rules.size() == 2);  // root and the repeated item
  REQUIRE(g.rules[g.root].alternatives[0].size() == 1);
  const GrammarElement& e = g.rules[g.root].alternatives[0][0];
  CHECK(e.kind == GrammarElement::Kind::repeat);
  CHECK(e.min == 1);
  CHECK(e.max == 300);
  // x+ is x x-1 with x-1 ::= x x-1 | "".
  Grammar plus = parse_gbnf("root ::= \"a\"+");
  CHECK(plus.rules.size() == 2);
  CHECK(plus.rules[plus.root].alternatives[0].size() == 2);
  CHECK(plus.rules[1].alternatives.size() == 2);
}

TEST_CASE("gbnf: every error names its line and column") {
  const std::pair<const char*, const char*> cases[] = {
      {"root ::= \"a\"\n  \"b\"", "grammar line 2, column 3: expected a rule name, found '\"'"},
      {"root := \"a\"", "grammar line 1, column 6: expected '::=' after rule name 'root'"},
      {"root ::= \"a\"\nnext ::= \"abc", "grammar line 2, column 10: unterminated string literal"},
      {"root ::= [a-z", "grammar line 1, column 10: unterminated character class"},
      {"root ::= \"\\q\"", "grammar line 1, column 11: unknown escape '\\q'"},
      {"root ::= \"\\x4\"", "grammar line 1, column 11: expected 2 hex digits after '\\x'"},
      {"root ::= \"\\u12g4\"", "grammar line 1, column 11: expected 4 hex digits after '\\u'"},
      {"root ::= (\"a\"",
       "grammar line 1, column 14: expected ')' to close the group opened at "
       "line 1, column 10, found the end of the grammar"},
      {"root ::= * \"a\"", "grammar line 1, column 10: expected an item before '*'"},
      {"root ::= \"a\" (+)", "grammar line 1, column 15: expected an item before '+'"},
      {"root ::= \"a\"{",
       "grammar line 1, column 14: expected an integer, found the end of the grammar"},
      {"root ::= \"a\"{2",
       "grammar line 1, column 15: expected '}' to close the repetition, found the "
       "end of the grammar"},
      {"root ::= \"a\"{,2}", "grammar line 1, column 14: expected an integer, found ','"},
      {"root ::= \"a\"{3,1}",
       "grammar line 1, column 13: repetition {3,1} has its maximum below its minimum"},
      {"root ::= \"a\"{2001}", "grammar line 1, column 14: repetition count above 2000"},
      {"root ::= \"\"*", "grammar line 1, column 12: expected an item before '*'"},
      {"root ::= x\n", "grammar line 1, column 10: undefined rule 'x'"},
      {"x ::= \"a\"", "grammar has no 'root' rule"},
      {"root ::= \"a\"\nroot ::= \"b\"", "grammar line 2, column 1: rule 'root' is defined twice"},
      {"root ::= [z-a]",
       "grammar line 1, column 11: character range with its end before its start"},
      {"root ::= []", "grammar line 1, column 10: empty character class"},
      {"root ::= <[12]>", "grammar line 1, column 10: token references (<...>) are not supported"},
      {"root ::= !<a>", "grammar line 1, column 10: token references (<...>) are not supported"},
      {"root ::= \"\\uD800\"", "grammar line 1, column 11: code point in the surrogate range"},
      {"root ::= \"\\U00110000\"", "grammar line 1, column 11: code point beyond U+10FFFF"},
      {"root ::= \"a\" )",
       "grammar line 1, column 14: expected the end of the rule or the line, found ')'"},
      {"root ::= \"\xFF\"", "grammar line 1, column 11: invalid UTF-8 in the grammar"},
      {"root ::= \"\xC0\x80\"", "grammar line 1, column 11: invalid UTF-8 in the grammar"},
      {"root ::= \"a\"\n\n  ::= \"b\"",
       "grammar line 3, column 3: expected a rule name, found ':'"},
      {"root ::= \"a\" \x01",
       "grammar line 1, column 14: expected the end of the rule or the line, "
       "found a control character"},
      {"root ::= root \"a\" | \"b\"", "grammar rule 'root' is left-recursive: root -> root"},
      {"root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"",
       "grammar rule 'x' is left-recursive: x -> x"},
      {"root ::= (\" \"?)* \"x\"", "is left-recursive"},
      {"root ::= \"a\" root", "grammar matches no string: rule 'root' never finishes"},
  };
  for (const auto& [gbnf, message] : cases) {
    INFO(gbnf);
    const std::string e = error_of(gbnf);
    CHECK(e.find(message) != std::string::npos);
    CHECK_FALSE(e.empty());
    if (e.find(message) == std::string::npos) WARN(e);
  }
}

TEST_CASE("gbnf: hostile sizes are refused, not followed") {
  CHECK(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')'))
            .find("parentheses nested more than 256 deep") != std::string::npos);
  CHECK(
      error_of("root ::= \"" + std::string(100001, 'a') + "\"+").find("the grammar is too large") !=
      std::string::npos);
  // Within the bounds, large is fine.
  CHECK_NOTHROW(parse_gbnf("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')));
  CHECK_NOTHROW(parse_gbnf("root ::= [a-z]{0,2000}"));
}
