#include "ir/interpreter.h"

#include <cmath>
#include <limits>
#include <string>

#include "ir/error.h"
#include "ir/scalar_eval.h"

namespace kiln {

namespace {

using Tile = std::vector<ScalarValue>;

std::string param_desc(const Param& p) {
  return std::string(p.kind == ParamKind::Buffer ? "buffer" : "scalar") + " '" + p.name + "' (" +
         std::string(dtype_name(p.dtype)) + ")";
}

void check_args(const Kernel& k, const std::vector<Arg>& args) {
  std::string where = "interpret kernel '" + k.name + "': ";
  if (args.size() != k.params.size()) {
    std::string names;
    for (const Param& p : k.params) names += (names.empty() ? "" : ", ") + p.name;
    throw Error(where + "expected " + std::to_string(k.params.size()) + " arguments (" + names +
                "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Param& p = k.params[i];
    const Arg& a = args[i];
    std::string which = "argument " + std::to_string(i) + " for " + param_desc(p);
    if (a.is_buffer != (p.kind == ParamKind::Buffer))
      throw Error(where + which + " is a " + (a.is_buffer ? "buffer" : "scalar"));
    if (a.is_buffer && a.count < 0)
      throw Error(where + which + " has a negative size " + std::to_string(a.count));
    if (a.is_buffer && a.count > 0 && a.data == nullptr)
      throw Error(where + which + " is a null pointer with " + std::to_string(a.count) +
                  " elements");
    if (!a.is_buffer && a.is_float && !is_float(p.dtype))
      throw Error(where + which + " is integer but a float was passed");
  }
}

// Executes one kernel over a grid. Every value owns a row-major tile that is
// sized once and overwritten in place, so the hot loops never allocate.
class Interpreter {
 public:
  Interpreter(const Kernel& k, const std::vector<Arg>& args)
      : k_(k), args_(args), vals_(k.values.size()), vars_(k.vars.size()) {}

  void run(const Grid& grid) {
    for (int64_t d : grid)
      if (d < 0)
        throw Error("interpret kernel '" + k_.name + "': negative grid size " + std::to_string(d));
    grid_ = grid;
    for (int64_t z = 0; z < grid[2]; ++z)
      for (int64_t y = 0; y < grid[1]; ++y)
        for (int64_t x = 0; x < grid[0]; ++x) {
          pid_ = {x, y, z};
          fresh_scratch();
          exec_block(k_.body);
        }
  }

 private:
  void exec_block(const Block& b) {
    for (const Op& op : b.ops) exec(op);
  }

  void exec(const Op& op) {
    switch (op.kind) {
      case OpKind::Const:
      case OpKind::Arange:
      case OpKind::ProgramId:
      case OpKind::NumPrograms:
      case OpKind::Param: return exec_creation(op);
      case OpKind::Broadcast:
      case OpKind::Reshape:
      case OpKind::Transpose:
      case OpKind::Slice: return exec_layout(op);
      case OpKind::Load: return exec_load(op);
      case OpKind::Prefetch: return;  // a hint: no effect on any value
      case OpKind::Store:
      case OpKind::AtomicAdd:
      case OpKind::AtomicMax:
      case OpKind::AtomicMin:
      case OpKind::AtomicXchg: return exec_write(op);
      case OpKind::ReduceSum:
      case OpKind::ReduceMax:
      case OpKind::ReduceMin:
      case OpKind::ArgMax: return exec_reduce(op);
      case OpKind::Dot: return exec_dot(op);
      case OpKind::DotGroups: return exec_dot_groups(op);
      case OpKind::Lookup: return exec_lookup(op);
      case OpKind::For: return exec_for(op);
      case OpKind::If: return exec_if(op);
      case OpKind::VarDecl:
      case OpKind::VarLoad:
      case OpKind::VarStore: return exec_var(op);
      default: return exec_elementwise(op);
    }
  }

  // ---- helpers -------------------------------------------------------------

  [[noreturn]] void fail(const Op& op, const std::string& why) const {
    std::string res = op.result >= 0 ? " -> %" + std::to_string(op.result) : "";
    throw Error("interpret kernel '" + k_.name + "', program (" + std::to_string(pid_[0]) + "," +
                std::to_string(pid_[1]) + "," + std::to_string(pid_[2]) + "), op " +
                std::string(op_name(op.kind)) + res + ": " + why);
  }

  void expect_args(const Op& op, size_t lo, size_t hi) const {
    if (op.args.size() < lo || op.args.size() > hi)
      fail(op, "has " + std::to_string(op.args.size()) + " operands, expected " +
                   std::to_string(lo) + (hi != lo ? " to " + std::to_string(hi) : ""));
  }

  const Type& type_of(const Op& op, int id) const {
    if (id < 0 || id >= static_cast<int>(k_.values.size()))
      fail(op, "refers to unknown value %" + std::to_string(id));
    return k_.values[id];
  }

  const Tile& in(const Op& op, size_t i) const {
    if (i >= op.args.size()) fail(op, "missing operand " + std::to_string(i));
    int id = op.args[i];
    const Type& t = type_of(op, id);
    const Tile& v = vals_[id];
    if (static_cast<int64_t>(v.size()) != t.numel())
      fail(op, "uses %" + std::to_string(id) + " before it is defined");
    return v;
  }

  DType dtype_in(const Op& op, size_t i) const {
    if (i >= op.args.size()) fail(op, "missing operand " + std::to_string(i));
    return type_of(op, op.args[i]).dtype;
  }

  const Type& result_type(const Op& op) const {
    if (op.result < 0) fail(op, "has no result value");
    return type_of(op, op.result);
  }

  Tile& out(const Op& op) {
    const Type& t = result_type(op);
    Tile& v = vals_[op.result];
    v.resize(static_cast<size_t>(t.numel()));
    return v;
  }

  // Operand i, which must have exactly n elements.
  const ScalarValue* in_n(const Op& op, size_t i, int64_t n) const {
    const Tile& v = in(op, i);
    if (static_cast<int64_t>(v.size()) != n)
      fail(op, "operand %" + std::to_string(op.args[i]) + " has " + std::to_string(v.size()) +
                   " elements, expected " + std::to_string(n));
    return v.data();
  }

  // A scalar operand's single element.
  const ScalarValue& scalar_in(const Op& op, size_t i) const { return in_n(op, i, 1)[0]; }

  int64_t param_index(const Op& op, ParamKind kind) const {
    if (op.ival < 0 || op.ival >= static_cast<int64_t>(k_.params.size()) ||
        k_.params[op.ival].kind != kind)
      fail(op, "parameter index " + std::to_string(op.ival) + " is not a " +
                   (kind == ParamKind::Buffer ? "buffer" : "scalar") + " parameter");
    return op.ival;
  }

  // What a memory op reads or writes: a buffer argument or this program's
  // scratch array.
  struct Memory {
    void* data;
    int64_t count;
    DType dtype;
    const std::string& name;
  };
  Memory memory(const Op& op) {
    if (!is_scratch_ref(op.ival)) {
      int64_t param = param_index(op, ParamKind::Buffer);
      const Arg& a = args_[param];
      return {a.data, a.count, k_.params[param].dtype, k_.params[param].name};
    }
    size_t s = static_cast<size_t>(scratch_index(op.ival));
    if (s >= k_.scratch.size())
      fail(op, "scratch array index " + std::to_string(s) + " out of range");
    const Scratch& sc = k_.scratch[s];
    return {scratch_[s].data(), sc.elems, sc.dtype, sc.name};
  }

  // Each program starts with its scratch arrays filled with 0xFF bytes (NaN
  // in floats), so a read before the program's own store shows.
  void fresh_scratch() {
    scratch_.resize(k_.scratch.size());
    for (size_t s = 0; s < k_.scratch.size(); ++s)
      scratch_[s].assign(
          static_cast<size_t>(k_.scratch[s].elems * dtype_bytes(k_.scratch[s].dtype)), 0xFF);
  }

  void check_index(const Op& op, const Memory& m, int64_t index) const {
    if (index < 0 || index >= m.count) [[unlikely]]
      out_of_range(op, m, index);
  }

  [[noreturn]] void out_of_range(const Op& op, const Memory& m, int64_t index) const {
    fail(op, "index " + std::to_string(index) + " out of range for " +
                 (is_scratch_ref(op.ival) ? "scratch array '" : "buffer '") + m.name + "' of " +
                 std::to_string(m.count) + " elements");
  }

  // dst[j] = src[base + sum_d idx_d * strides[d]] over the row-major indices
  // of `shape`: the one gather behind broadcast, transpose and slice. It
  // walks whole rows of the last axis, carrying into the outer axes.
  void gather(const Tile& src, Tile& dst, const Shape& shape, const std::vector<int64_t>& strides,
              int64_t base) {
    if (shape.empty()) {
      dst[0] = src[static_cast<size_t>(base)];
      return;
    }
    size_t r = shape.size();
    int64_t row_len = shape[r - 1], step = strides[r - 1];
    idx_.assign(r, 0);
    int64_t off = base;
    for (size_t j = 0; j < dst.size(); j += static_cast<size_t>(row_len)) {
      ScalarValue* d = dst.data() + j;
      const ScalarValue* s = src.data() + off;
      for (int64_t e = 0; e < row_len; ++e) d[e] = s[e * step];
      for (size_t a = r - 1; a-- > 0;) {
        off += strides[a];
        if (++idx_[a] < shape[a]) break;
        off -= strides[a] * shape[a];
        idx_[a] = 0;
      }
    }
  }

  // ---- op groups -----------------------------------------------------------

  void exec_creation(const Op& op) {
    expect_args(op, 0, 0);
    DType t = result_type(op).dtype;
    Tile& o = out(op);
    switch (op.kind) {
      case OpKind::Const: {
        ScalarValue c = const_value(t, op.ival, op.fval);
        for (ScalarValue& e : o) e = c;
        return;
      }
      case OpKind::Arange:
        for (size_t j = 0; j < o.size(); ++j)
          o[j] = ScalarValue{0, normalize_int(static_cast<int64_t>(j), t)};
        return;
      case OpKind::ProgramId:
      case OpKind::NumPrograms: {
        if (op.ival < 0 || op.ival > 2)
          fail(op, "axis " + std::to_string(op.ival) + " not in 0..2");
        int64_t v = op.kind == OpKind::ProgramId ? pid_[op.ival] : grid_[op.ival];
        o.assign(o.size(), ScalarValue{0, normalize_int(v, t)});
        return;
      }
      default: {
        const Arg& a = args_[param_index(op, ParamKind::Scalar)];
        o.assign(o.size(), const_value(t, a.i, a.f));
        return;
      }
    }
  }

  void exec_layout(const Op& op) {
    expect_args(op, 1, 1);
    const Shape& si = type_of(op, op.args[0]).shape;
    const Shape& so = result_type(op).shape;
    const Tile& x = in(op, 0);
    Tile& o = out(op);
    std::vector<int64_t> st = row_major_strides(si);
    switch (op.kind) {
      case OpKind::Broadcast: {
        if (so.size() < si.size()) fail(op, "cannot broadcast to a lower rank");
        std::vector<int64_t> bst(so.size(), 0);
        size_t lead = so.size() - si.size();
        for (size_t d = 0; d < si.size(); ++d) {
          if (si[d] != so[lead + d] && si[d] != 1)
            fail(op, "cannot broadcast " + shape_str(si) + " to " + shape_str(so));
          bst[lead + d] = si[d] == 1 ? 0 : st[d];
        }
        return gather(x, o, so, bst, 0);
      }
      case OpKind::Reshape:
        if (x.size() != o.size()) fail(op, "element counts differ");
        o = x;
        return;
      case OpKind::Transpose:
        if (si.size() != 2 || so.size() != 2 || so[0] != si[1] || so[1] != si[0])
          fail(op, "cannot transpose " + shape_str(si) + " to " + shape_str(so));
        return gather(x, o, so, {st[1], st[0]}, 0);
      default: {
        if (op.ints.size() != si.size() || so.size() != si.size())
          fail(op, "needs one start per axis of " + shape_str(si));
        int64_t base = 0;
        for (size_t d = 0; d < si.size(); ++d) {
          if (op.ints[d] < 0 || so[d] > si[d] - op.ints[d])
            fail(op, "slice out of bounds of " + shape_str(si));
          base += op.ints[d] * st[d];
        }
        return gather(x, o, so, st, base);
      }
    }
  }

  // Bitcast between widths: each innermost row's bytes, reread.
  void exec_view(const Op& op) {
    expect_args(op, 1, 1);
    const Type& rt = result_type(op);
    DType tin = dtype_in(op, 0);
    const Tile& x = in(op, 0);
    Tile& o = out(op);
    int64_t row_bytes = rt.shape.back() * dtype_bytes(rt.dtype);
    int64_t rows = static_cast<int64_t>(o.size()) / rt.shape.back();
    int64_t in_row = row_bytes / dtype_bytes(tin);
    std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < in_row; ++j) store_element(bytes.data(), j, tin, x[r * in_row + j]);
      for (int64_t j = 0; j < rt.shape.back(); ++j)
        o[r * rt.shape.back() + j] = load_element(bytes.data(), j, rt.dtype);
    }
  }

