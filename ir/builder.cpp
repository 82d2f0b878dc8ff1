#include "ir/builder.h"

#include <cmath>

#include "ir/error.h"
#include "ir/scalar_eval.h"
#include "ir/verifier.h"

namespace kiln {

namespace {
thread_local KernelBuilder* g_current = nullptr;

std::string shapes_of(const Value& a, const Value& b) {
  return type_str(a.type()) + " and " + type_str(b.type());
}
}  // namespace

// ---- Value / Var / Index ------------------------------------------------------

const Type& Value::type() const {
  if (!b_) throw Error("use of an empty kiln::Value (default-constructed, never assigned)");
  return b_->type_of(*this);
}

Value Value::to(DType t) const {
  if (!b_) throw Error("cast of an empty kiln::Value (default-constructed, never assigned)");
  b_->check_usable(*this, "cast");
  if (dtype() == t) return *this;
  return b_->emit(OpKind::Cast, {*this}, Type{t, shape()});
}

Value Value::bitcast(DType t) const {
  if (!b_) throw Error("bitcast of an empty kiln::Value (default-constructed, never assigned)");
  b_->check_usable(*this, "bitcast");
  if (t == DType::boolean || dtype() == DType::boolean)
    b_->fail("bitcast", "bool has no defined bit layout; compare or cast instead");
  int from = dtype_bits(dtype()), to = dtype_bits(t);
  if (from == to) return b_->emit(OpKind::Bitcast, {*this}, Type{t, shape()});
  // A view: the last axis holds the same bytes in the new element width.
  Shape s = shape();
  if (s.empty() || (s.back() * from) % to != 0)
    b_->fail("bitcast", "cannot view " + type_str(type()) + " as " + std::string(dtype_name(t)) +
                            ": the last axis is not a whole number of " +
                            std::string(dtype_name(t)) + " elements");
  s.back() = s.back() * from / to;
  return b_->emit(OpKind::Bitcast, {*this}, Type{t, s});
}

Value Var::get() const { return b_->load_var(id_); }
Var& Var::operator=(const Value& v) {
  b_->store_var(id_, v);
  return *this;
}
Var& Var::operator+=(const Value& v) { return *this = get() + v; }
Var& Var::operator-=(const Value& v) { return *this = get() - v; }
Var& Var::operator*=(const Value& v) { return *this = get() * v; }

Value Index::as_value(KernelBuilder& b, DType t) const {
  if (v_.valid()) return v_;
  return b.constant(static_cast<double>(c_), t);
}

// ---- KernelBuilder ------------------------------------------------------------

KernelBuilder::KernelBuilder(std::string name, const Spec& spec) : prev_current_(g_current) {
  kernel_.name = std::move(name);
  for (const auto& [k, v] : spec.constexprs) kernel_.constexprs.emplace_back(k, v);
  blocks_.push_back(&kernel_.body);
  scope_stack_.push_back(0);
  scope_open_.push_back(true);
  g_current = this;
}

KernelBuilder::~KernelBuilder() { g_current = prev_current_; }

KernelBuilder& KernelBuilder::current() {
  if (!g_current) throw Error("DSL function called outside of a KernelBuilder");
  return *g_current;
}

void KernelBuilder::fail(std::string_view op, const std::string& why) const {
  throw Error("kernel '" + kernel_.name + "', op " + std::string(op) + ": " + why);
}

void KernelBuilder::check_usable(const Value& v, std::string_view op) const {
  if (!v.valid()) fail(op, "operand is an empty Value");
  if (v.builder() != this) fail(op, "operand belongs to another kernel");
  int scope = value_scope_.at(v.id());
  if (!scope_open_.at(scope))
    fail(op, "value %" + std::to_string(v.id()) +
                 " is used outside the loop or if body that defines it "
                 "(a loop variable, or a value computed inside the body); carry it "
                 "out through a var");
}

int KernelBuilder::new_value(const Type& t) {
  int id = kernel_.add_value(t);
  value_scope_.push_back(scope_stack_.back());
  return id;
}

Op KernelBuilder::make_op(OpKind kind, const std::vector<Value>& args, int64_t ival) {
  if (finished_) fail(op_name(kind), "the kernel was already finished");
  Op op;
  op.kind = kind;
  for (const Value& a : args) {
    check_usable(a, op_name(kind));
    op.args.push_back(a.id());
  }
  op.ival = ival;
  return op;
}

Value KernelBuilder::emit(OpKind kind, const std::vector<Value>& args, const Type& result,
                          int64_t ival, double fval, std::vector<int64_t> ints) {
  Op op = make_op(kind, args, ival);
  op.fval = fval;
  op.ints = std::move(ints);
  op.result = new_value(result);
  block().ops.push_back(std::move(op));
  return Value(this, block().ops.back().result);
}

void KernelBuilder::emit_void(OpKind kind, const std::vector<Value>& args, int64_t ival) {
  block().ops.push_back(make_op(kind, args, ival));
}

Value KernelBuilder::constant(double v, DType t, const Shape& shape) {
  // Stored already rounded/wrapped to t so equal kernels print and hash equal.
  if (is_float(t)) {
    double r = static_cast<double>(round_to_float_dtype(static_cast<float>(v), t));
    return emit(OpKind::Const, {}, Type{t, shape}, 0, r);
  }
  if (t == DType::boolean) return emit(OpKind::Const, {}, Type{t, shape}, v != 0, 0.0);
  if (!std::isfinite(v) || v < -9223372036854775808.0 || v >= 9223372036854775808.0)
    fail("const",
         "the number " + std::to_string(v) + " does not fit " + std::string(dtype_name(t)));
  return emit(OpKind::Const, {}, Type{t, shape}, normalize_int(static_cast<int64_t>(v), t), 0.0);
}

void KernelBuilder::check_new_name(const std::string& name, std::string_view op) {
  for (const auto& p : kernel_.params)
    if (p.name == name) fail(op, "parameter '" + name + "' declared twice");
  for (const auto& s : kernel_.scratch)
    if (s.name == name) fail(op, "'" + name + "' is already a scratch array");
}

Buffer KernelBuilder::buffer(const std::string& name, DType t) {
  check_new_name(name, "buffer");
  kernel_.params.push_back({name, ParamKind::Buffer, t});
  return Buffer(this, static_cast<int>(kernel_.params.size()) - 1, t);
}

Buffer KernelBuilder::scratch(const std::string& name, DType t, int64_t elems) {
  check_new_name(name, "scratch");
  if (elems < 1 || elems > kMaxScratchElems)
    fail("scratch", "'" + name + "' has " + std::to_string(elems) + " elements (1.." +
                        std::to_string(kMaxScratchElems) + ")");
  kernel_.scratch.push_back({name, t, elems});
  return Buffer(this, static_cast<int>(scratch_ref(static_cast<int>(kernel_.scratch.size()) - 1)),
                t);
}

Value KernelBuilder::scalar(const std::string& name, DType t) {
  check_new_name(name, "scalar");
  kernel_.params.push_back({name, ParamKind::Scalar, t});
  return emit(OpKind::Param, {}, Type{t, {}}, static_cast<int64_t>(kernel_.params.size()) - 1);
}

Value KernelBuilder::program_id(int axis) {
  if (axis < 0 || axis > 2) fail("program_id", "axis " + std::to_string(axis) + " not in 0..2");
  return emit(OpKind::ProgramId, {}, Type{DType::i32, {}}, axis);
}

Value KernelBuilder::num_programs(int axis) {
  if (axis < 0 || axis > 2) fail("num_programs", "axis " + std::to_string(axis) + " not in 0..2");
  return emit(OpKind::NumPrograms, {}, Type{DType::i32, {}}, axis);
}

Var KernelBuilder::var(const Value& init) {
  check_usable(init, "var");
  int id = static_cast<int>(kernel_.vars.size());
  kernel_.vars.push_back(init.type());
  var_scope_.push_back(scope_stack_.back());
  emit_void(OpKind::VarDecl, {init}, id);
  return Var(this, id);
}

Value KernelBuilder::load_var(int var_id) {
  if (!scope_open_.at(var_scope_.at(var_id)))
    fail("var_load", "variable " + std::to_string(var_id) +
                         " is used outside the loop or if body that declares it");
  return emit(OpKind::VarLoad, {}, kernel_.vars.at(var_id), var_id);
}

void KernelBuilder::store_var(int var_id, const Value& v) {
  check_usable(v, "var_store");
  if (!scope_open_.at(var_scope_.at(var_id)))
    fail("var_store", "variable " + std::to_string(var_id) +
                          " is used outside the loop or if body that declares it");
  const Type& vt = kernel_.vars.at(var_id);
  if (v.dtype() != vt.dtype)
    fail("var_store", "assigning " + type_str(v.type()) + " to a variable of type " + type_str(vt) +
                          "; cast with .to()");
  Value x = v;
  if (v.shape() != vt.shape) {
    Shape out;
    if (!broadcast_shapes(v.shape(), vt.shape, &out) || out != vt.shape)
      fail("var_store", "assigning " + type_str(v.type()) + " to a variable of type " +
                            type_str(vt) + ": shapes differ");
    x = broadcast_to(v, vt.shape);
  }
  emit_void(OpKind::VarStore, {x}, var_id);
}

class KernelBuilder::ScopeGuard {
 public:
  ScopeGuard(KernelBuilder& k, Block* b) : k_(k), scope_(static_cast<int>(k.scope_open_.size())) {
    k_.scope_open_.push_back(true);
    k_.scope_stack_.push_back(scope_);
    k_.blocks_.push_back(b);
  }
  ~ScopeGuard() {
    k_.blocks_.pop_back();
    k_.scope_stack_.pop_back();
    k_.scope_open_[scope_] = false;
  }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  KernelBuilder& k_;
  int scope_;
};

void KernelBuilder::for_(Index lo, Index hi, Index step, const std::function<void(Value)>& body) {
  // The loop runs in the dtype of its value bounds (all alike); literals adopt it.
  DType t = DType::i32;
  const Index* typed = nullptr;
  for (const Index* i : {&lo, &hi, &step}) {
    if (!i->is_value()) continue;
    check_usable(i->value(), "for");
    const Type& vt = i->value().type();
    if (!is_int(vt.dtype) || !vt.is_scalar())
      fail("for", "loop bounds must be integer scalars, got " + type_str(vt));
    if (typed && vt.dtype != t)
      fail("for", "loop bounds mix " + std::string(dtype_name(t)) + " and " +
                      std::string(dtype_name(vt.dtype)) + "; cast one with .to()");
    typed = i;
    t = vt.dtype;
  }
  Value vlo = lo.as_value(*this, t), vhi = hi.as_value(*this, t), vstep = step.as_value(*this, t);
  Op op;
  op.kind = OpKind::For;
  op.args = {vlo.id(), vhi.id(), vstep.id()};
  Block b;
  {
    ScopeGuard scope(*this, &b);
    op.result = new_value(Type{t, {}});
    body(Value(this, op.result));
  }
  op.regions.push_back(std::move(b));
  block().ops.push_back(std::move(op));
}

void KernelBuilder::if_(const Value& cond, const std::function<void()>& then_body,
                        const std::function<void()>& else_body) {
  check_usable(cond, "if");
  if (cond.dtype() != DType::boolean || !cond.type().is_scalar())
    fail("if", "condition must be a bool scalar, got " + type_str(cond.type()));
  Op op;
  op.kind = OpKind::If;
  op.args = {cond.id()};
  for (const auto* fn : {&then_body, &else_body}) {
    Block b;
    {
      ScopeGuard scope(*this, &b);
      if (*fn) (*fn)();
    }
    op.regions.push_back(std::move(b));
  }
  block().ops.push_back(std::move(op));
}

Kernel KernelBuilder::finish() {
  if (finished_) fail("finish", "the kernel was already finished");
  finished_ = true;
  verify(kernel_);
  return kernel_;
}

// ---- free functions -------------------------------------------------------------

namespace {

KernelBuilder& builder_of(const Value& v) {
  if (!v.valid()) throw Error("use of an empty kiln::Value");
  return *v.builder();
}

// Brings a and b to a common shape (numpy rules), failing with both types.
std::pair<Value, Value> broadcast_pair(const Value& a, const Value& b, std::string_view op) {
  KernelBuilder& k = builder_of(a);
  if (a.builder() != b.builder()) k.fail(op, "operands belong to different kernels");
  k.check_usable(a, op);
  k.check_usable(b, op);
  Shape s;
  if (!broadcast_shapes(a.shape(), b.shape(), &s))
    k.fail(op, "shapes do not broadcast: " + shapes_of(a, b));
  return {a.shape() == s ? a : broadcast_to(a, s), b.shape() == s ? b : broadcast_to(b, s)};
}

Value binary(OpKind kind, const Value& a, const Value& b) {
  KernelBuilder& k = builder_of(a);
  std::string_view name = op_name(kind);
  auto [x, y] = broadcast_pair(a, b, name);
  if (x.dtype() != y.dtype())
    k.fail(name, "operand dtypes differ: " + shapes_of(a, b) + "; cast one with .to()");
  DType t = x.dtype();
  bool bit_op = kind == OpKind::And || kind == OpKind::Or || kind == OpKind::Xor;
  bool shift = kind == OpKind::Shl || kind == OpKind::Shr;
  if ((bit_op && !is_int(t) && t != DType::boolean) || (shift && !is_int(t)))
    k.fail(name, "needs integer operands, got " + shapes_of(a, b));
  if (t == DType::boolean && !bit_op && kind != OpKind::Eq && kind != OpKind::Ne)
    k.fail(name, "not defined on bool operands");
  Type rt{is_comparison(kind) ? DType::boolean : t, x.shape()};
  return k.emit(kind, {x, y}, rt);
}

Value unary(OpKind kind, const Value& x) {
  KernelBuilder& k = builder_of(x);
  if (is_float_only_unary(kind) && !is_float(x.dtype()))
    k.fail(op_name(kind),
           "needs a float operand, got " + type_str(x.type()) + "; cast with .to(DType::f32)");
  if (kind == OpKind::Neg && x.dtype() == DType::boolean)
    k.fail(op_name(kind), "not defined on bool");
  return k.emit(kind, {x}, x.type());
}

Value reduce(OpKind kind, const Value& x, int axis) {
  KernelBuilder& k = builder_of(x);
  int r = x.type().rank();
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) k.fail(op_name(kind), "axis out of range for " + type_str(x.type()));
  if (x.dtype() == DType::boolean) k.fail(op_name(kind), "not defined on bool");
  Shape s = x.shape();
  s.erase(s.begin() + axis);
  DType t = kind == OpKind::ArgMax ? DType::i32 : x.dtype();
  return k.emit(kind, {x}, Type{t, s}, axis);
}

Value reduce_all(OpKind kind, Value x) {
  while (x.type().rank() > 0) x = reduce(kind, x, x.type().rank() - 1);
  return x;
}

Value check_offsets(const Pointer& p, std::string_view op) {
  KernelBuilder& k = *p.buffer.builder();
  k.check_usable(p.offsets, op);
  DType t = p.offsets.dtype();
  if (t != DType::i32 && t != DType::i64)
    k.fail(op, "offsets into buffer '" + *memory_name(k.kernel(), p.buffer.param()) +
                   "' must be i32 or i64, got " + type_str(p.offsets.type()));
  return p.offsets;
}

// Brings offsets, value and mask to one shape; the value must already have
// the buffer's dtype.
std::vector<Value> write_args(const Pointer& p, const Value& v, const Value* mask,
                              std::string_view op) {
  KernelBuilder& k = *p.buffer.builder();
  Value off = check_offsets(p, op);
  k.check_usable(v, op);
  const std::string& bname = *memory_name(k.kernel(), p.buffer.param());
  if (v.dtype() != p.buffer.dtype())
    k.fail(op, "buffer '" + bname + "' holds " + std::string(dtype_name(p.buffer.dtype())) +
                   " but the value is " + type_str(v.type()) + "; cast with .to()");
  Shape s = off.shape();
  if (!broadcast_shapes(s, v.shape(), &s) || (mask && !broadcast_shapes(s, mask->shape(), &s)))
    k.fail(op, "offsets, value and mask shapes do not broadcast for buffer '" + bname + "'");
  std::vector<Value> args = {off.shape() == s ? off : broadcast_to(off, s),
                             v.shape() == s ? v : broadcast_to(v, s)};
  if (mask) {
    if (mask->dtype() != DType::boolean)
      k.fail(op, "mask must be bool, got " + type_str(mask->type()));
    args.push_back(mask->shape() == s ? *mask : broadcast_to(*mask, s));
  }
  return args;
}

Value atomic(OpKind kind, const Pointer& p, const Value& v, const Value* mask) {
  KernelBuilder& k = *p.buffer.builder();
  if (is_scratch_ref(p.buffer.param()))
    k.fail(op_name(kind), "'" + *memory_name(k.kernel(), p.buffer.param()) +
                              "' is a scratch array: it is private to the program, so "
                              "store to it instead");
  auto args = write_args(p, v, mask, op_name(kind));
  return k.emit(kind, args, Type{p.buffer.dtype(), args[0].shape()}, p.buffer.param());
}

}  // namespace

