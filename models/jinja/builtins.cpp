#include "models/jinja/builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>

#include "models/jinja/interpreter.h"
#include "models/jinja/pystr.h"
#include "models/jinja/template.h"
#include "models/unicode.h"

namespace kiln::jinja {

namespace {

using Args = std::vector<std::optional<Value>>;

// Binds a call's arguments to a Python signature: positional first, then
// keywords by name; a parameter not given stays empty.
Args bind(const std::string& what, CallArgs& a, std::initializer_list<const char*> names) {
  Args out(names.size());
  if (a.args.size() > names.size())
    throw RuntimeError(what + " takes at most " + std::to_string(names.size()) + " argument(s) (" +
                       std::to_string(a.args.size()) + " given)");
  for (size_t i = 0; i < a.args.size(); ++i) out[i] = a.args[i];
  for (auto& [k, v] : a.kwargs) {
    size_t i = 0;
    for (const char* n : names) {
      if (k == n) break;
      ++i;
    }
    if (i == names.size())
      throw RuntimeError(what + " got an unexpected keyword argument '" + k + "'");
    if (out[i]) throw RuntimeError(what + " got multiple values for argument '" + k + "'");
    out[i] = v;
  }
  return out;
}

bool flag(const std::optional<Value>& v, bool dflt) { return v ? v->truthy() : dflt; }

int64_t int_arg(const std::optional<Value>& v, int64_t dflt, const char* what) {
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool()) {
    require_defined(*v);
    throw RuntimeError(std::string(what) + " must be an integer, not " + type_name(*v));
  }
  return v->as_int();
}

std::string str_arg(const Value& v, const char* what) {
  if (!v.is_string()) {
    require_defined(v);
    throw RuntimeError(std::string(what) + " must be str, not " + type_name(v));
  }
  return v.str();
}

std::optional<std::string> chars_arg(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::nullopt;
  return str_arg(*v, "the characters to strip");
}

Value str_list(const std::vector<std::string>& parts) {
  List out;
  out.reserve(parts.size());
  for (const std::string& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

Value pair(const Value& a, const Value& b) { return Value::tuple({a, b}); }

// ---- attribute access ----

bool is_dict_method(const std::string& n) {
  static const char* const names[] = {"items",      "keys",   "values",  "get",
                                      "copy",       "clear",  "pop",     "popitem",
                                      "setdefault", "update", "fromkeys"};
  for (const char* m : names)
    if (n == m) return true;
  return false;
}
bool is_unsafe_dict_method(const std::string& n) {
  return n == "clear" || n == "pop" || n == "popitem" || n == "setdefault" || n == "update";
}
bool is_list_method(const std::string& n, bool tuple) {
  static const char* const names[] = {"count",  "index", "copy",   "append",  "clear", "extend",
                                      "insert", "pop",   "remove", "reverse", "sort"};
  if (tuple) return n == "count" || n == "index";
  for (const char* m : names)
    if (n == m) return true;
  return false;
}
bool is_str_method(const std::string& n) {
  static const char* const names[] = {
      "strip",      "lstrip",   "rstrip",    "split",      "rsplit",       "splitlines",
      "startswith", "endswith", "upper",     "lower",      "title",        "capitalize",
      "replace",    "find",     "rfind",     "index",      "rindex",       "count",
      "join",       "format",   "isdigit",   "isalpha",    "isalnum",      "isspace",
      "isupper",    "islower",  "isnumeric", "isdecimal",  "removeprefix", "removesuffix",
      "swapcase",   "zfill",    "center",    "ljust",      "rjust",        "partition",
      "rpartition", "casefold", "istitle",   "expandtabs", "encode"};
  for (const char* m : names)
    if (n == m) return true;
  return false;
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                          "' object is unsafe.");
}

Value bound(const Value& obj, const std::string& name) {
  return Value::function(name, [obj, name](CallArgs& a) {
    bool found = false;
    Value r = call_method(obj, name, a, &found);
    if (!found) throw RuntimeError(type_name(obj) + "." + name + "() is not supported");
    return r;
  });
}

Value loop_attr(const Value& loop, const std::string& name) {
  LoopInfo& l = loop.loop_info();
  const int64_t n = static_cast<int64_t>(l.items->size()), i = static_cast<int64_t>(l.index);
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(static_cast<int64_t>(l.depth));
  if (name == "depth0") return Value(static_cast<int64_t>(l.depth - 1));
  if (name == "previtem")
    return i > 0 ? (*l.items)[static_cast<size_t>(i - 1)]
                 : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < n ? (*l.items)[static_cast<size_t>(i + 1)]
                     : Value::undefined("there is no next item");
  if (name == "cycle")
    return Value::function("cycle", [loop](CallArgs& a) -> Value {
      if (a.args.empty()) throw RuntimeError("no items for cycling given");
      return a.args[loop.loop_info().index % a.args.size()];
    });
  return Value::undefined_member(loop, Value(name));
}

// ---- filters ----

std::string soft_str(const Value& v) { return to_str(v); }

Value ignore_case(const Value& v) { return v.is_string() ? Value(pystr::lower(v.str())) : v; }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value get_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value cur = item;
  for (const std::string& part : pystr::split(attribute.str(), std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur =
        get_item(cur, digits ? Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10)))
                             : Value(part));
  }
  return cur;
}

Value filter_default(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("default", a, {"default_value", "boolean"});
  const bool boolean = flag(p[1], false);
  if (v.is_undefined() || (boolean && !v.truthy())) return p[0] ? *p[0] : Value(std::string());
  return v;
}

Value filter_length(Interpreter&, const Value& v, CallArgs& a) {
  bind("length", a, {});
  if (v.is_string()) return Value(static_cast<int64_t>(pystr::length(v.str())));
  if (v.is_sequence()) return Value(static_cast<int64_t>(v.items().size()));
  if (v.is_dict() || v.is_namespace()) {
    if (v.is_namespace()) throw RuntimeError("object of type 'Namespace' has no len()");
    return Value(static_cast<int64_t>(v.entries().items.size()));
  }
  if (v.is_undefined()) return Value(0);
  if (v.is_loop()) return Value(static_cast<int64_t>(v.loop_info().items->size()));
  throw RuntimeError("object of type '" + type_name(v) + "' has no len()");
}

