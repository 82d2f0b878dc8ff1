// The CUDA lowering op by op: each small kernel's CUDA C, run in the CPU
// simulator, must reproduce the reference interpreter. Exact ops (integer
// arithmetic, casts, data movement, memory) must agree bit for bit; float
// reductions and dot within f32 reassociation error (1e-5 relative);
// transcendentals within the host libm's f32 accuracy (1e-5 relative).
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/error.h"
#include "support/cuda_check.h"
#include "support/ir_helpers.h"
#include "support/scratch_kernel.h"
#include "support/test_data.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// A kernel over one input tile x[R, C] (row-major) producing out; `body`
// gets the loaded tile and returns the value to store (any shape that fits
// `out_n`, stored flat).
Kernel tile_kernel(DType in, DType out, int64_t R, int64_t C, int64_t out_n,
                   const std::function<Value(Value)>& body) {
  KernelBuilder b("tile", spec_for("tile"));
  auto x = b.buffer("x", in), o = b.buffer("o", out);
  auto idx = reshape(arange(R * C), {R, C});
  Value r = body(load(x + idx));
  int64_t n = 1;
  for (int64_t d : r.shape()) n *= d;
  REQUIRE(n == out_n);
  Value flat = r.shape().empty() ? r : reshape(r, {n});
  if (r.shape().empty())
    store(o + program_id(0) * 0, flat);
  else
    store(o + arange(n), flat);
  return b.finish();
}

void check_tile(DType in, DType out, int64_t R, int64_t C, int64_t out_n,
                const std::function<Value(Value)>& body, CudaCheck c = {}, double lo = -2,
                double hi = 2) {
  Kernel k = tile_kernel(in, out, R, C, out_n, body);
  HostBuffer x = HostBuffer::random(in, R * C, 11, lo, hi), o(out, out_n);
  std::vector<Arg> args = {x.arg(), o.arg()};
  CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}, c) == "");
}

}  // namespace

TEST_CASE("cuda: masked elementwise add over a ragged tail", "[cuda][sim]") {
  KernelBuilder b("addk", spec_for("addk"));
  auto x = b.buffer("x", DType::f32), y = b.buffer("y", DType::f32), o = b.buffer("o", DType::f32);
  auto n = b.scalar("n", DType::i32);
  auto off = program_id(0) * 200 + arange(200);
  auto m = off < n;
  store(o + off, load(x + off, m, 0.0) * 3.0 + load(y + off, m, 0.0), m);
  Kernel k = b.finish();
  HostBuffer xs = HostBuffer::random(DType::f32, 450, 1),
             ys = HostBuffer::random(DType::f32, 450, 2);
  HostBuffer os(DType::f32, 450);
  std::vector<Arg> args = {xs.arg(), ys.arg(), os.arg(), Arg::scalar_int(450)};
  CHECK(cuda_vs_interpreter(k, args, {3, 1, 1}) == "");
}

TEST_CASE("cuda: reductions along each axis, to a scalar, with shuffles", "[cuda][sim]") {
  for (DType t : {DType::f32, DType::f16, DType::i32, DType::i8}) {
    INFO(dtype_name(t));
    double lo = is_float(t) ? -2 : -100, hi = is_float(t) ? 2 : 100;
    for (int axis : {0, 1}) {
      int64_t n = axis == 0 ? 37 : 5;
      check_tile(
          t, t, 5, 37, n, [&](Value x) { return sum(x, axis); }, {}, lo, hi);
      check_tile(
          t, t, 5, 37, n, [&](Value x) { return max(x, axis); }, {}, lo, hi);
      check_tile(
          t, t, 5, 37, n, [&](Value x) { return min(x, axis); }, {}, lo, hi);
      check_tile(
          t, DType::i32, 5, 37, n, [&](Value x) { return argmax(x, axis); }, {}, lo, hi);
    }
    check_tile(
        t, t, 7, 300, 1, [&](Value x) { return sum(x); }, {}, lo, hi);
    check_tile(
        t, t, 7, 300, 1, [&](Value x) { return max(x); }, {}, lo, hi);
    check_tile(
        t, DType::i32, 1, 999, 1, [&](Value x) { return argmax(reshape(x, {999}), 0); }, {}, lo,
        hi);
  }
  // Wide rows, few outputs: 32 lanes per row meet by shuffles.
  check_tile(DType::f32, DType::f32, 2, 1000, 2, [](Value x) { return sum(x, 1); });
}

