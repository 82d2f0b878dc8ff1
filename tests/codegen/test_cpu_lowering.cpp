// The CPU JIT against the reference interpreter, op by op: the same kernel
// runs through both on the same inputs. Exact ops (arithmetic, casts,
// memory, control flow) must agree bit for bit; transcendental functions
// within the tolerances stated in codegen/cpu/vector_math.h; float
// reductions within f32 reassociation error.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "runtime/cpu/cpu_launch.h"
#include "support/scratch_kernel.h"
#include "support/test_data.h"
#include "targets/cpu/cpu_jit.h"

using namespace kiln;
using kiln::test::HostBuffer;

namespace {

CpuJit& jit() {
  static CpuJit j;
  return j;
}
ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

// The same host, lowered as for a CPU without masked vector memory ops.
CpuJit& portable_jit() {
  static CpuJit j(CpuProfile{false});
  return j;
}

void run_jit(const Kernel& k, const std::vector<Arg>& args, Grid grid, CpuJit& with = jit()) {
  static std::atomic<int> counter{0};
  auto c = with.compile(k, "test_kernel_" + std::to_string(counter++));
  launch_cpu(k, c.fn, args, grid, pool());
}

// Builds `z[i] = f(x[i], y[i])` over n elements with a masked tail.
Kernel elementwise_kernel(DType in, DType out, int64_t block,
                          const std::function<Value(Value, Value)>& f) {
  Spec s{"ew", {}, {}};
  KernelBuilder k("ew", s);
  auto x = k.buffer("x", in), y = k.buffer("y", in), z = k.buffer("z", out);
  auto n = k.scalar("n", DType::i32);
  auto offs = k.program_id(0) * static_cast<int>(block) + arange(block);
  auto m = offs < n;
  store(z + offs, f(load(x + offs, m, 1.0), load(y + offs, m, 1.0)), m);
  return k.finish();
}

// Runs kernel k on x, y through both paths; returns (jit z, interpreter z).
std::pair<HostBuffer, HostBuffer> both(const Kernel& k, HostBuffer x, HostBuffer y, DType out,
                                       int64_t block, CpuJit& with = jit()) {
  int64_t n = x.size();
  HostBuffer zj(out, n), zi(out, n);
  Grid g{(n + block - 1) / block, 1, 1};
  run_jit(k, {x.arg(), y.arg(), zj.arg(), Arg::scalar_int(n)}, g, with);
  interpret(k, {x.arg(), y.arg(), zi.arg(), Arg::scalar_int(n)}, g);
  return {std::move(zj), std::move(zi)};
}

HostBuffer special_values(DType t, int64_t n, uint64_t seed) {
  HostBuffer b = HostBuffer::random(t, n, seed, is_float(t) ? -8 : -200, is_float(t) ? 8 : 200);
  if (is_float(t)) {
    const double specials[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1e-3, 65504, -1e30, 0.5, 2.5};
    for (int64_t i = 0; i < n; i += 7) b.set(i, specials[(i / 7) % 10]);
  } else {
    const double specials[] = {0,   -1,    1,      127,          -128,
                               255, 65535, -32768, 2147483647.0, -2147483648.0};
    for (int64_t i = 0; i < n; i += 5) b.set(i, specials[(i / 5) % 10]);
  }
  return b;
}

bool same_bits(const HostBuffer& a, const HostBuffer& b) {
  if (a.bytes() == b.bytes()) return true;
  for (int64_t i = 0; i < a.size(); ++i)
    if (!(a.get(i) == b.get(i) || (std::isnan(a.get(i)) && std::isnan(b.get(i))))) {
      UNSCOPED_INFO("element " << i << ": jit " << a.get(i) << " vs interpreter " << b.get(i));
      return false;
    }
  return true;
}

const std::vector<int64_t> kIq4nl = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

// y[i] = lookup(table, out, x[i]) in blocks of `block`.
Kernel lookup_kernel(const std::vector<int64_t>& table, DType index, DType out, int64_t block) {
  Spec s{"lut", {}, {}};
  KernelBuilder k("lut", s);
  auto x = k.buffer("x", index), y = k.buffer("y", out);
  auto offs = k.program_id(0) * static_cast<int>(block) + arange(block);
  store(y + offs, lookup(table, out, load(x + offs)));
  return k.finish();
}

// Runs lookup_kernel over `indices` (a whole number of blocks) through the
// JIT `with` and the interpreter; true when the outputs agree bit for bit.
bool lookup_matches(const Kernel& k, const HostBuffer& indices, DType out, int64_t block,
                    CpuJit& with = jit()) {
  HostBuffer x = indices, yj(out, x.size()), yi(out, x.size());
  Grid g{x.size() / block, 1, 1};
  run_jit(k, {x.arg(), yj.arg()}, g, with);
  interpret(k, {x.arg(), yi.arg()}, g);
  return same_bits(yj, yi);
}

// The host lowered with each byte-shuffle width it has, then with none
// (the constant-array path).
std::vector<std::pair<std::string, CpuJit*>> byte_lookup_jits() {
  static std::map<std::string, std::unique_ptr<CpuJit>> jits;
  auto get = [&](const std::string& name, const CpuProfile& p) {
    auto& j = jits[name];
    if (!j) j = std::make_unique<CpuJit>(p);
    return std::make_pair(name, j.get());
  };
  CpuProfile host = cpu_profile(host_cpu_target());
  std::vector<std::pair<std::string, CpuJit*>> out = {{"host", &jit()}};
  for (int bits : {256, 128})
    if (host.x86_pshufb_bits > bits) {
      CpuProfile p = host;
      p.x86_pshufb_bits = bits;
      out.push_back(get("pshufb " + std::to_string(bits), p));
    }
  if (host.x86_vbmi) {
    CpuProfile p = host;
    p.x86_vbmi = false;
    out.push_back(get("pshufb, no vpermb", p));
  }
  CpuProfile none = host;
  none.x86_pshufb_bits = 0;
  none.x86_vbmi = false;
  none.aarch64_tbl = false;
  out.push_back(get("constant table", none));
  return out;
}

// Whether one line of `text` holds both a and b (an instruction and a
// register class).
bool line_with(const std::string& text, const std::string& a, const std::string& b) {
  for (size_t at = 0; at < text.size();) {
    size_t end = std::min(text.find('\n', at), text.size());
    std::string line = text.substr(at, end - at);
    if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
    at = end + 1;
  }
  return false;
}

const DType kFloatTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2};
const DType kIntTypes[] = {DType::i8,  DType::u8,  DType::i16, DType::u16,
                           DType::i32, DType::u32, DType::i64};

}  // namespace