Value filter_trim(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("trim", a, {"chars"});
  return Value(pystr::strip(soft_str(v), chars_arg(p[0]), true, true));
}

Value filter_upper(Interpreter&, const Value& v, CallArgs& a) {
  bind("upper", a, {});
  return Value(pystr::upper(soft_str(v)));
}
Value filter_lower(Interpreter&, const Value& v, CallArgs& a) {
  bind("lower", a, {});
  return Value(pystr::lower(soft_str(v)));
}
Value filter_capitalize(Interpreter&, const Value& v, CallArgs& a) {
  bind("capitalize", a, {});
  return Value(pystr::capitalize(soft_str(v)));
}

Value filter_title(Interpreter&, const Value& v, CallArgs& a) {
  bind("title", a, {});
  // jinja2 splits at runs of [-\s({[<] and capitalises each piece.
  const std::vector<uint32_t> cps = pystr::codepoints(soft_str(v));
  auto sep = [](uint32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pystr::is_space(c);
  };
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    size_t j = i;
    const bool is_sep = sep(cps[i]);
    while (j < cps.size() && sep(cps[j]) == is_sep) ++j;
    const std::string piece = pystr::encode(cps, i, j);
    size_t first_len = 0;
    decode_utf8(piece, &first_len);
    out += pystr::upper(piece.substr(0, first_len)) + pystr::lower(piece.substr(first_len));
    i = j;
  }
  return Value(std::move(out));
}

Value filter_string(Interpreter&, const Value& v, CallArgs& a) {
  bind("string", a, {});
  return Value(soft_str(v));
}

Value filter_safe(Interpreter&, const Value& v, CallArgs& a) {
  bind("safe", a, {});
  return v.is_string() ? v : Value(soft_str(v));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value filter_escape(Interpreter&, const Value& v, CallArgs& a) {
  bind("escape", a, {});
  return Value(html_escape(soft_str(v)));
}

Value filter_first(Interpreter&, const Value& v, CallArgs& a) {
  bind("first", a, {});
  List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value filter_last(Interpreter&, const Value& v, CallArgs& a) {
  bind("last", a, {});
  List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value filter_list(Interpreter&, const Value& v, CallArgs& a) {
  bind("list", a, {});
  return Value::list(iterate(v));
}

Value filter_join(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("join", a, {"d", "attribute"});
  const std::string sep = p[0] ? soft_str(*p[0]) : "";
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += soft_str(p[1] && !p[1]->is_none() ? get_path(x, *p[1]) : x);
  }
  return Value(std::move(out));
}

Value filter_items(Interpreter&, const Value& v, CallArgs& a) {
  bind("items", a, {});
  if (v.is_undefined()) return Value::list();
  if (!v.is_dict()) throw RuntimeError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, x] : v.entries().items) out.push_back(pair(k, x));
  return Value::list(std::move(out));
}

Value filter_tojson(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  DumpOptions o;
  o.ensure_ascii = flag(p[0], false);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string())
      o.indent = p[1]->str();
    else
      o.indent =
          std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg(p[1], 0, "indent"))), ' ');
  }
  if (p[2] && !p[2]->is_none()) {
    if (!p[2]->is_sequence() || p[2]->items().size() != 2)
      throw RuntimeError("tojson: separators must be a pair of strings");
    o.separators = std::make_pair(str_arg(p[2]->items()[0], "separator"),
                                  str_arg(p[2]->items()[1], "separator"));
  }
  o.sort_keys = flag(p[3], false);
  return Value(dumps(v, o));
}

Value filter_replace(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("replace", a, {"old", "new", "count"});
  if (!p[0] || !p[1]) throw RuntimeError("replace() needs the old and new strings");
  return Value(
      pystr::replace(soft_str(v), soft_str(*p[0]), soft_str(*p[1]), int_arg(p[2], -1, "count")));
}

