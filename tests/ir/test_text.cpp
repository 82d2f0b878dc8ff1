// The text form: print/parse round trips over every op and dtype, the exact
// golden text of a small kernel, the structural hash, renumbering, parse
// errors and a deterministic mutation fuzz of the parser.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

using namespace kiln;

namespace {

constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16,   DType::f8e4m3, DType::f8e5m2,
                                DType::i8,  DType::u8,  DType::i16,    DType::u16,    DType::i32,
                                DType::u32, DType::i64, DType::boolean};
static_assert(sizeof(kAllDTypes) / sizeof(kAllDTypes[0]) == kNumDTypes);

Spec spec_of(const std::string& name, std::map<std::string, int64_t> constexprs = {}) {
  Spec s;
  s.kernel = name;
  s.constexprs = std::move(constexprs);
  return s;
}

uint64_t bits_of(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}
double double_of(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

// ---- kernels covering the IR ------------------------------------------------------

Kernel creation_kernel() {
  KernelBuilder k("creation", spec_of("creation"));
  Buffer y = k.buffer("y", DType::f32);
  Value n = k.scalar("n", DType::i32);
  Value pid = k.program_id(0);
  Value pid2 = k.program_id(2);
  Value np = k.num_programs(1);
  Value r = arange(8);
  Value base = pid * 8;
  Value off = base + r;
  Value row = expand_dims(r, 0);           // reshape to [1,8]
  Value grid = broadcast_to(row, {4, 8});  // i32[4,8]
  Value t = transpose(grid);               // i32[8,4]
  Value s = slice(t, {2, 1}, {4, 2});      // i32[4,2]
  Value flat = reshape(s, {8});
  Value scalar = full({}, 3, DType::i32);  // rank 0
  Value extra = pid2 + np;
  Value sum0 = scalar + extra;
  Value flat2 = flat + sum0;
  Value f = flat2.to(DType::f32);
  Value half = full({8}, 0.5, DType::f32);
  Value v = f + half;
  Value m = off < n;
  store(y + off, v, m);
  return k.finish();
}

Kernel int_elementwise_kernel() {
  KernelBuilder k("int_ops", spec_of("int_ops"));
  Buffer out = k.buffer("out", DType::i32);
  Buffer outu = k.buffer("outu", DType::u32);
  Buffer outb = k.buffer("outb", DType::boolean);
  Value a = arange(16);
  Value b = a + 3;
  Value c = a - b;
  c = c * b;
  c = c / b;
  c = c % b;
  c = minimum(c, a);
  c = maximum(c, b);
  c = c & b;
  c = c | a;
  c = c ^ b;
  c = c << 2;
  c = c >> 1;
  c = -c;
  c = abs(c);
  c = ~c;
  store(out + a, c);
  Value u = a.to(DType::u32);
  Value ushift = u >> 3;  // logical shift on unsigned
  store(outu + a, ushift);
  Value e = a == b;
  Value ne = a != b;
  Value lt = a < b;
  Value le = a <= b;
  Value gt = a > b;
  Value ge = a >= b;
  Value bb = e & ne;
  bb = bb | lt;
  bb = bb ^ le;
  bb = !bb;
  Value beq = gt == ge;
  Value bne = bb != beq;
  store(outb + a, bne);
  return k.finish();
}

Kernel float_elementwise_kernel() {
  KernelBuilder k("float_ops", spec_of("float_ops"));
  Buffer x = k.buffer("x", DType::f32);
  Buffer out = k.buffer("out", DType::f32);
  Buffer bits = k.buffer("bits", DType::i32);
  Buffer half = k.buffer("half", DType::f16);
  Value i = arange(32);
  Value v = load(x + i);
  Value w = v + 1.5;
  w = w - v;
  w = w * v;
  w = w / v;
  w = w % v;
  w = minimum(w, v);
  w = maximum(w, v);
  w = -w;
  w = abs(w);
  w = floor(w);
  w = exp(w);
  w = exp2(w);
  w = log(w);
  w = log2(w);
  w = sqrt(w);
  w = rsqrt(w);
  w = tanh(w);
  w = sigmoid(w);
  w = erf(w);
  Value f = fma(w, v, w);
  Value cond = f > v;
  Value sel = where(cond, f, v);
  Value cmp_eq = sel == v;
  Value sel2 = where(cmp_eq, sel, w);
  store(out + i, sel2);
  Value as_int = sel2.bitcast(DType::i32);
  store(bits + i, as_int);
  Value h = sel2.to(DType::f16);
  Value hb = h.bitcast(DType::i16).bitcast(DType::f16);
  store(half + i, hb);
  return k.finish();
}

Kernel memory_kernel() {
  KernelBuilder k("memory", spec_of("memory"));
  Buffer x = k.buffer("x", DType::f32);
  Buffer y = k.buffer("y", DType::f32);
  Buffer cnt = k.buffer("cnt", DType::i32);
  Buffer big = k.buffer("big", DType::i64);
  Value n = k.scalar("n", DType::i32);
  Value off = arange(64);
  Value mask = off < n;
  Value a = load(x + off);              // no mask
  Value b = load(x + off, mask, -1.0);  // mask, constant other
  Value other = full({64}, 2.0, DType::f32);
  Value c = load(y + off, mask, other);  // mask, value other
  Value sum1 = a + b;
  Value sum2 = sum1 + c;
  store(y + off, sum2);        // no mask
  store(y + off, sum2, mask);  // mask
  Value ones = full({64}, 1, DType::i32);
  Value o1 = atomic_add(cnt + off, ones);
  Value o2 = atomic_add(cnt + off, o1, mask);
  Value o3 = atomic_max(cnt + off, o2, mask);
  Value o4 = atomic_min(cnt + off, o3, mask);
  Value o5 = atomic_xchg(cnt + off, o4, mask);
  Value fo = atomic_add(x + off, sum2, mask);
  store(x + off, fo, mask);
  Value off64 = off.to(DType::i64);
  Value v64 = load(big + off64);
  Value w64 = v64 + o5.to(DType::i64);
  store(big + off64, w64);
  prefetch(x + off * 16);                   // affine
  prefetch(big + (off64 * off64 + 65536));  // not affine, past the end
  return k.finish();
}

Kernel reduction_kernel() {
  KernelBuilder k("reductions", spec_of("reductions"));
  Buffer x = k.buffer("x", DType::f32);
  Buffer out = k.buffer("out", DType::f32);
  Buffer idx = k.buffer("idx", DType::i32);
  Buffer li = k.buffer("li", DType::i64);
  Value rows = expand_dims(arange(4), 1);  // [4,1]
  Value scaled = rows * 8;
  Value cols = expand_dims(arange(8), 0);  // [1,8]
  Value off = scaled + cols;               // [4,8]
  Value v = load(x + off);
  Value s1 = sum(v, 1);     // [4]
  Value m0 = max(v, 0);     // [8]
  Value n1 = min(v, 1);     // [4]
  Value all = sum(v);       // scalar via two reductions
  Value am = argmax(v, 1);  // i32[4]
  Value r4 = arange(4);
  Value t = s1 + n1;
  Value t2 = t + all;
  store(out + r4, t2);
  Value r8 = arange(8);
  store(out + r8, m0);
  store(idx + r4, am);
  Value iv = off.to(DType::i64);
  Value is = sum(iv, 0);
  Value im = max(iv);
  Value imn = min(iv);
  Value tot = is + im;
  Value tot2 = tot + imn;
  Value r8l = r8.to(DType::i64);
  store(li + r8l, tot2);
  return k.finish();
}

Kernel dot_kernel() {
  KernelBuilder k("dots", spec_of("dots", {{"BLOCK_K", 32}, {"BLOCK_M", 16}}));
  Buffer a = k.buffer("a", DType::f16);
  Buffer b = k.buffer("b", DType::f16);
  Buffer c = k.buffer("c", DType::f32);
  Buffer qa = k.buffer("qa", DType::i8);
  Buffer qu = k.buffer("qu", DType::u8);
  Buffer qb = k.buffer("qb", DType::i8);
  Buffer qc = k.buffer("qc", DType::i32);
  Value r = expand_dims(arange(16), 1);
  Value rs = r * 16;
  Value cl = expand_dims(arange(16), 0);
  Value off = rs + cl;  // [16,16]
  Value av = load(a + off);
  Value bv = load(b + off);
  Value acc = zeros(DType::f32, {16, 16});
  Value d = dot(av, bv, acc);
  store(c + off, d);
  Value r2 = expand_dims(arange(16), 1);
  Value r2s = r2 * 32;
  Value c2 = expand_dims(arange(32), 0);
  Value offa = r2s + c2;  // [16,32]
  Value r3 = expand_dims(arange(32), 1);
  Value r3s = r3 * 16;
  Value c3 = expand_dims(arange(16), 0);
  Value offb = r3s + c3;  // [32,16]
  Value ia = load(qa + offa);
  Value ua = load(qu + offa);
  Value ib = load(qb + offb);
  Value iacc = zeros(DType::i32, {16, 16});
  Value id = dot(ia, ib, iacc);
  Value ud = dot(ua, ib, id);
  store(qc + off, ud);
  // Grouped dots: ia and ua are [16,32], ib's transpose shares their shape.
  Value groups = dot_groups(ua, transpose(ib)) + dot_groups(ia, transpose(ib));  // [16,8]
  store(qc + (rs + expand_dims(arange(8), 0)), groups);
  return k.finish();
}

Kernel lookup_kernel() {
  KernelBuilder k("lookups", spec_of("lookups"));
  Buffer codes = k.buffer("codes", DType::u8);
  Buffer q = k.buffer("q", DType::i8);
  Buffer grid = k.buffer("grid", DType::i64);
  Value c = reshape(arange(32), {2, 16});
  Value x = load(codes + c);
  Value v = lookup({-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113},
                   DType::i8, x);
  store(q + c, v);
  Value r = arange(4);
  Value g = lookup({std::numeric_limits<int64_t>::min(), -1, 0x0808080808080808,
                    std::numeric_limits<int64_t>::max()},
                   DType::i64, r);
  store(grid + r, g);
  return k.finish();
}

Kernel control_kernel() {
  KernelBuilder k("control", spec_of("control", {{"BLOCK", 128}}));
  Buffer x = k.buffer("x", DType::f32);
  Buffer y = k.buffer("y", DType::f32);
  Value n = k.scalar("n", DType::i32);
  Value big = k.scalar("big", DType::i64);
  Var acc = k.var(zeros(DType::f32, {128}));
  Var count = k.var(full({}, 0, DType::i32));
  k.for_(0, n, 128, [&](Value i) {
    Value r = arange(128);
    Value off = i + r;
    Value m = off < n;
    Value v = load(x + off, m, 0.0);
    acc += v;
    k.for_(0, 4, 1, [&](Value j) {  // nested
      Value c = count.get();
      Value c2 = c + j;
      count = c2;
    });
  });
  k.for_(int64_t{0}, big, int64_t{2}, [&](Value i) {  // i64 induction variable
    Value pos = i > 10;
    k.if_(pos, [&] { count = count.get() + 1; });
  });
  Value pid = k.program_id(0);
  Value first = pid == 0;
  k.if_(
      first,
      [&] {
        Value total = sum(acc.get());
        Value tv = full({}, 1.0, DType::f32);
        Value t = total * tv;
        Value z = full({}, 0, DType::i32);
        store(y + z, t);
      },
      [&] {
        Value c = count.get();
        Value cf = c.to(DType::f32);
        Value one = full({}, 1, DType::i32);
        store(y + one, cf);
      });
  Value other = pid != 1;
  k.if_(
      other, [] {}, [&] { acc = zeros(DType::f32, {128}); });  // empty then
  return k.finish();
}

Kernel dtype_kernel() {
  KernelBuilder k("dtypes", spec_of("dtypes"));
  std::vector<Buffer> bufs;
  std::vector<Value> scalars;
  for (DType t : kAllDTypes) bufs.push_back(k.buffer("b_" + std::string(dtype_name(t)), t));
  for (DType t : kAllDTypes) scalars.push_back(k.scalar("s_" + std::string(dtype_name(t)), t));
  Value off = arange(4);
  for (size_t i = 0; i < bufs.size(); ++i) {
    DType t = kAllDTypes[i];
    Value c = full({4}, t == DType::boolean ? 1.0 : 3.0, t);
    Value l = load(bufs[i] + off);
    Value s = broadcast_to(scalars[i], {4});
    Value eq = l == s;
    Value v = where(eq, c, l);
    store(bufs[i] + off, v);
    Value f = v.to(DType::f32);
    Value back = f.to(t);
    store(bufs[i] + off, back);
  }
  return k.finish();
}

Kernel special_float_kernel() {
  KernelBuilder k("specials", spec_of("specials"));
  Buffer y = k.buffer("y", DType::f32);
  Buffer h = k.buffer("h", DType::f16);
  const double inf = std::numeric_limits<double>::infinity();
  const double vals[] = {-0.0,
                         0.0,
                         inf,
                         -inf,
                         std::numeric_limits<double>::quiet_NaN(),
                         -std::numeric_limits<double>::quiet_NaN(),
                         1e-30,
                         0.1,
                         1e-06,
                         0.5,
                         1.0,
                         100000.0,
                         123456789.125,
                         3.4028234663852886e+38,
                         5e-324,
                         std::numeric_limits<double>::max(),
                         -std::numeric_limits<double>::min(),
                         1.0 / 3.0};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); ++i) {
    Value c = full({}, vals[i], DType::f32);
    Value o = full({}, static_cast<int64_t>(i), DType::i32);
    store(y + o, c);
    Value ch = full({}, vals[i], DType::f16);
    store(h + o, ch);
  }
  return k.finish();
}

