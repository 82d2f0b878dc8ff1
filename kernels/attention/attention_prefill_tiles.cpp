// Causal GQA flash attention of a block of query tokens as tile dots: the
// block strategy for machines with matrix units, where attention_prefill's
// walk (kv_walk.h) is scheduled for a CPU's vector registers. The cuda
// kernel policy runs it over f16, bf16 and q8_0 caches
// (runtime/cuda/cuda_policy.h).
//
// A program holds BLOCK_M query tokens of one head as a [BLOCK_M, HEAD_DIM]
// tile and walks the keys one K block at a time through the same cache view
// as the walk, with the tile strategy of tile_blocks.h (scores and P V as
// tile dots, the online softmax in between). Windows and sinks mask and
// normalise as every attention kernel does; a paged cache is addressed
// through its block table.
#include "ir/builder.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_sinks.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"
#include "kernels/attention/kv_walk.h"
#include "kernels/attention/prefill_rows.h"
#include "kernels/attention/tile_blocks.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_attention_prefill_tiles(const Spec& s) {
  KernelBuilder k("attention_prefill_tiles", s);
  check_prefill_constexprs("attention_prefill_tiles", s);
  const DType KV = s.dtype("KV"), T = s.dtype("T");
  const int64_t D = s.constexpr_("HEAD_DIM"), BM = s.constexpr_("BLOCK_M");
  const int64_t KB = kv_key_block(s.target);
  PrefillInputs in = declare_prefill_params(k, s, query_dtype(s));
  in.q8 = declare_query_scales(k, s);
  const Value sink = sink_logit(declare_sinks(k, s), in.head);
  const KvView& kv = in.kv;
  const Value &n_tokens = in.n_tokens, &n_heads = in.n_heads, &kv_len = in.kv_len, &pos0 = in.pos0,
              &window = in.window, &h = in.head, &t0 = in.t0;

  // The block's rows: token t0 + r (a padding row past the prompt reads the
  // last token and is not stored), its position and its visible keys.
  auto row = t0 + arange(BM);
  auto live = row < broadcast_to(n_tokens, {BM});
  auto tok = minimum(row, broadcast_to(n_tokens - 1, {BM}));
  auto pos = broadcast_to(pos0, {BM}) + tok;
  auto lo = expand_dims(window_begin(pos, window), 1);
  auto hi = expand_dims(minimum(pos + 1, broadcast_to(kv_len, {BM})), 1);
  auto qrow = (tok * n_heads + broadcast_to(h, {BM})).to(DType::i64) * D;
  const TileQuery qt = tile_query(in.q, in.q8, qrow, D, in.scale, KV);

  TileState st = tile_start(k, BM, D);
  // The keys any row sees: from the first row's window to the last row's
  // position; rows see both ends grow with their positions.
  auto last = minimum(t0 + static_cast<int>(BM), n_tokens) - 1;
  auto first_key = window_begin(pos0 + t0, window);
  auto end_key = minimum(pos0 + last + 1, kv_len);
  k.for_(first_key / static_cast<int>(KB),
         (end_key + static_cast<int>(KB - 1)) / static_cast<int>(KB), 1, [&](Value block) {
           auto keys = broadcast_to(block * static_cast<int>(KB), {KB}) + arange(KB);
           // Only keys some row sees are read: past them lie a block's padding and
           // rows no query of the program may weight (0 * NaN would reach P V).
           auto stored =
               (keys >= broadcast_to(first_key, {KB})) & (keys < broadcast_to(end_key, {KB}));
           auto key_row = expand_dims(keys, 0);
           tile_block(k, kv, qt, block, stored, (key_row >= lo) & (key_row < hi), st);
         });
  auto norm = softmax_normaliser(st.m.get(), st.l.get(), sink);
  auto qoff = expand_dims(qrow, 1) + expand_dims(arange(D).to(DType::i64), 0);
  store(in.out + qoff, (st.acc.get() * expand_dims(norm, 1)).to(T),
        broadcast_to(expand_dims(live, 1), {BM, D}));
  return k.finish();
}
KILN_REGISTER_KERNEL((KernelDef{
    .name = "attention_prefill_tiles",
    .family = "attention",
    .summary = "causal GQA flash attention of a block of query tokens as tile dots (mma on GPUs)",
    .dtype_roles = {{"KV", {DType::f16, DType::bf16, DType::i8}}, kActivationRole},
    .constexpr_defaults = {{"HEAD_DIM", 128}, {"BLOCK_M", 16}, {"SINKS", 0}, {"PAGE", 0}},
    .build = build_attention_prefill_tiles,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          return prefill_launch_shape("attention_prefill_tiles", s, a);
        },
    // A CPU (whose policy keeps the walk; the kernel runs there for tests
    // and inspection) takes 4 query tokens a program: a 16-row [16, HEAD_DIM] tile leaves
    // LLVM's register allocator 20 s of work at AVX2.
    .heuristic = [](const Spec& s) -> std::map<std::string, int64_t> {
      if (s.target.warp_size == 1) return {{"BLOCK_M", 4}};
      return {};
    },
    .tunables = {{"BLOCK_M", {16, 32, 64}}},
    .shape_keys = {"n_tokens", "kv_len", "n_heads"},
    // q and the weights P rounded to the cache's dtype (f16: 2^-11
    // relative, bf16: 2^-8) before their dots, which accumulate in f32.
    // Against the interpreter (the same roundings) the reassociated scores
    // may round a weight the other way: the output then moves by 2^-11 of
    // that weight times its V row.
    .rtol = 1e-3,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
