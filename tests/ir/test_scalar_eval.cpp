#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ir/error.h"
#include "ir/scalar_eval.h"

using namespace kiln;

namespace {

constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

ScalarValue F(double f) { return ScalarValue{f, 0}; }
ScalarValue I(int64_t i) { return ScalarValue{0, i}; }

ScalarValue eval(OpKind k, DType in, DType out, std::vector<ScalarValue> args) {
  return eval_elementwise(k, in, out, args.data());
}

// Same-type binary op (comparisons yield bool).
ScalarValue bin(OpKind k, DType t, ScalarValue a, ScalarValue b) {
  return eval(k, t, is_comparison(k) ? DType::boolean : t, {a, b});
}
int64_t ibin(OpKind k, DType t, int64_t a, int64_t b) { return bin(k, t, I(a), I(b)).i; }
double fbin(OpKind k, DType t, double a, double b) { return bin(k, t, F(a), F(b)).f; }
bool fcmp(OpKind k, double a, double b) { return bin(k, DType::f32, F(a), F(b)).i != 0; }
double fun(OpKind k, DType t, double a) { return eval(k, t, t, {F(a)}).f; }
int64_t iun(OpKind k, DType t, int64_t a) { return eval(k, t, t, {I(a)}).i; }
ScalarValue cast(DType from, DType to, ScalarValue x) { return eval(OpKind::Cast, from, to, {x}); }
ScalarValue bitcast(DType from, DType to, ScalarValue x) {
  return eval(OpKind::Bitcast, from, to, {x});
}

double p2(int e) { return std::ldexp(1.0, e); }

}  // namespace

TEST_CASE("normalize_int wraps and extends", "[scalar]") {
  CHECK(normalize_int(200, DType::i8) == -56);
  CHECK(normalize_int(-1, DType::u8) == 255);
  CHECK(normalize_int(256 + 7, DType::u8) == 7);
  CHECK(normalize_int(40000, DType::i16) == -25536);
  CHECK(normalize_int(-1, DType::u16) == 65535);
  CHECK(normalize_int(int64_t{1} << 31, DType::i32) == kI32Min);
  CHECK(normalize_int(-1, DType::u32) == 4294967295LL);
  CHECK(normalize_int((int64_t{1} << 32) + 5, DType::i32) == 5);
  CHECK(normalize_int(kI64Min, DType::i64) == kI64Min);
  CHECK(normalize_int(5, DType::boolean) == 1);
  CHECK(normalize_int(int64_t{1} << 40, DType::boolean) == 1);
  CHECK(normalize_int(0, DType::boolean) == 0);
}

TEST_CASE("const_value rounds floats and wraps ints", "[scalar]") {
  CHECK(const_value(DType::f32, 0, 0.1).f == static_cast<double>(0.1f));
  CHECK(const_value(DType::f16, 0, 0.1).f == 0.0999755859375);  // f16 0x2E66
  CHECK(const_value(DType::bf16, 0, 0.1).f == 0.10009765625);   // bf16 0x3DCD
  CHECK(const_value(DType::f8e4m3, 0, 1000.0).f == 448.0);
  CHECK(const_value(DType::f8e5m2, 0, -1e9).f == -57344.0);
  CHECK(const_value(DType::i8, 300, 0).i == 44);
  CHECK(const_value(DType::u16, -2, 0).i == 65534);
  CHECK(const_value(DType::boolean, 7, 0).i == 1);
  CHECK(const_value(DType::i64, kI64Min, 0).i == kI64Min);
}

TEST_CASE("integer arithmetic wraps", "[scalar]") {
  CHECK(ibin(OpKind::Add, DType::i32, kI32Max, 1) == kI32Min);
  CHECK(ibin(OpKind::Sub, DType::i32, kI32Min, 1) == kI32Max);
  CHECK(ibin(OpKind::Mul, DType::i8, 16, 16) == 0);
  CHECK(ibin(OpKind::Mul, DType::i8, 16, 9) == -112);  // 144 - 256
  CHECK(ibin(OpKind::Sub, DType::u8, 0, 1) == 255);
  CHECK(ibin(OpKind::Add, DType::u16, 65535, 2) == 1);
  CHECK(ibin(OpKind::Mul, DType::u32, 65536, 65536) == 0);
  CHECK(ibin(OpKind::Mul, DType::u32, 4294967295LL, 4294967295LL) == 1);
  CHECK(ibin(OpKind::Add, DType::i64, kI64Max, 1) == kI64Min);
  CHECK(ibin(OpKind::Mul, DType::i64, kI64Min, -1) == kI64Min);
  CHECK(iun(OpKind::Neg, DType::i16, -32768) == -32768);
  CHECK(iun(OpKind::Neg, DType::u8, 1) == 255);
  CHECK(iun(OpKind::Neg, DType::i32, 5) == -5);
  CHECK(iun(OpKind::Abs, DType::i32, kI32Min) == kI32Min);
  CHECK(iun(OpKind::Abs, DType::i8, -128) == -128);
  CHECK(iun(OpKind::Abs, DType::i8, -5) == 5);
  CHECK(iun(OpKind::Abs, DType::i64, kI64Min) == kI64Min);
  CHECK(iun(OpKind::Abs, DType::u32, 4000000000LL) == 4000000000LL);
  CHECK(iun(OpKind::Floor, DType::i32, -7) == -7);
}

