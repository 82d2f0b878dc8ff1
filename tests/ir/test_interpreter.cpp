#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/interpreter.h"

using namespace kiln;
using Catch::Contains;

namespace {

constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();

Spec spec_for(const std::string& name) {
  Spec s;
  s.kernel = name;
  return s;
}

template <class T>
Arg buf(std::vector<T>& v) {
  return Arg::buffer(v.data(), static_cast<int64_t>(v.size()));
}

Value i32(int64_t v) { return full({}, static_cast<double>(v), DType::i32); }

// y[i] = 2 * x[i] + 1 for i < n, in blocks of 8; lanes past n are masked.
Kernel scale_kernel() {
  KernelBuilder k("scale", spec_for("scale"));
  auto x = k.buffer("x", DType::f32);
  auto y = k.buffer("y", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto c = k.program_id(0) * 8 + arange(8);
  store(y + c, load(x + c, c < n, -1.0) * 2.0 + 1.0, c < n);
  return k.finish();
}

}  // namespace

TEST_CASE("interp: masked elementwise kernel over a grid", "[interp]") {
  Kernel kern = scale_kernel();
  std::vector<float> x(13), y(13, 0.0f);
  for (int i = 0; i < 13; ++i) x[i] = 0.5f * static_cast<float>(i) - 3;
  // Buffers of exactly 13 elements: the masked tail of program 1 (lanes
  // 13..15) would be out of range if it touched memory.
  interpret(kern, {buf(x), buf(y), Arg::scalar_int(13)}, {2, 1, 1});
  for (int i = 0; i < 13; ++i) CHECK(y[i] == 2 * x[i] + 1);
}

TEST_CASE("interp: masked-off lanes take other and never touch memory", "[interp]") {
  KernelBuilder k("wild", spec_for("wild"));
  auto x = k.buffer("x", DType::f32);
  auto y = k.buffer("y", DType::f32);
  auto z = k.buffer("z", DType::i32);
  auto c = arange(8);
  auto m = c < 5;
  // Masked-off lanes carry offsets far outside every buffer.
  auto off = where(m, c, full({8}, -123456789.0, DType::i32));
  auto v = load(x + off, m, 42.0);
  store(y + arange(8), v);
  store(y + (off + 8), v * 10.0, m);
  atomic_add(z + off, full({8}, 1.0, DType::i32), m);
  Kernel kern = k.finish();

  std::vector<float> xs = {1, 2, 3, 4, 5};
  std::vector<float> ys(16, 0.0f);
  std::vector<int32_t> zs(5, 0);
  interpret(kern, {buf(xs), buf(ys), buf(zs)}, {1, 1, 1});
  std::vector<float> first(ys.begin(), ys.begin() + 8);
  CHECK(first == std::vector<float>{1, 2, 3, 4, 5, 42, 42, 42});
  std::vector<float> second(ys.begin() + 8, ys.end());
  CHECK(second == std::vector<float>{10, 20, 30, 40, 50, 0, 0, 0});
  CHECK(zs == std::vector<int32_t>{1, 1, 1, 1, 1});
}

TEST_CASE("interp: out-of-range access names kernel, op, buffer, index, program", "[interp]") {
  SECTION("load past the end") {
    KernelBuilder k("oob_load", spec_for("oob_load"));
    auto x = k.buffer("src", DType::f32);
    auto y = k.buffer("dst", DType::f32);
    auto c = k.program_id(0) * 8 + arange(8);
    store(y + c, load(x + c));
    Kernel kern = k.finish();
    std::vector<float> xs(12, 1.0f), ys(16, 0.0f);
    CHECK_THROWS_WITH(interpret(kern, {buf(xs), buf(ys)}, {2, 1, 1}),
                      Contains("'oob_load'") && Contains("load") && Contains("'src'") &&
                          Contains("index 12") && Contains("(1,0,0)"));
  }
  SECTION("store before the start") {
    KernelBuilder k("oob_store", spec_for("oob_store"));
    auto y = k.buffer("dst", DType::i32);
    auto c = arange(4) - 1;
    store(y + c, c);
    Kernel kern = k.finish();
    std::vector<int32_t> ys(4, 0);
    CHECK_THROWS_WITH(interpret(kern, {buf(ys)}, {1, 1, 1}),
                      Contains("'oob_store'") && Contains("store") && Contains("'dst'") &&
                          Contains("index -1") && Contains("(0,0,0)"));
  }
  SECTION("atomic on a masked-on lane") {
    KernelBuilder k("oob_atomic", spec_for("oob_atomic"));
    auto y = k.buffer("acc", DType::i32);
    auto c = arange(4);
    atomic_add(y + c, c, c != 1);
    Kernel kern = k.finish();
    std::vector<int32_t> ys(3, 0);
    CHECK_THROWS_WITH(interpret(kern, {buf(ys)}, {1, 1, 1}),
                      Contains("atomic_add") && Contains("'acc'") && Contains("index 3"));
  }
}

TEST_CASE("interp: argument count and kind are checked", "[interp]") {
  Kernel kern = scale_kernel();
  std::vector<float> x(8), y(8);
  CHECK_THROWS_WITH(interpret(kern, {buf(x), buf(y)}, {1, 1, 1}),
                    Contains("'scale'") && Contains("expected 3 arguments") && Contains("got 2"));
  CHECK_THROWS_WITH(
      interpret(kern, {buf(x), buf(y), Arg::scalar_int(1), Arg::scalar_int(1)}, {1, 1, 1}),
      Contains("'scale'") && Contains("got 4"));
  CHECK_THROWS_WITH(interpret(kern, {Arg::scalar_int(0), buf(y), Arg::scalar_int(1)}, {1, 1, 1}),
                    Contains("'scale'") && Contains("'x'") && Contains("scalar"));
  CHECK_THROWS_WITH(interpret(kern, {buf(x), buf(y), buf(x)}, {1, 1, 1}),
                    Contains("'scale'") && Contains("'n'") && Contains("buffer"));
  CHECK_THROWS_AS(interpret(kern, {buf(x), Arg::buffer(nullptr, 8), Arg::scalar_int(1)}, {1, 1, 1}),
                  Error);
  CHECK_THROWS_AS(interpret(kern, {buf(x), buf(y), Arg::scalar_int(1)}, {-1, 1, 1}), Error);
  // An empty grid runs nothing.
  interpret(kern, {buf(x), buf(y), Arg::scalar_int(8)}, {0, 1, 1});
}

TEST_CASE("interp: program_id and num_programs over a 3D grid, axis 0 fastest", "[interp]") {
  KernelBuilder k("grid", spec_for("grid"));
  auto ids = k.buffer("ids", DType::i32);
  auto np = k.buffer("np", DType::i32);
  auto order = k.buffer("order", DType::i32);
  auto counter = k.buffer("counter", DType::i32);
  auto p0 = k.program_id(0), p1 = k.program_id(1), p2 = k.program_id(2);
  auto n0 = k.num_programs(0), n1 = k.num_programs(1), n2 = k.num_programs(2);
  auto flat = p0 + n0 * (p1 + n1 * p2);
  store(ids + flat, p0 * 100 + p1 * 10 + p2);
  store(np + flat * 3, n0);
  store(np + (flat * 3 + 1), n1);
  store(np + (flat * 3 + 2), n2);
  store(order + flat, atomic_add(counter + i32(0), i32(1)));
  Kernel kern = k.finish();

  std::vector<int32_t> is(12, -1), ns(36, -1), os(12, -1), cnt(1, 0);
  interpret(kern, {buf(is), buf(ns), buf(os), buf(cnt)}, {3, 2, 2});
  for (int z = 0; z < 2; ++z)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x) {
        int f = x + 3 * (y + 2 * z);
        CHECK(is[f] == x * 100 + y * 10 + z);
        CHECK(os[f] == f);
        CHECK(ns[3 * f] == 3);
        CHECK(ns[3 * f + 1] == 2);
        CHECK(ns[3 * f + 2] == 2);
      }
  CHECK(cnt[0] == 12);
}

