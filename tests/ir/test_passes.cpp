#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/passes.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/ir_helpers.h"

using namespace kiln;

namespace {

using kiln::test::count_ops;
using kiln::test::spec_for;

int total_ops(const Block& b) {
  int n = 0;
  for (const Op& op : b.ops) {
    ++n;
    for (const Block& r : op.regions) n += total_ops(r);
  }
  return n;
}

const Op* def_in(const Block& b, int value) {
  for (const Op& op : b.ops) {
    if (op.result == value) return &op;
    for (const Block& r : op.regions)
      if (const Op* f = def_in(r, value)) return f;
  }
  return nullptr;
}

const Op& def_of(const Kernel& k, int value) {
  const Op* op = def_in(k.body, value);
  REQUIRE(op != nullptr);
  return *op;
}

const Op& first_op(const Kernel& k, OpKind kind) {
  for (const Op& op : k.body.ops)
    if (op.kind == kind) return op;
  FAIL("no top-level op " << op_name(kind));
  return k.body.ops.front();
}

// The constant stored by the kernel's only top-level Store.
const Op& stored_const(const Kernel& k) {
  const Op& st = first_op(k, OpKind::Store);
  const Op& c = def_of(k, st.args[1]);
  REQUIRE(c.kind == OpKind::Const);
  return c;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Runs `k` on copies of `bufs` (one per buffer parameter, raw bytes) with the
// scalars in parameter order, and returns the buffers afterwards.
std::vector<std::vector<uint8_t>> run(const Kernel& k, std::vector<std::vector<uint8_t>> bufs,
                                      const std::vector<Arg>& scalars, const Grid& grid) {
  std::vector<Arg> args;
  size_t bi = 0, si = 0;
  for (const Param& p : k.params) {
    if (p.kind == ParamKind::Buffer) {
      std::vector<uint8_t>& b = bufs.at(bi++);
      args.push_back(Arg::buffer(b.data(), static_cast<int64_t>(b.size()) / dtype_bytes(p.dtype)));
    } else {
      args.push_back(scalars.at(si++));
    }
  }
  interpret(k, args, grid);
  return bufs;
}

// The pipeline must not change a single output bit.
void check_pipeline_preserves(const Kernel& k, const std::vector<std::vector<uint8_t>>& bufs,
                              const std::vector<Arg>& scalars, const Grid& grid) {
  std::vector<PassDump> dumps;
  Kernel opt = run_pipeline(k, &dumps);
  INFO("before:\n" << print_kernel(k) << "after:\n" << print_kernel(opt));
  REQUIRE_NOTHROW(verify(opt));
  REQUIRE(dumps.size() == 4);
  auto want = run(k, bufs, scalars, grid);
  auto got = run(opt, bufs, scalars, grid);
  REQUIRE(want.size() == got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("buffer " << i);
    REQUIRE(want[i] == got[i]);
  }
  REQUIRE(total_ops(opt.body) <= total_ops(k.body));
}

}  // namespace

// ---- constant folding ------------------------------------------------------------

TEST_CASE("fold_constants folds integer arithmetic", "[passes]") {
  KernelBuilder b("fold_i32", spec_for("fold_i32"));
  auto o = b.buffer("o", DType::i32);
  auto v = (b.constant(2, DType::i32) + 3) * 4;
  store(o + b.constant(0, DType::i32), v);
  Kernel k = b.finish();

  Kernel f = fold_constants(k);
  REQUIRE(count_ops(f, OpKind::Add) == 0);
  REQUIRE(count_ops(f, OpKind::Mul) == 0);
  REQUIRE(stored_const(f).ival == 20);

  Kernel p = run_pipeline(k);
  REQUIRE(p.body.ops.size() == 3);  // offset, 20, store
  REQUIRE(stored_const(p).ival == 20);
  auto out = run(p, {bytes_of(std::vector<int32_t>{0})}, {}, {1, 1, 1});
  int32_t r;
  std::memcpy(&r, out[0].data(), 4);
  REQUIRE(r == 20);
}

TEST_CASE("fold_constants wraps narrow integers", "[passes]") {
  auto fold_one = [](DType t, auto&& expr) {
    KernelBuilder b("wrap", spec_for("wrap"));
    auto o = b.buffer("o", t);
    store(o + b.constant(0, DType::i32), expr(b));
    return stored_const(fold_constants(b.finish())).ival;
  };
  REQUIRE(fold_one(DType::i8, [](KernelBuilder& b) { return b.constant(100, DType::i8) + 100; }) ==
          -56);
  REQUIRE(fold_one(DType::i8, [](KernelBuilder& b) { return b.constant(16, DType::i8) * 16; }) ==
          0);
  REQUIRE(fold_one(DType::u8, [](KernelBuilder& b) { return b.constant(0, DType::u8) - 1; }) ==
          255);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) {
            return b.constant(2147483647, DType::i32) + 1;
          }) == -2147483648LL);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) { return b.constant(7, DType::i32) / 0; }) ==
          0);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) { return b.constant(-7, DType::i32) / 2; }) ==
          -3);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) { return b.constant(1, DType::i32) << 33; }) ==
          2);
  REQUIRE(fold_one(DType::u8, [](KernelBuilder& b) { return b.constant(200, DType::u8) >> 4; }) ==
          12);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) {
            return b.constant(3.9, DType::f32).to(DType::i32);
          }) == 3);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) {
            return b.constant(1e10, DType::f32).to(DType::i32);
          }) == 2147483647);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) {
            return b.constant(1.0, DType::f32).bitcast(DType::i32);
          }) == 0x3f800000);
  REQUIRE(fold_one(DType::i32, [](KernelBuilder& b) {
            return where(b.constant(2, DType::i32) < 3, b.constant(7, DType::i32),
                         b.constant(9, DType::i32));
          }) == 7);
  REQUIRE(fold_one(DType::boolean, [](KernelBuilder& b) {
            return !(b.constant(2.0, DType::f32) > b.constant(NAN, DType::f32));
          }) == 1);
}