TEST_CASE("binary float ops match the interpreter bit for bit", "[codegen][cpu]") {
  const std::pair<const char*, std::function<Value(Value, Value)>> ops[] = {
      {"add", [](Value a, Value b) { return a + b; }},
      {"sub", [](Value a, Value b) { return a - b; }},
      {"mul", [](Value a, Value b) { return a * b; }},
      {"div", [](Value a, Value b) { return a / b; }},
      {"min", [](Value a, Value b) { return minimum(a, b); }},
      {"max", [](Value a, Value b) { return maximum(a, b); }},
  };
  for (DType t : kFloatTypes)
    for (const auto& [name, f] : ops) {
      INFO(name << " on " << dtype_name(t));
      Kernel k = elementwise_kernel(t, t, 64, f);
      auto [zj, zi] = both(k, special_values(t, 203, 1), special_values(t, 203, 2), t, 64);
      CHECK(same_bits(zj, zi));
    }
}

TEST_CASE("binary integer ops match the interpreter bit for bit", "[codegen][cpu]") {
  const std::pair<const char*, std::function<Value(Value, Value)>> ops[] = {
      {"add", [](Value a, Value b) { return a + b; }},
      {"sub", [](Value a, Value b) { return a - b; }},
      {"mul", [](Value a, Value b) { return a * b; }},
      {"div", [](Value a, Value b) { return a / b; }},
      {"rem", [](Value a, Value b) { return a % b; }},
      {"min", [](Value a, Value b) { return minimum(a, b); }},
      {"max", [](Value a, Value b) { return maximum(a, b); }},
      {"and", [](Value a, Value b) { return a & b; }},
      {"or", [](Value a, Value b) { return a | b; }},
      {"xor", [](Value a, Value b) { return a ^ b; }},
      {"shl", [](Value a, Value b) { return a << b; }},
      {"shr", [](Value a, Value b) { return a >> b; }},
  };
  for (DType t : kIntTypes)
    for (const auto& [name, f] : ops) {
      INFO(name << " on " << dtype_name(t));
      Kernel k = elementwise_kernel(t, t, 32, f);
      auto [zj, zi] = both(k, special_values(t, 150, 3), special_values(t, 150, 4), t, 32);
      CHECK(same_bits(zj, zi));
    }
}

TEST_CASE("byte shifts by a constant match the interpreter bit for bit", "[codegen][cpu]") {
  // On x86 these lower as 16-bit word shifts plus a mask
  // (CpuProfile::byte_shifts_as_words): bits crossing from the neighbouring
  // byte must never show. Odd tile widths keep the plain byte shift.
  for (DType t : {DType::u8, DType::i8})
    for (int64_t block : {64, 7})
      for (int amount = 0; amount <= 9; ++amount)
        for (bool left : {false, true}) {
          INFO((left ? "shl " : "shr ")
               << amount << " on " << dtype_name(t) << ", block " << block);
          Kernel k = elementwise_kernel(
              t, t, block, [&](Value a, Value) { return left ? a << amount : a >> amount; });
          auto [zj, zi] = both(k, special_values(t, 150, 5), special_values(t, 150, 6), t, block);
          CHECK(same_bits(zj, zi));
        }
}

TEST_CASE("comparisons and selects match the interpreter", "[codegen][cpu]") {
  const std::pair<const char*, std::function<Value(Value, Value)>> ops[] = {
      {"eq", [](Value a, Value b) { return a == b; }},
      {"ne", [](Value a, Value b) { return a != b; }},
      {"lt", [](Value a, Value b) { return a < b; }},
      {"le", [](Value a, Value b) { return a <= b; }},
      {"gt", [](Value a, Value b) { return a > b; }},
      {"ge", [](Value a, Value b) { return a >= b; }},
  };
  for (DType t : {DType::f32, DType::f16, DType::i8, DType::u32, DType::i64})
    for (const auto& [name, f] : ops) {
      INFO(name << " on " << dtype_name(t));
      // The comparison's own result, so lanes where a == b tell lt from le.
      Kernel k = elementwise_kernel(t, t, 16, [&](Value a, Value b) {
        return where(f(a, b), full({16}, 1, t), full({16}, 0, t));
      });
      auto [zj, zi] = both(k, special_values(t, 77, 5), special_values(t, 77, 6), t, 16);
      CHECK(same_bits(zj, zi));
    }
}

TEST_CASE("casts between all dtypes match the interpreter", "[codegen][cpu]") {
  const DType all[] = {DType::f32, DType::f16, DType::bf16,   DType::f8e4m3, DType::f8e5m2,
                       DType::i8,  DType::u8,  DType::i16,    DType::u16,    DType::i32,
                       DType::u32, DType::i64, DType::boolean};
  for (DType from : all)
    for (DType to : all) {
      if (from == DType::boolean) continue;  // covered as a destination
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      Kernel k = elementwise_kernel(from, to, 32, [&](Value a, Value) { return a.to(to); });
      auto [zj, zi] = both(k, special_values(from, 99, 7), special_values(from, 99, 8), to, 32);
      CHECK(same_bits(zj, zi));
    }
}

// Widening fp8 is integer lane work in the JIT (lowering.h), not the
// interpreter's decoder: every one of the 256 bytes, subnormals, zeros of
// both signs and NaNs included, must give the interpreter's f32.
TEST_CASE("fp8 widening matches the interpreter for every byte", "[codegen][cpu]") {
  for (DType t : {DType::f8e4m3, DType::f8e5m2}) {
    INFO(dtype_name(t));
    HostBuffer bytes(DType::u8, 256);
    for (int i = 0; i < 256; ++i) bytes.set(i, i);
    Kernel k = elementwise_kernel(DType::u8, DType::f32, 64,
                                  [&](Value a, Value) { return a.bitcast(t).to(DType::f32); });
    auto [zj, zi] = both(k, bytes, HostBuffer(DType::u8, 256), DType::f32, 64);
    CHECK(same_bits(zj, zi));
  }
}

TEST_CASE("bitcasts match the interpreter", "[codegen][cpu]") {
  const std::pair<DType, DType> pairs[] = {{DType::f32, DType::i32},  {DType::i32, DType::f32},
                                           {DType::f16, DType::u16},  {DType::bf16, DType::i16},
                                           {DType::u16, DType::bf16}, {DType::f8e4m3, DType::u8},
                                           {DType::i8, DType::f8e5m2}};
  for (auto [from, to] : pairs) {
    INFO(dtype_name(from) << " -> " << dtype_name(to));
    Kernel k = elementwise_kernel(from, to, 32, [&](Value a, Value) { return a.bitcast(to); });
    auto [zj, zi] = both(k, special_values(from, 64, 9), special_values(from, 64, 10), to, 32);
    CHECK(same_bits(zj, zi));
  }
}

