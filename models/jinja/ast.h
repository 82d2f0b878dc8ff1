// The parsed form of a chat template: statements (text, {{ }}, if, for,
// set, macro, ...) holding expressions. A template is parsed once and
// rendered for every request, so everything a render can decide up front
// (constants, which filter or test a name means) is decided here.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/jinja/value.h"

namespace kiln::jinja {

class Interpreter;
using FilterFn = Value (*)(Interpreter&, const Value& subject, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& subject, CallArgs& args);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind : uint8_t {
    constant,   // value
    name,       // name
    list,       // items
    tuple,      // items
    dict,       // items: key, value, key, value, ...
    getattr,    // a.name
    getitem,    // a[b]
    slice,      // a, b, c: start, stop, step (any may be null)
    call,       // a(items, kwargs)
    filter,     // a | name(items, kwargs); a is null in a filter block
    test,       // a is [not] name(items, kwargs)
    negate,     // -a
    plus,       // +a
    binary,     // a name b: + - * / // % ** ~
    logic_and,  // a and b
    logic_or,   // a or b
    logic_not,  // not a
    compare,    // a ops[0] items[0] ops[1] items[1] ...
    cond,       // b if a else c (c may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  FilterFn filter = nullptr;
  TestFn test = nullptr;

  Expr(Kind k, int l) : kind(k), line(l) {}
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind : uint8_t {
    output,        // text
    print,         // {{ expr }}
    if_,           // branches, else_body
    for_,          // for target in expr [if cond]: body, else_body
    set,           // set target = expr
    set_block,     // set target [| filters]: body
    macro,         // name(params=defaults): body
    call_block,    // call[(params)] expr: body
    filter_block,  // filter filters: body
    with,          // with assigns: body
    break_,
    continue_,
    scope,  // body rendered in place (generation)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr, target, cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned with params; null: no default
  std::vector<ExprPtr> filters;   // filter expressions whose operand is null
  std::vector<std::pair<ExprPtr, ExprPtr>> assigns;
  bool uses_caller = false;  // a macro whose body refers to caller

  Stmt(Kind k, int l) : kind(k), line(l) {}
};

struct Program {
  Body body;
};

}  // namespace kiln::jinja
