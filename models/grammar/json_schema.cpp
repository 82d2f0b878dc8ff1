#include "models/grammar/json_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "ir/error.h"
#include "models/grammar/grammar.h"
#include "models/grammar/json_regex.h"

namespace kiln {

namespace {

using json = nlohmann::ordered_json;  // properties keep the schema's order

// GBNF's bound on counts: a larger maxItems or maxLength generates up to
// it; a larger minItems or minLength is refused.
constexpr uint64_t kMaxGenerated = 2000;
constexpr uint64_t kMaxRequired = 2000;
constexpr uint64_t kMaxInt = 999999999999999;  // 15 digits: exact in a double
constexpr int kMaxNesting = 32;                // $ref / allOf resolved inside each other
constexpr int kMaxDepth = 128;                 // schemas inside schemas

// Shared rules, each with the rules it uses.
struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};
const Primitive kPrimitives[] = {
    {"space", R"(| " " | "\n" [ \t]{0,20})", {}},
    {"hex", R"([0-9a-fA-F])", {}},
    // \u escapes of surrogates are left out: a pair would count as one code
    // point in minLength/maxLength, a lone one is not a character.
    {"char",
     R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] hex hex hex | [dD] [0-7] hex hex)))",
     {"hex"}},
    {"string", R"("\"" char* "\"" space)", {"char", "space"}},
    {"integral", R"("0" | [1-9] [0-9]{0,14})", {}},
    {"integer", R"("-"? integral space)", {"integral", "space"}},
    {"number",
     R"("-"? integral ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})? space)",
     {"integral", "space"}},
    {"boolean", R"(("true" | "false") space)", {"space"}},
    {"null", R"("null" space)", {"space"}},
    {"value",
     R"(object | array | string | number | boolean | null)",
     {"object", "array", "string", "number", "boolean", "null"}},
    {"object",
     R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)",
     {"string", "space", "value"}},
    {"array", R"("[" space (value ("," space value)*)? "]" space)", {"space", "value"}},
    {"date",
     R"(year "-" (month31 "-" day31 | month30 "-" day30 | "02-" day28) | leap-year "-02-29")",
     {"year", "month31", "month30", "day31", "day30", "day28", "leap-year"}},
    // Year 0000 does not exist; a leap year is divisible by 4, centuries by 400.
    {"year", R"([0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000")", {}},
    {"leap-year",
     R"([0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [48] | [2468] [048] | [13579] [26]) "00")",
     {}},
    {"month31", R"("01" | "03" | "05" | "07" | "08" | "10" | "12")", {}},
    {"month30", R"("04" | "06" | "09" | "11")", {}},
    {"day31", R"("0" [1-9] | [12] [0-9] | "3" [01])", {}},
    {"day30", R"("0" [1-9] | [12] [0-9] | "30")", {}},
    {"day28", R"("0" [1-9] | "1" [0-9] | "2" [0-8])", {}},
    {"time",
     R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
     {}},
    {"date-time", R"(date "T" time)", {"date", "time"}},
    {"uuid", R"(hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12})", {"hex"}},
    {"raw-char", R"([^"\\\x00-\x1F])", {}},
};

const std::set<std::string> kAnnotations = {
    "$schema", "$id",      "$comment",   "$anchor",  "$vocabulary", "title", "description",
    "default", "examples", "deprecated", "readOnly", "writeOnly",   "$defs", "definitions"};
