// A context-free grammar over Unicode code points: the one form that every
// way of asking for structured output (GBNF text, a JSON schema, the
// json_object mode) is translated into before it is compiled against a
// vocabulary (models/grammar/matcher.h).
//
// The form is GBNF's after its sugar is gone: a rule is a list of
// alternatives, an alternative a sequence of elements, and an element either
// one code point out of a set, a reference to a rule, or a rule repeated a
// bounded number of times. Groups and the other repetitions have become
// rules of their own (as llama.cpp rewrites them). check()
// refuses what the matcher cannot run: a missing root, left recursion, a
// grammar that matches nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// Inclusive range of code points.
struct CodepointRange {
  uint32_t lo = 0, hi = 0;
  bool operator==(const CodepointRange&) const = default;
};

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Sorted, disjoint and non-adjacent ranges covering the same code points.
std::vector<CodepointRange> normalize_ranges(std::vector<CodepointRange> ranges);
// The code points of [0, U+10FFFF] not in `ranges` (which must be normalized).
std::vector<CodepointRange> complement_ranges(const std::vector<CodepointRange>& ranges);

// GBNF text for generators (the JSON schema converter): a string literal of
// UTF-8 text, quotes included, and a character class of code points.
std::string gbnf_literal(std::string_view utf8);
std::string gbnf_class(const std::vector<CodepointRange>& chars);

struct GrammarElement {
  // chars: one code point out of `chars`; rule: the rule `rule`; repeat:
  // `rule` between `min` and `max` times (GBNF's x{m,n} with n bounded:
  // counted by the matcher rather than unrolled into n rules).
  enum class Kind : uint8_t { chars, rule, repeat };
  Kind kind = Kind::chars;
  std::vector<CodepointRange> chars;  // normalized
  uint32_t rule = 0;
  uint32_t min = 0, max = 0;

  static GrammarElement codepoint(uint32_t cp) { return {Kind::chars, {{cp, cp}}, 0, 0, 0}; }
  static GrammarElement ref(uint32_t rule) { return {Kind::rule, {}, rule, 0, 0}; }
  static GrammarElement repeat(uint32_t rule, uint32_t min, uint32_t max) {
    return {Kind::repeat, {}, rule, min, max};
  }
  bool refers() const { return kind != Kind::chars; }  // to `rule`
  bool operator==(const GrammarElement&) const = default;
};

using GrammarSequence = std::vector<GrammarElement>;

struct GrammarRule {
  // The GBNF name; rules made for groups and repetitions are named after the
  // rule they came from with a numeric suffix ("item_7"), as llama.cpp does.
  std::string name;
  std::vector<GrammarSequence> alternatives;
};

struct Grammar {
  std::vector<GrammarRule> rules;
  uint32_t root = 0;

  // GBNF text that parses back to an equivalent grammar (for messages,
  // tests and `kiln grammar --print`).
  std::string to_gbnf() const;
  // Throws kiln::Error unless the matcher can run the grammar: the root
  // exists, every reference is in range, no rule can reach itself without
  // consuming a character (left recursion, which a stack-based matcher would
  // follow forever) and the root matches at least one string.
  void check() const;
};

}  // namespace kiln
