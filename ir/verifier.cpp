#include "ir/verifier.h"

#include <cmath>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/error.h"
#include "ir/scalar_eval.h"

namespace kiln {

namespace {

class Verifier {
 public:
  explicit Verifier(const Kernel& k)
      : k_(k),
        defined_(k.values.size(), false),
        visible_(k.values.size(), false),
        var_declared_(k.vars.size(), false),
        var_visible_(k.vars.size(), false) {}

  void run() {
    check_params();
    check_block(k_.body);
  }

 private:
  // Names the op being checked; set before any check of that op can fail.
  struct Where {
    const Op* op = nullptr;
    size_t index = 0;
  };

  [[noreturn]] void fail(const std::string& why) const {
    std::string id = cur_.op->result >= 0 ? "%" + std::to_string(cur_.op->result)
                                          : "#" + std::to_string(cur_.index);
    throw Error("kernel '" + k_.name + "', op " + std::string(op_name(cur_.op->kind)) + " (" + id +
                "): " + why);
  }

  [[noreturn]] void fail_kernel(const std::string& why) const {
    throw Error("kernel '" + k_.name + "': " + why);
  }

  void check_params() {
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Param& p = k_.params[i];
      if (p.name.empty()) fail_kernel("parameter " + std::to_string(i) + " has no name");
      if (!names.insert(p.name).second) fail_kernel("parameter '" + p.name + "' is declared twice");
    }
    for (const Scratch& s : k_.scratch) {
      if (!names.insert(s.name).second) fail_kernel("scratch array '" + s.name + "' reuses a name");
      if (s.elems < 1 || s.elems > kMaxScratchElems)
        fail_kernel("scratch array '" + s.name + "' has " + std::to_string(s.elems) +
                    " elements (1.." + std::to_string(kMaxScratchElems) + ")");
    }
  }

  // Values and variables defined in a block stop being visible when the
  // block ends, which is what makes "used after its loop" an error.
  void check_block(const Block& b) {
    std::vector<int> values_here, vars_here;
    for (size_t i = 0; i < b.ops.size(); ++i) {
      cur_ = Where{&b.ops[i], i};
      check_op(b.ops[i], &values_here, &vars_here);
    }
    for (int v : values_here) visible_[v] = false;
    for (int v : vars_here) var_visible_[v] = false;
  }

  // Checked operand access: the id must name a value visible here.
  const Type& arg(size_t i) {
    int id = cur_.op->args[i];
    std::string which = "operand " + std::to_string(i) + " (%" + std::to_string(id) + ")";
    if (id < 0 || static_cast<size_t>(id) >= k_.values.size())
      fail(which + " is not a value id (the kernel has " + std::to_string(k_.values.size()) +
           " values)");
    if (!visible_[id]) {
      if (defined_[id])
        fail(which +
             " is used outside the loop or if body that defines it (a loop variable, or a "
             "value computed inside the body)");
      fail(which + " is used before it is defined");
    }
    return k_.values[id];
  }

  const Type& result_type() const { return k_.values[cur_.op->result]; }

  void expect_args(size_t lo, size_t hi) {
    size_t n = cur_.op->args.size();
    if (n < lo || n > hi) {
      std::string want =
          lo == hi ? std::to_string(lo) : std::to_string(lo) + " or " + std::to_string(hi);
      fail("expects " + want + " operands, got " + std::to_string(n));
    }
  }

  void expect_args(size_t n) { expect_args(n, n); }

  void expect_same(const Type& a, const Type& b, const std::string& what) {
    if (a != b) fail(what + ": " + type_str(a) + " vs " + type_str(b));
  }

  // The memory a memory op names: a buffer parameter, or a scratch array
  // where `scratch_ok` (load and store).
  Param memory(bool scratch_ok) {
    int64_t p = cur_.op->ival;
    if (is_scratch_ref(p)) {
      size_t s = static_cast<size_t>(scratch_index(p));
      if (s >= k_.scratch.size())
        fail("scratch array index " + std::to_string(s) + " out of range");
      if (!scratch_ok)
        fail("'" + k_.scratch[s].name + "' is a scratch array, which only load and store reach");
      return {k_.scratch[s].name, ParamKind::Buffer, k_.scratch[s].dtype};
    }
    if (static_cast<size_t>(p) >= k_.params.size())
      fail("buffer parameter index " + std::to_string(p) + " out of range");
    const Param& param = k_.params[p];
    if (param.kind != ParamKind::Buffer)
      fail("parameter '" + param.name + "' is a scalar, not a buffer");
    return param;
  }