  void exec_elementwise(const Op& op) {
    if (op.kind == OpKind::Bitcast &&
        dtype_bits(dtype_in(op, 0)) != dtype_bits(result_type(op).dtype))
      return exec_view(op);
    size_t arity = 1;
    if (is_binary_elementwise(op.kind) || is_comparison(op.kind))
      arity = 2;
    else if (op.kind == OpKind::Fma || op.kind == OpKind::Select)
      arity = 3;
    else if (!is_unary_elementwise(op.kind) && op.kind != OpKind::Cast &&
             op.kind != OpKind::Bitcast)
      fail(op, "is not supported by the interpreter");
    expect_args(op, arity, arity);
    DType tin = dtype_in(op, arity - 1);
    DType tout = result_type(op).dtype;
    Tile& o = out(op);
    int64_t n = static_cast<int64_t>(o.size());
    const ScalarValue* p[3] = {};
    for (size_t a = 0; a < arity; ++a) p[a] = in_n(op, a, n);
    if (arity == 1) {
      for (int64_t j = 0; j < n; ++j) o[j] = eval_elementwise(op.kind, tin, tout, p[0] + j);
      return;
    }
    ScalarValue buf[3];
    for (int64_t j = 0; j < n; ++j) {
      for (size_t a = 0; a < arity; ++a) buf[a] = p[a][j];
      o[j] = eval_elementwise(op.kind, tin, tout, buf);
    }
  }