TEST_CASE("unary ops: exact ones bitwise, transcendental ones within tolerance", "[codegen][cpu]") {
  struct U {
    const char* name;
    std::function<Value(Value)> f;
    double atol, rtol;  // 0, 0: bit-exact
  };
  const U ops[] = {
      {"neg", [](Value a) { return -a; }, 0, 0},
      {"abs", [](Value a) { return abs(a); }, 0, 0},
      {"floor", [](Value a) { return floor(a); }, 0, 0},
      {"sqrt", [](Value a) { return sqrt(a); }, 0, 0},
      {"rsqrt", [](Value a) { return rsqrt(a); }, 0, 2.5e-7},
      {"exp", [](Value a) { return exp(a); }, 1e-38, 2.5e-7},
      {"exp2", [](Value a) { return exp2(a); }, 1e-38, 2.5e-7},
      {"log", [](Value a) { return log(a); }, 1e-7, 2.5e-7},
      {"log2", [](Value a) { return log2(a); }, 1e-7, 3e-7},
      {"tanh", [](Value a) { return tanh(a); }, 1e-7, 5e-7},
      {"sigmoid", [](Value a) { return sigmoid(a); }, 1e-7, 5e-7},
      {"erf", [](Value a) { return erf(a); }, 2e-7, 2e-7},
  };
  HostBuffer x = HostBuffer::random(DType::f32, 2000, 11, -20, 20);
  for (int64_t i = 0; i < 200; ++i) x.set(i, (i - 100) * 1e-3);  // near zero
  // Around exp's and exp2's overflow and (gradual) underflow edges too.
  const double specials[] = {0.0,    -0.0,  INFINITY, -INFINITY, NAN,    88.0,   -87.0,
                             100.0,  -110,  1e-40,    88.7,      88.8,   -103.9, -104.1,
                             127.99, 128.0, -126.5,   -140.3,    -149.4, -149.6, -150.2};
  for (size_t i = 0; i < std::size(specials); ++i)
    x.set(200 + static_cast<int64_t>(i), specials[i]);
  // The host's vscalefps forms of exp and exp2 and the portable ones; a
  // tile of 24 pads to whole registers, a tile of 1 is a scalar.
  const std::pair<const char*, CpuJit*> jits[] = {{"host", &jit()}, {"portable", &portable_jit()}};
  for (const U& u : ops)
    for (auto [jit_name, with] : jits)
      for (int64_t block : {64, 24, 1}) {
        INFO(u.name << ", " << jit_name << ", tile " << block);
        Kernel k = elementwise_kernel(DType::f32, DType::f32, block,
                                      [&](Value a, Value) { return u.f(a); });
        auto [zj, zi] = both(k, x, x, DType::f32, block, *with);
        if (u.atol == 0 && u.rtol == 0) {
          CHECK(same_bits(zj, zi));
        } else {
          std::vector<double> ref(zi.size());
          for (int64_t i = 0; i < zi.size(); ++i) ref[i] = zi.get(i);
          CHECK(kiln::test::worst_error(zj, ref, u.atol, u.rtol) <= 1.0);
        }
      }
}

TEST_CASE("loads and stores: contiguous, strided, gathered, masked, 2-D", "[codegen][cpu]") {
  // y[r, c] = x[perm] with three access patterns selected by MODE.
  for (int mode = 0; mode < 5; ++mode) {
    INFO("mode " << mode);
    Spec s{"mem", {}, {}};
    KernelBuilder k("mem", s);
    auto x = k.buffer("x", DType::f16), y = k.buffer("y", DType::f16);
    auto n = k.scalar("n", DType::i32);
    const int R = 4, C = 16;
    auto rows = expand_dims(k.program_id(0) * R + arange(R), 1);
    auto cols = arange(C);
    Value off;
    if (mode == 0) off = rows * n + cols;            // contiguous rows, runtime row stride
    if (mode == 1) off = rows * n + cols * 2;        // strided: gather
    if (mode == 2) off = rows * n + (C - 1 - cols);  // reversed: gather
    if (mode == 3) off = (rows * n + cols) ^ 1;      // swizzled: gather
    if (mode == 4) off = rows * n + cols;            // whole rows on or off
    auto m = (rows < n) & (mode == 4 ? cols < C : cols < n / 2);
    store(y + rows * n + cols, load(x + off, m, -1.0), m);
    Kernel kern = k.finish();
    const int64_t nn = 30;  // rows of 30, only half of each row is in range
    HostBuffer xs = HostBuffer::random(DType::f16, nn * nn, 12);
    HostBuffer yj(DType::f16, nn * nn), yp(DType::f16, nn * nn), yi(DType::f16, nn * nn);
    Grid g{(nn + R - 1) / R, 1, 1};
    run_jit(kern, {xs.arg(), yj.arg(), Arg::scalar_int(nn)}, g);
    run_jit(kern, {xs.arg(), yp.arg(), Arg::scalar_int(nn)}, g, portable_jit());
    interpret(kern, {xs.arg(), yi.arg(), Arg::scalar_int(nn)}, g);
    CHECK(same_bits(yj, yi));
    CHECK(same_bits(yp, yi));
  }
}

TEST_CASE("prefetches change no result, even past the buffer, and emit prefetch instructions",
          "[codegen][cpu]") {
  Spec s{"pf", {}, {}};
  KernelBuilder k("pf", s);
  auto x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto off = k.program_id(0) * 16 + arange(16);
  auto m = off < n;
  prefetch(x + (off * 16 + (1 << 24)));                         // affine, far past the end
  prefetch(y + (off * off).to(DType::i64) * int64_t{1 << 20});  // per lane, past the end
  store(y + off, load(x + off, m, 0.0) * 2.0f, m);
  Kernel kern = k.finish();
  const int64_t nn = 40;
  HostBuffer xs = HostBuffer::random(DType::f32, nn, 5);
  HostBuffer yj(DType::f32, nn), yi(DType::f32, nn);
  Grid g{3, 1, 1};
  run_jit(kern, {xs.arg(), yj.arg(), Arg::scalar_int(nn)}, g);
  interpret(kern, {xs.arg(), yi.arg(), Arg::scalar_int(nn)}, g);
  CHECK(same_bits(yj, yi));
  // Into L2 (locality 2): x86 prefetcht1, AArch64 prfm pldl2keep.
  CHECK_THAT(cpu_assembly(kern, named_cpu_target("x86-64-v4")), Catch::Contains("prefetcht1"));
  CHECK_THAT(cpu_assembly(kern, named_cpu_target("aarch64")), Catch::Contains("pldl2keep"));
}