Value constant_like(const Value& ref, double c, bool is_integral) {
  KernelBuilder& k = builder_of(ref);
  DType t = ref.dtype();
  if (!is_float(t) && !is_integral && c != std::floor(c))
    k.fail("const", "the number " + std::to_string(c) + " is mixed with an integer value " +
                        type_str(ref.type()));
  return k.constant(c, t);
}

Value arange(int64_t n) {
  KernelBuilder& k = KernelBuilder::current();
  if (n <= 0) k.fail("arange", "size must be positive, got " + std::to_string(n));
  return k.emit(OpKind::Arange, {}, Type{DType::i32, {n}});
}

Value full(const Shape& shape, double v, DType t) {
  return KernelBuilder::current().constant(v, t, shape);
}
Value zeros(DType t, const Shape& shape) { return full(shape, 0.0, t); }
Value program_id(int axis) { return KernelBuilder::current().program_id(axis); }

Value broadcast_to(const Value& v, const Shape& shape) {
  KernelBuilder& k = builder_of(v);
  Shape out;
  if (!broadcast_shapes(v.shape(), shape, &out) || out != shape)
    k.fail("broadcast", "cannot broadcast " + type_str(v.type()) + " to " + shape_str(shape));
  if (v.shape() == shape) return v;
  return k.emit(OpKind::Broadcast, {v}, Type{v.dtype(), shape});
}

