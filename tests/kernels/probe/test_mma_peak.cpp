// mma_peak, the tile-dot probe of `kiln bench --device`: with small integer
// inputs every product and sum is exact in f32, so each program's result
// equals a double-precision a * (sum of the windows its steps took) exactly,
// compiled and through the interpreter: the loop it times is the loop it
// claims. Bad launches name the kernel.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

TEST_CASE("mma_peak accumulates its tile dots exactly", "[kernels][probe]") {
  const int64_t tile = 16, programs = 2, steps = 11, windows = 8;  // 11 steps: windows wrap
  for (DType t : {DType::f16, DType::bf16}) {
    INFO(dtype_name(t));
    Spec spec = find_kernel("mma_peak").make_spec({{"T", t}}, {{"TILE", tile}});
    std::mt19937 rng(5);
    HostBuffer a(t, tile * tile), b(t, windows * tile * tile);
    for (HostBuffer* buf : {&a, &b})
      for (int64_t i = 0; i < buf->size(); ++i) buf->set(i, static_cast<int>(rng() % 9) - 4);
    for (bool interpret : {false, true}) {
      INFO((interpret ? "interpreter" : "compiled"));
      HostBuffer y(DType::f32, programs * tile * tile);
      const LaunchArgs args = {
          {"a", a}, {"b", b}, {"y", y}, {"steps", steps}, {"programs", programs}};
      if (interpret)
        test::runtime().interpret(spec, args);
      else
        test::runtime().launch(spec, args);
      for (int64_t p = 0; p < programs; ++p)
        for (int64_t r = 0; r < tile; ++r)
          for (int64_t c = 0; c < tile; ++c) {
            double want = 0;
            for (int64_t s = 0; s < steps; ++s)
              for (int64_t j = 0; j < tile; ++j)
                want += a.get(r * tile + j) * b.get((s % windows) * tile * tile + j * tile + c);
            REQUIRE(y.get(p * tile * tile + r * tile + c) == want);
          }
    }
  }
}

TEST_CASE("mma_peak refuses a tile off the mma shape", "[kernels][probe][error]") {
  CHECK_THROWS_WITH(
      build_kernel(find_kernel("mma_peak").make_spec({{"T", DType::f16}}, {{"TILE", 24}})),
      Catch::Contains("kernel 'mma_peak': TILE must be a positive multiple of 16, got 24"));
}
