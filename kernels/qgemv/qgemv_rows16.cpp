// Quantized GEMV/GEMM over 16-row interleaved weights (kernels/quant/rows16.h):
// y[i] = W x[i] for t tokens, W in Q4_0 (FMT=2), Q8_0 (8), Q4_K (12) or Q6_K
// (14), x from quantize_q8 (QBLOCK=32 for Q4_0/Q8_0, 256 (Q8_K) for the
// K-quants, as llama.cpp pairs them).
//
// Why a second kernel for these formats: qgemv reads ggml's row-major
// blocks, where a 32-bit lane of the int8 dot holds 4 codes of one row, so
// every lane of a sub-block's dot needs its own scaling per token. Here one
// 64-byte load holds 4 codes of each of 16 rows, so a lane is a row: the
// groups of 4 of a sub-block sum in the lane's i32 accumulator (vpdpbusd
// with the token's 4 x bytes as a broadcast operand), and the scaling is
// paid once per sub-block and 16 rows, not per 4 weights.
//
// Per super-block b and token, dx the token's Q8_K scale:
// - Q4_K (w = d sc_j q - dmin m_j, 32-weight sub-blocks j):
//     y += dx (sum_j d sc_j dot_j(q, xq) - dmin sum_j m_j bsum_j),
//   bsum_j the sum of the token's 32 x codes in sub-block j (quantize_q8's s);
// - Q6_K (w = d sc_s (q - 32), 16-weight groups s, signed sc):
//     y += dx d sum_s sc_s (dot_s(q, xq) - 32 bsum16_s),
//   exactly in i32, bsum16_s summed here from the token's x codes.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/rows16.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t R = 16;  // rows per interleaved group, one per i32 lane

// What a format's super-block code sees: the tokens' x, the chunk's bytes.
struct Rows16Context {
  Buffer w, xq, xd, xs;
  std::vector<Value> xbyte, xblk;  // each token's first x byte and x block, i64
  Value c, b64;                    // the chunk's first byte, the super-block index (i64)

  Value bytes(const Value& off, int64_t n) const {
    return load(w + (c + off + arange(n).to(DType::i64)));
  }
  Value at(int64_t off) const { return full({}, static_cast<double>(off), DType::i64); }
  Value f16s(const Value& off) const {  // R little-endian f16 as f32 [R]
    auto h = reshape(bytes(off, 2 * R), {R, 2}).bitcast(DType::u16).bitcast(DType::f16);
    return reshape(h.to(DType::f32), {R});
  }
  // Token i's 4 x codes at `first` of the super-block, broadcast to every row.
  Value x4(size_t i, const Value& first) const {
    auto off = xbyte[i] + b64 * 256 + first;
    return broadcast_to(load(xq + (off + arange(4).to(DType::i64))), {R, 4}).to(DType::i32);
  }
};

// u8 codes [R, 4] times token i's 4 x codes, summed per row: one vpdpbusd.
Value dot4(const Value& codes, const Value& x) { return sum(codes.to(DType::i32) * x, 1); }

// Adds the super-block's terms, in units of each token's dx, to acc.
void q4_k_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc) {
  using L = ggml::Q4KRows16;
  const size_t BT = acc.size();
  auto d = x.f16s(x.at(L::kD)), neg_dmin = -x.f16s(x.at(L::kDmin));
  // The min terms sum m_j * bsum_j exactly in i32 (at most 8 * 63 * 32 *
  // 127), each x sum a broadcast operand of the multiply.
  for (size_t i = 0; i < BT; ++i) {
    Value mins;
    for (int64_t j = 0; j < 8; ++j) {
      auto bsum = broadcast_to(load(x.xs + (x.xblk[i] + x.b64 * 8 + static_cast<int>(j))), {R});
      auto term = x.bytes(x.at(L::kMins + j * R), R).to(DType::i32) * bsum;
      mins = j == 0 ? term : mins + term;
    }
    acc[i] = mins.to(DType::f32) * neg_dmin;
  }
  // A runtime loop over the 4 pairs of sub-blocks: unrolled, the scheduler
  // overlaps pairs and their accumulators spill.
  k.for_(0, 4, 1, [&](Value p) {
    auto p64 = p.to(DType::i64);
    std::vector<Value> dot_lo(BT), dot_hi(BT);
    for (int64_t g = 0; g < 8; ++g) {
      auto codes = reshape(
          x.bytes(p64 * (8 * R * 4) + static_cast<int>(L::kCodes + g * R * 4), R * 4), {R, 4});
      auto lo = codes & 15, hi = codes >> 4;
      for (size_t i = 0; i < BT; ++i) {
        auto dlo = dot4(lo, x.x4(i, p64 * 64 + static_cast<int>(4 * g)));
        auto dhi = dot4(hi, x.x4(i, p64 * 64 + static_cast<int>(32 + 4 * g)));
        dot_lo[i] = g == 0 ? dlo : dot_lo[i] + dlo;
        dot_hi[i] = g == 0 ? dhi : dot_hi[i] + dhi;
      }
    }
    auto scale = [&](int64_t half) {
      return x.bytes(p64 * (2 * R) + static_cast<int>(L::kScales + half * R), R).to(DType::f32) * d;
    };
    auto s_lo = scale(0), s_hi = scale(1);
    for (size_t i = 0; i < BT; ++i) {
      acc[i] = fma(dot_lo[i].to(DType::f32), s_lo, Value(acc[i]));
      acc[i] = fma(dot_hi[i].to(DType::f32), s_hi, Value(acc[i]));
    }
  });
}

