#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "support/ir_helpers.h"

using namespace kiln;
using Catch::Contains;

namespace {

using kiln::test::count_ops;
using kiln::test::spec_for;

// The RMSNorm of the architecture notes, written against the real API.
Kernel rmsnorm(const Spec& s) {
  KernelBuilder k("rmsnorm", s);
  DType T = s.dtype("T");
  const DType f32 = DType::f32;
  auto x = k.buffer("x", T), w = k.buffer("w", T), y = k.buffer("y", T);
  auto n = k.scalar("n", DType::i32);
  auto eps = k.scalar("eps", f32);
  const int B = static_cast<int>(s.constexpr_("BLOCK"));
  auto row = k.program_id(0);
  auto acc = k.var(zeros(f32, {B}));
  k.for_(0, n, B, [&](Value i) {
    auto c = i + arange(B);
    auto v = load(x + row * n + c, c < n, 0.0f).to(f32);
    acc = acc + v * v;
  });
  auto r = rsqrt(sum(acc) / n.to(f32) + eps);
  k.for_(0, n, B, [&](Value i) {
    auto c = i + arange(B);
    auto v = load(x + row * n + c, c < n, 0.0f).to(f32);
    auto g = load(w + c, c < n, 0.0f).to(f32);
    store(y + row * n + c, (v * r * g).to(T), c < n);
  });
  return k.finish();
}

Spec rmsnorm_spec() {
  Spec s = spec_for("rmsnorm");
  s.dtypes["T"] = DType::f32;
  s.constexprs["BLOCK"] = 8;
  return s;
}

}  // namespace

TEST_CASE("an RMSNorm kernel reads like the design and builds", "[dsl]") {
  Kernel k = rmsnorm(rmsnorm_spec());
  REQUIRE(k.name == "rmsnorm");
  REQUIRE(k.params.size() == 5);
  REQUIRE(k.params[3].kind == ParamKind::Scalar);
  REQUIRE(k.constexprs == std::vector<std::pair<std::string, int64_t>>{{"BLOCK", 8}});
  REQUIRE(k.vars.size() == 1);
  REQUIRE(count_ops(k.body, OpKind::For) == 2);
  REQUIRE(count_ops(k.body, OpKind::Store) == 1);
  REQUIRE_NOTHROW(verify(k));

  const int rows = 3, n = 19;
  std::vector<float> x(rows * n), w(n), y(rows * n, -1.0f);
  for (int i = 0; i < rows * n; ++i) x[i] = std::sin(0.3f * static_cast<float>(i)) * 2.0f;
  for (int i = 0; i < n; ++i) w[i] = 0.5f + 0.05f * static_cast<float>(i);
  const float eps = 1e-6f;
  interpret(k,
            {Arg::buffer(x.data(), x.size()), Arg::buffer(w.data(), w.size()),
             Arg::buffer(y.data(), y.size()), Arg::scalar_int(n), Arg::scalar_float(eps)},
            {rows, 1, 1});
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int i = 0; i < n; ++i)
      REQUIRE(y[r * n + i] == Approx(x[r * n + i] * inv * w[i]).epsilon(1e-4).margin(1e-6));
  }
}

TEST_CASE("the DSL builds control flow, vars, atomics and dots", "[dsl]") {
  KernelBuilder k("mixed", spec_for("mixed"));
  auto a = k.buffer("a", DType::i8);
  auto bq = k.buffer("b", DType::i8);
  auto o = k.buffer("o", DType::i32);
  auto cnt = k.buffer("cnt", DType::i32);
  auto n = k.scalar("n", DType::i64);
  auto rows = reshape(arange(4), {4, 1});
  auto cols = expand_dims(arange(8), 0);
  auto ta = load(a + (rows * 8 + cols));
  auto tb = load(bq + (reshape(arange(8), {8, 1}) * 4 + expand_dims(arange(4), 0)));
  auto d = dot(ta, tb, zeros(DType::i32, {4, 4}));
  auto best = k.var(full({}, 0, DType::i32));
  k.for_(0, n, 1, [&](Value i) {
    REQUIRE(i.dtype() == DType::i64);  // bounds widen to i64
    k.if_(
        i == 2, [&] { best = best.get() + 10; }, [&] { best += full({}, 1, DType::i32); });
  });
  store(o + (rows * 4 + expand_dims(arange(4), 0)), d + best.get());
  atomic_add(cnt + arange(1), full({1}, 1, DType::i32));
  Kernel kern = k.finish();
  REQUIRE(count_ops(kern.body, OpKind::Dot) == 1);
  REQUIRE(count_ops(kern.body, OpKind::If) == 1);
  REQUIRE(kern.values[kern.body.ops.back().result].dtype == DType::i32);
}