// Built by hand: values the DSL cannot produce exactly (it goes through
// double), NaN payloads, and quoted names.
Kernel hand_kernel() {
  Kernel k;
  k.name = "hand made";
  k.params.push_back({"out \"64\"", ParamKind::Buffer, DType::i64});
  k.params.push_back({"o32", ParamKind::Buffer, DType::u32});
  k.params.push_back({"f", ParamKind::Buffer, DType::f32});
  k.params.push_back({"tab\there", ParamKind::Scalar, DType::i8});
  k.constexprs = {{"MIN", std::numeric_limits<int64_t>::min()}, {"ZERO", 0}};
  auto constant = [&](DType t, int64_t iv, double fv) {
    Op op;
    op.kind = OpKind::Const;
    op.ival = iv;
    op.fval = fv;
    op.result = k.add_value(Type{t, {}});
    k.body.ops.push_back(op);
    return op.result;
  };
  auto store = [&](int buf, int off, int v) {
    Op op;
    op.kind = OpKind::Store;
    op.ival = buf;
    op.args = {off, v};
    k.body.ops.push_back(op);
  };
  Op p;
  p.kind = OpKind::Param;
  p.ival = 3;
  p.result = k.add_value(Type{DType::i8, {}});
  k.body.ops.push_back(p);
  int o0 = constant(DType::i64, 0, 0);
  int o1 = constant(DType::i64, 1, 0);
  store(0, o0, constant(DType::i64, std::numeric_limits<int64_t>::min(), 0));
  store(0, o1, constant(DType::i64, std::numeric_limits<int64_t>::max(), 0));
  store(1, o0, constant(DType::u32, 4294967295, 0));
  store(2, o0, constant(DType::f32, 0, double_of(0x7ff8000000000001ull)));  // payload NaN
  store(2, o1, constant(DType::f32, 0, double_of(0xfff0000000000abcull)));  // signalling
  constant(DType::i8, -128, 0);
  constant(DType::boolean, 1, 0);
  verify(k);
  return k;
}