TEST_CASE("fold_constants rounds narrow floats like the interpreter", "[passes]") {
  // 1 + 2^-11 is halfway between two f16 values and rounds to even (1.0);
  // 1 + 3 * 2^-12 rounds up to 1 + 2^-10. In f32 neither would round.
  struct Case {
    double addend;
    double want;
  };
  for (Case c : {Case{0.00048828125, 1.0}, Case{0.000732421875, 1.0009765625}}) {
    KernelBuilder b("fold_f16", spec_for("fold_f16"));
    auto o = b.buffer("o", DType::f16);
    store(o + b.constant(0, DType::i32), b.constant(1.0, DType::f16) + c.addend);
    Kernel k = b.finish();
    Kernel f = fold_constants(k);
    REQUIRE(count_ops(f, OpKind::Add) == 0);
    REQUIRE(stored_const(f).fval == c.want);
    std::vector<std::vector<uint8_t>> bufs = {bytes_of(std::vector<uint16_t>{0})};
    REQUIRE(run(k, bufs, {}, {1, 1, 1}) == run(f, bufs, {}, {1, 1, 1}));
  }
  // exp and division chains stay bit-identical to interpretation too.
  KernelBuilder b("fold_chain", spec_for("fold_chain"));
  auto o = b.buffer("o", DType::bf16);
  auto x = b.constant(0.3, DType::bf16);
  store(o + b.constant(0, DType::i32), exp(x) / 3.0 + sqrt(x) * tanh(x));
  Kernel k = b.finish();
  Kernel f = fold_constants(k);
  REQUIRE(count_ops(f, OpKind::Exp) == 0);
  std::vector<std::vector<uint8_t>> bufs = {bytes_of(std::vector<uint16_t>{0})};
  REQUIRE(run(k, bufs, {}, {1, 1, 1}) == run(f, bufs, {}, {1, 1, 1}));
}