Value reshape(const Value& v, const Shape& shape) {
  KernelBuilder& k = builder_of(v);
  Type t{v.dtype(), shape};
  if (t.numel() != v.type().numel())
    k.fail("reshape", "cannot reshape " + type_str(v.type()) + " to " + shape_str(shape));
  if (v.shape() == shape) return v;
  return k.emit(OpKind::Reshape, {v}, t);
}

Value expand_dims(const Value& v, int axis) {
  Shape s = v.shape();
  if (axis < 0) axis += static_cast<int>(s.size()) + 1;
  if (axis < 0 || axis > static_cast<int>(s.size()))
    builder_of(v).fail("expand_dims", "axis out of range for " + type_str(v.type()));
  s.insert(s.begin() + axis, 1);
  return reshape(v, s);
}

Value transpose(const Value& v) {
  KernelBuilder& k = builder_of(v);
  if (v.type().rank() != 2) k.fail("transpose", "needs a rank-2 tile, got " + type_str(v.type()));
  return k.emit(OpKind::Transpose, {v}, Type{v.dtype(), {v.shape()[1], v.shape()[0]}});
}

Value slice(const Value& v, const std::vector<int64_t>& starts, const Shape& sizes) {
  KernelBuilder& k = builder_of(v);
  const Shape& s = v.shape();
  if (starts.size() != s.size() || sizes.size() != s.size())
    k.fail("slice", "needs one start and size per axis of " + type_str(v.type()));
  for (size_t i = 0; i < s.size(); ++i)
    if (starts[i] < 0 || sizes[i] <= 0 || starts[i] + sizes[i] > s[i])
      k.fail("slice", "range out of bounds for " + type_str(v.type()));
  return k.emit(OpKind::Slice, {v}, Type{v.dtype(), sizes}, 0, 0, starts);
}

