#include "models/jinja/pystr.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "models/jinja/value.h"
#include "models/unicode.h"

namespace kiln::jinja::pystr {

namespace {

constexpr size_t kMaxResult = 64u << 20;

// Simple case mappings of the scripts chat contents use (Latin, Greek,
// Cyrillic, Armenian, fullwidth Latin). Python's full mapping has more
// (and context rules such as final sigma); a code point outside these
// ranges keeps its case.
uint32_t to_lower_cp(uint32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F) || (c >= 0xFF21 && c <= 0xFF3A))
    return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  if (c >= 0x531 && c <= 0x556) return c + 0x30;
  if (c == 0x178) return 0xFF;
  if (c == 0x130) return 'i';
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c == 0x1E9E) return 0xDF;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177) || (c >= 0x460 && c <= 0x481) ||
      (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F) || (c >= 0x1E00 && c <= 0x1E95) ||
      (c >= 0x1EA0 && c <= 0x1EFF))
    return c % 2 == 0 ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E) || (c >= 0x4C1 && c <= 0x4CE))
    return c % 2 == 1 ? c + 1 : c;
  return c;
}

uint32_t to_upper_cp(uint32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) ||
      (c >= 0x430 && c <= 0x44F) || (c >= 0xFF41 && c <= 0xFF5A))
    return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  if (c >= 0x561 && c <= 0x586) return c - 0x30;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (c == 0x3C2) return 0x3A3;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177) || (c >= 0x460 && c <= 0x481) ||
      (c >= 0x48A && c <= 0x4BF) || (c >= 0x4D0 && c <= 0x52F) || (c >= 0x1E00 && c <= 0x1E95) ||
      (c >= 0x1EA0 && c <= 0x1EFF))
    return c % 2 == 1 ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E) || (c >= 0x4C1 && c <= 0x4CE))
    return c % 2 == 0 ? c - 1 : c;
  return c;
}

bool is_cased(uint32_t c) {
  return to_lower_cp(c) != c || to_upper_cp(c) != c || c == 0xDF || c == 0x138;
}
bool is_lower_cp(uint32_t c) { return to_upper_cp(c) != c || c == 0xDF || c == 0x138; }
bool is_upper_cp(uint32_t c) { return to_lower_cp(c) != c; }

void append_upper(std::string& out, uint32_t c) {
  if (c == 0xDF) {
    out += "SS";
    return;
  }
  append_utf8(&out, to_upper_cp(c));
}

void append_lower(std::string& out, uint32_t c) {
  append_utf8(&out, to_lower_cp(c));
  if (c == 0x130) append_utf8(&out, 0x307);  // İ lowers to i + combining dot
}

bool is_line_break(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

}  // namespace

bool is_space(uint32_t cp) { return is_unicode_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

bool is_printable(uint32_t cp) {
  if (cp == ' ') return true;
  switch (unicode_category(cp)) {
    case UnicodeCategory::unassigned:
    case UnicodeCategory::separator:
    case UnicodeCategory::control: return false;
    default: return true;
  }
}

bool is_alnum(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z');
  const UnicodeCategory c = unicode_category(cp);
  return c == UnicodeCategory::letter || c == UnicodeCategory::number;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<uint32_t> codepoints(std::string_view s) { return utf8_to_codepoints(s); }

std::string encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  return begin < end ? codepoints_to_utf8(cps.data() + begin, end - begin) : std::string();
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::vector<uint32_t> set;
  if (chars) set = utf8_to_codepoints(*chars);
  auto strippable = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c);
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t next = b;
      if (!strippable(decode_utf8(s, &next))) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t p = start;
      if (!strippable(decode_utf8(s, &p))) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (from_right) {
      size_t end = s.size();
      while (maxsplit != 0) {
        size_t at = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string::npos;
        if (at == std::string_view::npos) break;
        out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
        --maxsplit;
      }
      out.emplace_back(s.substr(0, end));
      std::reverse(out.begin(), out.end());
      return out;
    }
    size_t start = 0;
    while (maxsplit != 0) {
      size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
      --maxsplit;
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  // Runs of whitespace; no empty strings.
  std::vector<uint32_t> cps = utf8_to_codepoints(s);
  if (from_right) {
    size_t i = cps.size();
    while (i > 0) {
      while (i > 0 && is_space(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit == 0) {
        size_t b = 0;
        while (b < i && is_space(cps[b])) ++b;
        out.push_back(encode(cps, b, i));
        break;
      }
      size_t j = i;
      while (j > 0 && !is_space(cps[j - 1])) --j;
      out.push_back(encode(cps, j, i));
      i = j;
      --maxsplit;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit == 0) {
      size_t e = cps.size();
      while (e > i && is_space(cps[e - 1])) --e;
      out.push_back(encode(cps, i, e));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !is_space(cps[j])) ++j;
    out.push_back(encode(cps, i, j));
    i = j;
    --maxsplit;
  }
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, pos = 0;
  while (pos < s.size()) {
    size_t at = pos;
    uint32_t c = decode_utf8(s, &pos);
    if (!is_line_break(c)) continue;
    size_t end = pos;
    if (c == '\r' && pos < s.size() && s[pos] == '\n') end = ++pos;
    out.emplace_back(s.substr(start, (keepends ? end : at) - start));
    start = pos;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `with` before every character and at the end.
    size_t pos = 0;
    while (pos < s.size()) {
      if (count != 0) out += with, --count;
      if (out.size() > kMaxResult) throw RuntimeError("str.replace: result too large");
      size_t start = pos;
      decode_utf8(s, &pos);
      out += s.substr(start, pos - start);
    }
    if (count != 0) out += with;
    return out;
  }
  size_t start = 0;
  while (count != 0) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out += s.substr(start, at - start);
    out += with;
    if (out.size() > kMaxResult) throw RuntimeError("str.replace: result too large");
    start = at + old.size();
    --count;
  }
  out += s.substr(start);
  return out;
}

int64_t find(std::string_view s, std::string_view sub, bool from_right) {
  size_t at = from_right ? s.rfind(sub) : s.find(sub);
  return at == std::string_view::npos ? -1 : static_cast<int64_t>(length(s.substr(0, at)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_upper(out, decode_utf8(s, &pos));
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_lower(out, decode_utf8(s, &pos));
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (size_t pos = 0; pos < s.size(); first = false) {
    uint32_t c = decode_utf8(s, &pos);
    first ? append_upper(out, c) : append_lower(out, c);
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = decode_utf8(s, &pos);
    previous_cased ? append_lower(out, c) : append_upper(out, c);
    previous_cased = is_cased(c);
  }
  return out;
}

bool is_lower(std::string_view s) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = decode_utf8(s, &pos);
    if (is_upper_cp(c)) return false;
    cased |= is_lower_cp(c);
  }
  return cased;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = decode_utf8(s, &pos);
    if (is_lower_cp(c)) return false;
    cased |= is_upper_cp(c);
  }
  return cased;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = decode_utf8(s, &pos);
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", c);
      out += buf;
    } else {
      append_utf8(&out, c);
    }
  }
  out += quote;
  return out;
}

}  // namespace kiln::jinja::pystr
