// GBNF, llama.cpp's grammar text (the `grammar` field of llama-server
// requests), read into a Grammar (models/grammar/grammar.h).
//
// The syntax is llama.cpp's (its grammars/README.md): `name ::= ...` rules
// whose names are letters, digits and dashes; alternatives `|`; sequences;
// groups `( )`; `?`, `*`, `+`, `{m}`, `{m,}`, `{m,n}`; string literals and
// character classes (`[a-z]`, `[^...]`) with the escapes \n \r \t \\ \" \[
// \] \- \xHH \uHHHH \UHHHHHHHH; `.` for any character; `#` comments; `root`
// is the start. A newline ends a rule unless it follows `::=` or `|` or lies
// inside parentheses. Repetition counts of two or more stay counted
// (GrammarElement::repeat); `?`, `*`, `+` expand into helper rules as
// llama.cpp expands them. Where llama.cpp would accept something that can only be a
// mistake, Kiln refuses it with a message instead: a rule defined twice, an
// empty or reversed class range, a repetition count above 2000 (llama.cpp
// silently drops such an upper bound), and token references (`<[id]>`,
// `<think>`, `!<...>`), which Kiln's character-level matcher does not run.
// Every problem is a kiln::Error "grammar line L, column C: ..."; no input
// makes the parser crash, recurse without bound or run without end.
#pragma once

#include <string_view>

#include "models/grammar/grammar.h"

namespace kiln {

// Parses and checks (Grammar::check) the grammar text.
Grammar parse_gbnf(std::string_view text);

}  // namespace kiln
