// The layout of the KV cache the attention kernels read, one K and one V
// tensor per layer, each head-major so that a KV head's keys and values are
// two contiguous streams:
//   K: [n_kv_heads][ceil(max_ctx / KB)][HEAD_DIM][KB], the keys transposed
//      in blocks of KB = kv_key_block(target);
//   V: [n_kv_heads][max_ctx][HEAD_DIM].
//
// Decode reads the whole cache every token, mostly from DRAM: a program that
// owns one KV head then streams two sequential runs, which the hardware
// prefetchers follow (token-major rows interleave the heads in 128-byte
// pieces, and the streams stall on memory latency). Transposed K blocks make
// a query's scores against KB keys (KB the f32 lanes of one vector
// register) FMAs of its q elements with contiguous KB-key rows: on the CPU
// a query's scores accumulate in one register with the keys in its lanes,
// every query of a program (kv_walk.h) shares each K load, and no key ends
// in a horizontal sum over HEAD_DIM. P V reads whole V rows, so V stays
// row-major. max_ctx, the rows the cache holds, is a launch argument.
//
// A q8_0 cache (KV = i8) holds each key and value as ggml's Q8_0 does
// (llama.cpp's `-ctk q8_0 -ctv q8_0`): blocks of 32 consecutive elements of
// a head vector, each an i8 code per element and one f16 scale, the element
// being code * scale, rounded as llama.cpp rounds its cache rows
// (kernels/quant/q8_0_rounding.h). The codes keep the layouts above; the
// scales lie in two more buffers, k_scale and v_scale, in the same layouts
// with HEAD_DIM / 32 in place of HEAD_DIM (a K block's scales transposed
// too). Separate scales keep every code row a plain vector load, which
// ggml's interleaved 34-byte blocks would not in a transposed K. The
// attention kernels read q as Q8_0 against such a cache, as llama.cpp does
// (kv_walk.h): 4 consecutive rows of a K block (64 bytes) are then the
// codes of 4 dims of every key, one byte transpose from the operand of a
// grouped 8-bit dot.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ir/builder.h"
#include "ir/spec.h"
#include "kernels/aura/aura_format.h"
#include "kernels/registry.h"