TEST_CASE("integer division truncates and never traps", "[scalar]") {
  CHECK(ibin(OpKind::Div, DType::i32, 7, 2) == 3);
  CHECK(ibin(OpKind::Div, DType::i32, -7, 2) == -3);
  CHECK(ibin(OpKind::Div, DType::i32, 7, -2) == -3);
  CHECK(ibin(OpKind::Rem, DType::i32, -7, 2) == -1);
  CHECK(ibin(OpKind::Rem, DType::i32, 7, -2) == 1);
  CHECK(ibin(OpKind::Div, DType::i32, 7, 0) == 0);
  CHECK(ibin(OpKind::Rem, DType::i32, 7, 0) == 0);
  CHECK(ibin(OpKind::Div, DType::u8, 7, 0) == 0);
  CHECK(ibin(OpKind::Div, DType::i64, kI64Min, 0) == 0);
  CHECK(ibin(OpKind::Div, DType::i32, kI32Min, -1) == kI32Min);
  CHECK(ibin(OpKind::Rem, DType::i32, kI32Min, -1) == 0);
  CHECK(ibin(OpKind::Div, DType::i8, -128, -1) == -128);
  CHECK(ibin(OpKind::Div, DType::i64, kI64Min, -1) == kI64Min);
  CHECK(ibin(OpKind::Rem, DType::i64, kI64Min, -1) == 0);
  CHECK(ibin(OpKind::Div, DType::i64, kI64Min, 2) == kI64Min / 2);
  // Unsigned operands are whole values, not negative numbers.
  CHECK(ibin(OpKind::Div, DType::u32, 4000000000LL, 3) == 1333333333);
  CHECK(ibin(OpKind::Rem, DType::u32, 4000000000LL, 7) == 4000000000LL % 7);
  CHECK(ibin(OpKind::Div, DType::u8, 200, 3) == 66);
  CHECK(ibin(OpKind::Div, DType::u32, 4294967295LL, 4294967295LL) == 1);
}

TEST_CASE("shifts take the amount modulo the width", "[scalar]") {
  CHECK(ibin(OpKind::Shl, DType::i32, 1, 31) == kI32Min);
  CHECK(ibin(OpKind::Shl, DType::i32, 1, 32) == 1);
  CHECK(ibin(OpKind::Shl, DType::i32, 1, 33) == 2);
  CHECK(ibin(OpKind::Shl, DType::i32, 1, -1) == kI32Min);  // -1 mod 32 = 31
  CHECK(ibin(OpKind::Shl, DType::i8, 1, 7) == -128);
  CHECK(ibin(OpKind::Shl, DType::i8, 3, 8) == 3);
  CHECK(ibin(OpKind::Shl, DType::u16, 0xFFFF, 4) == 0xFFF0);
  CHECK(ibin(OpKind::Shl, DType::i64, 1, 63) == kI64Min);
  CHECK(ibin(OpKind::Shl, DType::i64, 1, 64) == 1);
  CHECK(ibin(OpKind::Shl, DType::u8, 0x81, 1) == 0x02);
}

TEST_CASE("shr is arithmetic for signed and logical for unsigned", "[scalar]") {
  CHECK(ibin(OpKind::Shr, DType::i32, -8, 1) == -4);
  CHECK(ibin(OpKind::Shr, DType::i32, kI32Min, 31) == -1);
  CHECK(ibin(OpKind::Shr, DType::i32, kI32Min, 32) == kI32Min);
  CHECK(ibin(OpKind::Shr, DType::i8, -128, 7) == -1);
  CHECK(ibin(OpKind::Shr, DType::i64, kI64Min, 63) == -1);
  CHECK(ibin(OpKind::Shr, DType::u32, 0x80000000LL, 31) == 1);
  CHECK(ibin(OpKind::Shr, DType::u32, 4294967295LL, 28) == 15);
  CHECK(ibin(OpKind::Shr, DType::u8, 0x80, 7) == 1);
  CHECK(ibin(OpKind::Shr, DType::u8, 0xFF, 9) == 0x7F);  // 9 mod 8 = 1
  CHECK(ibin(OpKind::Shr, DType::u16, 0x8000, 15) == 1);
}

