// A chat template's text cut into tokens as jinja2's lexer cuts it, with
// the environment transformers uses (trim_blocks, lstrip_blocks, no kept
// trailing newline). Most of the bytes a chat template renders are the
// whitespace around its tags, so the whitespace rules here decide whether a
// render matches Python's: `-` strips all whitespace on its side, `+`
// keeps it, trim_blocks drops the newline after a block or comment tag, and
// lstrip_blocks drops the spaces and tabs before one that starts a line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::jinja {

enum class Tok : uint8_t {
  data,         // text outside tags (raw blocks included)
  var_begin,    // {{
  var_end,      // }}
  block_begin,  // {%
  block_end,    // %}
  name,
  string,    // text holds the decoded literal
  integer,   // ival
  floating,  // fval
  op,        // text holds the operator: + - // ** == ( ...
  eof,
};

struct Token {
  Tok type = Tok::eof;
  int line = 1;
  std::string text;
  int64_t ival = 0;
  double fval = 0;
};

// Throws kiln::Error ("chat template line N: ...") for text jinja2's lexer
// rejects: an unclosed tag, comment or string, a character no token starts
// with.
std::vector<Token> lex(std::string_view source);

// "chat template line N: what"
std::string at_line(int line, const std::string& what);

}  // namespace kiln::jinja