Value filter_indent(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("indent", a, {"width", "first", "blank"});
  std::string ind;
  if (p[0] && p[0]->is_string()) {
    ind = p[0]->str();
  } else {
    const int64_t width = int_arg(p[0], 4, "width");
    if (width > 4096) throw RuntimeError("indent: width too large");
    ind.assign(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
  }
  // jinja2 appends "\n" to the value: only a string takes it.
  if (!v.is_string()) {
    require_defined(v);
    throw RuntimeError("unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  }
  std::string s = v.str() + "\n";
  std::vector<std::string> lines = pystr::splitlines(s, false);
  if (ind.size() * lines.size() > (64u << 20)) throw RuntimeError("indent: result too large");
  std::string rv;
  if (flag(p[2], false)) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    if (!lines.empty()) rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (flag(p[1], false)) rv = ind + rv;
  return Value(std::move(rv));
}

std::optional<double> parse_float(const std::string& text) {
  std::string t = pystr::strip(text, std::nullopt, true, true);
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

Value filter_int(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("int", a, {"default", "base"});
  Value dflt = p[0] ? *p[0] : Value(0);
  const int64_t base = int_arg(p[1], 10, "base");
  require_defined(v);
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(v.as_int());
  auto from_float = [](double d) {
    if (!std::isfinite(d)) throw RuntimeError("cannot convert float infinity or NaN to integer");
    if (std::fabs(d) >= 9.2e18) throw RuntimeError("integer overflow");
    return Value(static_cast<int64_t>(std::trunc(d)));
  };
  if (v.is_float()) return from_float(v.as_float());
  if (v.is_string()) {
    std::string t = pystr::strip(v.str(), std::nullopt, true, true);
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    if (!t.empty()) {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(t.c_str(), &end, static_cast<int>(base));
      if (end == t.c_str() + t.size() && errno == 0) return Value(static_cast<int64_t>(x));
    }
    if (auto d = parse_float(v.str())) return from_float(*d);
  }
  return dflt;
}

Value filter_float(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("float", a, {"default"});
  require_defined(v);
  if (v.is_number()) return Value(v.as_number());
  if (v.is_string())
    if (auto d = parse_float(v.str())) return Value(*d);
  return p[0] ? *p[0] : Value(0.0);
}

Value filter_abs(Interpreter&, const Value& v, CallArgs& a) {
  bind("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  require_defined(v);
  throw RuntimeError("bad operand type for abs(): '" + type_name(v) + "'");
}

Value filter_round(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("round", a, {"precision", "method"});
  const int64_t prec = int_arg(p[0], 0, "precision");
  const std::string method = p[1] ? soft_str(*p[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw RuntimeError("method must be common, ceil or floor");
  if (!v.is_number()) {
    require_defined(v);
    throw RuntimeError("type " + type_name(v) + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());
    if (prec >= 0 && prec < 300) {
      // printf rounds the exact binary value half-to-even, as Python's round does.
      char buf[1024];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), v.as_float());
      return Value(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(-prec));
    return Value(std::nearbyint(v.as_float() / scale) * scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(prec));
  const double x = v.as_number() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value filter_reverse(Interpreter&, const Value& v, CallArgs& a) {
  bind("reverse", a, {});
  if (v.is_string()) {
    std::vector<uint32_t> cps = pystr::codepoints(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(pystr::encode(cps, 0, cps.size()));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value sort_key(const Value& item, const std::optional<Value>& attribute, bool case_sensitive) {
  Value k = attribute && !attribute->is_none() ? get_path(item, *attribute) : item;
  return case_sensitive ? k : ignore_case(k);
}

Value filter_sort(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool rev = flag(p[0], false), cs = flag(p[1], false);
  List items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& x : items) keyed.emplace_back(sort_key(x, p[2], cs), x);
  std::stable_sort(keyed.begin(), keyed.end(), [rev](const auto& x, const auto& y) {
    return rev ? less(y.first, x.first) : less(x.first, y.first);
  });
  List out;
  for (auto& [k, x] : keyed) out.push_back(x);
  return Value::list(std::move(out));
}

Value filter_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("dictsort", a, {"case_sensitive", "by", "reverse"});
  const bool cs = flag(p[0], false), rev = flag(p[2], false);
  const std::string by = p[1] ? soft_str(*p[1]) : "key";
  if (by != "key" && by != "value")
    throw RuntimeError("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) {
    require_defined(v);
    throw RuntimeError("'" + type_name(v) + "' object has no attribute 'items'");
  }
  std::vector<std::pair<Value, Value>> items = v.entries().items;
  auto key = [&](const std::pair<Value, Value>& kv) {
    const Value& k = by == "key" ? kv.first : kv.second;
    return cs ? k : ignore_case(k);
  };
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    return rev ? less(key(y), key(x)) : less(key(x), key(y));
  });
  List out;
  for (auto& [k, x] : items) out.push_back(pair(k, x));
  return Value::list(std::move(out));
}

Value filter_unique(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("unique", a, {"case_sensitive", "attribute"});
  const bool cs = flag(p[0], false);
  List seen, out;
  for (const Value& x : iterate(v)) {
    Value k = sort_key(x, p[1], cs);
    if (k.is_list() || k.is_dict() || k.is_namespace())  // Python keeps the keys in a set
      throw RuntimeError("unhashable type: '" + type_name(k) + "'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& v, CallArgs& a, bool want_max, const char* name) {
  Args p = bind(name, a, {"case_sensitive", "attribute"});
  const bool cs = flag(p[0], false);
  List items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], p[1], cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], p[1], cs);
    if (want_max ? less(best_key, k) : less(k, best_key)) best = i, best_key = k;
  }
  return items[best];
}
Value filter_min(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, false, "min"); }
Value filter_max(Interpreter&, const Value& v, CallArgs& a) { return min_max(v, a, true, "max"); }

Value filter_sum(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("sum", a, {"attribute", "start"});
  Value total = p[1] ? *p[1] : Value(0);
  for (const Value& x : iterate(v))
    total = binary_op("+", total, p[0] && !p[0]->is_none() ? get_path(x, *p[0]) : x);
  return total;
}

Value call_filter(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  FilterFn f = find_filter(name);
  if (!f) throw RuntimeError("No filter named '" + name + "'.");
  return f(in, v, a);
}

bool call_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& a) {
  TestFn t = find_test(name);
  if (!t) throw RuntimeError("No test named '" + name + "'.");
  return t(in, v, a);
}

Value filter_map(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  if (!v.truthy()) return Value::list();  // jinja2 maps nothing over a falsy value
  if (a.args.empty()) {
    std::optional<Value> attribute, dflt;
    for (auto& [k, x] : a.kwargs) {
      if (k == "attribute")
        attribute = x;
      else if (k == "default")
        dflt = x;
      else
        throw RuntimeError("Unexpected keyword argument '" + k + "'");
    }
    if (!attribute) throw RuntimeError("map requires a filter argument");
    for (const Value& x : iterate(v)) {
      Value r = get_path(x, *attribute);
      out.push_back(dflt && !dflt->is_none() && r.is_undefined() ? *dflt : r);
    }
    return Value::list(std::move(out));
  }
  const std::string name = str_arg(a.args[0], "map's filter name");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& x : iterate(v)) {
    CallArgs each = rest;
    out.push_back(call_filter(in, name, x, each));
  }
  return Value::list(std::move(out));
}

Value select_or_reject(Interpreter& in, const Value& v, CallArgs& a, bool select, bool attr) {
  if (!v.truthy()) return Value::list();  // jinja2 iterates only a truthy value
  size_t off = 0;
  std::optional<Value> attribute;
  if (attr) {
    if (a.args.empty()) throw RuntimeError("Missing parameter for attribute name");
    attribute = a.args[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs rest;
  if (a.args.size() > off) {
    test = str_arg(a.args[off], "the test name");
    rest.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(off + 1), a.args.end());
    rest.kwargs = a.kwargs;
  }
  List out;
  for (const Value& x : iterate(v)) {
    Value subject = attribute ? get_path(x, *attribute) : x;
    bool ok;
    if (test) {
      CallArgs each = rest;
      ok = call_test(in, *test, subject, each);
    } else {
      ok = subject.truthy();
    }
    if (ok == select) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value filter_select(Interpreter& in, const Value& v, CallArgs& a) {
  return select_or_reject(in, v, a, true, false);
}
Value filter_reject(Interpreter& in, const Value& v, CallArgs& a) {
  return select_or_reject(in, v, a, false, false);
}
Value filter_selectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_or_reject(in, v, a, true, true);
}
Value filter_rejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_or_reject(in, v, a, false, true);
}

Value filter_batch(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("batch", a, {"linecount", "fill_with"});
  const int64_t n = int_arg(p[0], 0, "linecount");
  if (n <= 0 || n > (1 << 20)) throw RuntimeError("batch: linecount must be 1 to 1048576");
  List out, tmp;
  for (const Value& x : iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n)
      out.push_back(Value::list(std::move(tmp))), tmp.clear();
    tmp.push_back(x);
  }
  if (!tmp.empty()) {
    if (p[1] && !p[1]->is_none())
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*p[1]);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::list(std::move(out));
}

Value filter_attr(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("attr", a, {"name"});
  if (!p[0]) throw RuntimeError("attr() needs a name");
  // Python's getattr only: a dict's keys are not its attributes.
  const std::string name = soft_str(*p[0]);
  if (v.is_dict() && !is_dict_method(name)) return Value::undefined_member(v, Value(name));
  return get_attr(v, name);
}

Value filter_center(Interpreter&, const Value& v, CallArgs& a) {
  Args p = bind("center", a, {"width"});
  const std::string s = soft_str(v);
  const int64_t width = int_arg(p[0], 80, "width"), len = static_cast<int64_t>(pystr::length(s));
  if (width <= len) return Value(s);
  if (width > (1 << 24)) throw RuntimeError("center: width too large");
  const int64_t marg = width - len, left = marg / 2 + (marg & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(marg - left), ' '));
}

Value filter_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  bind("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  const std::string s = soft_str(v);
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = decode_utf8(s, &pos);
    const bool w = c == '_' || pystr::is_alnum(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value filter_striptags(Interpreter&, const Value& v, CallArgs& a) {
  bind("striptags", a, {});
  std::string s = soft_str(v);
  for (size_t start; (start = s.find("<!--")) != std::string::npos;) {
    size_t end = s.find("-->", start);
    if (end == std::string::npos) break;
    s.erase(start, end + 3 - start);
  }
  for (size_t start = 0; (start = s.find('<', start)) != std::string::npos;) {
    size_t end = s.find('>', start);
    if (end == std::string::npos) break;
    s.erase(start, end + 1 - start);
  }
  std::string out;
  for (const std::string& w : pystr::split(s, std::nullopt, -1))
    out += (out.empty() ? "" : " ") + w;
  static const std::pair<const char*, const char*> entities[] = {{"&lt;", "<"},    {"&gt;", ">"},
                                                                 {"&quot;", "\""}, {"&#34;", "\""},
                                                                 {"&#39;", "'"},   {"&amp;", "&"}};
  for (const auto& [from, to] : entities) out = pystr::replace(out, from, to);
  return Value(std::move(out));
}

bool test_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool test_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool test_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool test_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool test_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool test_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool test_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool test_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool test_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool test_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool test_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool test_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() || v.is_loop();
}
bool test_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}
bool test_callable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_function() || v.is_undefined() || v.is_loop();
}
bool test_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