TEST_CASE("cuda: argmax and max skip NaN and take the first of equal values", "[cuda][sim]") {
  KernelBuilder b("nanmax", spec_for("nanmax"));
  auto x = b.buffer("x", DType::f32), o = b.buffer("o", DType::f32),
       oi = b.buffer("oi", DType::i32);
  auto v = load(x + reshape(arange(4 * 8), {4, 8}));
  store(o + arange(4), max(v, 1));
  store(oi + arange(4), argmax(v, 1));
  Kernel k = b.finish();
  HostBuffer xs(DType::f32, 32), os(DType::f32, 4), ois(DType::i32, 4);
  for (int i = 0; i < 32; ++i) xs.set(i, (i * 7) % 5);
  xs.set(3, NAN);                               // a NaN among values
  for (int i = 8; i < 16; ++i) xs.set(i, NAN);  // an all-NaN row
  std::vector<Arg> args = {xs.arg(), os.arg(), ois.arg()};
  CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}) == "");
}

TEST_CASE("cuda: data movement between threads", "[cuda][sim]") {
  check_tile(DType::f32, DType::f32, 12, 40, 480, [](Value x) { return transpose(x); });
  check_tile(
      DType::i32, DType::i32, 12, 40, 5 * 17,
      [](Value x) {
        return slice(x, {3, 20}, {5, 17});
      },
      {}, -1000, 1000);
  check_tile(DType::f32, DType::f32, 1, 40, 9 * 40, [](Value x) {
    return broadcast_to(x, {9, 40});
  });
  check_tile(DType::f32, DType::f32, 9, 1, 9 * 40, [](Value x) {
    return broadcast_to(x, {9, 40});
  });
  // A one-element tile becomes a scalar every thread holds.
  check_tile(DType::f32, DType::f32, 1, 1, 130,
             [](Value x) { return reshape(x, {}) * arange(130).to(DType::f32); });
  // Width-changing bitcast: the bytes of each row, reread.
  check_tile(
      DType::u8, DType::i32, 6, 16, 24, [](Value x) { return x.bitcast(DType::i32); }, {}, 0, 255);
  check_tile(
      DType::i32, DType::u8, 3, 5, 60, [](Value x) { return x.bitcast(DType::u8); }, {}, -2e9, 2e9);
  check_tile(DType::f16, DType::i16, 4, 8, 32, [](Value x) { return x.bitcast(DType::i16); });
}

TEST_CASE("cuda: integer and cast semantics are the IR's, bit for bit", "[cuda][sim]") {
  auto z = [](Value x) { return x * 0; };
  // Division and remainder by zero and by -1, wrapping.
  check_tile(
      DType::i32, DType::i32, 4, 16, 64,
      [&](Value x) { return x / (x % 3 - 1) + x % (z(x) + (x % 2)); }, {}, -3e9, 3e9);
  check_tile(
      DType::u8, DType::u8, 4, 16, 64, [&](Value x) { return x / (x % 3) + (x << x); }, {}, 0, 255);
  check_tile(
      DType::i8, DType::i8, 4, 16, 64, [&](Value x) { return (x >> x) + (x * x) - (-x); }, {}, -128,
      127);
  check_tile(
      DType::i32, DType::i32, 4, 16, 64, [&](Value x) { return (x >> 33) ^ (x << 35); }, {}, -3e9,
      3e9);
  // Saturating float -> int casts, NaN -> 0; int -> narrow float rounding.
  check_tile(DType::f32, DType::i8, 4, 16, 64, [](Value x) { return (x * 100.0).to(DType::i8); });
  check_tile(DType::f32, DType::u16, 4, 16, 64,
             [](Value x) { return (x * 50000.0).to(DType::u16); });
  check_tile(DType::f32, DType::i32, 4, 16, 64,
             [](Value x) { return (sqrt(x) * 3e9).to(DType::i32); });  // NaN for x < 0
  check_tile(
      DType::i32, DType::f16, 4, 16, 64, [](Value x) { return x.to(DType::f16); }, {}, -70000,
      70000);
  check_tile(DType::f32, DType::bf16, 4, 16, 64,
             [](Value x) { return (x.to(DType::bf16) * x.to(DType::bf16)).to(DType::bf16); });
  check_tile(DType::f32, DType::f8e4m3, 4, 16, 64,
             [](Value x) { return (x * 300.0).to(DType::f8e4m3); });
}

