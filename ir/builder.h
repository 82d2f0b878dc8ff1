// The embedded C++ DSL: build a kernel's IR by writing ordinary C++.
//
// Kernel authors write tile programs with operator overloading and a few
// free functions (arange, load, store, sum, dot, ...), in the style of
// Triton. Every misuse the DSL can see is reported when the kernel is built,
// with the kernel and op named: mixing dtypes or incompatible shapes,
// storing a float tile into an int buffer, a value (such as a loop
// variable) used outside the loop that defines it. Broadcasting follows
// numpy; casts are explicit (`x.to(DType::f32)`); a C++ number mixed with a
// value takes the value's dtype.
//
//   KernelBuilder k("scale", spec);
//   auto x = k.buffer("x", T), y = k.buffer("y", T);
//   auto n = k.scalar("n", DType::i32);
//   auto c = k.program_id(0) * B + arange(B);
//   store(y + c, load(x + c, c < n, 0.0) * 2.0, c < n);
//   Kernel kern = k.finish();
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/kernel.h"
#include "ir/spec.h"

namespace kiln {

class KernelBuilder;

class Value {
 public:
  Value() = default;
  Value(KernelBuilder* b, int id) : b_(b), id_(id) {}

  // type() refers into the builder's table, which emitting an op may move:
  // do not hold it across a call that builds ops. shape() is a copy, so an
  // expression like broadcast_to(x.to(t), x.shape()) is safe in any
  // evaluation order.
  const Type& type() const;
  DType dtype() const { return type().dtype; }
  Shape shape() const { return type().shape; }
  int id() const { return id_; }
  KernelBuilder* builder() const { return b_; }
  bool valid() const { return b_ != nullptr; }

  Value to(DType t) const;       // Cast
  Value bitcast(DType t) const;  // Bitcast

 private:
  KernelBuilder* b_ = nullptr;
  int id_ = -1;
};

// A mutable variable: reading it loads the current value, assigning stores.
class Var {
 public:
  Var(KernelBuilder* b, int var_id) : b_(b), id_(var_id) {}
  Var(const Var&) = default;

  Value get() const;
  operator Value() const { return get(); }
  KernelBuilder* builder() const { return b_; }
  Var& operator=(const Value& v);
  Var& operator=(const Var& v) { return *this = v.get(); }
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  Var& operator=(T c);
  Var& operator+=(const Value& v);
  Var& operator-=(const Value& v);
  Var& operator*=(const Value& v);

 private:
  KernelBuilder* b_;
  int id_;
};

class Buffer {
 public:
  Buffer(KernelBuilder* b, int param, DType dtype) : b_(b), param_(param), dtype_(dtype) {}
  KernelBuilder* builder() const { return b_; }
  int param() const { return param_; }
  DType dtype() const { return dtype_; }
  // The same buffer from element `base` on (a scalar): every offset taken
  // from the view is shifted by it, in i64. What a grouped kernel uses to
  // address one expert's slab of a stacked weight with the plain kernel's
  // addressing.
  Buffer at(const Value& base) const;
  const Value& base() const { return base_; }  // invalid: none

 private:
  KernelBuilder* b_;
  int param_;
  DType dtype_;
  Value base_;
};

// `buffer + offsets`: not an IR value, only what load/store/atomics take.
struct Pointer {
  Buffer buffer;
  Value offsets;
};

// A loop bound: a value or a C++ integer.
class Index {
 public:
  Index(const Value& v) : v_(v) {}
  Index(const Var& v) : v_(v.get()) {}
  template <class T, class = std::enable_if_t<std::is_integral_v<T>>>
  Index(T c) : c_(static_cast<int64_t>(c)) {}
  Value as_value(KernelBuilder& b, DType t) const;
  bool is_value() const { return v_.valid(); }
  const Value& value() const { return v_; }

 private:
  Value v_;
  int64_t c_ = 0;
};

class KernelBuilder {
 public:
  KernelBuilder(std::string name, const Spec& spec);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  Buffer buffer(const std::string& name, DType t);
  // A scratch array of `elems` elements private to each program
  // (ir/kernel.h's Scratch): load and store reach it like a buffer.
  Buffer scratch(const std::string& name, DType t, int64_t elems);
  Value scalar(const std::string& name, DType t);
  Value program_id(int axis);
  Value num_programs(int axis);
  Var var(const Value& init);
  void for_(Index lo, Index hi, Index step, const std::function<void(Value)>& body);
  void if_(const Value& cond, const std::function<void()>& then_body,
           const std::function<void()>& else_body = {});

  // Verifies and returns the kernel; the builder must not be used afterwards.
  Kernel finish();

  // ---- used by the free functions of the DSL ----
  static KernelBuilder& current();  // the innermost live builder
  Value constant(double v, DType t, const Shape& shape = {});
  Value emit(OpKind kind, const std::vector<Value>& args, const Type& result, int64_t ival = 0,
             double fval = 0, std::vector<int64_t> ints = {});
  void emit_void(OpKind kind, const std::vector<Value>& args, int64_t ival = 0);
  const Type& type_of(const Value& v) const { return kernel_.values.at(v.id()); }
  const Kernel& kernel() const { return kernel_; }
  [[noreturn]] void fail(std::string_view op, const std::string& why) const;
  void check_usable(const Value& v, std::string_view op) const;
  Value load_var(int var_id);
  void store_var(int var_id, const Value& v);

 private:
  // Throws when `name` is already a parameter or scratch array.
  void check_new_name(const std::string& name, std::string_view op);
  int new_value(const Type& t);
  Op make_op(OpKind kind, const std::vector<Value>& args, int64_t ival);
  Block& block() { return *blocks_.back(); }
  // Opens a nested scope emitting into `b`; the scope closes (and its values
  // become unusable) when the guard dies, even if the body threw.
  class ScopeGuard;