TEST_CASE("reductions, argmax and dot match the interpreter", "[codegen][cpu]") {
  for (int axis = 0; axis < 2; ++axis)
    for (DType t : {DType::f32, DType::f16, DType::i32, DType::u8}) {
      INFO("axis " << axis << " " << dtype_name(t));
      Spec s{"red", {}, {}};
      KernelBuilder k("red", s);
      auto x = k.buffer("x", t), o = k.buffer("o", t), am = k.buffer("am", DType::i32);
      auto tile = load(x + expand_dims(arange(8), 1) * 16 + arange(16));
      int out = axis == 0 ? 16 : 8;
      auto i = arange(out);
      store(o + i, is_float(t) ? sum(tile, axis) : maximum(max(tile, axis), min(tile, axis)));
      store(am + i, argmax(tile, axis));
      if (is_float(t)) store(o + (out + arange(1)), expand_dims(max(tile), 0));
      Kernel kern = k.finish();
      HostBuffer xs = HostBuffer::random(t, 128, 13, is_float(t) ? -4 : 0, is_float(t) ? 4 : 3);
      HostBuffer oj(t, 17), oi(t, 17), aj(DType::i32, 16), ai(DType::i32, 16);
      run_jit(kern, {xs.arg(), oj.arg(), aj.arg()}, {1, 1, 1});
      interpret(kern, {xs.arg(), oi.arg(), ai.arg()}, {1, 1, 1});
      CHECK(same_bits(aj, ai));  // ties broken toward the first index in both
      std::vector<double> ref(17);
      for (int j = 0; j < 17; ++j) ref[j] = oi.get(j);
      CHECK(kiln::test::worst_error(oj, ref, 1e-6, t == DType::f16 ? 1e-3 : 1e-6) <= 1.0);
    }
  for (bool int8 : {false, true}) {
    INFO("dot int8=" << int8);
    Spec s{"dot", {}, {}};
    KernelBuilder k("dot", s);
    DType ta = int8 ? DType::u8 : DType::bf16, tb = int8 ? DType::i8 : DType::bf16;
    DType tc = int8 ? DType::i32 : DType::f32;
    auto a = k.buffer("a", ta), b = k.buffer("b", tb), c = k.buffer("c", tc);
    auto A = load(a + expand_dims(arange(4), 1) * 8 + arange(8));
    auto B = load(b + expand_dims(arange(8), 1) * 6 + arange(6));
    auto off = expand_dims(arange(4), 1) * 6 + arange(6);
    store(c + off, dot(A, B, load(c + off)));
    Kernel kern = k.finish();
    HostBuffer as = HostBuffer::random(ta, 32, 14, int8 ? 0 : -2, int8 ? 255 : 2);
    HostBuffer bs = HostBuffer::random(tb, 48, 15, int8 ? -128 : -2, int8 ? 127 : 2);
    HostBuffer cj = HostBuffer::random(tc, 24, 16, -100, 100), ci = cj;
    run_jit(kern, {as.arg(), bs.arg(), cj.arg()}, {1, 1, 1});
    interpret(kern, {as.arg(), bs.arg(), ci.arg()}, {1, 1, 1});
    std::vector<double> ref(24);
    for (int j = 0; j < 24; ++j) ref[j] = ci.get(j);
    CHECK(kiln::test::worst_error(cj, ref, int8 ? 0.5 : 1e-5, int8 ? 0 : 1e-6) <= 1.0);
  }
}

TEST_CASE("dot_groups (vpdpbusd, and the portable form) are exact", "[codegen][cpu]") {
  // Groups of 4 of zext(u8) or sext(i8) times sext(i8): vpdpbusd for u8
  // where the host has VNNI and the size fits, the widening i16 form
  // otherwise and on the portable path; written directly or recognised in
  // sum(reshape(widened products, [.., 4])); with an accumulator, into it.
  // Extremes included: 255 * -128 summed 4 times must not saturate.
  for (DType ta : {DType::u8, DType::i8})
    for (bool written : {true, false})
      for (int64_t rows : {1, 8})
        for (int64_t n : {8, 16, 32, 48, 64, 128}) {
          INFO(dtype_name(ta) << (written ? " written" : " recognised") << " rows " << rows << " n "
                              << n);
          Spec s{"g8", {}, {}};
          KernelBuilder k("g8", s);
          auto a = k.buffer("a", ta), b = k.buffer("b", DType::i8), c = k.buffer("c", DType::i32);
          auto off = expand_dims(arange(rows), 1) * static_cast<int>(n) + arange(n);
          auto va = load(a + off), vb = load(b + off);
          auto lanes = written
                           ? dot_groups(va, vb)
                           : sum(reshape(va.to(DType::i32) * vb.to(DType::i32), {rows, n / 4, 4}),
                                 2);  // [rows, n/4]
          auto out = expand_dims(arange(rows), 1) * static_cast<int>(n / 4) + arange(n / 4);
          store(c + out, load(c + out) + lanes);
          Kernel kern = k.finish();
          HostBuffer as = HostBuffer::random(ta, rows * n, 21, ta == DType::u8 ? 0 : -128,
                                             ta == DType::u8 ? 255 : 127);
          HostBuffer bs = HostBuffer::random(DType::i8, rows * n, 22, -128, 127);
          for (int64_t j = 0; j < 4; ++j) as.set(j, ta == DType::u8 ? 255 : -128), bs.set(j, -128);
          HostBuffer ci = HostBuffer::random(DType::i32, rows * n / 4, 23, -1000, 1000), cj = ci,
                     cp = ci;
          interpret(kern, {as.arg(), bs.arg(), ci.arg()}, {1, 1, 1});
          run_jit(kern, {as.arg(), bs.arg(), cj.arg()}, {1, 1, 1});
          run_jit(kern, {as.arg(), bs.arg(), cp.arg()}, {1, 1, 1}, portable_jit());
          CHECK(same_bits(cj, ci));
          CHECK(same_bits(cp, ci));
        }
}

TEST_CASE("byte dots of codes below 128 are exact pmaddubsw without VNNI", "[codegen][cpu]") {
  // pmaddubsw sums u8 x i8 pairs into i16 with saturation: exact only when
  // the u8 operand is known to stay below 128 (here masked to 7 bits), so a
  // full byte keeps the widening form. Extremes: 127 * -128 in both lanes
  // of a pair, and 255 * -128 where unmasked.
  for (bool masked : {true, false}) {
    INFO((masked ? "codes masked to 7 bits" : "full bytes"));
    Spec s{"mb", {}, {}};
    KernelBuilder k("mb", s);
    auto a = k.buffer("a", DType::u8), b = k.buffer("b", DType::i8), c = k.buffer("c", DType::i32);
    auto va = load(a + arange(64));
    if (masked) va = va & full({64}, 0x7F, DType::u8);
    store(c + arange(16), load(c + arange(16)) + dot_groups(va, load(b + arange(64))));
    Kernel kern = k.finish();
    HostBuffer as = HostBuffer::random(DType::u8, 64, 41, 0, 255);
    HostBuffer bs = HostBuffer::random(DType::i8, 64, 42, -128, 127);
    for (int64_t j = 0; j < 8; ++j) as.set(j, 255), bs.set(j, -128);
    HostBuffer ci = HostBuffer::random(DType::i32, 16, 43, -1000, 1000), cj = ci;
    interpret(kern, {as.arg(), bs.arg(), ci.arg()}, {1, 1, 1});
    run_jit(kern, {as.arg(), bs.arg(), cj.arg()}, {1, 1, 1});
    CHECK(same_bits(cj, ci));
    const std::string v3 = cpu_assembly(kern, named_cpu_target("x86-64-v3"));
    CHECK(line_with(v3, "vpmaddubsw", "ymm") == masked);
  }
}