TEST_CASE("DSL: shapes that do not broadcast", "[dsl]") {
  KernelBuilder k("bad_shapes", spec_for("bad_shapes"));
  REQUIRE_THROWS_WITH(arange(4) + arange(8), Contains("kernel 'bad_shapes', op add") &&
                                                 Contains("do not broadcast") &&
                                                 Contains("i32[4] and i32[8]"));
  REQUIRE_THROWS_WITH(
      broadcast_to(arange(4), {4, 3}),
      Contains("kernel 'bad_shapes', op broadcast") && Contains("cannot broadcast"));
}

TEST_CASE("DSL: mixing dtypes", "[dsl]") {
  KernelBuilder k("mixed_dtypes", spec_for("mixed_dtypes"));
  auto f = arange(4).to(DType::f32);
  REQUIRE_THROWS_WITH(arange(4) * f, Contains("kernel 'mixed_dtypes', op mul") &&
                                         Contains("operand dtypes differ") && Contains(".to()"));
  REQUIRE_THROWS_WITH(where(arange(4) < 2, f, arange(4)),
                      Contains("op select") && Contains("branches differ"));
}

TEST_CASE("DSL: storing a float tile into an int buffer", "[dsl]") {
  KernelBuilder k("bad_store", spec_for("bad_store"));
  auto o = k.buffer("out", DType::i32);
  auto v = arange(4).to(DType::f32);
  REQUIRE_THROWS_WITH(store(o + arange(4), v), Contains("kernel 'bad_store', op store") &&
                                                   Contains("buffer 'out' holds i32") &&
                                                   Contains("f32[4]"));
  REQUIRE_THROWS_WITH(load(o + v), Contains("op load") && Contains("must be i32 or i64"));
}

TEST_CASE("DSL: a loop variable used outside its loop", "[dsl]") {
  KernelBuilder k("escape", spec_for("escape"));
  auto o = k.buffer("o", DType::i32);
  Value leaked;
  k.for_(0, 4, 1, [&](Value i) { leaked = i; });
  REQUIRE_THROWS_WITH(store(o + arange(4), leaked + arange(4)),
                      Contains("kernel 'escape', op add") && Contains("outside the loop"));
}

TEST_CASE("DSL: a value computed in a loop body used after it", "[dsl]") {
  KernelBuilder k("escape_body", spec_for("escape_body"));
  auto o = k.buffer("o", DType::f32);
  Value inner;
  k.for_(0, 4, 1, [&](Value i) { inner = load(o + (i + arange(4))); });
  REQUIRE_THROWS_WITH(exp(inner),
                      Contains("kernel 'escape_body', op exp") && Contains("outside the loop"));
  Value in_if;
  k.if_(k.scalar("flag", DType::boolean), [&] { in_if = arange(2); });
  REQUIRE_THROWS_WITH(in_if * 2, Contains("op mul") && Contains("if body"));
}

