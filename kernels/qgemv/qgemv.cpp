// Quantized matrix-vector products for t tokens at once: y[i] = W x[i] for
// i < t, W [m, k] in ggml blocks (FMT = the ggml type id: Q4_0 2, Q4_1 3,
// Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14,
// IQ2_XXS 16, IQ2_XS 17, IQ3_XXS 18, IQ4_NL 20, IQ3_S 21, IQ2_S 22, IQ4_XS 23,
// MXFP4 39),
// each x[i] given as 8-bit blocks of 32 from quantize_q8 (q, scale d, sum s
// per block). t = 1 is decode's GEMV; larger t is prompt processing, where
// BLOCK_T tokens share every weight block a program decodes.
//
// Dequantisation is fused: a program streams BLOCK_M rows and unpacks each
// 32-weight sub-block's nibbles or bytes in registers once
// (block_decoder.h, which lists each format's scale and offset); TokenDots
// (token_dots.h) multiplies them with every token's x block.
#include <vector>

#include "ir/builder.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/block_decoder.h"
#include "kernels/qgemv/token_dots.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/registry.h"
#include "kernels/row_block.h"

namespace kiln {
namespace {

// One row, one token, Q4_0 or Q8_0 (decode's GEMV at BLOCK_M = 1): a
// 32-weight block is too little work to pay for its scale and offset, so a
// step takes kBlocksPerStep consecutive blocks of the row as the rows of
// one tile, each against its own x block: [8,32] codes times [8,32] x is
// one 512-bit-wide dot, and the 8 scales and offsets are vector ops.
constexpr int64_t kBlocksPerStep = 8;

void one_row_pass(KernelBuilder& k, const TensorTypeInfo& f, Buffer w, QuantizedActivations x,
                  Buffer y, Value M, Value nb, Value kb) {
  const int64_t S = kBlocksPerStep;
  auto row = k.program_id(1), tok = k.program_id(0);
  auto row_base = row.to(DType::i64) * (nb * f.block_bytes).to(DType::i64);
  auto xblk0 = tok.to(DType::i64) * kb.to(DType::i64);
  auto acc = k.var(zeros(DType::f32, {S, 8}));
  auto accm = k.var(zeros(DType::f32, {S}));
  auto step = [&](const Value& first, bool masked) {
    auto bidx = first + arange(S);  // [S] block indices
    auto live = bidx < nb;
    auto live2 = expand_dims(live, 1);
    auto blk = expand_dims(row_base + (bidx * f.block_bytes).to(DType::i64), 1);  // [S,1]
    auto ld = [&](const Pointer& p, const Value& mask) {
      return masked ? load(p, broadcast_to(mask, p.offsets.shape()), 0.0) : load(p);
    };
    auto bytes = [&](const Value& off, int64_t n) {
      return ld(w + (off + arange(n).to(DType::i64)), live2);
    };
    auto d = f16_value(bytes(blk, 2));  // [S,1]
    Value codes;
    static_assert(fields::Q8_0::qs == fields::Q4_0::qs);
    if (f.type == TensorType::q8_0) {
      codes = bytes(blk + fields::Q8_0::qs, 32) ^ 128;
    } else {  // low nibbles: weights 0-15, high nibbles: 16-31
      auto qs = bytes(blk + fields::Q4_0::qs, 16);
      auto both = reshape(broadcast_to(reshape(qs, {S, 1, 16}), {S, 2, 16}), {S, 32});
      codes = where(broadcast_to(arange(32) < 16, {S, 32}), both & 15, both >> 4);
    }
    auto xb = xblk0 + bidx.to(DType::i64);  // [S]
    auto xq = ld(x.q + (expand_dims(xb * 32, 1) + arange(32).to(DType::i64)), live2);
    auto dot = sum(reshape(codes.to(DType::i32) * xq.to(DType::i32), {S, 8, 4}), 2);  // [S,8]
    auto dx = ld(x.d + xb, live);  // 0 for blocks past the row: they add nothing
    auto sx = ld(x.s + xb, live).to(DType::f32);
    auto dd = reshape(d, {S}) * dx;
    acc = fma(dot.to(DType::f32), broadcast_to(expand_dims(dd, 1), {S, 8}), Value(acc));
    accm = fma(dd * static_cast<double>(code_offset(f.type)), sx, Value(accm));
  };
  auto full = nb / static_cast<int>(S);
  k.for_(0, full, 1, [&](Value i) { step(i * static_cast<int>(S), false); });
  k.if_(full * static_cast<int>(S) < nb, [&] { step(full * static_cast<int>(S), true); });
  auto out = sum(Value(acc)) - sum(Value(accm));
  store(y + (tok.to(DType::i64) * M.to(DType::i64) + row.to(DType::i64)), out);
}

Kernel build_qgemv(const Spec& s) {
  KernelBuilder k("qgemv", s);
  const int64_t BM = s.constexpr_("BLOCK_M"), BT = s.constexpr_("BLOCK_T");
  const GgmlGemm g = declare_ggml_gemm(k, s);
  const TensorTypeInfo& f = g.f;
  const TensorType FMT = f.type;
  auto w = g.w, y = g.y;
  auto xq = g.x.q, xd = g.x.d, xs = g.x.s;
  auto M = g.M, K = g.K, T = g.T, nb = g.nb;
  auto kb = K / 32;  // x blocks per token
  ExpertTiles tiles(k, s, BT, T);
  if (BM == 1 && BT == 1 && (FMT == TensorType::q4_0 || FMT == TensorType::q8_0) &&
      !tiles.grouped()) {
    one_row_pass(k, f, w, {xq, xd, xs}, y, M, nb, kb);
    return k.finish();
  }
  // Plain, token blocks vary fastest, so a row block's weights stay in
  // cache while every token block passes over them (ExpertTiles::row_block).
  tiles.run([&] {
    auto row0 = tiles.row_block() * static_cast<int>(BM);
    auto tok0 = tiles.first();
    auto toks = tiles.x_rows(BT);
    auto we = tiles.weights(w);
    // Full row blocks load unmasked (contiguous vector loads); only the last
    // row block, whose rows run past m, takes the masked path.
    auto rows_pass = [&](bool row_masked) {
      auto rows = row0 + arange(BM);
      auto rmask = expand_dims(rows < M, 1);
      auto row_bytes = (nb * f.block_bytes).to(DType::i64);
      auto row_base = expand_dims(rows.to(DType::i64) * row_bytes, 1);  // [BM,1]
      // On a CPU one token decodes whole blocks, the fewest instructions
      // per weight byte, and several tokens share steps sized for their
      // registers. On a SIMT target, where each thread already holds a few
      // elements of the tile, unrolling a block's sub-blocks would only
      // multiply the code NVRTC compiles and the registers it keeps live
      // (decode's Q6_K: 88 KB of CUDA C, 196 registers): there a runtime
      // loop takes one sub-block a step.
      const DecodeSteps steps = s.target.warp_size > 1 ? DecodeSteps::sub_blocks
                                : BT > 1               ? DecodeSteps::shared
                                                       : DecodeSteps::block;
      TokenDots dots(k, {xq, xd, xs}, toks, kb, BM, code_piece_bytes(FMT, steps) / 4,
                     scale_min_k(FMT) && steps == DecodeSteps::block ? 8 : 0);
      const OneTokenDots one{{xq, xd, xs}, toks[0] * kb, &dots};
      BlockDecoder dec(
          FMT, BM, steps, we,
          [&](const Pointer& p) { return row_masked ? load(p, rmask, 0.0) : load(p); }, &one);
      auto step = [&](const Value& b, const Value& part) {
        auto blk = row_base + (b * f.block_bytes).to(DType::i64);  // [BM,1]
        for (const SubBlock& sb : dec.decode(blk, part, b * static_cast<int>(f.block_elems / 32)))
          dots.add(sb);
      };
      k.for_(0, nb, 1, [&](Value b) {
        // The 32-weight formats' next row block a block at a time, as gemv
        // does: hardware prefetch stops at each page, and their rows are
        // short (kiln bench, 2 threads, alternated 3x, at 14336x4096: Q4_1
        // 0.68 -> 0.83-0.86 of the probe, Q5_0 0.49-0.57 -> 0.83-0.85,
        // MXFP4 0.52 -> 0.74-0.93; at 4096x14336 0.68-0.75 -> 0.70-0.89).
        // The 256-weight formats' plain pass gained nothing clear (Q4_K lost).
        if (!row_masked && steps == DecodeSteps::block && small_blocks(FMT))
          prefetch(we + (row_base + (b * f.block_bytes).to(DType::i64) +
                         static_cast<int64_t>(BM) * row_bytes));
        if (dec.steps_per_block() == 1)
          step(b, b);
        else
          k.for_(0, static_cast<int>(dec.steps_per_block()), 1, [&](Value p) { step(b, p); });
      });
      dots.store_tokens(y, tok0, T, M, rows, row_masked);
    };
    split_row_block(k, s.target, row0, BM, M, rows_pass);
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "qgemv",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens, W in ggml blocks (FMT = type id: Q4_0 2, Q4_1 3, "
               "Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14, IQ2_XXS 16, "
               "IQ2_XS 17, IQ3_XXS 18, IQ4_NL 20, IQ3_S 21, IQ2_S 22, IQ4_XS 23, MXFP4 39), x from "
               "quantize_q8",
    .dtype_roles = {},
    // GROUPED: plain or one launch for a layer's experts (expert_tiles.h).
    .constexpr_defaults = {{"FMT", 8}, {"BLOCK_M", 8}, {"BLOCK_T", 1}, {"GROUPED", 0}},
    .build = build_qgemv,
    .launch_shape = [](const Spec& s,
                       const ScalarArgs& a) { return ggml_gemm_launch("qgemv", s, a); },
    // Prompts share each decoded weight block among BLOCK_T tokens of 8
    // rows: 8 tokens for Q4_K and Q5_K (TinyLlama Q4_K_M prefill, mean of 3
    // runs: 128 -> 139 tok/s), 4 for the rest (Q6_K spills at 8). Decode
    // streams the weights from DRAM: one row per program (one prefetchable
    // stream per thread) for Q4_0 and Q8_0, whose one-row pass takes 8
    // blocks per step as a tile (1.7x the tok/s of 8 interleaved rows on
    // TinyLlama); 4 rows for the 16-weight-group formats, whose per-group
    // scales are [rows, 8] tiles; 16 for the other 32-weight blocks and 8
    // for the rest, which gain most from sharing x's blocks. kiln bench, 2
    // threads, fraction of the probe at 4096x14336 / 14336x4096 (rows per
    // program), on Zen 5, 8 and 16 alternated 3x, medians: Q4_1 0.69 / 0.60
    // (8), 0.75 / 0.69 (16); Q5_0 0.63 / 0.42, 0.68 / 0.53; Q5_1 0.72 /
    // 0.66, 0.76 / 0.61; IQ4_NL 0.60 / 0.47, 0.72 / 0.51; MXFP4 0.59 / 0.38,
    // 0.71 / 0.52. Earlier, on Zen 4:
    //   Q4_1 0.19 / 0.22 (1), 0.66 / 0.47 (4), 0.75 / 0.44 (8); Q5_0 and
    //   Q5_1 alike; IQ4_NL 0.69 / 0.45 (4), 0.80 / 0.52 (8); IQ4_XS and
    //   MXFP4 alike; Q2_K 0.24 / 0.23 (1), 0.47 / 0.31 (4), 0.48 / 0.29 (8);
    //   Q3_K 0.49 / 0.47 (1), 0.60 / 0.43 (4), 0.62 / 0.38 (8); Q6_K 0.66 /
    //   0.66 (1), 0.84 (4), 0.85 / 0.68 (8); Q4_K 33 -> 55 GB/s (1 -> 8).
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      const TensorType fmt = block_type_info(s.constexpr_("FMT")).type;
      if (a.i("t") >= 4) return {{"BLOCK_T", scale_min_k(fmt) ? 8 : 4}, {"BLOCK_M", 8}};
      const bool one_row = fmt == TensorType::q4_0 || fmt == TensorType::q8_0;
      return {{"BLOCK_T", 1},
              {"BLOCK_M", one_row             ? 1
                          : group_scales(fmt) ? 4
                          : small_blocks(fmt) ? 16
                                              : 8}};
    },
    .tunables = {{"BLOCK_M", {1, 2, 4, 8, 16}}, {"BLOCK_T", {1, 2, 4, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over k/32 blocks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
