// A chat template's tokens parsed into statements and expressions with
// jinja2's grammar and precedence (its parser.py, rule for rule), so an
// expression groups as Python's jinja2 groups it. Like jinja2 compiling a
// template, parsing refuses an unknown filter or test and a tag Kiln does
// not run (extends, include, import, ...) before anything renders: each
// error names the construct and its line.
#pragma once

#include <memory>
#include <string_view>

#include "models/jinja/ast.h"

namespace kiln::jinja {

// Throws kiln::Error ("chat template line N: ...") on a syntax error or an
// unsupported construct.
std::unique_ptr<Program> parse(std::string_view source);

}  // namespace kiln::jinja
