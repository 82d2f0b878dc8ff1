#include "models/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ir/error.h"
#include "models/jinja/builtins.h"
#include "models/jinja/lexer.h"
#include "models/jinja/pystr.h"

namespace kiln::jinja {

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  require_defined(a);
  require_defined(b);
  throw RuntimeError("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                     type_name(b) + "'");
}

// Python's ints do not overflow; Kiln's are 64-bit and refuse to wrap.
int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw RuntimeError("integer overflow");
  return r;
}
int64_t sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) throw RuntimeError("integer overflow");
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw RuntimeError("integer overflow");
  return r;
}

// Python's floor division and modulo of ints.
int64_t floor_div(int64_t a, int64_t b) {
  if (a == std::numeric_limits<int64_t>::min() && b == -1) throw RuntimeError("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

constexpr size_t kMaxString = 64u << 20;

Value repeat(const Value& seq, int64_t n) {
  if (n <= 0)
    return seq.is_string()  ? Value(std::string())
           : seq.is_tuple() ? Value::tuple({})
                            : Value::list();
  if (seq.is_string()) {
    if (seq.str().size() * static_cast<uint64_t>(n) > kMaxString)
      throw RuntimeError("string repetition result too large");
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value(std::move(out));
  }
  if (seq.items().size() * static_cast<uint64_t>(n) > (1u << 20))
    throw RuntimeError("list repetition result too large");
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// Python's slice semantics (PySlice_AdjustIndices) over n elements.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop,
                                  const Value& step_v) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none() || v.is_undefined()) {
      if (v.is_undefined()) require_defined(v);
      return std::nullopt;
    }
    if (!v.is_int() && !v.is_bool())
      throw RuntimeError(std::string("slice ") + what +
                         " must be integers or None or have an __index__ method");
    return v.as_int();
  };
  const int64_t step = as_index(step_v, "indices").value_or(1);
  if (step == 0) throw RuntimeError("slice step cannot be zero");
  const int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t b = adjust(as_index(start, "indices"), step < 0 ? upper : lower);
  const int64_t e = adjust(as_index(stop, "indices"), step < 0 ? lower : upper);
  std::vector<size_t> out;
  if (step > 0)
    for (int64_t i = b; i < e; i += step) out.push_back(static_cast<size_t>(i));
  else
    for (int64_t i = b; i > e; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_string()) {
    const std::string& s = obj.str();
    std::string out;
    if (is_ascii(s)) {
      for (size_t i : slice_indices(static_cast<int64_t>(s.size()), start, stop, step)) out += s[i];
    } else {
      std::vector<uint32_t> cps = pystr::codepoints(s);
      std::vector<uint32_t> picked;
      for (size_t i : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step))
        picked.push_back(cps[i]);
      out = pystr::encode(picked, 0, picked.size());
    }
    return Value(std::move(out));
  }
  if (obj.is_sequence()) {
    List out;
    for (size_t i : slice_indices(static_cast<int64_t>(obj.items().size()), start, stop, step))
      out.push_back(obj.items()[i]);
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
  }
  require_defined(obj);
  throw RuntimeError("'" + type_name(obj) + "' object is not subscriptable");
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a);
    const std::string t = to_str(b);
    if (s.size() + t.size() > kMaxString) throw RuntimeError("string too large");
    return Value(s + t);
  }
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  switch (op[0]) {
    case '+':
      if (ints) return Value(add(a.as_int(), b.as_int()));
      if (nums) return Value(a.as_number() + b.as_number());
      if (a.is_string() && b.is_string()) {
        if (a.str().size() + b.str().size() > kMaxString) throw RuntimeError("string too large");
        return Value(a.str() + b.str());
      }
      if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
        List out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
      require_defined(a);
      require_defined(b);
      if (a.is_string() || a.is_list() || a.is_tuple())
        throw RuntimeError("can only concatenate " + type_name(a) + " (not \"" + type_name(b) +
                           "\") to " + type_name(a));
      unsupported_operands("+", a, b);
    case '-':
      if (ints) return Value(sub(a.as_int(), b.as_int()));
      if (nums) return Value(a.as_number() - b.as_number());
      unsupported_operands("-", a, b);
    case '*':
      if (op == "**-") {  // -(|a| ** b): see the parser
        Value p = binary_op("**", a.is_float() ? Value(-a.as_float()) : Value(-a.as_int()), b);
        return p.is_float() ? Value(-p.as_float()) : Value(-p.as_int());
      }
      if (op == "**") {
        if (ints && b.as_int() >= 0) {
          int64_t base = a.as_int(), result = 1;
          for (int64_t e = b.as_int(); e > 0; --e) result = mul(result, base);
          return Value(result);
        }
        if (nums) {
          if (a.as_number() == 0 && b.as_number() < 0)
            throw RuntimeError("0.0 cannot be raised to a negative power");
          return Value(std::pow(a.as_number(), b.as_number()));
        }
        unsupported_operands("** or pow()", a, b);
      }
      if (ints) return Value(mul(a.as_int(), b.as_int()));
      if (nums) return Value(a.as_number() * b.as_number());
      if ((a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool()))
        return repeat(a, b.as_int());
      if ((b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool()))
        return repeat(b, a.as_int());
      unsupported_operands("*", a, b);
    case '/':
      if (op == "//") {
        if (!nums) unsupported_operands("//", a, b);
        if (b.as_number() == 0)
          throw RuntimeError(ints ? "integer division or modulo by zero"
                                  : "float floor division by zero");
        if (ints) return Value(floor_div(a.as_int(), b.as_int()));
        return Value(std::floor(a.as_number() / b.as_number()));
      }
      if (!nums) unsupported_operands("/", a, b);
      if (b.as_number() == 0) throw RuntimeError("division by zero");
      return Value(a.as_number() / b.as_number());
    case '%':
      if (nums) {
        if (b.as_number() == 0)
          throw RuntimeError(ints ? "integer modulo by zero" : "float modulo");
        if (ints) return Value(floor_mod(a.as_int(), b.as_int()));
        double m = std::fmod(a.as_number(), b.as_number());
        if (m != 0 && ((m < 0) != (b.as_number() < 0))) m += b.as_number();
        return Value(m);
      }
      if (a.is_string()) return Value(percent_format(a.str(), b));
      unsupported_operands("%", a, b);
    default: throw RuntimeError("unknown operator " + op);
  }
}