TEST_CASE("sums of byte dots chained into one accumulator stay exact", "[codegen][cpu]") {
  // c + (dot_a + (x + dot_b)) lowers to dots accumulating into c in turn;
  // a dot with a second use (stored too) must still be computed on its own.
  for (bool reused : {false, true}) {
    INFO((reused ? "dot_a also stored" : "single-use dots"));
    Spec s{"chain", {}, {}};
    KernelBuilder k("chain", s);
    auto a = k.buffer("a", DType::u8), b = k.buffer("b", DType::i8);
    auto c = k.buffer("c", DType::i32), e = k.buffer("e", DType::i32);
    auto off = arange(64);
    auto va = load(a + off), vb = load(b + off);
    auto vb2 = load(b + (off + 64));
    auto dot_a = dot_groups(va, vb), dot_b = dot_groups(va, vb2);
    auto x = load(e + arange(16));
    store(c + arange(16), load(c + arange(16)) + (dot_a + (x + dot_b)));
    if (reused) store(e + (arange(16) + 16), dot_a);
    Kernel kern = k.finish();
    HostBuffer as = HostBuffer::random(DType::u8, 64, 31, 0, 255);
    HostBuffer bs = HostBuffer::random(DType::i8, 128, 32, -128, 127);
    HostBuffer ci = HostBuffer::random(DType::i32, 16, 33, -100000, 100000), cj = ci;
    HostBuffer ei = HostBuffer::random(DType::i32, 32, 34, -100000, 100000), ej = ei;
    interpret(kern, {as.arg(), bs.arg(), ci.arg(), ei.arg()}, {1, 1, 1});
    run_jit(kern, {as.arg(), bs.arg(), cj.arg(), ej.arg()}, {1, 1, 1});
    CHECK(same_bits(cj, ci));
    CHECK(same_bits(ej, ei));
  }
}

TEST_CASE("i16 dot_groups (vpdpwssd, and the portable form) are exact", "[codegen][cpu]") {
  // Pairs of i16 products summed into i32: vpdpwssd where the host has VNNI
  // (128-, 256- and 512-bit tiles, and several), the vpmaddwd form on the
  // portable path; into an accumulator. (-2^15)^2 * 2 = 2^31 wraps to -2^31
  // as the op says. The reference is computed here, not by the interpreter.
  for (int64_t rows : {1, 4})
    for (int64_t n : {8, 16, 32, 64, 96}) {
      INFO("rows " << rows << " n " << n);
      Spec s{"g16", {}, {}};
      KernelBuilder k("g16", s);
      auto a = k.buffer("a", DType::i16), b = k.buffer("b", DType::i16);
      auto c = k.buffer("c", DType::i32);
      auto off = expand_dims(arange(rows), 1) * static_cast<int>(n) + arange(n);
      auto out = expand_dims(arange(rows), 1) * static_cast<int>(n / 2) + arange(n / 2);
      store(c + out, load(c + out) + dot_groups(load(a + off), load(b + off)));
      Kernel kern = k.finish();
      HostBuffer as = HostBuffer::random(DType::i16, rows * n, 41, -32768, 32767);
      HostBuffer bs = HostBuffer::random(DType::i16, rows * n, 42, -32768, 32767);
      for (int64_t j = 0; j < 2; ++j) as.set(j, -32768), bs.set(j, -32768);
      as.set(2, 32767), bs.set(2, -32768), as.set(3, -32768), bs.set(3, -32768);
      HostBuffer ci = HostBuffer::random(DType::i32, rows * n / 2, 43, -1000, 1000);
      ci.set(0, 0);
      HostBuffer cj = ci, cp = ci;
      std::vector<double> ref(static_cast<size_t>(rows * n / 2));
      for (size_t g = 0; g < ref.size(); ++g) {
        int64_t sum = static_cast<int64_t>(ci.get(static_cast<int64_t>(g)));
        for (int64_t i = 0; i < 2; ++i) {
          const int64_t e = 2 * static_cast<int64_t>(g) + i;
          sum += static_cast<int64_t>(as.get(e)) * static_cast<int64_t>(bs.get(e));
        }
        ref[g] = static_cast<int32_t>(static_cast<uint32_t>(sum));
      }
      CHECK(ref[0] == -2147483648.0);
      interpret(kern, {as.arg(), bs.arg(), ci.arg()}, {1, 1, 1});
      run_jit(kern, {as.arg(), bs.arg(), cj.arg()}, {1, 1, 1});
      run_jit(kern, {as.arg(), bs.arg(), cp.arg()}, {1, 1, 1}, portable_jit());
      for (size_t g = 0; g < ref.size(); ++g) {
        INFO("group " << g);
        const auto e = static_cast<int64_t>(g);
        CHECK(ci.get(e) == ref[g]);
        CHECK(cj.get(e) == ref[g]);
        CHECK(cp.get(e) == ref[g]);
      }
    }
}

TEST_CASE("a chain of i16 dot_groups into one sum stays vpdpwssd", "[codegen][cpu]") {
  // Kernels chain them on purpose (qgemv_rows16's Q2_K scales): split into
  // vpmaddwd + vpaddd, as LLVM's machine combiner does to shorten the
  // chain unless the target says the instruction is fast, each costs a
  // second uop. Without VNNI there is no vpdpwssd to keep.
  Spec s{"chain16", {}, {}};
  KernelBuilder k("chain16", s);
  auto a = k.buffer("a", DType::i16), b = k.buffer("b", DType::i16);
  auto c = k.buffer("c", DType::i32);
  auto n = k.scalar("n", DType::i32);
  auto sum = k.var(zeros(DType::i32, {16}));
  k.for_(0, n, 1, [&](Value i) {
    auto base = i.to(DType::i64) * 256;
    for (int64_t j = 0; j < 8; ++j) {
      auto off = base + static_cast<int>(32 * j) + arange(32).to(DType::i64);
      sum = Value(sum) + dot_groups(load(a + off), load(b + off));
    }
  });
  store(c + arange(16), Value(sum));
  const CpuTarget host = host_cpu_target();
  std::string text = cpu_assembly(k.finish(), host);
  if (cpu_profile(host).x86_vnni) {
    CHECK(line_with(text, "vpdpwssd", "zmm"));
    CHECK_THAT(text, !Catch::Contains("vpmaddwd"));
  } else {
    CHECK_THAT(text, !Catch::Contains("vpdpwssd"));
  }
}

