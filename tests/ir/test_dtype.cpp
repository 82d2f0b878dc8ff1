#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "ir/dtype.h"
#include "ir/error.h"

using namespace kiln;
using Catch::Contains;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// For every pair of adjacent finite values of a narrow format, the exact
// midpoint must round to the one with the even encoding, and anything just
// off the midpoint to the nearer one. This checks encode() against the
// decode table only, independently of how encode computes.
template <class Enc, class Dec>
void check_midpoints(int nbits, Enc enc, Dec dec) {
  uint32_t count = 1u << (nbits - 1);  // positive patterns
  for (uint32_t b = 0; b + 1 < count; ++b) {
    double lo = dec(b), hi = dec(b + 1);
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    double mid = (lo + hi) / 2;
    float fmid = static_cast<float>(mid);
    REQUIRE(static_cast<double>(fmid) == mid);  // midpoints are exact in f32
    uint32_t even = (b % 2 == 0) ? b : b + 1;
    INFO("pattern " << b << " mid " << mid);
    CHECK(static_cast<uint32_t>(enc(fmid)) == even);
    CHECK(static_cast<uint32_t>(enc(std::nextafter(fmid, 0.0f))) == b);
    CHECK(static_cast<uint32_t>(enc(std::nextafter(fmid, INFINITY))) == b + 1);
    // Negative values mirror the positive ones with the sign bit.
    uint32_t sign = 1u << (nbits - 1);
    CHECK(static_cast<uint32_t>(enc(-fmid)) == (even | sign));
  }
}

}  // namespace

TEST_CASE("f16: every non-NaN pattern round trips", "[dtype]") {
  int nans = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = f16_bits_to_f32(static_cast<uint16_t>(h));
    bool is_nan_pattern = ((h >> 10) & 0x1F) == 0x1F && (h & 0x3FF) != 0;
    if (is_nan_pattern) {
      ++nans;
      CHECK(std::isnan(f));
      uint16_t back = f32_to_f16_bits(f);
      CHECK(((back >> 10) & 0x1F) == 0x1F);
      CHECK((back & 0x3FF) != 0);
      CHECK((back & 0x8000) == (h & 0x8000));
      continue;
    }
    CHECK(!std::isnan(f));
    if (f32_to_f16_bits(f) != h) FAIL("f16 pattern " << h << " decodes to " << f);
  }
  CHECK(nans == 2 * 1023);
}

TEST_CASE("f16: known values and round to nearest even", "[dtype]") {
  CHECK(f32_to_f16_bits(1.0f) == 0x3C00);
  CHECK(f32_to_f16_bits(-2.0f) == 0xC000);
  CHECK(f32_to_f16_bits(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16_bits(0.0f) == 0x0000);
  CHECK(f32_to_f16_bits(-0.0f) == 0x8000);
  CHECK(f32_to_f16_bits(INFINITY) == 0x7C00);
  CHECK(f32_to_f16_bits(-INFINITY) == 0xFC00);
  CHECK(f16_bits_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_bits_to_f32(0x0400) == std::ldexp(1.0f, -14));
  CHECK(f16_bits_to_f32(0x3555) == 0.333251953125f);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even 1.
  CHECK(f32_to_f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  CHECK(f32_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(f32_to_f16_bits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3C01);
  // Overflow: 65520 is halfway to 2^16 and rounds to infinity; below stays.
  CHECK(f32_to_f16_bits(65519.0f) == 0x7BFF);
  CHECK(f32_to_f16_bits(65520.0f) == 0x7C00);
  CHECK(f32_to_f16_bits(1e10f) == 0x7C00);
  // Subnormals: 2^-25 is halfway between 0 and the smallest subnormal.
  CHECK(f32_to_f16_bits(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(f32_to_f16_bits(std::ldexp(1.0f, -25) + std::ldexp(1.0f, -35)) == 0x0001);
  CHECK(f32_to_f16_bits(3 * std::ldexp(1.0f, -25)) == 0x0002);
  CHECK(f32_to_f16_bits(std::ldexp(1.0f, -30)) == 0x0000);
  CHECK(f32_to_f16_bits(-std::ldexp(1.0f, -30)) == 0x8000);
  // The largest subnormal rounds up into the smallest normal.
  CHECK(f32_to_f16_bits(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)) == 0x0400);
  CHECK(std::isnan(f16_bits_to_f32(f32_to_f16_bits(NAN))));
}

TEST_CASE("f16: midpoints between all adjacent values", "[dtype]") {
  check_midpoints(16, f32_to_f16_bits, f16_bits_to_f32);
}

TEST_CASE("bf16: every non-NaN pattern round trips", "[dtype]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bf16_bits_to_f32(static_cast<uint16_t>(h));
    CHECK(bits(f) == h << 16);
    if (std::isnan(f)) {
      uint16_t back = f32_to_bf16_bits(f);
      CHECK(std::isnan(bf16_bits_to_f32(back)));
      CHECK((back & 0x8000) == (h & 0x8000));
      continue;
    }
    if (f32_to_bf16_bits(f) != h) FAIL("bf16 pattern " << h);
  }
}

TEST_CASE("bf16: round to nearest even against a reference", "[dtype]") {
  CHECK(f32_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie -> even
  CHECK(f32_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie -> even
  CHECK(f32_to_bf16_bits(INFINITY) == 0x7F80);
  CHECK(f32_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7F80);
  // A NaN whose payload sits only in the low bits must not become infinity.
  CHECK(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(from_bits(0x7F800001u)))));
  CHECK(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(from_bits(0xFF800001u)))));

  const uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x1234, 0xC0DE};
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    for (uint32_t lo : lows) {
      float x = from_bits(hi << 16 | lo);
      if (std::isnan(x)) continue;
      double down = bf16_bits_to_f32(static_cast<uint16_t>(hi));
      // hi is x truncated toward zero; hi + 1 is the neighbour away from zero.
      double up = bf16_bits_to_f32(static_cast<uint16_t>(hi + 1));
      uint32_t expect;
      if (lo == 0 || std::isinf(x)) {
        expect = hi;
      } else {
        double dx = std::fabs(static_cast<double>(x) - down);
        // Past the largest finite value the next step up is 2^128 (infinity).
        double du = (hi & 0x7FFF) == 0x7F7F ? std::ldexp(1.0, 128) - std::fabs(x)
                                            : std::fabs(up - static_cast<double>(x));
        expect = dx < du ? hi : dx > du ? hi + 1 : (hi % 2 == 0 ? hi : hi + 1);
      }
      if (f32_to_bf16_bits(x) != expect)
        FAIL("bf16 of " << std::hexfloat << x << " gave " << f32_to_bf16_bits(x) << " expected "
                        << expect);
    }
  }
}

