// A recursive-descent reader for the text form written by ir/printer.cpp
// (the grammar is at the top of that file).
//
// The input may be anything (the fuzzer feeds it bytes), so every lookup is
// checked, nesting and shapes are bounded, and every failure is a
// kiln::Error that says where and what. Beyond syntax the parser resolves
// names (a value used outside the block defining it is undefined there) and
// the grammar fixes each op's operand count; types are left to verify(),
// which runs on the result.
#include "ir/parser.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/verifier.h"

namespace kiln {

namespace {

constexpr int kMaxDepth = 256;
constexpr int kMaxRank = 8;
constexpr int64_t kMaxElements = int64_t{1} << 24;

enum class Tok { Ident, Value, Var, Number, String, Punct, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // as written (with the % or $ sigil); decoded for strings
  int line = 1;
  int col = 1;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Quotes untrusted text for an error message: printable, and short enough
// that a megabyte of garbage does not end up in the message.
std::string quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string r = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u >= 0x7f || u == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      r += buf;
    } else {
      r += s[i];
    }
  }
  if (s.size() > kMax) r += "...";
  return r + "'";
}

[[noreturn]] void fail_at(int line, int col, const std::string& msg) {
  throw Error("line " + std::to_string(line) + ", col " + std::to_string(col) + ": " + msg);
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  // The next token; End (repeatedly) at the end of the input. Lexing on
  // demand lets a syntax error earlier in the text win over a bad character
  // later on.
  Token next() {
    skip_space();
    Token t;
    t.line = line_;
    t.col = col_;
    if (i_ >= s_.size()) return t;
    char c = s_[i_];
    if (is_ident_start(c)) {
      t.kind = Tok::Ident;
      t.text = take_while(is_ident_char);
    } else if (c == '%' || c == '$') {
      t.kind = c == '%' ? Tok::Value : Tok::Var;
      advance();
      std::string name = take_while(is_ident_char);
      if (name.empty())
        fail_at(t.line, t.col,
                std::string("expected a name after '") + c + "', found " + found_here());
      t.text = c + name;
    } else if (is_digit(c) || c == '-' ||
               (c == '.' && i_ + 1 < s_.size() && is_digit(s_[i_ + 1]))) {
      t.kind = Tok::Number;
      t.text = number();
    } else if (c == '"') {
      t.kind = Tok::String;
      t.text = string(t);
    } else if (c != '\0' && std::strchr("(){}[]<>,:=", c)) {
      t.kind = Tok::Punct;
      t.text = std::string(1, c);
      advance();
    } else {
      fail_at(t.line, t.col, "unexpected character " + quote(std::string_view(&s_[i_], 1)));
    }
    return t;
  }

 private:
  void advance() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }

  void skip_space() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else {
        return;
      }
    }
  }

  std::string take_while(bool (*pred)(char)) {
    size_t start = i_;
    while (i_ < s_.size() && pred(s_[i_])) advance();
    return std::string(s_.substr(start, i_ - start));
  }

  std::string found_here() const {
    if (i_ >= s_.size()) return "end of input";
    return quote(s_.substr(i_, 1));
  }

  // A permissive run ("-inf", "1e-06", "0x7ff8..."); Parser validates it.
  std::string number() {
    size_t start = i_;
    if (s_[i_] == '-') advance();
    while (i_ < s_.size()) {
      char c = s_[i_];
      char prev = i_ > start ? s_[i_ - 1] : '\0';
      bool exp_sign = (c == '+' || c == '-') && (prev == 'e' || prev == 'E');
      if (!is_ident_char(c) && c != '.' && !exp_sign) break;
      advance();
    }
    return std::string(s_.substr(start, i_ - start));
  }

  std::string string(const Token& t) {
    advance();  // opening quote
    std::string r;
    for (;;) {
      if (i_ >= s_.size() || s_[i_] == '\n') fail_at(t.line, t.col, "unterminated string");
      char c = s_[i_];
      if (c == '"') {
        advance();
        return r;
      }
      if (c != '\\') {
        r += c;
        advance();
        continue;
      }
      advance();
      if (i_ >= s_.size()) fail_at(t.line, t.col, "unterminated string");
      char e = s_[i_];
      if (e == '"' || e == '\\') {
        r += e;
        advance();
      } else if (e == 'x' && i_ + 2 < s_.size() && hex_digit(s_[i_ + 1]) >= 0 &&
                 hex_digit(s_[i_ + 2]) >= 0) {
        r += static_cast<char>(hex_digit(s_[i_ + 1]) * 16 + hex_digit(s_[i_ + 2]));
        advance();
        advance();
        advance();
      } else {
        fail_at(line_, col_, "expected an escape (\\\", \\\\ or \\xNN), found " + found_here());
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
  int col_ = 1;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : lex_(text) { cur_ = lex_.next(); }

  Kernel run() {
    expect_keyword("kernel");
    k_.name = name("a kernel name");
    expect("(");
    if (!accept(")")) {
      do param();
      while (accept(","));
      expect(")");
    }
    if (accept_keyword("constexprs")) {
      expect("(");
      if (!accept(")")) {
        do {
          Token at = peek();
          std::string n = name("a constexpr name");
          for (const auto& [seen, v] : k_.constexprs)
            if (seen == n) fail(at, "constexpr " + quote(n) + " given twice");
          expect("=");
          k_.constexprs.emplace_back(n, integer("a constexpr value"));
        } while (accept(","));
        expect(")");
      }
    }
    if (accept_keyword("scratch")) {
      expect("(");
      do scratch();
      while (accept(","));
      expect(")");
    }
    block(&k_.body);
    if (peek().kind != Tok::End) fail(peek(), "expected end of input, found " + describe(peek()));
    verify(k_);
    return std::move(k_);
  }

 private:
  // ---- tokens ----------------------------------------------------------------
  const Token& peek() const { return cur_; }
  Token next() {
    Token t = std::move(cur_);
    cur_ = t.kind == Tok::End ? t : lex_.next();
    return t;
  }
  static std::string describe(const Token& t) {
    if (t.kind == Tok::End) return "end of input";
    if (t.kind == Tok::String) return "string " + quote(t.text);
    return quote(t.text);
  }
  [[noreturn]] static void fail(const Token& t, const std::string& msg) {
    fail_at(t.line, t.col, msg);
  }
  [[noreturn]] static void expected(const std::string& what, const Token& t) {
    fail(t, "expected " + what + ", found " + describe(t));
  }
  bool is_punct(const Token& t, std::string_view p) const {
    return t.kind == Tok::Punct && t.text == p;
  }
  bool accept(std::string_view p) {
    if (!is_punct(peek(), p)) return false;
    next();
    return true;
  }
  void expect(std::string_view p) {
    if (!accept(p)) expected("'" + std::string(p) + "'", peek());
  }
  bool accept_keyword(std::string_view kw) {
    if (peek().kind != Tok::Ident || peek().text != kw) return false;
    next();
    return true;
  }
  void expect_keyword(std::string_view kw) {
    if (!accept_keyword(kw)) expected("'" + std::string(kw) + "'", peek());
  }

  // ---- leaves ----------------------------------------------------------------
  std::string name(const std::string& what) {
    Token t = peek();
    if (t.kind != Tok::Ident && t.kind != Tok::String) expected(what, t);
    return next().text;
  }

  // Strict: an optional '-' and decimal digits, within int64.
  static bool to_int64(std::string_view s, int64_t* out) {
    bool neg = !s.empty() && s[0] == '-';
    if (neg) s.remove_prefix(1);
    if (s.empty()) return false;
    uint64_t limit = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    uint64_t v = 0;
    for (char c : s) {
      if (!is_digit(c)) return false;
      uint64_t d = static_cast<uint64_t>(c - '0');
      if (v > (limit - d) / 10) return false;
      v = v * 10 + d;
    }
    *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
    return true;
  }

  int64_t integer(const std::string& what) {
    Token t = peek();
    int64_t v;
    if (t.kind != Tok::Number) expected(what + " (an integer)", t);
    if (!to_int64(t.text, &v)) {
      bool digits = t.text.find_first_not_of("-0123456789") == std::string::npos;
      if (digits && t.text.size() > 1) fail(t, "integer " + quote(t.text) + " out of range");
      expected(what + " (an integer)", t);
    }
    next();
    return v;
  }

  DType dtype() {
    Token t = peek();
    if (t.kind != Tok::Ident) expected("a dtype", t);
    DType d;
    if (!try_parse_dtype(t.text, &d)) {
      std::string all;
      for (int i = 0; i < kNumDTypes; ++i)
        all += (i ? ", " : "") + std::string(dtype_name(static_cast<DType>(i)));
      fail(t, "unknown dtype " + quote(t.text) + " (expected one of " + all + ")");
    }
    next();
    return d;
  }

  Type type() {
    Type r;
    r.dtype = dtype();
    if (!accept("[")) return r;
    int64_t numel = 1;
    if (!is_punct(peek(), "]")) {
      do {
        Token at = peek();
        int64_t d = integer("a dimension");
        if (d < 1) fail(at, "dimension " + std::to_string(d) + " must be positive");
        if (r.shape.size() == kMaxRank)
          fail(at, "shape has more than " + std::to_string(kMaxRank) + " dimensions");
        if (d > kMaxElements / numel)
          fail(at, "shape has more than " + std::to_string(kMaxElements) + " elements");
        numel *= d;
        r.shape.push_back(d);
      } while (accept(","));
    }
    expect("]");
    return r;
  }

  // A name not yet given to a parameter or scratch array, and the colon
  // after it; `kind` names the thing in the error.
  std::string new_name(const std::string& what, const std::string& kind) {
    Token at = peek();
    std::string n = name(what);
    if (param_index_.count(n)) fail(at, kind + " " + quote(n) + " declared twice");
    expect(":");
    return n;
  }

  void param() {
    Param p;
    p.name = new_name("a parameter name", "parameter");
    if (accept_keyword("buf")) {
      p.kind = ParamKind::Buffer;
      expect("<");
      p.dtype = dtype();
      expect(">");
    } else {
      p.kind = ParamKind::Scalar;
      p.dtype = dtype();
    }
    param_index_[p.name] = static_cast<int>(k_.params.size());
    k_.params.push_back(std::move(p));
  }

  // `name: dtype[elems]`
  void scratch() {
    Scratch sc;
    sc.name = new_name("a scratch array name", "name");
    sc.dtype = dtype();
    expect("[");
    Token n = peek();
    sc.elems = integer("an element count");
    if (sc.elems < 1 || sc.elems > kMaxScratchElems)
      fail(n, "a scratch array holds 1.." + std::to_string(kMaxScratchElems) + " elements");
    expect("]");
    param_index_[sc.name] = scratch_ref(static_cast<int>(k_.scratch.size()));
    k_.scratch.push_back(std::move(sc));
  }

  int64_t param_ref(const std::string& what) {
    Token at = peek();
    std::string n = name(what);
    auto it = param_index_.find(n);
    if (it == param_index_.end()) fail(at, "undefined parameter " + quote(n));
    return it->second;
  }

  int value_ref() {
    Token t = peek();
    if (t.kind != Tok::Value) expected("a value (%name)", t);
    auto it = visible_.find(t.text);
    if (it == visible_.end()) {
      fail(t, defined_.count(t.text) ? "value " + t.text + " is used outside the block defining it"
                                     : "undefined value " + t.text);
    }
    next();
    return it->second;
  }

  int define_value(const Token& t, const Type& ty) {
    if (!defined_.insert(t.text).second) fail(t, "value " + t.text + " defined twice");
    int id = k_.add_value(ty);
    visible_[t.text] = id;
    scopes_.back().push_back(t.text);
    return id;
  }

  int64_t var_ref() {
    Token t = peek();
    if (t.kind != Tok::Var) expected("a variable ($name)", t);
    auto it = vars_.find(t.text);
    if (it == vars_.end()) fail(t, "undefined variable " + t.text);
    next();
    return it->second;
  }

  // `name[%offsets]`: the address of load, store and the atomics.
  void address(Op* op) {
    op->ival = param_ref("a buffer name");
    expect("[");
    op->args.push_back(value_ref());
    expect("]");
  }

  void args(Op* op, int n) {
    for (int i = 0; i < n; ++i) {
      if (i) expect(",");
      op->args.push_back(value_ref());
    }
  }

  // The constant's literal is read before its type; it is interpreted here,
  // once the dtype says whether it is a float or an integer.
  static void set_constant(Op* op, const Token& lit, const Token* payload, DType t) {
    const std::string& s = lit.text;
    if (!is_float(t)) {
      if (payload || !to_int64(s, &op->ival))
        fail(lit, "expected an integer constant for " + std::string(dtype_name(t)) + ", found " +
                      describe(lit));
      return;
    }
    if (payload) {
      uint64_t bits = 0;
      std::string_view h = payload->text;
      bool ok = h.size() > 2 && h.size() <= 18 && h[0] == '0' && h[1] == 'x';
      for (size_t i = 2; ok && i < h.size(); ++i) {
        int d = hex_digit(h[i]);
        ok = d >= 0;
        bits = bits << 4 | static_cast<uint64_t>(d < 0 ? 0 : d);
      }
      if (!ok) expected("a 64-bit hex NaN pattern (0x...)", *payload);
      bool is_nan = (bits >> 52 & 0x7ff) == 0x7ff && (bits & ((uint64_t{1} << 52) - 1)) != 0;
      if (!is_nan) fail(*payload, quote(h) + " is not a NaN bit pattern");
      std::memcpy(&op->fval, &bits, sizeof bits);
      return;
    }
    if (s == "inf" || s == "-inf") {
      op->fval = s[0] == '-' ? -std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::infinity();
      return;
    }
    if (s == "nan" || s == "-nan") {
      uint64_t bits = s[0] == '-' ? 0xfff8000000000000ull : 0x7ff8000000000000ull;
      std::memcpy(&op->fval, &bits, sizeof bits);
      return;
    }
    // [-] digits [. digits] [e [+-] digits], at least one mantissa digit;
    // checked here because from_chars also takes forms the printer never
    // writes ("infinity", hex).
    size_t i = s.size() && s[0] == '-' ? 1 : 0, mant = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++mant;
    if (i < s.size() && s[i] == '.')
      for (++i; i < s.size() && is_digit(s[i]);) ++i, ++mant;
    bool ok = mant > 0;
    if (ok && i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      size_t exp = 0;
      while (i < s.size() && is_digit(s[i])) ++i, ++exp;
      ok = exp > 0;
    }
    if (!ok || i != s.size()) expected("a float constant", lit);
    // Float constants are f32 values (see the verifier): read them as f32.
    float f = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), f);
    if (res.ec == std::errc::result_out_of_range)
      fail(lit, "float constant " + quote(s) + " is out of the f32 range");
    if (res.ec != std::errc() || res.ptr != s.data() + s.size()) expected("a float constant", lit);
    op->fval = f;
  }

  // ---- ops and blocks ----------------------------------------------------------
  void block(Block* b) {
    Token open = peek();
    expect("{");
    if (++depth_ > kMaxDepth) fail(open, "blocks nested deeper than " + std::to_string(kMaxDepth));
    scopes_.emplace_back();
    while (!is_punct(peek(), "}")) {
      if (peek().kind == Tok::End) expected("'}'", peek());
      op(b);
    }
    next();
    end_scope();
    --depth_;
  }

  void end_scope() {
    for (const std::string& n : scopes_.back()) visible_.erase(n);
    scopes_.pop_back();
  }

  static bool defines_value(OpKind k) {
    return k != OpKind::Store && k != OpKind::Prefetch && k != OpKind::For && k != OpKind::If &&
           k != OpKind::VarDecl && k != OpKind::VarStore;
  }

  OpKind op_kind() {
    Token t = peek();
    if (t.kind != Tok::Ident) expected("an op name", t);
    OpKind k;
    if (!try_parse_op_name(t.text, &k)) fail(t, "unknown op " + quote(t.text));
    next();
    return k;
  }

  void op(Block* b) {
    Token first = peek();
    if (first.kind == Tok::Value) {
      Token result = next();
      expect("=");
      Token name_tok = peek();
      OpKind k = op_kind();
      if (!defines_value(k)) fail(name_tok, "op " + quote(name_tok.text) + " has no result");
      b->ops.push_back(valued_op(k, result));
      return;
    }
    if (first.kind != Tok::Ident) expected("an op", first);
    OpKind k = op_kind();
    if (defines_value(k))
      fail(first, "op " + quote(first.text) + " needs a result ('%name = " + first.text + " ...')");
    Op op;
    op.kind = k;
    switch (k) {
      case OpKind::Store:
        address(&op);
        expect(",");
        op.args.push_back(value_ref());
        if (accept_keyword("mask")) op.args.push_back(value_ref());
        break;
      case OpKind::Prefetch: address(&op); break;
      case OpKind::VarDecl: {
        Token v = peek();
        if (v.kind != Tok::Var) expected("a variable ($name)", v);
        if (vars_.count(v.text)) fail(v, "variable " + v.text + " declared twice");
        next();
        expect("=");
        op.args.push_back(value_ref());
        expect(":");
        op.ival = static_cast<int64_t>(k_.vars.size());
        k_.vars.push_back(type());
        vars_[v.text] = op.ival;
        break;
      }
      case OpKind::VarStore:
        op.ival = var_ref();
        expect(",");
        op.args.push_back(value_ref());
        break;
      case OpKind::For: {
        Token iv = peek();
        if (iv.kind != Tok::Value) expected("an induction variable (%name)", iv);
        next();
        expect("=");
        op.args.push_back(value_ref());
        expect_keyword("to");
        op.args.push_back(value_ref());
        expect_keyword("step");
        op.args.push_back(value_ref());
        expect(":");
        Type t = type();
        // The induction variable belongs to the body's scope, which block()
        // opens; define it in a scope of its own just outside so it is
        // dropped with the body.
        scopes_.emplace_back();
        op.result = define_value(iv, t);
        op.regions.emplace_back();
        block(&op.regions[0]);
        end_scope();
        break;
      }
      case OpKind::If:
        op.args.push_back(value_ref());
        op.regions.resize(2);
        block(&op.regions[0]);
        if (accept_keyword("else")) block(&op.regions[1]);
        break;
      default: break;  // unreachable: defines_value() covers the rest
    }
    b->ops.push_back(std::move(op));
  }

  Op valued_op(OpKind k, const Token& result) {
    Op op;
    op.kind = k;
    std::optional<Token> lit, payload;
    if (k == OpKind::Const) {
      Token t = peek();
      if (t.kind != Tok::Number && t.kind != Tok::Ident) expected("a constant", t);
      lit = next();
      if (lit->text == "nan" && accept("(")) {
        if (peek().kind != Tok::Number) expected("a NaN bit pattern (0x...)", peek());
        payload = next();
        expect(")");
      }
    } else if (k == OpKind::Arange) {
      // no operands
    } else if (k == OpKind::ProgramId || k == OpKind::NumPrograms) {
      op.ival = integer("an axis");
    } else if (k == OpKind::Param) {
      op.ival = param_ref("a parameter name");
    } else if (k == OpKind::Slice) {
      op.args.push_back(value_ref());
      expect("[");
      if (!is_punct(peek(), "]")) {
        do {
          if (op.ints.size() == kMaxRank) fail(peek(), "slice has too many starts");
          Token at = peek();
          int64_t start = integer("a slice start");
          // Bounded so that start + size cannot overflow in later checks.
          if (start < 0 || start > kMaxElements)
            fail(at, "slice start " + std::to_string(start) + " out of range");
          op.ints.push_back(start);
        } while (accept(","));
      }
      expect("]");
    } else if (k == OpKind::Lookup) {
      op.args.push_back(value_ref());
      expect("[");
      if (!is_punct(peek(), "]")) {
        do {
          if (op.ints.size() == kMaxLookupEntries)
            fail(peek(),
                 "lookup table has more than " + std::to_string(kMaxLookupEntries) + " entries");
          op.ints.push_back(integer("a table entry"));
        } while (accept(","));
      }
      expect("]");
    } else if (k == OpKind::Load) {
      address(&op);
      if (accept_keyword("mask")) {
        op.args.push_back(value_ref());
        expect_keyword("other");
        op.args.push_back(value_ref());
      }
    } else if (is_atomic(k)) {
      address(&op);
      expect(",");
      op.args.push_back(value_ref());
      if (accept_keyword("mask")) op.args.push_back(value_ref());
    } else if (is_reduction(k)) {
      op.args.push_back(value_ref());
      expect_keyword("axis");
      op.ival = integer("an axis");
    } else if (k == OpKind::VarLoad) {
      op.ival = var_ref();
    } else if (k == OpKind::Fma || k == OpKind::Select || k == OpKind::Dot) {
      args(&op, 3);
    } else if (is_binary_elementwise(k) || is_comparison(k) || k == OpKind::DotGroups) {
      args(&op, 2);
    } else {  // broadcast, reshape, transpose, unary, cast, bitcast
      args(&op, 1);
    }
    expect(":");
    Type t = type();
    if (lit) set_constant(&op, *lit, payload ? &*payload : nullptr, t.dtype);
    op.result = define_value(result, t);
    return op;
  }

  Lexer lex_;
  Token cur_;
  Kernel k_;
  int depth_ = 0;
  std::unordered_map<std::string, int> param_index_;
  std::unordered_map<std::string, int> visible_;  // value name -> id, in scope now
  std::unordered_set<std::string> defined_;       // every value name seen
  std::vector<std::vector<std::string>> scopes_;  // names defined per open block
  std::unordered_map<std::string, int64_t> vars_;
};

}  // namespace

Kernel parse_kernel(std::string_view text) { return Parser(text).run(); }

}  // namespace kiln
