#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/verifier.h"

using namespace kiln;
using Catch::Contains;

namespace {

Spec spec_for(const std::string& name) {
  Spec s;
  s.kernel = name;
  return s;
}

// A small valid kernel that every malformed variant below starts from.
Kernel scale_kernel() {
  KernelBuilder k("scale", spec_for("scale"));
  auto x = k.buffer("x", DType::f32);
  auto y = k.buffer("y", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto c = k.program_id(0) * 64 + arange(64);
  store(y + c, load(x + c, c < n, 0.0) * 2.0, c < n);
  return k.finish();
}

Kernel loop_kernel() {
  KernelBuilder k("loop", spec_for("loop"));
  auto x = k.buffer("x", DType::f32);
  auto y = k.buffer("y", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto acc = k.var(zeros(DType::f32, {16}));
  k.for_(0, n, 16, [&](Value i) {
    auto c = i + arange(16);
    acc = acc + load(x + c, c < n, 0.0);
  });
  auto r = acc.get();
  k.if_(n > 0, [&] { store(y + arange(16), r); });
  return k.finish();
}

Kernel reduce_kernel() {
  KernelBuilder k("reduce", spec_for("reduce"));
  auto x = k.buffer("x", DType::f32);
  auto o = k.buffer("o", DType::f32);
  auto i = k.buffer("i", DType::i32);
  auto r = arange(8);
  auto offs = reshape(r, {8, 1}) * 4 + reshape(arange(4), {1, 4});
  auto t = load(x + offs);
  auto d = dot(t, transpose(t), zeros(DType::f32, {8, 8}));
  store(o + arange(8), sum(d, 1) + max(slice(t, {0, 1}, {8, 1}), 1));
  store(i + arange(8), argmax(t, 1));
  return k.finish();
}

// u8 codes decoded through IQ4_NL's codebook; f32 copies of the codes come
// first, so an f32 value is defined before the lookup.
Kernel lookup_kernel() {
  KernelBuilder k("lut", spec_for("lut"));
  auto x = k.buffer("x", DType::u8), y = k.buffer("y", DType::i8), f = k.buffer("f", DType::f32);
  auto i = arange(16);
  auto codes = load(x + i);
  store(f + i, codes.to(DType::f32));
  store(y + i, lookup({-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113},
                      DType::i8, codes));
  return k.finish();
}

// The n-th op of `kind` in program order, looking inside regions.
Op* find_op(Block& b, OpKind kind, int* nth) {
  for (Op& op : b.ops) {
    if (op.kind == kind && (*nth)-- == 0) return &op;
    for (Block& r : op.regions)
      if (Op* f = find_op(r, kind, nth)) return f;
  }
  return nullptr;
}

Op& find(Kernel& k, OpKind kind, int nth = 0) {
  Op* op = find_op(k.body, kind, &nth);
  REQUIRE(op != nullptr);
  return *op;
}

// The float multiply `load(...) * 2.0` of scale_kernel (the other mul is
// the i32 `program_id * 64`; the DSL's evaluation order is unspecified).
Op& float_mul(Kernel& k) {
  for (int i = 0;; ++i) {
    Op& op = find(k, OpKind::Mul, i);
    if (k.values[op.result].dtype == DType::f32) return op;
  }
}

std::string where(const Kernel& k, const Op& op) {
  return "kernel '" + k.name + "', op " + std::string(op_name(op.kind)) + " (%" +
         std::to_string(op.result) + ")";
}

}  // namespace

TEST_CASE("verifier accepts DSL-built kernels", "[verifier]") {
  REQUIRE_NOTHROW(verify(scale_kernel()));
  REQUIRE_NOTHROW(verify(loop_kernel()));
  REQUIRE_NOTHROW(verify(reduce_kernel()));
}

TEST_CASE("verifier rejects a wrong result dtype", "[verifier]") {
  Kernel k = scale_kernel();
  Op& mul = float_mul(k);
  k.values[mul.result].dtype = DType::f16;
  REQUIRE_THROWS_WITH(verify(k), Contains(where(k, mul)) && Contains("result type is wrong") &&
                                     Contains("f16[64]"));
}

TEST_CASE("verifier rejects mixed operand dtypes", "[verifier]") {
  Kernel k = scale_kernel();
  Op& mul = float_mul(k);
  Op& add = find(k, OpKind::Add);  // an i32 tile
  mul.args[1] = add.result;
  REQUIRE_THROWS_WITH(verify(k), Contains(where(k, mul)) && Contains("operand types differ"));
}

TEST_CASE("verifier rejects a use before the definition", "[verifier]") {
  Kernel k = scale_kernel();
  // Move arange to the end: the add that uses it now comes first.
  auto& ops = k.body.ops;
  auto it =
      std::find_if(ops.begin(), ops.end(), [](const Op& o) { return o.kind == OpKind::Arange; });
  REQUIRE(it != ops.end());
  Op ar = *it;
  ops.erase(it);
  ops.push_back(ar);
  Op& add = find(k, OpKind::Add);
  REQUIRE_THROWS_WITH(verify(k), Contains(where(k, add)) &&
                                     Contains("(%" + std::to_string(ar.result) + ")") &&
                                     Contains("used before it is defined"));
}

TEST_CASE("verifier rejects an undefined or out-of-range value id", "[verifier]") {
  Kernel k = scale_kernel();
  Op& mul = float_mul(k);
  SECTION("never defined") {
    int id = k.add_value(Type{DType::f32, {64}});
    mul.args[1] = id;
    REQUIRE_THROWS_WITH(verify(k),
                        Contains(where(k, mul)) && Contains("used before it is defined"));
  }
  SECTION("out of range") {
    mul.args[1] = 1000;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, mul)) && Contains("not a value id"));
  }
  SECTION("result out of range") {
    mul.result = 1000;
    REQUIRE_THROWS_WITH(verify(k),
                        Contains("op mul (%1000)") && Contains("result id out of range"));
  }
}