Value operator+(const Value& a, const Value& b) { return binary(OpKind::Add, a, b); }
Value operator-(const Value& a, const Value& b) { return binary(OpKind::Sub, a, b); }
Value operator*(const Value& a, const Value& b) { return binary(OpKind::Mul, a, b); }
Value operator/(const Value& a, const Value& b) { return binary(OpKind::Div, a, b); }
Value operator%(const Value& a, const Value& b) { return binary(OpKind::Rem, a, b); }
Value operator&(const Value& a, const Value& b) { return binary(OpKind::And, a, b); }
Value operator|(const Value& a, const Value& b) { return binary(OpKind::Or, a, b); }
Value operator^(const Value& a, const Value& b) { return binary(OpKind::Xor, a, b); }
Value operator<<(const Value& a, const Value& b) { return binary(OpKind::Shl, a, b); }
Value operator>>(const Value& a, const Value& b) { return binary(OpKind::Shr, a, b); }
Value operator==(const Value& a, const Value& b) { return binary(OpKind::Eq, a, b); }
Value operator!=(const Value& a, const Value& b) { return binary(OpKind::Ne, a, b); }
Value operator<(const Value& a, const Value& b) { return binary(OpKind::Lt, a, b); }
Value operator<=(const Value& a, const Value& b) { return binary(OpKind::Le, a, b); }
Value operator>(const Value& a, const Value& b) { return binary(OpKind::Gt, a, b); }
Value operator>=(const Value& a, const Value& b) { return binary(OpKind::Ge, a, b); }
Value operator-(const Value& a) { return unary(OpKind::Neg, a); }
Value operator~(const Value& a) {
  if (is_float(a.dtype())) builder_of(a).fail("not", "needs an integer or bool operand");
  return unary(OpKind::Not, a);
}
Value operator!(const Value& a) {
  if (a.dtype() != DType::boolean) builder_of(a).fail("not", "'!' needs a bool operand");
  return unary(OpKind::Not, a);
}

