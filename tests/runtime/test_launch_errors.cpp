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

TEST_CASE("wrong argument counts, kinds and small buffers are refused", "[runtime][error]") {
  Spec spec = find_kernel("gemv").make_spec();
  HostBuffer w(DType::f16, 64 * 64), x(DType::f32, 64), y(DType::f32, 64);
  auto& rt = kiln::test::runtime();
  REQUIRE_THROWS_WITH(rt.launch(spec, {w.arg(), x.arg()}),
                      Catch::Contains("kernel 'gemv' takes 5 arguments (w, x, y, m, k), got 2"));
  REQUIRE_THROWS_WITH(rt.launch(spec, {w.arg(), x.arg(), Arg::scalar_int(1), Arg::scalar_int(64),
                                       Arg::scalar_int(64)}),
                      Catch::Contains("argument 2 ('y') must be a buffer"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {w.arg(), x.arg(), y.arg(), Arg::scalar_int(65), Arg::scalar_int(64)}),
      Catch::Contains("buffer 'w' holds 4096 elements, the launch needs 4160"));
  REQUIRE_THROWS_WITH(
      rt.launch(spec, {w.arg(), x.arg(), y.arg(), Arg::scalar_int(64), Arg::scalar_int(-1)}),
      Catch::Contains("negative size"));
  Spec norm = find_kernel("rmsnorm").make_spec();
  REQUIRE_THROWS_WITH(
      rt.launch(norm, {x.arg(), x.arg(), y.arg(), Arg::scalar_int(64), Arg::scalar_float(1e-5)}),
      Catch::Contains("launch is missing the integer scalar 'rows'"));
}