TEST_CASE("verifier rejects a loop variable used after its loop", "[verifier]") {
  Kernel k = loop_kernel();
  Op& loop = find(k, OpKind::For);
  Op neg;
  neg.kind = OpKind::Add;
  neg.args = {loop.result, loop.result};
  neg.result = k.add_value(Type{DType::i32, {}});
  k.body.ops.push_back(neg);
  REQUIRE_THROWS_WITH(verify(k),
                      Contains("kernel 'loop', op add (%" + std::to_string(neg.result)) &&
                          Contains("outside the loop or if body"));
}

TEST_CASE("verifier rejects a loop body value used after the loop", "[verifier]") {
  Kernel k = loop_kernel();
  Op& load = find(k, OpKind::Load);
  Op neg;
  neg.kind = OpKind::Neg;
  neg.args = {load.result};
  neg.result = k.add_value(k.values[load.result]);
  k.body.ops.push_back(neg);
  REQUIRE_THROWS_WITH(verify(k), Contains("op neg (%" + std::to_string(neg.result) + ")") &&
                                     Contains("outside the loop or if body"));
}

TEST_CASE("verifier rejects values from one if branch used in the other", "[verifier]") {
  KernelBuilder b("branches", spec_for("branches"));
  auto y = b.buffer("y", DType::i32);
  auto n = b.scalar("n", DType::i32);
  b.if_(
      n > 0, [&] { store(y + arange(4), arange(4) + n); },
      [&] { store(y + arange(4), arange(4) - n); });
  Kernel k = b.finish();
  Op& iff = find(k, OpKind::If);
  Op& then_add = find(k, OpKind::Add);
  REQUIRE(&then_add >= &iff.regions[0].ops.front());
  REQUIRE(&then_add <= &iff.regions[0].ops.back());
  Op& else_sub = find(k, OpKind::Sub);
  else_sub.args[0] = then_add.result;
  REQUIRE_THROWS_WITH(verify(k),
                      Contains(where(k, else_sub)) && Contains("outside the loop or if"));
}

TEST_CASE("verifier rejects a value defined twice", "[verifier]") {
  Kernel k = scale_kernel();
  Op dup = float_mul(k);
  k.body.ops.push_back(dup);
  REQUIRE_THROWS_WITH(verify(k), Contains(where(k, dup)) && Contains("defined twice"));
}

TEST_CASE("verifier rejects wrong operand counts", "[verifier]") {
  Kernel k = scale_kernel();
  SECTION("binary op with three operands") {
    Op& mul = float_mul(k);
    mul.args.push_back(mul.args[0]);
    REQUIRE_THROWS_WITH(verify(k),
                        Contains(where(k, mul)) && Contains("expects 2 operands, got 3"));
  }
  SECTION("load with two operands") {
    Op& load = find(k, OpKind::Load);
    load.args.pop_back();
    REQUIRE_THROWS_WITH(verify(k),
                        Contains(where(k, load)) && Contains("expects 1 or 3 operands, got 2"));
  }
  SECTION("store with one operand, named by its index") {
    auto& ops = k.body.ops;
    size_t idx = ops.size() - 1;
    REQUIRE(ops[idx].kind == OpKind::Store);
    ops[idx].args.resize(1);
    REQUIRE_THROWS_WITH(verify(k), Contains("kernel 'scale', op store (#" + std::to_string(idx) +
                                            "): expects 2 or 3 operands, got 1"));
  }
  SECTION("const with an operand") {
    Op& c = find(k, OpKind::Const);
    c.args = {0};
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, c)) && Contains("expects 0 operands"));
  }
}