std::vector<std::function<Kernel()>> all_kernels() {
  return {creation_kernel, int_elementwise_kernel, float_elementwise_kernel,
          memory_kernel,   reduction_kernel,       dot_kernel,
          control_kernel,  dtype_kernel,           special_float_kernel,
          hand_kernel,     lookup_kernel};
}

void collect_ops(const Block& b, std::set<OpKind>* kinds, std::set<DType>* dtypes,
                 std::set<int>* ranks, const Kernel& k) {
  for (const Op& op : b.ops) {
    kinds->insert(op.kind);
    if (op.result >= 0) {
      dtypes->insert(k.values[op.result].dtype);
      ranks->insert(k.values[op.result].rank());
    }
    for (const Block& r : op.regions) collect_ops(r, kinds, dtypes, ranks, k);
  }
}

// Field-by-field equality; NaN constants compare by bits.
void require_same_block(const Block& a, const Block& b);
void require_same_op(const Op& a, const Op& b) {
  REQUIRE(a.kind == b.kind);
  REQUIRE(a.result == b.result);
  REQUIRE(a.args == b.args);
  REQUIRE(a.ival == b.ival);
  REQUIRE(bits_of(a.fval) == bits_of(b.fval));
  REQUIRE(a.ints == b.ints);
  REQUIRE(a.regions.size() == b.regions.size());
  for (size_t i = 0; i < a.regions.size(); ++i) require_same_block(a.regions[i], b.regions[i]);
}
void require_same_block(const Block& a, const Block& b) {
  REQUIRE(a.ops.size() == b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) require_same_op(a.ops[i], b.ops[i]);
}
void require_same_kernel(const Kernel& a, const Kernel& b) {
  REQUIRE(a.name == b.name);
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    REQUIRE(a.params[i].name == b.params[i].name);
    REQUIRE(a.params[i].kind == b.params[i].kind);
    REQUIRE(a.params[i].dtype == b.params[i].dtype);
  }
  REQUIRE(a.constexprs == b.constexprs);
  REQUIRE(a.values == b.values);
  REQUIRE(a.vars == b.vars);
  require_same_block(a.body, b.body);
}