TEST_CASE("fold_constants folds broadcasts and reshapes of constants", "[passes]") {
  KernelBuilder b("fold_shape", spec_for("fold_shape"));
  auto o = b.buffer("o", DType::f32);
  auto c = broadcast_to(b.constant(2.5, DType::f32), {4, 8});
  auto r = reshape(c, {32}) * 2.0;
  store(o + arange(32), r);
  Kernel k = b.finish();
  Kernel f = fold_constants(k);
  REQUIRE(count_ops(f, OpKind::Broadcast) == 0);
  REQUIRE(count_ops(f, OpKind::Reshape) == 0);
  REQUIRE(count_ops(f, OpKind::Mul) == 0);
  const Op& v = stored_const(f);
  REQUIRE(v.fval == 5.0);
  REQUIRE(f.values[v.result] == Type{DType::f32, {32}});
}

TEST_CASE("fold_constants leaves non-constant operands alone", "[passes]") {
  KernelBuilder b("fold_partial", spec_for("fold_partial"));
  auto x = b.buffer("x", DType::f32);
  auto n = b.scalar("n", DType::i32);
  auto c = arange(16);
  auto one = b.constant(1.0, DType::f32) * 1.0;
  store(x + c, load(x + c) + one, c < n);
  Kernel k = b.finish();
  Kernel f = fold_constants(k);
  REQUIRE(count_ops(f, OpKind::Mul) == 0);
  REQUIRE(count_ops(f, OpKind::Add) == 1);
  REQUIRE(count_ops(f, OpKind::Load) == 1);
  REQUIRE(count_ops(f, OpKind::Lt) == 1);
}

// ---- CSE --------------------------------------------------------------------------------

TEST_CASE("cse merges identical pure ops", "[passes]") {
  KernelBuilder b("cse_basic", spec_for("cse_basic"));
  auto x = b.buffer("x", DType::f32);
  auto y = b.buffer("y", DType::f32);
  auto c = arange(16);
  auto a = load(x + c);
  auto p = a * 3.0;
  auto q = a * 3.0;
  store(y + c, p + q);
  Kernel k = b.finish();
  REQUIRE(count_ops(k, OpKind::Mul) == 2);
  Kernel o = cse(k);
  REQUIRE(count_ops(o, OpKind::Mul) == 1);
  REQUIRE(count_ops(o, OpKind::Const) == 1);
  REQUIRE(count_ops(o, OpKind::Broadcast) == 1);
  const Op& add = first_op(o, OpKind::Add);
  REQUIRE(add.args[0] == add.args[1]);
}

TEST_CASE("cse never merges loads or variable loads", "[passes]") {
  KernelBuilder b("cse_loads", spec_for("cse_loads"));
  auto x = b.buffer("x", DType::f32);
  auto c = arange(16);
  auto l1 = load(x + c);
  store(x + c, l1 + 1.0);
  auto l2 = load(x + c);
  store(x + c, l2 + 1.0);
  auto v = b.var(b.constant(1, DType::i32));
  auto v1 = v.get();
  v = v1 + 1;
  auto v2 = v.get();
  auto o = b.buffer("o", DType::i32);
  store(o + arange(2), where(arange(2) == 0, broadcast_to(v1, {2}), broadcast_to(v2, {2})));
  Kernel k = b.finish();
  Kernel opt = cse(k);
  REQUIRE(count_ops(opt, OpKind::Load) == 2);
  REQUIRE(count_ops(opt, OpKind::VarLoad) == 2);
  check_pipeline_preserves(
      k, {bytes_of(std::vector<float>(16, 1.5f)), bytes_of(std::vector<int32_t>(2))}, {},
      {1, 1, 1});
}