Value minimum(const Value& a, const Value& b) { return binary(OpKind::Min, a, b); }
Value maximum(const Value& a, const Value& b) { return binary(OpKind::Max, a, b); }

Value fma(const Value& a, const Value& b, const Value& c) {
  KernelBuilder& k = builder_of(a);
  if (!is_float(a.dtype())) k.fail("fma", "needs float operands, got " + type_str(a.type()));
  auto [x, y] = broadcast_pair(a, b, "fma");
  auto [x2, z] = broadcast_pair(x, c, "fma");
  if (x2.shape() != y.shape()) y = broadcast_to(y, x2.shape());
  if (x2.dtype() != y.dtype() || x2.dtype() != z.dtype())
    k.fail("fma", "operand dtypes differ; cast with .to()");
  return k.emit(OpKind::Fma, {x2, y, z}, x2.type());
}

Value where(const Value& cond, const Value& a, const Value& b) {
  KernelBuilder& k = builder_of(cond);
  if (cond.dtype() != DType::boolean)
    k.fail("select", "condition must be bool, got " + type_str(cond.type()));
  if (a.dtype() != b.dtype()) k.fail("select", "branches differ: " + shapes_of(a, b));
  Shape s;
  if (!broadcast_shapes(cond.shape(), a.shape(), &s) || !broadcast_shapes(s, b.shape(), &s))
    k.fail("select", "shapes do not broadcast");
  return k.emit(OpKind::Select, {broadcast_to(cond, s), broadcast_to(a, s), broadcast_to(b, s)},
                Type{a.dtype(), s});
}