TEST_CASE("DSL: a non-bool mask", "[dsl]") {
  KernelBuilder k("bad_mask", spec_for("bad_mask"));
  auto x = k.buffer("x", DType::f32);
  auto c = arange(8);
  REQUIRE_THROWS_WITH(load(x + c, c, 0.0),
                      Contains("kernel 'bad_mask', op load") && Contains("mask must be bool"));
  REQUIRE_THROWS_WITH(store(x + c, c.to(DType::f32), c),
                      Contains("op store") && Contains("mask must be bool"));
  REQUIRE_THROWS_WITH(k.if_(c < 3, [] {}), Contains("op if") && Contains("bool scalar"));
}

TEST_CASE("DSL: bad dot shapes and dtypes", "[dsl]") {
  KernelBuilder k("bad_dot", spec_for("bad_dot"));
  auto a = zeros(DType::f16, {4, 8});
  auto b = zeros(DType::f16, {4, 8});
  REQUIRE_THROWS_WITH(
      dot(a, b, zeros(DType::f32, {4, 8})),
      Contains("kernel 'bad_dot', op dot") && Contains("do not form [M,K] x [K,N] + [M,N]"));
  REQUIRE_THROWS_WITH(dot(a, transpose(b), zeros(DType::f16, {4, 4})),
                      Contains("op dot") && Contains("unsupported dtypes"));
  REQUIRE_THROWS_WITH(dot(arange(4), arange(4), arange(4)),
                      Contains("op dot") && Contains("rank 2"));
}

TEST_CASE("DSL: a float constant mixed with an int value", "[dsl]") {
  KernelBuilder k("bad_const", spec_for("bad_const"));
  REQUIRE_THROWS_WITH(arange(4) + 0.5, Contains("kernel 'bad_const', op const") &&
                                           Contains("0.5") && Contains("integer value i32[4]"));
  // A whole-valued double is an exact integer and is accepted.
  REQUIRE_NOTHROW(arange(4) * 2.0);
}

TEST_CASE("DSL: float-only math on an int", "[dsl]") {
  KernelBuilder k("bad_exp", spec_for("bad_exp"));
  REQUIRE_THROWS_WITH(exp(arange(4)), Contains("kernel 'bad_exp', op exp") &&
                                          Contains("needs a float operand") && Contains("i32[4]"));
  REQUIRE_THROWS_WITH(sqrt(arange(4)), Contains("op sqrt") && Contains("float"));
  REQUIRE_THROWS_WITH(arange(4).to(DType::f32) << 1, Contains("op shl") && Contains("integer"));
}

TEST_CASE("DSL: duplicate parameter names", "[dsl]") {
  KernelBuilder k("dup", spec_for("dup"));
  k.buffer("x", DType::f32);
  REQUIRE_THROWS_WITH(k.buffer("x", DType::f16),
                      Contains("kernel 'dup'") && Contains("parameter 'x' declared twice"));
  REQUIRE_THROWS_WITH(k.scalar("x", DType::i32),
                      Contains("kernel 'dup'") && Contains("parameter 'x' declared twice"));
}

TEST_CASE("DSL: a missing Spec dtype or constexpr", "[dsl]") {
  Spec s = spec_for("rmsnorm");
  s.constexprs["BLOCK"] = 8;
  REQUIRE_THROWS_WITH(rmsnorm(s), Contains("kernel 'rmsnorm'") && Contains("missing dtype 'T'"));
  Spec s2 = spec_for("rmsnorm");
  s2.dtypes["T"] = DType::f16;
  REQUIRE_THROWS_WITH(rmsnorm(s2),
                      Contains("kernel 'rmsnorm'") && Contains("missing constexpr 'BLOCK'"));
}

