// The text form. Grammar (whitespace-insensitive; `//` starts a comment):
//
//   kernel    := 'kernel' name '(' [param {',' param}] ')'
//                ['constexprs' '(' name '=' int {',' name '=' int} ')'] block
//   param     := name ':' ('buf' '<' dtype '>' | dtype)
//   block     := '{' {op} '}'
//   type      := dtype ['[' [int {',' int}] ']']
//   op        := %v '=' 'const' number ':' type
//              | %v '=' 'arange' ':' type
//              | %v '=' ('program_id' | 'num_programs') int ':' type
//              | %v '=' 'param' name ':' type
//              | %v '=' ('broadcast'|'reshape'|'transpose'|'cast'|'bitcast'|unary) %x ':' type
//              | %v '=' 'slice' %x '[' [int {',' int}] ']' ':' type
//              | %v '=' 'lookup' %x '[' int {',' int} ']' ':' type
//              | %v '=' (binary | compare) %a ',' %b ':' type
//              | %v '=' ('fma' | 'select' | 'dot') %a ',' %b ',' %c ':' type
//              | %v '=' 'load' name '[' %off ']' ['mask' %m 'other' %o] ':' type
//              | 'store' name '[' %off ']' ',' %x ['mask' %m]
//              | %v '=' atomic name '[' %off ']' ',' %x ['mask' %m] ':' type
//              | %v '=' reduction %x 'axis' int ':' type
//              | 'for' %i '=' %lo 'to' %hi 'step' %s ':' type block
//              | 'if' %c block ['else' block]
//              | 'var' $n '=' %init ':' type
//              | %v '=' 'var_load' $n ':' type
//              | 'var_store' $n ',' %x
//   name      := identifier | '"' escaped text '"'
//   number    := integer | decimal float (shortest round trip) | ['-'] 'inf'
//              | 'nan' | '-nan' | 'nan' '(' 0x<64-bit pattern> ')'
//
// The printer is also used on kernels that failed verification (in error
// messages and while debugging passes), so it never indexes out of range:
// unknown references print as `%?N`, `$?N`, `?N` and `?` for a missing type.
#include "ir/printer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace kiln {

namespace {

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

// Names come from user code and may be anything; quoting keeps them
// round-trippable without restricting what the DSL accepts.
std::string name_str(const std::string& s) {
  bool plain = !s.empty() && is_ident_start(s[0]);
  for (char c : s) plain = plain && is_ident_char(c);
  if (plain) return s;
  std::string r = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      r += '\\';
      r += c;
    } else if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      r += buf;
    } else {
      r += c;
    }
  }
  return r + "\"";
}

// Shortest decimal that reads back to the same double; a trailing ".0" marks
// integral values as floats for the reader. NaNs other than the two default
// quiet NaNs keep their payload as an explicit bit pattern.
std::string float_str(double v) {
  if (std::isnan(v)) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if (bits == 0x7ff8000000000000ull) return "nan";
    if (bits == 0xfff8000000000000ull) return "-nan";
    char buf[40];
    std::snprintf(buf, sizeof buf, "nan(0x%016llx)", static_cast<unsigned long long>(bits));
    return buf;
  }
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[400];
  // Float constants are canonical (rounded to their dtype, so to f32), and
  // the shortest f32 spelling is what a reader expects: 0.1, not
  // 0.10000000149011612. The parser reads it back as f32, exactly.
  float f = static_cast<float>(v);
  auto res = static_cast<double>(f) == v ? std::to_chars(buf, buf + sizeof buf, f)
                                         : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  // Shortest may pick "1e+05" for a round number; spell it out when that
  // stays short (the fixed form is exact too).
  if (s.find("e+") != std::string::npos) {
    auto fixed = static_cast<double>(f) == v
                     ? std::to_chars(buf, buf + sizeof buf, f, std::chars_format::fixed)
                     : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    if (fixed.ec == std::errc() && fixed.ptr - buf <= 17) s.assign(buf, fixed.ptr);
  }
  if (s.find_first_not_of("-0123456789") == std::string::npos) s += ".0";
  return s;
}

class Printer {
 public:
  explicit Printer(const Kernel& k) : k_(k) {}

  std::string run() {
    out_ += "kernel " + name_str(k_.name) + "(";
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Param& p = k_.params[i];
      if (i) out_ += ", ";
      out_ += name_str(p.name) + ": ";
      std::string dt(dtype_name(p.dtype));
      out_ += p.kind == ParamKind::Buffer ? "buf<" + dt + ">" : dt;
    }
    out_ += ")";
    if (!k_.constexprs.empty()) {
      out_ += " constexprs(";
      for (size_t i = 0; i < k_.constexprs.size(); ++i) {
        if (i) out_ += ", ";
        out_ += name_str(k_.constexprs[i].first) + "=" + std::to_string(k_.constexprs[i].second);
      }
      out_ += ")";
    }
    if (!k_.scratch.empty()) {
      out_ += " scratch(";
      for (size_t i = 0; i < k_.scratch.size(); ++i) {
        const Scratch& s = k_.scratch[i];
        out_ += (i ? ", " : "") + name_str(s.name) + ": " + std::string(dtype_name(s.dtype)) + "[" +
                std::to_string(s.elems) + "]";
      }
      out_ += ")";
    }
    out_ += " {\n";
    block(k_.body, 1);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void indent(int depth) { out_.append(static_cast<size_t>(depth) * 2, ' '); }

