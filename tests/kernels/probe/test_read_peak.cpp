// read_peak, the bandwidth probe of `kiln bench --device`: each program's
// sum matches a scalar wrapping sum of its own slice exactly, compiled and
// through the interpreter, so the loop it times reads what it claims.
// Bad launches name the kernel.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "support/runtime_fixture.h"

using namespace kiln;

TEST_CASE("read_peak sums each program's slice", "[kernels][probe]") {
  const int64_t programs = 3, block = 256, words = 5 * block;
  Spec spec = find_kernel("read_peak").make_spec({}, {{"BLOCK", block}});
  std::mt19937 rng(7);
  std::vector<uint32_t> x(static_cast<size_t>(programs * words));
  for (auto& v : x) v = static_cast<uint32_t>(rng());
  for (bool interpret : {false, true}) {
    INFO((interpret ? "interpreter" : "compiled"));
    std::vector<uint32_t> y(programs, 0);
    const LaunchArgs args = {{"x", x}, {"y", y}, {"words", words}, {"programs", programs}};
    if (interpret)
      test::runtime().interpret(spec, args);
    else
      test::runtime().launch(spec, args);
    for (int64_t p = 0; p < programs; ++p) {
      uint32_t want = 0;
      for (int64_t i = 0; i < words; ++i) want += x[static_cast<size_t>(p * words + i)];
      CHECK(y[static_cast<size_t>(p)] == want);
    }
  }
}

TEST_CASE("read_peak refuses a slice off its blocks", "[kernels][probe][error]") {
  Spec spec = find_kernel("read_peak").make_spec({}, {{"BLOCK", 256}});
  std::vector<uint32_t> x(300), y(1);
  CHECK_THROWS_WITH(
      test::runtime().launch(
          spec, {{"x", x}, {"y", y}, {"words", int64_t{300}}, {"programs", int64_t{1}}}),
      Catch::Contains("kernel 'read_peak'") && Catch::Contains("words a multiple of BLOCK (256)"));
}