const Value& test_arg(CallArgs& a, const char* test, const char* name) {
  if (!a.args.empty()) return a.args[0];
  for (auto& [k, x] : a.kwargs)
    if (k == name) return x;
  throw RuntimeError(std::string("the '") + test + "' test needs an argument");
}

// jinja2: value % 2 == 1 and value % 2 == 0 (a float like 2.5 is neither).
bool test_odd(Interpreter&, const Value& v, CallArgs&) {
  return equal(binary_op("%", v, Value(2)), Value(1));
}
bool test_even(Interpreter&, const Value& v, CallArgs&) {
  return equal(binary_op("%", v, Value(2)), Value(0));
}
bool test_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const Value& n = test_arg(a, "divisibleby", "num");
  return equal(binary_op("%", v, n), Value(0));
}
bool test_eq(Interpreter&, const Value& v, CallArgs& a) {
  return equal(v, test_arg(a, "eq", "other"));
}
bool test_ne(Interpreter&, const Value& v, CallArgs& a) {
  return !equal(v, test_arg(a, "ne", "other"));
}
bool test_lt(Interpreter&, const Value& v, CallArgs& a) {
  return less(v, test_arg(a, "lt", "other"));
}
bool test_gt(Interpreter&, const Value& v, CallArgs& a) {
  return less(test_arg(a, "gt", "other"), v);
}
bool test_le(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = test_arg(a, "le", "other");
  return less(v, o) || equal(v, o);
}
bool test_ge(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = test_arg(a, "ge", "other");
  return less(o, v) || equal(v, o);
}
bool test_in(Interpreter&, const Value& v, CallArgs& a) {
  return contains(test_arg(a, "in", "seq"), v);
}
bool test_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = test_arg(a, "sameas", "other");
  if (v.kind() != o.kind()) return false;
  if (v.is_none() || v.is_undefined()) return v.is_none();
  if (v.is_bool()) return v.as_bool() == o.as_bool();
  if (v.is_int()) return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
  if (v.is_sequence()) return &v.items() == &o.items();
  if (v.is_dict() || v.is_namespace()) return &v.entries() == &o.entries();
  return false;
}
bool test_lower(Interpreter&, const Value& v, CallArgs&) { return pystr::is_lower(soft_str(v)); }
bool test_upper(Interpreter&, const Value& v, CallArgs&) { return pystr::is_upper(soft_str(v)); }
bool test_filter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool test_test(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_test(v.str()) != nullptr;
}