bool contains(const Value& c, const Value& item) {
  if (c.is_string()) {
    if (!item.is_string()) {
      require_defined(item);
      throw RuntimeError("'in <string>' requires string as left operand, not " + type_name(item));
    }
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_sequence()) {
    for (const Value& x : c.items())
      if (equal(x, item)) return true;
    return false;
  }
  if (c.is_dict()) {
    if (item.is_list() || item.is_dict() || item.is_namespace())
      throw RuntimeError("unhashable type: '" + type_name(item) + "'");
    return c.entries().find(item) != nullptr;
  }
  if (c.is_undefined()) return false;
  throw RuntimeError("argument of type '" + type_name(c) + "' is not iterable");
}

Value* Scope::find_local(const std::string& name) {
  for (auto& [k, v] : vars)
    if (k == name) return &v;
  return nullptr;
}

Interpreter::Interpreter(const Program& program, std::tm now, RenderLimits limits)
    : program_(program), now_(now), limits_(limits) {}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    throw RuntimeError("rendering took too many steps (more than " +
                       std::to_string(limits_.max_steps) + "); the template may loop forever");
}

void Interpreter::write(const std::string& s) {
  if (out_->size() + s.size() > limits_.max_output)
    throw RuntimeError("the rendered text exceeds " + std::to_string(limits_.max_output) +
                       " bytes");
  *out_ += s;
}

std::string Interpreter::render(const Value& context) {
  auto root = std::make_shared<Scope>();
  if (context.is_dict())
    for (const auto& [k, v] : context.entries().items)
      if (k.is_string()) root->vars.emplace_back(k.str(), v);
  std::string out;
  out_ = &out;
  // Values may refer to each other in cycles only through namespaces;
  // emptying them frees everything the render made.
  struct Release {
    std::vector<Value>& ns;
    ~Release() {
      for (Value& v : ns) v.entries().items.clear();
      ns.clear();
    }
  } release{namespaces_};
  exec_body(program_.body, root);
  return out;
}

