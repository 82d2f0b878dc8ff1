#include "models/grammar/json_regex.h"

#include <vector>

#include "ir/error.h"
#include "models/grammar/grammar.h"

namespace kiln {

namespace {

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxCount = 1000;

using Ranges = std::vector<CodepointRange>;

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// Python's \s on ASCII: \t \n \v \f \r, the separators \x1C-\x1F, space.
const Ranges kSpace = {{'\t', '\r'}, {0x1C, ' '}};
const Ranges kAscii = {{0, 0x7F}};

// The ASCII characters outside `set` (negated shorthands stay in ASCII,
// where every engine agrees on what \d, \w and \s hold).
Ranges ascii_complement(const Ranges& set) {
  Ranges out;
  for (const CodepointRange& r : complement_ranges(normalize_ranges(set)))
    if (r.lo <= 0x7F) out.push_back({r.lo, std::min<uint32_t>(r.hi, 0x7F)});
  return out;
}

// The code points of `set` as they may appear inside a JSON string.
std::string json_chars(const Ranges& set) {
  Ranges raw;
  for (const CodepointRange& r : set) {
    uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
    if (lo <= r.hi) raw.push_back({lo, r.hi});
  }
  raw = complement_ranges(normalize_ranges(raw));
  raw.push_back({'"', '"'});
  raw.push_back({'\\', '\\'});
  raw.push_back({0, 0x1F});
  raw = complement_ranges(normalize_ranges(raw));  // set minus quote, backslash, controls
  std::vector<std::string> alts;
  bool has_raw = false;
  for (const CodepointRange& r : raw) has_raw |= r.lo < 0xD800 || r.hi > 0xDFFF;
  if (has_raw) alts.push_back(gbnf_class(raw));
  auto contains = [&](uint32_t c) {
    for (const CodepointRange& r : set)
      if (r.lo <= c && c <= r.hi) return true;
    return false;
  };
  if (contains('"')) alts.push_back(gbnf_literal("\\\""));
  if (contains('\\')) alts.push_back(gbnf_literal("\\\\"));
  // Control characters as \u00XX, grouped by the high hex digit.
  for (uint32_t hi = 0; hi < 2; ++hi) {
    std::vector<CodepointRange> low;
    for (uint32_t lo = 0; lo < 16; ++lo) {
      if (!contains(hi * 16 + lo)) continue;
      if (lo < 10) {
        low.push_back({'0' + lo, '0' + lo});
      } else {
        low.push_back({'a' + lo - 10, 'a' + lo - 10});
        low.push_back({'A' + lo - 10, 'A' + lo - 10});
      }
    }
    if (!low.empty())
      alts.push_back(gbnf_literal(hi ? "\\u001" : "\\u000") + " " +
                     gbnf_class(normalize_ranges(low)));
  }
  if (alts.empty()) throw Error("pattern: a character set that no JSON string character matches");
  if (alts.size() == 1) return alts[0];
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

class RegexReader {
 public:
  explicit RegexReader(const std::string& p) : p_(p) {}

  std::string read() {
    size_t end = p_.size();
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    // A trailing unescaped `$` anchors the end (full matches satisfy it).
    if (end > pos_ && p_[end - 1] == '$') {
      size_t backslashes = 0;
      for (size_t i = end - 1; i > pos_ && p_[i - 1] == '\\'; --i) ++backslashes;
      if (backslashes % 2 == 0) end -= 1;
    }
    end_ = end;
    std::string g = alternation(0);
    if (pos_ != end_) fail("unbalanced ')'");
    return g;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("pattern '" + p_ + "' at offset " + std::to_string(pos_) + ": " + what);
  }
  bool at_end() const { return pos_ >= end_; }
  char peek() const { return at_end() ? '\0' : p_[pos_]; }

  std::string alternation(int depth) {
    if (depth > kMaxDepth) fail("groups nested too deeply");
    std::vector<std::string> alts = {sequence(depth)};
    while (peek() == '|') {
      ++pos_;
      alts.push_back(sequence(depth));
    }
    if (alts.size() == 1) return alts[0];
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
  }

  std::string sequence(int depth) {
    std::vector<std::string> items;
    while (!at_end() && peek() != '|' && peek() != ')') items.push_back(quantified(atom(depth)));
    if (items.empty()) return "\"\"";
    if (items.size() == 1) return items[0];
    std::string s = "(";
    for (size_t i = 0; i < items.size(); ++i) s += (i ? " " : "") + items[i];
    return s + ")";
  }

  std::string quantified(std::string item) {
    for (;;) {
      const size_t start = pos_;
      uint64_t min = 0, max = UINT64_MAX;
      const char c = peek();
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{' && braces(&min, &max)) {
      } else {
        return item;
      }
      if (peek() == '?')
        ++pos_;  // lazy: the same strings
      else if (peek() == '+')
        fail("possessive quantifiers are not supported");
      if (max != UINT64_MAX && max < min) {
        pos_ = start;
        fail("quantifier with its maximum below its minimum");
      }
      if (min > kMaxCount || (max != UINT64_MAX && max > kMaxCount))
        fail("quantifier count above " + std::to_string(kMaxCount));
      if (min == 0 && max == UINT64_MAX)
        item = "(" + item + ")*";
      else if (min == 1 && max == UINT64_MAX)
        item = "(" + item + ")+";
      else if (min == 0 && max == 1)
        item = "(" + item + ")?";
      else
        item = "(" + item + "){" + std::to_string(min) + "," +
               (max == UINT64_MAX ? "" : std::to_string(max)) + "}";
    }
  }

  // {n}, {n,}, {n,m} or {,m}; false (nothing consumed) when the brace is a literal.
  bool braces(uint64_t* min, uint64_t* max) {
    size_t i = pos_ + 1;
    auto number = [&](uint64_t* out) {
      size_t start = i;
      uint64_t v = 0;
      while (i < end_ && p_[i] >= '0' && p_[i] <= '9') {
        v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(p_[i] - '0'), kMaxCount + 1);
        ++i;
      }
      *out = v;
      return i > start;
    };
    uint64_t a = 0, b = UINT64_MAX;
    const bool has_a = number(&a);
    if (i < end_ && p_[i] == '}') {
      if (!has_a) return false;
      b = a;
    } else if (i < end_ && p_[i] == ',') {
      ++i;
      if (!number(&b)) b = UINT64_MAX;
      if (i >= end_ || p_[i] != '}') return false;
    } else {
      return false;
    }
    pos_ = i + 1;
    *min = a;
    *max = b;
    return true;
  }

  uint32_t utf8_char() {
    const unsigned char c = static_cast<unsigned char>(p_[pos_]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > end_) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
    for (int i = 1; i < len; ++i) {
      const unsigned char cc = static_cast<unsigned char>(p_[pos_ + static_cast<size_t>(i)]);
      if ((cc & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i, ++pos_) {
      const char c = peek();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    return v;
  }

  // An escape after the backslash: a set (shorthands) or one code point.
  // *negated_shorthand: it was \D, \W or \S (whose ASCII form the caller keeps).
  Ranges escape(bool* shorthand) {
    if (at_end()) fail("pattern ends with a backslash");
    const char c = p_[pos_++];
    *shorthand = true;
    switch (c) {
      case 'd': return kDigit;
      case 'D': return ascii_complement(kDigit);
      case 'w': return kWord;
      case 'W': return ascii_complement(kWord);
      case 's': return kSpace;
      case 'S': return ascii_complement(kSpace);
    }
    *shorthand = false;
    auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (c) {
      case 'n': return one('\n');
      case 't': return one('\t');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case 'x': return one(hex(2));
      case 'u': return one(hex(4));
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      fail(std::string("the escape \\") + c + " is not supported");
    --pos_;
    return one(utf8_char());  // escaped punctuation or a non-ASCII character stands for itself
  }

  Ranges char_class() {
    ++pos_;  // [
    bool negated = peek() == '^';
    if (negated) ++pos_;
    Ranges set;
    bool shorthand_inside = false, first = true;
    while (first || peek() != ']') {
      if (at_end()) fail("unterminated character class");
      first = false;
      Ranges lo;
      bool shorthand = false;
      if (peek() == '\\') {
        ++pos_;
        lo = escape(&shorthand);
      } else if (peek() == '[' && pos_ + 1 < end_ && p_[pos_ + 1] == ':') {
        fail("POSIX classes ([:alpha:]) are not supported");
      } else {
        lo = {{utf8_char(), 0}};
        lo[0].hi = lo[0].lo;
      }
      shorthand_inside |= shorthand;
      if (!shorthand && peek() == '-' && pos_ + 1 < end_ && p_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi;
        bool hi_shorthand = false;
        if (peek() == '\\') {
          ++pos_;
          hi = escape(&hi_shorthand);
        } else {
          hi = {{utf8_char(), 0}};
          hi[0].hi = hi[0].lo;
        }
        if (hi_shorthand) fail("a class range cannot end in a shorthand (\\d, \\w, \\s)");
        if (hi[0].lo < lo[0].lo) fail("class range with its end before its start");
        set.push_back({lo[0].lo, hi[0].lo});
      } else {
        set.insert(set.end(), lo.begin(), lo.end());
      }
    }
    ++pos_;  // ]
    set = normalize_ranges(std::move(set));
    if (!negated) return set;
    // Other engines' \d, \w and \s reach beyond ASCII: keep their complement in ASCII.
    return shorthand_inside ? ascii_complement(set) : complement_ranges(set);
  }

  std::string atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        ++pos_;
        if (peek() == ':') {
          ++pos_;
        } else if (peek() == 'P' && pos_ + 1 < end_ && p_[pos_ + 1] == '<') {
          while (!at_end() && peek() != '>') ++pos_;
          if (at_end()) fail("unterminated group name");
          ++pos_;
        } else {
          fail("lookaround, flags and other (?...) groups are not supported");
        }
      }
      std::string inner = alternation(depth + 1);
      if (peek() != ')') fail("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return json_chars(char_class());
    if (c == '.') {
      ++pos_;
      return json_chars(complement_ranges({{'\n', '\n'}}));
    }
    if (c == '\\') {
      ++pos_;
      bool shorthand = false;
      if (peek() == 'b' || peek() == 'B' || peek() == 'A' || peek() == 'Z' || peek() == 'z')
        fail("anchors other than ^ and $ at the ends are not supported");
      if (peek() >= '1' && peek() <= '9') fail("backreferences are not supported");
      return json_chars(escape(&shorthand));
    }
    if (c == '^' || c == '$') fail("anchors are supported only at the pattern's start and end");
    if (c == '*' || c == '+' || c == '?') fail("a quantifier with nothing to repeat");
    const uint32_t cp = utf8_char();
    return json_chars({{cp, cp}});
  }

  const std::string& p_;
  size_t pos_ = 0, end_ = 0;
};

}  // namespace

std::string json_pattern_to_gbnf(const std::string& pattern) { return RegexReader(pattern).read(); }

}  // namespace kiln