  void exec_load(const Op& op) {
    expect_args(op, 1, 3);
    if (op.args.size() == 2) fail(op, "needs offsets, or offsets, mask and other");
    Memory m = memory(op);
    DType t = m.dtype;
    Tile& o = out(op);
    int64_t n = static_cast<int64_t>(o.size());
    const ScalarValue* off = in_n(op, 0, n);
    const ScalarValue* mask = op.args.size() == 3 ? in_n(op, 1, n) : nullptr;
    const ScalarValue* other = op.args.size() == 3 ? in_n(op, 2, n) : nullptr;
    const void* data = m.data;
    for (int64_t j = 0; j < n; ++j) {
      if (mask && mask[j].i == 0) {
        o[j] = other[j];
        continue;
      }
      check_index(op, m, off[j].i);
      o[j] = load_element(data, off[j].i, t);
    }
  }

  // Store and the atomics: element by element in row-major order.
  void exec_write(const Op& op) {
    expect_args(op, 2, 3);
    Memory m = memory(op);
    DType t = m.dtype;
    int64_t n = type_of(op, op.args[0]).numel();
    const ScalarValue* off = in_n(op, 0, n);
    const ScalarValue* val = in_n(op, 1, n);
    const ScalarValue* mask = op.args.size() == 3 ? in_n(op, 2, n) : nullptr;
    void* data = m.data;
    if (op.kind == OpKind::Store) {
      for (int64_t j = 0; j < n; ++j) {
        if (mask && mask[j].i == 0) continue;
        check_index(op, m, off[j].i);
        store_element(data, off[j].i, t, val[j]);
      }
      return;
    }
    if (is_scratch_ref(op.ival)) fail(op, "'" + m.name + "' is a scratch array: no atomics");
    Tile& o = out(op);
    if (static_cast<int64_t>(o.size()) != n) fail(op, "result and offsets differ in size");
    OpKind combine = op.kind == OpKind::AtomicAdd   ? OpKind::Add
                     : op.kind == OpKind::AtomicMax ? OpKind::Max
                                                    : OpKind::Min;
    for (int64_t j = 0; j < n; ++j) {
      if (mask && mask[j].i == 0) {
        o[j] = ScalarValue{};
        continue;
      }
      check_index(op, m, off[j].i);
      ScalarValue old = load_element(data, off[j].i, t);
      ScalarValue nv = val[j];
      if (op.kind != OpKind::AtomicXchg) {
        ScalarValue ab[2] = {old, val[j]};
        nv = eval_elementwise(combine, t, t, ab);
      }
      store_element(data, off[j].i, t, nv);
      o[j] = old;
    }
  }

