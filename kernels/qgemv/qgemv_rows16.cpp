// Quantized GEMV/GEMM over 16-row interleaved weights (kernels/quant/rows16.h):
// y[i] = W x[i] for t tokens, W in Q4_0 (FMT=2), Q8_0 (8), Q4_K (12), Q5_K
// (13) or Q6_K (14), x from quantize_q8 (QBLOCK=32 for Q4_0/Q8_0, 256 (Q8_K) for the
// K-quants, as llama.cpp pairs them): buffers w, xq, xd, xs, xs8, y.
//
// Why a second kernel for these formats: qgemv reads ggml's row-major
// blocks, where a 32-bit lane of the int8 dot holds 4 codes of one row, so
// every lane of a sub-block's dot needs its own scaling per token. Here a
// lane is a row (rows16_program.h), and the scaling is paid once per
// sub-block and 16 rows, not per 4 weights.
//
// Per super-block b and token, dx the token's Q8_K scale:
// - Q4_K and Q5_K (w = d sc_j q - dmin m_j, 32-weight sub-blocks j):
//     y += dx (sum_j d sc_j dot_j(q, xq) - dmin sum_j m_j bsum_j),
//   bsum_j the sum of the token's 32 x codes in sub-block j (quantize_q8's s);
// - Q6_K (w = d sc_s (q - 32), 16-weight groups s, signed sc):
//     y += dx d sum_s sc_s (dot_s(q, xq) - 32 bsum16_s),
//   exactly in i32, bsum16_s the sum of the token's 16 x codes of group s
//   (quantize_q8's split s8).
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/qgemv/rows16_program.h"
#include "kernels/quant/rows16.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t R = kRows16;

// Sets acc to the super-block's terms, in units of each token's dx.
template <bool Q5>
void k_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc) {
  using L = ggml::KRows16<Q5>;
  const size_t BT = acc.size();
  auto d = x.f16s(x.at(L::kD)), neg_dmin = -x.f16s(x.at(L::kDmin));
  // The min terms sum_j m_j bsum_j, exactly in i32, as byte dots: m_j is
  // u8 (6 bits) and bsum_j = l_j + 64 h_j with l_j in [0, 63] and h_j in
  // [-64, 63], both i8 and stored so by quantize_q8 (s8). So the 8
  // sub-blocks take 4 vpdpbusd per token with x straight from memory (the
  // 4 mins of a row in a lane) instead of 8 widening multiplies.
  auto mins = [&](int64_t h) { return reshape(x.bytes(x.at(L::min_at(4 * h, 0)), 4 * R), {R, 4}); };
  auto mins_lo = mins(0), mins_hi = mins(1);
  for (size_t i = 0; i < BT; ++i) {
    auto low = dot4(mins_lo, x.split_sums4(i, 0).to(DType::i32)) +
               dot4(mins_hi, x.split_sums4(i, 1).to(DType::i32));
    auto high = dot4(mins_lo, x.split_sums4(i, 2).to(DType::i32)) +
                dot4(mins_hi, x.split_sums4(i, 3).to(DType::i32));
    acc[i] = ((high << 6) + low).to(DType::f32) * neg_dmin;
  }
  // A runtime loop over the 4 pairs of sub-blocks: unrolled, the scheduler
  // overlaps pairs and their accumulators spill.
  k.for_(0, 4, 1, [&](Value p) {
    auto p64 = p.to(DType::i64);
    NibblePairDots dots = nibble_pair_dots(x, p64, L::kCodes, BT, Q5 ? L::kHigh : -1);
    auto scale = [&](int64_t half) {
      return x.bytes(p64 * (2 * R) + static_cast<int>(L::kScales + half * R), R).to(DType::f32) * d;
    };
    auto s_lo = scale(0), s_hi = scale(1);
    for (size_t i = 0; i < BT; ++i) {
      acc[i] = fma(dots.lo[i].to(DType::f32), s_lo, Value(acc[i]));
      acc[i] = fma(dots.hi[i].to(DType::f32), s_hi, Value(acc[i]));
    }
  });
}

