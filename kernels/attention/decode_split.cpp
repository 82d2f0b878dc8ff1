#include "kernels/attention/decode_split.h"

#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

void check_split(const std::string& kernel, int64_t split, int64_t key_block) {
  if (split < key_block || split % key_block)
    throw Error("kernel '" + kernel + "': SPLIT must be a positive multiple of the key block (" +
                std::to_string(key_block) + "), got " + std::to_string(split));
}

SplitPass declare_split_pass(KernelBuilder& k, const Spec& s, const std::string& kernel) {
  const DType KV = s.dtype("KV");
  const int64_t D = s.constexpr_("HEAD_DIM"), BG = s.constexpr_("BLOCK_G"),
                SPLIT = s.constexpr_("SPLIT"), KB = kv_key_block(s.target);
  check_attention_constexprs(kernel, D, attention_lanes(s.target), {{"BLOCK_G", BG}});
  check_split(kernel, SPLIT, KB);
  check_kv_layout(kernel, s);
  auto q = k.buffer("q", query_dtype(s)), kc = k.buffer("k", KV), vc = k.buffer("v", KV);
  auto part_o = k.buffer("part_o", DType::f32), part_ml = k.buffer("part_ml", DType::f32);
  DecodeScalars sc = declare_decode_scalars(k, s, kc, vc);
  auto slice = k.program_id(1), kvh = k.program_id(2) % sc.n_kv, t = k.program_id(2) / sc.n_kv;
  return {q, part_o, part_ml, sc, slice, kvh, t, sc.n_heads / sc.n_kv, D, BG, SPLIT, KB};
}

Value split_slices(const SplitPass& p) {
  const int split = static_cast<int>(p.split);
  return (p.sc.max_ctx + (split - 1)) / split;
}

SliceKeys split_keys(const SplitPass& p) {
  const int split = static_cast<int>(p.split);
  auto pos = p.sc.pos0 + p.t;
  auto first = p.slice * split;
  auto end = minimum(first + split, minimum(pos + 1, p.sc.kv_len));
  return {maximum(first, window_begin(pos, p.sc.window)), end};
}

int64_t decode_partial_rows(int64_t n_tokens, int64_t n_heads, int64_t max_ctx, int64_t split) {
  return n_tokens * n_heads * cdiv(max_ctx, split);
}

LaunchShape decode_split_launch_shape(const std::string& kernel, const Spec& s,
                                      const ScalarArgs& a) {
  AttentionSizes z = attention_sizes(kernel, s, a);
  const int64_t split = s.constexpr_("SPLIT");
  auto elems = z.buffer_elems();
  elems.erase("out");
  const int64_t rows = decode_partial_rows(z.n_tokens, z.n_heads, z.max_ctx, split);
  elems["part_o"] = rows * z.head_dim;
  elems["part_ml"] = rows * 2;
  return LaunchShape{
      {cdiv(z.group, s.constexpr_("BLOCK_G")), cdiv(z.kv_len, split), z.n_kv_heads * z.n_tokens},
      elems};
}

}  // namespace kiln
