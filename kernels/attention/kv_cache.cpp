#include "kernels/attention/kv_cache.h"

#include <algorithm>
#include <utility>

#include "ir/error.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/aura/aura_codes.h"

namespace kiln {

namespace {
int64_t key_blocks(int64_t max_ctx, int64_t kb) { return (max_ctx + kb - 1) / kb; }
}  // namespace

int64_t kv_key_block(const TargetDesc& t) { return attention_lanes(t); }

bool is_kv_cache_dtype(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::i8 ||
         t == DType::u32;
}

bool is_quantized_kv(DType t) { return t == DType::i8; }
bool is_aura_kv(DType t) { return t == DType::u32; }

std::string kv_cache_type_name(const KvCacheType& t) {
  if (is_aura_kv(t.dtype)) return aura_scheme_name(t.aura);
  return is_quantized_kv(t.dtype) ? "q8_0" : std::string(dtype_name(t.dtype));
}

KvCacheType parse_kv_cache_type(const std::string& text) {
  if (text == "q8_0") return DType::i8;
  if (is_aura_scheme_name(text)) return parse_aura_scheme(text);
  DType t;
  if (text == "i8" || text == "u32" || !try_parse_dtype(text, &t) || !is_kv_cache_dtype(t))
    throw Error("KV cache type '" + text +
                "': expected f16, bf16, f32, q8_0 or an AURA scheme (aura4v4, aura8v4, ...)");
  return t;
}

std::map<std::string, int64_t> with_kv_scales(std::map<std::string, int64_t> elems) {
  elems["k_scale"] = elems.at("k") / kKvQuantBlock;
  elems["v_scale"] = elems.at("v") / kKvQuantBlock;
  if (elems.count("q")) elems["q_scale"] = elems["q_sum"] = elems.at("q") / kKvQuantBlock;
  return elems;
}

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

int64_t k_pool_elems(int64_t n_pages, int64_t n_kv_heads, int64_t head_dim, int64_t page) {
  return n_pages * n_kv_heads * page * head_dim;
}

int64_t v_pool_elems(int64_t n_pages, int64_t n_kv_heads, int64_t head_dim, int64_t page) {
  return n_pages * n_kv_heads * page * head_dim;
}

int64_t k_page_index(int64_t page_id, int64_t j, int64_t h, int64_t d, int64_t n_pages,
                     int64_t head_dim, int64_t page, int64_t kb) {
  return (((h * n_pages + page_id) * (page / kb) + j / kb) * head_dim + d) * kb + j % kb;
}

int64_t v_page_index(int64_t page_id, int64_t j, int64_t h, int64_t d, int64_t n_pages,
                     int64_t head_dim, int64_t page) {
  return ((h * n_pages + page_id) * page + j) * head_dim + d;
}

void check_kv_layout(const std::string& kernel, const Spec& s) {
  const int64_t page = s.constexpr_("PAGE"), kb = kv_key_block(s.target);
  if (page < 0 || page % kb)
    throw Error("kernel '" + kernel + "': PAGE must be 0 (a contiguous cache) or a multiple of " +
                "the key block (" + std::to_string(kb) + "), got " + std::to_string(page));
  const int64_t d = s.constexpr_("HEAD_DIM");
  if (is_aura_kv(s.dtype("KV"))) {
    if (page != 0)
      throw Error("kernel '" + kernel +
                  "': an AURA cache is not paged (PAGE = " + std::to_string(page) + ")");
    check_aura_spec(kernel, s, d);  // HEAD_DIM: the rotated dims
  }
  if (is_quantized_kv(s.dtype("KV")) && d % kKvQuantBlock)
    throw Error("kernel '" + kernel + "': a q8_0 cache needs HEAD_DIM a multiple of " +
                std::to_string(kKvQuantBlock) + ", got " + std::to_string(d));
}

int64_t pool_pages(const std::string& kernel, const ScalarArgs& a) {
  const int64_t n = a.i("n_pages");
  if (n < 1)
    throw Error("kernel '" + kernel + "': n_pages = " + std::to_string(n) +
                " (a paged cache needs a pool of >= 1 page)");
  return n;
}

KvView declare_kv_view(KernelBuilder& kb, const Spec& s, const Buffer& k, const Buffer& v,
                       const Value& max_ctx) {
  KvView kv{.k = k,
            .v = v,
            .max_ctx = max_ctx,
            .head_dim = s.constexpr_("HEAD_DIM"),
            .key_block = kv_key_block(s.target),
            .page = s.constexpr_("PAGE")};
  if (kv.page > 0) {
    kv.table = kb.buffer("block_table", DType::i32);
    kv.n_pages = kb.scalar("n_pages", DType::i32);
  }
  if (is_quantized_kv(k.dtype()) || is_aura_kv(k.dtype())) {
    kv.k_scale = kb.buffer("k_scale", DType::f16);
    kv.v_scale = kb.buffer("v_scale", DType::f16);
  }
  if (is_aura_kv(k.dtype())) {
    kv.kbits = static_cast<int>(s.constexpr_("KBITS"));
    kv.vbits = static_cast<int>(s.constexpr_("VBITS"));
  }
  return kv;
}

namespace {

// The pool page holding keys `key` (i32, any shape), clamped into the pool.
Value page_of(const KvView& kv, const Value& key) {
  if (kv.pinned_page.valid()) return broadcast_to(kv.pinned_page, key.shape());
  auto entry = (key / static_cast<int>(kv.page)).to(DType::i64);
  if (kv.table_row.valid()) entry = entry + kv.table_row;
  auto id = load(*kv.table + entry);
  return minimum(maximum(id, zeros(DType::i32, id.shape())), kv.n_pages - 1).to(DType::i64);
}

// The run of kv's head in pool page `page` (i64), in pages from the pool's
// start: the head-major layout.
Value head_page(const KvView& kv, const Value& page) {
  return kv.kvh.to(DType::i64) * kv.n_pages.to(DType::i64) + page;
}

// The pool row of key `key` (i32 scalar) of kv's head.
Value pool_row(const KvView& kv, const Value& key) {
  return head_page(kv, page_of(kv, key)) * kv.page +
         (key % static_cast<int>(kv.page)).to(DType::i64);
}

}  // namespace

KvView pin_block_page(const KvView& kv, const Value& first_key) {
  if (kv.page == 0) return kv;
  KvView pinned = kv;
  pinned.pinned_page = page_of(kv, first_key);
  pinned.pinned_key = first_key;
  pinned.pinned_row = pool_row(pinned, first_key);
  return pinned;
}

Value k_tile_offsets(const KvView& kv, const Value& block, int64_t d0, int64_t nd,
                     const Value& lane0, int64_t nk) {
  const int64_t D = kv.head_dim, KB = kv.key_block;
  Value first;  // the block's first element
  if (kv.page == 0) {
    const int kb = static_cast<int>(KB);
    auto blocks = ((kv.max_ctx + (kb - 1)) / kb).to(DType::i64);
    first = (kv.kvh.to(DType::i64) * blocks + block.to(DType::i64)) * (D * KB);
  } else {
    const int per_page = static_cast<int>(kv.page / KB);
    auto page = page_of(kv, block * static_cast<int>(KB));
    first = (head_page(kv, page) * per_page + (block % per_page).to(DType::i64)) * (D * KB);
  }
  auto base = first + d0 * KB + lane0.to(DType::i64);
  auto dims = expand_dims(arange(nd).to(DType::i64) * KB, 1);  // [nd, 1]
  auto lanes = expand_dims(arange(nk).to(DType::i64), 0);      // [1, nk]
  return base + dims + lanes;
}

Value v_tile_offsets(const KvView& kv, const Value& first, int64_t n) {
  Value row;  // the first key's row
  if (kv.page == 0) {
    row = kv.kvh.to(DType::i64) * kv.max_ctx.to(DType::i64) + first.to(DType::i64);
  } else if (kv.pinned_row.valid()) {
    row = kv.pinned_row + (first - kv.pinned_key).to(DType::i64);
  } else {
    row = pool_row(kv, first);
  }
  auto rows = row + arange(n).to(DType::i64);
  return expand_dims(rows * kv.head_dim, 1) + expand_dims(arange(kv.head_dim).to(DType::i64), 0);
}

namespace {

// A q8_0 cache's scales, addressed as a cache of HEAD_DIM / 32 dims.
KvView scale_view(const KvView& kv) {
  KvView s = kv;
  s.k = *kv.k_scale;
  s.v = *kv.v_scale;
  s.head_dim = kv.head_dim / kKvQuantBlock;
  s.k_scale.reset();
  s.v_scale.reset();
  return s;
}

// p loaded and widened to f32; with a mask, elements outside it load as 0.
Value load_f32(const Pointer& p, const Value& mask) {
  if (!mask.valid()) return load(p).to(DType::f32);
  return load(p, mask, 0.0).to(DType::f32);
}

}  // namespace

Value aura_rows(const KvView& kv, const Value& first, int64_t n) {
  return kv.kvh.to(DType::i64) * kv.max_ctx.to(DType::i64) + first.to(DType::i64) +
         arange(n).to(DType::i64);
}

AuraRows load_aura_v_rows(const KvView& kv, const Value& first, int64_t n, bool lanes,
                          const Value& key_mask) {
  const int bits = kv.vbits;
  const int64_t D = kv.head_dim, W = packed_words(D, bits);
  auto rows = aura_rows(kv, first, n);
  auto offs = expand_dims(rows * W, 1) + expand_dims(arange(W).to(DType::i64), 0);
  const Buffer& codes = kv.v;
  auto words = key_mask.valid()
                   ? load(codes + offs, broadcast_to(expand_dims(key_mask, 1), {n, W}), 0.0)
                   : load(codes + offs);
  auto c = lanes ? aura_unpack_lanes(words, bits, D) : aura_unpack(words, bits, D);
  return {aura_centroids(c, bits, D), load_aura_norms(kv, false, first, n, key_mask)};
}

Value load_aura_norms(const KvView& kv, bool keys, const Value& first, int64_t n,
                      const Value& key_mask) {
  auto at = *(keys ? kv.k_scale : kv.v_scale) + aura_rows(kv, first, n);
  return (key_mask.valid() ? load(at, key_mask, 0.0) : load(at)).to(DType::f32);
}

Value load_v_rows(const KvView& kv, const Value& first, int64_t n, const Value& key_mask) {
  if (kv.vbits) {
    AuraRows r = load_aura_v_rows(kv, first, n, false, key_mask);
    return r.values * broadcast_to(expand_dims(r.norms, 1), {n, kv.head_dim});
  }
  auto rows_mask = [&](int64_t width) {
    return key_mask.valid() ? broadcast_to(expand_dims(key_mask, 1), {n, width}) : Value();
  };
  const int64_t D = kv.head_dim;
  auto t = load_f32(kv.v + v_tile_offsets(kv, first, n), rows_mask(D));
  if (!kv.v_scale) return t;
  KvView sv = scale_view(kv);
  const int64_t QB = kKvQuantBlock;
  auto sc = load_f32(sv.v + v_tile_offsets(sv, first, n), rows_mask(D / QB));  // [n, D/32]
  return reshape(reshape(t, {n, D / QB, QB}) * expand_dims(sc, 2), {n, D});
}

Value load_k_rows(const KvView& kv, const Value& block, const Value& d, int64_t n,
                  const Value& key_mask) {
  const int64_t KB = kv.key_block;
  auto base = k_tile_offsets(kv, block, 0, 1, zeros(DType::i32, {}), KB);
  auto off = base + expand_dims((d + arange(n)).to(DType::i64) * KB, 1);  // [n, KB]
  if (!key_mask.valid()) return load(kv.k + off);
  return load(kv.k + off, broadcast_to(reshape(key_mask, {1, KB}), {n, KB}), 0.0);
}

Value load_k_scales(const KvView& kv, const Value& block, const Value& group,
                    const Value& key_mask) {
  return load_k_rows(scale_view(kv), block, group, 1, key_mask).to(DType::f32);
}

namespace {

// Piece `part` (i32) of `parts` of the run of `elems` elements of buf from
// `first` (an i64 scalar): its share of the run's 64-byte lines, a last
// piece that would overhang the run moved back to end with it. The piece's
// start is one clamped scalar, so its lines are constant offsets from one
// address (x86: one prefetch each, no address arithmetic); clamping each
// line made every address a vector lane to extract.
void prefetch_run(const Buffer& buf, const Value& first, int64_t elems, const Value& part,
                  int64_t parts) {
  constexpr int64_t kLineBytes = 64;
  const int64_t per_line = kLineBytes / dtype_bytes(buf.dtype());
  const int64_t lines = cdiv(elems, per_line), n = cdiv(lines, parts);
  auto start = minimum(part * static_cast<int>(n), static_cast<int>(lines - n));
  auto at = first + start.to(DType::i64) * per_line;
  prefetch(buf + (broadcast_to(at, {n}) + arange(n).to(DType::i64) * per_line));
}

// Piece `part` of K block `block` (keys) or of its keys' V rows, with
// their scales (q8_0) or norms (AURA).
void prefetch_block(const KvView& kv, bool keys, const Value& block, const Value& part,
                    int64_t parts) {
  const int64_t KB = kv.key_block, D = kv.head_dim;
  const Buffer& codes = keys ? kv.k : kv.v;
  const auto& scales = keys ? kv.k_scale : kv.v_scale;
  auto first_key = block * static_cast<int>(KB);
  if (const int bits = keys ? kv.kbits : kv.vbits) {
    // Each key's codes are one row of packed words, its norm one f16.
    auto row = reshape(aura_rows(kv, first_key, 1), {});
    const int64_t W = packed_words(D, bits);
    prefetch_run(codes, row * W, KB * W, part, parts);
    prefetch_run(*scales, row, KB, part, parts);
    return;
  }
  auto first = keys ? k_tile_offsets(kv, block, 0, 1, zeros(DType::i32, {}), 1)
                    : slice(v_tile_offsets(kv, first_key, 1), {0, 0}, {1, 1});
  prefetch_run(codes, reshape(first, {}), KB * D, part, parts);
  if (scales) prefetch_block(scale_view(kv), keys, block, part, parts);
}

}  // namespace

void prefetch_k_block(const KvView& kv, const Value& block, const Value& part, int64_t parts) {
  prefetch_block(kv, true, block, part, parts);
}

void prefetch_v_block(const KvView& kv, const Value& block, const Value& part, int64_t parts) {
  prefetch_block(kv, false, block, part, parts);
}

}  // namespace kiln