const std::set<std::string> kKeywords = {"$ref",
                                         "type",
                                         "enum",
                                         "const",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "items",
                                         "prefixItems",
                                         "minItems",
                                         "maxItems",
                                         "uniqueItems",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum"};
const std::set<std::string> kObjectWords = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayWords = {"items", "prefixItems", "minItems", "maxItems"};
const std::set<std::string> kStringWords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberWords = {"minimum", "maximum", "exclusiveMinimum",
                                            "exclusiveMaximum"};

std::string pointer_token(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string at(const std::string& path) { return path.empty() ? "/" : path; }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("JSON schema at " + at(path) + ": " + what);
}
[[noreturn]] void unsupported(const std::string& path, const std::string& keyword,
                              const std::string& why = "") {
  throw Error("JSON schema keyword '" + keyword + "' at " + path + "/" + pointer_token(keyword) +
              " is not supported" + (why.empty() ? "" : " (" + why + ")"));
}

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

std::string json_text(const json& v, const std::string& path) {
  try {
    return v.dump();
  } catch (const json::exception& e) {
    fail(path, std::string("cannot write the value as JSON: ") + e.what());
  }
}

// ---- Decimal ranges: integers, and numbers with bounds -------------------

std::string digit(int d) { return gbnf_literal(std::string(1, static_cast<char>('0' + d))); }
std::string any_digits(size_t n) { return n == 0 ? "" : " [0-9]{" + std::to_string(n) + "}"; }
bool all_zero(const std::string& s, size_t from = 0) {
  return s.find_first_not_of('0', from) == std::string::npos;
}
bool all_nine(const std::string& s) { return s.find_first_not_of('9') == std::string::npos; }

// Strings of s.size() digits at least (ge) or at most (!ge) s.
std::string digits_bound(const std::string& s, bool ge) {
  if (s.empty()) return "\"\"";
  if (ge ? all_zero(s) : all_nine(s)) return "[0-9]{" + std::to_string(s.size()) + "}";
  const int d = s[0] - '0';
  std::string out = digit(d) + (s.size() > 1 ? " (" + digits_bound(s.substr(1), ge) + ")" : "");
  if (ge && d < 9)
    out += " | [" + std::to_string(d + 1) + "-9]" + any_digits(s.size() - 1);
  else if (!ge && d > 0)
    out += " | [0-" + std::to_string(d - 1) + "]" + any_digits(s.size() - 1);
  return out;
}

// The decimal strings of the integers from x to y, both of one length.
std::string same_length_range(const std::string& x, const std::string& y) {
  if (x == y) return gbnf_literal(x);
  size_t i = 0;
  while (x[i] == y[i]) ++i;
  const std::string prefix = i ? gbnf_literal(x.substr(0, i)) + " " : "";
  const std::string xs = x.substr(i + 1), ys = y.substr(i + 1);
  const int a = x[i] - '0', b = y[i] - '0';
  if (all_zero(xs) && all_nine(ys))
    return prefix + "[" + std::to_string(a) + "-" + std::to_string(b) + "]" + any_digits(xs.size());
  std::vector<std::string> alts;
  alts.push_back(digit(a) + (xs.empty() ? "" : " (" + digits_bound(xs, true) + ")"));
  if (b - a >= 2)
    alts.push_back("[" + std::to_string(a + 1) + "-" + std::to_string(b - 1) + "]" +
                   any_digits(xs.size()));
  alts.push_back(digit(b) + (ys.empty() ? "" : " (" + digits_bound(ys, false) + ")"));
  return prefix + alternatives(alts);
}

uint64_t pow10(size_t n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

// Canonical decimal strings of [lo, hi] (hi <= kMaxInt), one group per length;
// `then(length)` is appended to each group (a fraction, say).
std::vector<std::string> uint_range(uint64_t lo, uint64_t hi,
                                    const std::function<std::string(size_t)>& then) {
  std::vector<std::string> alts;
  for (size_t len = std::to_string(lo).size(); lo <= hi && len <= 15; ++len) {
    const uint64_t a = std::max(lo, len == 1 ? 0 : pow10(len - 1));
    const uint64_t b = std::min(hi, pow10(len) - 1);
    if (a <= b) {
      std::string r = same_length_range(std::to_string(a), std::to_string(b));
      const std::string tail = then(len);
      alts.push_back(tail.empty() ? r : "(" + r + ") " + tail);
    }
  }
  return alts;
}

std::string int_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  auto none = [](size_t) { return std::string(); };
  if (hi >= 0) {
    for (auto& a : uint_range(static_cast<uint64_t>(std::max<int64_t>(lo, 0)),
                              static_cast<uint64_t>(hi), none))
      alts.push_back(a);
  }
  if (lo < 0) {
    const uint64_t mlo = hi < 0 ? static_cast<uint64_t>(-hi) : 1;
    std::vector<std::string> neg = uint_range(mlo, static_cast<uint64_t>(-lo), none);
    alts.push_back("\"-\" " + alternatives(neg));
  }
  return alternatives(alts);
}

// A non-negative finite decimal: integer digits (no leading zeros, "0" for
// none) and fraction digits (no trailing zeros).
struct Decimal {
  std::string ip = "0", fp;
};

// The shortest decimal that reads back as `v` (|v| as digits).
Decimal to_decimal(double v, const std::string& path, const std::string& keyword) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  std::string s(buf, r.ptr);  // d.ddde±x
  const size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::stoi(s.substr(e + 1));
  mant.erase(std::remove(mant.begin(), mant.end(), '.'), mant.end());
  while (mant.size() > 1 && mant.back() == '0') mant.pop_back();
  if (mant.size() > 15)
    unsupported(path, keyword, "a bound needs at most 15 significant digits to compare exactly");
  // value = 0.mant * 10^(exp + 1)
  const int point = exp + 1;
  Decimal d;
  if (point <= 0) {
    d.fp = std::string(static_cast<size_t>(-point), '0') + mant;
  } else if (static_cast<size_t>(point) >= mant.size()) {
    d.ip = mant + std::string(static_cast<size_t>(point) - mant.size(), '0');
  } else {
    d.ip = mant.substr(0, static_cast<size_t>(point));
    d.fp = mant.substr(static_cast<size_t>(point));
  }
  while (d.ip.size() > 1 && d.ip[0] == '0') d.ip.erase(0, 1);
  while (!d.fp.empty() && d.fp.back() == '0') d.fp.pop_back();
  return d;
}

// Fractions ("" or "." digits, at most `cap` digits) whose value 0.F lies
// between `lo` and `hi` (digit strings; nullptr: no bound), nullopt when none does.
class FractionRange {
 public:
  FractionRange(const std::string* lo, bool lo_strict, const std::string* hi, bool hi_strict,
                size_t cap)
      : lo_(lo), hi_(hi), lo_strict_(lo_strict), hi_strict_(hi_strict), cap_(cap) {}

  std::optional<std::string> build() {
    std::vector<std::string> alts;
    if (end_ok(0, lo_, hi_)) alts.push_back("\"\"");
    if (auto r = rest(0, lo_ != nullptr, hi_ != nullptr)) alts.push_back("\".\" (" + *r + ")");
    if (alts.empty()) return std::nullopt;
    return alternatives(alts);
  }