// Renames every value and variable id by a random permutation: the same
// kernel as a builder with another id allocation order would produce.
Kernel permute_ids(const Kernel& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> vperm(k.values.size()), varperm(k.vars.size());
  for (size_t i = 0; i < vperm.size(); ++i) vperm[i] = static_cast<int>(i);
  for (size_t i = 0; i < varperm.size(); ++i) varperm[i] = static_cast<int>(i);
  std::shuffle(vperm.begin(), vperm.end(), rng);
  std::shuffle(varperm.begin(), varperm.end(), rng);
  Kernel r = k;
  for (size_t i = 0; i < k.values.size(); ++i) r.values[vperm[i]] = k.values[i];
  for (size_t i = 0; i < k.vars.size(); ++i) r.vars[varperm[i]] = k.vars[i];
  std::function<void(Block&)> rename = [&](Block& b) {
    for (Op& op : b.ops) {
      if (op.result >= 0) op.result = vperm[op.result];
      for (int& a : op.args) a = vperm[a];
      if (op.kind == OpKind::VarDecl || op.kind == OpKind::VarLoad || op.kind == OpKind::VarStore)
        op.ival = varperm[op.ival];
      for (Block& sub : op.regions) rename(sub);
    }
  };
  rename(r.body);
  return r;
}