TEST_CASE("interp: scalar parameters are normalised to their dtype", "[interp]") {
  KernelBuilder k("params", spec_for("params"));
  auto out = k.buffer("out", DType::f32);
  auto iout = k.buffer("iout", DType::i32);
  auto h = k.scalar("h", DType::f16);
  auto f = k.scalar("f", DType::f32);
  auto b = k.scalar("b", DType::i8);
  auto u = k.scalar("u", DType::u16);
  auto flag = k.scalar("flag", DType::boolean);
  store(out + i32(0), h.to(DType::f32));
  store(out + i32(1), f);
  store(iout + i32(0), b.to(DType::i32));
  store(iout + i32(1), u.to(DType::i32));
  store(iout + i32(2), flag.to(DType::i32));
  Kernel kern = k.finish();

  std::vector<float> o(2, 0);
  std::vector<int32_t> io(3, 0);
  interpret(kern,
            {buf(o), buf(io), Arg::scalar_float(1.0 + std::ldexp(1.0, -11)), Arg::scalar_float(0.1),
             Arg::scalar_int(300), Arg::scalar_int(-1), Arg::scalar_int(2)},
            {1, 1, 1});
  CHECK(o[0] == 1.0f);  // f16 ties to even
  CHECK(o[1] == 0.1f);
  CHECK(io == std::vector<int32_t>{44, 65535, 1});
}