 private:
  int dig(const std::string* s, size_t i) const { return i < s->size() ? (*s)[i] - '0' : 0; }
  bool end_ok(size_t i, bool tl, bool th) const {
    if (tl && !(all_zero(*lo_, std::min(i, lo_->size())) && !lo_strict_)) return false;
    if (th && hi_strict_ && all_zero(*hi_, std::min(i, hi_->size()))) return false;
    return true;
  }
  // Digits from position i on; tl / th: the digits so far equal lo's / hi's.
  std::optional<std::string> rest(size_t i, bool tl, bool th) {
    std::vector<std::string> alts;
    if (i >= 1 && end_ok(i, tl, th)) alts.push_back("\"\"");
    if (i < cap_) {
      if (!tl && !th) {
        alts.push_back("[0-9]{1," + std::to_string(cap_ - i) + "}");
      } else {
        const int a = tl ? dig(lo_, i) : 0, b = th ? dig(hi_, i) : 9;
        auto add = [&](int d, bool ntl, bool nth) {
          if (auto r = rest(i + 1, ntl, nth)) alts.push_back(digit(d) + " (" + *r + ")");
        };
        if (a == b) {
          add(a, tl, th);
        } else {
          add(a, tl, false);
          if (b - a >= 2)
            alts.push_back("[" + std::to_string(a + 1) + "-" + std::to_string(b - 1) +
                           "] [0-9]{0," + std::to_string(cap_ - i - 1) + "}");
          add(b, false, th);
        }
      }
    }
    if (alts.empty()) return std::nullopt;
    return alternatives(alts);
  }

  const std::string *lo_, *hi_;
  bool lo_strict_, hi_strict_;
  size_t cap_;
};

// Fraction digits allowed after an integer part of `len` digits: 15 significant in all.
size_t fraction_cap(size_t len) { return len >= 14 ? 1 : 15 - len; }

int compare(const Decimal& a, const Decimal& b) {
  if (a.ip.size() != b.ip.size()) return a.ip.size() < b.ip.size() ? -1 : 1;
  if (a.ip != b.ip) return a.ip < b.ip ? -1 : 1;
  const size_t n = std::max(a.fp.size(), b.fp.size());
  std::string x = a.fp + std::string(n - a.fp.size(), '0'),
              y = b.fp + std::string(n - b.fp.size(), '0');
  return x == y ? 0 : x < y ? -1 : 1;
}

// Unsigned decimals (no exponent) m with lo < m (<= unless lo_strict) and,
// when hi is given, m < hi (<= unless hi_strict). Empty when none.
std::vector<std::string> unsigned_decimal_range(const Decimal& lo, bool lo_strict,
                                                const Decimal* hi, bool hi_strict) {
  std::vector<std::string> alts;
  if (lo.ip.size() > 15) return alts;
  if (hi) {
    const int c = compare(lo, *hi);
    if (c > 0 || (c == 0 && (lo_strict || hi_strict))) return alts;
  }
  const uint64_t a = std::stoull(lo.ip);
  const bool hi_in_range = hi && hi->ip.size() <= 15;
  const uint64_t b = hi_in_range ? std::stoull(hi->ip) : kMaxInt + 1;
  auto with_fraction = [&](const std::string& ip, const std::string* flo, bool fls,
                           const std::string* fhi, bool fhs) {
    if (auto f = FractionRange(flo, fls, fhi, fhs, fraction_cap(ip.size())).build())
      alts.push_back(gbnf_literal(ip) + " " + *f);
  };
  if (hi_in_range && a == b) {
    with_fraction(lo.ip, &lo.fp, lo_strict, &hi->fp, hi_strict);
    return alts;
  }
  with_fraction(lo.ip, &lo.fp, lo_strict, nullptr, false);
  if (a + 1 <= std::min(b - 1, kMaxInt)) {
    for (auto& r : uint_range(a + 1, std::min(b - 1, kMaxInt), [](size_t len) {
           return "(\".\" [0-9]{1," + std::to_string(fraction_cap(len)) + "})?";
         }))
      alts.push_back(r);
  }
  if (hi_in_range) with_fraction(hi->ip, nullptr, false, &hi->fp, hi_strict);
  return alts;
}