TEST_CASE("verifier rejects a store whose value does not match the buffer", "[verifier]") {
  Kernel k = scale_kernel();
  k.params[1].dtype = DType::i32;  // y
  REQUIRE_THROWS_WITH(verify(k), Contains("kernel 'scale', op store (#") &&
                                     Contains("buffer 'y' holds i32 but the value is f32[64]"));
}

TEST_CASE("verifier rejects bad memory operands", "[verifier]") {
  Kernel k = scale_kernel();
  Op& load = find(k, OpKind::Load);
  SECTION("non-bool mask") {
    load.args[1] = load.args[0];
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, load)) && Contains("mask must be bool"));
  }
  SECTION("float offsets") {
    load.args[0] = load.args[2];
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, load)) && Contains("must be i32 or i64"));
  }
  SECTION("scalar parameter used as a buffer") {
    load.ival = 2;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, load)) && Contains("'n' is a scalar"));
  }
  SECTION("store defines a result") {
    k.body.ops.back().result = k.add_value(Type{DType::f32, {64}});
    REQUIRE_THROWS_WITH(verify(k), Contains("op store") && Contains("must not define a result"));
  }
}

TEST_CASE("verifier rejects bad prefetches", "[verifier]") {
  KernelBuilder b("pf", spec_for("pf"));
  auto x = b.buffer("x", DType::f32);
  b.scalar("n", DType::i32);
  store(x + arange(4), load(x + arange(4)) * 2.0f);
  prefetch(x + arange(4) * 16);
  Kernel k = b.finish();
  verify(k);
  Op& pf = find(k, OpKind::Prefetch);
  SECTION("float offsets") {
    pf.args[0] = find(k, OpKind::Load).result;
    REQUIRE_THROWS_WITH(verify(k), Contains("op prefetch (#") && Contains("must be i32 or i64"));
  }
  SECTION("a scalar parameter as the buffer") {
    pf.ival = 1;
    REQUIRE_THROWS_WITH(verify(k), Contains("op prefetch (#") && Contains("'n' is a scalar"));
  }
  SECTION("two operands") {
    pf.args.push_back(pf.args[0]);
    REQUIRE_THROWS_WITH(verify(k),
                        Contains("op prefetch (#") && Contains("expects 1 operands, got 2"));
  }
  SECTION("a result") {
    pf.result = k.add_value(Type{DType::f32, {4}});
    REQUIRE_THROWS_WITH(verify(k), Contains("op prefetch") && Contains("must not define a result"));
  }
}

TEST_CASE("verifier checks creation ops", "[verifier]") {
  Kernel k = scale_kernel();
  SECTION("program_id axis") {
    Op& pid = find(k, OpKind::ProgramId);
    pid.ival = 3;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, pid)) && Contains("axis 3 not in 0..2"));
  }
  SECTION("param pointing at a buffer") {
    Op& p = find(k, OpKind::Param);
    p.ival = 0;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, p)) && Contains("'x' is a buffer"));
  }
  SECTION("param with the wrong type") {
    Op& p = find(k, OpKind::Param);
    k.values[p.result].dtype = DType::i64;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, p)) && Contains("scalar parameter 'n'"));
  }
  SECTION("arange dtype") {
    Op& a = find(k, OpKind::Arange);
    k.values[a.result].dtype = DType::i64;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, a)) && Contains("rank-1 i32"));
  }
  SECTION("bool constant") {
    Op& c = find(k, OpKind::Const);
    k.values[c.result] = Type{DType::boolean, {}};
    c.ival = 2;
    // Only the constant itself is checked before its users complain.
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, c)) && Contains("must be 0 or 1"));
  }
  SECTION("zero-sized dimension") {
    Op& a = find(k, OpKind::Arange);
    k.values[a.result].shape = {0};
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, a)) && Contains("non-positive dimension"));
  }
}

