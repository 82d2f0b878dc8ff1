// UTF-8 decoding and the Unicode character classes that tokenizers need.
//
// Pre-tokenizers split text with regexes over Unicode classes (\p{L}, \p{N},
// \p{P}, \s). Kiln implements those regexes by hand instead of pulling in a
// regex engine, so it needs the general category of every code point: a
// run-length table generated from the Unicode database (unicode_tables.cpp,
// about 9 KB). Decoding follows llama.cpp so that token ids match it on any
// input: an invalid byte becomes U+FFFD and decoding resumes at the next byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// The first letter of the Unicode general category; `unassigned` is Cn.
enum class UnicodeCategory : uint8_t {
  unassigned = 0,
  number = 1,       // N*
  letter = 2,       // L*
  separator = 3,    // Z*
  mark = 4,         // M*
  punctuation = 5,  // P*
  symbol = 6,       // S*
  control = 7,      // Cc, Cf, Cs, Co
};

constexpr uint32_t kReplacementChar = 0xFFFD;

UnicodeCategory unicode_category(uint32_t cp);
// The White_Space property (the set regex \s matches), not the Z category.
bool is_unicode_whitespace(uint32_t cp);
inline bool is_unicode_letter(uint32_t cp) {
  return unicode_category(cp) == UnicodeCategory::letter;
}
inline bool is_unicode_number(uint32_t cp) {
  return unicode_category(cp) == UnicodeCategory::number;
}
inline bool is_unicode_punctuation(uint32_t cp) {
  return unicode_category(cp) == UnicodeCategory::punctuation;
}

// Bytes of the UTF-8 sequence a lead byte announces (1 for continuation bytes).
size_t utf8_sequence_length(uint8_t lead);
// Decodes one code point at *pos and advances past it; an invalid sequence
// yields U+FFFD and advances one byte.
uint32_t decode_utf8(std::string_view s, size_t* pos);
std::vector<uint32_t> utf8_to_codepoints(std::string_view s);
void append_utf8(std::string* out, uint32_t cp);  // cp > U+10FFFF appends U+FFFD
std::string codepoints_to_utf8(const uint32_t* cps, size_t n);

}  // namespace kiln