// ---- The converter --------------------------------------------------------

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  std::string run() {
    const std::string root = value(root_, "", "root");
    std::string out = "root ::= " + root + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

  std::string run_object() {
    std::string out = "root ::= " + need("object") + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  std::string need(const std::string& name) {
    if (names_.count(name)) return name;
    for (const Primitive& p : kPrimitives) {
      if (name != p.name) continue;
      names_.insert(name);
      rules_.push_back({name, p.body});
      for (const char* u : p.uses) need(u);
      return name;
    }
    throw Error("JSON schema converter: no primitive rule '" + name + "'");
  }

  std::string fresh_name(const std::string& hint) {
    std::string base;
    for (char c : hint) {
      const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      if (word)
        base += c;
      else if (!base.empty() && base.back() != '-')
        base += '-';
    }
    while (!base.empty() && base.back() == '-') base.pop_back();
    if (base.empty()) base = "value";
    std::string name = base;
    for (int i = 2; names_.count(name) || is_primitive(name); ++i)
      name = base + "-" + std::to_string(i);
    names_.insert(name);
    return name;
  }
  static bool is_primitive(const std::string& name) {
    for (const Primitive& p : kPrimitives)
      if (name == p.name) return true;
    return name == "root";
  }
  // A rule for `body`, shared with any earlier rule of the same body.
  std::string define(const std::string& hint, const std::string& body) {
    auto it = by_body_.find(body);
    if (it != by_body_.end()) return it->second;
    const std::string name = fresh_name(hint);
    rules_.push_back({name, body});
    by_body_[body] = name;
    return name;
  }

  static bool has_constraints(const json& s, const std::set<std::string>& except) {
    for (const auto& [k, v] : s.items())
      if (!kAnnotations.count(k) && !except.count(k)) return true;
    return false;
  }
  static json without(const json& s, const std::set<std::string>& keys) {
    json out = json::object();
    for (const auto& [k, v] : s.items())
      if (!keys.count(k) && !kAnnotations.count(k)) out[k] = v;
    return out;
  }

  void check_keywords(const json& s, const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k)) continue;
      if (!kKeywords.count(k)) unsupported(path, k);
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>()))
        unsupported(path, k, "only uniqueItems false");
      if ((k == "exclusiveMinimum" || k == "exclusiveMaximum") && !v.is_number())
        unsupported(path, k, "it must be a number (the draft-4 boolean form is not read)");
    }
  }

  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
      unsupported(path, "$ref", "only references within the schema (\"#...\") are resolved");
    std::string pointer;
    for (size_t i = 1; i < ref.size(); ++i) {  // percent-decoding of the fragment
      if (ref[i] == '%' && i + 2 < ref.size() &&
          std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
          std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
        pointer += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        pointer += ref[i];
      }
    }
    try {
      const json& target = root_.at(json::json_pointer(pointer));
      return target;
    } catch (const json::exception&) {
      fail(path + "/$ref", "reference '" + ref + "' does not point into the schema");
    }
  }

  // The schema with any top-level $ref and allOf folded in.
  json flatten(const json& s, const std::string& path, int depth) {
    if (depth > kMaxNesting) fail(path, "$ref and allOf nest too deeply (a reference cycle?)");
    if (s.is_boolean()) {
      if (s.get<bool>()) return json::object();
      fail(path, "the schema false accepts no value");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path + "/$ref", "$ref must be a string");
      const std::string ref = s["$ref"].get<std::string>();
      const json& target = resolve(ref, path);
      if (!has_constraints(s, {"$ref"})) return flatten(target, ref, depth + 1);
      return merge({target, without(s, {"$ref"})}, path, depth + 1);
    }
    if (s.contains("allOf")) {
      const json& parts = s["allOf"];
      if (!parts.is_array() || parts.empty())
        fail(path + "/allOf", "allOf must be a non-empty list");
      std::vector<json> all(parts.begin(), parts.end());
      if (has_constraints(s, {"allOf"})) all.push_back(without(s, {"allOf"}));
      return merge(all, path + "/allOf", depth + 1);
    }
    return s;
  }

  // allOf: the parts' keywords combined where that keeps the meaning.
  json merge(const std::vector<json>& parts, const std::string& path, int depth) {
    json m = json::object();
    std::vector<json> flat;
    for (size_t i = 0; i < parts.size(); ++i)
      flat.push_back(flatten(parts[i], path + "/" + std::to_string(i), depth + 1));
    for (const json& part : flat) {
      for (const auto& [k, v] : part.items()) {
        if (kAnnotations.count(k)) continue;
        if (!m.contains(k) || m[k] == v) {
          m[k] = v;
        } else if (k == "type") {
          auto list = [](const json& t) {
            std::set<std::string> s;
            for (const json& x : t.is_array() ? t : json::array({t}))
              if (x.is_string()) s.insert(x.get<std::string>());
            return s;
          };
          std::set<std::string> both;
          for (const std::string& t : list(m[k]))
            for (const std::string& u : list(v))
              if (t == u)
                both.insert(t);
              else if ((t == "number" && u == "integer") || (t == "integer" && u == "number"))
                both.insert("integer");
          if (both.empty()) fail(path, "allOf parts allow no common type");
          m[k] = json(std::vector<std::string>(both.begin(), both.end()));
        } else if (k == "required") {
          for (const json& r : v)
            if (std::find(m[k].begin(), m[k].end(), r) == m[k].end()) m[k].push_back(r);
        } else if (k == "properties") {
          for (const auto& [name, sub] : v.items())
            m[k][name] = m[k].contains(name) && m[k][name] != sub
                             ? json{{"allOf", json::array({m[k][name], sub})}}
                             : sub;
        } else if (k == "minimum" || k == "exclusiveMinimum" || k == "minLength" ||
                   k == "minItems") {
          if (v.is_number() && m[k].is_number() && v > m[k]) m[k] = v;
        } else if (k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" ||
                   k == "maxItems") {
          if (v.is_number() && m[k].is_number() && v < m[k]) m[k] = v;
        } else if (k == "enum" && v.is_array() && m[k].is_array()) {
          json both = json::array();
          for (const json& x : m[k])
            if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
          m[k] = both;
        } else {
          fail(path, "allOf parts give '" + k + "' different values, which Kiln does not combine");
        }
      }
    }
    // additionalProperties only sees its own part's properties: every
    // property the merged object has must be one of them.
    std::set<std::string> names;
    if (m.contains("properties") && m["properties"].is_object())
      for (const auto& [n, sub] : m["properties"].items()) names.insert(n);
    if (m.contains("required") && m["required"].is_array())
      for (const json& r : m["required"])
        if (r.is_string()) names.insert(r.get<std::string>());
    for (const json& part : flat) {
      if (part.contains("additionalProperties") && part["additionalProperties"] != json(true)) {
        for (const std::string& n : names)
          if (!part.contains("properties") || !part["properties"].contains(n))
            fail(path, "an allOf part's additionalProperties would reject property '" + n +
                           "' that another part adds");
      }
      const bool items = part.contains("items"), prefix = part.contains("prefixItems");
      if ((m.contains("items") && !items && prefix) ||
          (m.contains("prefixItems") && !prefix && items))
        fail(path, "items and prefixItems come from different allOf parts");
    }
    return m;
  }

  // ---- oneOf: the branches must exclude each other ----

  static unsigned type_bits(const json& v) {
    if (v.is_null()) return 1;
    if (v.is_boolean()) return 2;
    if (v.is_object()) return 4;
    if (v.is_array()) return 8;
    if (v.is_string()) return 16;
    if (v.is_number_integer() || v.is_number_unsigned()) return 32;
    const double d = v.get<double>();
    return d == std::floor(d) ? 32 : 64;
  }
  // Types a (flattened) schema can accept: from type, enum and const only.
  static unsigned accepted_types(const json& s) {
    unsigned bits = 0;
    if (s.contains("const")) return type_bits(s["const"]);
    if (s.contains("enum") && s["enum"].is_array()) {
      for (const json& v : s["enum"]) bits |= type_bits(v);
      return bits;
    }
    if (!s.contains("type")) return 127;
    const json& t = s["type"];
    for (const json& x : t.is_array() ? t : json::array({t})) {
      const std::string n = x.is_string() ? x.get<std::string>() : "";
      bits |= n == "null"      ? 1
              : n == "boolean" ? 2
              : n == "object"  ? 4
              : n == "array"   ? 8
              : n == "string"  ? 16
              : n == "integer" ? 32
              : n == "number"  ? 96
                               : 127;
    }
    return bits;
  }
  static std::optional<std::vector<json>> values(const json& s) {
    if (s.contains("const")) return std::vector<json>{s["const"]};
    if (s.contains("enum") && s["enum"].is_array())
      return std::vector<json>(s["enum"].begin(), s["enum"].end());
    return std::nullopt;
  }
  static bool values_disjoint(const json& a, const json& b) {
    auto va = values(a), vb = values(b);
    if (!va || !vb) return false;
    for (const json& x : *va)
      if (std::find(vb->begin(), vb->end(), x) != vb->end()) return false;
    return true;
  }
  static bool has(const json& s, const char* list, const std::string& name) {
    if (!s.contains(list)) return false;
    const json& l = s[list];
    if (l.is_object()) return l.contains(name);
    return l.is_array() && std::find(l.begin(), l.end(), json(name)) != l.end();
  }
  // The branch writes no property besides its listed ones.
  static bool closed(const json& s) {
    if (s.contains("additionalProperties")) return s["additionalProperties"] == json(false);
    return s.contains("properties") && !s["properties"].empty();
  }
  // Some required property of b is never written by a.
  static bool misses_required(const json& a, const json& b) {
    if (!closed(a) || !b.contains("required") || !b["required"].is_array()) return false;
    for (const json& r : b["required"])
      if (r.is_string() && !has(a, "properties", r.get<std::string>())) return true;
    return false;
  }
  bool disjoint(const json& a, const json& b, const std::string& path) {
    if ((accepted_types(a) & accepted_types(b)) == 0 || values_disjoint(a, b)) return true;
    if ((accepted_types(a) | accepted_types(b)) != 4) return false;
    if (misses_required(a, b) && misses_required(b, a)) return true;
    if (!a.contains("required") || !a["required"].is_array()) return false;
    for (const json& r : a["required"]) {
      if (!r.is_string()) continue;
      const std::string n = r.get<std::string>();
      if (!has(b, "required", n) || !has(a, "properties", n) || !has(b, "properties", n)) continue;
      const json pa = flatten(a["properties"][n], path, 0),
                 pb = flatten(b["properties"][n], path, 0);
      if ((accepted_types(pa) & accepted_types(pb)) == 0 || values_disjoint(pa, pb)) return true;
    }
    return false;
  }

  // ---- Values ----

  std::string value(const json& s, const std::string& path, const std::string& hint) {
    // Schemas nest through properties, items and branches; each level is a
    // native stack frame here.
    struct Level {
      int& depth;
      explicit Level(int& d) : depth(++d) {}
      ~Level() { --depth; }
    } level(depth_);
    if (depth_ > kMaxDepth)
      fail(path, "the schema nests more than " + std::to_string(kMaxDepth) + " levels deep");
    if (s.is_boolean()) {
      if (s.get<bool>()) return need("value");
      fail(path, "the schema false accepts no value");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path + "/$ref", "$ref must be a string");
      if (has_constraints(s, {"$ref"})) return value(flatten(s, path, 0), path, hint);
      return ref(s["$ref"].get<std::string>(), path);
    }
    if (s.contains("allOf")) return value(flatten(s, path, 0), path, hint);
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) return branches(s, k, path, hint);
    if (s.contains("enum") || s.contains("const")) return enumeration(s, path, hint);
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      for (const json& x : t.is_array() ? t : json::array({t})) {
        if (!x.is_string()) fail(path + "/type", "type must be a string or a list of strings");
        if (std::find(types.begin(), types.end(), x.get<std::string>()) == types.end())
          types.push_back(x.get<std::string>());
      }
      if (types.empty()) fail(path + "/type", "an empty list of types accepts no value");
    } else {
      // No type: a value of any type passes, checked by the keywords of its
      // type; generate the types the keywords speak of.
      auto uses = [&](const std::set<std::string>& words) {
        for (const std::string& w : words)
          if (s.contains(w)) return true;
        return false;
      };
      if (uses(kObjectWords)) types.push_back("object");
      if (uses(kArrayWords)) types.push_back("array");
      if (uses(kStringWords)) types.push_back("string");
      if (uses(kNumberWords)) types.push_back("number");
      if (types.empty()) return need("value");
    }
    std::vector<std::string> alts;
    for (const std::string& t : types) {
      if (t == "null")
        alts.push_back(need("null"));
      else if (t == "boolean")
        alts.push_back(need("boolean"));
      else if (t == "object")
        alts.push_back(object(s, path, hint));
      else if (t == "array")
        alts.push_back(array(s, path, hint));
      else if (t == "string")
        alts.push_back(string(s, path, hint));
      else if (t == "integer")
        alts.push_back(integer(s, path, hint));
      else if (t == "number")
        alts.push_back(number(s, path, hint));
      else
        fail(path + "/type", "unknown type '" + t + "'");
    }
    return alternatives(alts);
  }

  std::string ref(const std::string& r, const std::string& path) {
    auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    const json& target = resolve(r, path);
    std::string hint = r == "#" ? "root-ref" : r.substr(r.find_last_of('/') + 1);
    const std::string name = fresh_name(hint);
    refs_[r] = name;
    const std::string body = value(target, r.substr(1), name);
    rules_.push_back({name, body});
    return name;
  }

  std::string branches(const json& s, const char* k, const std::string& path,
                       const std::string& hint) {
    const json& list = s[k];
    if (!list.is_array() || list.empty())
      fail(path + "/" + k, std::string(k) + " must be a non-empty list");
    const json rest = without(s, {k});
    std::vector<json> schemas;
    for (const json& b : list)
      schemas.push_back(rest.empty() ? b : json{{"allOf", json::array({b, rest})}});
    if (std::string(k) == "oneOf") {
      std::vector<json> flat;
      for (size_t i = 0; i < schemas.size(); ++i)
        flat.push_back(flatten(schemas[i], path + "/oneOf/" + std::to_string(i), 0));
      for (size_t i = 0; i < flat.size(); ++i)
        for (size_t j = i + 1; j < flat.size(); ++j)
          if (!disjoint(flat[i], flat[j], path))
            unsupported(path, k,
                        "branches " + std::to_string(i) + " and " + std::to_string(j) +
                            " may both match a value, and Kiln cannot make sure that only "
                            "one does; anyOf would be enforced");
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < schemas.size(); ++i) {
      std::string a = value(schemas[i], path + "/" + k + "/" + std::to_string(i), hint);
      if (std::find(alts.begin(), alts.end(), a) == alts.end()) alts.push_back(a);
    }
    return alternatives(alts);
  }

  std::string enumeration(const json& s, const std::string& path, const std::string& hint) {
    for (const auto& [k, v] : s.items())
      if (!kAnnotations.count(k) && k != "enum" && k != "const" && k != "type")
        unsupported(path, k, "Kiln generates enum and const values as listed, with type only");
    std::vector<json> vals;
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) fail(path + "/enum", "enum must be a list");
      vals.assign(s["enum"].begin(), s["enum"].end());
      if (s.contains("const"))
        vals.erase(std::remove_if(vals.begin(), vals.end(),
                                  [&](const json& v) { return v != s["const"]; }),
                   vals.end());
    } else {
      vals.push_back(s["const"]);
    }
    if (s.contains("type")) {
      const json only_type = {{"type", s["type"]}};
      const unsigned allowed = accepted_types(only_type);
      vals.erase(std::remove_if(vals.begin(), vals.end(),
                                [&](const json& v) { return (type_bits(v) & allowed) == 0; }),
                 vals.end());
    }
    if (vals.empty()) fail(path, "no enum or const value has the schema's type");
    std::vector<std::string> alts;
    for (const json& v : vals) alts.push_back(gbnf_literal(json_text(v, path)));
    need("space");
    return define(hint, alternatives(alts) + " space");
  }

  std::string kv(const std::string& name, const std::string& value_expr, const std::string& hint) {
    need("space");
    return define(hint + "-" + name + "-kv",
                  gbnf_literal(json_text(json(name), "")) + " space \":\" space " + value_expr);
  }

  // A key: any string of plain characters except the listed names.
  std::string other_key(const std::vector<std::string>& names, const std::string& hint) {
    need("space");
    need("raw-char");
    struct Node {
      std::map<uint32_t, size_t> next;
      bool name = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& n : names) {
      std::vector<uint32_t> cps;
      bool plain = true;
      for (size_t i = 0; i < n.size();) {
        const unsigned char c = static_cast<unsigned char>(n[i]);
        const int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
        for (int j = 1; j < len && i + static_cast<size_t>(j) < n.size(); ++j)
          cp = (cp << 6) | (static_cast<unsigned char>(n[i + static_cast<size_t>(j)]) & 0x3F);
        i += static_cast<size_t>(len);
        plain &= cp >= 0x20 && cp != '"' && cp != '\\';
        cps.push_back(cp);
      }
      if (!plain) continue;  // a plain-character key can never equal it
      size_t at = 0;
      for (uint32_t cp : cps) {
        auto it = trie[at].next.find(cp);
        if (it == trie[at].next.end()) {
          trie[at].next[cp] = trie.size();
          trie.push_back({});
          at = trie.size() - 1;
        } else {
          at = it->second;
        }
      }
      trie[at].name = true;
    }
    // K(node): the rest of a key that has matched the node's prefix so far.
    std::vector<std::string> rule(trie.size());
    for (size_t i = trie.size(); i-- > 0;) {
      std::vector<std::string> alts;
      if (!trie[i].name) alts.push_back("\"\"");
      std::vector<CodepointRange> others = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      for (const auto& [cp, child] : trie[i].next) {
        std::string lit;
        append_codepoint(&lit, cp);
        alts.push_back(gbnf_literal(lit) + " " + rule[child]);
        others.push_back({cp, cp});
      }
      const std::vector<CodepointRange> rest = complement_ranges(normalize_ranges(others));
      if (!rest.empty()) alts.push_back(gbnf_class(rest) + " raw-char*");
      rule[i] = define(hint + "-key", alternatives(alts));
    }
    return define(hint + "-key", "\"\\\"\" " + rule[0] + " \"\\\"\" space");
  }
  static void append_codepoint(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string object(const json& s, const std::string& path, const std::string& hint) {
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) fail(path + "/properties", "properties must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path + "/required", "required must be a list");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail(path + "/required", "required must list strings");
        if (std::find(required.begin(), required.end(), r.get<std::string>()) == required.end())
          required.push_back(r.get<std::string>());
      }
    }
    const json extra =
        s.contains("additionalProperties") ? s["additionalProperties"] : json(props.empty());
    const bool extras = extra != json(false);
    const std::string ap_path = path + "/additionalProperties";
    auto extra_value = [&] {
      return extra.is_object() ? value(extra, ap_path, hint + "-extra") : need("value");
    };
    std::vector<std::string> req, opt, names;
    for (const auto& [name, sub] : props.items()) names.push_back(name);
    for (const auto& [name, sub] : props.items()) {
      const bool is_required = std::find(required.begin(), required.end(), name) != required.end();
      const std::string v =
          value(sub, path + "/properties/" + pointer_token(name), hint + "-" + name);
      (is_required ? req : opt).push_back(kv(name, v, hint));
    }
    for (const std::string& name : required) {
      if (props.contains(name)) continue;
      if (!extras)
        fail(path + "/required", "required property '" + name +
                                     "' is not in properties and additionalProperties is false");
      req.push_back(kv(name, extra_value(), hint));
      names.push_back(name);
    }
    need("space");
    std::string extra_kv;
    if (extras)
      extra_kv =
          define(hint + "-extra-kv", other_key(names, hint) + " \":\" space " + extra_value());
    // tails[i]: what may follow once something is written, from optional i on.
    std::vector<std::string> tails(opt.size() + 1);
    tails[opt.size()] = extras ? "(\",\" space " + extra_kv + ")*" : "";
    for (size_t i = opt.size(); i-- > 0;)
      tails[i] = define(hint + "-rest", "(\",\" space " + opt[i] + ")? " + tails[i + 1]);
    std::string body = "\"{\" space ";
    if (!req.empty()) {
      for (size_t i = 0; i < req.size(); ++i) body += (i ? " \",\" space " : "") + req[i];
      body += " " + tails[0];
    } else {
      // The first property written has no comma before it.
      std::string first = extras ? "(" + extra_kv + " (\",\" space " + extra_kv + ")*)?" : "\"\"";
      for (size_t i = opt.size(); i-- > 0;)
        first = define(hint + "-first", opt[i] + " " + tails[i + 1] + " | " + first);
      body += first;
    }
    body += " \"}\" space";
    return define(hint, body);
  }

  static uint64_t count(const json& s, const char* k, const std::string& path, uint64_t def) {
    if (!s.contains(k)) return def;
    const json& v = s[k];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      fail(path + "/" + k, std::string(k) + " must be a non-negative integer");
    const uint64_t n = v.get<uint64_t>();
    if (std::string(k).rfind("min", 0) == 0 && n > kMaxRequired)
      unsupported(path, k, "values above " + std::to_string(kMaxRequired));
    return n;
  }

  std::string array(const json& s, const std::string& path, const std::string& hint) {
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) fail(path + "/prefixItems", "prefixItems must be a list");
      for (size_t i = 0; i < p.size(); ++i)
        prefix.push_back(value(p[i], path + "/prefixItems/" + std::to_string(i), hint + "-item"));
    }
    const json items = s.contains("items") ? s["items"] : json(true);
    if (items.is_array())
      unsupported(path, "items", "a list of schemas is the old tuple form: use prefixItems");
    const bool more = items != json(false);
    const uint64_t min = count(s, "minItems", path, 0);
    uint64_t max = count(s, "maxItems", path, UINT64_MAX);
    if (!more) max = std::min<uint64_t>(max, prefix.size());
    if (min > max) fail(path, "no array length satisfies minItems, maxItems and items");
    if (max != UINT64_MAX && max > kMaxGenerated) max = std::max(min, kMaxGenerated);
    need("space");
    if (max == 0) return define(hint, "\"[\" space \"]\" space");
    const std::string item = more ? value(items, path + "/items", hint + "-item") : "";
    auto element = [&](uint64_t i) { return i < prefix.size() ? prefix[i] : item; };
    // tail(i): what follows the first i elements.
    std::string tail;
    const uint64_t k = prefix.size();
    if (more && max > k) {
      const uint64_t lo = min > std::max<uint64_t>(k, 1) ? min - std::max<uint64_t>(k, 1) : 0;
      const std::string hi =
          max == UINT64_MAX ? "" : std::to_string(max - std::max<uint64_t>(k, 1));
      tail = "(\",\" space " + item + "){" + std::to_string(lo) + "," + hi + "}";
    }
    for (uint64_t i = std::min<uint64_t>(k, max); i-- > 1;) {
      // Element i of the prefix, optional once minItems are written.
      const std::string step = "\",\" space " + element(i) + " " + tail;
      tail = define(hint + "-rest", i >= min ? "(" + step + ")?" : step);
    }
    const std::string body = element(0) + " " + tail;
    return define(hint, "\"[\" space " + (min == 0 ? "(" + body + ")?" : body) + " \"]\" space");
  }

  std::string string(const json& s, const std::string& path, const std::string& hint) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    need("space");
    if (s.contains("format")) {
      if (!s["format"].is_string()) fail(path + "/format", "format must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f != "date" && f != "time" && f != "date-time" && f != "uuid")
        unsupported(path, "format", "'" + f + "'; Kiln enforces date, time, date-time and uuid");
      if (lengths || s.contains("pattern"))
        unsupported(path, "format", "together with pattern, minLength or maxLength");
      return define(hint, "\"\\\"\" " + need(f) + " \"\\\"\" space");
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail(path + "/pattern", "pattern must be a string");
      if (lengths) unsupported(path, "pattern", "together with minLength or maxLength");
      std::string inner;
      try {
        inner = json_pattern_to_gbnf(s["pattern"].get<std::string>());
      } catch (const Error& e) {
        unsupported(path, "pattern", e.what());
      }
      return define(hint, "\"\\\"\" " + inner + " \"\\\"\" space");
    }
    if (!lengths) return need("string");
    const uint64_t min = count(s, "minLength", path, 0);
    uint64_t max = count(s, "maxLength", path, UINT64_MAX);
    if (min > max) fail(path, "minLength is above maxLength");
    if (max != UINT64_MAX && max > kMaxGenerated) max = std::max(min, kMaxGenerated);
    need("char");
    return define(hint, "\"\\\"\" char{" + std::to_string(min) + "," +
                            (max == UINT64_MAX ? "" : std::to_string(max)) + "} \"\\\"\" space");
  }

  struct Bounds {
    std::optional<double> lo, hi;
    bool lo_strict = false, hi_strict = false;
  };
  static Bounds bounds(const json& s, const std::string& path) {
    Bounds b;
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_number()) fail(path + "/" + k, std::string(k) + " must be a number");
      const double v = s[k].get<double>();
      if (!std::isfinite(v)) fail(path + "/" + k, "the bound is not finite");
      const bool strict = k[0] == 'e';
      if (std::string(k).find("inimum") != std::string::npos) {
        if (!b.lo || v > *b.lo || (v == *b.lo && strict)) b.lo = v, b.lo_strict = strict;
      } else {
        if (!b.hi || v < *b.hi || (v == *b.hi && strict)) b.hi = v, b.hi_strict = strict;
      }
    }
    return b;
  }

  std::string integer(const json& s, const std::string& path, const std::string& hint) {
    const Bounds b = bounds(s, path);
    if (!b.lo && !b.hi) return need("integer");
    double lo = -static_cast<double>(kMaxInt), hi = static_cast<double>(kMaxInt);
    if (b.lo) lo = std::max(lo, b.lo_strict ? std::floor(*b.lo) + 1 : std::ceil(*b.lo));
    if (b.hi) hi = std::min(hi, b.hi_strict ? std::ceil(*b.hi) - 1 : std::floor(*b.hi));
    if (lo > hi) fail(path, "no integer of at most 15 digits lies within the bounds");
    need("space");
    return define(hint,
                  "(" + int_range(static_cast<int64_t>(lo), static_cast<int64_t>(hi)) + ") space");
  }

  std::string number(const json& s, const std::string& path, const std::string& hint) {
    const Bounds b = bounds(s, path);
    if (!b.lo && !b.hi) return need("number");
    std::vector<std::string> alts;
    const Decimal zero;
    if (!b.hi || *b.hi >= 0) {  // m >= 0
      Decimal lo = zero, hi;
      bool lo_strict = false;
      if (b.lo && *b.lo >= 0) lo = to_decimal(*b.lo, path, "minimum"), lo_strict = b.lo_strict;
      if (b.hi) hi = to_decimal(*b.hi, path, "maximum");
      for (auto& a : unsigned_decimal_range(lo, lo_strict, b.hi ? &hi : nullptr, b.hi_strict))
        alts.push_back(a);
    }
    if (!b.lo || *b.lo < 0) {  // -m with m > 0
      Decimal lo = zero, hi;
      bool lo_strict = true;
      if (b.hi && *b.hi < 0) lo = to_decimal(*b.hi, path, "maximum"), lo_strict = b.hi_strict;
      if (b.lo) hi = to_decimal(*b.lo, path, "minimum");
      std::vector<std::string> neg =
          unsigned_decimal_range(lo, lo_strict, b.lo ? &hi : nullptr, b.lo_strict);
      if (!neg.empty()) alts.push_back("\"-\" " + alternatives(neg));
    }
    if (alts.empty())
      fail(path, "no number of at most 15 significant digits lies within the bounds");
    need("space");
    return define(hint, "(" + alternatives(alts) + ") space");
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_ = {"root"};
  std::map<std::string, std::string> by_body_;
  std::map<std::string, std::string> refs_;
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  return Converter(schema).run();
}

std::string json_schema_to_gbnf(const nlohmann::json& schema) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()));
}

std::string json_object_gbnf() { return Converter(json::object()).run_object(); }

}  // namespace kiln
