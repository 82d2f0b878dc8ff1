// dot_peak, the compute probe of `kiln bench`: its sums match a scalar
// reference exactly for both operand types (byte dots are integer sums; the
// f32 FMAs sum small integers, exact below 2^24), so the loop it times is
// the loop it claims, not one the compiler shortened. Bad launches name the
// kernel.
#include <catch2/catch.hpp>
#include <random>

#include "ir/error.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

// One dot_peak launch with random integer inputs against the scalar sums.
// T = uint8_t (codes u8, x i8, y i32) or float (all f32).
template <class T, class X, class Y>
void check_sums(DType dt, int64_t acc) {
  const int64_t programs = 3, steps = 11, rounds = 4, windows = 8;  // 11 steps: windows wrap
  const int64_t g = dt == DType::u8 ? 4 : 1;
  INFO(dtype_name(dt) << " ACC=" << acc);
  Spec spec = find_kernel("dot_peak").make_spec({{"T", dt}}, {{"ACC", acc}});
  std::mt19937 rng(static_cast<unsigned>(acc));
  // Full u8 and i8 ranges for byte dots; |values| <= 8 for f32.
  std::vector<T> codes(static_cast<size_t>(16 * g * acc));
  std::vector<X> x(static_cast<size_t>(windows * rounds * acc * g));
  for (auto& c : codes) c = static_cast<T>(g == 4 ? rng() & 255 : static_cast<int>(rng() % 17) - 8);
  for (auto& v : x)
    v = static_cast<X>(g == 4 ? static_cast<int>(rng() & 255) - 128
                              : static_cast<int>(rng() % 17) - 8);
  std::vector<Y> y(static_cast<size_t>(programs * 16 * acc), Y(-1)), yi = y;
  auto args = [&](std::vector<Y>& out) {
    return LaunchArgs{
        {"codes", codes}, {"x", x}, {"y", out}, {"steps", steps}, {"programs", programs}};
  };
  test::runtime().launch(spec, args(y));
  test::runtime().interpret(spec, args(yi));
  // Every program sums the same products: lane `lane` of accumulator a over
  // all steps and rounds.
  auto want = [&](int64_t a, int64_t lane) {
    double s = 0;
    for (int64_t i = 0; i < steps * rounds; ++i) {
      int64_t first = (i / rounds % windows * rounds + i % rounds) * acc * g + a * g;
      for (int64_t j = 0; j < g; ++j)
        s += static_cast<double>(codes[static_cast<size_t>(16 * g * a + g * lane + j)]) *
             static_cast<double>(x[static_cast<size_t>(first + j)]);
    }
    return s;
  };
  for (size_t at = 0; at < y.size(); ++at) {
    auto a = static_cast<int64_t>(at / 16) % acc, lane = static_cast<int64_t>(at % 16);
    INFO("program " << at / 16 / acc << " accumulator " << a << " lane " << lane);
    double w = want(a, lane);
    REQUIRE(static_cast<double>(y[at]) == w);
    REQUIRE(static_cast<double>(yi[at]) == w);
  }
}

}  // namespace

TEST_CASE("dot_peak sums every step's products exactly", "[kernels][probe]") {
  for (int64_t acc : {1, 5, 12, 16}) {
    check_sums<uint8_t, int8_t, int32_t>(DType::u8, acc);
    check_sums<float, float, float>(DType::f32, acc);
  }
}

TEST_CASE("dot_peak rejects bad accumulator counts and launches", "[kernels][probe][error]") {
  const KernelDef& d = find_kernel("dot_peak");
  CHECK_THROWS_WITH(d.build(d.make_spec({{"T", DType::f32}}, {{"ACC", 17}})),
                    Catch::Contains("dot_peak") && Catch::Contains("ACC must be 1..16"));
  ScalarArgs a;
  a.set_int("programs", 0);
  a.set_int("steps", 4);
  CHECK_THROWS_WITH(d.launch_shape(d.make_spec({{"T", DType::u8}}), a),
                    Catch::Contains("dot_peak") && Catch::Contains("programs >= 1"));
}