  const Type& var_type(bool need_visible) {
    int64_t v = cur_.op->ival;
    if (v < 0 || static_cast<size_t>(v) >= k_.vars.size())
      fail("variable index " + std::to_string(v) + " out of range (the kernel has " +
           std::to_string(k_.vars.size()) + " variables)");
    if (need_visible && !var_visible_[v]) {
      if (var_declared_[v])
        fail("variable " + std::to_string(v) +
             " is used outside the loop or if body that declares it");
      fail("variable " + std::to_string(v) + " is used before it is declared");
    }
    return k_.vars[v];
  }

  void check_type_shape(const Type& t, const std::string& what) {
    if (t.rank() > 3) fail(what + " " + type_str(t) + " has rank above 3");
    for (int64_t d : t.shape)
      if (d <= 0) fail(what + " " + type_str(t) + " has a non-positive dimension");
  }

  static bool produces_value(OpKind k) {
    return k != OpKind::Store && k != OpKind::Prefetch && k != OpKind::If && k != OpKind::VarDecl &&
           k != OpKind::VarStore;
  }

  void check_op(const Op& op, std::vector<int>* values_here, std::vector<int>* vars_here) {
    OpKind kind = op.kind;
    if (static_cast<int>(kind) > static_cast<int>(OpKind::VarStore)) {
      throw Error("kernel '" + k_.name + "': op #" + std::to_string(cur_.index) +
                  " has an unknown kind " + std::to_string(static_cast<int>(kind)));
    }
    // Result presence and id range.
    if (produces_value(kind)) {
      if (op.result < 0) fail("has no result value");
      if (static_cast<size_t>(op.result) >= k_.values.size())
        fail("result id out of range (the kernel has " + std::to_string(k_.values.size()) +
             " values)");
      if (defined_[op.result]) fail("value %" + std::to_string(op.result) + " is defined twice");
      check_type_shape(result_type(), "result type");
    } else if (op.result != -1) {
      fail("must not define a result");
    }
    size_t want_regions = kind == OpKind::For ? 1 : kind == OpKind::If ? 2 : 0;
    if (op.regions.size() != want_regions)
      fail("expects " + std::to_string(want_regions) + " regions, got " +
           std::to_string(op.regions.size()));
    if (kind != OpKind::Slice && kind != OpKind::Lookup && !op.ints.empty())
      fail("unexpected integer list attribute");

    check_typing(op);

    if (kind == OpKind::For) {
      // The induction variable lives only in the body.
      defined_[op.result] = true;
      visible_[op.result] = true;
      size_t index = cur_.index;
      check_block(op.regions[0]);
      cur_ = Where{&op, index};
      visible_[op.result] = false;
      return;
    }
    if (kind == OpKind::If) {
      size_t index = cur_.index;
      check_block(op.regions[0]);
      check_block(op.regions[1]);
      cur_ = Where{&op, index};
      return;
    }
    if (kind == OpKind::VarDecl) {
      if (var_declared_[op.ival]) fail("variable " + std::to_string(op.ival) + " declared twice");
      var_declared_[op.ival] = true;
      var_visible_[op.ival] = true;
      vars_here->push_back(static_cast<int>(op.ival));
    }
    if (op.result >= 0) {
      defined_[op.result] = true;
      visible_[op.result] = true;
      values_here->push_back(op.result);
    }
  }

