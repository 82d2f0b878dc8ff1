// Unicode categories and UTF-8 decoding as the pre-tokenizers see them.
#include <catch2/catch.hpp>

#include "models/unicode.h"

using namespace kiln;

TEST_CASE("unicode categories come from the generated table", "[models][unicode]") {
  using C = UnicodeCategory;
  CHECK(unicode_category('A') == C::letter);
  CHECK(unicode_category('5') == C::number);
  CHECK(unicode_category(',') == C::punctuation);
  CHECK(unicode_category('$') == C::symbol);
  CHECK(unicode_category(' ') == C::separator);
  CHECK(unicode_category('\n') == C::control);
  CHECK(unicode_category(0xE9) == C::letter);     // é
  CHECK(unicode_category(0x301) == C::mark);      // combining acute
  CHECK(unicode_category(0x4E16) == C::letter);   // 世
  CHECK(unicode_category(0x0663) == C::number);   // Arabic-Indic three
  CHECK(unicode_category(0x1F600) == C::symbol);  // emoji
  CHECK(unicode_category(0xE000) == C::control);  // private use
  CHECK(unicode_category(0x0378) == C::unassigned);
  CHECK(unicode_category(0x10FFFF) == C::unassigned);
  CHECK(unicode_category(0x110000) == C::unassigned);
  CHECK(is_unicode_whitespace(0x3000));
  CHECK(is_unicode_whitespace(0x85));
  CHECK_FALSE(is_unicode_whitespace(0x200B));  // zero width space is not White_Space
}

TEST_CASE("utf-8 decoding replaces each invalid byte with U+FFFD", "[models][unicode]") {
  using V = std::vector<uint32_t>;
  CHECK(utf8_to_codepoints("a\xC3\xA9\xE4\xB8\x96\xF0\x9F\xA6\x99") ==
        V{'a', 0xE9, 0x4E16, 0x1F999});
  CHECK(utf8_to_codepoints("\xC3") == V{kReplacementChar});
  CHECK(utf8_to_codepoints("\xE2\x82x") == V{kReplacementChar, kReplacementChar, 'x'});
  CHECK(utf8_to_codepoints("\xF4\x90\x80\x80") == V(4, kReplacementChar));  // above U+10FFFF
  CHECK(utf8_to_codepoints("\xFF\xBF") == V(2, kReplacementChar));
  std::string s;
  for (uint32_t cp : {0x41u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) append_utf8(&s, cp);
  CHECK(utf8_to_codepoints(s) == V{0x41, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF});
  CHECK(utf8_sequence_length(0xF0) == 4);
  CHECK(utf8_sequence_length(0x80) == 1);
}
