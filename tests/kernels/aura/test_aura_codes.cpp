// The DSL's AURA codes (kernels/aura/aura_codes.h) against the scalar
// references, compiled for the CPU and in the interpreter: unpacking and
// packing bit-exact for every width at D = 64, 128, 256 (3-bit codes
// straddling words included, AURA.md pitfalls 5 and 6), the threshold
// search against compare-count (ties to the lower cell), and codebook
// lookups.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "aura_reference.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "kernels/aura/aura_codes.h"
#include "kernels/aura/aura_format.h"
#include "runtime/cpu/cpu_launch.h"
#include "targets/cpu/cpu_jit.h"

using namespace kiln;

namespace {

CpuJit& jit() {
  static CpuJit j;
  return j;
}

void run(const Kernel& k, const std::vector<Arg>& args, Grid grid, bool interpret) {
  if (interpret) return kiln::interpret(k, args, grid);
  static std::atomic<int> counter{0};
  static ThreadPool pool(2);
  auto c = jit().compile(k, "aura_codes_test_" + std::to_string(counter++));
  launch_cpu(k, c.fn, args, grid, pool);
}

// One program per row: words -> codes (stored) -> words again (stored),
// and each code's codebook value.
Kernel roundtrip_kernel(int bits, int64_t D) {
  Spec s{"aura_roundtrip", {}, {}};
  KernelBuilder k("aura_roundtrip", s);
  const int64_t W = packed_words(D, bits);
  auto in = k.buffer("in", DType::u32), codes = k.buffer("codes", DType::i32);
  auto out = k.buffer("out", DType::u32), vals = k.buffer("vals", DType::f32);
  auto row = k.program_id(0).to(DType::i64);
  auto w = reshape(load(in + (row * W + arange(W).to(DType::i64))), {1, W});
  auto c = aura_unpack(w, bits, D);
  auto lanes = row * D + arange(D).to(DType::i64);
  store(codes + lanes, reshape(c, {D}));
  store(vals + lanes, reshape(aura_centroids(c, bits, D), {D}));
  store(out + (row * W + arange(W).to(DType::i64)), reshape(aura_pack(c, bits), {W}));
  return k.finish();
}

Kernel quantize_kernel(int bits, int64_t D) {
  Spec s{"aura_quantize", {}, {}};
  KernelBuilder k("aura_quantize", s);
  auto y = k.buffer("y", DType::f32), codes = k.buffer("codes", DType::i32);
  auto off = k.program_id(0).to(DType::i64) * D + arange(D).to(DType::i64);
  store(codes + off, aura_quantize(load(y + off), bits, D));
  return k.finish();
}

}  // namespace

TEST_CASE("AURA codes unpack and pack bit-exactly for every width", "[kernels][aura]") {
  std::mt19937 rng(5);
  for (int bits : {2, 3, 4, 8})
    for (int64_t D : {64, 128, 256})
      for (bool interpret : {false, true}) {
        INFO(bits << " bits, D=" << D << (interpret ? ", interpreter" : ", compiled"));
        const int64_t rows = 5, W = packed_words(D, bits);
        std::vector<uint32_t> in(static_cast<size_t>(rows * W)), out(in.size(), 0xdeadbeef);
        for (auto& w : in) w = rng();
        std::vector<int32_t> codes(static_cast<size_t>(rows * D), -1);
        std::vector<float> vals(codes.size());
        Kernel k = roundtrip_kernel(bits, D);
        run(k,
            {Arg::buffer(in.data(), in.size()), Arg::buffer(codes.data(), codes.size()),
             Arg::buffer(out.data(), out.size()), Arg::buffer(vals.data(), vals.size())},
            {rows, 1, 1}, interpret);
        const std::vector<float> book = aura_codebook(bits, D);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<int> ref = kiln::test::ref_unpack(in.data() + r * W, D, bits);
          for (int64_t i = 0; i < D; ++i) {
            REQUIRE(codes[r * D + i] == ref[i]);
            REQUIRE(vals[r * D + i] == book[ref[i]]);
          }
          // Packing the codes again gives the words back, and the
          // reference packer agrees.
          std::vector<uint32_t> packed = kiln::test::ref_pack(ref, bits);
          for (int64_t j = 0; j < W; ++j) {
            REQUIRE(out[r * W + j] == in[r * W + j]);
            REQUIRE(packed[j] == in[r * W + j]);
          }
        }
      }
}

TEST_CASE("AURA threshold search matches compare-count, ties to the lower cell",
          "[kernels][aura]") {
  std::mt19937 rng(9);
  for (int bits : {2, 3, 4, 8})
    for (bool interpret : {false, true}) {
      INFO(bits << " bits" << (interpret ? ", interpreter" : ", compiled"));
      const int64_t D = 128, rows = 4;
      const std::vector<float> t = aura_thresholds(bits, D);
      std::normal_distribution<float> n(0.f, 1.f / std::sqrt(static_cast<float>(D)));
      std::vector<float> y(static_cast<size_t>(rows * D));
      for (size_t i = 0; i < y.size(); ++i) {
        // Every threshold exactly, its neighbours one ulp away, and the rest random.
        const size_t j = 1 + i % (t.size() - 1);
        switch (i % 4) {
          case 0: y[i] = t[j]; break;
          case 1: y[i] = std::nextafter(t[j], 1.f); break;
          case 2: y[i] = std::nextafter(t[j], -1.f); break;
          default: y[i] = n(rng) * 1.5f;
        }
      }
      y[3] = 10.f;
      y[7] = -10.f;
      std::vector<int32_t> codes(y.size(), -1);
      run(quantize_kernel(bits, D),
          {Arg::buffer(y.data(), y.size()), Arg::buffer(codes.data(), codes.size())}, {rows, 1, 1},
          interpret);
      for (size_t i = 0; i < y.size(); ++i) {
        int ref = 0;
        for (size_t j = 1; j < t.size(); ++j) ref += y[i] > t[j];
        REQUIRE(codes[i] == ref);
      }
    }
}
