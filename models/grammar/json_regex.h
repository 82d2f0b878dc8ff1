// A JSON schema `pattern` as GBNF for the inside of a JSON string.
//
// JSON Schema validators search the decoded string with the pattern
// (Python's re.search for the reference one), so any string the pattern
// matches in full is valid: Kiln generates full matches only. The regex is
// read in a common subset (literals, escapes, `.`, classes, \d \w \s and
// their negations, groups, `|`, `* + ? {n} {n,} {n,m}`, lazy forms, `^` and
// `$` at the ends) and each character comes out in its JSON-encoded form
// (`"` and `\` and control characters escaped). Where engines disagree the
// grammar stays inside what all accept: \d is [0-9] and \w [A-Za-z0-9_]
// (Unicode engines accept more), and the negated shorthands and negated
// classes holding them keep to ASCII. Anything else (backreferences,
// lookaround, flags, \b, Unicode properties) is refused.
#pragma once

#include <string>

namespace kiln {

// GBNF expression for the JSON string contents (between the quotes) of the
// strings that match `pattern` in full. Throws kiln::Error naming what is
// not supported.
std::string json_pattern_to_gbnf(const std::string& pattern);

}  // namespace kiln