TEST_CASE("f8e4m3: all 256 patterns", "[dtype]") {
  for (uint32_t b = 0; b < 256; ++b) {
    float f = f8e4m3_bits_to_f32(static_cast<uint8_t>(b));
    if ((b & 0x7F) == 0x7F) {
      CHECK(std::isnan(f));
      CHECK(f32_to_f8e4m3_bits(f) == b);
      continue;
    }
    CHECK(std::isfinite(f));  // E4M3FN has no infinities
    if (f32_to_f8e4m3_bits(f) != b) FAIL("e4m3 pattern " << b << " decodes to " << f);
  }
  CHECK(f8e4m3_bits_to_f32(0x7E) == 448.0f);
  CHECK(f8e4m3_bits_to_f32(0x38) == 1.0f);
  CHECK(f8e4m3_bits_to_f32(0x01) == std::ldexp(1.0f, -9));
  CHECK(f8e4m3_bits_to_f32(0x08) == std::ldexp(1.0f, -6));
  // Saturation to +-448, infinities included.
  CHECK(f32_to_f8e4m3_bits(448.0f) == 0x7E);
  CHECK(f32_to_f8e4m3_bits(464.0f) == 0x7E);
  CHECK(f32_to_f8e4m3_bits(500.0f) == 0x7E);
  CHECK(f32_to_f8e4m3_bits(1e30f) == 0x7E);
  CHECK(f32_to_f8e4m3_bits(INFINITY) == 0x7E);
  CHECK(f32_to_f8e4m3_bits(-INFINITY) == 0xFE);
  CHECK(f32_to_f8e4m3_bits(-1000.0f) == 0xFE);
  CHECK((f32_to_f8e4m3_bits(NAN) & 0x7F) == 0x7F);
  // Ties to even: 1 + 1/16 is halfway between 1 and 1.125.
  CHECK(f32_to_f8e4m3_bits(1.0625f) == 0x38);
  CHECK(f32_to_f8e4m3_bits(1.1875f) == 0x3A);
  // Subnormals: 2^-10 is halfway between 0 and 2^-9.
  CHECK(f32_to_f8e4m3_bits(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(f32_to_f8e4m3_bits(3 * std::ldexp(1.0f, -10)) == 0x02);
  CHECK(f32_to_f8e4m3_bits(-std::ldexp(1.0f, -12)) == 0x80);
}

TEST_CASE("f8e4m3: midpoints between all adjacent values", "[dtype]") {
  check_midpoints(8, f32_to_f8e4m3_bits, f8e4m3_bits_to_f32);
}

TEST_CASE("f8e5m2: all 256 patterns", "[dtype]") {
  for (uint32_t b = 0; b < 256; ++b) {
    float f = f8e5m2_bits_to_f32(static_cast<uint8_t>(b));
    uint32_t mag = b & 0x7F;
    if (mag > 0x7C) {
      CHECK(std::isnan(f));
      uint8_t back = f32_to_f8e5m2_bits(f);
      CHECK((back & 0x7F) > 0x7C);
      CHECK((back & 0x80) == (b & 0x80));
      continue;
    }
    if (mag == 0x7C) {
      // Infinity decodes, but the saturating encoder maps it to the max.
      CHECK(std::isinf(f));
      CHECK(f32_to_f8e5m2_bits(f) == ((b & 0x80) | 0x7B));
      continue;
    }
    if (f32_to_f8e5m2_bits(f) != b) FAIL("e5m2 pattern " << b << " decodes to " << f);
  }
  CHECK(f8e5m2_bits_to_f32(0x7B) == 57344.0f);
  CHECK(f8e5m2_bits_to_f32(0x3C) == 1.0f);
  CHECK(f8e5m2_bits_to_f32(0x01) == std::ldexp(1.0f, -16));
  CHECK(f32_to_f8e5m2_bits(57344.0f) == 0x7B);
  CHECK(f32_to_f8e5m2_bits(61440.0f) == 0x7B);
  CHECK(f32_to_f8e5m2_bits(1e9f) == 0x7B);
  CHECK(f32_to_f8e5m2_bits(-1e9f) == 0xFB);
  CHECK(f32_to_f8e5m2_bits(1.125f) == 0x3C);  // tie between 1 and 1.25 -> even
  CHECK(f32_to_f8e5m2_bits(1.375f) == 0x3E);  // tie between 1.25 and 1.5 -> even
  CHECK(f32_to_f8e5m2_bits(std::ldexp(1.0f, -17)) == 0x00);
  CHECK(f32_to_f8e5m2_bits(3 * std::ldexp(1.0f, -17)) == 0x02);
}

TEST_CASE("f8e5m2: midpoints between all adjacent values", "[dtype]") {
  check_midpoints(8, f32_to_f8e5m2_bits, f8e5m2_bits_to_f32);
}

TEST_CASE("round_to_float_dtype", "[dtype]") {
  float x = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20);
  CHECK(round_to_float_dtype(x, DType::f32) == x);
  CHECK(round_to_float_dtype(x, DType::f16) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(round_to_float_dtype(x, DType::bf16) == 1.0f);
  CHECK(round_to_float_dtype(1000.0f, DType::f8e4m3) == 448.0f);
  CHECK(round_to_float_dtype(1e6f, DType::f8e5m2) == 57344.0f);
  CHECK(round_to_float_dtype(0.3f, DType::f8e4m3) == 0.3125f);
}

TEST_CASE("dtype names, sizes and classes", "[dtype]") {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    CHECK(parse_dtype(dtype_name(t)) == t);
    DType u;
    CHECK(try_parse_dtype(dtype_name(t), &u));
    CHECK(u == t);
    CHECK(dtype_bytes(t) * 8 == dtype_bits(t));
  }
  CHECK(dtype_name(DType::boolean) == "bool");
  CHECK(dtype_bits(DType::boolean) == 8);
  CHECK(dtype_bits(DType::bf16) == 16);
  CHECK(dtype_bits(DType::f8e5m2) == 8);
  CHECK(dtype_bits(DType::i64) == 64);
  CHECK(is_float(DType::f8e4m3));
  CHECK(!is_float(DType::i32));
  CHECK(is_narrow_float(DType::bf16));
  CHECK(!is_narrow_float(DType::f32));
  CHECK(is_int(DType::u8));
  CHECK(!is_int(DType::boolean));
  CHECK(is_signed_int(DType::i16));
  CHECK(!is_signed_int(DType::u32));
}

TEST_CASE("parse_dtype errors name the text and the choices", "[dtype]") {
  DType t = DType::i8;
  CHECK(!try_parse_dtype("float", &t));
  CHECK(t == DType::i8);
  CHECK(!try_parse_dtype("", &t));
  CHECK(!try_parse_dtype("F32", &t));
  CHECK_THROWS_AS(parse_dtype("float32"), Error);
  CHECK_THROWS_WITH(parse_dtype("float32"), Contains("'float32'") && Contains("f32") &&
                                                Contains("bf16") && Contains("bool"));
}