TEST_CASE("verifier checks shape ops, reductions and dot", "[verifier]") {
  Kernel k = reduce_kernel();
  SECTION("reduction axis") {
    Op& s = find(k, OpKind::ReduceSum);
    s.ival = 5;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, s)) && Contains("axis 5 out of range"));
  }
  SECTION("reduction result shape") {
    Op& s = find(k, OpKind::ReduceMax);
    k.values[s.result].shape = {1};
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, s)) && Contains("result type is wrong"));
  }
  SECTION("argmax result dtype") {
    Op& s = find(k, OpKind::ArgMax);
    k.values[s.result].dtype = DType::i64;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, s)) && Contains("result type is wrong"));
  }
  SECTION("dot shapes") {
    Op& d = find(k, OpKind::Dot);
    Op& t = find(k, OpKind::Transpose);
    d.args[1] = t.args[0];  // [8,4] x [8,4]
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, d)) && Contains("do not form [M,K] x [K,N]"));
  }
  SECTION("dot accumulator dtype") {
    Op& d = find(k, OpKind::Dot);
    k.values[d.args[2]].dtype = DType::f16;
    k.values[d.result].dtype = DType::f16;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, d)) && Contains("unsupported dtypes"));
  }
  SECTION("transpose of a rank-1 value") {
    Op& t = find(k, OpKind::Transpose);
    t.args[0] = find(k, OpKind::Arange).result;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, t)) && Contains("needs a rank-2 operand"));
  }
  SECTION("reshape element count") {
    Op& r = find(k, OpKind::Reshape);
    k.values[r.result].shape = {8, 2};
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, r)) && Contains("cannot reshape i32[") &&
                                       Contains("to i32[8,2]"));
  }
  SECTION("broadcast that does not follow numpy rules") {
    Op* b = nullptr;
    for (int i = 0; !b; ++i) {
      Op& cand = find(k, OpKind::Broadcast, i);
      if (k.values[cand.args[0]].shape == Shape{1, 4}) b = &cand;
    }
    k.values[b->result].shape = {8, 5};
    REQUIRE_THROWS_WITH(
        verify(k), Contains(where(k, *b)) && Contains("cannot broadcast i32[1,4] to i32[8,5]"));
  }
  SECTION("slice out of bounds") {
    Op& s = find(k, OpKind::Slice);
    s.ints = {0, 4};
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, s)) && Contains("out of bounds on axis 1"));
  }
}

TEST_CASE("verifier checks lookups", "[verifier]") {
  Kernel k = lookup_kernel();
  REQUIRE_NOTHROW(verify(k));
  Op& l = find(k, OpKind::Lookup);
  SECTION("a float index") {
    l.args[0] = find(k, OpKind::Cast).result;
    REQUIRE_THROWS_WITH(
        verify(k), Contains(where(k, l)) && Contains("index must be an integer tile, got f32[16]"));
  }
  SECTION("a float result dtype") {
    k.values[l.result].dtype = DType::f32;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, l)) &&
                                       Contains("result dtype must be an integer dtype, got f32"));
  }
  SECTION("a result shape other than the index's") {
    k.values[l.result].shape = {8};
    REQUIRE_THROWS_WITH(
        verify(k), Contains(where(k, l)) && Contains("result shape differs from the index: i8[8]"));
  }
  SECTION("an empty table") {
    l.ints.clear();
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, l)) &&
                                       Contains("table has 0 entries; a lookup table holds 1 to "
                                                "4096"));
  }
  SECTION("a table past the limit") {
    l.ints.assign(kMaxLookupEntries + 1, 0);
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, l)) && Contains("table has 4097 entries"));
  }
  SECTION("an entry the result dtype cannot hold") {
    l.ints[3] = 128;
    REQUIRE_THROWS_WITH(
        verify(k),
        Contains(where(k, l)) && Contains("table entry 3 (128) does not fit the result dtype i8"));
  }
  SECTION("an integer list on another op") {
    Op& cast = find(k, OpKind::Cast);
    cast.ints = {1};
    REQUIRE_THROWS_WITH(verify(k), Contains("unexpected integer list attribute"));
  }
}