TEST_CASE("cse compares float constants bitwise", "[passes]") {
  KernelBuilder b("cse_bits", spec_for("cse_bits"));
  auto o = b.buffer("o", DType::f32);
  auto c = arange(4);
  auto z = b.constant(0.0, DType::f32), nz = b.constant(-0.0, DType::f32);
  auto n1 = b.constant(NAN, DType::f32), n2 = b.constant(NAN, DType::f32);
  store(o + c, broadcast_to(z + nz, {4}));
  store(o + c, broadcast_to(n1 + n2, {4}));
  Kernel k = b.finish();
  Kernel opt = cse(k);
  // 0.0 and -0.0 stay apart; the two NaNs (same bits) merge.
  int zeros = 0, nans = 0;
  for (const Op& op : opt.body.ops) {
    if (op.kind != OpKind::Const) continue;
    if (std::isnan(op.fval))
      ++nans;
    else if (op.fval == 0.0)
      ++zeros;
  }
  REQUIRE(zeros == 2);
  REQUIRE(nans == 1);
}

TEST_CASE("cse respects scopes", "[passes]") {
  KernelBuilder b("cse_scope", spec_for("cse_scope"));
  auto x = b.buffer("x", DType::i32);
  auto n = b.scalar("n", DType::i32);
  auto row = b.program_id(0) * n;
  b.for_(0, n, 4, [&](Value i) {
    auto inner = b.program_id(0) * n;  // same as `row`: reuses it
    auto t = n * 3;                    // computed in the body only
    store(x + (inner + i + arange(4)), broadcast_to(t, {4}), i + arange(4) < n);
  });
  b.if_(
      n > 2, [&] { store(x + arange(4), broadcast_to(n + 7, {4})); },
      [&] { store(x + arange(4), broadcast_to(n + 7, {4})); });
  auto after = n * 3;  // the body's copy is out of scope here
  store(x + arange(4), broadcast_to(after + row, {4}));
  Kernel k = b.finish();
  Kernel opt = cse(k);
  const Op* loop = nullptr;
  const Op* iff = nullptr;
  for (const Op& op : opt.body.ops) {
    if (op.kind == OpKind::For) loop = &op;
    if (op.kind == OpKind::If) iff = &op;
  }
  REQUIRE(loop);
  REQUIRE(iff);
  REQUIRE(count_ops(loop->regions[0], OpKind::ProgramId) == 0);
  REQUIRE(count_ops(loop->regions[0], OpKind::Mul) == 1);  // n * 3
  REQUIRE(count_ops(iff->regions[0], OpKind::Add) == 1);
  REQUIRE(count_ops(iff->regions[1], OpKind::Add) == 1);
  REQUIRE(count_ops(opt, OpKind::Mul) == 3);  // row, body n*3, after
  check_pipeline_preserves(k, {bytes_of(std::vector<int32_t>(64, -1))}, {Arg::scalar_int(11)},
                           {2, 1, 1});
}

TEST_CASE("cse keeps ops with different result types apart", "[passes]") {
  KernelBuilder b("cse_types", spec_for("cse_types"));
  auto o = b.buffer("o", DType::f32);
  auto c = arange(8);
  auto a = c.to(DType::f32);
  auto a2 = c.to(DType::f32);
  auto h = c.to(DType::f16).to(DType::f32);
  store(o + c, a + a2 + h);
  Kernel k = b.finish();
  REQUIRE(count_ops(k, OpKind::Cast) == 4);
  REQUIRE(count_ops(cse(k), OpKind::Cast) == 3);
}

// ---- DCE ------------------------------------------------------------------------------------