Value lookup(const std::vector<int64_t>& table, DType result_dtype, const Value& index) {
  KernelBuilder& k = builder_of(index);
  k.check_usable(index, "lookup");
  if (!is_int(index.dtype()))
    k.fail("lookup", "index must be an integer tile, got " + type_str(index.type()));
  if (!is_int(result_dtype))
    k.fail("lookup",
           "result dtype must be an integer dtype, got " + std::string(dtype_name(result_dtype)));
  if (table.empty() || table.size() > kMaxLookupEntries)
    k.fail("lookup", "table has " + std::to_string(table.size()) +
                         " entries; a lookup table holds 1 to " +
                         std::to_string(kMaxLookupEntries));
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i] < int_min(result_dtype) || table[i] > int_max(result_dtype))
      k.fail("lookup", "table entry " + std::to_string(i) + " (" + std::to_string(table[i]) +
                           ") does not fit " + std::string(dtype_name(result_dtype)));
  return k.emit(OpKind::Lookup, {index}, Type{result_dtype, index.shape()}, 0, 0, table);
}

Value abs(const Value& x) { return unary(OpKind::Abs, x); }
Value floor(const Value& x) { return unary(OpKind::Floor, x); }
Value exp(const Value& x) { return unary(OpKind::Exp, x); }
Value exp2(const Value& x) { return unary(OpKind::Exp2, x); }
Value log(const Value& x) { return unary(OpKind::Log, x); }
Value log2(const Value& x) { return unary(OpKind::Log2, x); }
Value sqrt(const Value& x) { return unary(OpKind::Sqrt, x); }
Value rsqrt(const Value& x) { return unary(OpKind::Rsqrt, x); }
Value tanh(const Value& x) { return unary(OpKind::Tanh, x); }
Value sigmoid(const Value& x) { return unary(OpKind::Sigmoid, x); }
Value erf(const Value& x) { return unary(OpKind::Erf, x); }

