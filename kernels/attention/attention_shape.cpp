#include "kernels/attention/attention_shape.h"

#include <algorithm>
#include <limits>

#include "ir/error.h"
#include "kernels/attention/attention_window.h"
#include "kernels/attention/kv_cache.h"

namespace kiln {

std::map<std::string, int64_t> AttentionSizes::buffer_elems() const {
  int64_t qn = n_tokens * n_heads * head_dim;
  if (kbits) {
    const int64_t rows = max_ctx * n_kv_heads;
    return {{"q", qn},
            {"out", qn},
            {"k", rows * packed_words(head_dim, kbits)},
            {"v", rows * packed_words(head_dim, vbits)},
            {"k_scale", rows},
            {"v_scale", rows},
            {"sinks", n_heads}};
  }
  if (page > 0)
    return with_kv_scales({{"q", qn},
                           {"out", qn},
                           {"k", k_pool_elems(n_pages, n_kv_heads, head_dim, page)},
                           {"v", v_pool_elems(n_pages, n_kv_heads, head_dim, page)},
                           {"block_table", (max_ctx + page - 1) / page},
                           {"sinks", n_heads}});
  return with_kv_scales({{"q", qn},
                         {"out", qn},
                         {"k", k_cache_elems(max_ctx, n_kv_heads, head_dim, key_block)},
                         {"v", v_cache_elems(max_ctx, n_kv_heads, head_dim)},
                         {"sinks", n_heads}});
}

AttentionSizes attention_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a) {
  AttentionSizes z{
      a.i("n_tokens"),       a.i("n_heads"), a.i("n_kv_heads"), 0,
      a.i("max_ctx"),        a.i("kv_len"),  a.i("pos0"),       s.constexpr_("HEAD_DIM"),
      kv_key_block(s.target)};
  check_window(kernel, a.i("window"));
  check_kv_layout(kernel, s);
  z.page = s.constexpr_("PAGE");
  if (z.page > 0) z.n_pages = pool_pages(kernel, a);
  if (is_aura_kv(s.dtype("KV"))) {
    z.kbits = static_cast<int>(s.constexpr_("KBITS"));
    z.vbits = static_cast<int>(s.constexpr_("VBITS"));
  }
  const std::string who = "kernel '" + kernel + "': ";
  auto str = [](int64_t v) { return std::to_string(v); };
  if (z.n_tokens < 1) throw Error(who + "n_tokens = " + str(z.n_tokens) + " (need >= 1)");
  if (z.n_heads < 1 || z.n_kv_heads < 1)
    throw Error(who + "n_heads = " + str(z.n_heads) + " and n_kv_heads = " + str(z.n_kv_heads) +
                " must both be >= 1");
  if (z.n_heads % z.n_kv_heads)
    throw Error(who + "n_heads = " + str(z.n_heads) +
                " is not a multiple of n_kv_heads = " + str(z.n_kv_heads));
  z.group = z.n_heads / z.n_kv_heads;
  if (z.pos0 < 0) throw Error(who + "pos0 = " + str(z.pos0) + " is negative");
  if (z.pos0 + z.n_tokens > z.kv_len)
    throw Error(who + "pos0 + n_tokens = " + str(z.pos0) + " + " + str(z.n_tokens) +
                " exceeds kv_len = " + str(z.kv_len) + " (the cache must hold every query token)");
  if (z.kv_len > z.max_ctx)
    throw Error(who + "kv_len = " + str(z.kv_len) + " exceeds max_ctx = " + str(z.max_ctx) +
                " (the rows the cache holds)");
  // Element offsets are i64 in the kernels, but row indices are i32.
  const int64_t i32_max = std::numeric_limits<int32_t>::max();
  if (z.n_tokens * z.n_heads > i32_max || z.max_ctx * z.n_kv_heads > i32_max ||
      z.n_pages * z.n_kv_heads * z.page > i32_max)
    throw Error(who + "more than 2^31 rows of q or of the cache");
  return z;
}

std::map<std::string, int64_t> VarlenSizes::buffer_elems() const {
  const int64_t qn = n_tokens * n_heads * head_dim;
  return with_kv_scales({{"q", qn},
                         {"out", qn},
                         {"k", k_pool_elems(n_pages, n_kv_heads, head_dim, page)},
                         {"v", v_pool_elems(n_pages, n_kv_heads, head_dim, page)},
                         {"cu_seqlens", n_seqs + 1},
                         {"seq_pos0", n_seqs},
                         {"block_table", n_seqs * ((max_ctx + page - 1) / page)},
                         {"sinks", n_heads}});
}

