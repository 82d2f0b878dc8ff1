// GEMV with ggml-quantized weights: y = W x, W [m, k] in Q4_0, Q8_0, Q4_K or
// Q6_K blocks (FMT = the ggml type id: 2, 8, 12, 14), x given as 8-bit blocks of
// 32 from quantize_q8 (q, scale d, sum s per block).
//
// Dequantisation is fused: a program streams BLOCK_M rows, unpacks each
// block's nibbles or bytes in registers and multiplies them with x's block
// as unsigned x signed 8-bit products summed in groups of 4, which the CPU
// path emits as VNNI vpdpbusd. The group sums stay in vector lanes, scaled
// per block in f32, and each row is summed once at the end.
// - Q4_0 (w = (q - 8) d): sum(q x) - 8 sum(x).
// - Q8_0 (w = q d, q signed): bytes flipped to q ^ 0x80 = q + 128, so
//   sum((q + 128) x) - 128 sum(x).
// - Q4_K (w = d sc q - dmin m per 32-weight sub-block, 6-bit sc and m):
//   d sc sum(q x) - dmin m sum(x); the min part is kept in its own
//   per-row accumulator.
// - Q6_K (w = d sc (q - 32), 6-bit q, 8-bit signed sc per 16 weights):
//   per lane sum(q x) times its 16-weight group's scale, minus
//   32 d sc sum(x) per group through the per-row accumulator.
#include <functional>

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

// Everything one program needs to read its rows' blocks and x's blocks.
struct Ctx {
  KernelBuilder& k;
  int64_t BM;
  Buffer w, xq, xd, xs;
  std::function<Value(const Pointer&)> ld;  // row-masked or plain load
};

// The f16 at byte offset off of each row ([BM,1]), as f32: two bytes viewed
// as one u16, then as f16.
Value f16_at(Ctx& c, const Value& off) {
  auto bytes = c.ld(c.w + (off + arange(2).to(DType::i64)));  // [BM,2] u8
  return bytes.bitcast(DType::u16).bitcast(DType::f16).to(DType::f32);
}

// x's 8-bit values of block `xb` from element `first`, broadcast over the
// rows before widening, so each product is zext(u8) * sext(i8).
Value x_bytes(Ctx& c, const Value& xb, int64_t first, int64_t n) {
  auto v = load(c.xq + (xb * 32 + static_cast<int>(first) + arange(n)));
  return broadcast_to(v, {c.BM, n}).to(DType::i32);
}

// Sums of 4 adjacent products: [BM, n] -> [BM, n/4] (vpdpbusd lanes).
Value lanes(Ctx& c, const Value& prod, int64_t n) {
  return sum(reshape(prod, {c.BM, n / 4, 4}), 2);
}

// One 32-weight block of Q4_0 or Q8_0 at byte offsets `blk` [BM,1]; adds
// to acc [BM, L].
void block32(Ctx& c, bool q4, const Value& blk, const Value& b, Var& acc) {
  auto dw = f16_at(c, blk);  // [BM,1]
  Value dot;
  int64_t L;
  if (q4) {
    auto qs = c.ld(c.w + (blk + 2 + arange(16).to(DType::i64)));  // [BM,16] u8
    dot = lanes(c, (qs & 15).to(DType::i32) * x_bytes(c, b, 0, 16), 16) +
          lanes(c, (qs >> 4).to(DType::i32) * x_bytes(c, b, 16, 16), 16);
    L = 4;
  } else {
    auto qs = c.ld(c.w + (blk + 2 + arange(32).to(DType::i64)));  // [BM,32] u8
    dot = lanes(c, (qs ^ 128).to(DType::i32) * x_bytes(c, b, 0, 32), 32);
    L = 8;
  }
  // The offset correction (8 or 128 times sum(x)) spread evenly over the lanes.
  auto corr = load(c.xs + b).to(DType::f32) * static_cast<double>((q4 ? 8 : 128) / L);
  acc = acc + (dot.to(DType::f32) - corr) * (dw * load(c.xd + b));
}

// One 256-weight Q4_K super-block at byte offsets `blk` [BM,1], x blocks
// 8*sb .. 8*sb+7; adds to acc [BM,8] and to the min accumulator accm [BM,1].
void block_q4k(Ctx& c, const Value& blk, const Value& sb, Var& acc, Var& accm) {
  auto d = f16_at(c, blk), dmin = f16_at(c, blk + 2);           // [BM,1]
  auto sc = c.ld(c.w + (blk + 4 + arange(12).to(DType::i64)));  // [BM,12] u8
  auto byte = [&](int64_t i) { return slice(sc, {0, i}, {c.BM, 1}); };
  for (int64_t chunk = 0; chunk < 4; ++chunk) {
    auto qs = c.ld(c.w + (blk + 16 + 32 * chunk + arange(32).to(DType::i64)));  // [BM,32]
    for (int64_t half = 0; half < 2; ++half) {
      int64_t j = 2 * chunk + half;  // sub-block
      // 6-bit scale and min of sub-block j (FORMATS.md).
      Value s6, m6;
      if (j < 4) {
        s6 = byte(j) & 63;
        m6 = byte(j + 4) & 63;
      } else {
        s6 = (byte(j + 4) & 15) | ((byte(j - 4) >> 6) << 4);
        m6 = (byte(j + 4) >> 4) | ((byte(j) >> 6) << 4);
      }
      auto q = half == 0 ? (qs & 15) : (qs >> 4);
      auto xb = sb * 8 + static_cast<int>(j);
      auto dx = load(c.xd + xb);
      auto dot = lanes(c, q.to(DType::i32) * x_bytes(c, xb, 0, 32), 32);  // [BM,8]
      acc = acc + dot.to(DType::f32) * (d * s6.to(DType::f32) * dx);
      accm = accm + dmin * m6.to(DType::f32) * (load(c.xs + xb).to(DType::f32) * dx);
    }
  }
}