TEST_CASE("cuda: transcendentals and selects", "[cuda][sim]") {
  CudaCheck c;
  c.rtol = 1e-5;
  check_tile(
      DType::f32, DType::f32, 4, 32, 128,
      [](Value x) {
        return exp(x) + log(abs(x) + 0.5) + tanh(x) * sigmoid(x) + erf(x) + rsqrt(abs(x) + 1.0) +
               where(x > 0.0, floor(x * 3.0), exp2(x));
      },
      c);
}

TEST_CASE("cuda: dot through FMA, int8 and tensor cores", "[cuda][sim]") {
  auto dot_kernel = [](DType ab, DType acc_t, int64_t M, int64_t K, int64_t N, DType bt) {
    KernelBuilder b("dotk", spec_for("dotk"));
    auto a = b.buffer("a", ab), bb = b.buffer("b", bt), o = b.buffer("o", acc_t);
    auto va = load(a + reshape(arange(M * K), {M, K}));
    auto vb = load(bb + reshape(arange(K * N), {K, N}));
    auto acc = load(o + reshape(arange(M * N), {M, N}));
    store(o + reshape(arange(M * N), {M, N}), dot(va, vb, acc));
    return b.finish();
  };
  struct D {
    DType a, b, acc;
    int64_t M, K, N;
    bool mma;
  };
  for (D d : {D{DType::f32, DType::f32, DType::f32, 5, 7, 9, false},
              D{DType::f16, DType::f16, DType::f32, 32, 32, 16, true},
              D{DType::bf16, DType::bf16, DType::f32, 16, 48, 24, true},
              D{DType::f16, DType::f16, DType::f32, 8, 16, 8, false},  // M < 16: FMA path
              D{DType::i8, DType::i8, DType::i32, 4, 64, 8, false},
              D{DType::u8, DType::i8, DType::i32, 3, 32, 5, false},
              D{DType::i8, DType::i8, DType::i32, 16, 64, 16, true},
              D{DType::u8, DType::i8, DType::i32, 32, 32, 8, true}}) {
    INFO(dtype_name(d.a) << " " << d.M << "x" << d.K << "x" << d.N);
    Kernel k = dot_kernel(d.a, d.acc, d.M, d.K, d.N, d.b);
    bool ints = !is_float(d.a);
    HostBuffer a = HostBuffer::random(d.a, d.M * d.K, 1, ints ? -128 : -1, ints ? 255 : 1);
    HostBuffer b = HostBuffer::random(d.b, d.K * d.N, 2, ints ? -127 : -1, ints ? 127 : 1);
    HostBuffer o = HostBuffer::random(d.acc, d.M * d.N, 3, ints ? -1000 : -1, ints ? 1000 : 1);
    std::vector<Arg> args = {a.arg(), b.arg(), o.arg()};
    CHECK(emit_cuda(k).uses_mma == d.mma);
    CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}) == "");
    if (d.mma) {  // below sm_80 the same dot takes the FMA path
      CudaCheck c;
      c.options.sm = 75;
      CHECK_FALSE(emit_cuda(k, c.options).uses_mma);
      CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}, c) == "");
    }
  }
}

TEST_CASE("cuda: dot_groups through shared memory and dp4a", "[cuda][sim]") {
  for (DType ta : {DType::u8, DType::i8})
    for (int64_t n : {4, 64, 600}) {
      INFO(dtype_name(ta) << " n " << n);
      KernelBuilder b("dg", spec_for("dg"));
      auto a = b.buffer("a", ta), w = b.buffer("b", DType::i8), o = b.buffer("o", DType::i32);
      auto off = reshape(arange(n), {n / 4, 4});
      store(o + arange(n / 4), reshape(dot_groups(load(a + off), load(w + off)), {n / 4}));
      Kernel k = b.finish();
      HostBuffer as =
          HostBuffer::random(ta, n, 1, ta == DType::u8 ? 0 : -128, ta == DType::u8 ? 255 : 127);
      HostBuffer ws = HostBuffer::random(DType::i8, n, 2, -128, 127);
      HostBuffer os(DType::i32, n / 4);
      std::vector<Arg> args = {as.arg(), ws.arg(), os.arg()};
      CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}) == "");
    }
}