TEST_CASE("bitwise ops on ints and bool", "[scalar]") {
  CHECK(ibin(OpKind::And, DType::i32, 0b1100, 0b1010) == 0b1000);
  CHECK(ibin(OpKind::Or, DType::i32, 0b1100, 0b1010) == 0b1110);
  CHECK(ibin(OpKind::Xor, DType::i32, 0b1100, 0b1010) == 0b0110);
  CHECK(ibin(OpKind::Xor, DType::i8, -1, 0x0F) == -16);
  CHECK(ibin(OpKind::Or, DType::u8, 0xF0, 0x0F) == 255);
  CHECK(iun(OpKind::Not, DType::i32, 0) == -1);
  CHECK(iun(OpKind::Not, DType::u8, 0) == 255);
  CHECK(iun(OpKind::Not, DType::u32, 0) == 4294967295LL);
  CHECK(iun(OpKind::Not, DType::i64, kI64Max) == kI64Min);
  CHECK(iun(OpKind::Not, DType::boolean, 1) == 0);
  CHECK(iun(OpKind::Not, DType::boolean, 0) == 1);
  CHECK(ibin(OpKind::And, DType::boolean, 1, 0) == 0);
  CHECK(ibin(OpKind::Or, DType::boolean, 1, 0) == 1);
  CHECK(ibin(OpKind::Xor, DType::boolean, 1, 1) == 0);
  CHECK(bin(OpKind::Eq, DType::boolean, I(1), I(1)).i == 1);
  CHECK(bin(OpKind::Ne, DType::boolean, I(1), I(0)).i == 1);
}

TEST_CASE("integer min, max and comparisons respect signedness", "[scalar]") {
  CHECK(ibin(OpKind::Max, DType::u32, 4000000000LL, 1) == 4000000000LL);
  CHECK(ibin(OpKind::Min, DType::u32, 4000000000LL, 1) == 1);
  CHECK(ibin(OpKind::Max, DType::i32, -5, 3) == 3);
  CHECK(ibin(OpKind::Min, DType::i8, -128, 127) == -128);
  CHECK(ibin(OpKind::Max, DType::u8, 255, 0) == 255);
  CHECK(bin(OpKind::Gt, DType::u32, I(4000000000LL), I(1)).i == 1);
  CHECK(bin(OpKind::Lt, DType::i32, I(-1), I(0)).i == 1);
  CHECK(bin(OpKind::Le, DType::i64, I(kI64Min), I(kI64Min)).i == 1);
  CHECK(bin(OpKind::Ge, DType::u8, I(0), I(255)).i == 0);
  CHECK(bin(OpKind::Eq, DType::i16, I(-3), I(-3)).i == 1);
  CHECK(bin(OpKind::Ne, DType::i16, I(-3), I(-3)).i == 0);
}

TEST_CASE("f32 arithmetic is f32 arithmetic", "[scalar]") {
  float a = 0.1f, b = 0.2f, c = 3.0f;
  CHECK(fbin(OpKind::Add, DType::f32, a, b) == static_cast<double>(a + b));
  CHECK(fbin(OpKind::Sub, DType::f32, a, b) == static_cast<double>(a - b));
  CHECK(fbin(OpKind::Mul, DType::f32, a, c) == static_cast<double>(a * c));
  CHECK(fbin(OpKind::Div, DType::f32, 1.0, 3.0) == static_cast<double>(1.0f / 3.0f));
  // 1 + 2^-24 is a tie in f32 and rounds to 1 (in double it would be exact).
  CHECK(fbin(OpKind::Add, DType::f32, 1.0, p2(-24)) == 1.0);
  CHECK(fbin(OpKind::Add, DType::f32, 1.0, p2(-24) + p2(-40)) == 1.0 + p2(-23));
  CHECK(std::isinf(fbin(OpKind::Mul, DType::f32, 1e20, 1e20)));
  CHECK(fbin(OpKind::Div, DType::f32, 1.0, 0.0) == INFINITY);
  CHECK(fbin(OpKind::Div, DType::f32, -1.0, 0.0) == -INFINITY);
  CHECK(std::isnan(fbin(OpKind::Div, DType::f32, 0.0, 0.0)));
  CHECK(fbin(OpKind::Rem, DType::f32, 5.5, 2.0) == 1.5);
  CHECK(fbin(OpKind::Rem, DType::f32, -5.5, 2.0) == -1.5);
  CHECK(fbin(OpKind::Rem, DType::f32, 5.5, -2.0) == 1.5);
  CHECK(fun(OpKind::Neg, DType::f32, 2.5) == -2.5);
  CHECK(fun(OpKind::Abs, DType::f32, -2.5) == 2.5);
  CHECK(fun(OpKind::Floor, DType::f32, -1.5) == -2.0);
  CHECK(fun(OpKind::Floor, DType::f32, 2.0) == 2.0);
  CHECK(fun(OpKind::Floor, DType::f16, 2.75) == 2.0);
}

