// Int4 weight-only GEMV/GEMM over 16-row interleaved weights
// (kernels/quant/int4w.h): y[i] = W x[i] for t tokens, w = (q - z) s with
// f16 scales per GROUP (32, 64 or 128) weights of a row and, with ZP=1,
// u8 zero points (else 8). x from quantize_q8 with QBLOCK=256 (one scale
// per 256, as the K-quants take it), so within a chunk every term is in
// units of the token's scale dx:
//   y += dx sum_j s_j (dot_j(q, xq) - z_j bsum_j),
// dot_j and bsum_j (the token's x code sum, quantize_q8's s) over group j,
// exact in i32 (at most 128 * 15 * 127 and 15 * 128 * 127).
//
// gemv_int4w reads the row-major form; this kernel is what decode uses
// once weights are interleaved at load, as for ggml's formats.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/qgemv/rows16_program.h"
#include "kernels/quant/int4w.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t R = kRows16;

Int4wRows16 layout_of(const Spec& s) {
  const int64_t G = s.constexpr_("GROUP");
  if (G != 32 && G != 64 && G != 128)
    throw Error("kernel 'gemv_int4w_rows16': GROUP must be 32, 64 or 128, got " +
                std::to_string(G));
  return Int4wRows16{G, s.constexpr_("ZP") != 0};
}

void int4w_chunk(const Int4wRows16& L, KernelBuilder& k, const Rows16Context& x,
                 std::vector<Var>& acc) {
  const size_t BT = acc.size();
  // Adds group gidx's terms: dot[i] its codes' dots with token i's x,
  // bsum[i] the token's x code sum over the group.
  auto scale_group = [&](const Value& gidx, const std::vector<Value>& dot,
                         const std::vector<Value>& bsum) {
    auto s = x.f16s(gidx * (2 * R) + static_cast<int>(L.scales_at()));
    auto z = L.zero_points ? x.bytes(gidx * R + static_cast<int>(L.zeros_at()), R).to(DType::i32)
                           : full({R}, 8.0, DType::i32);
    for (size_t i = 0; i < BT; ++i)
      acc[i] = fma((dot[i] - z * bsum[i]).to(DType::f32), s, Value(acc[i]));
  };
  // A runtime loop over the chunk's 4 pairs of 32-weight halves, as Q4_K's
  // (unrolled, the pairs' accumulators spill); a group of 128 is scaled
  // once per pair, which costs one convert and FMA per 16 rows and 64
  // weights.
  k.for_(0, 4, 1, [&](Value p) {
    x.prefetch_ahead(p, 4);
    auto p64 = p.to(DType::i64);
    NibblePairDots d = nibble_pair_dots(x, p64, L.codes_at(), BT);
    std::vector<Value> lo_sum(BT), hi_sum(BT);
    for (size_t i = 0; i < BT; ++i) {
      lo_sum[i] = x.block_sum(i, p64 * 2);
      hi_sum[i] = x.block_sum(i, p64 * 2 + 1);
    }
    if (L.group == 32) {
      scale_group(p64 * 2, d.lo, lo_sum);
      scale_group(p64 * 2 + 1, d.hi, hi_sum);
      return;
    }
    std::vector<Value> dot(BT), bsum(BT);
    for (size_t i = 0; i < BT; ++i) {
      dot[i] = d.lo[i] + d.hi[i];
      bsum[i] = lo_sum[i] + hi_sum[i];
    }
    scale_group(L.group == 64 ? p64 : p64 / 2, dot, bsum);
  });
}

Kernel build_gemv_int4w_rows16(const Spec& s) {
  KernelBuilder k("gemv_int4w_rows16", s);
  const Int4wRows16 L = layout_of(s);
  Rows16Format f{.chunk_bytes = L.chunk_bytes(),
                 .superblock_scaled = true,
                 .split_sums = false,
                 .chunk = [L](KernelBuilder& kb, const Rows16Context& x, std::vector<Var>& acc) {
                   int4w_chunk(L, kb, x, acc);
                 }};
  build_rows16_program(k, s, s.constexpr_("BLOCK_T"), f);
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemv_int4w_rows16",
    .family = "qgemv",
    .summary = "y[i] = W x[i] for t tokens, W int4 weight-only interleaved across 16 rows "
               "(int4w.h; f16 group scales, optional zero points), x from quantize_q8 (QBLOCK=256)",
    .dtype_roles = {},
    // GROUPED: plain or one launch for a layer's experts (expert_tiles.h).
    .constexpr_defaults = {{"GROUP", 128}, {"ZP", 0}, {"BLOCK_T", 1}, {"GROUPED", 0}},
    .build = build_gemv_int4w_rows16,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const Int4wRows16 L = layout_of(s);
          int64_t m = a.i("m"), kk = a.i("k"), bt = s.constexpr_("BLOCK_T");
          return expert_tiles_launch(
              "gemv_int4w_rows16", s, a,
              rows16_launch("gemv_int4w_rows16", bt, m, kk, a.i("t"), L.bytes(m, kk), false), bt,
              "w", {{"xq", kk}, {"xd", kk / 32}, {"xs", kk / 32}});
        },
    // As qgemv_rows16's Q4_K: 6 tokens share each decoded code vector.
    .shape_heuristic = [](const Spec&, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      return rows16_block_t(a.i("t"), 6);
    },
    .tunables = {{"BLOCK_T", {1, 2, 4, 6, 8}}},
    .shape_keys = {"m", "k", "t"},
    // Integer dots are exact; f32 accumulation over a chunk's groups and
    // k/256 chunks.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