TEST_CASE("dce removes dead values but keeps stores and atomics", "[passes]") {
  KernelBuilder b("dce_basic", spec_for("dce_basic"));
  auto x = b.buffer("x", DType::f32);
  auto cnt = b.buffer("cnt", DType::i32);
  auto n = b.scalar("n", DType::i32);
  auto c = arange(16);
  auto dead = exp(load(x + c) * 2.0);  // never used
  (void)dead;
  auto unused_sum = sum(c);
  (void)unused_sum;
  atomic_add(cnt + b.constant(0, DType::i32), b.constant(1, DType::i32));  // result unused
  store(x + c, load(x + c) + 1.0, c < n);
  Kernel k = b.finish();
  Kernel opt = dce(k);
  REQUIRE(count_ops(opt, OpKind::Exp) == 0);
  REQUIRE(count_ops(opt, OpKind::ReduceSum) == 0);
  REQUIRE(count_ops(opt, OpKind::Load) == 1);
  REQUIRE(count_ops(opt, OpKind::AtomicAdd) == 1);
  REQUIRE(count_ops(opt, OpKind::Store) == 1);
  REQUIRE(opt.params.size() == k.params.size());
  check_pipeline_preserves(
      k, {bytes_of(std::vector<float>(16, 0.25f)), bytes_of(std::vector<int32_t>{5})},
      {Arg::scalar_int(10)}, {3, 1, 1});
}

TEST_CASE("dce removes variables that are never read and the loops left empty", "[passes]") {
  KernelBuilder b("dce_vars", spec_for("dce_vars"));
  auto x = b.buffer("x", DType::f32);
  auto y = b.buffer("y", DType::f32);
  auto n = b.scalar("n", DType::i32);
  auto dead_acc = b.var(zeros(DType::f32, {8}));
  auto live_acc = b.var(zeros(DType::f32, {8}));
  b.for_(0, n, 8, [&](Value i) {
    auto c = i + arange(8);
    dead_acc = dead_acc + load(x + c, c < n, 0.0);  // written, never read after
  });
  b.for_(0, n, 8, [&](Value i) {
    auto c = i + arange(8);
    live_acc = live_acc + load(x + c, c < n, 0.0);
  });
  b.if_(n > 100, [&] {
    auto unused = n * 2;
    (void)unused;
  });
  store(y + arange(8), live_acc);
  Kernel k = b.finish();
  REQUIRE(k.vars.size() == 2);
  Kernel opt = dce(k);
  REQUIRE(opt.vars.size() == 1);
  REQUIRE(count_ops(opt, OpKind::VarDecl) == 1);
  REQUIRE(count_ops(opt, OpKind::For) == 1);
  REQUIRE(count_ops(opt, OpKind::If) == 0);
  REQUIRE(count_ops(opt, OpKind::Store) == 1);
  // dead_acc is read, but only to update itself: it dies with its loop.
  std::vector<float> xs(37);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.5f * static_cast<float>(i) - 3.0f;
  check_pipeline_preserves(k, {bytes_of(xs), bytes_of(std::vector<float>(8))},
                           {Arg::scalar_int(37)}, {1, 1, 1});
}

// ---- the whole pipeline on realistic kernels -----------------------------------------

TEST_CASE("pipeline preserves a softmax-like kernel bit for bit", "[passes]") {
  KernelBuilder b("softmax", spec_for("softmax"));
  auto x = b.buffer("x", DType::f32);
  auto y = b.buffer("y", DType::f32);
  auto n = b.scalar("n", DType::i32);
  constexpr int B = 32;
  auto row = b.program_id(0);
  auto c = arange(B);
  auto mask = c < n;
  auto v = load(x + row * n + c, mask, -INFINITY);
  auto m = max(v, 0);
  auto e = where(mask, exp(v - m), zeros(DType::f32, {B}));
  auto s = sum(e, 0);
  auto one = b.constant(2.0, DType::f32) * 0.5;  // folds to 1
  store(y + row * n + c, e / s * one, mask);
  Kernel k = b.finish();

  std::vector<PassDump> dumps;
  Kernel opt = run_pipeline(k, &dumps);
  REQUIRE(dumps.size() == 4);
  REQUIRE(dumps[0].pass == "recognize_dot_groups");
  REQUIRE(dumps[1].pass == "fold_constants");
  REQUIRE(dumps[2].pass == "cse");
  REQUIRE(dumps[3].pass == "dce");
  REQUIRE(count_ops(opt, OpKind::Mul) == 2);  // row * n once, e / s * 1 stays (no algebra)

  const int rows = 3, n_val = 27;
  std::vector<float> xs(rows * n_val);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.7f) * 4.0f;
  check_pipeline_preserves(k, {bytes_of(xs), bytes_of(std::vector<float>(xs.size()))},
                           {Arg::scalar_int(n_val)}, {rows, 1, 1});
}