TEST_CASE("narrow floats round after every op", "[scalar]") {
  double one_tie = 1.0 + p2(-11);  // halfway between two f16 values
  CHECK(fbin(OpKind::Add, DType::f16, 1.0, p2(-11)) == 1.0);
  CHECK(fbin(OpKind::Add, DType::f16, 1.0 + p2(-10), p2(-11)) == 1.0 + p2(-9));  // tie to even
  // Two separately rounded adds differ from one f32 sum.
  double x = fbin(OpKind::Add, DType::f16, 1.0, p2(-11));
  CHECK(fbin(OpKind::Add, DType::f16, x, p2(-11)) == 1.0);
  CHECK(fbin(OpKind::Mul, DType::f16, one_tie, 1.0) == 1.0);  // the f32 product is rounded
  CHECK(std::isinf(fbin(OpKind::Add, DType::f16, 65504.0, 32.0)));
  CHECK(fbin(OpKind::Add, DType::f16, 65504.0, 8.0) == 65504.0);
  CHECK(std::isinf(fbin(OpKind::Mul, DType::f16, 300.0, 300.0)));
  CHECK(fbin(OpKind::Mul, DType::f16, p2(-14), p2(-5)) == p2(-19));  // subnormal result
  CHECK(fbin(OpKind::Mul, DType::f16, p2(-14), p2(-11)) == 0.0);     // 2^-25 ties to 0
  CHECK(fbin(OpKind::Add, DType::bf16, 1.0, p2(-8)) == 1.0);
  CHECK(fbin(OpKind::Add, DType::bf16, 1.0 + p2(-7), p2(-8)) == 1.0 + p2(-6));
  CHECK(fbin(OpKind::Add, DType::f8e4m3, 300.0, 300.0) == 448.0);
  CHECK(fbin(OpKind::Mul, DType::f8e4m3, -448.0, 2.0) == -448.0);
  CHECK(fbin(OpKind::Add, DType::f8e4m3, 1.0, 0.0625) == 1.0);     // tie to even
  CHECK(fbin(OpKind::Add, DType::f8e4m3, 1.125, 0.0625) == 1.25);  // tie to even
  CHECK(fbin(OpKind::Add, DType::f8e5m2, 40000.0, 40000.0) == 57344.0);
  CHECK(fbin(OpKind::Div, DType::f8e5m2, 1.0, 3.0) == 0.3125);
  CHECK(fbin(OpKind::Div, DType::f16, 1.0, 3.0) == 0.333251953125);
  CHECK(fbin(OpKind::Div, DType::bf16, 1.0, 3.0) == 0.333984375);
}

TEST_CASE("fma rounds once in f32", "[scalar]") {
  double a = 1.0 + p2(-12);
  // a*a = 1 + 2^-11 + 2^-24: the separate product would lose the 2^-24.
  ScalarValue r = eval(OpKind::Fma, DType::f32, DType::f32, {F(a), F(a), F(-(1.0 + p2(-11)))});
  CHECK(r.f == p2(-24));
  CHECK(fbin(OpKind::Sub, DType::f32, fbin(OpKind::Mul, DType::f32, a, a), 1.0 + p2(-11)) == 0.0);
  ScalarValue h = eval(OpKind::Fma, DType::f16, DType::f16, {F(3.0), F(5.0), F(1.0)});
  CHECK(h.f == 16.0);
  ScalarValue s = eval(OpKind::Fma, DType::f8e4m3, DType::f8e4m3, {F(20.0), F(20.0), F(100.0)});
  CHECK(s.f == 448.0);
}