Value filter_format(Interpreter&, const Value& v, CallArgs& a) {
  if (!a.kwargs.empty() && !a.args.empty())
    throw RuntimeError("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kwargs.empty()) {
    args = Value::dict();
    for (auto& [k, x] : a.kwargs) args.entries().set(Value(k), x);
  } else {
    args = Value::tuple(a.args);
  }
  return Value(percent_format(soft_str(v), args));
}

// ---- methods ----

Value str_method(const Value& obj, const std::string& name, CallArgs& a, bool* found) {
  const std::string& s = obj.str();
  *found = true;
  const std::string what = "str." + name + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args p = bind(what, a, {"chars"});
    return Value(pystr::strip(s, chars_arg(p[0]), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Args p = bind(what, a, {"sep", "maxsplit"});
    std::optional<std::string> sep;
    if (p[0] && !p[0]->is_none()) {
      sep = str_arg(*p[0], "the separator");
      if (sep->empty()) throw RuntimeError("empty separator");
    }
    return str_list(pystr::split(s, sep, int_arg(p[1], -1, "maxsplit"), name == "rsplit"));
  }
  if (name == "splitlines") {
    Args p = bind(what, a, {"keepends"});
    return str_list(pystr::splitlines(s, flag(p[0], false)));
  }
  if (name == "startswith" || name == "endswith") {
    Args p = bind(what, a, {"prefix", "start", "end"});
    if (!p[0]) throw RuntimeError(what + " takes at least 1 argument (0 given)");
    std::string sub = s;
    if (p[1] || p[2]) {
      Value none = Value::none();
      CallArgs none_args;
      (void)none_args;
      std::vector<uint32_t> cps = pystr::codepoints(s);
      const int64_t n = static_cast<int64_t>(cps.size());
      auto clamp = [n](int64_t x) { return x < 0 ? std::max<int64_t>(0, x + n) : std::min(x, n); };
      const int64_t b = clamp(int_arg(p[1], 0, "start")), e = clamp(int_arg(p[2], n, "end"));
      sub = pystr::encode(cps, static_cast<size_t>(b), static_cast<size_t>(std::max(b, e)));
    }
    auto match = [&](const Value& x) {
      const std::string t = str_arg(x, "the prefix");
      if (t.size() > sub.size()) return false;
      return name == "startswith" ? sub.compare(0, t.size(), t) == 0
                                  : sub.compare(sub.size() - t.size(), t.size(), t) == 0;
    };
    if (p[0]->is_tuple()) {
      for (const Value& x : p[0]->items())
        if (match(x)) return Value(true);
      return Value(false);
    }
    if (!p[0]->is_string()) {
      require_defined(*p[0]);
      throw RuntimeError(name + " first arg must be str or a tuple of str, not " +
                         type_name(*p[0]));
    }
    return Value(match(*p[0]));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" ||
      name == "casefold" || name == "swapcase") {
    bind(what, a, {});
    if (name == "upper") return Value(pystr::upper(s));
    if (name == "lower" || name == "casefold") return Value(pystr::lower(s));
    if (name == "title") return Value(pystr::title(s));
    if (name == "capitalize") return Value(pystr::capitalize(s));
    std::string out;
    for (size_t pos = 0; pos < s.size();) {
      size_t start = pos;
      decode_utf8(s, &pos);
      const std::string ch = s.substr(start, pos - start);
      const std::string up = pystr::upper(ch);
      out += up != ch ? up : pystr::lower(ch);
    }
    return Value(std::move(out));
  }
  if (name == "replace") {
    Args p = bind(what, a, {"old", "new", "count"});
    if (!p[0] || !p[1]) throw RuntimeError("replace() takes at least 2 arguments");
    return Value(pystr::replace(s, str_arg(*p[0], "old"), str_arg(*p[1], "new"),
                                int_arg(p[2], -1, "count")));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    Args p = bind(what, a, {"sub"});
    if (!p[0]) throw RuntimeError(what + " takes at least 1 argument");
    const int64_t at = pystr::find(s, str_arg(*p[0], "the substring"), name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) throw RuntimeError("substring not found");
    return Value(at);
  }
  if (name == "count") {
    Args p = bind(what, a, {"sub"});
    if (!p[0]) throw RuntimeError("count() takes at least 1 argument");
    return Value(pystr::count(s, str_arg(*p[0], "the substring")));
  }
  if (name == "join") {
    Args p = bind(what, a, {"iterable"});
    if (!p[0]) throw RuntimeError("join() takes exactly one argument");
    std::string out;
    size_t i = 0;
    for (const Value& x : iterate(*p[0])) {
      if (!x.is_string())
        throw RuntimeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                           type_name(x) + " found");
      if (i++) out += s;
      out += x.str();
    }
    return Value(std::move(out));
  }
  if (name == "format") {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
        out += '{', ++i;
      } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
        out += '}', ++i;
      } else if (s[i] == '{') {
        size_t end = s.find('}', i);
        if (end == std::string::npos) throw RuntimeError("Single '{' encountered in format string");
        const std::string field = s.substr(i + 1, end - i - 1);
        if (field.find_first_of(":!.[") != std::string::npos)
          throw RuntimeError("format specs are not supported in str.format()");
        if (field.empty()) {
          if (auto_index >= a.args.size()) throw RuntimeError("Replacement index out of range");
          out += to_str(a.args[auto_index++]);
        } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
          const size_t k = std::strtoul(field.c_str(), nullptr, 10);
          if (k >= a.args.size()) throw RuntimeError("Replacement index out of range");
          out += to_str(a.args[k]);
        } else {
          const Value* v = nullptr;
          for (auto& [kk, x] : a.kwargs)
            if (kk == field) v = &x;
          if (!v) throw RuntimeError("KeyError: " + pystr::repr(field));
          out += to_str(*v);
        }
        i = end;
      } else if (s[i] == '}') {
        throw RuntimeError("Single '}' encountered in format string");
      } else {
        out += s[i];
      }
    }
    return Value(std::move(out));
  }
  if (name.rfind("is", 0) == 0) {
    bind(what, a, {});
    if (name == "isupper") return Value(pystr::is_upper(s));
    if (name == "islower") return Value(pystr::is_lower(s));
    if (name == "istitle")
      return Value(!s.empty() && pystr::title(s) == s && pystr::is_upper(s) != pystr::is_lower(s));
    if (s.empty()) return Value(false);
    for (size_t pos = 0; pos < s.size();) {
      uint32_t c = decode_utf8(s, &pos);
      bool ok;
      if (name == "isspace")
        ok = pystr::is_space(c);
      else if (name == "isalpha")
        ok = is_unicode_letter(c);
      else if (name == "isalnum")
        ok = pystr::is_alnum(c);
      else
        ok = is_unicode_number(c);  // isdigit, isnumeric, isdecimal
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Args p = bind(what, a, {"affix"});
    if (!p[0]) throw RuntimeError(what + " takes exactly one argument");
    const std::string t = str_arg(*p[0], "the affix");
    if (name == "removeprefix" && s.compare(0, t.size(), t) == 0) return Value(s.substr(t.size()));
    if (name == "removesuffix" && t.size() <= s.size() &&
        s.compare(s.size() - t.size(), t.size(), t) == 0)
      return Value(s.substr(0, s.size() - t.size()));
    return obj;
  }
  if (name == "partition" || name == "rpartition") {
    Args p = bind(what, a, {"sep"});
    if (!p[0]) throw RuntimeError(what + " takes exactly one argument");
    const std::string sep = str_arg(*p[0], "the separator");
    if (sep.empty()) throw RuntimeError("empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? Value::tuple({obj, Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), obj});
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "zfill" || name == "center" || name == "ljust" || name == "rjust") {
    Args p = bind(what, a, {"width", "fillchar"});
    const int64_t width = int_arg(p[0], 0, "width"), len = static_cast<int64_t>(pystr::length(s));
    const std::string fill = p[1] ? str_arg(*p[1], "fillchar") : std::string(" ");
    if (width <= len) return obj;
    if (width > (1 << 24)) throw RuntimeError(name + ": width too large");
    const int64_t marg = width - len;
    auto pad = [&](int64_t n) {
      std::string r;
      for (int64_t i = 0; i < n; ++i) r += name == "zfill" ? "0" : fill;
      return r;
    };
    if (name == "ljust") return Value(s + pad(marg));
    if (name == "rjust") return Value(pad(marg) + s);
    if (name == "zfill") {
      if (!s.empty() && (s[0] == '-' || s[0] == '+'))
        return Value(s.substr(0, 1) + pad(marg) + s.substr(1));
      return Value(pad(marg) + s);
    }
    const int64_t left = marg / 2 + (marg & width & 1);
    return Value(pad(left) + s + pad(marg - left));
  }
  *found = false;
  return Value();
}

Value dict_method(const Value& obj, const std::string& name, CallArgs& a, bool* found) {
  *found = true;
  const std::string what = "dict." + name + "()";
  if (name == "items" || name == "keys" || name == "values") {
    bind(what, a, {});
    List out;
    for (const auto& [k, x] : obj.entries().items)
      out.push_back(name == "items" ? pair(k, x) : name == "keys" ? k : x);
    return Value::list(std::move(out));
  }
  if (name == "get") {
    Args p = bind(what, a, {"key", "default"});
    if (!p[0]) throw RuntimeError("get expected at least 1 argument, got 0");
    const Value* v = obj.entries().find(*p[0]);
    return v ? *v : p[1] ? *p[1] : Value::none();
  }
  if (name == "copy") {
    bind(what, a, {});
    Value d = Value::dict();
    d.entries().items = obj.entries().items;
    return d;
  }
  *found = false;
  return Value();
}

Value list_method(const Value& obj, const std::string& name, CallArgs& a, bool* found) {
  *found = true;
  const std::string what = type_name(obj) + "." + name + "()";
  if (name == "count") {
    Args p = bind(what, a, {"value"});
    if (!p[0]) throw RuntimeError("count() takes exactly one argument (0 given)");
    return Value(static_cast<int64_t>(std::count_if(
        obj.items().begin(), obj.items().end(), [&](const Value& x) { return equal(x, *p[0]); })));
  }
  if (name == "index") {
    Args p = bind(what, a, {"value"});
    if (!p[0]) throw RuntimeError("index expected at least 1 argument, got 0");
    for (size_t i = 0; i < obj.items().size(); ++i)
      if (equal(obj.items()[i], *p[0])) return Value(static_cast<int64_t>(i));
    throw RuntimeError(repr(*p[0]) + " is not in list");
  }
  if (name == "copy" && obj.is_list()) {
    bind(what, a, {});
    return Value::list(obj.items());
  }
  *found = false;
  return Value();
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};
struct TestEntry {
  const char* name;
  TestFn fn;
};

const FilterEntry kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"batch", filter_batch},
    {"capitalize", filter_capitalize},
    {"center", filter_center},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", filter_dictsort},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"first", filter_first},
    {"float", filter_float},
    {"forceescape", filter_escape},
    {"format", filter_format},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", filter_lower},
    {"map", filter_map},
    {"max", filter_max},
    {"min", filter_min},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"sort", filter_sort},
    {"string", filter_string},
    {"striptags", filter_striptags},
    {"sum", filter_sum},
    {"title", filter_title},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"unique", filter_unique},
    {"upper", filter_upper},
    {"wordcount", filter_wordcount},
};