  void exec_reduce(const Op& op) {
    expect_args(op, 1, 1);
    const Type& ti = type_of(op, op.args[0]);
    const Tile& x = in(op, 0);
    DType tin = ti.dtype, tout = result_type(op).dtype;
    if (op.ival < 0 || op.ival >= ti.rank())
      fail(op, "axis " + std::to_string(op.ival) + " out of range for " + type_str(ti));
    int64_t outer = 1, inner = 1, len = ti.shape[op.ival];
    for (int64_t d = 0; d < op.ival; ++d) outer *= ti.shape[d];
    for (int64_t d = op.ival + 1; d < ti.rank(); ++d) inner *= ti.shape[d];
    Tile& o = out(op);
    if (static_cast<int64_t>(o.size()) != outer * inner)
      fail(op, "result " + type_str(result_type(op)) + " does not match " + type_str(ti));
    bool fl = is_float(tin);
    for (int64_t a = 0; a < outer; ++a)
      for (int64_t b = 0; b < inner; ++b) {
        const ScalarValue* row = x.data() + a * len * inner + b;
        o[a * inner + b] = reduce_row(op.kind, fl, tout, row, len, inner);
      }
  }

  static ScalarValue reduce_row(OpKind k, bool fl, DType tout, const ScalarValue* row, int64_t len,
                                int64_t stride) {
    ScalarValue r;
    if (k == OpKind::ArgMax) {
      int64_t best = -1;
      for (int64_t j = 0; j < len; ++j) {
        const ScalarValue& e = row[j * stride];
        if (fl && std::isnan(e.f)) continue;
        if (best < 0) {
          best = j;
          continue;
        }
        const ScalarValue& b = row[best * stride];
        if (fl ? e.f > b.f : e.i > b.i) best = j;
      }
      r.i = normalize_int(best < 0 ? 0 : best, tout);
      return r;
    }
    if (fl) {
      // Sums accumulate in double and round once; max/min skip NaNs (fmax).
      double acc = k == OpKind::ReduceSum ? 0.0 : std::numeric_limits<double>::quiet_NaN();
      for (int64_t j = 0; j < len; ++j) {
        double e = row[j * stride].f;
        if (k == OpKind::ReduceSum)
          acc += e;
        else
          acc = k == OpKind::ReduceMax ? std::fmax(acc, e) : std::fmin(acc, e);
      }
      r.f = round_to_float_dtype(static_cast<float>(acc), tout);
      return r;
    }
    uint64_t sum = 0;
    int64_t ext = len > 0 ? row[0].i : 0;
    for (int64_t j = 0; j < len; ++j) {
      int64_t e = row[j * stride].i;
      sum += static_cast<uint64_t>(e);
      if (k == OpKind::ReduceMax && e > ext) ext = e;
      if (k == OpKind::ReduceMin && e < ext) ext = e;
    }
    r.i = k == OpKind::ReduceSum ? normalize_int(static_cast<int64_t>(sum), tout) : ext;
    return r;
  }

