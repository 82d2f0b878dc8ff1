#include "kernels/attention/kv_cache.h"

#include "kernels/attention/attention_shape.h"

namespace kiln {

namespace {
int64_t key_blocks(int64_t max_ctx, int64_t kb) { return (max_ctx + kb - 1) / kb; }
}  // namespace

int64_t kv_key_block(const TargetDesc& t) { return attention_lanes(t); }

bool is_kv_cache_dtype(DType t) { return t == DType::f16 || t == DType::bf16 || t == DType::f32; }

int64_t k_cache_elems(int64_t max_ctx, int64_t n_kv_heads, int64_t head_dim, int64_t kb) {
  return n_kv_heads * key_blocks(max_ctx, kb) * kb * head_dim;
}

int64_t v_cache_elems(int64_t max_ctx, int64_t n_kv_heads, int64_t head_dim) {
  return n_kv_heads * max_ctx * head_dim;
}

int64_t k_cache_index(int64_t j, int64_t h, int64_t d, int64_t max_ctx, int64_t head_dim,
                      int64_t kb) {
  return ((h * key_blocks(max_ctx, kb) + j / kb) * head_dim + d) * kb + j % kb;
}

int64_t v_cache_index(int64_t j, int64_t h, int64_t d, int64_t max_ctx, int64_t head_dim) {
  return (h * max_ctx + j) * head_dim + d;
}

Value k_tile_offsets(const Value& kvh, const Value& max_ctx, const Value& block, int64_t head_dim,
                     int64_t key_block, int64_t d0, int64_t nd, const Value& lane0, int64_t nk) {
  const int kb = static_cast<int>(key_block);
  auto blocks = ((max_ctx + (kb - 1)) / kb).to(DType::i64);
  auto base = ((kvh.to(DType::i64) * blocks + block.to(DType::i64)) * head_dim + d0) * key_block +
              lane0.to(DType::i64);
  auto dims = expand_dims(arange(nd).to(DType::i64) * key_block, 1);  // [nd, 1]
  auto lanes = expand_dims(arange(nk).to(DType::i64), 0);             // [1, nk]
  return base + dims + lanes;
}

Value v_tile_offsets(const Value& kvh, const Value& max_ctx, const Value& keys, int64_t head_dim) {
  auto rows = kvh.to(DType::i64) * max_ctx.to(DType::i64) + keys.to(DType::i64);
  return expand_dims(rows * head_dim, 1) + expand_dims(arange(head_dim).to(DType::i64), 0);
}

Value load_k_tile(const Buffer& k, const Value& kvh, const Value& max_ctx, const Value& block,
                  int64_t head_dim, int64_t key_block, int64_t d0, int64_t nd, const Value& lane0,
                  int64_t nk, const Value& key_mask) {
  auto p = k + k_tile_offsets(kvh, max_ctx, block, head_dim, key_block, d0, nd, lane0, nk);
  if (!key_mask.valid()) return load(p).to(DType::f32);
  return load(p, broadcast_to(expand_dims(key_mask, 0), {nd, nk}), 0.0).to(DType::f32);
}

Value load_v_rows(const Buffer& v, const Value& kvh, const Value& max_ctx, const Value& keys,
                  int64_t head_dim, const Value& key_mask) {
  auto p = v + v_tile_offsets(kvh, max_ctx, keys, head_dim);
  if (!key_mask.valid()) return load(p).to(DType::f32);
  const int64_t n = keys.shape()[0];
  return load(p, broadcast_to(expand_dims(key_mask, 1), {n, head_dim}), 0.0).to(DType::f32);
}

void prefetch_kv_block(const Buffer& k, const Buffer& v, const Value& kvh, const Value& max_ctx,
                       const Value& block, int64_t head_dim, int64_t key_block) {
  // A K block and its V rows are each key_block * head_dim contiguous
  // elements: one offset per 64-byte line from the first.
  constexpr int64_t kLineBytes = 64;
  const int64_t elem = dtype_bytes(k.dtype());
  auto lines =
      arange(std::max<int64_t>(1, key_block * head_dim * elem / kLineBytes)).to(DType::i64) *
      (kLineBytes / elem);
  auto first_k =
      k_tile_offsets(kvh, max_ctx, block, head_dim, key_block, 0, 1, zeros(DType::i32, {}), 1);
  auto first_key = reshape(block * static_cast<int>(key_block), {1});
  auto first_v = slice(v_tile_offsets(kvh, max_ctx, first_key, head_dim), {0, 0}, {1, 1});
  prefetch(k + (reshape(first_k, {}) + lines));
  prefetch(v + (reshape(first_v, {}) + lines));
}

}  // namespace kiln