const TestEntry kTests[] = {
    {"!=", test_ne},
    {"<", test_lt},
    {"<=", test_le},
    {"==", test_eq},
    {">", test_gt},
    {">=", test_ge},
    {"boolean", test_boolean},
    {"callable", test_callable},
    {"defined", test_defined},
    {"divisibleby", test_divisibleby},
    {"eq", test_eq},
    {"equalto", test_eq},
    {"escaped", test_escaped},
    {"even", test_even},
    {"false", test_false},
    {"filter", test_filter},
    {"float", test_float},
    {"ge", test_ge},
    {"greaterthan", test_gt},
    {"gt", test_gt},
    {"in", test_in},
    {"integer", test_integer},
    {"iterable", test_iterable},
    {"le", test_le},
    {"lessthan", test_lt},
    {"lower", test_lower},
    {"lt", test_lt},
    {"mapping", test_mapping},
    {"ne", test_ne},
    {"none", test_none},
    {"number", test_number},
    {"odd", test_odd},
    {"sameas", test_sameas},
    {"sequence", test_sequence},
    {"string", test_string},
    {"test", test_test},
    {"true", test_true},
    {"undefined", test_undefined},
    {"upper", test_upper},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

TestFn find_test(std::string_view name) {
  for (const TestEntry& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

std::string percent_format(const std::string& fmt, const Value& args) {
  const bool tuple = args.is_tuple();
  const bool mapping = args.is_dict();
  size_t next = 0;
  bool used_mapping = false;
  auto take = [&]() -> const Value& {
    if (!tuple) {
      if (next++ == 0) return args;
    } else if (next < args.items().size()) {
      return args.items()[next++];
    }
    throw RuntimeError("not enough arguments for format string");
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw RuntimeError("incomplete format");
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t end = fmt.find(')', i);
      if (end == std::string::npos) throw RuntimeError("incomplete format key");
      if (!mapping) throw RuntimeError("format requires a mapping");
      arg = args.entries().find(std::string_view(fmt).substr(i + 1, end - i - 1));
      if (!arg) throw RuntimeError("KeyError: " + pystr::repr(fmt.substr(i + 1, end - i - 1)));
      used_mapping = true;
      i = end + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::strchr("-+ 0#", fmt[i])) flags += fmt[i++];
    int width = 0, precision = -1;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
      width = std::min(width * 10 + (fmt[i++] - '0'), 4096);
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      ++i;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
        precision = std::min(precision * 10 + (fmt[i++] - '0'), 300);
    }
    if (i >= fmt.size()) throw RuntimeError("incomplete format");
    const char type = fmt[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    const Value& v = arg ? *arg : take();
    std::string piece;
    char buf[1024];
    const std::string cflags = flags.find('#') != std::string::npos ? "#" : "";
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        piece = type == 's' ? to_str(v) : repr(v);
        if (precision >= 0 && static_cast<size_t>(precision) < pystr::length(piece)) {
          std::vector<uint32_t> cps = pystr::codepoints(piece);
          piece = pystr::encode(cps, 0, static_cast<size_t>(precision));
        }
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number()) {
          require_defined(v);
          throw RuntimeError(std::string("%") + type + " format: a real number is required, not " +
                             type_name(v));
        }
        const int64_t n = v.is_float() ? static_cast<int64_t>(v.as_float()) : v.as_int();
        const char conv = type == 'i' || type == 'u' ? 'd' : type;
        std::snprintf(buf, sizeof buf, ("%" + cflags + "ll" + conv).c_str(),
                      static_cast<long long>(n < 0 ? -n : n));
        piece = (n < 0                                  ? "-"
                 : flags.find('+') != std::string::npos ? "+"
                 : flags.find(' ') != std::string::npos ? " "
                                                        : "") +
                std::string(buf);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v.is_number()) {
          require_defined(v);
          throw RuntimeError("must be real number, not " + type_name(v));
        }
        const std::string f = "%" + cflags +
                              (flags.find('+') != std::string::npos   ? "+"
                               : flags.find(' ') != std::string::npos ? " "
                                                                      : "") +
                              "." + std::to_string(precision < 0 ? 6 : precision) + type;
        std::snprintf(buf, sizeof buf, f.c_str(), v.as_number());
        piece = buf;
        break;
      }
      case 'c':
        if (v.is_string() && pystr::length(v.str()) == 1) {
          piece = v.str();
        } else if (v.is_int()) {
          append_utf8(&piece, static_cast<uint32_t>(v.as_int()));
        } else {
          throw RuntimeError("%c requires int or char");
        }
        break;
      default: throw RuntimeError(std::string("unsupported format character '") + type + "'");
    }
    const size_t len = pystr::length(piece);
    if (static_cast<size_t>(width) > len) {
      const size_t pad = static_cast<size_t>(width) - len;
      if (flags.find('-') != std::string::npos) {
        piece += std::string(pad, ' ');
      } else if (flags.find('0') != std::string::npos && std::strchr("diuxXofFeEgG", type)) {
        const size_t sign = !piece.empty() && std::strchr("+- ", piece[0]) ? 1 : 0;
        piece.insert(sign, pad, '0');
      } else {
        piece.insert(0, pad, ' ');
      }
    }
    out += piece;
  }
  // Leftover arguments: Python refuses them, except for a mapping (or a
  // list, which it takes for one) used by name or not at all.
  if (tuple ? next < args.items().size()
            : next == 0 && !used_mapping && !mapping && !args.is_list())
    throw RuntimeError("not all arguments converted during string formatting");
  return out;
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::list:
    case Value::Kind::tuple: return v.items();
    case Value::Kind::dict: {
      List keys;
      keys.reserve(v.entries().items.size());
      for (const auto& [k, x] : v.entries().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::string: {
      List chars;
      const std::string& s = v.str();
      for (size_t pos = 0; pos < s.size();) {
        size_t start = pos;
        decode_utf8(s, &pos);
        chars.emplace_back(s.substr(start, pos - start));
      }
      return chars;
    }
    case Value::Kind::undefined: return {};
    case Value::Kind::loop: return *v.loop_info().items;
    default: throw RuntimeError("'" + type_name(v) + "' object is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::undefined: require_defined(obj); break;
    case Value::Kind::dict:
      if (is_dict_method(name))
        return is_unsafe_dict_method(name) ? unsafe(obj, name) : bound(obj, name);
      if (const Value* v = obj.entries().find(std::string_view(name))) return *v;
      break;
    case Value::Kind::ns:
      if (const Value* v = obj.entries().find(std::string_view(name))) return *v;
      break;
    case Value::Kind::list:
    case Value::Kind::tuple:
      if (is_list_method(name, obj.is_tuple())) {
        if (name == "count" || name == "index" || name == "copy") return bound(obj, name);
        return unsafe(obj, name);
      }
      break;
    case Value::Kind::string:
      if (is_str_method(name)) return bound(obj, name);
      break;
    case Value::Kind::loop: return loop_attr(obj, name);
    default: break;
  }
  if (name.rfind("_", 0) == 0 && !obj.is_dict() && !obj.is_namespace())
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) +
                            "' object is unsafe.");
  return Value::undefined_member(obj, Value(name));
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::undefined: require_defined(obj); break;
    case Value::Kind::dict:
      if (const Value* v = obj.entries().find(key)) return *v;
      break;
    case Value::Kind::list:
    case Value::Kind::tuple:
    case Value::Kind::string:
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int();
        if (obj.is_string()) {
          const std::string& s = obj.str();
          const int64_t n = static_cast<int64_t>(pystr::length(s));
          if (i < 0) i += n;
          if (i >= 0 && i < n) {
            size_t pos = 0;
            for (int64_t k = 0; k < i; ++k) decode_utf8(s, &pos);
            size_t start = pos;
            decode_utf8(s, &pos);
            return Value(s.substr(start, pos - start));
          }
        } else {
          const int64_t n = static_cast<int64_t>(obj.items().size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
        }
        return Value::undefined_member(obj, key);
      }
      break;
    default: break;
  }
  if (key.is_string() && !obj.is_dict()) return get_attr(obj, key.str());
  if (key.is_string() && obj.is_dict() && is_dict_method(key.str()))
    return get_attr(obj, key.str());
  require_defined(key);
  return Value::undefined_member(obj, key);
}