TEST_CASE("verifier checks elementwise typing rules", "[verifier]") {
  Kernel k = scale_kernel();
  Op& add = find(k, OpKind::Add);  // i32[64]
  SECTION("float-only unary on an int") {
    add.kind = OpKind::Exp;
    add.args.pop_back();
    REQUIRE_THROWS_WITH(verify(k), Contains("op exp (%") && Contains("needs a float operand"));
  }
  SECTION("shift of floats") {
    Op& mul = float_mul(k);
    mul.kind = OpKind::Shl;
    REQUIRE_THROWS_WITH(verify(k), Contains("op shl") && Contains("needs integer operands"));
  }
  SECTION("comparison result must be bool") {
    Op& lt = find(k, OpKind::Lt);
    k.values[lt.result].dtype = DType::i32;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, lt)) && Contains("result type is wrong"));
  }
  SECTION("cast changing the shape") {
    Op& mul = float_mul(k);
    Op cast;
    cast.kind = OpKind::Cast;
    cast.args = {mul.result};
    cast.result = k.add_value(Type{DType::f16, {32}});
    k.body.ops.push_back(cast);
    REQUIRE_THROWS_WITH(verify(k),
                        Contains("op cast") && Contains("cannot cast f32[64] to f16[32]"));
  }
  SECTION("bitcast between widths") {
    Op& mul = float_mul(k);
    Op bc;
    bc.kind = OpKind::Bitcast;
    bc.args = {mul.result};
    bc.result = k.add_value(Type{DType::f16, {64}});
    k.body.ops.push_back(bc);
    REQUIRE_THROWS_WITH(verify(k), Contains("op bitcast") && Contains("cannot bitcast"));
  }
  SECTION("select with a non-bool condition") {
    Op& mul = float_mul(k);
    Op sel;
    sel.kind = OpKind::Select;
    sel.args = {add.result, mul.result, mul.result};
    sel.result = k.add_value(Type{DType::f32, {64}});
    k.body.ops.push_back(sel);
    REQUIRE_THROWS_WITH(verify(k), Contains("op select") && Contains("condition must be bool"));
  }
}

TEST_CASE("verifier checks control flow and variables", "[verifier]") {
  Kernel k = loop_kernel();
  Op& loop = find(k, OpKind::For);
  SECTION("for without a body") {
    loop.regions.clear();
    REQUIRE_THROWS_WITH(verify(k),
                        Contains(where(k, loop)) && Contains("expects 1 regions, got 0"));
  }
  SECTION("for bounds of different dtypes") {
    Op& c = find(k, OpKind::Const, 1);  // lo = 0
    REQUIRE(c.result == loop.args[0]);
    k.values[c.result].dtype = DType::i64;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, loop)) && Contains("share one type"));
  }
  SECTION("induction variable type") {
    k.values[loop.result].dtype = DType::i64;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, loop)) && Contains("induction variable"));
  }
  SECTION("if with a non-bool condition") {
    Op& iff = find(k, OpKind::If);
    iff.args[0] = find(k, OpKind::Param).result;
    REQUIRE_THROWS_WITH(verify(k), Contains("op if (#") && Contains("must be a bool scalar"));
  }
  SECTION("var declared with the wrong type") {
    k.vars[0].dtype = DType::f16;
    REQUIRE_THROWS_WITH(verify(k), Contains("op var (#") && Contains("does not match variable 0"));
  }
  SECTION("var store of the wrong type") {
    Op& vs = find(k, OpKind::VarStore);
    vs.args[0] = find(k, OpKind::Add).result;  // the i32 offsets in the body
    REQUIRE_THROWS_WITH(verify(k),
                        Contains("op var_store (#") && Contains("does not match variable 0"));
  }
  SECTION("var index out of range") {
    Op& vl = find(k, OpKind::VarLoad);
    vl.ival = 7;
    REQUIRE_THROWS_WITH(verify(k), Contains(where(k, vl)) && Contains("variable index 7"));
  }
  SECTION("var used before its declaration") {
    auto& ops = k.body.ops;
    auto it =
        std::find_if(ops.begin(), ops.end(), [](const Op& o) { return o.kind == OpKind::VarDecl; });
    Op decl = *it;
    ops.erase(it);
    ops.push_back(decl);
    REQUIRE_THROWS_WITH(verify(k), Contains("op var_") && Contains("before it is declared"));
  }
}

TEST_CASE("verifier checks parameters", "[verifier]") {
  Kernel k = scale_kernel();
  SECTION("duplicate names") {
    k.params[1].name = "x";
    REQUIRE_THROWS_WITH(verify(k), Contains("kernel 'scale'") && Contains("'x' is declared twice"));
  }
  SECTION("empty name") {
    k.params[0].name = "";
    REQUIRE_THROWS_WITH(verify(k), Contains("kernel 'scale'") && Contains("has no name"));
  }
}