TEST_CASE("byte lookups match the interpreter with each byte shuffle", "[codegen][cpu]") {
  // Every byte value as an index (16 and up, 128 and up, negative i8 ones
  // all read 0), over tiles that are one shuffle, several of mixed widths,
  // or not a whole number of 16-byte lanes; a full 16-entry table and a
  // short one (zero-padded in the register).
  const std::vector<int64_t> short_table = {5, -6, 7};
  for (const auto& [name, with] : byte_lookup_jits())
    for (DType index : {DType::u8, DType::i8})
      for (int64_t block : {8, 24, 48, 64, 128, 256})
        for (const auto* table : {&kIq4nl, &short_table}) {
          INFO(name << ", " << dtype_name(index) << " indices, block " << block << ", "
                    << table->size() << " entries");
          Kernel k = lookup_kernel(*table, index, DType::i8, block);
          int64_t n = (256 + block - 1) / block * block;
          HostBuffer x(index, n);
          for (int64_t i = 0; i < n; ++i) x.set(i, static_cast<double>((i * 37 + 11) % 256));
          CHECK(lookup_matches(k, x, DType::i8, block, *with));
        }
}

TEST_CASE("byte lookups of a masked field or a byte's high bits match the interpreter",
          "[codegen][cpu]") {
  // table[x & m] and table[x >> s] over every u8 x, tables of the field's
  // size and shorter (a field value past the table reads 0): with VBMI the
  // lowering drops the mask (vpermb reads 6 bits of a repeating table) and
  // shifts 16-bit words, the neighbour byte's bits left in. Blocks of 64
  // and 128 take that path, 48 the pshufb one.
  std::mt19937_64 rng(7);
  struct Field {
    const char* name;
    int64_t values;
    std::function<Value(const Value&)> of;
  };
  const std::vector<Field> fields = {
      {"x & 15", 16, [](const Value& x) { return x & 15; }},
      {"x & 7", 8, [](const Value& x) { return x & 7; }},
      {"x & 3", 4, [](const Value& x) { return x & 3; }},
      {"x >> 4", 16, [](const Value& x) { return x >> 4; }},
      {"x >> 5", 8, [](const Value& x) { return x >> 5; }},
      {"x >> 6", 4, [](const Value& x) { return x >> 6; }},
      {"x >> 1", 128, [](const Value& x) { return x >> 1; }},
  };
  for (const Field& f : fields)
    for (int64_t size : {std::min<int64_t>(f.values, 16), std::min<int64_t>(f.values, 16) - 3})
      for (int64_t block : {64, 128, 48}) {
        std::vector<int64_t> table(static_cast<size_t>(size));
        for (int64_t& e : table) e = static_cast<int64_t>(static_cast<int8_t>(rng()));
        Spec s{"lut_field", {}, {}};
        KernelBuilder k("lut_field", s);
        auto x = k.buffer("x", DType::u8), y = k.buffer("y", DType::i8);
        auto offs = k.program_id(0) * static_cast<int>(block) + arange(block);
        store(y + offs, lookup(table, DType::i8, f.of(load(x + offs))));
        Kernel kern = k.finish();
        const int64_t n = (256 + block - 1) / block * block;
        HostBuffer xs(DType::u8, n);
        for (int64_t i = 0; i < n; ++i) xs.set(i, static_cast<double>((i * 37 + 11) % 256));
        for (const auto& [name, with] : byte_lookup_jits()) {
          INFO(f.name << ", " << size << " entries, block " << block << ", " << name);
          CHECK(lookup_matches(kern, xs, DType::i8, block, *with));
        }
        // On a VBMI host both nibbles are looked up by vpermb alone.
        if (block == 64 && f.values == 16 && cpu_profile(host_cpu_target()).x86_vbmi) {
          std::string text = cpu_assembly(kern, host_cpu_target());
          CHECK(line_with(text, "vpermb", "zmm"));
          CHECK_THAT(text, !Catch::Contains("vpshufb") && !Catch::Contains("vpand"));
        }
      }
}

// The host, then as an AVX2 core (8-entry vpermd, no vpermi2w) and with no
// register tables at all (the constant-array path).
std::vector<std::pair<std::string, CpuJit*>> table_lookup_jits() {
  static CpuJit avx2([] {
    CpuProfile p = cpu_profile(host_cpu_target());
    p.x86_permd_entries = std::min(p.x86_permd_entries, 8);
    p.x86_permw = false;
    return p;
  }());
  static CpuJit none([] {
    CpuProfile p = cpu_profile(host_cpu_target());
    p.x86_permd_entries = 0;
    p.x86_permw = false;
    return p;
  }());
  return {{"host", &jit()}, {"vpermd of 8", &avx2}, {"no register tables", &none}};
}

TEST_CASE("lookups of a masked field match the interpreter", "[codegen][cpu]") {
  // table[x & m] with m + 1 = 16, 8 or 4 and tables of m + 1 entries or
  // fewer (a masked value past the table reads 0): the lowering drops the
  // mask for a register table that repeats (AURA's packed codes).
  std::mt19937_64 rng(5);
  for (int64_t m : {15, 7, 3})
    for (int64_t size : {m + 1, m - 1}) {
      std::vector<int64_t> table(static_cast<size_t>(size));
      for (int64_t& e : table) e = static_cast<int64_t>(static_cast<int32_t>(rng()));
      Spec s{"lut_masked", {}, {}};
      KernelBuilder k("lut_masked", s);
      auto x = k.buffer("x", DType::u32), y = k.buffer("y", DType::i32);
      auto offs = k.program_id(0) * 48 + arange(48);
      auto field = (load(x + offs) >> 4u) & static_cast<uint32_t>(m);
      store(y + offs, lookup(table, DType::i32, field.to(DType::i32)));
      Kernel kern = k.finish();
      HostBuffer xs(DType::u32, 96);
      for (int64_t i = 0; i < 96; ++i) xs.set(i, static_cast<double>(rng() >> 32));
      for (const auto& [name, with] : table_lookup_jits()) {
        INFO("mask " << m << ", " << size << " entries, " << name);
        CHECK(lookup_matches(kern, xs, DType::i32, 48, *with));
      }
    }
}