  void exec_dot(const Op& op) {
    expect_args(op, 3, 3);
    const Shape& sa = type_of(op, op.args[0]).shape;
    const Shape& sb = type_of(op, op.args[1]).shape;
    const Type& tr = result_type(op);
    if (sa.size() != 2 || sb.size() != 2 || tr.rank() != 2 || sa[1] != sb[0] ||
        tr.shape[0] != sa[0] || tr.shape[1] != sb[1])
      fail(op, "shapes " + shape_str(sa) + " x " + shape_str(sb) + " -> " + shape_str(tr.shape) +
                   " do not form [M,K] x [K,N] -> [M,N]");
    int64_t m = sa[0], kk = sa[1], nn = sb[1];
    const ScalarValue* a = in_n(op, 0, m * kk);
    const ScalarValue* b = in_n(op, 1, kk * nn);
    const ScalarValue* acc = in_n(op, 2, m * nn);
    Tile& o = out(op);
    bool fl = is_float(dtype_in(op, 0));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nn; ++j) {
        const ScalarValue* ar = a + i * kk;
        ScalarValue r;
        if (fl) {
          // Products of two f32 values are exact in double.
          double s = acc[i * nn + j].f;
          for (int64_t p = 0; p < kk; ++p) s += ar[p].f * b[p * nn + j].f;
          r.f = round_to_float_dtype(static_cast<float>(s), tr.dtype);
        } else {
          int64_t s = 0;
          for (int64_t p = 0; p < kk; ++p) s += ar[p].i * b[p * nn + j].i;
          r.i = normalize_int(static_cast<int64_t>(static_cast<uint64_t>(acc[i * nn + j].i) +
                                                   static_cast<uint64_t>(s)),
                              tr.dtype);
        }
        o[i * nn + j] = r;
      }
  }