void q6_k_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc) {
  using L = ggml::Q6KRows16;
  const size_t BT = acc.size();
  // The offsets -32 sum_s sc_s b_s (b_s the token's sum of the x codes of
  // 16-weight group s) start each token's sum, as byte dots: the layout
  // keeps sc_s + 128 (u8, 4 groups per lane) and quantize_q8 splits b_s =
  // low + 64 high into i8 (s8), so with B = sum_s b_s (the 8 block sums)
  //   sum_s sc_s b_s = sum_s (sc_s + 128) low_s + 64 sum_s (sc_s + 128) high_s - 128 B:
  // 8 vpdpbusd per token, instead of a broadcast and subtraction per group.
  std::vector<Value> biased(4);
  for (int64_t q = 0; q < 4; ++q)
    biased[q] = reshape(x.bytes(x.at(L::kScales + 64 * q), 4 * R), {R, 4});
  std::vector<Var> isum;
  for (size_t i = 0; i < BT; ++i) {
    Value low, high;
    for (int64_t q = 0; q < 4; ++q) {
      auto l = dot4(biased[q], x.split_sums16_4(i, q, false).to(DType::i32));
      auto h = dot4(biased[q], x.split_sums16_4(i, q, true).to(DType::i32));
      low = q == 0 ? l : low + l;
      high = q == 0 ? h : high + h;
    }
    auto total = sum(load(x.xs + (x.xblk[i] + x.b64 * 8 + arange(8).to(DType::i64))));
    isum.push_back(k.var((low + (high << 6) - broadcast_to(total << 7, {R})) * -32));
  }
  // Half h: weights 128 h .. 128 h + 127, 16-weight groups 8 h .. 8 h + 7.
  k.for_(0, 2, 1, [&](Value h) {
    auto h64 = h.to(DType::i64);
    // The half's 8 biased scales, 4 per i32 lane.
    Value quads[2];
    for (int64_t j = 0; j < 2; ++j)
      quads[j] =
          reshape(reshape(x.bytes(h64 * 128 + static_cast<int>(L::kScales + 64 * j), 4 * R), {R, 4})
                      .bitcast(DType::i32),
                  {R});
    for (int64_t quarter = 0; quarter < 2; ++quarter) {  // groups 8h + quarter + 2 kind
      // dots[i][kind]: codes of kind 0-3 are weights 32 kind + 16 quarter + 0..15.
      std::vector<std::vector<Value>> dots(BT, std::vector<Value>(4));
      for (int64_t g = 4 * quarter; g < 4 * quarter + 4; ++g) {
        auto piece = [&](int64_t part) {
          return reshape(x.bytes(h64 * (8 * L::kGroupBytes) +
                                     static_cast<int>(L::kCodes + g * L::kGroupBytes + part * 64),
                                 R * 4),
                         {R, 4});
        };
        auto a = piece(0), b = piece(1), hb = piece(2);
        const Value codes[4] = {(a & 15) | ((hb & 3) << 4), (b & 15) | ((hb & 12) << 2),
                                (a >> 4) | (hb & 48), (b >> 4) | ((hb >> 2) & 48)};
        for (size_t i = 0; i < BT; ++i)
          for (int64_t kind = 0; kind < 4; ++kind) {
            auto dd = dot4(codes[kind], x.x4(i, h64 * 128 + static_cast<int>(32 * kind + 4 * g)));
            dots[i][kind] = g == 4 * quarter ? dd : dots[i][kind] + dd;
          }
      }
      for (int64_t kind = 0; kind < 4; ++kind) {
        int64_t s = quarter + 2 * kind;  // group within the half
        auto sc = ((quads[s / 4] >> static_cast<int>(8 * (s % 4))) & 255) - 128;
        for (size_t i = 0; i < BT; ++i) isum[i] = Value(isum[i]) + dots[i][kind] * sc;
      }
    }
  });
  auto d = x.f16s(x.at(L::kD));
  for (size_t i = 0; i < BT; ++i) acc[i] = Value(isum[i]).to(DType::f32) * d;
}