TEST_CASE("wide and large lookups read a constant table exactly", "[codegen][cpu]") {
  // The IQ2/IQ3 grid shapes: 256 64-bit entries (bit patterns, the top bit
  // set in some) by u8 and by i32 codes, 512 u32 entries by i32 codes; a
  // 32-entry byte table (too large for a shuffle), u16 entries by i64
  // indices. Indices run past both ends of each table.
  std::mt19937_64 rng(99);
  std::vector<int64_t> grid(256), grid32(512), bytes(32), halves(40);
  for (int64_t& e : grid) e = static_cast<int64_t>(rng());
  grid[7] = std::numeric_limits<int64_t>::min();
  for (int64_t& e : grid32) e = static_cast<int64_t>(rng() >> 32);
  for (int64_t& e : bytes) e = static_cast<int64_t>(rng() % 256) - 128;
  for (int64_t& e : halves) e = static_cast<int64_t>(rng() % 65536);
  std::vector<int64_t> dwords16(16), dwords8(8), dwords100(100), dwords256(256), words256(256),
      words70(70);
  // Entries that fit both i32 and u32, and a signed table for i32 only.
  for (auto* t : {&dwords16, &dwords8, &dwords256})
    for (int64_t& e : *t) e = static_cast<int64_t>(rng() >> 33);
  for (int64_t& e : dwords100) e = static_cast<int64_t>(static_cast<int32_t>(rng()));
  for (int64_t& e : words256) e = static_cast<int64_t>(rng() % 65536);
  for (int64_t& e : words70) e = static_cast<int64_t>(rng() % 65536) - 32768;
  struct Case {
    const std::vector<int64_t>* table;
    DType index, out;
    int64_t block;
  };
  const Case cases[] = {{&grid, DType::u8, DType::i64, 64},
                        {&grid, DType::i32, DType::i64, 64},
                        {&grid32, DType::i32, DType::u32, 128},
                        {&grid32, DType::i32, DType::u32, 5},
                        {&bytes, DType::u8, DType::i8, 64},
                        {&halves, DType::i64, DType::u16, 32},
                        // Register tables (AURA's codebooks): 32-bit entries by 32-bit codes
                        // in one vpermd (16, 8) or a vpermi2d select tree (100, 256), 16-bit
                        // entries in a vpermi2w tree (70, 256), tiles off the register width.
                        {&dwords16, DType::i32, DType::i32, 16},
                        {&dwords16, DType::i32, DType::u32, 40},
                        {&dwords8, DType::u32, DType::i32, 24},
                        {&dwords100, DType::i32, DType::i32, 64},
                        {&dwords256, DType::i32, DType::u32, 48},
                        {&words256, DType::i32, DType::u16, 32},
                        {&words256, DType::i32, DType::u16, 16},
                        {&words70, DType::u32, DType::i16, 80},
                        // 16-bit entries by bytes (AURA's 8-bit codes): two byte tables
                        // with VBMI, 64 and 128 at a time; a table of 70 reads 0 past it.
                        {&words256, DType::u8, DType::u16, 64},
                        {&words256, DType::u8, DType::u16, 128},
                        {&words70, DType::u8, DType::i16, 64}};
  for (const Case& c : cases) {
    INFO(c.table->size() << " " << dtype_name(c.out) << " entries by " << dtype_name(c.index)
                         << ", block " << c.block);
    Kernel k = lookup_kernel(*c.table, c.index, c.out, c.block);
    int64_t size = static_cast<int64_t>(c.table->size());
    int64_t n = (size + 64 + c.block - 1) / c.block * c.block;
    HostBuffer x(c.index, n);
    for (int64_t i = 0; i < n; ++i)
      x.set(i, c.index == DType::u8 ? static_cast<double>(i % 256)
                                    : static_cast<double>((i * 7919) % (size + 64) - 32));
    for (const auto& [name, with] : table_lookup_jits()) {
      INFO(name);
      CHECK(lookup_matches(k, x, c.out, c.block, *with));
    }
    CHECK(lookup_matches(k, x, c.out, c.block, portable_jit()));
  }
  // A scalar index: one load from the table.
  Spec s{"lut1", {}, {}};
  KernelBuilder b("lut1", s);
  auto x = b.buffer("x", DType::i32), y = b.buffer("y", DType::u32);
  auto at = b.program_id(0);
  store(y + at, lookup(grid32, DType::u32, load(x + at)));
  Kernel k = b.finish();
  const double codes[] = {0, 511, 512, -1};
  HostBuffer xs(DType::i32, 4);
  for (int i = 0; i < 4; ++i) xs.set(i, codes[i]);
  CHECK(lookup_matches(k, xs, DType::u32, 1));
}

TEST_CASE("lookups are vpshufb, tbl or a clamped gather in each target's assembly",
          "[codegen][cpu]") {
  Kernel bytes = lookup_kernel(kIq4nl, DType::u8, DType::i8, 128);
  std::string v4 = cpu_assembly(bytes, named_cpu_target("x86-64-v4"));
  CHECK(line_with(v4, "vpshufb", "zmm"));
  CHECK(line_with(v4, "vpaddusb", "zmm"));
  CHECK(line_with(cpu_assembly(bytes, named_cpu_target("x86-64-v3")), "vpshufb", "ymm"));
  CHECK_THAT(cpu_assembly(bytes, named_cpu_target("aarch64")), Catch::Contains("tbl\tv"));
  std::vector<int64_t> grid(256);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<int64_t>(i * 0x0101010101010101);
  Kernel wide = lookup_kernel(grid, DType::i32, DType::i64, 64);
  CHECK_THAT(cpu_assembly(wide, named_cpu_target("x86-64-v4")), Catch::Contains("vpgatherdq"));
  CHECK(line_with(cpu_assembly(wide, named_cpu_target("aarch64")), "umin", ".4s"));
  // 16-bit entries by bytes: byte permutes of two registers on a VBMI host.
  if (cpu_profile(host_cpu_target()).x86_vbmi) {
    std::vector<int64_t> words(256, 0x1234);
    Kernel halves = lookup_kernel(words, DType::u8, DType::u16, 64);
    std::string text = cpu_assembly(halves, host_cpu_target());
    CHECK((line_with(text, "vpermi2b", "zmm") || line_with(text, "vpermt2b", "zmm")));
  }
}

TEST_CASE("control flow, variables, atomics and grids match the interpreter", "[codegen][cpu]") {
  Spec s{"ctl", {}, {}};
  KernelBuilder k("ctl", s);
  auto out = k.buffer("out", DType::i32), hist = k.buffer("hist", DType::i32);
  auto n = k.scalar("n", DType::i32), step = k.scalar("step", DType::i32);
  auto pid = k.program_id(0) + k.program_id(1) * k.num_programs(0) +
             k.program_id(2) * k.num_programs(0) * k.num_programs(1);
  auto acc = k.var(zeros(DType::i32, {4}));
  k.for_(0, n, step,
         [&](Value i) { k.if_((i % 3) == 0, [&] { acc = acc + i; }, [&] { acc = acc - 1; }); });
  store(out + pid * 4 + arange(4), acc + pid);
  atomic_add(hist + (pid % 5), k.program_id(2) + 1);
  Kernel kern = k.finish();
  for (int st : {1, 2, 7, 0, -3}) {
    INFO("step " << st);
    HostBuffer oj(DType::i32, 4 * 24), oi(DType::i32, 4 * 24), hj(DType::i32, 5), hi(DType::i32, 5);
    Grid g{2, 3, 4};
    run_jit(kern, {oj.arg(), hj.arg(), Arg::scalar_int(40), Arg::scalar_int(st)}, g);
    interpret(kern, {oi.arg(), hi.arg(), Arg::scalar_int(40), Arg::scalar_int(st)}, g);
    CHECK(same_bits(oj, oi));
    CHECK(same_bits(hj, hi));
  }
}