TEST_CASE("pipeline preserves a masked-loop f16 norm kernel bit for bit", "[passes]") {
  KernelBuilder b("norm_f16", spec_for("norm_f16"));
  const DType T = DType::f16;
  auto x = b.buffer("x", T);
  auto w = b.buffer("w", T);
  auto y = b.buffer("y", T);
  auto n = b.scalar("n", DType::i32);
  auto eps = b.scalar("eps", DType::f32);
  constexpr int B = 16;
  auto row = b.program_id(0);
  auto acc = b.var(zeros(DType::f32, {B}));
  auto unused = b.var(zeros(DType::f32, {B}));
  b.for_(0, n, B, [&](Value i) {
    auto cc = i + arange(B);
    auto v = load(x + row * n + cc, cc < n, 0.0).to(DType::f32);
    acc = acc + v * v;
    unused = unused + v;
  });
  auto r = rsqrt(sum(acc) / n.to(DType::f32) + eps);
  auto half = b.constant(0.25, T) + b.constant(0.25, T);
  b.for_(0, n, B, [&](Value i) {
    auto cc = i + arange(B);
    auto v = load(x + row * n + cc, cc < n, 0.0).to(DType::f32);
    auto g = load(w + cc, cc < n, 0.0).to(DType::f32);
    auto out = (v * r * g).to(T) * half + half * 2.0;
    b.if_(
        row == 0, [&] { store(y + row * n + cc, out, cc < n); },
        [&] { store(y + row * n + cc, out + half, cc < n); });
  });
  Kernel k = b.finish();
  Kernel opt = run_pipeline(k);
  REQUIRE(opt.vars.size() == 1);

  const int rows = 2, n_val = 21;
  std::vector<uint16_t> xs(rows * n_val), ws(n_val);
  for (size_t i = 0; i < xs.size(); ++i)
    xs[i] = f32_to_f16_bits(std::cos(static_cast<float>(i)) * 3.0f);
  for (size_t i = 0; i < ws.size(); ++i) ws[i] = f32_to_f16_bits(0.1f * static_cast<float>(i));
  check_pipeline_preserves(k,
                           {bytes_of(xs), bytes_of(ws), bytes_of(std::vector<uint16_t>(xs.size()))},
                           {Arg::scalar_int(n_val), Arg::scalar_float(1e-5)}, {rows, 1, 1});
}

TEST_CASE("pipeline preserves an integer unpacking kernel bit for bit", "[passes]") {
  KernelBuilder b("unpack", spec_for("unpack"));
  auto q = b.buffer("q", DType::u8);
  auto y = b.buffer("y", DType::i8);
  auto n = b.scalar("n", DType::i32);
  constexpr int B = 16;
  auto c = b.program_id(0) * B + arange(B);
  auto m = c < n;
  auto bits = load(q + c, m, 0.0);
  auto lo_mask = (b.constant(1, DType::u8) << 4) - 1;  // folds to 15
  auto lo = (bits & lo_mask).to(DType::i8) - 8;
  auto hi = (bits >> 4).to(DType::i8) - 8;
  auto wrapped = (lo * b.constant(100, DType::i8) + hi) ^ (b.constant(3, DType::i8) + 126);
  store(y + c, wrapped, m);
  Kernel k = b.finish();
  Kernel opt = run_pipeline(k);
  REQUIRE(count_ops(opt, OpKind::Shl) == 0);

  std::vector<uint8_t> qs(45);
  for (size_t i = 0; i < qs.size(); ++i) qs[i] = static_cast<uint8_t>(i * 37 + 11);
  check_pipeline_preserves(k, {qs, std::vector<uint8_t>(qs.size(), 0xAA)}, {Arg::scalar_int(41)},
                           {3, 1, 1});
}

