// Bad launches are refused before any code runs, with messages that name
// the kernel, the entry and the reason.
#include <catch2/catch.hpp>

#include "ir/error.h"
#include "support/runtime_fixture.h"
#include "support/test_data.h"

using namespace kiln;
using kiln::test::HostBuffer;

TEST_CASE("unknown kernels, dtypes and constexprs are named", "[runtime][error]") {
  REQUIRE_THROWS_WITH(find_kernel("gemm_v9"),
                      Catch::Contains("unknown kernel 'gemm_v9' (known: add"));
  REQUIRE_THROWS_WITH(parse_dtype("float33"), Catch::Contains("unknown dtype 'float33'"));
  const KernelDef& gemv = find_kernel("gemv");
  REQUIRE_THROWS_WITH(gemv.make_spec({{"W", DType::i8}}),
                      Catch::Contains("does not support dtype i8 for role 'W'"));
  REQUIRE_THROWS_WITH(gemv.make_spec({{"Q", DType::f16}}), Catch::Contains("no dtype role 'Q'"));
  REQUIRE_THROWS_WITH(gemv.make_spec({}, {{"BLOCK_N", 4}}),
                      Catch::Contains("no constexpr 'BLOCK_N'"));
  Spec missing = gemv.make_spec();
  missing.constexprs.erase("BLOCK_K");
  REQUIRE_THROWS_WITH(kiln::test::runtime().compile(missing),
                      Catch::Contains("kernel 'gemv': missing constexpr 'BLOCK_K'"));
}

TEST_CASE("missing, unknown and mistyped arguments and small buffers are refused",
          "[runtime][error]") {
  Spec spec = find_kernel("gemv").make_spec();
  HostBuffer w(DType::f16, 64 * 64), x(DType::f32, 64), y(DType::f32, 64);
  auto& rt = kiln::test::runtime();
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {{"w", w}, {"x", x}}),
      Catch::Contains("kernel 'gemv': no argument for parameter 'y' (a buffer of f32)"));
  REQUIRE_THROWS_WITH(
      rt.launch(
          spec,
          {{"w", w}, {"x", x}, {"y", y}, {"m", int64_t{64}}, {"k", int64_t{64}}, {"bias", y}}),
      Catch::Contains("kernel 'gemv' has no parameter 'bias' (parameters: w, x, y, m, k;"));
  // A misspelt integer scalar would pass for a launch size: the missing
  // parameter's error names it.
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {{"w", w}, {"x", x}, {"y", y}, {"mm", int64_t{64}}, {"k", int64_t{64}}}),
      Catch::Contains("no argument for parameter 'm' (a scalar i32); names given that are no "
                      "parameter: mm"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec,
                {{"w", w}, {"x", x}, {"y", int64_t{1}}, {"m", int64_t{64}}, {"k", int64_t{64}}}),
      Catch::Contains("kernel 'gemv': parameter 'y' is a buffer of f32, not a number"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {{"w", w}, {"x", w}, {"y", y}, {"m", int64_t{64}}, {"k", int64_t{64}}}),
      Catch::Contains("kernel 'gemv': parameter 'x' is a buffer of f32, given an array of f16"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {{"w", w}, {"x", x}, {"y", y}, {"m", 64.0}, {"k", int64_t{64}}}),
      Catch::Contains("kernel 'gemv': parameter 'm' is a scalar i32, given a float"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {{"w", w}, {"x", x}, {"y", y}, {"m", int64_t{65}}, {"k", int64_t{64}}}),
      Catch::Contains("buffer 'w' holds 4096 elements, the launch needs 4160"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {{"w", w}, {"x", x}, {"y", y}, {"m", int64_t{64}}, {"k", int64_t{-1}}}),
      Catch::Contains("negative size"));
  Spec norm = find_kernel("rmsnorm").make_spec();
  REQUIRE_THROWS_WITH(
      rt.launch(norm, {{"x", x}, {"w", x}, {"y", y}, {"n", int64_t{64}}, {"eps", 1e-5}}),
      Catch::Contains("launch is missing the integer scalar 'rows'"));
}
