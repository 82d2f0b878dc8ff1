#include "q3_gemv.h"

#include <algorithm>
#include <cmath>

using namespace kiln;

namespace {

constexpr int64_t kBlock = 32, kPlanes = 3;

Kernel build(const Spec& s) {
  KernelBuilder k("q3_gemv", s);
  const int64_t B = s.constexpr_("BLOCK_K"), NB = B / kBlock;
  auto q = k.buffer("q", DType::u32), d = k.buffer("d", DType::f16);
  auto x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto cols = k.scalar("k", DType::i32);
  auto blocks = cols / kBlock;
  auto row_blocks = k.program_id(0).to(DType::i64) * blocks.to(DType::i64);
  auto lane = expand_dims(arange(kBlock), 0);  // [1, 32]: a weight's place in its block
  auto acc = k.var(zeros(DType::f32, {NB, kBlock}));
  k.for_(0, cols, static_cast<int>(B), [&](Value i) {
    auto blk = (i / kBlock) + arange(NB);  // [NB]: the blocks of this step
    auto bm = blk < blocks;
    auto at = row_blocks + blk.to(DType::i64);
    auto code = zeros(DType::i32, {NB, kBlock});
    for (int64_t b = 0; b < kPlanes; ++b) {
      auto plane = expand_dims(load(q + (at * kPlanes + b), bm, 0.0).bitcast(DType::i32), 1);
      code = code | (((plane >> lane) & 1) << static_cast<int>(b));
    }
    auto scale = expand_dims(load(d + at, bm, 0.0).to(DType::f32), 1);
    auto col = expand_dims(blk * kBlock, 1) + lane;
    auto xv = load(x + col, col < cols, 0.0);
    acc = acc + scale * (code - 4).to(DType::f32) * xv;
  });
  store(y + k.program_id(0), sum(Value(acc)));
  return k.finish();
}

}  // namespace

const KernelDef& q3_gemv_def() {
  static const KernelDef def{
      .name = "q3_gemv",
      .family = "example",
      .summary = "y = W x, W in the 3-bit q3 format (32 weights, 12 bytes + an f16 scale)",
      .dtype_roles = {},
      .constexpr_defaults = {{"BLOCK_K", 256}},
      .build = build,
      .launch_shape =
          [](const Spec&, const ScalarArgs& a) {
            const int64_t m = a.i("m"), k = a.i("k");
            if (k % kBlock != 0)
              throw Error("q3_gemv: k must be a multiple of 32 (q3 blocks), got " +
                          std::to_string(k));
            return LaunchShape{
                {m, 1, 1},
                {{"q", m * k / kBlock * kPlanes}, {"d", m * k / kBlock}, {"x", k}, {"y", m}}};
          },
      .tunables = {{"BLOCK_K", {32, 64, 128, 256, 512, 1024}}},  // whole blocks
      .shape_keys = {"m", "k"},
      // Tuning compares candidates with the interpreter, which sums in
      // another order: a row of k ~ N(0,1) products cancels to much less
      // than the sum of their magnitudes, so the bound is absolute too.
      .rtol = 1e-4,
      .atol = 1e-3,
  };
  return def;
}

Q3Matrix q3_quantize(const std::vector<float>& w, int64_t rows, int64_t k) {
  const int64_t blocks = rows * k / kBlock;
  Q3Matrix m{rows, k, std::vector<uint32_t>(static_cast<size_t>(blocks * kPlanes)),
             std::vector<uint16_t>(static_cast<size_t>(blocks))};
  for (int64_t b = 0; b < blocks; ++b) {
    const float* src = w.data() + b * kBlock;
    float amax = 0;
    for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(src[i]));
    m.d[static_cast<size_t>(b)] = f32_to_f16_bits(amax / 4);
    const float dq = f16_bits_to_f32(m.d[static_cast<size_t>(b)]);
    for (int64_t i = 0; i < kBlock; ++i) {
      const uint32_t code = dq == 0 ? 4
                                    : static_cast<uint32_t>(std::clamp(
                                          static_cast<int>(std::lround(src[i] / dq)) + 4, 0, 7));
      for (int64_t p = 0; p < kPlanes; ++p)
        m.q[static_cast<size_t>(b * kPlanes + p)] |= (code >> p & 1) << i;
    }
  }
  return m;
}

float q3_weight(const Q3Matrix& m, int64_t row, int64_t col) {
  const int64_t block = (row * m.k + col) / kBlock, i = col % kBlock;
  uint32_t code = 0;
  for (int64_t p = 0; p < kPlanes; ++p)
    code |= (m.q[static_cast<size_t>(block * kPlanes + p)] >> i & 1) << p;
  return f16_bits_to_f32(m.d[static_cast<size_t>(block)]) * (static_cast<float>(code) - 4);
}

KILN_PLUGIN(registrar) { registrar.add(q3_gemv_def()); }