TEST_CASE("interp: for loops", "[interp]") {
  KernelBuilder k("loop", spec_for("loop"));
  auto out = k.buffer("out", DType::i32);
  auto cnt = k.buffer("cnt", DType::i32);
  auto lo = k.scalar("lo", DType::i32);
  auto hi = k.scalar("hi", DType::i32);
  auto step = k.scalar("step", DType::i32);
  auto n = k.var(i32(0));
  k.for_(lo, hi, step, [&](Value i) {
    Value cur = n;
    store(out + cur, i, cur < 8);
    n = cur + 1;
  });
  store(cnt + i32(0), n.get());
  Kernel kern = k.finish();

  auto run = [&](int32_t l, int32_t h, int32_t s) {
    std::vector<int32_t> o(8, -7), c(1, -1);
    interpret(kern, {buf(o), buf(c), Arg::scalar_int(l), Arg::scalar_int(h), Arg::scalar_int(s)},
              {1, 1, 1});
    o.resize(std::min(c[0], 8));
    return o;
  };
  CHECK(run(0, 10, 3) == std::vector<int32_t>{0, 3, 6, 9});
  CHECK(run(-3, 2, 2) == std::vector<int32_t>{-3, -1, 1});
  CHECK(run(0, 10, 0).empty());
  CHECK(run(0, 10, -1).empty());
  CHECK(run(5, 5, 1).empty());
  CHECK(run(10, 0, 1).empty());
  // Stops instead of wrapping when i + step overflows i32.
  CHECK(run(kI32Max - 5, kI32Max, 4) == std::vector<int32_t>{kI32Max - 5, kI32Max - 1});
  CHECK(run(kI32Max - 5, kI32Max, 10) == std::vector<int32_t>{kI32Max - 5});
  CHECK(run(kI32Min, kI32Min + 2, 1) == std::vector<int32_t>{kI32Min, kI32Min + 1});
}

TEST_CASE("interp: nested loops with an i64 induction variable and a tile var", "[interp]") {
  KernelBuilder k("nested", spec_for("nested"));
  auto x = k.buffer("x", DType::f32);
  auto y = k.buffer("y", DType::f32);
  auto s = k.buffer("s", DType::i64);
  auto n = k.scalar("n", DType::i64);
  auto acc = k.var(zeros(DType::f32, {4}));
  auto total = k.var(full({}, 0.0, DType::i64));
  k.for_(0, n, 4, [&](Value i) {
    auto c = i.to(DType::i32) + arange(4);
    acc = acc + load(x + c, c < n.to(DType::i32), 0.0);
    k.for_(0, 3, 1, [&](Value j) { total = total.get() + i * j.to(DType::i64); });
  });
  store(y + arange(4), acc.get());
  store(s + i32(0), total.get());
  Kernel kern = k.finish();

  std::vector<float> xs(10);
  for (int i = 0; i < 10; ++i) xs[i] = static_cast<float>(i + 1);
  std::vector<float> ys(4, 0);
  std::vector<int64_t> ss(1, 0);
  interpret(kern, {buf(xs), buf(ys), buf(ss), Arg::scalar_int(10)}, {1, 1, 1});
  // Chunks [1..4], [5..8], [9,10,0,0].
  CHECK(ys == std::vector<float>{15, 18, 10, 12});
  // i in {0,4,8}, j in {0,1,2}: sum i*j = 12 * 3.
  CHECK(ss[0] == 36);
}

TEST_CASE("interp: if and else", "[interp]") {
  KernelBuilder k("branch", spec_for("branch"));
  auto out = k.buffer("out", DType::i32);
  auto out2 = k.buffer("out2", DType::i32);
  auto p = k.program_id(0);
  k.if_(
      p == 0, [&] { store(out + p, i32(1)); }, [&] { store(out + p, i32(2)); });
  k.if_(p > 1, [&] { store(out2 + p, p * 7); });
  Kernel kern = k.finish();
  std::vector<int32_t> o(4, 0), o2(4, 0);
  interpret(kern, {buf(o), buf(o2)}, {4, 1, 1});
  CHECK(o == std::vector<int32_t>{1, 2, 2, 2});
  CHECK(o2 == std::vector<int32_t>{0, 0, 14, 21});
}

TEST_CASE("interp: vars declared in a body start over", "[interp]") {
  KernelBuilder k("vars", spec_for("vars"));
  auto out = k.buffer("out", DType::i32);
  auto outer = k.var(i32(100));
  k.for_(0, 3, 1, [&](Value i) {
    auto inner = k.var(i32(0));
    inner = inner.get() + i + 1;
    inner = inner.get() * 2;
    outer = outer.get() + inner.get();
    store(out + i, inner.get());
  });
  store(out + i32(3), outer.get());
  Kernel kern = k.finish();
  std::vector<int32_t> o(4, 0);
  interpret(kern, {buf(o)}, {1, 1, 1});
  CHECK(o == std::vector<int32_t>{2, 4, 6, 112});
}

