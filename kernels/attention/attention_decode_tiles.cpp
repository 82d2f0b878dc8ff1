// Split-K decode attention (flash-decoding) as tile dots: the first pass of
// attention_decode_split, with the tile strategy (tile_blocks.h) in place of
// the walk, for machines with matrix units. The cuda kernel policy runs it
// over f16, bf16 and q8_0 caches (runtime/cuda/cuda_policy.h).
//
// A program holds BLOCK_G heads of one GQA group at one token as the rows of
// a [BLOCK_G, HEAD_DIM] query tile (heads past the group repeat its last
// head and are not stored) and walks one slice of SPLIT keys of the group's
// KV head: the slice is read once for the whole group, every score of the
// group is one dot with K^T, and the slices spread a long cache over the
// GPU's blocks. On a GPU BLOCK_G = 16 is one mma M: a group of 8 heads
// leaves half of the score mma idle, which decode (bound by reading the
// cache) does not feel. It writes the partial states of decode_split.h;
// attention_decode_merge normalises them, with the sinks.
#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/decode_split.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/attention/tile_blocks.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_decode_tiles(const Spec& s) {
  KernelBuilder k("attention_decode_tiles", s);
  const SplitPass p = declare_split_pass(k, s, "attention_decode_tiles");
  const int64_t D = p.head_dim, BG = p.block_g, KB = p.key_block;
  auto g = k.program_id(0) * static_cast<int>(BG) + arange(BG);
  auto valid = g < broadcast_to(p.group, {BG});
  auto head = broadcast_to(p.kvh * p.group, {BG}) + minimum(g, broadcast_to(p.group - 1, {BG}));
  auto row = broadcast_to(p.t * p.sc.n_heads, {BG}) + head;
  const TileQuery qt =
      tile_query(p.q, p.sc.q8, row.to(DType::i64) * D, D, p.sc.scale, s.dtype("KV"));
  KvView kv = p.sc.kv;
  kv.kvh = p.kvh;
  TileState st = tile_start(k, BG, D);
  const SliceKeys range = split_keys(p);
  // Every row sees the same keys, so the block's mask is the range's.
  k.for_(range.begin / static_cast<int>(KB),
         (range.end + static_cast<int>(KB - 1)) / static_cast<int>(KB), 1, [&](Value block) {
           auto keys = broadcast_to(block * static_cast<int>(KB), {KB}) + arange(KB);
           auto seen =
               (keys >= broadcast_to(range.begin, {KB})) & (keys < broadcast_to(range.end, {KB}));
           tile_block(k, kv, qt, block, seen, broadcast_to(expand_dims(seen, 0), {BG, KB}), st);
         });

  auto part = row.to(DType::i64) * broadcast_to(split_slices(p).to(DType::i64), {BG}) +
              broadcast_to(p.slice.to(DType::i64), {BG});
  auto live = [&](int64_t n) { return broadcast_to(expand_dims(valid, 1), {BG, n}); };
  store(p.part_o + (expand_dims(part * D, 1) + expand_dims(arange(D).to(DType::i64), 0)),
        st.acc.get(), live(D));
  auto is_m = broadcast_to(expand_dims(arange(2) == 0, 0), {BG, 2});
  store(p.part_ml + (expand_dims(part * 2, 1) + expand_dims(arange(2).to(DType::i64), 0)),
        where(is_m, broadcast_to(expand_dims(st.m.get(), 1), {BG, 2}),
              broadcast_to(expand_dims(st.l.get(), 1), {BG, 2})),
        live(2));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_decode_tiles",
    .family = "attention",
    .summary = "split-K decode attention, pass 1, as tile dots (mma on GPUs): each slice of SPLIT "
               "keys of a KV head's cache into the partial states of its group's heads",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::i8}}, kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"BLOCK_G", 16}, {"SPLIT", 512}, {"PAGE", 0}},
    .build = build_attention_decode_tiles,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          return decode_split_launch_shape("attention_decode_tiles", s, a);
        },
    // A CPU (whose policy keeps the walk; the kernel runs there for tests
    // and inspection) takes 4 heads a program: a 16-row [16, HEAD_DIM] tile leaves
    // LLVM's register allocator 20 s of work at AVX2.
    .heuristic = [](const Spec& s) -> std::map<std::string, int64_t> {
      if (s.target.warp_size == 1) return {{"BLOCK_G", 4}};
      return {};
    },
    .tunables = {{"BLOCK_G", {16, 32}}},
    .shape_keys = {"kv_len", "n_heads", "n_kv_heads"},
    // As attention_prefill_tiles: q and P rounded to the cache's dtype before
    // their dots (as the interpreter rounds them); reassociated f32 sums.
    .rtol = 1e-3,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