TEST_CASE("transcendentals are accurate and rounded to the dtype", "[scalar]") {
  CHECK(fun(OpKind::Exp, DType::f32, 0.0) == 1.0);
  CHECK(fun(OpKind::Exp, DType::f32, 1.0) ==
        static_cast<double>(static_cast<float>(2.718281828459045)));
  CHECK(fun(OpKind::Exp2, DType::f32, 10.0) == 1024.0);
  CHECK(fun(OpKind::Exp2, DType::f32, -149.0) == p2(-149));
  CHECK(fun(OpKind::Log, DType::f32, 1.0) == 0.0);
  CHECK(fun(OpKind::Log, DType::f32, 0.0) == -INFINITY);
  CHECK(std::isnan(fun(OpKind::Log, DType::f32, -1.0)));
  CHECK(fun(OpKind::Log2, DType::f32, 8.0) == 3.0);
  CHECK(fun(OpKind::Sqrt, DType::f32, 4.0) == 2.0);
  CHECK(fun(OpKind::Sqrt, DType::f32, 2.0) ==
        static_cast<double>(static_cast<float>(1.4142135623730951)));
  CHECK(std::isnan(fun(OpKind::Sqrt, DType::f32, -1.0)));
  CHECK(fun(OpKind::Rsqrt, DType::f32, 4.0) == 0.5);
  CHECK(fun(OpKind::Rsqrt, DType::f32, 0.0) == INFINITY);
  CHECK(fun(OpKind::Tanh, DType::f32, 0.0) == 0.0);
  CHECK(fun(OpKind::Tanh, DType::f32, 100.0) == 1.0);
  CHECK(fun(OpKind::Sigmoid, DType::f32, 0.0) == 0.5);
  CHECK(fun(OpKind::Sigmoid, DType::f32, -INFINITY) == 0.0);
  CHECK(fun(OpKind::Sigmoid, DType::f32, INFINITY) == 1.0);
  CHECK(fun(OpKind::Erf, DType::f32, 0.0) == 0.0);
  CHECK(fun(OpKind::Erf, DType::f32, 10.0) == 1.0);
  CHECK(std::isnan(fun(OpKind::Exp, DType::f32, NAN)));
  // e = 2.71828...: f16 and bf16 both round it to 2.71875.
  CHECK(fun(OpKind::Exp, DType::f16, 1.0) == 2.71875);
  CHECK(fun(OpKind::Exp, DType::bf16, 1.0) == 2.71875);
  CHECK(fun(OpKind::Exp, DType::f8e4m3, 1.0) == 2.75);
  CHECK(fun(OpKind::Exp, DType::f8e4m3, 10.0) == 448.0);
  CHECK(fun(OpKind::Sqrt, DType::f16, 2.0) == 1.4140625);
}

TEST_CASE("float min/max ignore NaN, comparisons are ordered", "[scalar]") {
  CHECK(fbin(OpKind::Min, DType::f32, NAN, 1.0) == 1.0);
  CHECK(fbin(OpKind::Min, DType::f32, 1.0, NAN) == 1.0);
  CHECK(fbin(OpKind::Max, DType::f32, NAN, -1.0) == -1.0);
  CHECK(fbin(OpKind::Max, DType::f16, 2.0, NAN) == 2.0);
  CHECK(std::isnan(fbin(OpKind::Max, DType::f32, NAN, NAN)));
  CHECK(fbin(OpKind::Min, DType::f32, -INFINITY, 3.0) == -INFINITY);
  CHECK(fbin(OpKind::Max, DType::bf16, -1.0, 2.0) == 2.0);

  for (OpKind k : {OpKind::Eq, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge}) {
    CHECK_FALSE(fcmp(k, NAN, 1.0));
    CHECK_FALSE(fcmp(k, 1.0, NAN));
    CHECK_FALSE(fcmp(k, NAN, NAN));
  }
  CHECK(fcmp(OpKind::Ne, NAN, 1.0));
  CHECK(fcmp(OpKind::Ne, NAN, NAN));
  CHECK(fcmp(OpKind::Eq, 0.0, -0.0));
  CHECK_FALSE(fcmp(OpKind::Ne, 0.0, -0.0));
  CHECK(fcmp(OpKind::Lt, -INFINITY, -1e30));
  CHECK(fcmp(OpKind::Le, 2.0, 2.0));
  CHECK(fcmp(OpKind::Ge, 3.0, 2.0));
  CHECK_FALSE(fcmp(OpKind::Gt, 2.0, 3.0));
  CHECK(bin(OpKind::Lt, DType::f16, F(1.0), F(1.0009765625)).i == 1);
}