  void exec_dot_groups(const Op& op) {
    expect_args(op, 2, 2);
    const Type& tr = result_type(op);
    int64_t n = tr.numel();
    const int64_t group =
        dot_group_size(type_of(op, op.args[0]).dtype, type_of(op, op.args[1]).dtype);
    if (!group) fail(op, "operand dtypes that no grouped dot takes");
    const ScalarValue* a = in_n(op, 0, group * n);
    const ScalarValue* b = in_n(op, 1, group * n);
    Tile& o = out(op);
    for (int64_t g = 0; g < n; ++g) {
      int64_t s = 0;  // |s| <= 2^31, exact; i32 wraps it
      for (int64_t i = 0; i < group; ++i) s += a[group * g + i].i * b[group * g + i].i;
      ScalarValue r;
      r.i = normalize_int(s, DType::i32);
      o[g] = r;
    }
  }

  void exec_lookup(const Op& op) {
    expect_args(op, 1, 1);
    DType t = result_type(op).dtype;
    Tile& o = out(op);
    const ScalarValue* x = in_n(op, 0, static_cast<int64_t>(o.size()));
    const std::vector<int64_t>& table = op.ints;
    for (size_t j = 0; j < o.size(); ++j) {
      // Indices are normalised: an unsigned one is never negative here.
      int64_t i = x[j].i;
      bool inside = i >= 0 && i < static_cast<int64_t>(table.size());
      o[j] = ScalarValue{0, inside ? normalize_int(table[static_cast<size_t>(i)], t) : 0};
    }
  }

  void exec_for(const Op& op) {
    expect_args(op, 3, 3);
    if (op.regions.size() != 1) fail(op, "needs exactly one body region");
    DType t = result_type(op).dtype;
    int64_t lo = scalar_in(op, 0).i, hi = scalar_in(op, 1).i, step = scalar_in(op, 2).i;
    if (step <= 0) return;
    Tile& iv = out(op);
    if (iv.size() != 1) fail(op, "induction variable must be a scalar");
    for (int64_t i = lo; i < hi;) {
      iv[0] = ScalarValue{0, i};
      exec_block(op.regions[0]);
      int64_t next;
      // The loop ends where the induction dtype would wrap.
      if (__builtin_add_overflow(i, step, &next) || normalize_int(next, t) != next) break;
      i = next;
    }
  }

  void exec_if(const Op& op) {
    expect_args(op, 1, 1);
    if (op.regions.empty() || op.regions.size() > 2) fail(op, "needs one or two regions");
    if (scalar_in(op, 0).i != 0)
      exec_block(op.regions[0]);
    else if (op.regions.size() == 2)
      exec_block(op.regions[1]);
  }

  void exec_var(const Op& op) {
    if (op.ival < 0 || op.ival >= static_cast<int64_t>(k_.vars.size()))
      fail(op, "unknown variable " + std::to_string(op.ival));
    Tile& var = vars_[op.ival];
    int64_t n = k_.vars[op.ival].numel();
    if (op.kind == OpKind::VarLoad) {
      expect_args(op, 0, 0);
      if (static_cast<int64_t>(var.size()) != n)
        fail(op, "variable " + std::to_string(op.ival) + " is read before it is declared");
      Tile& o = out(op);
      if (o.size() != var.size()) fail(op, "result type differs from the variable's");
      o = var;
      return;
    }
    expect_args(op, 1, 1);
    const ScalarValue* v = in_n(op, 0, n);
    if (op.kind == OpKind::VarStore && static_cast<int64_t>(var.size()) != n)
      fail(op, "variable " + std::to_string(op.ival) + " is assigned before it is declared");
    var.assign(v, v + n);
  }

  const Kernel& k_;
  const std::vector<Arg>& args_;
  Grid grid_{};
  std::array<int64_t, 3> pid_{};
  std::vector<Tile> vals_;                           // by value id
  std::vector<Tile> vars_;                           // by variable id
  std::vector<std::vector<unsigned char>> scratch_;  // this program's, by scratch index
  std::vector<int64_t> idx_;
};

}  // namespace

void interpret(const Kernel& k, const std::vector<Arg>& args, const Grid& grid) {
  check_args(k, args);
  Interpreter(k, args).run(grid);
}

}  // namespace kiln