Value sum(const Value& x, int axis) { return reduce(OpKind::ReduceSum, x, axis); }
Value max(const Value& x, int axis) { return reduce(OpKind::ReduceMax, x, axis); }
Value min(const Value& x, int axis) { return reduce(OpKind::ReduceMin, x, axis); }
Value sum(const Value& x) { return reduce_all(OpKind::ReduceSum, x); }
Value max(const Value& x) { return reduce_all(OpKind::ReduceMax, x); }
Value min(const Value& x) { return reduce_all(OpKind::ReduceMin, x); }
Value argmax(const Value& x, int axis) { return reduce(OpKind::ArgMax, x, axis); }

Value dot(const Value& a, const Value& b, const Value& acc) {
  KernelBuilder& k = builder_of(a);
  for (const Value* v : {&a, &b, &acc}) {
    k.check_usable(*v, "dot");
    if (v->type().rank() != 2) k.fail("dot", "operands must be rank 2, got " + type_str(v->type()));
  }
  const Shape &sa = a.shape(), &sb = b.shape(), &sc = acc.shape();
  if (sa[1] != sb[0] || sc[0] != sa[0] || sc[1] != sb[1])
    k.fail("dot", "shapes " + type_str(a.type()) + " x " + type_str(b.type()) + " + " +
                      type_str(acc.type()) + " do not form [M,K] x [K,N] + [M,N]");
  bool float_ok = is_float(a.dtype()) && a.dtype() == b.dtype() && acc.dtype() == DType::f32;
  bool int_ok = (a.dtype() == DType::i8 || a.dtype() == DType::u8) && b.dtype() == DType::i8 &&
                acc.dtype() == DType::i32;
  if (!float_ok && !int_ok)
    k.fail("dot", "unsupported dtypes " + std::string(dtype_name(a.dtype())) + " x " +
                      std::string(dtype_name(b.dtype())) + " -> " +
                      std::string(dtype_name(acc.dtype())) +
                      " (float x same float -> f32, or i8/u8 x i8 -> i32)");
  return k.emit(OpKind::Dot, {a, b, acc}, acc.type());
}

