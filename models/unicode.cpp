#include "models/unicode.h"

#include <algorithm>

namespace kiln {

namespace unicode_data {
extern const uint32_t kCategoryRuns[];
extern const size_t kCategoryRunCount;
}  // namespace unicode_data

UnicodeCategory unicode_category(uint32_t cp) {
  if (cp > 0x10FFFF) return UnicodeCategory::unassigned;
  const uint32_t* begin = unicode_data::kCategoryRuns;
  const uint32_t* end = begin + unicode_data::kCategoryRunCount;
  // The last run starting at or before cp; runs are sorted by first code point.
  const uint32_t* it = std::upper_bound(begin, end, (cp << 3) | 7u) - 1;
  return static_cast<UnicodeCategory>(*it & 7u);
}

bool is_unicode_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[lead >> 4];
}

uint32_t decode_utf8(std::string_view s, size_t* pos) {
  size_t i = *pos;
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  auto cont = [&](size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  uint8_t b0 = byte(i);
  uint32_t cp = kReplacementChar;
  size_t n = 1;
  // Like llama.cpp, overlong forms and surrogates are accepted: token ids must
  // agree with it even on odd input.
  if (b0 < 0x80) {
    cp = b0;
  } else if ((b0 & 0xE0) == 0xC0 && cont(i + 1)) {
    cp = ((b0 & 0x1Fu) << 6) | (byte(i + 1) & 0x3Fu);
    n = 2;
  } else if ((b0 & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
    cp = ((b0 & 0x0Fu) << 12) | ((byte(i + 1) & 0x3Fu) << 6) | (byte(i + 2) & 0x3Fu);
    n = 3;
  } else if ((b0 & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
    cp = ((b0 & 0x07u) << 18) | ((byte(i + 1) & 0x3Fu) << 12) | ((byte(i + 2) & 0x3Fu) << 6) |
         (byte(i + 3) & 0x3Fu);
    n = 4;
    if (cp > 0x10FFFF) cp = kReplacementChar, n = 1;
  }
  *pos = i + n;
  return cp;
}

std::vector<uint32_t> utf8_to_codepoints(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out.push_back(decode_utf8(s, &pos));
  return out;
}

void append_utf8(std::string* out, uint32_t cp) {
  if (cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string codepoints_to_utf8(const uint32_t* cps, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) append_utf8(&out, cps[i]);
  return out;
}

}  // namespace kiln
