#include "models/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ir/error.h"
#include "models/jinja/pystr.h"
#include "models/unicode.h"

namespace kiln::jinja {

std::string at_line(int line, const std::string& what) {
  return "chat template line " + std::to_string(line) + ": " + what;
}

namespace {

bool is_ws(std::string_view s, size_t pos, size_t* len) {
  size_t p = pos;
  uint32_t c = decode_utf8(s, &p);
  *len = p - pos;
  return pystr::is_space(c);
}

// Python's str.rstrip() (all Unicode whitespace).
std::string_view rstrip_ws(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t start = e - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len;
    if (!is_ws(s, start, &len)) break;
    e = start;
  }
  return s.substr(0, e);
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) {
    // jinja2 splits the source at \r\n, \r and \n, joins the lines with \n
    // and, without keep_trailing_newline, drops one final newline.
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit_data(std::string_view(src_).substr(pos_));
        break;
      }
      const char kind = src_[start + 1];
      const char sign =
          start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+')
              ? src_[start + 2]
              : 0;
      std::string_view text = std::string_view(src_).substr(pos_, start - pos_);
      const int text_lines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      text = strip_before(text, sign, kind != '{');
      const int line_after_text = line_ + text_lines;
      emit_data(text);
      line_ = line_after_text;
      pos_ = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        comment();
      } else if (kind == '%' && raw_block()) {
      } else {
        tag(kind == '%');
      }
    }
    push(Tok::eof, "");
    return std::move(tokens_);
  }

 private:
  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;  // the last tag's end consumed a newline
  std::vector<Token> tokens_;

  [[noreturn]] void fail(const std::string& what) const { throw Error(at_line(line_, what)); }

  size_t find_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1))
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#'))
        return p;
    return std::string::npos;
  }

  // The whitespace control at a tag's start: `-` strips all whitespace
  // before it; otherwise lstrip_blocks strips a block or comment tag's
  // indentation when only spaces and tabs precede it on its line.
  std::string_view strip_before(std::string_view text, char sign, bool lstrip) const {
    if (sign == '-') return rstrip_ws(text);
    if (sign == '+' || !lstrip) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos == 0 && !line_starting_) return text;
    for (size_t i = l_pos; i < text.size(); ++i)
      if (text[i] != ' ' && text[i] != '\t') return text;
    return text.substr(0, l_pos);
  }

  void emit_data(std::string_view text) {
    if (text.empty()) return;
    if (!tokens_.empty() && tokens_.back().type == Tok::data) {
      tokens_.back().text += text;
      return;
    }
    push(Tok::data, std::string(text));
  }

  Token& push(Tok t, std::string text) {
    Token tok;
    tok.type = t;
    tok.line = line_;
    tok.text = std::move(text);
    tokens_.push_back(std::move(tok));
    return tokens_.back();
  }

  void advance_to(size_t end) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                         src_.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
    pos_ = end;
  }

  // After a tag's end at pos_: `-` eats all whitespace, trim_blocks one
  // newline (block and comment tags only), `+` nothing.
  void strip_after(char sign, bool trim) {
    size_t p = pos_;
    if (sign == '-') {
      size_t len;
      while (p < src_.size() && is_ws(src_, p, &len)) p += len;
    } else if (sign != '+' && trim && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    advance_to(p);
  }

  void finish_tag(size_t end_pos, char sign, bool trim) {
    advance_to(end_pos);
    strip_after(sign, trim);
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void comment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("missing end of comment tag");
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    finish_tag(end + 2, sign, true);
  }

  // {% raw %} ... {% endraw %}: the text between is data, tags and all.
  bool raw_block() {
    size_t p = skip_ws(pos_);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = skip_ws(p + 3);
    char sign = 0;
    if (p < src_.size() && src_[p] == '-') sign = '-', ++p;
    if (src_.compare(p, 2, "%}") != 0) return false;
    finish_tag(p + 2, sign == '-' ? '-' : '+', false);
    // Find {%[-+]? endraw [-+]?%}.
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      char open_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) open_sign = src_[r++];
      r = skip_ws(r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = skip_ws(r + 6);
      char close_sign = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) close_sign = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string_view body = std::string_view(src_).substr(pos_, q - pos_);
      const int body_lines = static_cast<int>(std::count(body.begin(), body.end(), '\n'));
      const bool saved = line_starting_;
      line_starting_ = false;
      body = strip_before(body, open_sign, true);
      line_starting_ = saved;
      emit_data(body);
      line_ += body_lines;
      pos_ = q;
      finish_tag(r + 2, close_sign, true);
      return true;
    }
    fail("missing end of raw directive");
  }

  size_t skip_ws(size_t p) const {
    size_t len;
    while (p < src_.size() && is_ws(src_, p, &len)) p += len;
    return p;
  }

  // The tokens of an expression tag up to its end.
  void tag(bool block) {
    push(block ? Tok::block_begin : Tok::var_begin, "");
    int depth = 0;
    for (;;) {
      // Whitespace between tokens.
      size_t len;
      while (pos_ < src_.size() && is_ws(src_, pos_, &len)) {
        if (src_[pos_] == '\n') ++line_;
        pos_ += len;
      }
      if (pos_ >= src_.size())
        fail(block ? "unexpected end of template: a block tag ({% ... %}) is not closed"
                   : "unexpected end of template: a {{ ... }} is not closed");
      if (depth == 0) {
        const char* end = block ? "%}" : "}}";
        for (char sign : {'-', '+', '\0'}) {
          if (sign == '+' && !block) continue;
          size_t p = pos_;
          if (sign) {
            if (src_[p] != sign) continue;
            ++p;
          }
          if (src_.compare(p, 2, end) == 0) {
            push(block ? Tok::block_end : Tok::var_end, "");
            finish_tag(p + 2, sign, block);
            return;
          }
        }
      }
      const char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
          ++e;
        push(Tok::name, src_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        string(c);
      } else {
        op(depth);
      }
    }
  }

  void number() {
    auto digits = [&](size_t p, auto ok) {
      // digits with single underscores between them
      size_t e = p;
      while (e < src_.size() &&
             (ok(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && ok(src_[e + 1]) && e > p)))
        ++e;
      return e;
    };
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    size_t p = pos_;
    if (src_[p] == '0' && p + 1 < src_.size() && std::strchr("bBoOxX", src_[p + 1]) &&
        src_[p + 1] != '\0') {
      const char base_ch = static_cast<char>(std::tolower(src_[p + 1]));
      const int base = base_ch == 'b' ? 2 : base_ch == 'o' ? 8 : 16;
      auto ok = [base](char ch) {
        return base == 16 ? std::isxdigit(static_cast<unsigned char>(ch)) != 0
                          : ch >= '0' && ch < static_cast<char>('0' + base);
      };
      size_t q = p + 2;
      if (q < src_.size() && src_[q] == '_') ++q;
      size_t e = digits(q, ok);
      if (e > q) {
        std::string t = src_.substr(q, e - q);
        t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
        Token& tok = push(Tok::integer, src_.substr(pos_, e - pos_));
        tok.ival = std::strtoll(t.c_str(), nullptr, base);
        pos_ = e;
        return;
      }
    }
    size_t e = digits(p, dec);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && dec(src_[e + 1])) {
      e = digits(e + 1, dec);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && dec(src_[q])) {
        e = digits(q, dec);
        is_float = true;
      }
    }
    std::string t = src_.substr(pos_, e - pos_);
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    Token& tok = push(is_float ? Tok::floating : Tok::integer, src_.substr(pos_, e - pos_));
    if (is_float) {
      tok.fval = std::strtod(t.c_str(), nullptr);
    } else {
      errno = 0;
      tok.ival = std::strtoll(t.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer literal " + t + " is too large");
    }
    pos_ = e;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  }

  // A quoted literal, decoded as Python's "unicode-escape" codec does.
  void string(char quote) {
    const int start_line = line_;
    std::string out;
    size_t p = pos_ + 1;
    for (;;) {
      if (p >= src_.size()) fail("unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail("unterminated string literal");
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': ++line_; break;  // line continuation
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int i = 0; i < n; ++i) {
            const int h = p < src_.size() ? hex_value(src_[p]) : -1;
            if (h < 0) fail(std::string("truncated \\") + e + " escape in a string literal");
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++p;
          }
          if (cp > 0x10FFFF) fail("illegal Unicode character in a string literal");
          append_utf8(&out, cp);
          break;
        }
        case 'N': fail("\\N{...} escapes are not supported in string literals");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i)
              cp = cp * 8 + static_cast<uint32_t>(src_[p++] - '0');
            append_utf8(&out, cp);
          } else {
            out += '\\';
            --p;  // the character after the backslash is kept as it is
          }
      }
    }
    Token& tok = push(Tok::string, std::move(out));
    tok.line = start_line;
    pos_ = p + 1;
  }

  void op(int& depth) {
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* o : two)
      if (src_.compare(pos_, 2, o) == 0) {
        push(Tok::op, o);
        pos_ += 2;
        return;
      }
    const char c = src_[pos_];
    if (!std::strchr("+-*/%~[](){}<>=.:|,;", c) || c == '\0') {
      size_t p = pos_;
      const uint32_t cp = decode_utf8(src_, &p);
      std::string ch;
      append_utf8(&ch, cp);
      fail("unexpected character '" + ch + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) fail(std::string("unexpected '") + c + "'");
      --depth;
    }
    push(Tok::op, std::string(1, c));
    ++pos_;
  }
};

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace kiln::jinja