// ---- grouped 8-bit dots ------------------------------------------------------------

namespace {
// y[2, 4] = sums of groups of 4 of widen(a) * widen(b) over 32 loaded bytes.
Kernel grouped_dot_kernel(DType ta, DType tb) {
  KernelBuilder b("grouped", spec_for("grouped"));
  auto a = b.buffer("a", ta), w = b.buffer("b", tb);
  auto y = b.buffer("y", DType::i32);
  auto c = arange(32);
  auto prod = load(a + c).to(DType::i32) * load(w + c).to(DType::i32);
  store(y + arange(8), reshape(sum(reshape(prod, {2, 4, 4}), 2), {8}));
  return b.finish();
}
}  // namespace

TEST_CASE("recognize_dot_groups turns widened products summed in fours into dot_groups",
          "[passes]") {
  std::vector<uint8_t> as(32), bs(32);
  for (size_t i = 0; i < 32; ++i) {
    as[i] = static_cast<uint8_t>(i * 53 + 200);  // u8 up to 255, i8 both signs
    bs[i] = static_cast<uint8_t>(i * 71 + 128);
  }
  for (DType ta : {DType::u8, DType::i8}) {
    INFO(dtype_name(ta));
    Kernel k = grouped_dot_kernel(ta, DType::i8);
    Kernel opt = run_pipeline(k);
    CHECK(count_ops(opt, OpKind::DotGroups) == 1);
    CHECK(count_ops(opt, OpKind::Mul) == 0);
    check_pipeline_preserves(k, {as, bs, std::vector<uint8_t>(32, 0)}, {}, {1, 1, 1});
    // Against the sums computed here.
    auto out = run(opt, {as, bs, std::vector<uint8_t>(32, 0)}, {}, {1, 1, 1});
    const auto* y = reinterpret_cast<const int32_t*>(out[2].data());
    for (int g = 0; g < 8; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 4; ++i) {
        int32_t x = ta == DType::u8 ? as[4 * g + i] : static_cast<int8_t>(as[4 * g + i]);
        s += x * static_cast<int8_t>(bs[4 * g + i]);
      }
      CHECK(y[g] == s);
    }
  }
  // u8 x u8 has no grouped-dot instruction to map to: left alone.
  CHECK(count_ops(run_pipeline(grouped_dot_kernel(DType::u8, DType::u8)), OpKind::DotGroups) == 0);
}

TEST_CASE("dot_groups checks its operands", "[passes][error]") {
  KernelBuilder b("bad", spec_for("bad"));
  auto a = b.buffer("a", DType::u8);
  auto f = b.buffer("f", DType::f32);
  REQUIRE_THROWS_WITH(dot_groups(load(a + arange(8)), load(a + arange(8))),
                      Catch::Contains("u8 or i8 with i8"));
  REQUIRE_THROWS_WITH(dot_groups(load(a + arange(6)), load(a + arange(6)).to(DType::i8)),
                      Catch::Contains("are not one [.., 4k]"));
  auto w = load(a + arange(6)).to(DType::i16);
  REQUIRE_THROWS_WITH(dot_groups(w, load(a + arange(6)).to(DType::i8)),
                      Catch::Contains("u8 or i8 with i8, or i16 with i16"));
  REQUIRE_THROWS_WITH(
      dot_groups(load(a + arange(3)).to(DType::i16), load(a + arange(3)).to(DType::i16)),
      Catch::Contains("are not one [.., 2k]"));
  (void)f;
}
