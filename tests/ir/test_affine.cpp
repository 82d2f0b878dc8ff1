// The affine-offset analysis: which integer tiles are base + sum_d stride_d
// * i_d, with their strides as expressions (constants folded only between
// constants, so a unit stride is recognisable exactly when built from
// constants).
#include <catch2/catch.hpp>

#include "ir/affine.h"
#include "ir/builder.h"
#include "support/ir_helpers.h"

using namespace kiln;
using namespace kiln::test;

namespace {
using Kind = AffineForms::Node::Kind;
}  // namespace

TEST_CASE("affine forms of offset tiles", "[ir][affine]") {
  KernelBuilder b("aff", spec_for("aff"));
  auto x = b.buffer("x", DType::f32);
  auto n = b.scalar("n", DType::i32);
  auto rows = expand_dims(arange(4), 1) * n;           // stride n along axis 0
  auto off = b.program_id(0) * 32 + rows + arange(8);  // [4, 8]
  auto shifted = arange(8) << 2;                       // stride 4
  auto squared = arange(8) * arange(8);                // not affine
  store(x + off, zeros(DType::f32, {4, 8}));
  store(x + shifted, zeros(DType::f32, {8}));
  store(x + squared, zeros(DType::f32, {8}));
  Kernel k = b.finish();
  AffineForms f(k);

  const AffineForms::Form& o = f.of(off.id());
  REQUIRE(o.valid);
  REQUIRE(o.strides.size() == 2);
  CHECK(f.constant(o.strides[1]) == 1);  // rows are contiguous
  CHECK_FALSE(f.constant(o.strides[0]).has_value());
  const AffineForms::Node& s0 = f.node(o.strides[0]);  // (0 + 1) * n, then + 0 + 0
  CHECK((s0.kind == Kind::add || s0.kind == Kind::mul));
  CHECK_FALSE(f.constant(o.base).has_value());  // program_id * 32

  const AffineForms::Form& sh = f.of(shifted.id());
  REQUIRE(sh.valid);
  CHECK(f.constant(sh.strides[0]) == 4);
  CHECK(f.constant(sh.base) == 0);

  CHECK_FALSE(f.of(squared.id()).valid);
}
