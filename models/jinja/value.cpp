#include "models/jinja/value.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>

#include "models/jinja/pystr.h"
#include "models/unicode.h"

namespace kiln::jinja {

Value Value::undefined_name(std::string_view name) {
  return undefined(pystr::repr(name) + " is undefined");
}

Value Value::undefined_member(const Value& obj, const Value& key) {
  if (!key.is_string()) return undefined(type_description(obj) + " has no element " + repr(key));
  return undefined(pystr::repr(type_description(obj)) + " has no attribute " + repr(key));
}

Value Value::list(List items) {
  Value v(Kind::list);
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v(Kind::tuple);
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict() {
  Value v(Kind::dict);
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::namespace_() {
  Value v(Kind::ns);
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::function(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v(Kind::function);
  v.fn_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
  return v;
}

Value Value::loop(std::shared_ptr<LoopInfo> info) {
  Value v(Kind::loop);
  v.loop_ = std::move(info);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean:
    case Kind::integer: return int_ != 0;
    case Kind::floating: return float_ != 0;
    case Kind::string: return !str_.empty();
    case Kind::list:
    case Kind::tuple: return !list_->empty();
    case Kind::dict: return !dict_->items.empty();
    default: return true;
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value v) {
  for (auto& [k, old] : items)
    if (equal(k, key)) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::none: return "NoneType";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer: return "int";
    case Value::Kind::floating: return "float";
    case Value::Kind::string: return "str";
    case Value::Kind::list: return "list";
    case Value::Kind::tuple: return "tuple";
    case Value::Kind::dict: return "dict";
    case Value::Kind::function: return "function";
    case Value::Kind::ns: return "Namespace";
    case Value::Kind::loop: return "LoopContext";
  }
  return "object";
}

std::string type_description(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::none: return "None";
    case Value::Kind::undefined: return "jinja2.runtime.Undefined object";
    case Value::Kind::ns: return "jinja2.utils.Namespace object";
    case Value::Kind::loop: return "jinja2.runtime.LoopContext object";
    default: return type_name(v) + " object";
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits(1, sci[0]);
  if (e > 1) digits += sci.substr(2, e - 2);
  const int exp10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  const int decpt = exp10 + 1;  // digits are 0.d1d2... x 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0)
      out += "0." + std::string(-decpt, '0') + digits;
    else if (decpt >= n)
      out += digits + std::string(decpt - n, '0') + ".0";
    else
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
  return out + ebuf;
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.as_bool() ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.as_int());
    case Value::Kind::floating: return float_repr(v.as_float());
    case Value::Kind::string: return pystr::repr(v.str());
    case Value::Kind::list:
    case Value::Kind::tuple: {
      const bool tuple = v.is_tuple();
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < v.items().size(); ++i) out += (i ? ", " : "") + repr(v.items()[i]);
      if (tuple && v.items().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::dict:
    case Value::Kind::ns: {
      std::string out = v.is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, x] : v.entries().items) {
        out += (first ? "" : ", ") + repr(k) + ": " + repr(x);
        first = false;
      }
      return out + (v.is_namespace() ? "}>" : "}");
    }
    case Value::Kind::function: return "<function " + v.fn().name + ">";
    case Value::Kind::loop:
      return "<LoopContext " + std::to_string(v.loop_info().index + 1) + "/" +
             std::to_string(v.loop_info().items->size()) + ">";
  }
  return "";
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) return "";
  return repr(v);
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::undefined:
    case K::none: return true;
    case K::string: return a.str() == b.str();
    case K::list:
    case K::tuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case K::dict: {
      if (a.entries().items.size() != b.entries().items.size()) return false;
      for (const auto& [k, x] : a.entries().items) {
        const Value* y = b.entries().find(k);
        if (!y || !equal(x, *y)) return false;
      }
      return true;
    }
    case K::ns: return &a.entries() == &b.entries();
    case K::function: return &a.fn() == &b.fn();
    case K::loop: return &a.loop_info() == &b.loop_info();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() < b.as_number();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    return x.size() < y.size();
  }
  require_defined(a);
  require_defined(b);
  throw RuntimeError("'<' not supported between instances of '" + type_name(a) + "' and '" +
                     type_name(b) + "'");
}

void require_defined(const Value& v) {
  if (v.is_undefined()) throw RuntimeError(v.str().empty() ? "value is undefined" : v.str());
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(u))
                                                   : Value(static_cast<double>(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get_ref<const std::string&>());
    case T::array: {
      List items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::list(std::move(items));
    }
    case T::object: {
      Value d = Value::dict();
      d.entries().items.reserve(j.size());
      for (const auto& [k, x] : j.items()) d.entries().items.emplace_back(Value(k), from_json(x));
      return d;
    }
    default: throw RuntimeError("unsupported JSON value");
  }
}

namespace {

void dump_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[pos]);
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
      out += static_cast<char>(b);
      ++pos;
      continue;
    }
    if (b >= 0x80) {
      const size_t start = pos;
      uint32_t c = decode_utf8(s, &pos);
      if (!ensure_ascii) {
        out.append(s, start, pos - start);
        continue;
      }
      char buf[16];
      if (c >= 0x10000) {
        c -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
      }
      out += buf;
      continue;
    }
    ++pos;
    switch (b) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        if (b == 0x7F && !ensure_ascii) {
          out += static_cast<char>(b);
        } else {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", b);
          out += buf;
        }
      }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

void dump(const Value& v, const DumpOptions& o, const std::string& item_sep,
          const std::string& key_sep, int depth, std::string& out) {
  if (depth > 512) throw RuntimeError("tojson: nesting too deep (or a circular reference)");
  auto newline = [&](int level) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::none: out += "null"; return;
    case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return;
    case Value::Kind::floating: out += json_float(v.as_float()); return;
    case Value::Kind::string: dump_string(v.str(), o.ensure_ascii, out); return;
    case Value::Kind::list:
    case Value::Kind::tuple: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        dump(v.items()[i], o, item_sep, key_sep, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::dict: {
      if (v.entries().items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.entries().items) items.push_back(&kv);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return less(a->first, b->first); });
      out += '{';
      bool first = true;
      for (const auto* kv : items) {
        const Value& k = kv->first;
        std::string key;
        if (k.is_string())
          key = k.str();
        else if (k.is_bool())
          key = k.as_bool() ? "true" : "false";
        else if (k.is_int())
          key = std::to_string(k.as_int());
        else if (k.is_float())
          key = json_float(k.as_float());
        else if (k.is_none())
          key = "null";
        else
          throw RuntimeError("keys must be str, int, float, bool or None, not " + type_name(k));
        if (!first) out += item_sep;
        first = false;
        newline(depth + 1);
        dump_string(key, o.ensure_ascii, out);
        out += key_sep;
        dump(kv->second, o, item_sep, key_sep, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    default: throw RuntimeError("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string dumps(const Value& v, const DumpOptions& o) {
  std::string item_sep = o.indent ? "," : ", ", key_sep = ": ";
  if (o.separators) std::tie(item_sep, key_sep) = *o.separators;
  std::string out;
  dump(v, o, item_sep, key_sep, 0, out);
  return out;
}

}  // namespace kiln::jinja