TEST_CASE("cuda: i16 dot_groups through shared memory wrap as the op says", "[cuda][sim]") {
  for (int64_t n : {2, 64, 600}) {
    INFO("n " << n);
    KernelBuilder b("dg16", spec_for("dg16"));
    auto a = b.buffer("a", DType::i16), w = b.buffer("b", DType::i16),
         o = b.buffer("o", DType::i32);
    auto off = reshape(arange(n), {n / 2, 2});
    store(o + arange(n / 2), reshape(dot_groups(load(a + off), load(w + off)), {n / 2}));
    Kernel k = b.finish();
    HostBuffer as = HostBuffer::random(DType::i16, n, 3, -32768, 32767);
    HostBuffer ws = HostBuffer::random(DType::i16, n, 4, -32768, 32767);
    as.set(0, -32768), ws.set(0, -32768), as.set(1, -32768), ws.set(1, -32768);  // 2^31
    HostBuffer os(DType::i32, n / 2);
    std::vector<Arg> args = {as.arg(), ws.arg(), os.arg()};
    CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}) == "");
  }
}

TEST_CASE("cuda: lookups read file-scope tables and give 0 outside them", "[cuda][sim]") {
  // IQ4_NL's codebook by every u8 and i8 code (16 and up, 128 and up and
  // negative ones read 0), twice from one table; 256 i64 grid entries and
  // 512 u32 ones by i32 codes running past both ends; a scalar index.
  const std::vector<int64_t> iq4nl = {-127, -104, -83, -65, -49, -35, -22, -10,
                                      1,    13,   25,  38,  53,  69,  89,  113};
  std::vector<int64_t> grid(256), grid32(512);
  for (size_t i = 0; i < grid.size(); ++i)
    grid[i] = static_cast<int64_t>((i + 1) * 0x9e3779b97f4a7c15ull);
  grid[3] = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < grid32.size(); ++i)
    grid32[i] = static_cast<int64_t>(i * 2654435761u % 4294967296u);
  KernelBuilder b("lut", spec_for("lut"));
  auto x = b.buffer("x", DType::u8), sx = b.buffer("sx", DType::i8), w = b.buffer("w", DType::i32);
  auto q = b.buffer("q", DType::i8), sq = b.buffer("sq", DType::i8);
  auto g = b.buffer("g", DType::i64), g32 = b.buffer("g32", DType::u32);
  auto off = arange(256), woff = arange(600);
  store(q + off, lookup(iq4nl, DType::i8, load(x + off)));
  store(sq + off, lookup(iq4nl, DType::i8, load(sx + off)));
  auto codes = load(w + woff);
  store(g + woff, lookup(grid, DType::i64, codes));
  store(g32 + woff, lookup(grid32, DType::u32, codes));
  auto first = full({}, 0, DType::i32);
  store(g32 + (first + 600), lookup(grid32, DType::u32, load(w + first)));
  Kernel k = b.finish();
  HostBuffer xs(DType::u8, 256), sxs(DType::i8, 256), ws(DType::i32, 600);
  for (int i = 0; i < 256; ++i) xs.set(i, i), sxs.set(i, i - 128);
  for (int i = 0; i < 600; ++i) ws.set(i, (i * 131) % 640 - 64);
  HostBuffer qs(DType::i8, 256), sqs(DType::i8, 256), gs(DType::i64, 600), g32s(DType::u32, 601);
  std::vector<Arg> args = {xs.arg(),  sxs.arg(), ws.arg(),  qs.arg(),
                           sqs.arg(), gs.arg(),  g32s.arg()};
  CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}) == "");
  // One array per distinct table, however many lookups read it.
  std::string code = emit_cuda(k).code;
  auto count = [&](const std::string& s) {
    int n = 0;
    for (size_t at = code.find(s); at != std::string::npos; at = code.find(s, at + 1)) ++n;
    return n;
  };
  CHECK(count("static __device__ const signed char kiln_table") == 1);
  CHECK(count("static __device__ const long long kiln_table") == 1);
  CHECK(count("static __device__ const unsigned kiln_table") == 1);
  CHECK(count("(-9223372036854775807LL - 1)") == 1);
}

