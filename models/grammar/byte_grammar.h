// A Grammar lowered to bytes, with the static facts the token matcher needs.
//
// Tokens are byte strings, and a token may end in the middle of a UTF-8
// sequence. Rather than carry a partial-character state next to the parse
// stacks, each set of code points becomes the alternatives of its UTF-8
// encodings (ranges of byte sets, as regex engines compile Unicode
// classes), so the matcher only ever steps one byte at a time and a split
// character is simply a parse position inside a helper rule. Invalid UTF-8
// (an overlong form, a surrogate, a stray continuation byte) has no path and
// is never allowed.
//
// The lowering also prepares the mask cache (models/grammar/matcher.cpp):
// a position's precomputed token set can look past the end of its rule only
// where the rule has one place to return to. So small non-recursive rules
// referenced from several places (whitespace, a character class's helper
// rule) are copied once per reference, and sole_return / returns record, per
// rule, where it returns. Bounded repetitions stay one element with a count
// (x{0,1000} would otherwise be a thousand copies, each walked at compile
// time); the matcher keeps the count in the repeat's frame.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/grammar/grammar.h"

namespace kiln {

struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i];
    return *this;
  }
  bool empty() const { return !(bits[0] | bits[1] | bits[2] | bits[3]); }
  bool operator==(const ByteSet&) const = default;
};

class ByteGrammar {
 public:
  enum class Kind : uint8_t { bytes, rule, repeat, end };
  // One slot of the flat element array. Every alternative is a run of
  // elements closed by an `end`; a parse position is an index into the array.
  struct Element {
    Kind kind;
    uint32_t arg;  // bytes: index into byte_sets; rule: the rule; repeat: index into
                   // repeats; end: the rule it closes
  };
  // A rule taken min to max times; its body never matches the empty string
  // (such repetitions are unrolled), so every pass round the loop consumes.
  struct Repeat {
    uint32_t rule, min, max;
  };
  struct Rule {
    std::string name;
    std::vector<uint32_t> alternatives;  // the first position of each
  };
  // sole_return and returns values besides a position.
  static constexpr uint32_t kGrammarEnd = 0xFFFFFFFF;  // completing the rule ends the input
  static constexpr uint32_t kManyReturns = 0xFFFFFFFE;
  // A return with this bit set goes back to the repeat element at the rest
  // of the value after a pass through its body (its count goes up); one
  // without it to the position itself (a repeat there is entered afresh).
  static constexpr uint32_t kPass = 0x40000000;

  // Only what the root reaches is kept, and alternatives that can never
  // finish are dropped (so that every live parse can still be completed).
  // Throws kiln::Error when the grammar is larger than the matcher handles.
  static ByteGrammar lower(const Grammar& g);

  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<Repeat> repeats;
  std::vector<Rule> rules;
  uint32_t root = 0;
  std::vector<uint32_t> rule_of;  // per position: the rule whose alternative holds it

  // Per rule: where a completed instance continues when that is always the
  // same place (after a reference that is not the last element of its
  // alternative, followed through references that are; a position, with
  // kPass for a repeat's body), kGrammarEnd when it can only end the input,
  // else kManyReturns.
  std::vector<uint32_t> sole_return;
  // Per rule: every position a completed instance can continue from
  // (kGrammarEnd among them when it can end the input), sorted; or, where
  // returns_unbounded, too many to list.
  std::vector<std::vector<uint32_t>> returns;
  std::vector<char> returns_unbounded;
  // Per rule: the fewest bytes it matches; per position: the fewest bytes
  // that finish its alternative from there.
  std::vector<uint32_t> min_len, min_rest;

  // The rule a rule or repeat element refers to.
  uint32_t target(uint32_t pos) const {
    const Element& e = elements[pos];
    return e.kind == Kind::repeat ? repeats[e.arg].rule : e.arg;
  }
  bool refers(uint32_t pos) const {
    return elements[pos].kind == Kind::rule || elements[pos].kind == Kind::repeat;
  }

 private:
  void clone_shared_rules();
  uint32_t& target_ref(uint32_t pos) {
    Element& e = elements[pos];
    return e.kind == Kind::repeat ? repeats[e.arg].rule : e.arg;
  }
  void analyze();
};

}  // namespace kiln
