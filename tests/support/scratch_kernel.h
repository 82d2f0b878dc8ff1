// A kernel that stages through a scratch array the ways the attention walk
// does, for the tests of each layer that handles scratch (IR, CPU JIT,
// CUDA): per program, a tile stored reversed, a masked store over part of
// it, scalars read back one at a time in a run-time loop (broadcast into
// FMAs) and a tile read back whole. Buffers x and out are f32 [programs *
// kScratchTile]; the scalar n (i32) bounds the masked store's lanes.
#pragma once

#include "ir/builder.h"
#include "support/ir_helpers.h"

namespace kiln::test {

inline constexpr int64_t kScratchTile = 48;

inline Kernel scratch_kernel() {
  const int64_t N = kScratchTile;
  KernelBuilder k("scratch_mix", spec_for("scratch_mix"));
  auto x = k.buffer("x", DType::f32), out = k.buffer("out", DType::f32);
  auto n = k.scalar("n", DType::i32);
  auto s = k.scratch("s", DType::f32, 2 * N);
  auto base = (k.program_id(0) * static_cast<int>(N)).to(DType::i64);
  auto v = load(x + (base + arange(N).to(DType::i64)));
  store(s + (static_cast<int>(N - 1) - arange(N)), v);
  store(s + (static_cast<int>(N) + arange(N)), v * 3.0);
  store(s + (static_cast<int>(N) + arange(N)), v - 1.0, arange(N) < n);
  auto acc = k.var(zeros(DType::f32, {N}));
  k.for_(0, static_cast<int>(N), 1, [&](Value j) {
    acc = fma(broadcast_to(load(s + j), {N}), load(s + (static_cast<int>(N) + arange(N))),
              Value(acc));
  });
  store(out + (base + arange(N).to(DType::i64)), Value(acc) + load(s + arange(N)));
  return k.finish();
}

}  // namespace kiln::test