  Kernel kernel_;
  std::vector<Block*> blocks_;
  std::vector<int> scope_stack_;  // open scope ids, innermost last
  std::vector<bool> scope_open_;  // by scope id
  std::vector<int> value_scope_;  // by value id
  std::vector<int> var_scope_;    // by var id
  KernelBuilder* prev_current_;
  bool finished_ = false;
};

// ---- creation --------------------------------------------------------------
Value arange(int64_t n);
Value full(const Shape& shape, double v, DType t);
Value zeros(DType t, const Shape& shape);
Value program_id(int axis);
Value broadcast_to(const Value& v, const Shape& shape);
Value reshape(const Value& v, const Shape& shape);
Value expand_dims(const Value& v, int axis);
Value transpose(const Value& v);
Value slice(const Value& v, const std::vector<int64_t>& starts, const Shape& sizes);

// ---- elementwise -------------------------------------------------------------
Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);
Value operator%(const Value& a, const Value& b);
Value operator&(const Value& a, const Value& b);
Value operator|(const Value& a, const Value& b);
Value operator^(const Value& a, const Value& b);
Value operator<<(const Value& a, const Value& b);
Value operator>>(const Value& a, const Value& b);
Value operator==(const Value& a, const Value& b);
Value operator!=(const Value& a, const Value& b);
Value operator<(const Value& a, const Value& b);
Value operator<=(const Value& a, const Value& b);
Value operator>(const Value& a, const Value& b);
Value operator>=(const Value& a, const Value& b);
Value operator-(const Value& a);
Value operator~(const Value& a);
Value operator!(const Value& a);

// A C++ number next to a value becomes a constant of the value's dtype.
Value constant_like(const Value& ref, double c, bool is_integral);
#define KILN_SCALAR_OP(OP)                                                       \
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>          \
  Value operator OP(const Value& a, T c) {                                       \
    return a OP constant_like(a, static_cast<double>(c), std::is_integral_v<T>); \
  }                                                                              \
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>          \
  Value operator OP(T c, const Value& a) {                                       \
    return constant_like(a, static_cast<double>(c), std::is_integral_v<T>) OP a; \
  }
KILN_SCALAR_OP(+)
KILN_SCALAR_OP(-)
KILN_SCALAR_OP(*)
KILN_SCALAR_OP(/)
KILN_SCALAR_OP(%)
KILN_SCALAR_OP(&)
KILN_SCALAR_OP(|)
KILN_SCALAR_OP(^)
KILN_SCALAR_OP(<<)
KILN_SCALAR_OP(>>)
KILN_SCALAR_OP(==)
KILN_SCALAR_OP(!=)
KILN_SCALAR_OP(<)
KILN_SCALAR_OP(<=)
KILN_SCALAR_OP(>)
KILN_SCALAR_OP(>=)
#undef KILN_SCALAR_OP

Value minimum(const Value& a, const Value& b);
Value maximum(const Value& a, const Value& b);
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
Value minimum(const Value& a, T c) {
  return minimum(a, constant_like(a, static_cast<double>(c), std::is_integral_v<T>));
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
Value maximum(const Value& a, T c) {
  return maximum(a, constant_like(a, static_cast<double>(c), std::is_integral_v<T>));
}
Value fma(const Value& a, const Value& b, const Value& c);
Value where(const Value& cond, const Value& a, const Value& b);
// table[index] per element of an integer index tile, as result_dtype (an
// integer dtype); 0 outside the table (see OpKind::Lookup).
Value lookup(const std::vector<int64_t>& table, DType result_dtype, const Value& index);
Value abs(const Value& x);
Value floor(const Value& x);
Value exp(const Value& x);
Value exp2(const Value& x);
Value log(const Value& x);
Value log2(const Value& x);
Value sqrt(const Value& x);
Value rsqrt(const Value& x);
Value tanh(const Value& x);
Value sigmoid(const Value& x);
Value erf(const Value& x);

// ---- reductions and dot ----------------------------------------------------------
Value sum(const Value& x, int axis);
Value max(const Value& x, int axis);
Value min(const Value& x, int axis);
Value sum(const Value& x);  // over all axes, to a scalar
Value max(const Value& x);
Value min(const Value& x);
Value argmax(const Value& x, int axis);
Value dot(const Value& a, const Value& b, const Value& acc);
// Sums of each group of 4 adjacent products of u8|i8 a and i8 b, as i32
// [.., k] for operands [.., 4k], or of 2 of i16 a and b for [.., 2k] (see
// OpKind::DotGroups).
Value dot_groups(const Value& a, const Value& b);

// ---- memory ------------------------------------------------------------------------
Pointer operator+(const Buffer& b, const Value& offsets);
Pointer operator+(const Pointer& p, const Value& offsets);
Value load(const Pointer& p);
Value load(const Pointer& p, const Value& mask, double other);
Value load(const Pointer& p, const Value& mask, const Value& other);
void store(const Pointer& p, const Value& v);
void store(const Pointer& p, const Value& v, const Value& mask);
// A hint that p's elements will be read soon: one prefetch per element on a
// CPU (give one offset per cache line); results never depend on it.
void prefetch(const Pointer& p);
Value atomic_add(const Pointer& p, const Value& v);
Value atomic_add(const Pointer& p, const Value& v, const Value& mask);
Value atomic_max(const Pointer& p, const Value& v, const Value& mask);
Value atomic_min(const Pointer& p, const Value& v, const Value& mask);
Value atomic_xchg(const Pointer& p, const Value& v, const Value& mask);

template <class T, class>
Var& Var::operator=(T c) {
  return *this = b_->constant(static_cast<double>(c), b_->kernel().vars.at(id_).dtype);
}

}  // namespace kiln