VarlenSizes varlen_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a) {
  check_window(kernel, a.i("window"));
  VarlenSizes z{a.i("n_tokens"),          a.i("n_heads"),       a.i("n_kv_heads"),
                a.i("max_ctx"),           a.i("n_seqs"),        a.i("max_seq_tokens"),
                s.constexpr_("HEAD_DIM"), s.constexpr_("PAGE"), pool_pages(kernel, a)};
  const std::string who = "kernel '" + kernel + "': ";
  auto str = [](int64_t v) { return std::to_string(v); };
  if (z.n_tokens < 1 || z.n_seqs < 1 || z.max_seq_tokens < 1 || z.max_ctx < 1)
    throw Error(who + "n_tokens = " + str(z.n_tokens) + ", n_seqs = " + str(z.n_seqs) +
                ", max_seq_tokens = " + str(z.max_seq_tokens) + " and max_ctx = " + str(z.max_ctx) +
                " must all be >= 1");
  if (z.max_seq_tokens > z.n_tokens || z.max_seq_tokens > z.max_ctx)
    throw Error(who + "max_seq_tokens = " + str(z.max_seq_tokens) +
                " exceeds n_tokens = " + str(z.n_tokens) + " or max_ctx = " + str(z.max_ctx));
  if (z.n_heads < 1 || z.n_kv_heads < 1 || z.n_heads % z.n_kv_heads)
    throw Error(who + "n_heads = " + str(z.n_heads) +
                " is not a positive multiple of n_kv_heads = " + str(z.n_kv_heads));
  const int64_t i32_max = std::numeric_limits<int32_t>::max();
  if (z.n_tokens * z.n_heads > i32_max || z.n_pages * z.n_kv_heads * z.page > i32_max)
    throw Error(who + "more than 2^31 rows of q or of the pool");
  return z;
}

int64_t check_varlen_batch(const std::vector<int32_t>& cu, const std::vector<int32_t>& pos0,
                           int64_t n_tokens, int64_t max_ctx) {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (cu.size() != pos0.size() + 1 || pos0.empty())
    throw Error("varlen batch: cu_seqlens has " + str(static_cast<int64_t>(cu.size())) +
                " entries for " + str(static_cast<int64_t>(pos0.size())) +
                " sequences (need one more, and >= 1 sequence)");
  if (cu.front() != 0 || cu.back() != n_tokens)
    throw Error("varlen batch: cu_seqlens runs from " + str(cu.front()) + " to " + str(cu.back()) +
                ", not from 0 to n_tokens = " + str(n_tokens));
  int64_t longest = 0;
  for (size_t i = 0; i < pos0.size(); ++i) {
    const int64_t n = cu[i + 1] - cu[i];
    if (n < 0 || pos0[i] < 0 || pos0[i] + n > max_ctx)
      throw Error("varlen batch: sequence " + str(static_cast<int64_t>(i)) + " has " + str(n) +
                  " tokens at position " + str(pos0[i]) +
                  " (need >= 0 tokens within max_ctx = " + str(max_ctx) + ")");
    longest = std::max(longest, n);
  }
  return std::max<int64_t>(longest, 1);
}

std::map<std::string, int64_t> DecodeBatchSizes::buffer_elems() const {
  const int64_t qn = n_seqs * n_heads * head_dim;
  return with_kv_scales({{"q", qn},
                         {"out", qn},
                         {"k", k_pool_elems(n_pages, n_kv_heads, head_dim, page)},
                         {"v", v_pool_elems(n_pages, n_kv_heads, head_dim, page)},
                         {"seq_len", n_seqs},
                         {"block_table", n_seqs * ((max_ctx + page - 1) / page)},
                         {"sinks", n_heads}});
}

DecodeBatchSizes decode_batch_sizes(const std::string& kernel, const Spec& s, const ScalarArgs& a) {
  check_window(kernel, a.i("window"));
  check_kv_layout(kernel, s);
  DecodeBatchSizes z{
      a.i("n_seqs"),  a.i("n_heads"),           a.i("n_kv_heads"),    0,
      a.i("max_ctx"), s.constexpr_("HEAD_DIM"), s.constexpr_("PAGE"), pool_pages(kernel, a)};
  const std::string who = "kernel '" + kernel + "': ";
  auto str = [](int64_t v) { return std::to_string(v); };
  if (z.n_seqs < 1 || z.max_ctx < 1)
    throw Error(who + "n_seqs = " + str(z.n_seqs) + " and max_ctx = " + str(z.max_ctx) +
                " must both be >= 1");
  if (z.n_heads < 1 || z.n_kv_heads < 1 || z.n_heads % z.n_kv_heads)
    throw Error(who + "n_heads = " + str(z.n_heads) +
                " is not a positive multiple of n_kv_heads = " + str(z.n_kv_heads));
  z.group = z.n_heads / z.n_kv_heads;
  const int64_t i32_max = std::numeric_limits<int32_t>::max();
  if (z.n_seqs * z.n_heads > i32_max || z.n_pages * z.n_kv_heads * z.page > i32_max)
    throw Error(who + "more than 2^31 rows of q or of the pool");
  return z;
}