TEST_CASE("select picks per element", "[scalar]") {
  CHECK(eval(OpKind::Select, DType::f32, DType::f32, {I(1), F(2.0), F(3.0)}).f == 2.0);
  CHECK(eval(OpKind::Select, DType::f32, DType::f32, {I(0), F(2.0), F(3.0)}).f == 3.0);
  CHECK(eval(OpKind::Select, DType::i32, DType::i32, {I(0), I(-7), I(9)}).i == 9);
}

TEST_CASE("cast float to int truncates and saturates", "[scalar]") {
  auto to = [](DType t, double x) { return cast(DType::f32, t, F(x)).i; };
  CHECK(to(DType::i32, 3.9) == 3);
  CHECK(to(DType::i32, -3.9) == -3);
  CHECK(to(DType::i32, 1e10) == kI32Max);
  CHECK(to(DType::i32, -1e10) == kI32Min);
  CHECK(to(DType::i32, 2147483648.0) == kI32Max);
  CHECK(to(DType::i32, -2147483648.0) == kI32Min);
  CHECK(to(DType::i32, NAN) == 0);
  CHECK(to(DType::i32, INFINITY) == kI32Max);
  CHECK(to(DType::i32, -INFINITY) == kI32Min);
  CHECK(to(DType::u8, -5.0) == 0);
  CHECK(to(DType::u8, -0.9) == 0);
  CHECK(to(DType::u8, 300.0) == 255);
  CHECK(to(DType::u8, 255.9) == 255);
  CHECK(to(DType::i8, 127.5) == 127);
  CHECK(to(DType::i8, -128.9) == -128);
  CHECK(to(DType::i8, 200.0) == 127);
  CHECK(to(DType::i16, -40000.0) == -32768);
  CHECK(to(DType::u16, 70000.0) == 65535);
  CHECK(to(DType::u32, 4294967040.0) == 4294967040LL);  // largest f32 below 2^32
  CHECK(to(DType::u32, 4294967296.0) == 4294967295LL);
  CHECK(to(DType::u32, -1.0) == 0);
  CHECK(to(DType::i64, 1e19) == kI64Max);
  CHECK(to(DType::i64, -1e19) == kI64Min);
  CHECK(to(DType::i64, p2(63)) == kI64Max);
  CHECK(to(DType::i64, -p2(63)) == kI64Min);
  CHECK(to(DType::i64, p2(62)) == int64_t{1} << 62);
  CHECK(to(DType::i64, NAN) == 0);
  CHECK(cast(DType::f16, DType::i32, F(-2.5)).i == -2);
  CHECK(cast(DType::f8e4m3, DType::u8, F(448.0)).i == 255);
}

TEST_CASE("cast to and from bool", "[scalar]") {
  CHECK(cast(DType::f32, DType::boolean, F(0.0)).i == 0);
  CHECK(cast(DType::f32, DType::boolean, F(-0.0)).i == 0);
  CHECK(cast(DType::f32, DType::boolean, F(0.5)).i == 1);
  CHECK(cast(DType::f32, DType::boolean, F(NAN)).i == 1);
  CHECK(cast(DType::i32, DType::boolean, I(-4)).i == 1);
  CHECK(cast(DType::u8, DType::boolean, I(0)).i == 0);
  CHECK(cast(DType::boolean, DType::f32, I(1)).f == 1.0);
  CHECK(cast(DType::boolean, DType::f16, I(0)).f == 0.0);
  CHECK(cast(DType::boolean, DType::i32, I(1)).i == 1);
  CHECK(cast(DType::boolean, DType::u8, I(1)).i == 1);
}

TEST_CASE("cast int to float rounds to nearest even", "[scalar]") {
  CHECK(cast(DType::i32, DType::f32, I(16777217)).f == 16777216.0);
  CHECK(cast(DType::i32, DType::f32, I(16777219)).f == 16777220.0);
  CHECK(cast(DType::i32, DType::f32, I(-16777217)).f == -16777216.0);
  CHECK(cast(DType::i32, DType::f32, I(kI32Max)).f == p2(31));
  CHECK(cast(DType::i64, DType::f32, I(kI64Max)).f == p2(63));
  CHECK(cast(DType::i64, DType::f32, I(kI64Min)).f == -p2(63));
  CHECK(cast(DType::i64, DType::f32, I((int64_t{1} << 53) + 1)).f == p2(53));
  CHECK(cast(DType::u32, DType::f32, I(4294967295LL)).f == p2(32));
  CHECK(cast(DType::i32, DType::f16, I(65504)).f == 65504.0);
  CHECK(std::isinf(cast(DType::i32, DType::f16, I(65520)).f));
  CHECK(cast(DType::i32, DType::f16, I(2049)).f == 2048.0);
  CHECK(cast(DType::i32, DType::f16, I(2051)).f == 2052.0);
  CHECK(cast(DType::i16, DType::bf16, I(257)).f == 256.0);
  CHECK(cast(DType::i16, DType::bf16, I(259)).f == 260.0);
  CHECK(cast(DType::i32, DType::f8e4m3, I(1000)).f == 448.0);
  CHECK(cast(DType::u8, DType::f8e4m3, I(255)).f == 256.0);
  CHECK(cast(DType::i8, DType::f8e5m2, I(-7)).f == -7.0);
  CHECK(cast(DType::i8, DType::f8e5m2, I(9)).f == 8.0);  // tie between 8 and 10 -> even
}