Value call_method(const Value& obj, const std::string& name, CallArgs& args, bool* found) {
  *found = false;
  if (obj.is_string() && is_str_method(name)) return str_method(obj, name, args, found);
  if (obj.is_dict() && is_dict_method(name) && !is_unsafe_dict_method(name))
    return dict_method(obj, name, args, found);
  if (obj.is_sequence() && is_list_method(name, obj.is_tuple()))
    return list_method(obj, name, args, found);
  return Value();
}

Value find_global(Interpreter& in, std::string_view name) {
  if (name == "raise_exception")
    return Value::function("raise_exception", [](CallArgs& a) -> Value {
      Args p = bind("raise_exception", a, {"message"});
      throw JinjaRaised(p[0] ? to_str(*p[0]) : "");
    });
  if (name == "strftime_now")
    return Value::function("strftime_now", [&in](CallArgs& a) -> Value {
      Args p = bind("strftime_now", a, {"format"});
      if (!p[0]) throw RuntimeError("strftime_now() needs a format");
      const std::string fmt = str_arg(*p[0], "the format");
      if (fmt.empty()) return Value(std::string());
      std::string buf(fmt.size() * 4 + 64, '\0');
      for (;;) {
        size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &in.now());
        if (n > 0 || buf.size() > 65536) return Value(buf.substr(0, n));
        buf.resize(buf.size() * 2);
      }
    });
  if (name == "range")
    return Value::function("range", [](CallArgs& a) -> Value {
      if (!a.kwargs.empty()) throw RuntimeError("range() takes no keyword arguments");
      if (a.args.empty() || a.args.size() > 3)
        throw RuntimeError("range expected 1 to 3 arguments, got " + std::to_string(a.args.size()));
      int64_t start = 0, stop, step = 1;
      auto num = [](const Value& v) {
        if (!v.is_int() && !v.is_bool()) {
          require_defined(v);
          throw RuntimeError("'" + type_name(v) + "' object cannot be interpreted as an integer");
        }
        return v.as_int();
      };
      if (a.args.size() == 1) {
        stop = num(a.args[0]);
      } else {
        start = num(a.args[0]);
        stop = num(a.args[1]);
        if (a.args.size() == 3) step = num(a.args[2]);
      }
      if (step == 0) throw RuntimeError("range() arg 3 must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 100000)
          throw RuntimeError(
              "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        out.emplace_back(i);
      }
      return Value::list(std::move(out));
    });
  if (name == "namespace" || name == "dict")
    return Value::function(
        std::string(name), [&in, ns = name == "namespace"](CallArgs& a) -> Value {
          Value d = ns ? Value::namespace_() : Value::dict();
          if (ns) in.track(d);
          if (a.args.size() > 1) throw RuntimeError("expected at most 1 positional argument");
          if (!a.args.empty()) {
            const Value& init = a.args[0];
            if (init.is_dict()) {
              d.entries().items = init.entries().items;
            } else {
              for (const Value& kv : iterate(init)) {
                if (!kv.is_sequence() || kv.items().size() != 2)
                  throw RuntimeError("dictionary update sequence element has the wrong length");
                d.entries().set(kv.items()[0], kv.items()[1]);
              }
            }
          }
          for (auto& [k, v] : a.kwargs) d.entries().set(Value(k), v);
          return d;
        });
  if (name == "joiner")
    return Value::function("joiner", [](CallArgs& a) -> Value {
      Args p = bind("joiner", a, {"sep"});
      const std::string sep = p[0] ? to_str(*p[0]) : ", ";
      auto used = std::make_shared<bool>(false);
      return Value::function("joiner", [sep, used](CallArgs&) -> Value {
        if (!*used) {
          *used = true;
          return Value(std::string());
        }
        return Value(sep);
      });
    });
  return Value();
}

}  // namespace kiln::jinja