TEST_CASE("DSL: other misuse is named at build time", "[dsl]") {
  KernelBuilder k("misc", spec_for("misc"));
  REQUIRE_THROWS_WITH(arange(0), Contains("kernel 'misc', op arange") && Contains("positive"));
  REQUIRE_THROWS_WITH(k.program_id(3), Contains("op program_id") && Contains("not in 0..2"));
  REQUIRE_THROWS_WITH(sum(arange(4), 1), Contains("op reduce_sum") && Contains("axis"));
  REQUIRE_THROWS_WITH(reshape(arange(4), {3}), Contains("op reshape"));
  REQUIRE_THROWS_WITH(slice(arange(4), {2}, {3}),
                      Contains("op slice") && Contains("out of bounds"));
  REQUIRE_THROWS_WITH(arange(3).bitcast(DType::i64), Contains("op bitcast"));
  auto v = k.var(zeros(DType::f32, {4}));
  REQUIRE_THROWS_WITH(v = arange(4), Contains("op var_store") && Contains("cast with .to()"));
  REQUIRE_THROWS_WITH(k.for_(0, arange(4).to(DType::f32), 1, [](Value) {}),
                      Contains("op for") && Contains("integer scalars"));
  Kernel done = k.finish();
  REQUIRE_THROWS_WITH(k.finish(), Contains("already finished"));
}

TEST_CASE("DSL: bad lookups are named at build time", "[dsl]") {
  KernelBuilder k("lut", spec_for("lut"));
  auto codes = arange(16).to(DType::u8);
  REQUIRE_THROWS_WITH(lookup({1, 2}, DType::i8, arange(4).to(DType::f32)),
                      Contains("kernel 'lut', op lookup") && Contains("index must be an integer"));
  REQUIRE_THROWS_WITH(lookup({1, 2}, DType::f16, codes),
                      Contains("op lookup") && Contains("result dtype must be an integer dtype"));
  REQUIRE_THROWS_WITH(lookup({}, DType::i8, codes),
                      Contains("op lookup") && Contains("table has 0 entries"));
  REQUIRE_THROWS_WITH(lookup({0, -129}, DType::i8, codes),
                      Contains("op lookup") && Contains("table entry 1 (-129) does not fit i8"));
  REQUIRE_THROWS_WITH(lookup({65536}, DType::u16, codes), Contains("does not fit u16"));
  Value v = lookup({0, 65535}, DType::u16, codes);
  CHECK(v.type() == Type{DType::u16, {16}});
}

TEST_CASE("DSL: a body that throws leaves the builder consistent", "[dsl]") {
  Spec s{"t", {}, {}};
  KernelBuilder k("t", s);
  auto o = k.buffer("o", DType::i32);
  Value leaked;
  REQUIRE_THROWS_AS(k.for_(0, 4, 1,
                           [&](Value i) {
                             leaked = i;
                             throw Error("body failed");
                           }),
                    Error);
  REQUIRE_THROWS_WITH(store(o + arange(4), leaked + arange(4)),
                      Catch::Contains("outside the loop or if body"));
  store(o + arange(4), arange(4));
  Kernel kern = k.finish();
  std::vector<int32_t> out(4);
  interpret(kern, {Arg::buffer(out.data(), 4)}, {1, 1, 1});
  CHECK(out == std::vector<int32_t>{0, 1, 2, 3});
}

TEST_CASE("DSL: loop bounds of different dtypes and unrepresentable constants", "[dsl]") {
  Spec s{"t", {}, {}};
  KernelBuilder k("t", s);
  auto n = k.scalar("n", DType::u32), m = k.scalar("m", DType::i32);
  REQUIRE_THROWS_WITH(k.for_(m, n, 1, [](Value) {}),
                      Catch::Contains("loop bounds mix i32 and u32"));
  k.for_(0, n, 2, [&](Value i) { CHECK(i.dtype() == DType::u32); });
  REQUIRE_THROWS_WITH(m + INFINITY, Catch::Contains("does not fit i32"));
  REQUIRE_THROWS_WITH(k.constant(1e30, DType::i64), Catch::Contains("does not fit i64"));
  // Constants are stored rounded/wrapped to their dtype.
  Value c8 = k.constant(300, DType::u8);
  Value h = k.constant(0.1, DType::f16);
  CHECK(k.kernel().body.ops.back().fval ==
        static_cast<double>(round_to_float_dtype(0.1f, DType::f16)));
  (void)c8;
  (void)h;
}
