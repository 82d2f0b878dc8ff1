// Scratch arrays in the IR: declared by the builder, checked by the
// verifier, kept by the text form, and per program in the interpreter,
// against a scalar double-precision reference of the same computation.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/scratch_kernel.h"

using namespace kiln;
using namespace kiln::test;
using Catch::Contains;

namespace {

// scratch_kernel's result for one program's tile x, in doubles: s = x
// reversed, t = 3x with t[i] = x[i] - 1 for i < n, out[i] = sum_j s[j] t[i]
// + s[i].
std::vector<double> scratch_reference(const float* x, int64_t n) {
  const int64_t N = kScratchTile;
  std::vector<double> s(N), t(N), out(N);
  for (int64_t i = 0; i < N; ++i) {
    s[N - 1 - i] = x[i];
    t[i] = i < n ? static_cast<double>(x[i]) - 1 : 3.0 * x[i];
  }
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < N; ++j) out[i] += s[j] * t[i];
    out[i] += s[i];
  }
  return out;
}

}  // namespace

TEST_CASE("scratch: each program has its own array, read after its stores", "[ir][scratch]") {
  Kernel k = scratch_kernel();
  const int64_t N = kScratchTile, programs = 3;
  std::vector<float> x(N * programs), out(N * programs);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i)) * 2;
  for (int64_t n : {int64_t{0}, int64_t{17}, N}) {
    INFO("n = " << n);
    interpret(k,
              {Arg::buffer(x.data(), N * programs), Arg::buffer(out.data(), N * programs),
               Arg::scalar_int(n)},
              {programs, 1, 1});
    for (int64_t p = 0; p < programs; ++p) {
      auto want = scratch_reference(x.data() + p * N, n);
      for (int64_t i = 0; i < N; ++i)
        // f32 FMAs over 48 terms of magnitude <= 12.
        REQUIRE(out[p * N + i] == Approx(want[i]).margin(1e-4).epsilon(1e-5));
    }
  }
}

TEST_CASE("scratch: a read before any store shows, and out of range is an error",
          "[ir][scratch][error]") {
  KernelBuilder k("unset", spec_for("unset"));
  auto out = k.buffer("out", DType::f32);
  auto i = k.scalar("i", DType::i32);
  auto s = k.scratch("s", DType::f32, 8);
  store(s + arange(4), zeros(DType::f32, {4}));
  store(out + k.program_id(0), load(s + i));
  Kernel kern = k.finish();
  std::vector<float> o(2);
  interpret(kern, {Arg::buffer(o.data(), 2), Arg::scalar_int(3)}, {2, 1, 1});
  CHECK(o[0] == 0);
  CHECK(o[1] == 0);
  // Element 5 was never stored by this program: the interpreter's fill
  // (NaN) shows, whatever an earlier program stored.
  interpret(kern, {Arg::buffer(o.data(), 2), Arg::scalar_int(5)}, {2, 1, 1});
  CHECK(std::isnan(o[0]));
  CHECK(std::isnan(o[1]));
  CHECK_THROWS_WITH(interpret(kern, {Arg::buffer(o.data(), 2), Arg::scalar_int(8)}, {1, 1, 1}),
                    Contains("index 8 out of range for scratch array 's' of 8 elements"));
}

TEST_CASE("scratch: the text form keeps the arrays and round-trips", "[ir][scratch]") {
  Kernel k = scratch_kernel();
  std::string text = print_kernel(k);
  CHECK_THAT(text, Contains("scratch(s: f32[96])"));
  CHECK_THAT(text, Contains("s["));
  Kernel back = parse_kernel(text);
  CHECK(print_kernel(back) == text);
  REQUIRE(back.scratch.size() == 1);
  CHECK(back.scratch[0].elems == 96);
}

TEST_CASE("scratch: bad declarations and uses are refused by name", "[ir][scratch][error]") {
  {
    KernelBuilder k("dup", spec_for("dup"));
    k.buffer("s", DType::f32);
    CHECK_THROWS_WITH(k.scratch("s", DType::f32, 4), Contains("parameter 's' declared twice"));
  }
  {
    KernelBuilder k("big", spec_for("big"));
    CHECK_THROWS_WITH(k.scratch("s", DType::f32, kMaxScratchElems + 1),
                      Contains("'s' has 16385 elements (1..16384)"));
  }
  {
    KernelBuilder k("atom", spec_for("atom"));
    auto s = k.scratch("s", DType::f32, 4);
    CHECK_THROWS_WITH(atomic_add(s + arange(4), zeros(DType::f32, {4})),
                      Contains("'s' is a scratch array"));
  }
  std::string text = print_kernel(scratch_kernel());
  std::string dup = text;
  dup.replace(dup.find("scratch(s:"), 10, "scratch(x:");
  CHECK_THROWS_WITH(parse_kernel(dup), Contains("'x' declared twice"));
  std::string huge = text;
  huge.replace(huge.find("f32[96]"), 7, "f32[99999]");
  CHECK_THROWS_WITH(parse_kernel(huge), Contains("holds 1..16384 elements"));
  Kernel bad = scratch_kernel();
  bad.scratch.clear();
  CHECK_THROWS_WITH(verify(bad), Contains("scratch array index 0 out of range"));
}