Value Interpreter::filtered_body(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  Value v(capture(s.body, inner));
  for (const ExprPtr& f : s.filters) {
    CallArgs args;
    eval_args(*f, *scope, args);
    v = f->filter(*this, v, args);
  }
  return v;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec_body(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const StmtPtr& s : body) {
    Flow f = exec(*s, scope);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

void Interpreter::assign(const Expr& target, const Value& v, Scope& scope, bool allow_attr) {
  if (target.kind == Expr::Kind::name) {
    if (Value* slot = scope.find_local(target.name))
      *slot = v;
    else
      scope.vars.emplace_back(target.name, v);
    return;
  }
  if (target.kind == Expr::Kind::tuple) {
    List items = iterate(v);
    if (v.is_undefined()) require_defined(v);
    if (items.size() != target.items.size())
      throw RuntimeError(
          items.size() > target.items.size()
              ? "too many values to unpack (expected " + std::to_string(target.items.size()) + ")"
              : "not enough values to unpack (expected " + std::to_string(target.items.size()) +
                    ", got " + std::to_string(items.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) assign(*target.items[i], items[i], scope, allow_attr);
    return;
  }
  // ns.attr = v
  Value obj = lookup(target.a->name, scope);
  if (!obj.is_namespace()) throw RuntimeError("cannot assign attribute on non-namespace object");
  obj.entries().set(Value(target.name), v);
}

Value Interpreter::make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope,
                              const Value& caller) {
  // The macro holds its scope weakly: the scope holds the macro.
  std::weak_ptr<Scope> weak = scope;
  return Value::function(s.text, [this, &s, weak, caller](CallArgs& args) -> Value {
    auto ms = std::make_shared<Scope>();
    ms->parent = weak.lock();
    if (!ms->parent) throw RuntimeError("macro '" + s.text + "' called after its scope ended");
    size_t used_kwargs = 0;
    for (size_t i = 0; i < s.params.size(); ++i) {
      Value v;
      bool given = false;
      if (i < args.args.size()) {
        v = args.args[i];
        given = true;
      }
      for (auto& [k, x] : args.kwargs)
        if (k == s.params[i]) {
          if (given)
            throw RuntimeError("macro '" + s.text + "' got multiple values for argument '" + k +
                               "'");
          v = x;
          given = true;
          ++used_kwargs;
        }
      if (!given)
        v = s.defaults[i] ? eval(*s.defaults[i], *ms)
                          : Value::undefined("parameter '" + s.params[i] + "' was not provided");
      ms->vars.emplace_back(s.params[i], std::move(v));
    }
    List varargs;
    for (size_t i = s.params.size(); i < args.args.size(); ++i) varargs.push_back(args.args[i]);
    ms->vars.emplace_back("varargs", Value::tuple(std::move(varargs)));
    Value kwargs = Value::dict();
    Value caller_v = caller;
    for (auto& [k, x] : args.kwargs) {
      if (k == "caller") {
        caller_v = x;
        continue;
      }
      if (std::find(s.params.begin(), s.params.end(), k) == s.params.end())
        kwargs.entries().set(Value(k), x);
    }
    ms->vars.emplace_back("kwargs", kwargs);
    if (!caller_v.is_undefined()) ms->vars.emplace_back("caller", caller_v);
    return Value(capture(s.body, ms));
  });
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  step();
  try {
    switch (s.kind) {
      case Stmt::Kind::output: write(s.text); break;
      case Stmt::Kind::print: write(to_str(eval(*s.expr, *scope))); break;
      case Stmt::Kind::if_:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond, *scope).truthy()) return exec_body(body, scope);
        return exec_body(s.else_body, scope);
      case Stmt::Kind::for_: exec_for(s, scope); break;
      case Stmt::Kind::set: assign(*s.target, eval(*s.expr, *scope), *scope, true); break;
      case Stmt::Kind::set_block: assign(*s.target, filtered_body(s, scope), *scope, true); break;
      case Stmt::Kind::macro: {
        Value m = make_macro(s, scope, Value());
        if (Value* slot = scope->find_local(s.text))
          *slot = m;
        else
          scope->vars.emplace_back(s.text, m);
        break;
      }
      case Stmt::Kind::call_block: {
        // caller(): the block's body as a macro with the block's parameters.
        std::weak_ptr<Scope> weak = scope;
        Value caller = Value::function("caller", [this, &s, weak](CallArgs& args) -> Value {
          auto cs = std::make_shared<Scope>();
          cs->parent = weak.lock();
          if (!cs->parent) throw RuntimeError("caller() called after its call block ended");
          for (size_t i = 0; i < s.params.size(); ++i) {
            Value v;
            if (i < args.args.size())
              v = args.args[i];
            else if (s.defaults[i])
              v = eval(*s.defaults[i], *cs);
            for (auto& [k, x] : args.kwargs)
              if (k == s.params[i]) v = x;
            cs->vars.emplace_back(s.params[i], v);
          }
          return Value(capture(s.body, cs));
        });
        CallArgs args;
        eval_args(*s.expr, *scope, args);
        args.kwargs.emplace_back("caller", caller);
        write(to_str(call(eval(*s.expr->a, *scope), args)));
        break;
      }
      case Stmt::Kind::filter_block: write(to_str(filtered_body(s, scope))); break;
      case Stmt::Kind::with: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        for (const auto& [target, value] : s.assigns)
          assign(*target, eval(*value, *scope), *inner, false);
        return exec_body(s.body, inner);
      }
      case Stmt::Kind::scope: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        return exec_body(s.body, inner);
      }
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
    }
  } catch (const RuntimeError& e) {
    throw Error(at_line(s.line, e.what()));
  } catch (const std::logic_error& e) {
    // out_of_range, length_error: a bound this file missed, still the
    // template's fault and still reported as kiln::Error.
    throw Error(at_line(s.line, e.what()));
  }
  return Flow::normal;
}

void Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Value seq = eval(*s.expr, *scope);
  if (!(seq.is_string() || seq.is_sequence() || seq.is_dict() || seq.is_undefined()))
    throw RuntimeError("'" + type_name(seq) + "' object is not iterable");
  auto items = std::make_shared<List>(iterate(seq));
  if (s.cond) {
    List kept;
    for (const Value& x : *items) {
      step();
      Scope probe;
      probe.parent = scope;
      assign(*s.target, x, probe, false);
      if (eval(*s.cond, probe).truthy()) kept.push_back(x);
    }
    *items = std::move(kept);
  }
  auto info = std::make_shared<LoopInfo>();
  info->items = items;
  const Value loop = Value::loop(info);
  for (size_t i = 0; i < items->size(); ++i) {
    step();  // an empty body still costs its iteration
    auto body = std::make_shared<Scope>();
    body->parent = scope;
    body->vars.reserve(4);
    assign(*s.target, (*items)[i], *body, false);
    body->vars.emplace_back("loop", loop);
    info->index = i;
    if (exec_body(s.body, body) == Flow::break_) break;
  }
  if (items->empty() && !s.else_body.empty()) {
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    exec_body(s.else_body, inner);
  }
}

Value Interpreter::lookup(const std::string& name, Scope& scope) {
  for (Scope* sc = &scope; sc; sc = sc->parent.get())
    if (Value* v = sc->find_local(name)) return *v;
  Value g = find_global(*this, name);
  if (!g.is_undefined()) return g;
  return Value::undefined_name(name);
}

void Interpreter::eval_args(const Expr& e, Scope& scope, CallArgs& args) {
  args.args.reserve(e.items.size());
  for (const ExprPtr& a : e.items) args.args.push_back(eval(*a, scope));
  for (const auto& [k, v] : e.kwargs) args.kwargs.emplace_back(k, eval(*v, scope));
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (!fn.is_function()) {
    require_defined(fn);
    throw RuntimeError("'" + type_name(fn) + "' object is not callable");
  }
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    throw RuntimeError("maximum recursion depth exceeded (more than " +
                       std::to_string(limits_.max_call_depth) + " nested calls)");
  }
  try {
    Value r = fn.fn().call(args);
    --call_depth_;
    return r;
  } catch (...) {
    --call_depth_;
    throw;
  }
}