// One 256-weight Q6_K super-block at byte offsets `blk` [BM,1], x blocks
// 8*sb .. 8*sb+7; adds to acc [BM,8] and the offset term to accm [BM,1].
// A weight is (6-bit q - 32) * d * sc with one signed 8-bit sc per 16
// weights, i.e. per 4 lanes: lanes take sum(q x) with their group's scale,
// and 32 * sc * sum(x) per group is subtracted through accm.
void block_q6k(Ctx& c, const Value& blk, const Value& sb, Var& acc, Var& accm) {
  auto d = f16_at(c, blk + 208);                                  // [BM,1]
  auto sc = c.ld(c.w + (blk + 192 + arange(16).to(DType::i64)));  // [BM,16] u8
  // Group scales times d, once per super-block: [BM,16].
  auto scd = sc.bitcast(DType::i8).to(DType::f32) * d;
  for (int64_t h = 0; h < 2; ++h) {
    auto bytes = [&](int64_t off) { return c.ld(c.w + (blk + off + arange(32).to(DType::i64))); };
    auto ql_lo = bytes(64 * h), ql_hi = bytes(64 * h + 32), qh = bytes(128 + 32 * h);
    for (int64_t s = 0; s < 4; ++s) {
      auto low = (s % 2 == 0 ? ql_lo : ql_hi);
      auto q = (s < 2 ? (low & 15) : (low >> 4)) | (((qh >> static_cast<int>(2 * s)) & 3) << 4);
      auto xb = sb * 8 + static_cast<int>(4 * h + s);
      auto dot = lanes(c, q.to(DType::i32) * x_bytes(c, xb, 0, 32), 32);  // [BM,8]
      // The -32 offset per 16-weight group: 32 * sum of x over the group.
      auto xv = load(c.xq + (xb * 32 + arange(32))).to(DType::f32);
      auto x16a = sum(slice(xv, {0}, {16})), x16b = sum(slice(xv, {16}, {16}));
      int64_t j = 8 * h + 2 * s;  // scales j, j+1
      // Lanes 0-3 take group j's scale, lanes 4-7 group j+1's: one shuffle.
      auto pair = reshape(slice(scd, {0, j}, {c.BM, 2}), {c.BM, 2, 1});
      auto lane_sc = reshape(broadcast_to(pair, {c.BM, 2, 4}), {c.BM, 8});
      auto dx = load(c.xd + xb);
      acc = acc + dot.to(DType::f32) * lane_sc * dx;
      accm =
          accm + (slice(scd, {0, j}, {c.BM, 1}) * x16a + slice(scd, {0, j + 1}, {c.BM, 1}) * x16b) *
                     (dx * 32.0);
    }
  }
}

Kernel build_qgemv(const Spec& s) {
  KernelBuilder k("qgemv", s);
  const int64_t FMT = s.constexpr_("FMT"), BM = s.constexpr_("BLOCK_M");
  // The block geometry of the weight format (throws for formats qgemv lacks).
  const ggml::BlockFormat& f = ggml::block_format(static_cast<int>(FMT));
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto nb = K / f.block_elems;
  auto row0 = k.program_id(0) * static_cast<int>(BM);
  // Full row blocks load unmasked (contiguous vector loads); only the last
  // program, whose rows run past m, takes the masked path.
  auto rows_pass = [&](bool row_masked) {
    auto rows = row0 + arange(BM);
    auto rmask = expand_dims(rows < M, 1);
    auto row_bytes = (nb * f.block_bytes).to(DType::i64);
    auto row_base = expand_dims(rows.to(DType::i64) * row_bytes, 1);  // [BM,1]
    Ctx c{k,
          BM,
          w,
          xq,
          xd,
          xs,
          [&](const Pointer& p) {
            return row_masked ? load(p, rmask, 0.0) : load(p); }};
    const int64_t L = FMT == 2 ? 4 : 8;  // lanes per row
    auto acc = k.var(zeros(DType::f32, {BM, L}));
    auto accm = k.var(zeros(DType::f32, {BM, 1}));
    k.for_(0, nb, 1, [&](Value b) {
      auto blk = row_base + (b * f.block_bytes).to(DType::i64);  // [BM,1]
      if (FMT == 14)
        block_q6k(c, blk, b, acc, accm);
      else if (FMT == 12)
        block_q4k(c, blk, b, acc, accm);
      else
        block32(c, FMT == 2, blk, b, acc);
    });
    auto out = sum(Value(acc), 1) - reshape(Value(accm), {BM});
    store_rows(y + rows, out, rows, M, row_masked);
  };
  split_row_block(k, row0, BM, M, rows_pass);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv",
    .family = "qgemv",
    .summary = "y = W x, W in ggml Q4_0/Q8_0/Q4_K/Q6_K blocks (FMT=2/8/12/14), x from quantize_q8",
    .dtype_roles = {},
    .constexpr_defaults = {{"FMT", 8}, {"BLOCK_M", 8}},
    .build = build_qgemv,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k");
          const ggml::BlockFormat& f = ggml::block_format(static_cast<int>(s.constexpr_("FMT")));
          if (kk % f.block_elems)
            throw Error("kernel 'qgemv': k = " + std::to_string(kk) + " is not a multiple of the " +
                        std::to_string(f.block_elems) + "-weight block");
          return LaunchShape{{cdiv(m, s.constexpr_("BLOCK_M")), 1, 1},
                             {{"w", m * (kk / f.block_elems) * f.block_bytes},
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
