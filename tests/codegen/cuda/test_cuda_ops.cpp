// The CUDA lowering op by op: each small kernel's CUDA C, run in the CPU
// simulator, must reproduce the reference interpreter.
#include <catch2/catch.hpp>

#include <random>

#include "ir/builder.h"
#include "support/cuda_check.h"
#include "support/ir_helpers.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
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
  auto xs = random_floats(450, 1), ys = random_floats(450, 2);
  std::vector<float> os(450, 0);
  std::vector<Arg> args = {Arg::buffer(xs.data(), 450), Arg::buffer(ys.data(), 450),
                           Arg::buffer(os.data(), 450), Arg::scalar_int(450)};
  CHECK(cuda_vs_interpreter(k, args, {3, 1, 1}) == "");
}
