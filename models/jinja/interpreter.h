// Renders a parsed chat template: walks its statements with jinja2's
// scoping (a for body and a macro get their own scope that reads through to
// the enclosing ones; if does not), its loop object, macros, call blocks and
// break/continue, and bounds the work a template may do (output size,
// steps, call depth) so that a hostile or broken template fails with an
// error instead of hanging or exhausting memory.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/jinja/ast.h"
#include "models/jinja/value.h"

namespace kiln::jinja {

struct RenderLimits {
  size_t max_output = 64u << 20;    // bytes
  uint64_t max_steps = 50'000'000;  // expressions and statements evaluated
  int max_call_depth = 200;         // nested macro calls
};

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  Value* find_local(const std::string& name);
};

class Interpreter {
 public:
  // `now`: the clock strftime_now() reads.
  Interpreter(const Program& program, std::tm now, RenderLimits limits = {});

  // Renders with `context` (a dict) as the template's variables.
  std::string render(const Value& context);

  // Calls a callable value (macro, global, bound method).
  Value call(const Value& fn, CallArgs& args);
  const std::tm& now() const { return now_; }
  void step();  // counts one unit of work against max_steps
  // A namespace() made during the render: emptied when the render ends, so
  // that one holding itself (ns.x = ns) does not outlive it.
  void track(const Value& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { normal, break_, continue_ };

  const Program& program_;
  std::tm now_;
  RenderLimits limits_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::string* out_ = nullptr;
  std::vector<Value> namespaces_;

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void assign(const Expr& target, const Value& v, Scope& scope, bool allow_attr);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  // A set or filter block's body rendered in a scope of its own, through
  // the block's filters.
  Value filtered_body(const Stmt& s, const std::shared_ptr<Scope>& scope);
  Value make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope, const Value& caller);
  void write(const std::string& s);

  Value eval(const Expr& e, Scope& scope);
  Value lookup(const std::string& name, Scope& scope);
  Value eval_call(const Expr& e, Scope& scope);
  void eval_args(const Expr& e, Scope& scope, CallArgs& args);
  Value eval_compare(const Expr& e, Scope& scope);
};

// Python's binary operators (+ - * / // % ** ~) on values.
Value binary_op(const std::string& op, const Value& a, const Value& b);
// Python's `a in b`.
bool contains(const Value& container, const Value& item);

}  // namespace kiln::jinja