  std::string def(int id) {
    int n = next_value_++;
    value_names_[id] = n;
    return "%" + std::to_string(n);
  }
  std::string val(int id) const {
    auto it = value_names_.find(id);
    if (it == value_names_.end()) return "%?" + std::to_string(id);
    return "%" + std::to_string(it->second);
  }
  std::string var_def(int id) {
    int n = next_var_++;
    var_names_[id] = n;
    return "$" + std::to_string(n);
  }
  std::string var(int64_t id) const {
    auto it = var_names_.find(id);
    if (it == var_names_.end()) return "$?" + std::to_string(id);
    return "$" + std::to_string(it->second);
  }
  std::string arg(const Op& op, size_t i) const {
    if (i >= op.args.size()) return "%?";
    return val(op.args[i]);
  }
  std::string type_of_value(int id) const {
    if (id < 0 || static_cast<size_t>(id) >= k_.values.size()) return "?";
    return type_str(k_.values[id]);
  }
  std::string param_name(int64_t i) const {
    const std::string* n = memory_name(k_, i);
    return n ? name_str(*n) : "?" + std::to_string(i);
  }
  DType result_dtype(const Op& op) const {
    if (op.result < 0 || static_cast<size_t>(op.result) >= k_.values.size()) return DType::f32;
    return k_.values[op.result].dtype;
  }
  // `buf[%off]`: the addressing prefix shared by load, store and atomics.
  std::string address(const Op& op) const { return param_name(op.ival) + "[" + arg(op, 0) + "]"; }

  void block(const Block& b, int depth) {
    for (const Op& op : b.ops) this->op(op, depth);
  }

  void op(const Op& op, int depth) {
    indent(depth);
    const std::string name(op_name(op.kind));
    OpKind k = op.kind;

    if (k == OpKind::For) {
      out_ += "for " + def(op.result) + " = " + arg(op, 0) + " to " + arg(op, 1) + " step " +
              arg(op, 2) + " : " + type_of_value(op.result) + " {\n";
      if (!op.regions.empty()) block(op.regions[0], depth + 1);
      indent(depth);
      out_ += "}\n";
      return;
    }
    if (k == OpKind::If) {
      out_ += "if " + arg(op, 0) + " {\n";
      if (!op.regions.empty()) block(op.regions[0], depth + 1);
      indent(depth);
      if (op.regions.size() > 1 && !op.regions[1].ops.empty()) {
        out_ += "} else {\n";
        block(op.regions[1], depth + 1);
        indent(depth);
      }
      out_ += "}\n";
      return;
    }
    if (k == OpKind::VarDecl) {
      std::string ty = op.ival >= 0 && static_cast<size_t>(op.ival) < k_.vars.size()
                           ? type_str(k_.vars[op.ival])
                           : "?";
      // The initializer is printed before the variable is numbered so a
      // self-reference (invalid anyway) cannot look valid.
      std::string init = arg(op, 0);
      out_ += "var " + var_def(static_cast<int>(op.ival)) + " = " + init + " : " + ty + "\n";
      return;
    }
    if (k == OpKind::VarStore) {
      out_ += "var_store " + var(op.ival) + ", " + arg(op, 0) + "\n";
      return;
    }

    std::string rhs = name;
    if (k == OpKind::Const) {
      rhs += " ";
      if (is_float(result_dtype(op)))
        rhs += float_str(op.fval);
      else
        rhs += std::to_string(op.ival);
    } else if (k == OpKind::ProgramId || k == OpKind::NumPrograms) {
      rhs += " " + std::to_string(op.ival);
    } else if (k == OpKind::Param) {
      rhs += " " + param_name(op.ival);
    } else if (k == OpKind::Slice || k == OpKind::Lookup) {
      rhs += " " + arg(op, 0) + " [";
      for (size_t i = 0; i < op.ints.size(); ++i)
        rhs += (i ? ", " : "") + std::to_string(op.ints[i]);
      rhs += "]";
    } else if (k == OpKind::Load || k == OpKind::Prefetch) {
      rhs += " " + address(op);
      if (op.args.size() > 1) rhs += " mask " + arg(op, 1) + " other " + arg(op, 2);
    } else if (k == OpKind::Store || is_atomic(k)) {
      rhs += " " + address(op) + ", " + arg(op, 1);
      if (op.args.size() > 2) rhs += " mask " + arg(op, 2);
    } else if (is_reduction(k)) {
      rhs += " " + arg(op, 0) + " axis " + std::to_string(op.ival);
    } else if (k == OpKind::VarLoad) {
      rhs += " " + var(op.ival);
    } else {
      for (size_t i = 0; i < op.args.size(); ++i) rhs += (i ? ", " : " ") + val(op.args[i]);
    }

    if (op.result >= 0) {
      // Operands are printed before the result is numbered: definition order.
      std::string lhs = def(op.result);
      out_ += lhs + " = " + rhs + " : " + type_of_value(op.result) + "\n";
    } else {
      out_ += rhs + "\n";
    }
  }

  const Kernel& k_;
  std::string out_;
  std::unordered_map<int, int> value_names_;
  std::unordered_map<int64_t, int> var_names_;
  int next_value_ = 0;
  int next_var_ = 0;
};

}  // namespace

std::string print_kernel(const Kernel& k) { return Printer(k).run(); }

uint64_t structural_hash(const Kernel& k) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : print_kernel(k)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kiln
