#include "models/grammar/gbnf.h"

#include <map>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace {

// Bounds that keep hostile text from exhausting memory or the stack.
constexpr uint64_t kMaxRepetition = 2000;  // llama.cpp's MAX_REPETITION_THRESHOLD
constexpr size_t kMaxElements = 200000;    // after expanding repetitions
constexpr int kMaxNesting = 256;           // parentheses

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Grammar parse() {
    skip_space(true);
    while (!at_end()) parse_rule();
    for (size_t i = 0; i < g_.rules.size(); ++i)
      if (!defined_[i]) fail(first_use_[i], "undefined rule '" + g_.rules[i].name + "'");
    auto root = ids_.find("root");
    if (root == ids_.end()) throw Error("grammar has no 'root' rule");
    g_.root = root->second;
    g_.check();
    return std::move(g_);
  }

 private:
  // "line L, column C" of a byte offset; columns count bytes from 1.
  std::string where(size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(col);
  }
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw Error("grammar " + where(at) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { fail(pos_, what); }

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  // What stands at the current position, for messages.
  std::string found() const {
    if (at_end()) return "the end of the grammar";
    char c = peek();
    if (c == '\n' || c == '\r') return "the end of the line";
    if (static_cast<unsigned char>(c) < 0x20) return "a control character";
    return "'" + std::string(1, c) + "'";
  }

  // Spaces, tabs and comments; newlines too where `newline_ok`.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  uint32_t symbol(const std::string& name, size_t at) {
    auto [it, inserted] = ids_.emplace(name, static_cast<uint32_t>(g_.rules.size()));
    if (inserted) {
      g_.rules.push_back({name, {}});
      defined_.push_back(false);
      first_use_.push_back(at);
    }
    return it->second;
  }
  uint32_t new_rule(const std::string& base) {
    std::string name = base + "_" + std::to_string(g_.rules.size());
    uint32_t id = symbol(name, pos_);
    defined_[id] = true;
    return id;
  }
  void count(size_t n) {
    elements_ += n;
    if (elements_ > kMaxElements)
      fail("the grammar is too large (over " + std::to_string(kMaxElements) +
           " elements once repetitions are expanded)");
  }

  void parse_rule() {
    const size_t start = pos_;
    if (!is_word_char(peek())) fail("expected a rule name, found " + found());
    while (is_word_char(peek())) ++pos_;
    std::string name(src_.substr(start, pos_ - start));
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    uint32_t id = symbol(name, start);
    if (defined_[id]) fail(start, "rule '" + name + "' is defined twice");
    defined_[id] = true;
    g_.rules[id].alternatives = parse_alternates(name, false, 0);
    if (peek() == '\r') {
      pos_ += peek(1) == '\n' ? 2 : 1;
    } else if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      fail("expected the end of the rule or the line, found " + found());
    }
    skip_space(true);
  }

  std::vector<GrammarSequence> parse_alternates(const std::string& rule, bool nested, int depth) {
    std::vector<GrammarSequence> alts;
    alts.push_back(parse_sequence(rule, nested, depth));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, nested, depth));
    }
    return alts;
  }

  // One code point of a literal or class, escapes resolved.
  uint32_t parse_char() {
    const size_t start = pos_;
    if (at_end()) fail("unexpected end of the grammar");
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      char e = peek(1);
      pos_ += 2;
      switch (e) {
        case 'x': return parse_hex(2, start);
        case 'u': return parse_hex(4, start);
        case 'U': return parse_hex(8, start);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': return static_cast<unsigned char>(e);
      }
      if (e == '\0' && pos_ > src_.size()) fail(start, "unexpected end of the grammar after '\\'");
      fail(start, "unknown escape '\\" + std::string(1, e) + "'");
    }
    // A UTF-8 sequence, validated: the grammar's characters are code points.
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0) fail("invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      unsigned char cc = static_cast<unsigned char>(peek(i));
      if ((cc & 0xC0) != 0x80) fail("invalid UTF-8 in the grammar");
      cp = (cp << 6) | (cc & 0x3F);
    }
    static const uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF))
      fail("invalid UTF-8 in the grammar");
    pos_ += len;
    return cp;
  }
  uint32_t parse_hex(int digits, size_t start) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char c = peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        fail(start, "expected " + std::to_string(digits) + " hex digits after '\\" +
                        std::string(1, src_[start + 1]) + "'");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodepoint) fail(start, "code point beyond U+10FFFF");
    if (v >= 0xD800 && v <= 0xDFFF)
      fail(start, "code point in the surrogate range U+D800-DFFF (it has no UTF-8 form)");
    return v;
  }

  uint64_t parse_count() {
    if (!is_digit(peek())) fail("expected an integer, found " + found());
    uint64_t v = 0;
    const size_t start = pos_;
    while (is_digit(peek())) {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxRepetition)
        fail(start, "repetition count above " + std::to_string(kMaxRepetition));
      ++pos_;
    }
    return v;
  }

  // x{min,max} (max == UINT64_MAX: no upper bound) of the last item of
  // `seq`, which starts at `last`. Counts of two or more stay one counted
  // element (x{m,} is x{m} x*); the rest expand as llama.cpp's do: x?
  // becomes x_a with x_a ::= x |, x+ becomes x x_c with x_c ::= x x_c |.
  void repeat(const std::string& rule, GrammarSequence& seq, size_t last, uint64_t min,
              uint64_t max, size_t at) {
    if (last == seq.size()) fail(at, "expected an item before '" + std::string(1, src_[at]) + "'");
    GrammarSequence item(seq.begin() + static_cast<ptrdiff_t>(last), seq.end());
    if (min >= 2 || (max != UINT64_MAX && max >= 2)) {
      seq.resize(last);
      uint32_t body;
      if (item.size() == 1 && item[0].kind == GrammarElement::Kind::rule) {
        body = item[0].rule;
      } else {
        body = new_rule(rule);
        g_.rules[body].alternatives = {std::move(item)};
      }
      const uint32_t lo = static_cast<uint32_t>(min);
      if (max != UINT64_MAX) {
        seq.push_back(GrammarElement::repeat(body, lo, static_cast<uint32_t>(max)));
        count(1);
        return;
      }
      // x{m,} is x{m} then x*.
      const uint32_t loop = new_rule(rule);
      g_.rules[loop].alternatives = {{GrammarElement::ref(body), GrammarElement::ref(loop)}, {}};
      seq.push_back(GrammarElement::repeat(body, lo, lo));
      seq.push_back(GrammarElement::ref(loop));
      count(4);
      return;
    }
    if (min == 0) seq.resize(last);
    const uint64_t copies = min == 0 ? 0 : min - 1;
    const uint64_t optional = max == UINT64_MAX ? 1 : max - min;
    count(item.size() * (copies + optional + 1));
    for (uint64_t i = 0; i < copies; ++i) seq.insert(seq.end(), item.begin(), item.end());
    uint32_t inner = 0;
    for (uint64_t i = 0; i < optional; ++i) {
      uint32_t id = new_rule(rule);
      GrammarSequence body = item;
      if (max == UINT64_MAX)
        body.push_back(GrammarElement::ref(id));
      else if (i > 0)
        body.push_back(GrammarElement::ref(inner));
      g_.rules[id].alternatives = {std::move(body), {}};
      inner = id;
    }
    if (optional > 0) seq.push_back(GrammarElement::ref(inner));
  }

  GrammarSequence parse_sequence(const std::string& rule, bool nested, int depth) {
    GrammarSequence seq;
    size_t last = 0;  // where the last item starts; seq.size() before any
    bool any = false;
    while (!at_end()) {
      const size_t at = pos_;
      const char c = peek();
      if (c == '"') {
        ++pos_;
        last = seq.size();
        any = true;
        while (peek() != '"') {
          if (at_end()) fail(at, "unterminated string literal");
          seq.push_back(GrammarElement::codepoint(parse_char()));
          count(1);
        }
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        bool negated = peek() == '^';
        if (negated) ++pos_;
        std::vector<CodepointRange> ranges;
        while (peek() != ']') {
          if (at_end()) fail(at, "unterminated character class");
          const size_t item = pos_;
          uint32_t lo = parse_char(), hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
            ++pos_;
            hi = parse_char();
            if (hi < lo) fail(item, "character range with its end before its start");
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        if (ranges.empty()) fail(at, "empty character class");
        ranges = normalize_ranges(std::move(ranges));
        if (negated) ranges = complement_ranges(ranges);
        last = seq.size();
        any = true;
        seq.push_back({GrammarElement::Kind::chars, std::move(ranges), 0});
        count(1);
      } else if (is_word_char(c)) {
        while (is_word_char(peek())) ++pos_;
        last = seq.size();
        any = true;
        seq.push_back(GrammarElement::ref(symbol(std::string(src_.substr(at, pos_ - at)), at)));
        count(1);
      } else if (c == '(') {
        if (depth >= kMaxNesting)
          fail("parentheses nested more than " + std::to_string(kMaxNesting) + " deep");
        ++pos_;
        skip_space(true);
        uint32_t id = new_rule(rule);
        g_.rules[id].alternatives = parse_alternates(rule, true, depth + 1);
        if (peek() != ')')
          fail("expected ')' to close the group opened at " + where(at) + ", found " + found());
        ++pos_;
        last = seq.size();
        any = true;
        seq.push_back(GrammarElement::ref(id));
        count(1);
      } else if (c == '.') {
        ++pos_;
        last = seq.size();
        any = true;
        seq.push_back({GrammarElement::Kind::chars, {{0, kMaxCodepoint}}, 0});
        count(1);
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        if (!any) fail(at, std::string("expected an item before '") + c + "'");
        repeat(rule, seq, last, c == '+' ? 1 : 0, c == '?' ? 1 : UINT64_MAX, at);
      } else if (c == '{') {
        ++pos_;
        if (!any) fail(at, "expected an item before '{'");
        skip_space(nested);
        uint64_t min = parse_count(), max = min;
        skip_space(nested);
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          max = is_digit(peek()) ? parse_count() : UINT64_MAX;
          skip_space(nested);
        }
        if (peek() != '}') fail("expected '}' to close the repetition, found " + found());
        ++pos_;
        if (max < min)
          fail(at, "repetition {" + std::to_string(min) + "," + std::to_string(max) +
                       "} has its maximum below its minimum");
        repeat(rule, seq, last, min, max, at);
      } else if (c == '<' || c == '!') {
        fail("token references (<...>) are not supported by Kiln's grammars");
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  std::string_view src_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
  size_t elements_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace kiln
