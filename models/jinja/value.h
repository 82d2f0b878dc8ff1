// The values a chat template computes with, behaving as the Python objects
// jinja2 hands a template: None, bool, int, float, str, list, tuple, dict
// (insertion-ordered, like Python's), callables, namespace() objects, the
// loop object, and jinja2's Undefined. Chat templates print these values
// (tool arguments, schemas) and compare them, so str(), repr(), ==,
// truthiness and json.dumps must give Python's bytes exactly; this file is
// the one place that knows how. Lists and dicts are shared by reference as
// in Python, so a namespace set in a loop is seen after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::jinja {

// An error the interpreter reports with the template line it happened on
// (the code raising it does not know the line).
class RuntimeError : public std::runtime_error {
 public:
  explicit RuntimeError(const std::string& what) : std::runtime_error(what) {}
};

class Value;
using List = std::vector<Value>;
struct Dict;
struct Function;
struct LoopInfo;

// Positional and keyword arguments of a call, as Python passes them.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

class Value {
 public:
  enum class Kind : uint8_t {
    undefined,
    none,
    boolean,
    integer,
    floating,
    string,
    list,
    tuple,
    dict,
    function,
    ns,    // namespace(): a dict whose keys are attributes
    loop,  // the `loop` of a for
  };

  Value() = default;  // undefined
  static Value none() { return Value(Kind::none); }
  static Value undefined(std::string message) {
    Value v;
    v.str_ = std::move(message);
    return v;
  }
  // An undefined value with jinja2's message for a missing variable.
  static Value undefined_name(std::string_view name);
  // jinja2's message for a missing attribute or item of `obj`.
  static Value undefined_member(const Value& obj, const Value& key);
  Value(bool b) : kind_(Kind::boolean), int_(b) {}
  Value(int v) : kind_(Kind::integer), int_(v) {}
  Value(int64_t v) : kind_(Kind::integer), int_(v) {}
  Value(double v) : kind_(Kind::floating), float_(v) {}
  Value(std::string s) : kind_(Kind::string), str_(std::move(s)) {}
  Value(std::string_view s) : kind_(Kind::string), str_(s) {}
  Value(const char* s) : kind_(Kind::string), str_(s) {}
  static Value list(List items = {});
  static Value tuple(List items);
  static Value dict();
  static Value namespace_();
  static Value function(std::string name, std::function<Value(CallArgs&)> fn);
  static Value loop(std::shared_ptr<LoopInfo> info);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_tuple() const { return kind_ == Kind::tuple; }
  bool is_sequence() const { return is_list() || is_tuple(); }
  bool is_dict() const { return kind_ == Kind::dict; }
  bool is_namespace() const { return kind_ == Kind::ns; }
  bool is_function() const { return kind_ == Kind::function; }
  bool is_loop() const { return kind_ == Kind::loop; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_float() const { return float_; }
  // int, float or bool as a double (Python's numeric tower).
  double as_number() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return str_; }  // a string's text, an undefined's message
  List& items() const { return *list_; }
  Dict& entries() const { return *dict_; }
  const Function& fn() const { return *fn_; }
  LoopInfo& loop_info() const { return *loop_; }

  // Python's bool(x) (Undefined is false).
  bool truthy() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::undefined;
  int64_t int_ = 0;  // bool and int
  double float_ = 0;
  std::string str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
  std::shared_ptr<LoopInfo> loop_;
};

// Insertion-ordered mapping; keys compare as Python's (1 == 1.0 == True).
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(const Value& key, Value v);
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

// What `loop` reads: the items iterated (after the loop's filter) and where
// the iteration is.
struct LoopInfo {
  std::shared_ptr<const List> items;
  size_t index = 0;
  int depth = 1;
};

// Python's type name in jinja2's messages ("dict object", "None").
std::string type_description(const Value& v);
std::string type_name(const Value& v);  // "dict", "str", "NoneType"

// Python's str(x) and repr(x). str() of Undefined is "".
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);  // Python's repr(float)

// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's <, for the types that order (numbers, str, list, tuple); throws
// RuntimeError for others.
bool less(const Value& a, const Value& b);

// Throws jinja2's UndefinedError message if v is undefined.
void require_defined(const Value& v);

// A JSON document as Python's json.loads would give it (objects keep their
// key order).
Value from_json(const nlohmann::ordered_json& j);

// Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys), which
// transformers' tojson filter is.
struct DumpOptions {
  std::optional<std::string> indent;  // None: one line
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string dumps(const Value& v, const DumpOptions& o);

}  // namespace kiln::jinja