void require_round_trip(const Kernel& k) {
  std::string text = print_kernel(k);
  INFO(text);
  Kernel parsed = parse_kernel(text);
  REQUIRE(print_kernel(parsed) == text);
  REQUIRE(structural_hash(parsed) == structural_hash(k));
}

}  // namespace

TEST_CASE("text: every kernel round-trips through print and parse", "[text]") {
  for (const auto& make : all_kernels()) {
    Kernel k = make();
    INFO("kernel " << k.name);
    require_round_trip(k);
    // Builders allocate ids in definition order, so the parsed kernel is the
    // very same kernel, ids included.
    require_same_kernel(parse_kernel(print_kernel(k)), k);
  }
}

TEST_CASE("text: the test kernels cover every op, dtype and rank", "[text]") {
  std::set<OpKind> kinds;
  std::set<DType> dtypes;
  std::set<int> ranks;
  for (const auto& make : all_kernels()) {
    Kernel k = make();
    collect_ops(k.body, &kinds, &dtypes, &ranks, k);
  }
  for (int i = 0; i <= static_cast<int>(OpKind::VarStore); ++i) {
    INFO("op " << op_name(static_cast<OpKind>(i)));
    CHECK(kinds.count(static_cast<OpKind>(i)) == 1);
  }
  for (DType t : kAllDTypes) {
    INFO("dtype " << dtype_name(t));
    CHECK(dtypes.count(t) == 1);
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
}

TEST_CASE("text: golden form of a small kernel", "[text]") {
  KernelBuilder k("scale", spec_of("scale", {{"BLOCK", 4}}));
  Buffer x = k.buffer("x", DType::f32);
  Buffer y = k.buffer("y", DType::f32);
  Value n = k.scalar("n", DType::i32);
  Value pid = k.program_id(0);
  Value base = pid * 4;
  Value r = arange(4);
  Value c = base + r;
  Value m = c < n;
  Value v = load(x + c, m, 0.0);
  Value two = full({}, 2.0, DType::f32);
  Value w = v * two;
  Var acc = k.var(w);
  k.for_(0, n, 4, [&](Value i) {
    Value s = sum(acc.get(), 0);
    Value first = i == 0;
    k.if_(first, [&] { acc = acc.get() + s; });
  });
  store(y + c, acc.get(), m);
  Kernel kern = k.finish();

  const std::string golden =
      "kernel scale(x: buf<f32>, y: buf<f32>, n: i32) constexprs(BLOCK=4) {\n"
      "  %0 = param n : i32\n"
      "  %1 = program_id 0 : i32\n"
      "  %2 = const 4 : i32\n"
      "  %3 = mul %1, %2 : i32\n"
      "  %4 = arange : i32[4]\n"
      "  %5 = broadcast %3 : i32[4]\n"
      "  %6 = add %5, %4 : i32[4]\n"
      "  %7 = broadcast %0 : i32[4]\n"
      "  %8 = lt %6, %7 : bool[4]\n"
      "  %9 = const 0.0 : f32\n"
      "  %10 = broadcast %9 : f32[4]\n"
      "  %11 = load x[%6] mask %8 other %10 : f32[4]\n"
      "  %12 = const 2.0 : f32\n"
      "  %13 = broadcast %12 : f32[4]\n"
      "  %14 = mul %11, %13 : f32[4]\n"
      "  var $0 = %14 : f32[4]\n"
      "  %15 = const 0 : i32\n"
      "  %16 = const 4 : i32\n"
      "  for %17 = %15 to %0 step %16 : i32 {\n"
      "    %18 = var_load $0 : f32[4]\n"
      "    %19 = reduce_sum %18 axis 0 : f32\n"
      "    %20 = const 0 : i32\n"
      "    %21 = eq %17, %20 : bool\n"
      "    if %21 {\n"
      "      %22 = var_load $0 : f32[4]\n"
      "      %23 = broadcast %19 : f32[4]\n"
      "      %24 = add %22, %23 : f32[4]\n"
      "      var_store $0, %24\n"
      "    }\n"
      "  }\n"
      "  %25 = var_load $0 : f32[4]\n"
      "  store y[%6], %25 mask %8\n"
      "}\n";
  REQUIRE(print_kernel(kern) == golden);
  require_round_trip(kern);
}

TEST_CASE("text: hand-written text with comments and free value names", "[text]") {
  const std::string text = R"(
// The parser accepts any %name and $name and ignores layout and comments.
kernel copy(src: buf<f16>, dst: buf<f16>,
            n: i32) constexprs(B=8) {
  %n = param n : i32
  %offs = arange : i32[8]
  %bound = broadcast %n : i32[8]
  %in = lt %offs, %bound : bool[8]   // the tail mask
  %zero = const -0.0 : f16
  %z = broadcast %zero : f16[8]
  %x = load src[%offs] mask %in other %z : f16[8]
  var $keep = %x : f16[8]
  %k = var_load $keep : f16[8]
  store dst[%offs], %k mask %in
}
)";
  Kernel k = parse_kernel(text);
  REQUIRE(k.name == "copy");
  REQUIRE(k.params.size() == 3);
  REQUIRE(k.params[2].kind == ParamKind::Scalar);
  REQUIRE(k.constexprs == std::vector<std::pair<std::string, int64_t>>{{"B", 8}});
  REQUIRE(k.values.size() == 8);
  REQUIRE(k.vars.size() == 1);
  REQUIRE(k.body.ops.size() == 10);
  REQUIRE(bits_of(k.body.ops[4].fval) == bits_of(-0.0));
  std::string printed = print_kernel(k);
  REQUIRE(printed.find("%6 = load src[%1] mask %3 other %5 : f16[8]") != std::string::npos);
  REQUIRE(printed.find("const -0.0 : f16") != std::string::npos);
  require_round_trip(k);
}

