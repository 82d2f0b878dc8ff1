#include "kernels/attention/decode_split.h"

#include "ir/error.h"
#include "kernels/attention/attention_shape.h"

namespace kiln {

void check_split(const std::string& kernel, int64_t split, int64_t key_block) {
  if (split < key_block || split % key_block)
    throw Error("kernel '" + kernel + "': SPLIT must be a positive multiple of the key block (" +
                std::to_string(key_block) + "), got " + std::to_string(split));
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