// Q4_0 / Q8_0: 8 blocks of 32 per chunk, each with its own weight and
// activation scale, so each block's dot is scaled into `out` directly:
//   y += d dx (dot(code, xq) - offset * bsum),
// code = Q4_0's nibble (offset 8) or Q8_0's byte ^ 0x80 (offset 128), bsum
// the token's x block sum (quantize_q8's s).
void blocks32_chunk(KernelBuilder& k, const Rows16Context& x, int64_t fmt, std::vector<Var>& out) {
  using B4 = ggml::Q40Rows16;  // Q8_0's layout differs only in kCodeBytes
  using B8 = ggml::Q80Rows16;
  const size_t BT = out.size();
  const int64_t groups = (fmt == 2 ? B4::kCodeBytes : B8::kCodeBytes) / 4;
  const int offset = fmt == 2 ? 8 : 128;
  k.for_(0, 8, 1, [&](Value j) {
    auto j64 = j.to(DType::i64);
    std::vector<Value> dot(BT);
    auto accumulate = [&](const Value& codes, size_t i, int64_t first) {
      auto dd = dot4(codes, x.x4(i, j64 * 32 + static_cast<int>(first)));
      dot[i] = dot[i].valid() ? dot[i] + dd : dd;
    };
    for (int64_t g = 0; g < groups; ++g) {
      auto raw =
          reshape(x.bytes(j64 * (groups * R * 4) + static_cast<int>(B4::kCodes + g * R * 4), R * 4),
                  {R, 4});
      for (size_t i = 0; i < BT; ++i) {
        if (fmt == 2) {
          accumulate(raw & 15, i, 4 * g);
          accumulate(raw >> 4, i, 16 + 4 * g);
        } else {
          accumulate(raw ^ 128, i, 4 * g);
        }
      }
    }
    auto d = x.f16s(j64 * (2 * R) + static_cast<int>(B4::kD));
    for (size_t i = 0; i < BT; ++i) {
      auto blk = x.xblk[i] + x.b64 * 8 + j64;
      auto bsum = broadcast_to(load(x.xs + blk), {R}) * offset;
      auto scale = d * load(x.xd + blk);
      out[i] = fma((dot[i] - bsum).to(DType::f32), scale, Value(out[i]));
    }
  });
}

Kernel build_qgemv_rows16(const Spec& s) {
  KernelBuilder k("qgemv_rows16", s);
  const int64_t FMT = s.constexpr_("FMT"), BT = s.constexpr_("BLOCK_T");
  auto qt = static_cast<ggml::QuantType>(FMT);
  if (!ggml::has_rows16(qt))
    throw Error(
        "kernel 'qgemv_rows16': FMT must be 2 (Q4_0), 8 (Q8_0), 12 (Q4_K), 13 (Q5_K) or 14 "
        "(Q6_K), got " +
        std::to_string(FMT));
  // Every FMT takes xs8 (Q4_K reads it), so that one call signature serves all.
  Rows16Format f{.chunk_bytes = ggml::rows16_bytes(qt, R, 256),
                 .superblock_scaled = FMT == 12 || FMT == 13 || FMT == 14,
                 .split_sums = true,
                 .chunk = nullptr};
  if (FMT == 12)
    f.chunk = k_superblock<false>;
  else if (FMT == 13)
    f.chunk = k_superblock<true>;
  else if (FMT == 14)
    f.chunk = q6_k_superblock;
  else
    f.chunk = [FMT](KernelBuilder& kb, const Rows16Context& x, std::vector<Var>& out) {
      blocks32_chunk(kb, x, FMT, out);
    };
  build_rows16_program(k, BT, f);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv_rows16",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens, W in Q4_0/Q8_0/Q4_K/Q5_K/Q6_K (FMT=2/8/12/13/14) "
               "interleaved across 16 rows (rows16.h), x from quantize_q8",
    .dtype_roles = {},
    .constexpr_defaults = {{"FMT", 12}, {"BLOCK_T", 1}},
    .build = build_qgemv_rows16,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          auto qt = static_cast<ggml::QuantType>(s.constexpr_("FMT"));
          if (!ggml::has_rows16(qt))
            throw Error("kernel 'qgemv_rows16': no 16-row layout for FMT " +
                        std::to_string(s.constexpr_("FMT")));
          int64_t m = a.i("m"), kk = a.i("k");
          return rows16_launch("qgemv_rows16", s.constexpr_("BLOCK_T"), m, kk, a.i("t"),
                               ggml::rows16_bytes(qt, m, kk), true);
        },
    // Q4_K: 6 tokens share each decoded code vector; 12 i32 accumulators
    // plus the codes fit the 32 vector registers with no spill (8 spills).
    // kiln bench, 2 threads, 4096x14336, n = 512: 1086 / 1080 / 1127
    // GFLOP/s at BLOCK_T 4 / 6 / 8, within noise. Q5_K: 8 (its 5th bits
    // add work per decoded code vector, so more tokens share it): 574 / 609
    // and 594 / 684 GFLOP/s at 6 / 8 in two runs.
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      const int64_t fmt = s.constexpr_("FMT");
      return rows16_block_t(a.i("t"), fmt == 14 ? 4 : fmt == 13 ? 8 : 6);
    },
    .tunables = {{"BLOCK_T", {1, 2, 4, 6, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over the sub-blocks of a
    // super-block and k/256 super-blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