TEST_CASE("text: float constants print exactly and readably", "[text]") {
  Kernel k = special_float_kernel();
  std::string text = print_kernel(k);
  for (const char* s :
       {"const -0.0 : f32", "const 0.0 : f32", "const inf : f32", "const -inf : f32",
        "const nan : f32", "const -nan : f32", "const 1e-30 : f32", "const 0.1 : f32",
        "const 1e-06 : f32", "const 0.5 : f32", "const 1.0 : f32", "const 100000.0 : f32",
        "const 123456792.0 : f32"}) {
    INFO(s);
    CHECK(text.find(s) != std::string::npos);
  }
  Kernel parsed = parse_kernel(text);
  require_same_kernel(parsed, k);

  Kernel h = hand_kernel();
  std::string ht = print_kernel(h);
  CHECK(ht.find("nan(0x7ff8000000000001)") != std::string::npos);
  CHECK(ht.find("const -9223372036854775808 : i64") != std::string::npos);
  CHECK(ht.find("const 9223372036854775807 : i64") != std::string::npos);
  CHECK(ht.find("const 4294967295 : u32") != std::string::npos);
  CHECK(ht.find("kernel \"hand made\"(\"out \\\"64\\\"\": buf<i64>") != std::string::npos);
  CHECK(ht.find("\"tab\\x09here\": i8") != std::string::npos);
  require_same_kernel(parse_kernel(ht), h);
}

TEST_CASE("text: structural hash tracks constants, dtypes and constexprs", "[text]") {
  auto make = [](double c, DType t, int64_t block) {
    KernelBuilder k("h", spec_of("h", {{"BLOCK", block}}));
    Buffer y = k.buffer("y", t);
    Value r = arange(8);
    Value v = full({8}, c, t);
    store(y + r, v);
    return k.finish();
  };
  uint64_t base = structural_hash(make(1.0, DType::f32, 8));
  REQUIRE(structural_hash(make(1.0, DType::f32, 8)) == base);
  CHECK(structural_hash(make(2.0, DType::f32, 8)) != base);
  CHECK(structural_hash(make(-0.0, DType::f32, 8)) != structural_hash(make(0.0, DType::f32, 8)));
  CHECK(structural_hash(make(1.0, DType::f16, 8)) != base);
  CHECK(structural_hash(make(1.0, DType::f32, 16)) != base);
  // Distinct kernels of the suite hash apart.
  std::set<uint64_t> hashes;
  auto kernels = all_kernels();
  for (const auto& mk : kernels) hashes.insert(structural_hash(mk()));
  CHECK(hashes.size() == kernels.size());
}

