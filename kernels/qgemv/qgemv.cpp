// GEMV with ggml-quantized weights: y = W x, W [m, k] in Q4_0 or Q8_0
// blocks (FMT = the ggml type id, 2 or 8), x given as 8-bit blocks from
// quantize_q8. Dequantisation is fused: a program streams BLOCK_M rows of
// blocks, unpacks each block's nibbles or bytes in registers and takes an
// integer dot product with x's block, unsigned x signed so the CPU path is
// VNNI vpdpbusd: Q4_0 nibbles are already unsigned (w = q - 8, so the
// product is sum(q x) - 8 sum(x)); Q8_0 bytes are flipped to q ^ 0x80
// (= q + 128, so the product is sum((q + 128) x) - 128 sum(x)). Each block
// then adds dot * d_w * d_x to an f32 accumulator.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_qgemv(const Spec& s) {
  KernelBuilder k("qgemv", s);
  const int64_t FMT = s.constexpr_("FMT"), BM = s.constexpr_("BLOCK_M");
  if (FMT != 2 && FMT != 8)
    throw Error("kernel 'qgemv': FMT must be 2 (q4_0) or 8 (q8_0), got " + std::to_string(FMT));
  const bool q4 = FMT == 2;
  const int bytes = q4 ? 18 : 34;  // per 32-weight block
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto nb = K / 32;
  auto row0 = k.program_id(0) * static_cast<int>(BM);
  // Full row blocks load unmasked (contiguous vector loads); only the last
  // program, whose rows run past m, takes the masked path.
  auto rows_pass = [&](bool row_masked) {
    auto rows = row0 + arange(BM);
    auto rmask = expand_dims(rows < M, 1);
    auto row_base = expand_dims(rows.to(DType::i64) * (nb * bytes).to(DType::i64), 1);  // [BM,1]
    auto ld = [&](const Pointer& p) { return row_masked ? load(p, rmask, 0.0) : load(p); };
    // Lane sums of 4 products per block stay in vector lanes (scaled per
    // block in f32); rows are summed once at the end.
    const int64_t L = q4 ? 4 : 8;  // lanes per row per block
    auto acc = k.var(zeros(DType::f32, {BM, L}));
    k.for_(0, nb, 1, [&](Value b) {
      auto blk = row_base + (b * bytes).to(DType::i64);  // [BM,1]
      auto lo = ld(w + blk).to(DType::u16), hi = ld(w + (blk + 1)).to(DType::u16);
      auto dw = ((hi << 8) | lo).bitcast(DType::f16).to(DType::f32);  // [BM,1]
      auto xoff = b * 32;
      // x's 8-bit values, broadcast over the rows before widening so that
      // each product is zext(u8) * sext(i8).
      auto xrow = [&](int64_t first, int64_t n) {
        return broadcast_to(load(xq + (xoff + static_cast<int>(first) + arange(n))), {BM, n})
            .to(DType::i32);
      };
      auto lanes = [&](const Value& prod, int64_t n) {
        return sum(reshape(prod, {BM, n / 4, 4}), 2);
      };
      Value dot;
      if (q4) {
        auto qs = ld(w + (blk + 2 + arange(16).to(DType::i64)));  // [BM,16] u8
        dot = lanes((qs & 15).to(DType::i32) * xrow(0, 16), 16) +
              lanes((qs >> 4).to(DType::i32) * xrow(16, 16), 16);
      } else {
        auto qs = ld(w + (blk + 2 + arange(32).to(DType::i64)));  // [BM,32] u8
        dot = lanes((qs ^ 128).to(DType::i32) * xrow(0, 32), 32);
      }
      // The offset correction (8 or 128 times sum(x)) spread evenly over the lanes.
      auto corr = load(xs + b).to(DType::f32) * static_cast<double>(q4 ? 8 / L : 128 / L);
      acc = acc + (dot.to(DType::f32) - corr) * (dw * load(xd + b));
    });
    auto out = sum(Value(acc), 1);
    if (row_masked)
      store(y + rows, out, rows < M);
    else
      store(y + rows, out);
  };
  k.if_(
      row0 + static_cast<int>(BM) <= M, [&] { rows_pass(false); }, [&] { rows_pass(true); });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv",
    .family = "qgemv",
    .summary = "y = W x, W in ggml Q4_0 (FMT=2) or Q8_0 (FMT=8) blocks, x from quantize_q8",
    .dtype_roles = {},
    .constexpr_defaults = {{"FMT", 8}, {"BLOCK_M", 8}},
    .build = build_qgemv,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k");
          if (kk % 32)
            throw Error("kernel 'qgemv': k = " + std::to_string(kk) +
                        " is not a multiple of the 32-weight block");
          int64_t bytes = s.constexpr_("FMT") == 2 ? 18 : 34;
          return LaunchShape{{cdiv(m, s.constexpr_("BLOCK_M")), 1, 1},
                             {{"w", m * (kk / 32) * bytes},
                              {"xq", kk},
                              {"xd", kk / 32},
                              {"xs", kk / 32},
                              {"y", m}}};
        },
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}},
    .shape_keys = {"m", "k"},
    // Integer dots are exact; f32 accumulation over k/32 blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
