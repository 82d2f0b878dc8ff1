// add, scaled_add, glu, convert and add_rows against a double-precision
// reference and the interpreter, over sizes that are not multiples of the block.
// Tolerance: the result's own rounding (half an ulp of T) plus, for glu,
// 1e-6 relative for the vectorised sigmoid (5e-7) and tanh.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "support/quantized_x.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {
double ulp_rtol(DType t) {
  switch (t) {
    case DType::f16: return 1e-3;
    case DType::bf16: return 8e-3;
    default: return 1e-6;
  }
}
const int64_t kSizes[] = {1, 7, 127, 1024, 4097};
}  // namespace

TEST_CASE("add matches x + y", "[kernels][elementwise]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32})
    for (int64_t n : kSizes) {
      INFO(dtype_name(t) << " n=" << n);
      Spec spec = find_kernel("add").make_spec({{"T", t}});
      auto x = HostBuffer::random(t, n, 1, -100, 100), y = HostBuffer::random(t, n, 2, -100, 100);
      HostBuffer z(t, n), zi(t, n);
      kiln::test::runtime().launch(spec, {{"x", x}, {"y", y}, {"z", z}, {"n", n}});
      kiln::test::runtime().interpret(spec, {{"x", x}, {"y", y}, {"z", zi}, {"n", n}});
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) ref[i] = x.get(i) + y.get(i);
      CHECK(kiln::test::worst_error(z, ref, 1e-30, ulp_rtol(t)) <= 1.0);
      CHECK(z.bytes() == zi.bytes());
    }
}

TEST_CASE("scaled_add matches y + alpha x in place", "[kernels][elementwise]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t n : kSizes) {
      INFO(dtype_name(t) << " n=" << n);
      Spec spec = find_kernel("scaled_add").make_spec({{"T", t}}, {{"BLOCK", 256}});
      auto x = HostBuffer::random(t, n, 3), y = HostBuffer::random(t, n, 4), y0 = y, yi = y;
      kiln::test::runtime().launch(spec, {{"x", x}, {"y", y}, {"n", n}, {"alpha", -0.75}});
      kiln::test::runtime().interpret(spec, {{"x", x}, {"y", yi}, {"n", n}, {"alpha", -0.75}});
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) ref[i] = y0.get(i) - 0.75 * x.get(i);
      CHECK(kiln::test::worst_error(y, ref, 1e-6, ulp_rtol(t)) <= 1.0);
      CHECK(y.bytes() == yi.bytes());
    }
}

TEST_CASE("glu matches silu(gate) * up, gelu_tanh(gate) * up and GPT-OSS's clamped SwiGLU",
          "[kernels][elementwise]") {
  for (int64_t act : {0, 1, 2})
    for (DType t : {DType::f32, DType::f16, DType::bf16})
      for (int64_t n : kSizes) {
        INFO(dtype_name(t) << " n=" << n << " ACT=" << act);
        Spec spec = find_kernel("glu").make_spec({{"T", t}}, {{"ACT", act}});
        // up past +-7 too, which the clamped SwiGLU clips.
        auto g = HostBuffer::random(t, n, 5, -12, 12), u = HostBuffer::random(t, n, 6, -9, 9);
        HostBuffer o(t, n), oi(t, n);
        kiln::test::runtime().launch(spec, {{"gate", g}, {"up", u}, {"out", o}, {"n", n}});
        kiln::test::runtime().interpret(spec, {{"gate", g}, {"up", u}, {"out", oi}, {"n", n}});
        std::vector<double> ref(n), refi(n);
        for (int64_t i = 0; i < n; ++i) {
          double gv = g.get(i), uv = u.get(i);
          if (act == 2) {  // GPT-OSS: gate clipped above, up both ways, plus one
            gv = std::min(gv, 7.0);
            uv = std::clamp(uv, -7.0, 7.0) + 1;
          }
          double a =
              act == 0 ? gv / (1 + std::exp(-gv))
              : act == 2
                  ? gv / (1 + std::exp(-1.702 * gv))
                  : 0.5 * gv *
                        (1 + std::tanh(std::sqrt(2 / M_PI) * (gv + 0.044715 * gv * gv * gv)));
          ref[i] = a * uv;
          refi[i] = oi.get(i);
        }
        CHECK(kiln::test::worst_error(o, ref, 1e-6, ulp_rtol(t) + 1e-6) <= 1.0);
        CHECK(kiln::test::worst_error(o, refi, 1e-6, ulp_rtol(t) + 1e-6) <= 1.0);
      }
}

TEST_CASE("convert stores rows rounded to Y at a row offset", "[kernels][elementwise]") {
  // The reference rounds through HostBuffer::set (the dtype's own rounding):
  // the kernel must agree bit for bit, and leave the rows around it alone.
  for (DType to : {DType::f16, DType::bf16})
    for (int64_t n : kSizes) {
      INFO(dtype_name(to) << " n=" << n);
      const int64_t row = 5, row0 = 3, total = row0 * row + n + 9;
      Spec spec = find_kernel("convert").make_spec({{"Y", to}});
      auto x = HostBuffer::random(DType::f32, n, 9, -70000, 70000);
      auto y = HostBuffer::random(to, total, 10), yi = y, want = y;
      for (int64_t i = 0; i < n; ++i) want.set(row0 * row + i, x.get(i));
      kiln::test::runtime().launch(spec,
                                   {{"x", x}, {"y", y}, {"n", n}, {"row0", row0}, {"row", row}});
      kiln::test::runtime().interpret(
          spec, {{"x", x}, {"y", yi}, {"n", n}, {"row0", row0}, {"row", row}});
      CHECK(y.bytes() == want.bytes());
      CHECK(yi.bytes() == want.bytes());
    }
}

TEST_CASE("add_rows adds a bias to every row, or each row's expert's", "[kernels][elementwise]") {
  // Exact: one f32 add per element. Grouped (TILE 2): rows 0-1 take expert
  // 2's bias, 2-3 expert 0's, 4-5 none (a tile past the last expert's).
  const int64_t n = 300, rows = 6, tile = 2, n_expert = 3;
  std::vector<float> x = kiln::test::normal_floats(rows * n, 1),
                     b = kiln::test::normal_floats(n_expert * n, 2);
  std::vector<int32_t> tile_expert = {2, 0, -1};
  for (int64_t t : {int64_t{0}, tile}) {
    INFO("TILE " << t);
    Spec spec = find_kernel("add_rows").make_spec({{"T", DType::f32}}, {{"TILE", t}});
    std::vector<float> want = x;
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t e = t ? tile_expert[r / t] : 0;
      if (e < 0) continue;
      for (int64_t c = 0; c < n; ++c) want[r * n + c] += b[e * n + c];
    }
    for (bool interpret : {false, true}) {
      std::vector<float> y = x;
      LaunchArgs args = {{"x", y}, {"b", b}, {"n", n}, {"rows", rows}, {"n_expert", n_expert}};
      if (t) args.emplace_back("tile_expert", tile_expert);
      if (interpret)
        kiln::test::runtime().interpret(spec, args);
      else
        kiln::test::runtime().launch(spec, args);
      CHECK(y == want);
    }
  }
}
