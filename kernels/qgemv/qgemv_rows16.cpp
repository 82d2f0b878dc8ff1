// Q4_K GEMV/GEMM over 16-row interleaved weights (kernels/quant/q4k_rows16.h):
// y[i] = W x[i] for t tokens, x from quantize_q8 with QBLOCK=256 (Q8_K).
//
// Why a second Q4_K kernel: qgemv reads ggml's row-major blocks, where a
// 32-bit lane of the int8 dot holds 4 codes of one row, so every lane of a
// sub-block's dot needs its own f32 scaling per token. Here one 64-byte load
// holds 4 codes of each of 16 rows (low nibbles: sub-block 2p, high: 2p+1),
// so a lane is a row: the 8 groups of 4 of a 32-weight sub-block sum in the
// lane's i32 accumulator (vpdpbusd with the token's 4 x bytes broadcast),
// and the f32 work per token is one convert and one multiply-add per
// sub-block and 16 rows, not per 4 weights.
//
// Per super-block b and token, with w = d sc_j q - dmin m_j:
//   y += dx (sum_j d sc_j dot_j(q, xq) - sum_j dmin m_j bsum_j)
// dx the token's Q8_K scale, bsum_j the sum of its 32 x codes in sub-block j.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/q4k_rows16.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

using L = ggml::Q4KRows16;
constexpr int64_t R = L::kRows;