void q6_k_superblock(KernelBuilder& k, const Rows16Context& x, std::vector<Var>& acc,
                     std::vector<Var>& isum) {
  using L = ggml::Q6KRows16;
  const size_t BT = acc.size();
  for (size_t i = 0; i < BT; ++i) isum[i] = zeros(DType::i32, {R});
  // Half h: weights 128 h .. 128 h + 127, 16-weight groups 8 h .. 8 h + 7.
  k.for_(0, 2, 1, [&](Value h) {
    auto h64 = h.to(DType::i64);
    // 32 * each token's 8 group sums of x codes, [8] i32.
    std::vector<Value> bias(BT);
    for (size_t i = 0; i < BT; ++i) {
      auto off = x.xbyte[i] + x.b64 * 256 + h64 * 128;
      auto xv = load(x.xq + (off + arange(128).to(DType::i64)));
      // Sums of 4 as a dot with ones (vpdpbusd); the ones are derived from x
      // so that they stay a u8 operand, not a folded constant.
      auto ones = (xv.bitcast(DType::u8) | 1) & 1;
      auto fours = sum(reshape(ones.to(DType::i32) * xv.to(DType::i32), {32, 4}), 1);
      bias[i] = sum(reshape(fours, {8, 4}), 1) * 32;
    }
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
        auto sc = x.bytes(h64 * (8 * R) + static_cast<int>(L::kScales + s * R), R)
                      .bitcast(DType::i8)
                      .to(DType::i32);
        for (size_t i = 0; i < BT; ++i) {
          auto b16 = broadcast_to(slice(bias[i], {s}, {1}), {R});
          isum[i] = Value(isum[i]) + (dots[i][kind] - b16) * sc;
        }
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
        "kernel 'qgemv_rows16': FMT must be 2 (Q4_0), 8 (Q8_0), 12 (Q4_K) or 14 (Q6_K), "
        "got " +
        std::to_string(FMT));
  const int64_t chunk_bytes = ggml::rows16_bytes(qt, R, 256);
  auto w = k.buffer("w", DType::u8), xq = k.buffer("xq", DType::i8);
  auto xd = k.buffer("xd", DType::f32), xs = k.buffer("xs", DType::i32);
  auto y = k.buffer("y", DType::f32);
  Rows16Context x{w, xq, xd, xs, {}, {}, {}, {}};
  auto M = k.scalar("m", DType::i32), K = k.scalar("k", DType::i32);
  auto T = k.scalar("t", DType::i32);
  auto nb = K / 256;
  auto group = k.program_id(1);
  auto tok0 = k.program_id(0) * static_cast<int>(BT);
  std::vector<Var> out, acc, isum;
  for (const Value& t : token_indices(tok0, BT, T)) {
    x.xbyte.push_back(t.to(DType::i64) * K.to(DType::i64));
    x.xblk.push_back(t.to(DType::i64) * (K / 32).to(DType::i64));
    out.push_back(k.var(zeros(DType::f32, {R})));
    if (FMT == 12 || FMT == 14) acc.push_back(k.var(zeros(DType::f32, {R})));
    if (FMT == 14) isum.push_back(k.var(zeros(DType::i32, {R})));
  }
  auto chunk0 = group.to(DType::i64) * nb.to(DType::i64);
  k.for_(0, nb, 1, [&](Value b) {
    x.b64 = b.to(DType::i64);
    x.c = (chunk0 + x.b64) * chunk_bytes;
    if (FMT == 2 || FMT == 8) {
      blocks32_chunk(k, x, FMT, out);
      return;
    }
    if (FMT == 12)
      q4_k_superblock(k, x, acc);
    else
      q6_k_superblock(k, x, acc, isum);
    // Q8_K repeats the super-block's d in each of its 8 slots.
    for (int64_t i = 0; i < BT; ++i)
      out[i] = fma(Value(acc[i]), load(xd + (x.xblk[i] + x.b64 * 8)), Value(out[i]));
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
    .summary = "y[i] = W x[i] for t tokens, W in Q4_0/Q8_0/Q4_K/Q6_K (FMT=2/8/12/14) interleaved "
               "across 16 rows (rows16.h), x from quantize_q8",
    .dtype_roles = {},
    .constexpr_defaults = {{"FMT", 12}, {"BLOCK_T", 1}},
    .build = build_qgemv_rows16,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t m = a.i("m"), kk = a.i("k"), t = a.i("t");
          if (m % R || kk % 256)
            throw Error("kernel 'qgemv_rows16': [m, k] = [" + std::to_string(m) + ", " +
                        std::to_string(kk) + "] needs m a multiple of 16 and k of 256");
          if (t < 1)
            throw Error("kernel 'qgemv_rows16': t = " + std::to_string(t) + " tokens (need >= 1)");
          auto qt = static_cast<ggml::QuantType>(s.constexpr_("FMT"));
          if (!ggml::has_rows16(qt))
            throw Error("kernel 'qgemv_rows16': no 16-row layout for FMT " +
                        std::to_string(s.constexpr_("FMT")));
          int64_t w = ggml::rows16_bytes(qt, m, kk);
          return LaunchShape{
              {cdiv(t, s.constexpr_("BLOCK_T")), m / R, 1},
              {{"w", w}, {"xq", t * kk}, {"xd", t * kk / 32}, {"xs", t * kk / 32}, {"y", t * m}}};
        },
    // Q4_K: 6 tokens share each decoded code vector; 12 i32 accumulators
    // plus the codes fit the 32 vector registers with no spill (8 spills).
    // kiln bench, 2 threads, 4096x14336, n = 512: 1086 / 1080 / 1127
    // GFLOP/s at BLOCK_T 4 / 6 / 8, within noise.
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      int64_t t = a.i("t"), most = s.constexpr_("FMT") == 14 ? 4 : 6;
      return {{"BLOCK_T", t >= most ? most : t >= 4 ? 4 : t >= 2 ? 2 : 1}};
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
