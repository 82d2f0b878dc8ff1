// What a chat template can call: jinja2's filters and tests, the Python
// methods of str, dict and list, and the globals transformers defines
// (raise_exception, strftime_now) beside jinja2's (range, namespace, dict).
// Each follows its Python definition, argument names and defaults included,
// because templates call them with keywords (tojson(indent=4),
// default(x, true)). Attribute and item access follow jinja2's
// ImmutableSandboxedEnvironment: methods that modify a list or dict are
// refused, a missing attribute is Undefined.
#pragma once

#include <string>
#include <string_view>

#include "models/jinja/ast.h"
#include "models/jinja/value.h"

namespace kiln::jinja {

// The filter or test of that name; null when jinja2 has none (or Kiln
// does not implement it).
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// obj.name and obj[key] as the sandboxed environment resolves them.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);

// obj.name(args) for a method of a str, dict or list; `found` is false when
// obj has no such method (the caller then calls whatever get_attr gives).
Value call_method(const Value& obj, const std::string& name, CallArgs& args, bool* found);

// Python's `fmt % args` (printf-style: %s %r %d %i %f %e %g %x %o %c %%,
// flags, width, precision, %(name)s with a dict); the `format` filter too.
std::string percent_format(const std::string& fmt, const Value& args);

// Python's iter(v) as a list: a list's items, a dict's keys, a string's
// characters; Undefined gives nothing.
List iterate(const Value& v);

// The globals of a render: range, dict, namespace, joiner, cycler,
// raise_exception, strftime_now (which reads the interpreter's clock).
Value find_global(Interpreter& in, std::string_view name);

}  // namespace kiln::jinja
