// Spec's target descriptor: part of a spec's name (and so of its compile
// key) only when it is not the default, and what kernels derive from it.
#include <catch2/catch.hpp>

#include "ir/spec.h"

using namespace kiln;

TEST_CASE("a spec names a target other than the default", "[ir][spec]") {
  Spec s{"add", {{"T", DType::f32}}, {{"BLOCK", 64}}};
  CHECK(s.str() == "add[T=f32,BLOCK=64]");
  s.target = TargetDesc{256, 16, 1};
  CHECK(s.str() == "add[T=f32,BLOCK=64]@v256r16w1");
  CHECK(s.target.lanes(DType::f32) == 8);
  CHECK(s.target.lanes(DType::f16) == 16);
  CHECK(TargetDesc{}.lanes(DType::f32) == 16);
}
