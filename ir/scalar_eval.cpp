#include "ir/scalar_eval.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ir/error.h"

namespace kiln {

namespace {

ScalarValue fv(double f) {
  ScalarValue v;
  v.f = f;
  return v;
}

ScalarValue iv(int64_t i) {
  ScalarValue v;
  v.i = i;
  return v;
}

// The result of a float op: narrow dtypes are rounded after every op.
ScalarValue fres(float x, DType t) { return fv(t == DType::f32 ? x : round_to_float_dtype(x, t)); }

// Inline forms of the op.h/dtype.h predicates: eval_elementwise runs once
// per element, so it avoids out-of-line calls on its hot path.
static_assert(static_cast<int>(OpKind::Fma) == static_cast<int>(OpKind::Erf) + 1 &&
                  static_cast<int>(OpKind::Eq) == static_cast<int>(OpKind::Shr) + 1 &&
                  static_cast<int>(OpKind::Neg) == static_cast<int>(OpKind::Ge) + 1,
              "eval_elementwise relies on the order of OpKind");
static_assert(static_cast<int>(DType::f8e5m2) + 1 == static_cast<int>(DType::i8),
              "float dtypes come first");
bool in_range(OpKind k, OpKind lo, OpKind hi) { return k >= lo && k <= hi; }
bool has_two_operands(OpKind k) { return in_range(k, OpKind::Add, OpKind::Ge) || k == OpKind::Fma; }
bool float_dtype(DType t) { return t <= DType::f8e5m2; }

[[noreturn]] void fail(OpKind k, DType in, DType out, const std::string& why) {
  throw Error("elementwise " + std::string(op_name(k)) + " (" + std::string(dtype_name(in)) +
              " -> " + std::string(dtype_name(out)) + "): " + why);
}

uint64_t low_mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// Truncates toward zero and saturates; the bounds are compared in double,
// where every min and every max + 1 is an exact power of two.
int64_t float_to_int(double x, DType t) {
  if (std::isnan(x)) return 0;
  double tr = std::trunc(x);
  double hi_excl = std::ldexp(1.0, is_signed_int(t) ? dtype_bits(t) - 1 : dtype_bits(t));
  if (tr <= static_cast<double>(int_min(t))) return int_min(t);
  if (tr >= hi_excl) return int_max(t);
  return static_cast<int64_t>(tr);
}

// Storage bits of an element, zero-extended. Narrow float NaNs come back as
// the canonical NaN of the format: a ScalarValue keeps no payload for them.
uint64_t bits_of(const ScalarValue& v, DType t) {
  float f = static_cast<float>(v.f);
  switch (t) {
    case DType::f32: {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case DType::f16: return f32_to_f16_bits(f);
    case DType::bf16: return f32_to_bf16_bits(f);
    case DType::f8e4m3: return f32_to_f8e4m3_bits(f);
    case DType::f8e5m2: return f32_to_f8e5m2_bits(f);
    default: return static_cast<uint64_t>(v.i) & low_mask(dtype_bits(t));
  }
}

ScalarValue from_bits(uint64_t b, DType t) {
  switch (t) {
    case DType::f32: {
      uint32_t u = static_cast<uint32_t>(b);
      float f;
      std::memcpy(&f, &u, 4);
      return fv(f);
    }
    case DType::f16: return fv(f16_bits_to_f32(static_cast<uint16_t>(b)));
    case DType::bf16: return fv(bf16_bits_to_f32(static_cast<uint16_t>(b)));
    case DType::f8e4m3: return fv(f8e4m3_bits_to_f32(static_cast<uint8_t>(b)));
    case DType::f8e5m2: return fv(f8e5m2_bits_to_f32(static_cast<uint8_t>(b)));
    default: return iv(normalize_int(static_cast<int64_t>(b), t));
  }
}

ScalarValue eval_cast(DType in, DType out, const ScalarValue& x) {
  if (in == out) return x;
  if (is_float(in)) {
    if (is_float(out)) return fres(static_cast<float>(x.f), out);
    if (out == DType::boolean) return iv(x.f != 0);  // NaN != 0 holds: NaN is true
    return iv(float_to_int(x.f, out));
  }
  // in is an int or bool, normalised, so it fits an int64 exactly. Going
  // through f32 first matches "narrow floats are computed in f32".
  if (is_float(out)) return fres(static_cast<float>(x.i), out);
  return iv(normalize_int(x.i, out));
}

ScalarValue eval_bitcast(DType in, DType out, const ScalarValue& x) {
  if (in == DType::boolean || out == DType::boolean || dtype_bits(in) != dtype_bits(out))
    fail(OpKind::Bitcast, in, out, "needs two non-bool dtypes of one bit width");
  return from_bits(bits_of(x, in), out);
}

ScalarValue eval_float(OpKind k, DType in, DType out, const ScalarValue* args) {
  float a = static_cast<float>(args[0].f);
  float b = 0, c = 0;
  if (has_two_operands(k)) b = static_cast<float>(args[1].f);
  if (k == OpKind::Fma) c = static_cast<float>(args[2].f);
  // Transcendentals are evaluated in double and rounded once so that the
  // reference is the accurate result backends are measured against.
  double d = a;
  switch (k) {
    case OpKind::Add: return fres(a + b, in);
    case OpKind::Sub: return fres(a - b, in);
    case OpKind::Mul: return fres(a * b, in);
    case OpKind::Div: return fres(a / b, in);
    case OpKind::Rem: return fres(std::fmod(a, b), in);
    case OpKind::Min: return fres(std::fmin(a, b), in);
    case OpKind::Max: return fres(std::fmax(a, b), in);
    case OpKind::Eq: return iv(a == b);
    case OpKind::Ne: return iv(a != b);
    case OpKind::Lt: return iv(a < b);
    case OpKind::Le: return iv(a <= b);
    case OpKind::Gt: return iv(a > b);
    case OpKind::Ge: return iv(a >= b);
    case OpKind::Neg: return fres(-a, in);
    case OpKind::Abs: return fres(std::fabs(a), in);
    case OpKind::Floor: return fres(std::floor(a), in);
    case OpKind::Exp: return fres(static_cast<float>(std::exp(d)), in);
    case OpKind::Exp2: return fres(static_cast<float>(std::exp2(d)), in);
    case OpKind::Log: return fres(static_cast<float>(std::log(d)), in);
    case OpKind::Log2: return fres(static_cast<float>(std::log2(d)), in);
    case OpKind::Sqrt: return fres(static_cast<float>(std::sqrt(d)), in);
    case OpKind::Rsqrt: return fres(static_cast<float>(1.0 / std::sqrt(d)), in);
    case OpKind::Tanh: return fres(static_cast<float>(std::tanh(d)), in);
    case OpKind::Sigmoid: return fres(static_cast<float>(1.0 / (1.0 + std::exp(-d))), in);
    case OpKind::Erf: return fres(static_cast<float>(std::erf(d)), in);
    case OpKind::Fma: return fres(std::fma(a, b, c), in);
    default: fail(k, in, out, "not defined on float operands");
  }
}

ScalarValue eval_int(OpKind k, DType in, DType out, const ScalarValue* args) {
  int64_t a = args[0].i;
  int64_t b = has_two_operands(k) ? args[1].i : 0;
  uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  auto wrap = [in](uint64_t r) { return iv(normalize_int(static_cast<int64_t>(r), in)); };
  uint64_t shift_mask = k == OpKind::Shl || k == OpKind::Shr ? dtype_bits(in) - 1 : 0;
  // Values are normalised (unsigned ones zero-extended), so signed int64
  // comparisons and divisions are right for every int dtype.
  switch (k) {
    case OpKind::Add: return wrap(ua + ub);
    case OpKind::Sub: return wrap(ua - ub);
    case OpKind::Mul: return wrap(ua * ub);
    case OpKind::Div:
      if (b == 0) return iv(0);
      if (b == -1) return wrap(0 - ua);  // INT64_MIN / -1 would trap
      return wrap(static_cast<uint64_t>(a / b));
    case OpKind::Rem:
      if (b == 0 || b == -1) return iv(0);
      return wrap(static_cast<uint64_t>(a % b));
    case OpKind::Min: return iv(a < b ? a : b);
    case OpKind::Max: return iv(a > b ? a : b);
    case OpKind::And: return wrap(ua & ub);
    case OpKind::Or: return wrap(ua | ub);
    case OpKind::Xor: return wrap(ua ^ ub);
    case OpKind::Shl: return wrap(ua << (ub & shift_mask));
    case OpKind::Shr:
      if (is_signed_int(in)) return iv(a >> (ub & shift_mask));
      return iv(static_cast<int64_t>(ua >> (ub & shift_mask)));
    case OpKind::Eq: return iv(a == b);
    case OpKind::Ne: return iv(a != b);
    case OpKind::Lt: return iv(a < b);
    case OpKind::Le: return iv(a <= b);
    case OpKind::Gt: return iv(a > b);
    case OpKind::Ge: return iv(a >= b);
    case OpKind::Neg: return wrap(0 - ua);
    case OpKind::Abs: return a < 0 ? wrap(0 - ua) : iv(a);
    case OpKind::Not: return wrap(~ua);
    case OpKind::Floor: return iv(a);
    case OpKind::Fma: return wrap(ua * ub + static_cast<uint64_t>(args[2].i));
    default: fail(k, in, out, "not defined on integer operands");
  }
}

ScalarValue eval_bool(OpKind k, DType in, DType out, const ScalarValue* args) {
  bool a = args[0].i != 0;
  bool b = has_two_operands(k) ? args[1].i != 0 : false;
  switch (k) {
    case OpKind::And: return iv(a && b);
    case OpKind::Or: return iv(a || b);
    case OpKind::Xor: return iv(a != b);
    case OpKind::Eq: return iv(a == b);
    case OpKind::Ne: return iv(a != b);
    case OpKind::Lt: return iv(a < b);
    case OpKind::Le: return iv(a <= b);
    case OpKind::Gt: return iv(a > b);
    case OpKind::Ge: return iv(a >= b);
    case OpKind::Not: return iv(!a);
    default: fail(k, in, out, "not defined on bool operands");
  }
}

template <class T>
T read_raw(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * static_cast<int64_t>(sizeof(T)),
              sizeof(T));
  return v;
}

template <class T>
void write_raw(void* base, int64_t index, T v) {
  std::memcpy(static_cast<char*>(base) + index * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

}  // namespace

int64_t int_min(DType t) {
  if (!is_signed_int(t)) return 0;
  return t == DType::i64 ? std::numeric_limits<int64_t>::min()
                         : -(int64_t{1} << (dtype_bits(t) - 1));
}

int64_t int_max(DType t) {
  if (t == DType::i64) return std::numeric_limits<int64_t>::max();
  int value_bits = is_signed_int(t) ? dtype_bits(t) - 1 : dtype_bits(t);
  return (int64_t{1} << value_bits) - 1;
}

int64_t normalize_int(int64_t v, DType t) {
  switch (t) {
    case DType::i8: return static_cast<int8_t>(v);
    case DType::u8: return static_cast<uint8_t>(v);
    case DType::i16: return static_cast<int16_t>(v);
    case DType::u16: return static_cast<uint16_t>(v);
    case DType::i32: return static_cast<int32_t>(v);
    case DType::u32: return static_cast<uint32_t>(v);
    case DType::boolean: return v != 0;
    default: return v;
  }
}

ScalarValue const_value(DType t, int64_t ival, double fval) {
  if (is_float(t)) return fres(static_cast<float>(fval), t);
  return iv(normalize_int(ival, t));
}

ScalarValue eval_elementwise(OpKind k, DType in, DType out, const ScalarValue* args) {
  switch (k) {
    case OpKind::Select: return args[0].i != 0 ? args[1] : args[2];
    case OpKind::Cast: return eval_cast(in, out, args[0]);
    case OpKind::Bitcast: return eval_bitcast(in, out, args[0]);
    default: break;
  }
  // Add..Erf and Fma are contiguous in OpKind.
  if (!in_range(k, OpKind::Add, OpKind::Fma)) fail(k, in, out, "not an elementwise op");
  if (float_dtype(in)) return eval_float(k, in, out, args);
  if (in_range(k, OpKind::Exp, OpKind::Erf)) fail(k, in, out, "needs a float operand");
  if (in == DType::boolean) return eval_bool(k, in, out, args);
  return eval_int(k, in, out, args);
}

ScalarValue load_element(const void* base, int64_t index, DType t) {
  switch (t) {
    case DType::f32: return fv(read_raw<float>(base, index));
    case DType::f16: return fv(f16_bits_to_f32(read_raw<uint16_t>(base, index)));
    case DType::bf16: return fv(bf16_bits_to_f32(read_raw<uint16_t>(base, index)));
    case DType::f8e4m3: return fv(f8e4m3_bits_to_f32(read_raw<uint8_t>(base, index)));
    case DType::f8e5m2: return fv(f8e5m2_bits_to_f32(read_raw<uint8_t>(base, index)));
    case DType::i8: return iv(read_raw<int8_t>(base, index));
    case DType::u8: return iv(read_raw<uint8_t>(base, index));
    case DType::i16: return iv(read_raw<int16_t>(base, index));
    case DType::u16: return iv(read_raw<uint16_t>(base, index));
    case DType::i32: return iv(read_raw<int32_t>(base, index));
    case DType::u32: return iv(read_raw<uint32_t>(base, index));
    case DType::i64: return iv(read_raw<int64_t>(base, index));
    case DType::boolean: return iv(read_raw<uint8_t>(base, index) != 0);
  }
  throw Error("load_element: unknown dtype " + std::to_string(static_cast<int>(t)));
}

void store_element(void* base, int64_t index, DType t, const ScalarValue& v) {
  float f = static_cast<float>(v.f);
  switch (t) {
    case DType::f32: return write_raw<float>(base, index, f);
    case DType::f16: return write_raw<uint16_t>(base, index, f32_to_f16_bits(f));
    case DType::bf16: return write_raw<uint16_t>(base, index, f32_to_bf16_bits(f));
    case DType::f8e4m3: return write_raw<uint8_t>(base, index, f32_to_f8e4m3_bits(f));
    case DType::f8e5m2: return write_raw<uint8_t>(base, index, f32_to_f8e5m2_bits(f));
    case DType::i8: return write_raw<int8_t>(base, index, static_cast<int8_t>(v.i));
    case DType::u8: return write_raw<uint8_t>(base, index, static_cast<uint8_t>(v.i));
    case DType::i16: return write_raw<int16_t>(base, index, static_cast<int16_t>(v.i));
    case DType::u16: return write_raw<uint16_t>(base, index, static_cast<uint16_t>(v.i));
    case DType::i32: return write_raw<int32_t>(base, index, static_cast<int32_t>(v.i));
    case DType::u32: return write_raw<uint32_t>(base, index, static_cast<uint32_t>(v.i));
    case DType::i64: return write_raw<int64_t>(base, index, v.i);
    case DType::boolean: return write_raw<uint8_t>(base, index, v.i != 0 ? 1 : 0);
  }
  throw Error("store_element: unknown dtype " + std::to_string(static_cast<int>(t)));
}

}  // namespace kiln