TEST_CASE("scratch arrays are per program and match the interpreter bit for bit",
          "[codegen][cpu][scratch]") {
  Kernel kern = kiln::test::scratch_kernel();
  const int64_t N = kiln::test::kScratchTile, programs = 7;
  HostBuffer x = HostBuffer::random(DType::f32, N * programs, 5);
  for (int64_t n : {int64_t{0}, int64_t{29}, N}) {
    INFO("n = " << n);
    HostBuffer oj(DType::f32, N * programs), oi(DType::f32, N * programs);
    // Two threads run programs at once, each with its own array.
    run_jit(kern, {x.arg(), oj.arg(), Arg::scalar_int(n)}, {programs, 1, 1});
    interpret(kern, {x.arg(), oi.arg(), Arg::scalar_int(n)}, {programs, 1, 1});
    CHECK(same_bits(oj, oi));
  }
}

// The JIT steps 32-bit counters in 64 bits: a loop whose last step would
// pass INT32_MAX must still stop there, as the interpreter's does.
TEST_CASE("loops that end at the counter's limit stop there", "[codegen][cpu]") {
  Spec s{"limit", {}, {}};
  KernelBuilder k("limit", s);
  auto out = k.buffer("out", DType::i32);
  auto lo = k.scalar("lo", DType::i32), hi = k.scalar("hi", DType::i32),
       step = k.scalar("step", DType::i32);
  auto count = k.var(zeros(DType::i32, {1})), last = k.var(zeros(DType::i32, {1}));
  k.for_(lo, hi, step, [&](Value i) {
    count = count + 1;
    last = broadcast_to(i - lo, {1});
  });
  store(out + arange(1), count);
  store(out + (arange(1) + 1), last);
  Kernel kern = k.finish();
  const int32_t top = std::numeric_limits<int32_t>::max();
  struct Case {
    int32_t lo, hi, step, count, last;
  };
  for (Case c :
       {Case{top - 10, top, 3, 4, 9}, Case{top - 10, top, 7, 2, 7}, Case{top - 1, top, top, 1, 0},
        Case{-top, top, top, 2, top}, Case{-5, 5, 4, 3, 8}}) {
    INFO("lo " << c.lo << " hi " << c.hi << " step " << c.step);
    HostBuffer oj(DType::i32, 2), oi(DType::i32, 2);
    std::vector<Arg> args{oj.arg(), Arg::scalar_int(c.lo), Arg::scalar_int(c.hi),
                          Arg::scalar_int(c.step)};
    run_jit(kern, args, {1, 1, 1});
    args[0] = oi.arg();
    interpret(kern, args, {1, 1, 1});
    CHECK(same_bits(oj, oi));
    CHECK(oj.get(0) == c.count);
    CHECK(oj.get(1) == c.last);
  }
}

TEST_CASE("the JIT refuses bad launches with a clear error", "[codegen][cpu][error]") {
  Kernel k = elementwise_kernel(DType::f32, DType::f32, 16, [](Value a, Value b) { return a + b; });
  HostBuffer x(DType::f32, 16);
  auto c = jit().compile(k, "bad_launch_kernel");
  REQUIRE_THROWS_WITH(launch_cpu(k, c.fn, {x.arg(), x.arg()}, {1, 1, 1}, pool()),
                      Catch::Contains("kernel 'ew' takes 4 arguments (x, y, z, n), got 2"));
  REQUIRE_THROWS_WITH(
      launch_cpu(k, c.fn, {x.arg(), x.arg(), Arg::scalar_int(1), Arg::scalar_int(1)}, {1, 1, 1},
                 pool()),
      Catch::Contains("argument 2 ('z') must be a buffer"));
}

TEST_CASE("cross targets emit their own instruction sets", "[codegen][cpu]") {
  Kernel k = elementwise_kernel(DType::f32, DType::f32, 64, [](Value a, Value b) { return a * b; });
  CHECK_THAT(cpu_assembly(k, named_cpu_target("x86-64-v4")), Catch::Contains("zmm"));
  CHECK_THAT(cpu_assembly(k, named_cpu_target("x86-64-v3")), Catch::Contains("ymm"));
  std::string arm = cpu_assembly(k, named_cpu_target("aarch64"));
  CHECK_THAT(arm, Catch::Contains("fmul\tv"));
  CHECK_THAT(arm, Catch::Contains(".4s"));
}

TEST_CASE("bitcast views between widths match the interpreter", "[codegen][cpu]") {
  // bytes [8, 4] u8 -> u16 [8, 2] -> f16 -> f32, and i32 [8] -> u8 [32].
  Spec s{"view", {}, {}};
  KernelBuilder k("view", s);
  auto in = k.buffer("in", DType::u8), out = k.buffer("out", DType::f32);
  auto words = k.buffer("words", DType::i32), bytes = k.buffer("bytes", DType::u8);
  auto raw = load(in + (expand_dims(arange(8), 1) * 4 + arange(4)));         // [8,4] u8
  auto halves = raw.bitcast(DType::u16).bitcast(DType::f16).to(DType::f32);  // [8,2]
  store(out + (expand_dims(arange(8), 1) * 2 + arange(2)), halves);
  store(bytes + arange(32), load(words + arange(8)).bitcast(DType::u8));
  REQUIRE_THROWS_WITH(arange(3).bitcast(DType::i64), Catch::Contains("op bitcast"));
  Kernel kern = k.finish();
  HostBuffer inb = HostBuffer::random(DType::u8, 32, 21, 0, 255);
  HostBuffer w = HostBuffer::random(DType::i32, 8, 22, -2e9, 2e9);
  HostBuffer oj(DType::f32, 16), oi(DType::f32, 16), bj(DType::u8, 32), bi(DType::u8, 32);
  run_jit(kern, {inb.arg(), oj.arg(), w.arg(), bj.arg()}, {1, 1, 1});
  interpret(kern, {inb.arg(), oi.arg(), w.arg(), bi.arg()}, {1, 1, 1});
  CHECK(same_bits(oj, oi));
  CHECK(same_bits(bj, bi));
  CHECK(std::memcmp(bj.bytes().data(), w.bytes().data(), 32) == 0);  // little-endian bytes
  uint16_t h0 = static_cast<uint16_t>(inb.get(0)) | static_cast<uint16_t>(inb.get(1)) << 8;
  float expect = f16_bits_to_f32(h0);
  bool same = oi.get(0) == expect || (std::isnan(oi.get(0)) && std::isnan(expect));
  CHECK(same);
}