namespace {

// `rows`, capped by n rounded up to a power of two.
int64_t walk_rows(int64_t rows, int64_t n) {
  int64_t cap = 1;
  while (cap < n) cap *= 2;
  return std::min(rows, cap);
}

}  // namespace

// The walk keeps its accumulators in scratch and a part of HEAD_DIM of
// them in registers at a time (kv_walk.h), so rows are no longer bound by
// the register file, but by the score loop's registers (a score vector per
// row). Prefill of 512 tokens at 8 rows: 0.59 and 0.66 of the FMA peak
// (HEAD_DIM 64, 128), 4 rows 0.57 and 0.64, 16 rows 0.44 and 0.49.
//
// Decode takes a whole GQA group of up to 8 heads where the score vectors
// fill at most a quarter of the registers (AVX-512; 4 heads on AVX2 and
// NEON, unmeasured there): a program per 4 heads reads the group's cache
// twice. Xeon (Emerald Rapids), 2 threads, 4096 and 32768 keys, 4 -> 8
// heads: 32x4x64 f16 0.30 -> 0.25 and 2.5 -> 1.8 ms (0.42 -> 0.59 of the
// probe), q8_0 0.22 -> 0.17 and 1.8 -> 1.3 ms, 32x4x128 f16 0.63 -> 0.55
// and 5.7 -> 4.2 ms; split-K alike. CUDA keeps 4 (not measured).
// AURA's 8-bit keys cost a 256-entry lookup per code, paid once per program
// for its rows, so they take 8 rows: aura8v4, 32x4x64, 16384 keys, 1.15 ->
// 0.70 ms (split-K 0.88 -> 0.66); its other widths 4, as they are slower
// at 8 (aura4v4 0.50 -> 0.64 ms; on the Xeon 0.27 -> 0.30 at 4096 keys).
std::map<std::string, int64_t> decode_block_g(const Spec& s, const ScalarArgs& a) {
  const TargetDesc& t = s.target;
  int64_t rows = 4;
  if (is_aura_kv(s.dtype("KV"))) {
    if (s.constexpr_("KBITS") == 8) rows = 8;
  } else if (t.warp_size == 1) {
    const int64_t score_registers = cdiv(kv_key_block(t), t.lanes(DType::f32));
    rows = std::clamp<int64_t>(t.vector_registers / (4 * score_registers), 1, 8);
  }
  return {{"BLOCK_G", walk_rows(rows, a.i("n_heads") / std::max<int64_t>(1, a.i("n_kv_heads")))}};
}

std::map<std::string, int64_t> prefill_block_m(const Spec&, const ScalarArgs& a) {
  return {{"BLOCK_M", walk_rows(8, a.i("n_tokens"))}};
}

int64_t attention_lanes(const TargetDesc& t) {
  return std::clamp<int64_t>(t.lanes(DType::f32), 8, 16);
}

void check_attention_constexprs(const std::string& kernel, int64_t head_dim, int64_t lanes,
                                const std::vector<std::pair<std::string, int64_t>>& blocks) {
  if (head_dim <= 0 || head_dim % lanes)
    throw Error("kernel '" + kernel + "': HEAD_DIM must be a positive multiple of " +
                std::to_string(lanes) + ", got " + std::to_string(head_dim));
  for (const auto& [name, v] : blocks)
    if (v < 1 || (v & (v - 1)))
      throw Error("kernel '" + kernel + "': " + name + " must be a power of two, got " +
                  std::to_string(v));
}

void check_store_rows(const std::string& kernel, int64_t n_tokens, int64_t n_kv, int64_t max_ctx,
                      int64_t pos0) {
  const std::string who = "kernel '" + kernel + "': ";
  if (n_tokens < 1 || n_kv < 1 || pos0 < 0)
    throw Error(who + "n_tokens = " + std::to_string(n_tokens) +
                ", n_kv_heads = " + std::to_string(n_kv) + " and pos0 = " + std::to_string(pos0) +
                " (need n_tokens, n_kv_heads >= 1, pos0 >= 0)");
  if (pos0 + n_tokens > max_ctx)
    throw Error(who + "pos0 + n_tokens = " + std::to_string(pos0) + " + " +
                std::to_string(n_tokens) + " exceeds max_ctx = " + std::to_string(max_ctx));
}

}  // namespace kiln