Value Interpreter::eval_call(const Expr& e, Scope& scope) {
  CallArgs args;
  if (e.a->kind == Expr::Kind::getattr) {
    Value obj = eval(*e.a->a, scope);
    eval_args(e, scope, args);
    bool found = false;
    Value r = call_method(obj, e.a->name, args, &found);
    if (found) return r;
    return call(get_attr(obj, e.a->name), args);
  }
  Value fn = eval(*e.a, scope);
  eval_args(e, scope, args);
  return call(fn, args);
}

Value Interpreter::eval_compare(const Expr& e, Scope& scope) {
  Value left = eval(*e.a, scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i], scope);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==")
      ok = equal(left, right);
    else if (op == "!=")
      ok = !equal(left, right);
    else if (op == "<")
      ok = less(left, right);
    else if (op == ">")
      ok = less(right, left);
    else if (op == "<=")
      ok = less(left, right) || equal(left, right);
    else if (op == ">=")
      ok = less(right, left) || equal(left, right);
    else if (op == "in")
      ok = contains(right, left);
    else
      ok = !contains(right, left);
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval(const Expr& e, Scope& scope) {
  step();
  switch (e.kind) {
    case Expr::Kind::constant: return e.value;
    case Expr::Kind::name: return lookup(e.name, scope);
    case Expr::Kind::list:
    case Expr::Kind::tuple: {
      List items;
      items.reserve(e.items.size());
      for (const ExprPtr& x : e.items) items.push_back(eval(*x, scope));
      return e.kind == Expr::Kind::list ? Value::list(std::move(items))
                                        : Value::tuple(std::move(items));
    }
    case Expr::Kind::dict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i], scope);
        if (k.is_list() || k.is_dict() || k.is_undefined() || k.is_namespace()) {
          require_defined(k);
          throw RuntimeError("unhashable type: '" + type_name(k) + "'");
        }
        d.entries().set(k, eval(*e.items[i + 1], scope));
      }
      return d;
    }
    case Expr::Kind::getattr: return get_attr(eval(*e.a, scope), e.name);
    case Expr::Kind::getitem: {
      Value obj = eval(*e.a, scope);
      if (e.b->kind == Expr::Kind::slice) {
        const Expr& s = *e.b;
        Value none = Value::none();
        return slice(obj, s.a ? eval(*s.a, scope) : none, s.b ? eval(*s.b, scope) : none,
                     s.c ? eval(*s.c, scope) : none);
      }
      return get_item(obj, eval(*e.b, scope));
    }
    case Expr::Kind::slice: throw RuntimeError("a slice outside '[]'");
    case Expr::Kind::call: return eval_call(e, scope);
    case Expr::Kind::filter: {
      Value subject = eval(*e.a, scope);
      CallArgs args;
      eval_args(e, scope, args);
      return e.filter(*this, subject, args);
    }
    case Expr::Kind::test: {
      Value subject = eval(*e.a, scope);
      CallArgs args;
      eval_args(e, scope, args);
      return Value(e.test(*this, subject, args) != e.negated);
    }
    case Expr::Kind::negate:
    case Expr::Kind::plus: {
      Value v = eval(*e.a, scope);
      if (!v.is_number()) {
        require_defined(v);
        throw RuntimeError(std::string("bad operand type for unary ") +
                           (e.kind == Expr::Kind::negate ? "-" : "+") + ": '" + type_name(v) + "'");
      }
      if (e.kind == Expr::Kind::plus) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == std::numeric_limits<int64_t>::min()) throw RuntimeError("integer overflow");
      return Value(-v.as_int());
    }
    case Expr::Kind::binary: return binary_op(e.name, eval(*e.a, scope), eval(*e.b, scope));
    case Expr::Kind::logic_and: {
      Value l = eval(*e.a, scope);
      return l.truthy() ? eval(*e.b, scope) : l;
    }
    case Expr::Kind::logic_or: {
      Value l = eval(*e.a, scope);
      return l.truthy() ? l : eval(*e.b, scope);
    }
    case Expr::Kind::logic_not: return Value(!eval(*e.a, scope).truthy());
    case Expr::Kind::compare: return eval_compare(e, scope);
    case Expr::Kind::cond:
      if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

}  // namespace kiln::jinja