  void check_typing(const Op& op) {
    OpKind kind = op.kind;
    if (is_binary_elementwise(kind) || is_comparison(kind)) {
      expect_args(2);
      const Type &a = arg(0), &b = arg(1);
      expect_same(a, b, "operand types differ");
      DType t = a.dtype;
      bool bit_op = kind == OpKind::And || kind == OpKind::Or || kind == OpKind::Xor;
      bool shift = kind == OpKind::Shl || kind == OpKind::Shr;
      if (bit_op && !is_int(t) && t != DType::boolean)
        fail("needs integer or bool operands, got " + type_str(a));
      if (shift && !is_int(t)) fail("needs integer operands, got " + type_str(a));
      if (t == DType::boolean && !bit_op && kind != OpKind::Eq && kind != OpKind::Ne)
        fail("not defined on bool operands");
      Type want{is_comparison(kind) ? DType::boolean : t, a.shape};
      expect_same(result_type(), want, "result type is wrong");
      return;
    }
    if (is_unary_elementwise(kind)) {
      expect_args(1);
      const Type& x = arg(0);
      if (is_float_only_unary(kind) && !is_float(x.dtype))
        fail("needs a float operand, got " + type_str(x));
      if (kind == OpKind::Neg && x.dtype == DType::boolean) fail("not defined on bool");
      if (kind == OpKind::Not && is_float(x.dtype))
        fail("needs an integer or bool operand, got " + type_str(x));
      expect_same(result_type(), x, "result type differs from the operand");
      return;
    }
    if (is_reduction(kind)) {
      expect_args(1);
      const Type& x = arg(0);
      if (x.dtype == DType::boolean) fail("not defined on bool");
      if (op.ival < 0 || op.ival >= x.rank())
        fail("axis " + std::to_string(op.ival) + " out of range for " + type_str(x));
      Shape s = x.shape;
      s.erase(s.begin() + op.ival);
      Type want{kind == OpKind::ArgMax ? DType::i32 : x.dtype, s};
      expect_same(result_type(), want, "result type is wrong");
      return;
    }
    if (is_atomic(kind)) {
      check_write(true);
      return;
    }
    switch (kind) {
      case OpKind::Const: {
        expect_args(0);
        DType t = result_type().dtype;
        if (t == DType::boolean && op.ival != 0 && op.ival != 1)
          fail("bool constant must be 0 or 1, got " + std::to_string(op.ival));
        // Canonical constants keep equal kernels' text and hash equal.
        if (is_float(t) && !std::isnan(op.fval) &&
            static_cast<double>(round_to_float_dtype(static_cast<float>(op.fval), t)) != op.fval)
          fail("float constant " + std::to_string(op.fval) + " is not a " +
               std::string(dtype_name(t)) + " value (KernelBuilder::constant rounds it)");
        return;
      }
      case OpKind::Arange: {
        expect_args(0);
        const Type& r = result_type();
        if (r.dtype != DType::i32 || r.rank() != 1)
          fail("result must be rank-1 i32, got " + type_str(r));
        return;
      }
      case OpKind::ProgramId:
      case OpKind::NumPrograms: {
        expect_args(0);
        if (op.ival < 0 || op.ival > 2) fail("axis " + std::to_string(op.ival) + " not in 0..2");
        expect_same(result_type(), Type{DType::i32, {}}, "result must be an i32 scalar");
        return;
      }
      case OpKind::Param: {
        expect_args(0);
        if (op.ival < 0 || static_cast<size_t>(op.ival) >= k_.params.size())
          fail("parameter index " + std::to_string(op.ival) + " out of range");
        const Param& p = k_.params[op.ival];
        if (p.kind != ParamKind::Scalar)
          fail("parameter '" + p.name + "' is a buffer, not a scalar");
        expect_same(result_type(), Type{p.dtype, {}},
                    "result type does not match scalar parameter '" + p.name + "'");
        return;
      }
      case OpKind::Broadcast: {
        expect_args(1);
        const Type &x = arg(0), &r = result_type();
        Shape out;
        if (r.dtype != x.dtype || !broadcast_shapes(x.shape, r.shape, &out) || out != r.shape)
          fail("cannot broadcast " + type_str(x) + " to " + type_str(r));
        return;
      }
      case OpKind::Reshape: {
        expect_args(1);
        const Type &x = arg(0), &r = result_type();
        if (r.dtype != x.dtype || r.numel() != x.numel())
          fail("cannot reshape " + type_str(x) + " to " + type_str(r));
        return;
      }
      case OpKind::Transpose: {
        expect_args(1);
        const Type& x = arg(0);
        if (x.rank() != 2) fail("needs a rank-2 operand, got " + type_str(x));
        expect_same(result_type(), Type{x.dtype, {x.shape[1], x.shape[0]}}, "result type is wrong");
        return;
      }
      case OpKind::Slice: {
        expect_args(1);
        const Type &x = arg(0), &r = result_type();
        if (r.dtype != x.dtype || r.rank() != x.rank() ||
            op.ints.size() != static_cast<size_t>(x.rank()))
          fail("slice of " + type_str(x) + " to " + type_str(r) + " needs one start per axis");
        for (int i = 0; i < x.rank(); ++i)
          if (op.ints[i] < 0 || op.ints[i] > x.shape[i] - r.shape[i])
            fail("range out of bounds on axis " + std::to_string(i) + " of " + type_str(x));
        return;
      }
      case OpKind::Fma: {
        expect_args(3);
        const Type &a = arg(0), &b = arg(1), &c = arg(2);
        if (!is_float(a.dtype)) fail("needs float operands, got " + type_str(a));
        expect_same(a, b, "operand types differ");
        expect_same(a, c, "operand types differ");
        expect_same(result_type(), a, "result type differs from the operands");
        return;
      }
      case OpKind::Select: {
        expect_args(3);
        const Type &c = arg(0), &a = arg(1), &b = arg(2);
        if (c.dtype != DType::boolean) fail("condition must be bool, got " + type_str(c));
        expect_same(a, b, "branch types differ");
        if (c.shape != a.shape)
          fail("condition shape differs from the branches: " + type_str(c) + " vs " + type_str(a));
        expect_same(result_type(), a, "result type differs from the branches");
        return;
      }
      case OpKind::Cast: {
        expect_args(1);
        const Type &x = arg(0), &r = result_type();
        if (x.shape != r.shape) fail("cannot cast " + type_str(x) + " to " + type_str(r));
        return;
      }
      case OpKind::Bitcast: {
        expect_args(1);
        const Type &x = arg(0), &r = result_type();
        bool ok = x.dtype != DType::boolean && r.dtype != DType::boolean;
        if (dtype_bits(x.dtype) == dtype_bits(r.dtype)) {
          ok = ok && x.shape == r.shape;
        } else {  // a view: same bits per innermost row
          ok = ok && x.rank() >= 1 && x.rank() == r.rank() &&
               Shape(x.shape.begin(), x.shape.end() - 1) ==
                   Shape(r.shape.begin(), r.shape.end() - 1) &&
               x.shape.back() * dtype_bits(x.dtype) == r.shape.back() * dtype_bits(r.dtype);
        }
        if (!ok) fail("cannot bitcast " + type_str(x) + " to " + type_str(r));
        return;
      }
      case OpKind::Lookup: {
        expect_args(1);
        const Type &x = arg(0), &r = result_type();
        if (!is_int(x.dtype)) fail("index must be an integer tile, got " + type_str(x));
        if (!is_int(r.dtype)) fail("result dtype must be an integer dtype, got " + type_str(r));
        if (r.shape != x.shape)
          fail("result shape differs from the index: " + type_str(r) + " vs " + type_str(x));
        if (op.ints.empty() || op.ints.size() > kMaxLookupEntries)
          fail("table has " + std::to_string(op.ints.size()) +
               " entries; a lookup table holds 1 to " + std::to_string(kMaxLookupEntries));
        for (size_t i = 0; i < op.ints.size(); ++i)
          if (op.ints[i] < int_min(r.dtype) || op.ints[i] > int_max(r.dtype))
            fail("table entry " + std::to_string(i) + " (" + std::to_string(op.ints[i]) +
                 ") does not fit the result dtype " + std::string(dtype_name(r.dtype)));
        return;
      }
      case OpKind::Load: {
        expect_args(1, 3);
        if (op.args.size() == 2) fail("expects 1 or 3 operands, got 2");
        const Param buf = memory(true);
        const Type& off = check_offsets(buf);
        Type want{buf.dtype, off.shape};
        if (op.args.size() == 3) {
          const Type &mask = arg(1), &other = arg(2);
          check_mask(mask, off);
          expect_same(other, want, "'other' does not match buffer '" + buf.name + "'");
        }
        expect_same(result_type(), want, "result does not match buffer '" + buf.name + "'");
        return;
      }
      case OpKind::Store: check_write(false); return;
      case OpKind::Prefetch:
        expect_args(1);
        check_offsets(memory(false));
        return;
      case OpKind::Dot: {
        expect_args(3);
        const Type &a = arg(0), &b = arg(1), &acc = arg(2);
        std::string shapes = type_str(a) + " x " + type_str(b) + " + " + type_str(acc);
        if (a.rank() != 2 || b.rank() != 2 || acc.rank() != 2 || a.shape[1] != b.shape[0] ||
            acc.shape[0] != a.shape[0] || acc.shape[1] != b.shape[1])
          fail("shapes " + shapes + " do not form [M,K] x [K,N] + [M,N]");
        bool float_ok = is_float(a.dtype) && a.dtype == b.dtype && acc.dtype == DType::f32;
        bool int_ok = (a.dtype == DType::i8 || a.dtype == DType::u8) && b.dtype == DType::i8 &&
                      acc.dtype == DType::i32;
        if (!float_ok && !int_ok)
          fail("unsupported dtypes " + shapes +
               " (float x same float -> f32, or i8/u8 x i8 -> i32)");
        expect_same(result_type(), acc, "result type differs from the accumulator");
        return;
      }
      case OpKind::DotGroups: {
        expect_args(2);
        const Type &a = arg(0), &b = arg(1);
        std::string shapes = type_str(a) + " . " + type_str(b);
        const int group = dot_group_size(a.dtype, b.dtype);
        if (!group) fail("unsupported dtypes " + shapes + " (u8 or i8 with i8, or i16 with i16)");
        if (a.shape != b.shape || a.rank() < 1 || a.shape.back() % group)
          fail("shapes " + shapes + " are not one [.., " + std::to_string(group) + "k]");
        Shape out = a.shape;
        out.back() /= group;
        expect_same(result_type(), Type{DType::i32, out}, "result is not i32 of the groups' shape");
        return;
      }
      case OpKind::For: {
        expect_args(3);
        const Type &lo = arg(0), &hi = arg(1), &step = arg(2);
        if (!is_int(lo.dtype) || !lo.is_scalar())
          fail("loop bounds must be integer scalars, got " + type_str(lo));
        if (hi != lo || step != lo)
          fail("loop bounds must share one type, got " + type_str(lo) + ", " + type_str(hi) + ", " +
               type_str(step));
        expect_same(result_type(), lo, "induction variable type differs from the bounds");
        return;
      }
      case OpKind::If: {
        expect_args(1);
        const Type& c = arg(0);
        if (c != Type{DType::boolean, {}})
          fail("condition must be a bool scalar, got " + type_str(c));
        return;
      }
      case OpKind::VarDecl: {
        expect_args(1);
        const Type& init = arg(0);
        const Type& vt = var_type(false);
        check_type_shape(vt, "variable type");
        expect_same(init, vt, "initial value does not match variable " + std::to_string(op.ival));
        return;
      }
      case OpKind::VarLoad: {
        expect_args(0);
        const Type& vt = var_type(true);
        expect_same(result_type(), vt, "result does not match variable " + std::to_string(op.ival));
        return;
      }
      case OpKind::VarStore: {
        expect_args(1);
        const Type& v = arg(0);
        const Type& vt = var_type(true);
        expect_same(v, vt, "stored value does not match variable " + std::to_string(op.ival));
        return;
      }
      default: fail("unhandled op kind");
    }
  }

