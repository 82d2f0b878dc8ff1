#include "models/jinja/parser.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "ir/error.h"
#include "models/jinja/builtins.h"
#include "models/jinja/lexer.h"

namespace kiln::jinja {

namespace {

// Deeper nesting than this is refused instead of overflowing the stack.
constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  std::unique_ptr<Program> run() {
    auto prog = std::make_unique<Program>();
    prog->body = subparse({});
    return prog;
  }

 private:
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
  bool saw_caller_ = false;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("the template nests too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(at_line(cur().line, what)); }

  bool is_op(const char* op) const { return cur().type == Tok::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::data: return "text";
      case Tok::var_begin: return "'{{'";
      case Tok::var_end: return "end of print statement '}}'";
      case Tok::block_begin: return "'{%'";
      case Tok::block_end: return "end of statement block '%}'";
      case Tok::name: return "'" + t.text + "'";
      case Tok::string: return "string";
      case Tok::integer: return "integer";
      case Tok::floating: return "float";
      case Tok::op: return "'" + t.text + "'";
      case Tok::eof: return "end of template";
    }
    return "token";
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::name) fail("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::block_end)
      fail("expected end of statement block '%}', got " + describe(cur()));
    next();
  }

  // Statements until a block tag whose name is in `ends` (left current).
  Body subparse(std::initializer_list<const char*> ends) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::eof) {
        if (ends.size() == 0) return body;
        std::string names;
        for (const char* e : ends)
          names += std::string(names.empty() ? "" : " or ") + "'" + e + "'";
        fail("unexpected end of template: expected " + names);
      }
      if (t.type == Tok::data) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::output, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::var_begin) {
        next();
        auto s = std::make_unique<Stmt>(Stmt::Kind::print, cur().line);
        s->expr = parse_tuple(true, false);
        if (cur().type != Tok::var_end)
          fail("expected end of print statement '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::block_begin) {
        next();
        if (cur().type == Tok::name)
          for (const char* e : ends)
            if (cur().text == e) return body;
        body.push_back(statement());
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // After an end tag's name: `{% endfor %}` and the like.
  void end_tag(const char* name) {
    if (!skip_name(name)) fail(std::string("expected '") + name + "', got " + describe(cur()));
    expect_block_end();
  }

  StmtPtr statement() {
    DepthGuard guard(*this);
    if (cur().type != Tok::name) fail("tag name expected, got " + describe(cur()));
    const std::string tag = cur().text;
    const int line = cur().line;
    if (tag == "if") return parse_if();
    if (tag == "for") return parse_for();
    if (tag == "set") return parse_set();
    if (tag == "macro") return parse_macro();
    if (tag == "call") return parse_call_block();
    if (tag == "filter") return parse_filter_block();
    if (tag == "with") return parse_with();
    if (tag == "generation") {
      next();
      expect_block_end();
      auto s = std::make_unique<Stmt>(Stmt::Kind::scope, line);
      s->body = subparse({"endgeneration"});
      end_tag("endgeneration");
      return s;
    }
    if (tag == "break" || tag == "continue") {
      next();
      expect_block_end();
      return std::make_unique<Stmt>(tag == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_,
                                    line);
    }
    static const char* const unsupported[] = {"extends",    "include", "import",    "from", "block",
                                              "autoescape", "trans",   "pluralize", "do"};
    for (const char* u : unsupported)
      if (tag == u) fail("the '" + tag + "' tag is not supported in chat templates");
    fail("unknown tag '" + tag + "'");
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::if_, cur().line);
    next();
    for (;;) {
      ExprPtr cond = parse_tuple(false, false);
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        expect_block_end();
        s->else_body = subparse({"endif"});
      }
      end_tag("endif");
      return s;
    }
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::for_, cur().line);
    next();
    s->target = parse_assign_target(false);
    if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail("recursive for loops are not supported");
    expect_block_end();
    s->body = subparse({"endfor", "else"});
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = subparse({"endfor"});
    }
    end_tag("endfor");
    return s;
  }

  StmtPtr parse_set() {
    const int line = cur().line;
    next();
    ExprPtr target = parse_assign_target(true);
    if (skip_op("=")) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::set, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, false);
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<Stmt>(Stmt::Kind::set_block, line);
    s->target = std::move(target);
    while (is_op("|")) s->filters.push_back(parse_filter(nullptr, true));
    expect_block_end();
    s->body = subparse({"endset"});
    end_tag("endset");
    return s;
  }

  // Names, or a namespace attribute (ns.x), optionally as a tuple.
  ExprPtr parse_assign_target(bool allow_attr) {
    const int line = cur().line;
    std::vector<ExprPtr> targets;
    bool tuple = false;
    for (;;) {
      if (is_op("(")) {
        next();
        ExprPtr t = parse_assign_target(false);
        expect_op(")");
        targets.push_back(std::move(t));
      } else {
        auto n = std::make_unique<Expr>(Expr::Kind::name, cur().line);
        n->name = expect_name();
        if (allow_attr && is_op(".")) {
          next();
          auto a = std::make_unique<Expr>(Expr::Kind::getattr, n->line);
          a->name = expect_name();
          a->a = std::move(n);
          targets.push_back(std::move(a));
        } else {
          if (n->name == "true" || n->name == "false" || n->name == "none" || n->name == "True" ||
              n->name == "False" || n->name == "None")
            fail("cannot assign to '" + n->name + "'");
          targets.push_back(std::move(n));
        }
      }
      if (!is_op(",")) break;
      next();
      tuple = true;
      if (cur().type != Tok::name && !is_op("(")) break;
    }
    if (!tuple) return std::move(targets[0]);
    auto t = std::make_unique<Expr>(Expr::Kind::tuple, line);
    t->items = std::move(targets);
    return t;
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      if (std::find(s.params.begin(), s.params.end(), name) != s.params.end())
        fail("duplicate argument '" + name + "'");
      s.params.push_back(name);
      if (skip_op("="))
        s.defaults.push_back(parse_expression(true));
      else if (!s.defaults.empty() && s.defaults.back())
        fail("non-default argument '" + name + "' follows a default argument");
      else
        s.defaults.push_back(nullptr);
    }
    next();
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::macro, cur().line);
    next();
    s->text = expect_name();
    parse_signature(*s);
    expect_block_end();
    const bool saved = saw_caller_;
    saw_caller_ = false;
    ++macro_depth_;
    s->body = subparse({"endmacro"});
    --macro_depth_;
    s->uses_caller = saw_caller_;
    saw_caller_ = saved;
    end_tag("endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::call_block, cur().line);
    next();
    if (is_op("(")) parse_signature(*s);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::call) fail("expected a call after 'call'");
    expect_block_end();
    s->body = subparse({"endcall"});
    end_tag("endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::filter_block, cur().line);
    next();
    s->filters.push_back(parse_filter(nullptr, false));
    while (is_op("|")) s->filters.push_back(parse_filter(nullptr, true));
    expect_block_end();
    s->body = subparse({"endfilter"});
    end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::with, cur().line);
    next();
    while (cur().type != Tok::block_end) {
      if (!s->assigns.empty()) expect_op(",");
      ExprPtr target = parse_assign_target(false);
      expect_op("=");
      s->assigns.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end();
    s->body = subparse({"endwith"});
    end_tag("endwith");
    return s;
  }

  // ---- expressions, as jinja2's parser.py ----

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    const int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      auto c = std::make_unique<Expr>(Expr::Kind::cond, line);
      c->a = parse_or();
      c->b = std::move(expr1);
      if (skip_name("else")) c->c = parse_condexpr();
      expr1 = std::move(c);
    }
    return expr1;
  }

  ExprPtr binary(Expr::Kind k, int line, ExprPtr a, ExprPtr b, std::string op = "") {
    auto e = std::make_unique<Expr>(k, line);
    e->a = std::move(a);
    e->b = std::move(b);
    e->name = std::move(op);
    return e;
  }

  ExprPtr parse_or() {
    const int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(Expr::Kind::logic_or, line, std::move(left), parse_and());
    return left;
  }

  ExprPtr parse_and() {
    const int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and"))
      left = binary(Expr::Kind::logic_and, line, std::move(left), parse_not());
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = std::make_unique<Expr>(Expr::Kind::logic_not, cur().line);
      next();
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr expr = parse_math1();
    std::unique_ptr<Expr> cmp;
    for (;;) {
      std::string op;
      if (cur().type == Tok::op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (is_name("not") && peek().type == Tok::name && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = std::make_unique<Expr>(Expr::Kind::compare, line);
        cmp->a = std::move(expr);
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(expr);
  }

  ExprPtr parse_math1() {
    const int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = next().text;
      left = binary(Expr::Kind::binary, line, std::move(left), parse_concat(), op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr left = parse_math2();
    while (skip_op("~"))
      left = binary(Expr::Kind::binary, line, std::move(left), parse_math2(), "~");
    return left;
  }

  ExprPtr parse_math2() {
    const int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().text;
      left = binary(Expr::Kind::binary, line, std::move(left), parse_pow(), op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    const int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) {
      ExprPtr right = parse_unary(true);
      // jinja2 writes a negative constant base into Python source as
      // `(-2 ** x)`, which Python reads as -(2 ** x): same here.
      const bool negative_base = left->kind == Expr::Kind::constant &&
                                 (left->value.is_int() || left->value.is_float()) &&
                                 left->value.as_number() < 0 && right->kind != Expr::Kind::constant;
      left = binary(Expr::Kind::binary, line, std::move(left), std::move(right),
                    negative_base ? "**-" : "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const bool neg = next().text == "-";
      node = std::make_unique<Expr>(neg ? Expr::Kind::negate : Expr::Kind::plus, line);
      node->a = parse_unary(false);
      // jinja2 folds -<number> into a constant (which matters for **, below).
      const Value& c = node->a->value;
      if (neg && node->a->kind == Expr::Kind::constant && (c.is_int() || c.is_float()) &&
          !(c.is_int() && c.as_int() == INT64_MIN)) {
        Value folded = c.is_int() ? Value(-c.as_int()) : Value(-c.as_float());
        node = std::make_unique<Expr>(Expr::Kind::constant, line);
        node->value = folded;
      }
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Tok::name) {
      const std::string& n = t.text;
      auto c = std::make_unique<Expr>(Expr::Kind::constant, line);
      if (n == "true" || n == "True") {
        c->value = Value(true);
      } else if (n == "false" || n == "False") {
        c->value = Value(false);
      } else if (n == "none" || n == "None") {
        c->value = Value::none();
      } else {
        auto e = std::make_unique<Expr>(Expr::Kind::name, line);
        e->name = n;
        if (n == "caller") saw_caller_ = true;
        next();
        return e;
      }
      next();
      return c;
    }
    if (t.type == Tok::string) {
      std::string s = next().text;
      while (cur().type == Tok::string) s += next().text;  // adjacent literals concatenate
      auto c = std::make_unique<Expr>(Expr::Kind::constant, line);
      c->value = Value(std::move(s));
      return c;
    }
    if (t.type == Tok::integer || t.type == Tok::floating) {
      auto c = std::make_unique<Expr>(Expr::Kind::constant, line);
      c->value = t.type == Tok::integer ? Value(t.ival) : Value(t.fval);
      next();
      return c;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = std::make_unique<Expr>(Expr::Kind::list, line);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = std::make_unique<Expr>(Expr::Kind::dict, line);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->items.push_back(parse_expression(true));
        expect_op(":");
        e->items.push_back(parse_expression(true));
      }
      next();
      return e;
    }
    fail("unexpected " + describe(t));
  }

  // A comma-separated expression list: a tuple when there is a comma (or
  // `()` with explicit parentheses), else the single expression.
  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens,
                      std::initializer_list<const char*> extra_end = {}) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool comma = false;
    auto at_end = [&]() {
      if (cur().type == Tok::var_end || cur().type == Tok::block_end || cur().type == Tok::eof)
        return true;
      if (is_op(")")) return true;
      if (cur().type == Tok::name)
        for (const char* e : extra_end)
          if (cur().text == e) return true;
      return false;
    };
    for (;;) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        comma = true;
      }
      if (at_end()) break;
      items.push_back(parse_expression(with_condexpr));
    }
    if (!comma) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("expected an expression, got " + describe(cur()));
    }
    auto t = std::make_unique<Expr>(Expr::Kind::tuple, line);
    t->items = std::move(items);
    return t;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), true);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Tok::name) {
        auto e = std::make_unique<Expr>(Expr::Kind::getattr, line);
        e->name = next().text;
        e->a = std::move(node);
        return e;
      }
      if (cur().type != Tok::integer) fail("expected name or number after '.'");
      auto e = std::make_unique<Expr>(Expr::Kind::getitem, line);
      e->a = std::move(node);
      e->b = std::make_unique<Expr>(Expr::Kind::constant, line);
      e->b->value = Value(next().ival);
      return e;
    }
    next();  // [
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      args.push_back(parse_subscribed());
    }
    next();
    auto e = std::make_unique<Expr>(Expr::Kind::getitem, line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      if (args.empty()) fail("expected an index inside '[]'");
      e->b = std::make_unique<Expr>(Expr::Kind::tuple, line);
      e->b->items = std::move(args);
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    const int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();  // :
    auto s = std::make_unique<Expr>(Expr::Kind::slice, line);
    s->a = std::move(start);
    if (!is_op("]") && !is_op(",") && !is_op(":")) s->b = parse_expression(true);
    if (skip_op(":"))
      if (!is_op("]") && !is_op(",")) s->c = parse_expression(true);
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().type == Tok::name && peek().type == Tok::op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("a positional argument follows a keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = std::make_unique<Expr>(Expr::Kind::call, cur().line);
    e->a = std::move(node);
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().type == Tok::name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    const int line = cur().line;
    if (start_inline) expect_op("|");
    auto e = std::make_unique<Expr>(Expr::Kind::filter, line);
    e->name = dotted_name();
    e->filter = find_filter(e->name);
    if (!e->filter) throw Error(at_line(line, "unknown filter '" + e->name + "'"));
    e->a = std::move(node);
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = cur().line;
    next();  // is
    auto e = std::make_unique<Expr>(Expr::Kind::test, line);
    e->negated = skip_name("not");
    e->name = dotted_name();
    e->test = find_test(e->name);
    if (!e->test) throw Error(at_line(line, "unknown test '" + e->name + "'"));
    e->a = std::move(node);
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().type == Tok::name || cur().type == Tok::string ||
                cur().type == Tok::integer || cur().type == Tok::floating || is_op("(") ||
                is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("you cannot chain multiple tests with 'is'");
      e->items.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }
};

}  // namespace

std::unique_ptr<Program> parse(std::string_view source) { return Parser(lex(source)).run(); }

}  // namespace kiln::jinja
