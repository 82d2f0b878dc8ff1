// int8_dot_peak, the compute probe of `kiln bench`: its sums match a scalar
// reference exactly (integer dots, nothing rounds), so the loop it times is
// the loop it claims, not one the compiler shortened. Bad launches name the
// kernel.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "support/runtime_fixture.h"

using namespace kiln;

TEST_CASE("int8_dot_peak sums every step's dots exactly", "[kernels][probe]") {
  // 11 steps: the x windows (8) wrap; full u8 and i8 ranges.
  for (int64_t acc : {1, 5, 12, 16}) {
    const int64_t programs = 3, steps = 11, rounds = 4, windows = 8;
    INFO("ACC=" << acc);
    Spec spec = find_kernel("int8_dot_peak").make_spec({}, {{"ACC", acc}});
    std::mt19937 rng(static_cast<unsigned>(acc));
    std::vector<uint8_t> codes(static_cast<size_t>(64 * acc));
    std::vector<int8_t> x(static_cast<size_t>(windows * rounds * acc * 4));
    for (auto& c : codes) c = static_cast<uint8_t>(rng() & 255);
    for (auto& v : x) v = static_cast<int8_t>(static_cast<int>(rng() & 255) - 128);
    std::vector<int32_t> y(static_cast<size_t>(programs * 16 * acc), -1), yi = y;
    auto args = [&](std::vector<int32_t>& out) {
      return std::vector<Arg>{Arg::buffer(codes.data(), static_cast<int64_t>(codes.size())),
                              Arg::buffer(x.data(), static_cast<int64_t>(x.size())),
                              Arg::buffer(out.data(), static_cast<int64_t>(out.size())),
                              Arg::scalar_int(steps)};
    };
    test::runtime().launch(spec, args(y), {{"programs", programs}});
    test::runtime().interpret(spec, args(yi), {{"programs", programs}});
    // Every program sums the same dots: lane `lane` of accumulator a over
    // all steps and rounds.
    auto want = [&](int64_t a, int64_t lane) {
      int64_t s = 0;
      for (int64_t i = 0; i < steps * rounds; ++i) {
        int64_t first = (i / rounds % windows * rounds + i % rounds) * acc * 4 + a * 4;
        for (int64_t j = 0; j < 4; ++j)
          s +=
              codes[static_cast<size_t>(64 * a + 4 * lane + j)] * x[static_cast<size_t>(first + j)];
      }
      return s;
    };
    for (size_t at = 0; at < y.size(); ++at) {
      auto a = static_cast<int64_t>(at / 16) % acc, lane = static_cast<int64_t>(at % 16);
      INFO("program " << at / 16 / acc << " accumulator " << a << " lane " << lane);
      int64_t w = want(a, lane);
      REQUIRE(y[at] == w);
      REQUIRE(yi[at] == w);
    }
  }
}

TEST_CASE("int8_dot_peak rejects bad accumulator counts and launches", "[kernels][probe][error]") {
  const KernelDef& d = find_kernel("int8_dot_peak");
  CHECK_THROWS_WITH(d.build(d.make_spec({}, {{"ACC", 17}})),
                    Catch::Contains("int8_dot_peak") && Catch::Contains("ACC must be 1..16"));
  ScalarArgs a;
  a.set_int("programs", 0);
  a.set_int("steps", 4);
  CHECK_THROWS_WITH(d.launch_shape(d.make_spec(), a),
                    Catch::Contains("int8_dot_peak") && Catch::Contains("programs >= 1"));
}