Value dot_groups(const Value& a, const Value& b) {
  KernelBuilder& k = builder_of(a);
  k.check_usable(a, "dot_groups");
  k.check_usable(b, "dot_groups");
  const int group = dot_group_size(a.dtype(), b.dtype());
  if (!group)
    k.fail("dot_groups", "unsupported dtypes " + type_str(a.type()) + " . " + type_str(b.type()) +
                             " (u8 or i8 with i8, or i16 with i16)");
  if (a.shape() != b.shape() || a.type().rank() < 1 || a.shape().back() % group)
    k.fail("dot_groups", "shapes " + type_str(a.type()) + " . " + type_str(b.type()) +
                             " are not one [.., " + std::to_string(group) + "k]");
  Shape out = a.shape();
  out.back() /= group;
  return k.emit(OpKind::DotGroups, {a, b}, Type{DType::i32, out});
}

Buffer Buffer::at(const Value& base) const {
  Buffer view = *this;
  Value b = base.to(DType::i64);
  view.base_ = base_.valid() ? base_ + b : b;
  return view;
}

Pointer operator+(const Buffer& b, const Value& offsets) {
  if (!b.base().valid()) return Pointer{b, offsets};
  return Pointer{b, offsets.to(DType::i64) + b.base()};
}
Pointer operator+(const Pointer& p, const Value& offsets) {
  if (p.offsets.dtype() == offsets.dtype()) return Pointer{p.buffer, p.offsets + offsets};
  return Pointer{p.buffer, p.offsets.to(DType::i64) + offsets.to(DType::i64)};  // a based view's
}

Value load(const Pointer& p) {
  KernelBuilder& k = *p.buffer.builder();
  Value off = check_offsets(p, "load");
  return k.emit(OpKind::Load, {off}, Type{p.buffer.dtype(), off.shape()}, p.buffer.param());
}

Value load(const Pointer& p, const Value& mask, double other) {
  KernelBuilder& k = *p.buffer.builder();
  DType t = p.buffer.dtype();
  return load(p, mask, k.constant(other, t));
}

Value load(const Pointer& p, const Value& mask, const Value& other) {
  KernelBuilder& k = *p.buffer.builder();
  Value off = check_offsets(p, "load");
  k.check_usable(mask, "load");
  k.check_usable(other, "load");
  if (mask.dtype() != DType::boolean)
    k.fail("load", "mask must be bool, got " + type_str(mask.type()));
  if (other.dtype() != p.buffer.dtype())
    k.fail("load", "'other' is " + type_str(other.type()) + " but the buffer holds " +
                       std::string(dtype_name(p.buffer.dtype())));
  Shape s;
  if (!broadcast_shapes(off.shape(), mask.shape(), &s) || !broadcast_shapes(s, other.shape(), &s))
    k.fail("load", "offsets, mask and other shapes do not broadcast");
  return k.emit(OpKind::Load, {broadcast_to(off, s), broadcast_to(mask, s), broadcast_to(other, s)},
                Type{p.buffer.dtype(), s}, p.buffer.param());
}

void prefetch(const Pointer& p) {
  Value off = check_offsets(p, "prefetch");
  if (is_scratch_ref(p.buffer.param())) return;  // already close
  p.buffer.builder()->emit_void(OpKind::Prefetch, {off}, p.buffer.param());
}

void store(const Pointer& p, const Value& v) {
  auto args = write_args(p, v, nullptr, "store");
  p.buffer.builder()->emit_void(OpKind::Store, args, p.buffer.param());
}

void store(const Pointer& p, const Value& v, const Value& mask) {
  auto args = write_args(p, v, &mask, "store");
  p.buffer.builder()->emit_void(OpKind::Store, args, p.buffer.param());
}

Value atomic_add(const Pointer& p, const Value& v) {
  return atomic(OpKind::AtomicAdd, p, v, nullptr);
}
Value atomic_add(const Pointer& p, const Value& v, const Value& mask) {
  return atomic(OpKind::AtomicAdd, p, v, &mask);
}
Value atomic_max(const Pointer& p, const Value& v, const Value& mask) {
  return atomic(OpKind::AtomicMax, p, v, &mask);
}
Value atomic_min(const Pointer& p, const Value& v, const Value& mask) {
  return atomic(OpKind::AtomicMin, p, v, &mask);
}
Value atomic_xchg(const Pointer& p, const Value& v, const Value& mask) {
  return atomic(OpKind::AtomicXchg, p, v, &mask);
}

}  // namespace kiln