namespace kiln {

// Keys per K block on a target: the f32 lanes the attention kernels work in
// (attention_lanes). The layout depends on it, so a cache belongs to the
// backend whose kernels write it.
int64_t kv_key_block(const TargetDesc& t);

// Whether a cache may hold t: the KV dtypes every attention kernel
// declares (f16, bf16, f32, i8 for q8_0 and u32 for AURA).
bool is_kv_cache_dtype(DType t);
// Elements per scale of a q8_0 cache.
constexpr int64_t kKvQuantBlock = 32;
bool is_quantized_kv(DType t);  // i8: codes with scales
bool is_aura_kv(DType t);       // u32: AURA's packed codes with norms

// A cache's type as users name it (`--kv`): f16, bf16, f32, q8_0 (i8) or
// an AURA scheme (u32, aura4v4, aura8v4, ...).
struct KvCacheType {
  DType dtype = DType::f16;
  AuraScheme aura{};  // with dtype u32 only
  KvCacheType() = default;
  KvCacheType(DType t) : dtype(t) {}
  KvCacheType(AuraScheme s) : dtype(DType::u32), aura(s) {}
};
std::string kv_cache_type_name(const KvCacheType& t);
// Throws kiln::Error naming the text and the accepted names.
KvCacheType parse_kv_cache_type(const std::string& text);

int64_t k_cache_elems(int64_t max_ctx, int64_t n_kv_heads, int64_t head_dim, int64_t key_block);
int64_t v_cache_elems(int64_t max_ctx, int64_t n_kv_heads, int64_t head_dim);

// `elems` (buffer name -> elements) with a q8_0 cache's k_scale and
// v_scale, one per 32 elements of k and v, and where elems has q, the
// attention kernels' q_scale and q_sum (kv_walk.h), one per 32 of q
// (unused by other caches).
std::map<std::string, int64_t> with_kv_scales(std::map<std::string, int64_t> elems);

// Index of element d of key (or value) j of KV head h.
int64_t k_cache_index(int64_t j, int64_t h, int64_t d, int64_t max_ctx, int64_t head_dim,
                      int64_t key_block);
int64_t v_cache_index(int64_t j, int64_t h, int64_t d, int64_t max_ctx, int64_t head_dim);

// A paged pool (PAGE > 0 keys per page, a multiple of the key block) holds
// many sequences' rows in fixed pages, each sequence's in the pages its
// block table lists (table[i] holds its keys i*PAGE .. i*PAGE + PAGE-1):
//   K: [n_kv_heads][n_pages][PAGE / KB][HEAD_DIM][KB]
//   V: [n_kv_heads][n_pages][PAGE][HEAD_DIM]
// Head-major, so one head's pages in id order are one run laid out as the
// contiguous cache: a sequence on consecutive pages (as a fresh pool hands
// them out) is read as one stream, where pages of every head interleaved
// broke it every PAGE rows (kiln bench --kv-page 32, 32x4x64 heads: 0.6 of
// the contiguous cache's GB/s). Within a page each head's K blocks and V rows
// keep the layout above; sharing a prefix is sharing page ids.
int64_t k_pool_elems(int64_t n_pages, int64_t n_kv_heads, int64_t head_dim, int64_t page);
int64_t v_pool_elems(int64_t n_pages, int64_t n_kv_heads, int64_t head_dim, int64_t page);
int64_t k_page_index(int64_t page_id, int64_t j, int64_t h, int64_t d, int64_t n_pages,
                     int64_t head_dim, int64_t page, int64_t key_block);
int64_t v_page_index(int64_t page_id, int64_t j, int64_t h, int64_t d, int64_t n_pages,
                     int64_t head_dim, int64_t page);

// One KV head's rows as a kernel addresses them: the contiguous cache, or
// with page > 0 a sequence's pages of the pool.
struct KvView {
  Buffer k, v;
  Value kvh{}, max_ctx{};  // i32 scalars; max_ctx: the rows a sequence may hold
  int64_t head_dim = 0, key_block = 0;
  int64_t page = 0;
  std::optional<Buffer> table{};                    // i32 [ceil(max_ctx / page)] from table_row on
  Value n_pages{};                                  // i32 scalar, paged only
  Value table_row{};                                // i64: the sequence's first entry (invalid: 0)
  Value pinned_page{}, pinned_key{}, pinned_row{};  // pin_block_page's, else invalid
  std::optional<Buffer> k_scale{}, v_scale{};       // f16, a q8_0 cache's scales, AURA's norms
  int kbits = 0, vbits = 0;                         // an AURA cache's (KV = u32)
};

// The view of a kernel's cache buffers k and v for its spec (HEAD_DIM and
// PAGE; PAGE = 0 by default): with PAGE > 0 this declares the paged
// parameters, the buffer `block_table` and the scalar `n_pages`, in that
// order; then for a q8_0 cache (k and v i8) or an AURA cache (u32) the
// buffers `k_scale` and `v_scale`. kvh is left for the caller to set.
KvView declare_kv_view(KernelBuilder& kb, const Spec& s, const Buffer& k, const Buffer& v,
                       const Value& max_ctx);
// Throws kiln::Error naming `kernel` when PAGE is not 0 or a multiple of the
// key block, a q8_0 cache's HEAD_DIM is not a multiple of 32, or an AURA
// cache is paged, its HEAD_DIM not a power of two >= 32 or its bits not 2,
// 3, 4 or 8.
void check_kv_layout(const std::string& kernel, const Spec& s);
// A launch's n_pages (the pool's pages) with PAGE > 0; throws kiln::Error
// naming `kernel` unless it is >= 1.
int64_t pool_pages(const std::string& kernel, const ScalarArgs& a);

// The view with the pool page of the K block whose first key is
// `first_key` (i32) looked up once (a paged cache; otherwise kv itself): a
// walk addresses a block's K rows and V rows dozens of times, and each
// lookup is a table load, a clamp and the row arithmetic. A V row is then
// the block's first plus (key - first_key), which folds to a constant for
// keys written as first_key + j. Only keys of that block may be addressed
// through it.
KvView pin_block_page(const KvView& kv, const Value& first_key);

// IR offsets [nd, nk] into K of dims d0 .. d0+nd-1 of keys block*key_block +
// lane0 .. + nk-1; the keys must lie in one block (lane0 + nk <= key_block).
// The tile's rows are contiguous, so loads are plain vectors. A page id
// outside the pool is clamped into it: a bad table never reads out of
// bounds (the host checks tables, kv_page_pool.h).
Value k_tile_offsets(const KvView& kv, const Value& block, int64_t d0, int64_t nd,
                     const Value& lane0, int64_t nk);

// IR offsets [n, head_dim] into V of the rows of keys first .. first + n - 1
// (first an i32 scalar; the keys in one K block, so in one page): one
// contiguous run in either layout, which the lowering loads as vectors.
Value v_tile_offsets(const KvView& kv, const Value& first, int64_t n);

// The V rows loaded and widened to f32 (a q8_0 cache's codes times their
// scales). With a key_mask ([n] bool), keys outside it are not read and
// load as 0; without one the loads are plain vectors.
Value load_v_rows(const KvView& kv, const Value& first, int64_t n, const Value& key_mask = {});

// An AURA cache's rows (i64 [n]) of keys first .. first + n - 1 (i32
// scalar) of kv's head: their codes start at word row * packed_words, their
// norms at row (kernels/aura/aura_format.h).
Value aura_rows(const KvView& kv, const Value& first, int64_t n);

// An AURA cache's V rows of keys first .. first + n - 1 (i32 scalar),
// decoded: [n, HEAD_DIM] f32 codebook values in natural order, or with
// `lanes` in aura_codes.h's lane order, and the rows' norms [n] f32 (the
// decoded vector is their product); keys outside key_mask ([n] bool) are
// not read and load as 0.
struct AuraRows {
  Value values, norms;
};
AuraRows load_aura_v_rows(const KvView& kv, const Value& first, int64_t n, bool lanes,
                          const Value& key_mask = {});
// The K (`keys`) or V norms of keys first .. first + n - 1, [n] f32 (keys
// outside key_mask 0).
Value load_aura_norms(const KvView& kv, bool keys, const Value& first, int64_t n,
                      const Value& key_mask = {});

// Rows d .. d+n-1 (d an i32 scalar) of K block `block`, [n, KB]: every
// key's elements d .. d+n-1 as stored (a q8_0 cache's codes, unscaled;
// masked keys 0), one contiguous run. And the scales of the keys' 32-dim
// block `group` (i32 scalar), [1, KB] f32.
Value load_k_rows(const KvView& kv, const Value& block, const Value& d, int64_t n,
                  const Value& key_mask = {});
Value load_k_scales(const KvView& kv, const Value& block, const Value& group,
                    const Value& key_mask = {});

// Prefetch piece `part` (an i32 scalar in [0, parts)) of K block `block`
// (with its scales or norms), or of its keys' V rows: each is a contiguous
// run, cut into `parts` pieces of whole 64-byte lines. A program computes
// on a block for far longer than a DRAM miss takes, and the hardware
// prefetchers alone leave its loads waiting on DRAM while the core idles
// between them. A walk issues a piece per step of a loop it runs over a
// block anyway, K in the score loop and V in the P V loop, so that the
// misses spread evenly over the work: all of a block's lines at once fill
// the core's miss buffers and stall it. The block must be the sequence's
// (a paged cache's table has no entry past it).
void prefetch_k_block(const KvView& kv, const Value& block, const Value& part, int64_t parts);
void prefetch_v_block(const KvView& kv, const Value& block, const Value& part, int64_t parts);

}  // namespace kiln