Kernel build_qgemv_rows16(const Spec& s) {
  KernelBuilder k("qgemv_rows16", s);
  const int64_t BT = s.constexpr_("BLOCK_T");
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  auto nb = K / 256;
  auto group = k.program_id(1);
  auto tok0 = k.program_id(0) * static_cast<int>(BT);
  auto toks = token_indices(tok0, BT, T);
  std::vector<Value> xbyte, xblk;  // each token's first x byte and x block, i64
  std::vector<Var> out, acc;
  for (const Value& t : toks) {
    xbyte.push_back(t.to(DType::i64) * K.to(DType::i64));
    xblk.push_back(t.to(DType::i64) * (K / 32).to(DType::i64));
    out.push_back(k.var(zeros(DType::f32, {R})));
    acc.push_back(k.var(zeros(DType::f32, {R})));
  }
  auto chunk0 = group.to(DType::i64) * nb.to(DType::i64);
  auto bytes = [&](const Value& off, int64_t n) {
    return load(w + (off + arange(n).to(DType::i64)));
  };
  auto f16s = [&](const Value& off) {  // R little-endian f16 as f32 [R]
    auto h = reshape(bytes(off, 2 * R), {R, 2}).bitcast(DType::u16).bitcast(DType::f16);
    return reshape(h.to(DType::f32), {R});
  };
  k.for_(0, nb, 1, [&](Value b) {
    auto c = (chunk0 + b.to(DType::i64)) * L::kChunkBytes;
    auto d = f16s(c + L::kD), dmin = f16s(c + L::kDmin);
    auto neg_dmin = -dmin;
    auto b64 = b.to(DType::i64);
    // Each token's sum over the super-block in units of its dx, applied
    // once at the end. The min terms sum m_j * bsum_j exactly in i32 (at
    // most 8 * 63 * 32 * 127), each x sum a broadcast operand of the multiply.
    for (int64_t i = 0; i < BT; ++i) {
      Value mins;
      for (int64_t j = 0; j < 8; ++j) {
        auto bsum = broadcast_to(load(xs + (xblk[i] + b64 * 8 + static_cast<int>(j))), {R});
        auto term = bytes(c + L::kMins + j * R, R).to(DType::i32) * bsum;
        mins = j == 0 ? term : mins + term;
      }
      acc[i] = mins.to(DType::f32) * neg_dmin;
    }
    // A runtime loop over the 4 pairs of sub-blocks: unrolled, the
    // scheduler overlaps pairs and their accumulators spill.
    k.for_(0, 4, 1, [&](Value p) {
      auto p64 = p.to(DType::i64);
      std::vector<Value> dot_lo(BT), dot_hi(BT);
      for (int64_t g = 0; g < 8; ++g) {
        auto codes = reshape(
            bytes(c + L::kCodes + p64 * (8 * R * 4) + static_cast<int>(g * R * 4), R * 4), {R, 4});
        auto lo = (codes & 15).to(DType::i32), hi = (codes >> 4).to(DType::i32);
        for (int64_t i = 0; i < BT; ++i) {
          auto x4 = [&](int64_t half) {
            auto off = xbyte[i] + b64 * 256 + p64 * 64 + static_cast<int>(32 * half + 4 * g);
            return broadcast_to(load(xq + (off + arange(4).to(DType::i64))), {R, 4}).to(DType::i32);
          };
          auto dlo = sum(lo * x4(0), 1), dhi = sum(hi * x4(1), 1);
          dot_lo[i] = g == 0 ? dlo : dot_lo[i] + dlo;
          dot_hi[i] = g == 0 ? dhi : dot_hi[i] + dhi;
        }
      }
      auto scale = [&](int64_t half) {
        return bytes(c + L::kScales + p64 * (2 * R) + static_cast<int>(half * R), R)
                   .to(DType::f32) *
               d;
      };
      auto s_lo = scale(0), s_hi = scale(1);
      for (int64_t i = 0; i < BT; ++i) {
        acc[i] = fma(dot_lo[i].to(DType::f32), s_lo, Value(acc[i]));
        acc[i] = fma(dot_hi[i].to(DType::f32), s_hi, Value(acc[i]));
      }
    });
    // Q8_K repeats the super-block's d in each of its 8 slots.
    for (int64_t i = 0; i < BT; ++i)
      out[i] = fma(Value(acc[i]), load(xd + (xblk[i] + b64 * 8)), Value(out[i]));
  });
  auto rows = group * static_cast<int>(R) + arange(R);
  for (int64_t i = 0; i < BT; ++i) {
    auto tok = tok0 + static_cast<int>(i);
    k.if_(tok < T, [&] {
      store(y + (tok.to(DType::i64) * M.to(DType::i64) + rows.to(DType::i64)), Value(out[i]));
    });
  }
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv_rows16",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens, W in Q4_K interleaved across 16 rows "
               "(q4k_rows16.h), x from quantize_q8 QBLOCK=256",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK_T", 1}},
    .build = build_qgemv_rows16,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t");
          if (m % R || kk % 256)
            throw Error("kernel 'qgemv_rows16': [m, k] = [" + std::to_string(m) + ", " +
                        std::to_string(kk) + "] needs m a multiple of 16 and k of 256");
          if (t < 1)
            throw Error("kernel 'qgemv_rows16': t = " + std::to_string(t) + " tokens (need >= 1)");
          return LaunchShape{{cdiv(t, s.constexpr_("BLOCK_T")), m / R, 1},
                             {{"w", L::bytes(m, kk)},
                              {"xq", t * kk},
                              {"xd", t * kk / 32},
                              {"xs", t * kk / 32},
                              {"y", t * m}}};
        },
    // 6 tokens share each decoded code vector: 12 i32 accumulators plus the
    // codes fit the 32 vector registers with no spill (8 spills). kiln
    // bench, 2 threads, 4096x14336, n = 512: 1086 / 1080 / 1127 GFLOP/s at
    // BLOCK_T 4 / 6 / 8, within noise.
    .shape_heuristic = [](const Spec&, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      int64_t t = a.i("t");
      return {{"BLOCK_T", t >= 6 ? 6 : t >= 4 ? 4 : t >= 2 ? 2 : 1}};
    },
    .tunables = {{"BLOCK_T", {1, 2, 4, 6, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over 8 sub-blocks per
    // super-block and k/256 super-blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