TEST_CASE("cast between floats and between ints", "[scalar]") {
  CHECK(cast(DType::f32, DType::f16, F(1.0 + p2(-11))).f == 1.0);
  CHECK(std::isinf(cast(DType::f32, DType::f16, F(1e5)).f));
  CHECK(cast(DType::f32, DType::bf16, F(1.0 + 3 * p2(-8))).f == 1.0 + p2(-6));
  CHECK(cast(DType::f16, DType::f32, F(0.333251953125)).f == 0.333251953125);
  CHECK(cast(DType::f16, DType::f8e4m3, F(1000.0)).f == 448.0);
  CHECK(cast(DType::bf16, DType::f16, F(1e10)).f == INFINITY);
  CHECK(cast(DType::f16, DType::bf16, F(1.0009765625)).f == 1.0);
  CHECK(std::isnan(cast(DType::f32, DType::f8e4m3, F(NAN)).f));
  CHECK(cast(DType::i32, DType::i8, I(300)).i == 44);
  CHECK(cast(DType::i32, DType::i8, I(-129)).i == 127);
  CHECK(cast(DType::i8, DType::u8, I(-1)).i == 255);
  CHECK(cast(DType::u8, DType::i8, I(255)).i == -1);
  CHECK(cast(DType::i32, DType::u32, I(-1)).i == 4294967295LL);
  CHECK(cast(DType::u32, DType::i64, I(4294967295LL)).i == 4294967295LL);
  CHECK(cast(DType::u32, DType::i32, I(4294967295LL)).i == -1);
  CHECK(cast(DType::i64, DType::i32, I((int64_t{1} << 32) + 5)).i == 5);
  CHECK(cast(DType::i8, DType::i64, I(-5)).i == -5);
}

TEST_CASE("bitcast reinterprets storage bits", "[scalar]") {
  CHECK(bitcast(DType::f32, DType::i32, F(1.0)).i == 0x3F800000);
  CHECK(bitcast(DType::f32, DType::i32, F(-0.0)).i == kI32Min);
  CHECK(bitcast(DType::f32, DType::u32, F(-1.0)).i == 0xBF800000LL);
  CHECK(bitcast(DType::i32, DType::f32, I(0x40490FDB)).f ==
        static_cast<double>(3.14159274101257324f));
  CHECK(bitcast(DType::i32, DType::f32, I(1)).f == p2(-149));
  CHECK(std::isnan(bitcast(DType::u32, DType::f32, I(0x7FC00000)).f));
  CHECK(bitcast(DType::f16, DType::i16, F(1.0)).i == 0x3C00);
  CHECK(bitcast(DType::f16, DType::u16, F(-2.0)).i == 0xC000);
  CHECK(bitcast(DType::i16, DType::f16, I(-16384)).f == -2.0);  // 0xC000
  CHECK(bitcast(DType::u16, DType::f16, I(0x0001)).f == p2(-24));
  CHECK(bitcast(DType::u16, DType::bf16, I(0x3F80)).f == 1.0);
  CHECK(bitcast(DType::bf16, DType::u16, F(-1.0)).i == 0xBF80);
  CHECK(bitcast(DType::f16, DType::bf16, F(1.0)).f == p2(-7));  // 0x3C00 as bf16
  CHECK(bitcast(DType::i8, DType::f8e4m3, I(0x38)).f == 1.0);
  CHECK(bitcast(DType::f8e4m3, DType::i8, F(-448.0)).i == -2);  // 0xFE
  CHECK(bitcast(DType::f8e5m2, DType::u8, F(-1.0)).i == 0xBC);
  CHECK(bitcast(DType::u8, DType::f8e5m2, I(0x7B)).f == 57344.0);
  CHECK(bitcast(DType::i32, DType::u32, I(-1)).i == 4294967295LL);
  CHECK(bitcast(DType::u32, DType::i32, I(4294967295LL)).i == -1);
  CHECK(bitcast(DType::u8, DType::i8, I(200)).i == -56);
  CHECK_THROWS_AS(bitcast(DType::boolean, DType::i8, I(1)), Error);
  CHECK_THROWS_AS(bitcast(DType::u8, DType::boolean, I(1)), Error);
  CHECK_THROWS_AS(bitcast(DType::f32, DType::i16, F(1.0)), Error);
}