TEST_CASE("cuda: loops, variables, branches and atomics", "[cuda][sim]") {
  KernelBuilder b("loop", spec_for("loop"));
  auto x = b.buffer("x", DType::f32), o = b.buffer("o", DType::f32);
  auto cnt = b.buffer("cnt", DType::i32), hist = b.buffer("hist", DType::i32);
  auto n = b.scalar("n", DType::i32);
  Var acc = b.var(zeros(DType::f32, {64}));
  Var best = b.var(full({}, -1e30, DType::f32));
  b.for_(0, n, 64, [&](Value i) {
    auto off = i + arange(64);
    auto v = load(x + off, off < n, 0.0);
    acc = acc.get() + v;
    b.if_(max(v) > best.get(), [&] { best = max(v); });
  });
  store(o + arange(64), acc.get());
  store(o + (program_id(0) + 64), best.get());
  // Every program counts itself once (a scalar atomic) and bins its tile.
  atomic_add(cnt + program_id(0) * 0, full({}, 1, DType::i32));
  auto bins = (load(x + arange(64)) * 2.0 + 4.0).to(DType::i32);
  atomic_add(hist + minimum(maximum(bins, 0), 7), full({64}, 1, DType::i32));
  auto m = arange(64) < 8;
  atomic_max(hist + (arange(64) + 8), load(x + arange(64), m, 0.0).to(DType::i32) * 0 + arange(64),
             m);
  Kernel k = b.finish();
  HostBuffer xs = HostBuffer::random(DType::f32, 300, 5), os(DType::f32, 65), cs(DType::i32, 1),
             hs(DType::i32, 16);
  std::vector<Arg> args = {xs.arg(), os.arg(), cs.arg(), hs.arg(), Arg::scalar_int(300)};
  CHECK(cuda_vs_interpreter(k, args, {1, 1, 1}) == "");
}

TEST_CASE("cuda: unsupported ops fail at codegen with the op's name", "[cuda][errors]") {
  KernelBuilder b("f16atomic", spec_for("f16atomic"));
  auto y = b.buffer("y", DType::f16);
  atomic_add(y + arange(32), full({32}, 1.0, DType::f16));
  Kernel k = b.finish();
  CHECK_THROWS_WITH(emit_cuda(k), Catch::Contains("kernel 'f16atomic': op atomic_add on f16 is not "
                                                  "supported by the CUDA lowering"));
  CudaOptions o;
  o.num_warps = 0;
  CHECK_THROWS_WITH(emit_cuda(k, o), Catch::Contains("num_warps 0 is outside 1..32"));
}

TEST_CASE("cuda: the simulator reports out-of-bounds accesses", "[cuda][errors][sim]") {
  KernelBuilder b("oob", spec_for("oob"));
  auto x = b.buffer("x", DType::f32), y = b.buffer("y", DType::f32);
  store(y + arange(16), load(x + (arange(16) + 8)));
  Kernel k = b.finish();
  HostBuffer xs(DType::f32, 20), ys(DType::f32, 16);
  std::vector<Arg> args = {xs.arg(), ys.arg()};
  auto sim = SimulatedKernel::compile(emit_cuda(k));
  CHECK_THROWS_WITH(sim->launch(k, args, {1, 1, 1}),
                    Catch::Contains("read of 4 bytes outside every buffer: buffer 'x' at byte "
                                    "offset 80 (size 80 bytes)"));
}

TEST_CASE("cuda: the simulator finds barriers no thread can pass", "[cuda][errors][sim]") {
  // Hand-written CUDA C: lane 0 of each warp shuffles while the others wait
  // at __syncthreads, a hang on a GPU.
  CudaSource src;
  src.entry = "hang";
  src.threads = 64;
  src.code = R"(#include "kiln_cuda.cuh"
extern "C" __global__ void hang(float* p) {
  if (threadIdx.x % 32 == 0) p[0] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  else __syncthreads();
}
#ifdef KILN_SIM
extern "C" void kiln_sim_thread(void* const* a) { hang(*(float* const*)a[0]); }
#endif
)";
  Kernel k;
  k.name = "hang";
  k.params = {Param{"p", ParamKind::Buffer, DType::f32}};
  HostBuffer p(DType::f32, 1);
  auto sim = SimulatedKernel::compile(src);
  CHECK_THROWS_WITH(sim->launch(k, {p.arg()}, {1, 1, 1}),
                    Catch::Contains("deadlock in block (0,0,0): 62 threads wait at __syncthreads, "
                                    "2 at a warp-wide exchange"));
}

TEST_CASE("cuda: scratch arrays in shared memory, ordered by barriers", "[cuda][sim][scratch]") {
  Kernel k = scratch_kernel();
  const int64_t N = kScratchTile, programs = 3;
  HostBuffer x = HostBuffer::random(DType::f32, N * programs, 9), o(DType::f32, N * programs);
  for (int64_t n : {int64_t{0}, int64_t{29}, N}) {
    INFO("n = " << n);
    std::vector<Arg> args = {x.arg(), o.arg(), Arg::scalar_int(n)};
    CHECK(cuda_vs_interpreter(k, args, {programs, 1, 1}) == "");
  }
}