  const Type& check_offsets(const Param& buf) {
    const Type& off = arg(0);
    if (off.dtype != DType::i32 && off.dtype != DType::i64)
      fail("offsets into buffer '" + buf.name + "' must be i32 or i64, got " + type_str(off));
    return off;
  }

  void check_mask(const Type& mask, const Type& off) {
    if (mask.dtype != DType::boolean) fail("mask must be bool, got " + type_str(mask));
    if (mask.shape != off.shape)
      fail("mask shape differs from the offsets: " + type_str(mask) + " vs " + type_str(off));
  }

  // Store and atomics: (offsets, value [, mask]).
  void check_write(bool has_result) {
    expect_args(2, 3);
    const Param buf = memory(!has_result);
    const Type& off = check_offsets(buf);
    const Type& v = arg(1);
    Type want{buf.dtype, off.shape};
    if (v.dtype != buf.dtype)
      fail("buffer '" + buf.name + "' holds " + std::string(dtype_name(buf.dtype)) +
           " but the value is " + type_str(v));
    expect_same(v, want, "value shape differs from the offsets");
    if (cur_.op->args.size() == 3) check_mask(arg(2), off);
    if (has_result)
      expect_same(result_type(), want, "result does not match buffer '" + buf.name + "'");
  }

  const Kernel& k_;
  std::vector<bool> defined_, visible_;
  std::vector<bool> var_declared_, var_visible_;
  Where cur_;
};

}  // namespace

void verify(const Kernel& k) { Verifier(k).run(); }

}  // namespace kiln