TEST_CASE("interp: transpose, slice, broadcast, reshape", "[interp]") {
  KernelBuilder k("layout", spec_for("layout"));
  auto x = k.buffer("x", DType::f32);
  auto tr = k.buffer("tr", DType::f32);
  auto sl = k.buffer("sl", DType::f32);
  auto br = k.buffer("br", DType::f32);
  auto rs = k.buffer("rs", DType::f32);
  auto t = load(x + reshape(arange(6), {2, 3}));  // [[0,1,2],[3,4,5]]
  store(tr + reshape(arange(6), {3, 2}), transpose(t));
  store(sl + reshape(arange(4), {2, 2}), slice(t, {0, 1}, {2, 2}));
  store(sl + (arange(2) + 4), reshape(slice(t, {1, 0}, {1, 2}), {2}));
  auto row = load(x + arange(3));                      // [0,1,2]
  auto col = expand_dims(load(x + arange(2) * 3), 1);  // [[0],[3]]
  store(br + reshape(arange(6), {2, 3}), broadcast_to(row, {2, 3}));
  store(br + (reshape(arange(6), {2, 3}) + 6), broadcast_to(col, {2, 3}));
  store(br + (reshape(arange(6), {2, 3}) + 12), row + col);  // [[0,1,2],[3,4,5]]
  store(rs + reshape(arange(6), {3, 2}), reshape(t, {3, 2}));
  Kernel kern = k.finish();

  std::vector<float> xs = {0, 1, 2, 3, 4, 5};
  std::vector<float> trs(6, -1), sls(6, -1), brs(18, -1), rss(6, -1);
  interpret(kern, {buf(xs), buf(trs), buf(sls), buf(brs), buf(rss)}, {1, 1, 1});
  CHECK(trs == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(sls == std::vector<float>{1, 2, 4, 5, 3, 4});
  CHECK(brs == std::vector<float>{0, 1, 2, 0, 1, 2, 0, 0, 0, 3, 3, 3, 0, 1, 2, 3, 4, 5});
  CHECK(rss == xs);
}

TEST_CASE("interp: float reductions, NaN handling and argmax ties", "[interp]") {
  KernelBuilder k("reduce", spec_for("reduce"));
  auto x = k.buffer("x", DType::f32);
  auto mx = k.buffer("mx", DType::f32);
  auto mn = k.buffer("mn", DType::f32);
  auto am = k.buffer("am", DType::i32);
  auto am0 = k.buffer("am0", DType::i32);
  auto t = load(x + reshape(arange(16), {4, 4}));
  store(mx + arange(4), max(t, 1));
  store(mn + arange(4), min(t, 1));
  store(am + arange(4), argmax(t, 1));
  store(am0 + arange(4), argmax(t, 0));
  Kernel kern = k.finish();

  const float nan = NAN, inf = INFINITY;
  std::vector<float> xs = {1,    5,   5,    2,      // first of the tied maxima wins
                           nan,  2,   nan,  7,      // NaNs are skipped
                           nan,  nan, nan,  nan,    // all NaN
                           -inf, nan, -inf, -inf};  // max is -inf, first at 0
  std::vector<float> mxs(4), mns(4);
  std::vector<int32_t> ams(4, -1), am0s(4, -1);
  interpret(kern, {buf(xs), buf(mxs), buf(mns), buf(ams), buf(am0s)}, {1, 1, 1});
  CHECK(mxs[0] == 5);
  CHECK(mxs[1] == 7);
  CHECK(std::isnan(mxs[2]));
  CHECK(mxs[3] == -inf);
  CHECK(mns[0] == 1);
  CHECK(mns[1] == 2);
  CHECK(std::isnan(mns[2]));
  CHECK(mns[3] == -inf);
  CHECK(ams == std::vector<int32_t>{1, 3, 0, 0});
  // Columns: [1,nan,nan,-inf] [5,2,nan,nan] [5,nan,nan,-inf] [2,7,nan,-inf].
  CHECK(am0s == std::vector<int32_t>{0, 0, 0, 1});
}

TEST_CASE("interp: sums accumulate wide and round once", "[interp]") {
  KernelBuilder k("sums", spec_for("sums"));
  auto h = k.buffer("h", DType::f16);
  auto ho = k.buffer("ho", DType::f16);
  auto f = k.buffer("f", DType::f32);
  auto fo = k.buffer("fo", DType::f32);
  auto b = k.buffer("b", DType::i8);
  auto bo = k.buffer("bo", DType::i8);
  auto u = k.buffer("u", DType::u8);
  auto uo = k.buffer("uo", DType::u8);
  store(ho + i32(0), sum(load(h + arange(8))));
  store(fo + arange(2), sum(load(f + reshape(arange(6), {2, 3})), 1));
  store(fo + (arange(3) + 2), sum(load(f + reshape(arange(6), {2, 3})), 0));
  store(bo + arange(2), sum(load(b + reshape(arange(6), {2, 3})), 1));
  auto ut = load(u + arange(4));
  store(uo + i32(0), max(ut));
  store(uo + i32(1), min(ut));
  store(uo + i32(2), sum(ut));
  Kernel kern = k.finish();

  // 2048 + 7 * 1: each partial f16 sum would stay at 2048; one rounding of
  // 2055 gives 2056.
  std::vector<uint16_t> hs(8, f32_to_f16_bits(1.0f)), hos(1, 0);
  hs[0] = f32_to_f16_bits(2048.0f);
  std::vector<float> fs = {1e8f, 1, -1e8f, 0.5f, 0.25f, 0.125f}, fos(5, 0);
  std::vector<int8_t> bs = {100, 100, 100, -1, -2, -3}, bos(2, 0);
  std::vector<uint8_t> us = {200, 10, 255, 3}, uos(3, 0);
  interpret(kern, {buf(hs), buf(hos), buf(fs), buf(fos), buf(bs), buf(bos), buf(us), buf(uos)},
            {1, 1, 1});
  CHECK(f16_bits_to_f32(hos[0]) == 2056.0f);
  CHECK(fos[0] == 1.0f);  // exact in double; an f32 running sum would give 0
  CHECK(fos[1] == 0.875f);
  CHECK(fos[2] == 1e8f + 0.5f);
  CHECK(fos[3] == 1.25f);
  CHECK(fos[4] == -1e8f + 0.125f);
  CHECK(bos == std::vector<int8_t>{44, -6});        // 300 wraps in i8
  CHECK(uos == std::vector<uint8_t>{255, 3, 212});  // unsigned max; 468 wraps to 212
}

TEST_CASE("interp: dot products", "[interp]") {
  SECTION("f32 with accumulator") {
    KernelBuilder k("dotf", spec_for("dotf"));
    auto a = k.buffer("a", DType::f32);
    auto b = k.buffer("b", DType::f32);
    auto c = k.buffer("c", DType::f32);
    auto at = load(a + reshape(arange(6), {2, 3}));
    auto bt = load(b + reshape(arange(6), {3, 2}));
    store(c + reshape(arange(4), {2, 2}), dot(at, bt, full({2, 2}, 0.5, DType::f32)));
    Kernel kern = k.finish();
    std::vector<float> as = {1, 2, 3, 4, 5, 6}, bs = {7, 8, 9, 10, 11, 12}, cs(4, 0);
    interpret(kern, {buf(as), buf(bs), buf(cs)}, {1, 1, 1});
    CHECK(cs == std::vector<float>{58.5f, 64.5f, 139.5f, 154.5f});
  }
  SECTION("f32 sums in double and rounds once") {
    KernelBuilder k("dotx", spec_for("dotx"));
    auto a = k.buffer("a", DType::f32);
    auto c = k.buffer("c", DType::f32);
    auto at = load(a + reshape(arange(3), {1, 3}));
    store(c + reshape(arange(1), {1, 1}),
          dot(at, full({3, 1}, 1.0, DType::f32), zeros(DType::f32, {1, 1})));
    Kernel kern = k.finish();
    std::vector<float> as = {1e8f, 1, -1e8f}, cs(1, -1);
    interpret(kern, {buf(as), buf(cs)}, {1, 1, 1});
    CHECK(cs[0] == 1.0f);
  }
  SECTION("f16 operands, f32 accumulator") {
    KernelBuilder k("doth", spec_for("doth"));
    auto a = k.buffer("a", DType::f16);
    auto c = k.buffer("c", DType::f32);
    auto at = load(a + reshape(arange(2), {1, 2}));
    store(c + reshape(arange(1), {1, 1}), dot(at, transpose(at), zeros(DType::f32, {1, 1})));
    Kernel kern = k.finish();
    // (1 + 2^-10)^2 + 2048^2 = 4194305 + 2^-9 + 2^-20, rounded once to f32.
    std::vector<uint16_t> as = {f32_to_f16_bits(1.0f + std::ldexp(1.0f, -10)),
                                f32_to_f16_bits(2048.0f)};
    std::vector<float> cs(1, 0);
    interpret(kern, {buf(as), buf(cs)}, {1, 1, 1});
    CHECK(cs[0] == 4194305.0f);
  }
  SECTION("i8 x i8 -> i32") {
    KernelBuilder k("doti", spec_for("doti"));
    auto a = k.buffer("a", DType::i8);
    auto b = k.buffer("b", DType::i8);
    auto c = k.buffer("c", DType::i32);
    auto at = load(a + reshape(arange(4), {2, 2}));
    auto bt = load(b + reshape(arange(4), {2, 2}));
    store(c + reshape(arange(4), {2, 2}), dot(at, bt, zeros(DType::i32, {2, 2})));
    Kernel kern = k.finish();
    std::vector<int8_t> as = {-128, 127, 1, 2}, bs = {-128, 1, 127, -1};
    std::vector<int32_t> cs(4, 0);
    interpret(kern, {buf(as), buf(bs), buf(cs)}, {1, 1, 1});
    CHECK(cs == std::vector<int32_t>{16384 + 16129, -128 - 127, -128 + 254, 1 - 2});
  }
  SECTION("u8 x i8 -> i32, a is unsigned; the accumulator wraps") {
    KernelBuilder k("dotu", spec_for("dotu"));
    auto a = k.buffer("a", DType::u8);
    auto b = k.buffer("b", DType::i8);
    auto c = k.buffer("c", DType::i32);
    auto at = load(a + reshape(arange(2), {1, 2}));
    auto bt = load(b + reshape(arange(2), {2, 1}));
    auto acc = load(c + reshape(arange(1), {1, 1}));
    store(c + reshape(arange(1), {1, 1}), dot(at, bt, acc));
    Kernel kern = k.finish();
    std::vector<uint8_t> as = {200, 255};
    std::vector<int8_t> bs = {-2, 1};
    std::vector<int32_t> cs = {0};
    interpret(kern, {buf(as), buf(bs), buf(cs)}, {1, 1, 1});
    CHECK(cs[0] == -145);  // read as i8 it would be 111
    std::vector<int8_t> ones = {1, 1};
    cs[0] = kI32Max - 100;
    interpret(kern, {buf(as), buf(ones), buf(cs)}, {1, 1, 1});
    CHECK(cs[0] == kI32Min + 354);  // INT_MAX - 100 + 455 wraps
  }
}

TEST_CASE("interp: atomics are sequential in row-major order", "[interp]") {
  SECTION("add returns the running old values; masked lanes return 0") {
    KernelBuilder k("atom", spec_for("atom"));
    auto acc = k.buffer("acc", DType::f32);
    auto old = k.buffer("old", DType::f32);
    auto c = arange(8);
    auto o = atomic_add(acc + c * 0, (c + 1).to(DType::f32), c < 6);
    store(old + c, o);
    Kernel kern = k.finish();
    std::vector<float> a = {10, 0}, olds(8, -1);
    interpret(kern, {buf(a), buf(olds)}, {1, 1, 1});
    CHECK(olds == std::vector<float>{10, 11, 13, 16, 20, 25, 0, 0});
    CHECK(a == std::vector<float>{31, 0});
  }
  SECTION("max, min, xchg on i32") {
    KernelBuilder k("atom2", spec_for("atom2"));
    auto v = k.buffer("v", DType::i32);
    auto m = k.buffer("m", DType::i32);
    auto olds = k.buffer("olds", DType::i32);
    auto vals = load(v + arange(4));
    auto all = arange(4) >= 0;
    auto zero = arange(4) * 0;
    store(olds + arange(4), atomic_max(m + zero, vals, all));
    store(olds + (arange(4) + 4), atomic_min(m + (zero + 1), vals, all));
    store(olds + (arange(4) + 8), atomic_xchg(m + (zero + 2), vals, arange(4) != 2));
    Kernel kern = k.finish();
    std::vector<int32_t> vs = {5, 3, 9, 1}, ms = {4, 4, 0}, os(12, -1);
    interpret(kern, {buf(vs), buf(ms), buf(os)}, {1, 1, 1});
    CHECK(os == std::vector<int32_t>{4, 5, 5, 9, 4, 4, 3, 3, 0, 5, 0, 3});
    CHECK(ms == std::vector<int32_t>{9, 1, 1});
  }
  SECTION("f16 add rounds after every update") {
    KernelBuilder k("atomh", spec_for("atomh"));
    auto acc = k.buffer("acc", DType::f16);
    auto c = arange(4);
    atomic_add(acc + c * 0, full({4}, 1.0, DType::f16));
    Kernel kern = k.finish();
    std::vector<uint16_t> a = {f32_to_f16_bits(2048.0f)};
    interpret(kern, {buf(a)}, {1, 1, 1});
    CHECK(f16_bits_to_f32(a[0]) == 2048.0f);  // each 2049 ties back to 2048
  }
}

TEST_CASE("interp: integer kernels wrap and divide safely", "[interp]") {
  KernelBuilder k("ints", spec_for("ints"));
  auto a = k.buffer("a", DType::i32);
  auto b = k.buffer("b", DType::i32);
  auto q = k.buffer("q", DType::i32);
  auto r = k.buffer("r", DType::i32);
  auto s = k.buffer("s", DType::u32);
  auto c = arange(4);
  auto av = load(a + c), bv = load(b + c);
  store(q + c, av / bv);
  store(r + c, av % bv);
  store(s + c, av.to(DType::u32) >> 28);
  Kernel kern = k.finish();
  std::vector<int32_t> as = {7, -7, kI32Min, kI32Max}, bs = {0, 2, -1, -1}, qs(4), rs(4);
  std::vector<uint32_t> ss(4);
  interpret(kern, {buf(as), buf(bs), buf(qs), buf(rs), buf(ss)}, {1, 1, 1});
  CHECK(qs == std::vector<int32_t>{0, -3, kI32Min, -kI32Max});
  CHECK(rs == std::vector<int32_t>{0, -1, 0, 0});
  CHECK(ss == std::vector<uint32_t>{0, 15, 8, 7});
}

TEST_CASE("interp: lookups read the table and give 0 outside it", "[interp]") {
  // IQ4_NL's codebook by u8 codes and by i8 codes (negative ones outside);
  // u32 entries up to the top of the dtype by i32 indices; i64 extremes by
  // a scalar u16 index.
  const std::vector<int64_t> iq4nl = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
  KernelBuilder k("lut", spec_for("lut"));
  auto codes = k.buffer("codes", DType::u8), scodes = k.buffer("scodes", DType::i8);
  auto wide = k.buffer("wide", DType::i32), one = k.buffer("one", DType::u16);
  auto q = k.buffer("q", DType::i8), sq = k.buffer("sq", DType::i8);
  auto u = k.buffer("u", DType::u32), l = k.buffer("l", DType::i64);
  auto c = arange(8);
  store(q + c, lookup(iq4nl, DType::i8, load(codes + c)));
  store(sq + c, lookup(iq4nl, DType::i8, load(scodes + c)));
  store(u + c, lookup({4294967295, 0, 7}, DType::u32, load(wide + c)));
  auto zero = full({}, 0, DType::i32);
  store(l + zero, lookup({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()},
                         DType::i64, load(one + zero)));
  Kernel kern = k.finish();
  std::vector<uint8_t> cs = {0, 15, 8, 16, 128, 255, 7, 1};
  std::vector<int8_t> scs = {0, 15, -1, -128, 16, 127, 3, 9}, qs(8), sqs(8);
  std::vector<int32_t> ws = {0, 1, 2, 3, -1, kI32Min, kI32Max, 2};
  std::vector<uint16_t> os = {1};
  std::vector<uint32_t> us(8);
  std::vector<int64_t> ls(1);
  interpret(kern, {buf(cs), buf(scs), buf(ws), buf(os), buf(qs), buf(sqs), buf(us), buf(ls)},
            {1, 1, 1});
  CHECK(qs == std::vector<int8_t>{-127, 113, 1, 0, 0, 0, -10, -104});
  CHECK(sqs == std::vector<int8_t>{-127, 113, 0, 0, 0, 0, -65, 13});
  CHECK(us == std::vector<uint32_t>{4294967295u, 0, 7, 0, 0, 0, 0, 7});
  CHECK(ls[0] == std::numeric_limits<int64_t>::max());
}

TEST_CASE("interp: casts and narrow float storage", "[interp]") {
  KernelBuilder k("casts", spec_for("casts"));
  auto x = k.buffer("x", DType::f32);
  auto i = k.buffer("i", DType::i8);
  auto h = k.buffer("h", DType::bf16);
  auto e = k.buffer("e", DType::f8e4m3);
  auto c = arange(4);
  auto xv = load(x + c);
  store(i + c, xv.to(DType::i8));
  store(h + c, xv.to(DType::bf16));
  store(e + c, xv.to(DType::f8e4m3));
  Kernel kern = k.finish();
  std::vector<float> xs = {-1000.0f, 2.9f, NAN, 1.0f + std::ldexp(1.0f, -8)};
  std::vector<int8_t> is(4);
  std::vector<uint16_t> hs(4);
  std::vector<uint8_t> es(4);
  interpret(kern, {buf(xs), buf(is), buf(hs), buf(es)}, {1, 1, 1});
  CHECK(is == std::vector<int8_t>{-128, 2, 0, 1});
  CHECK(hs[0] == 0xC47A);  // -1000 is exact in bf16
  CHECK(hs[1] == 0x403A);  // 2.9 -> 2.90625
  CHECK(std::isnan(bf16_bits_to_f32(hs[2])));
  CHECK(hs[3] == 0x3F80);  // tie to even
  CHECK(es[0] == 0xFE);    // saturates at -448
  CHECK(es[1] == 0x44);    // 2.9 -> 3.0, the nearer of 2.75 and 3.0
  CHECK((es[2] & 0x7F) == 0x7F);
  CHECK(es[3] == 0x38);
}

TEST_CASE("interp: malformed kernels throw instead of crashing", "[interp]") {
  auto base = [] {
    Kernel k;
    k.name = "bad";
    k.params = {{"x", ParamKind::Buffer, DType::f32}, {"n", ParamKind::Scalar, DType::i32}};
    k.values = {Type{DType::i32, {4}}, Type{DType::f32, {4}}};
    Op ar;
    ar.kind = OpKind::Arange;
    ar.result = 0;
    k.body.ops.push_back(ar);
    return k;
  };
  std::vector<float> xs(4);
  std::vector<Arg> args = {buf(xs), Arg::scalar_int(4)};

  Kernel ok = base();
  interpret(ok, args, {1, 1, 1});

  Kernel load_scalar = base();
  Op ld;
  ld.kind = OpKind::Load;
  ld.result = 1;
  ld.args = {0};
  ld.ival = 1;  // the scalar parameter
  load_scalar.body.ops.push_back(ld);
  CHECK_THROWS_WITH(interpret(load_scalar, args, {1, 1, 1}),
                    Contains("'bad'") && Contains("not a buffer"));

  Kernel bad_id = base();
  ld.ival = 0;
  ld.args = {7};
  bad_id.body.ops.push_back(ld);
  CHECK_THROWS_WITH(interpret(bad_id, args, {1, 1, 1}), Contains("%7"));

  Kernel undefined = base();
  undefined.values.push_back(Type{DType::f32, {4}});
  Op add;
  add.kind = OpKind::Add;
  add.result = 2;
  add.args = {1, 1};
  undefined.body.ops.push_back(add);  // %1 is read but no op defines it
  CHECK_THROWS_WITH(interpret(undefined, args, {1, 1, 1}), Contains("before it is defined"));

  Kernel bad_slice = base();
  bad_slice.values.push_back(Type{DType::i32, {3}});
  Op sl;
  sl.kind = OpKind::Slice;
  sl.result = 2;
  sl.args = {0};
  sl.ints = {2};
  bad_slice.body.ops.push_back(sl);
  CHECK_THROWS_WITH(interpret(bad_slice, args, {1, 1, 1}), Contains("slice"));

  Kernel bad_for = base();
  Op fr;
  fr.kind = OpKind::For;
  fr.args = {0, 0};
  fr.result = 0;
  fr.regions.resize(1);
  bad_for.body.ops.push_back(fr);
  CHECK_THROWS_AS(interpret(bad_for, args, {1, 1, 1}), Error);

  Kernel bad_var = base();
  Op vl;
  vl.kind = OpKind::VarLoad;
  vl.result = 0;
  vl.ival = 3;
  bad_var.body.ops.push_back(vl);
  CHECK_THROWS_WITH(interpret(bad_var, args, {1, 1, 1}), Contains("variable"));
}

namespace {

// y = A @ x, BLOCK_M rows per program, BLOCK_K columns per step.
Kernel gemv_kernel(int64_t bm, int64_t bk) {
  KernelBuilder k("gemv", spec_for("gemv"));
  auto a = k.buffer("a", DType::f32);
  auto x = k.buffer("x", DType::f32);
  auto y = k.buffer("y", DType::f32);
  auto m = k.scalar("m", DType::i32);
  auto kk = k.scalar("k", DType::i32);
  auto rows = k.program_id(0) * bm + arange(bm);
  auto acc = k.var(zeros(DType::f32, {bm}));
  k.for_(0, kk, bk, [&](Value k0) {
    auto cols = k0 + arange(bk);
    auto r2 = expand_dims(rows, 1), c2 = expand_dims(cols, 0);
    auto tile = load(a + (r2 * kk + c2), (r2 < m) & (c2 < kk), 0.0);
    auto xv = load(x + cols, cols < kk, 0.0);
    acc = acc + sum(tile * expand_dims(xv, 0), 1);
  });
  store(y + rows, acc.get(), rows < m);
  return k.finish();
}

void check_gemv(int64_t m, int64_t kdim, int64_t bm, int64_t bk) {
  Kernel kern = gemv_kernel(bm, bk);
  std::vector<float> a(static_cast<size_t>(m * kdim)), x(static_cast<size_t>(kdim)),
      y(static_cast<size_t>(m), -1);
  // Small integers keep every partial sum exact, whatever the order.
  for (int64_t i = 0; i < m * kdim; ++i) a[i] = static_cast<float>((i * 7 + 3) % 5 - 2);
  for (int64_t j = 0; j < kdim; ++j) x[j] = static_cast<float>((j * 3 + 1) % 4 - 1);
  auto t0 = std::chrono::steady_clock::now();
  interpret(kern, {buf(a), buf(x), buf(y), Arg::scalar_int(m), Arg::scalar_int(kdim)},
            {(m + bm - 1) / bm, 1, 1});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("gemv " << m << "x" << kdim << " took " << secs << " s");
  for (int64_t i = 0; i < m; ++i) {
    double ref = 0;
    for (int64_t j = 0; j < kdim; ++j) ref += static_cast<double>(a[i * kdim + j]) * x[j];
    if (y[i] != static_cast<float>(ref)) FAIL("row " << i << ": " << y[i] << " != " << ref);
  }
  SUCCEED();
}

}  // namespace

TEST_CASE("interp: gemv tile program with ragged edges", "[interp]") { check_gemv(37, 300, 4, 64); }

TEST_CASE("interp: gemv 4096x4096", "[interp][perf]") { check_gemv(4096, 4096, 4, 256); }