TEST_CASE("text: printing renumbers ids in definition order", "[text]") {
  for (const auto& make : all_kernels()) {
    Kernel k = make();
    INFO("kernel " << k.name);
    std::string text = print_kernel(k);
    for (uint32_t seed : {1u, 2u, 3u}) {
      Kernel p = permute_ids(k, seed);
      verify(p);
      REQUIRE(print_kernel(p) == text);
      REQUIRE(structural_hash(p) == structural_hash(k));
    }
  }
}

TEST_CASE("text: printing never fails on a malformed kernel", "[text]") {
  Kernel k = creation_kernel();
  auto it = std::find_if(k.body.ops.begin(), k.body.ops.end(),
                         [](const Op& op) { return op.kind == OpKind::Mul; });
  REQUIRE(it != k.body.ops.end());
  it->args[0] = 1000;       // no such value
  k.body.ops[1].ival = 77;  // a bad axis is printed as is
  k.values.pop_back();      // the last result has no type
  k.vars.clear();
  std::string text = print_kernel(k);
  CHECK(text.find("%?1000") != std::string::npos);
  CHECK(text.find("program_id 77") != std::string::npos);
  CHECK(text.find(" : ?\n") != std::string::npos);
  CHECK_THROWS_AS(parse_kernel(text), Error);
}

namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_kernel(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("text: parse errors name the line and the problem", "[text]") {
  const std::string good =
      "kernel k(y: buf<f32>, n: i32) {\n"
      "  %0 = param n : i32\n"
      "  %1 = arange : i32[4]\n"
      "  %2 = const 1.5 : f32[4]\n"
      "  store y[%1], %2\n"
      "}\n";
  REQUIRE_NOTHROW(parse_kernel(good));

  struct Case {
    std::string text;
    std::vector<std::string> expect;  // substrings of the message
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  const std::vector<Case> cases = {
      {"", {"line 1, col 1", "expected 'kernel', found end of input"}},
      {"garbage !!", {"line 1, col 1", "expected 'kernel', found 'garbage'"}},
      {"kernel k() { # }", {"line 1, col 14", "unexpected character '#'"}},
      {edit("arange", "frobnicate"), {"line 3", "unknown op 'frobnicate'"}},
      {edit("i32[4]\n  %2", "i33[4]\n  %2"), {"line 3", "unknown dtype 'i33'"}},
      {edit("buf<f32>", "buf<float>"), {"line 1", "unknown dtype 'float'"}},
      {edit("%2\n}", "%9\n}"), {"line 5", "undefined value %9"}},
      {edit("param n", "param m"), {"line 2", "undefined parameter 'm'"}},
      {edit("y[%1]", "z[%1]"), {"line 5", "undefined parameter 'z'"}},
      {edit("%1 = arange", "%0 = arange"), {"line 3", "value %0 defined twice"}},
      {good.substr(0, good.find("i32[4]")), {"line 3", "expected a dtype, found end of input"}},
      {good.substr(0, good.size() - 2), {"line 6", "expected '}', found end of input"}},
      {good + "}\n", {"line 7", "expected end of input, found '}'"}},
      {edit("{\n", "{\n {\n"), {"line 2", "expected an op, found '{'"}},
      {edit("const 1.5", "const 1.5.5"), {"line 4", "expected a float constant"}},
      {edit("const 1.5 : f32", "const 1.5 : i32"), {"line 4", "expected an integer constant"}},
      {edit("i32[4]", "i32[0]"), {"line 3", "dimension 0 must be positive"}},
      {edit("i32[4]", "i32[99999999999999999999]"), {"line 3", "out of range"}},
      {edit("i32[4]", "i32[65536,65536]"), {"line 3", "more than 16777216 elements"}},
      {edit("store y", "%5 = store y"), {"line 5", "op 'store' has no result"}},
      {edit("%1 = arange", "arange"), {"line 3", "needs a result"}},
      {edit("%0 = param n : i32", "%0 = var_load $v : i32"), {"line 2", "undefined variable $v"}},
      {edit("n: i32)", "n: i32, n: f32)"), {"line 1", "parameter 'n' declared twice"}},
      {"kernel \"unterminated(", {"line 1, col 8", "unterminated string"}},
  };
  for (const Case& c : cases) {
    std::string msg = parse_error(c.text);
    INFO("text:\n" << c.text << "\nmessage: " << msg);
    for (const std::string& e : c.expect) CHECK(msg.find(e) != std::string::npos);
  }

  // Type errors surface through verify(): still a kiln::Error.
  CHECK_THROWS_AS(parse_kernel(edit("store y[%1], %2", "store y[%1], %1")), Error);
  // A loop variable does not outlive its loop.
  std::string scoped =
      "kernel k(n: i32) {\n"
      "  %0 = param n : i32\n"
      "  for %1 = %0 to %0 step %0 : i32 {\n"
      "  }\n"
      "  %2 = add %1, %1 : i32\n"
      "}\n";
  CHECK(parse_error(scoped).find("line 5, col 12: value %1 is used outside") != std::string::npos);
}

TEST_CASE("text: lookup tables print in full and read back", "[text]") {
  std::string text = print_kernel(lookup_kernel());
  CHECK(text.find("= lookup %2 [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, "
                  "89, 113] : i8[2,16]\n") != std::string::npos);
  CHECK(text.find("[-9223372036854775808, -1, 578721382704613384, 9223372036854775807] : i64[4]") !=
        std::string::npos);

  const std::string good =
      "kernel k(x: buf<u8>, y: buf<i8>) {\n"
      "  %0 = arange : i32[4]\n"
      "  %1 = load x[%0] : u8[4]\n"
      "  %2 = lookup %1 [1, -2, 3] : i8[4]\n"
      "  store y[%0], %2\n"
      "}\n";
  Kernel k = parse_kernel(good);
  CHECK(k.body.ops[2].ints == std::vector<int64_t>{1, -2, 3});
  require_round_trip(k);
  // Any change to the table changes the hash (the compile cache's key).
  std::string other = good;
  other.replace(other.find("-2"), 2, "-3");
  CHECK(structural_hash(parse_kernel(other)) != structural_hash(k));

  auto edit = [&](const std::string& to) {
    std::string t = good;
    t.replace(t.find("[1, -2, 3]"), 10, to);
    return t;
  };
  std::string huge = "[0";
  for (size_t i = 1; i <= kMaxLookupEntries; ++i) huge += ", 0";
  CHECK_THAT(parse_error(edit(huge + "]")),
             Catch::Contains("line 4") && Catch::Contains("more than 4096 entries"));
  CHECK_THAT(parse_error(edit("[1, x]")),
             Catch::Contains("line 4") && Catch::Contains("expected a table entry (an integer)"));
  CHECK_THAT(parse_error(edit("[]")), Catch::Contains("table has 0 entries"));
  CHECK_THAT(parse_error(edit("[1, 200]")),
             Catch::Contains("table entry 1 (200) does not fit the result dtype i8"));
}

TEST_CASE("text: nesting depth is bounded", "[text]") {
  auto nested = [](int depth) {
    std::string t = "kernel k() {\n  %c = const 1 : bool\n";
    for (int i = 0; i < depth; ++i) t += "if %c {\n";
    for (int i = 0; i < depth; ++i) t += "}\n";
    return t + "}\n";
  };
  REQUIRE_NOTHROW(parse_kernel(nested(200)));
  std::string msg = parse_error(nested(100000));
  CHECK(msg.find("nested deeper than 256") != std::string::npos);
}

TEST_CASE("text: mutated texts parse or fail with kiln::Error", "[text]") {
  std::vector<std::string> seeds;
  for (const auto& make : all_kernels()) seeds.push_back(print_kernel(make()));
  const std::string alphabet = "%$:=,[]{}()<>\"\\-.0123456789eaxnif_ \n";
  std::mt19937 rng(12345);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % std::max<size_t>(n, 1)); };
  int parsed_ok = 0, rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string t = seeds[pick(seeds.size())];
    int edits = 1 + static_cast<int>(pick(4));
    for (int e = 0; e < edits && !t.empty(); ++e) {
      size_t at = pick(t.size());
      switch (pick(6)) {
        case 0: t[at] = alphabet[pick(alphabet.size())]; break;
        case 1: t[at] = static_cast<char>(rng() & 0xff); break;
        case 2: t.erase(at, 1 + pick(8)); break;
        case 3: t.insert(at, 1, alphabet[pick(alphabet.size())]); break;
        case 4: t.resize(at); break;
        default: {  // duplicate a chunk elsewhere: repeated definitions, extra braces
          std::string chunk = t.substr(at, 1 + pick(40));
          t.insert(pick(t.size()), chunk);
        }
      }
    }
    try {
      Kernel k = parse_kernel(t);
      ++parsed_ok;
      // Whatever parses prints back to a text that parses to itself.
      std::string p = print_kernel(k);
      INFO(t);
      REQUIRE(print_kernel(parse_kernel(p)) == p);
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      INFO("input:\n" << t);
      FAIL("non-kiln exception: " << e.what());
    }
  }
  CHECK(rejected > 0);
  CHECK(parsed_ok > 0);  // some edits (a digit in a constant, spacing) stay valid
}