TEST_CASE("ops outside their domain throw", "[scalar]") {
  CHECK_THROWS_AS(bin(OpKind::And, DType::f32, F(1), F(1)), Error);
  CHECK_THROWS_AS(bin(OpKind::Shl, DType::f16, F(1), F(1)), Error);
  CHECK_THROWS_AS(eval(OpKind::Exp, DType::i32, DType::i32, {I(1)}), Error);
  CHECK_THROWS_AS(bin(OpKind::Add, DType::boolean, I(1), I(1)), Error);
  CHECK_THROWS_AS(bin(OpKind::Shr, DType::boolean, I(1), I(1)), Error);
  CHECK_THROWS_AS(eval(OpKind::Load, DType::f32, DType::f32, {I(0)}), Error);
}

TEST_CASE("load_element and store_element use raw storage", "[scalar]") {
  SECTION("f32") {
    std::vector<float> m = {1.5f, -2.0f, 0.0f};
    CHECK(load_element(m.data(), 1, DType::f32).f == -2.0);
    store_element(m.data(), 2, DType::f32, F(0.1));
    CHECK(m[2] == 0.1f);
    CHECK(m[1] == -2.0f);
  }
  SECTION("f16 and bf16 as 16-bit patterns") {
    std::vector<uint16_t> m = {0x3C00, 0xC000, 0x7C00, 0};
    CHECK(load_element(m.data(), 0, DType::f16).f == 1.0);
    CHECK(load_element(m.data(), 1, DType::f16).f == -2.0);
    CHECK(load_element(m.data(), 2, DType::f16).f == INFINITY);
    CHECK(load_element(m.data(), 0, DType::bf16).f == p2(-7));
    store_element(m.data(), 3, DType::f16, F(1.0 + p2(-11)));
    CHECK(m[3] == 0x3C00);
    store_element(m.data(), 3, DType::bf16, F(-1.0));
    CHECK(m[3] == 0xBF80);
    CHECK(m[2] == 0x7C00);
  }
  SECTION("fp8 as bytes") {
    std::vector<uint8_t> m = {0x7E, 0x7B, 0, 0};
    CHECK(load_element(m.data(), 0, DType::f8e4m3).f == 448.0);
    CHECK(load_element(m.data(), 1, DType::f8e5m2).f == 57344.0);
    store_element(m.data(), 2, DType::f8e4m3, F(1000.0));
    CHECK(m[2] == 0x7E);
    store_element(m.data(), 3, DType::f8e5m2, F(-1.0));
    CHECK(m[3] == 0xBC);
  }
  SECTION("bool as one byte") {
    std::vector<uint8_t> m = {0, 2, 7, 7};
    CHECK(load_element(m.data(), 0, DType::boolean).i == 0);
    CHECK(load_element(m.data(), 1, DType::boolean).i == 1);
    store_element(m.data(), 2, DType::boolean, I(5));
    CHECK(m[2] == 1);
    store_element(m.data(), 3, DType::boolean, I(0));
    CHECK(m[3] == 0);
  }
  SECTION("ints extend by signedness") {
    std::vector<uint8_t> b = {0xFF, 0x80};
    CHECK(load_element(b.data(), 0, DType::i8).i == -1);
    CHECK(load_element(b.data(), 0, DType::u8).i == 255);
    CHECK(load_element(b.data(), 1, DType::i8).i == -128);
    std::vector<uint16_t> h = {0xFFFF};
    CHECK(load_element(h.data(), 0, DType::i16).i == -1);
    CHECK(load_element(h.data(), 0, DType::u16).i == 65535);
    std::vector<uint32_t> w = {0xFFFFFFFFu, 0};
    CHECK(load_element(w.data(), 0, DType::i32).i == -1);
    CHECK(load_element(w.data(), 0, DType::u32).i == 4294967295LL);
    store_element(w.data(), 1, DType::i32, I(-2));
    CHECK(w[1] == 0xFFFFFFFEu);
    std::vector<int64_t> q = {kI64Min, 0};
    CHECK(load_element(q.data(), 0, DType::i64).i == kI64Min);
    store_element(q.data(), 1, DType::i64, I(kI64Max));
    CHECK(q[1] == kI64Max);
    CHECK(q[0] == kI64Min);
  }
}
