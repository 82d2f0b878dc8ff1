#include "ir/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ir/error.h"

namespace kiln {

namespace {

struct DTypeInfo {
  std::string_view name;
  int bits;
};

constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"f32", 32}, {"f16", 16}, {"bf16", 16}, {"f8e4m3", 8}, {"f8e5m2", 8}, {"i8", 8},   {"u8", 8},
    {"i16", 16}, {"u16", 16}, {"i32", 32},  {"u32", 32},   {"i64", 64},   {"bool", 8},
};

// A small binary float format: `mant` explicit mantissa bits, exponent bias,
// whether the all-ones exponent means inf/NaN (IEEE) or is a normal binade
// with a single NaN mantissa (E4M3FN).
struct SmallFloat {
  int mant;
  int exp_bits;
  int bias;
  bool ieee_specials;
  bool saturate;

  double max_finite() const {
    int top_exp = (1 << exp_bits) - 1 - (ieee_specials ? 1 : 0) - bias;
    // E4M3FN: the all-ones mantissa of the top binade is NaN.
    double top_mant = ieee_specials ? 2.0 - std::ldexp(1.0, -mant) : 2.0 - std::ldexp(2.0, -mant);
    return std::ldexp(top_mant, top_exp);
  }
  uint32_t nan_bits() const {
    uint32_t e = (1u << exp_bits) - 1;
    return ieee_specials ? (e << mant) | (1u << (mant - 1)) : (e << mant) | ((1u << mant) - 1);
  }
  uint32_t inf_bits() const { return ((1u << exp_bits) - 1) << mant; }

  uint32_t encode(float xf) const {
    double x = xf;
    uint32_t sign = std::signbit(x) ? 1u << (mant + exp_bits) : 0;
    if (std::isnan(x)) return sign | nan_bits();
    double a = std::fabs(x);
    double mx = max_finite();
    int emin = 1 - bias;
    if (a > mx) {
      if (saturate || !ieee_specials) return sign | encode_finite(mx, emin);
      // Round to nearest even: at or above max + half an ulp goes to inf.
      double half_ulp = std::ldexp(1.0, std::ilogb(mx) - mant - 1);
      if (std::isinf(a) || a >= mx + half_ulp) return sign | inf_bits();
      return sign | encode_finite(mx, emin);
    }
    if (a == 0) return sign;
    int e = std::max(std::ilogb(a), emin);
    double quantum = std::ldexp(1.0, e - mant);
    double q = a / quantum;        // exact: a has 24 bits, quantum a power of two
    double n = std::nearbyint(q);  // default rounding mode: ties to even
    double v = n * quantum;
    if (v > mx) v = mx;  // only reachable when saturating a rounded-up max
    return sign | encode_finite(v, emin);
  }

  uint32_t encode_finite(double v, int emin) const {
    if (v == 0) return 0;
    int e = std::ilogb(v);
    if (e < emin) {
      return static_cast<uint32_t>(std::ldexp(v, mant - emin));
    }
    uint32_t m = static_cast<uint32_t>(std::ldexp(v, mant - e)) - (1u << mant);
    return (static_cast<uint32_t>(e + bias) << mant) | m;
  }

  float decode(uint32_t b) const {
    uint32_t m = b & ((1u << mant) - 1);
    uint32_t e = (b >> mant) & ((1u << exp_bits) - 1);
    bool neg = (b >> (mant + exp_bits)) & 1;
    double v;
    uint32_t emax = (1u << exp_bits) - 1;
    if (ieee_specials && e == emax) {
      v = m ? NAN : INFINITY;
    } else if (!ieee_specials && e == emax && m == (1u << mant) - 1) {
      v = NAN;
    } else if (e == 0) {
      v = std::ldexp(static_cast<double>(m), 1 - bias - mant);
    } else {
      v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mant), static_cast<int>(e) - bias);
    }
    return static_cast<float>(neg ? -v : v);
  }
};

constexpr SmallFloat kF16{10, 5, 15, true, false};
constexpr SmallFloat kE4M3{3, 4, 7, false, true};
constexpr SmallFloat kE5M2{2, 5, 15, true, true};

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

}  // namespace

std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }

bool try_parse_dtype(std::string_view name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kInfo[i].name == name) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

DType parse_dtype(std::string_view name) {
  DType t;
  if (try_parse_dtype(name, &t)) return t;
  std::string all;
  for (const auto& i : kInfo) all += (all.empty() ? "" : ", ") + std::string(i.name);
  throw Error("unknown dtype '" + std::string(name) + "' (known: " + all + ")");
}

int dtype_bits(DType t) { return kInfo[static_cast<int>(t)].bits; }
int dtype_bytes(DType t) { return dtype_bits(t) / 8; }

bool is_float(DType t) { return t <= DType::f8e5m2; }
bool is_narrow_float(DType t) { return is_float(t) && t != DType::f32; }
bool is_int(DType t) { return t >= DType::i8 && t <= DType::i64; }
bool is_signed_int(DType t) {
  return t == DType::i8 || t == DType::i16 || t == DType::i32 || t == DType::i64;
}

uint16_t f32_to_f16_bits(float x) { return static_cast<uint16_t>(kF16.encode(x)); }
float f16_bits_to_f32(uint16_t h) { return kF16.decode(h); }

uint16_t f32_to_bf16_bits(float x) {
  uint32_t u = float_bits(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint8_t f32_to_f8e4m3_bits(float x) { return static_cast<uint8_t>(kE4M3.encode(x)); }
float f8e4m3_bits_to_f32(uint8_t b) { return kE4M3.decode(b); }
uint8_t f32_to_f8e5m2_bits(float x) { return static_cast<uint8_t>(kE5M2.encode(x)); }
float f8e5m2_bits_to_f32(uint8_t b) { return kE5M2.decode(b); }

float round_to_float_dtype(float x, DType t) {
  switch (t) {
    case DType::f16: return f16_bits_to_f32(f32_to_f16_bits(x));
    case DType::bf16: return bf16_bits_to_f32(f32_to_bf16_bits(x));
    case DType::f8e4m3: return f8e4m3_bits_to_f32(f32_to_f8e4m3_bits(x));
    case DType::f8e5m2: return f8e5m2_bits_to_f32(f32_to_f8e5m2_bits(x));
    default: return x;
  }
}

}  // namespace kiln
