// Every library kernel on the CUDA path: its CUDA C compiles through NVRTC
// for sm_80 and sm_90 and ptxas accepts the PTX (when the toolkit is
// present), and the same CUDA C run in the CPU simulator reproduces the
// reference interpreter on random inputs, for every dtype the kernel
// declares. A kernel added to the registry without a case here fails the
// coverage check.
//
// Tolerance: the kernel's own (what the tuner holds the CPU JIT to), at
// least 1e-4 relative + 1e-5 absolute, plus one unit in the last place of a
// narrow output dtype: block reductions sum in a different order from the
// interpreter's double-precision sums, and mma.sync accumulates in f32.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/passes.h"
#include "ir/scalar_eval.h"
#include "kernels/quant/ggml_blocks.h"
#include "kernels/quant/int4w.h"
#include "kernels/quant/iq_grids.h"
#include "kernels/quant/rows16.h"
#include "kernels/registry.h"
#include "runtime/host_memory.h"
#include "runtime/launch_check.h"
#include "runtime/runtime.h"
#include "support/cuda_check.h"
#include "support/cuda_toolkit.h"
#include "support/random_int4w.h"
#include "support/runtime_fixture.h"
#include "targets/cpu/thread_pool.h"
#include "targets/cuda/cuda_device.h"
#include "targets/cuda/nvrtc_compiler.h"

using namespace kiln;

namespace {

struct Case {
  std::string kernel;
  std::map<std::string, DType> dtypes;
  std::map<std::string, int64_t> constexprs;
  Sizes sizes;  // integer scalars by name, plus launch sizes (rows, tokens)
};

// Small shapes with ragged tails; one entry per kernel and dtype family.
std::vector<Case> cases() {
  std::vector<Case> cs;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32})
    cs.push_back({"add", {{"T", t}}, {{"BLOCK", 256}}, {{"n", 700}}});
  for (DType y : {DType::f16, DType::bf16})
    cs.push_back({"convert", {{"Y", y}}, {{"BLOCK", 256}}, {{"n", 700}, {"row0", 2}, {"row", 64}}});
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    cs.push_back({"scaled_add", {{"T", t}}, {{"BLOCK", 256}}, {{"n", 600}}});
    for (int64_t act : {0, 1, 2})
      cs.push_back({"glu", {{"T", t}}, {{"BLOCK", 256}, {"ACT", act}}, {{"n", 600}}});
    cs.push_back({"rmsnorm", {{"T", t}}, {{"BLOCK", 128}}, {{"n", 300}, {"rows", 3}}});
    cs.push_back({"softmax", {{"T", t}}, {{"BLOCK", 128}}, {{"n", 300}, {"rows", 3}}});
    cs.push_back({"rope",
                  {{"T", t}},
                  {{"HEAD_DIM", 64}, {"ROT", 64}},
                  {{"n_heads", 3}, {"n_pos", 9}, {"tokens", 2}}});
    cs.push_back({"gemm", {{"W", t}}, {}, {{"t", 11}, {"n", 19}, {"k", 40}}});
    cs.push_back({"gemv", {{"W", t}}, {{"BLOCK_M", 4}, {"BLOCK_K", 64}}, {{"m", 13}, {"k", 150}}});
  }
  cs.push_back({"rope",
                {{"T", DType::f32}},
                {{"HEAD_DIM", 64}, {"ROT", 32}, {"NEOX", 1}},
                {{"n_heads", 2}, {"n_pos", 9}, {"tokens", 2}}});
  cs.push_back(
      {"gemm", {{"W", DType::f8e4m3}}, {{"SCALE_BLOCK", 16}}, {{"t", 11}, {"n", 19}, {"k", 40}}});
  cs.push_back({"gemv",  // FP8 checkpoints' weights: bytes widened by bit tricks, block scales
                {{"W", DType::f8e4m3}},
                {{"BLOCK_M", 4}, {"BLOCK_K", 32}, {"SCALE_BLOCK", 64}},
                {{"m", 13}, {"k", 150}}});
  cs.push_back({"gemv",
                {{"W", DType::f16}, {"X", DType::f16}},
                {{"BLOCK_M", 2}, {"BLOCK_K", 64}},
                {{"m", 5}, {"k", 100}}});
  cs.push_back({"gemv",
                {{"W", DType::bf16}, {"X", DType::bf16}},
                {{"BLOCK_M", 2}, {"BLOCK_K", 64}},
                {{"m", 5}, {"k", 100}}});
  // Over a q8_0 cache: int8 score dots (m16n8k32), f16 P V.
  for (bool decode : {false, true})
    cs.push_back({decode ? "attention_decode_tiles" : "attention_prefill_tiles",
                  {{"KV", DType::i8}},
                  decode ? std::map<std::string, int64_t>{{"HEAD_DIM", 64}, {"SPLIT", 16}}
                         : std::map<std::string, int64_t>{{"HEAD_DIM", 64}},
                  {{"n_tokens", 3},
                   {"n_heads", 4},
                   {"n_kv_heads", 2},
                   {"max_ctx", 48},
                   {"kv_len", 21},
                   {"pos0", 18},
                   {"window", 0}}});
  // The tile-dot prefill (mma.sync on the GPU): 16 query rows, two of them
  // live at 3 tokens, over 18 + 3 keys in blocks of 16; windows and sinks,
  // a paged cache, and the head sizes models use.
  for (DType kv : {DType::f16, DType::bf16}) {
    Sizes att = {{"n_tokens", 3}, {"n_heads", 4}, {"n_kv_heads", 2}, {"max_ctx", 48},
                 {"kv_len", 21},  {"pos0", 18},   {"window", 0}};
    Sizes windowed = att;
    windowed["window"] = 5;
    Sizes paged = att;
    paged["n_pages"] = 4;
    Sizes long_prompt = {{"n_tokens", 37}, {"n_heads", 2}, {"n_kv_heads", 1}, {"max_ctx", 48},
                         {"kv_len", 40},   {"pos0", 3},    {"window", 0}};
    cs.push_back({"attention_prefill_tiles", {{"KV", kv}, {"T", kv}}, {{"HEAD_DIM", 64}}, att});
    cs.push_back(
        {"attention_prefill_tiles", {{"KV", kv}}, {{"HEAD_DIM", 64}, {"SINKS", 1}}, windowed});
    cs.push_back(
        {"attention_prefill_tiles", {{"KV", kv}}, {{"HEAD_DIM", 64}, {"PAGE", 16}}, paged});
    cs.push_back({"attention_prefill_tiles",
                  {{"KV", kv}},
                  {{"HEAD_DIM", kv == DType::f16 ? 128 : 256}},
                  long_prompt});
    // The tile-dot decode (split-K pass 1): a group of 2 in 16 rows, slices
    // of 16 keys, windows, a paged cache; a group of 18 over two programs.
    cs.push_back({"attention_decode_tiles",
                  {{"KV", kv}, {"T", kv}},
                  {{"HEAD_DIM", 64}, {"SPLIT", 16}},
                  att});
    cs.push_back(
        {"attention_decode_tiles", {{"KV", kv}}, {{"HEAD_DIM", 64}, {"SPLIT", 16}}, windowed});
    cs.push_back({"attention_decode_tiles",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"SPLIT", 32}, {"PAGE", 16}},
                  paged});
    cs.push_back({"attention_decode_tiles",
                  {{"KV", kv}},
                  {{"HEAD_DIM", kv == DType::f16 ? 128 : 256}, {"SPLIT", 32}},
                  {{"n_tokens", 1},
                   {"n_heads", 36},
                   {"n_kv_heads", 2},
                   {"max_ctx", 48},
                   {"kv_len", 40},
                   {"pos0", 39},
                   {"window", 0}}});
  }
  // Attention programs of two query rows (BLOCK_G, BLOCK_M 2) share their
  // K/V loads as wider ones do; NVRTC's time grows with the rows.
  for (DType kv : {DType::f16, DType::bf16, DType::f32, DType::i8}) {
    Sizes att = {{"n_tokens", 3}, {"n_heads", 4}, {"n_kv_heads", 2}, {"max_ctx", 24},
                 {"kv_len", 21},  {"pos0", 18},   {"window", 0}};
    Sizes windowed = att;
    windowed["window"] = 5;
    cs.push_back({"attention_decode", {{"KV", kv}}, {{"HEAD_DIM", 64}, {"BLOCK_G", 2}}, att});
    cs.push_back({"attention_decode",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"SINKS", 1}},
                  windowed});
    cs.push_back({"attention_prefill", {{"KV", kv}}, {{"HEAD_DIM", 64}, {"BLOCK_M", 2}}, att});
    cs.push_back({"attention_prefill",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_M", 2}, {"SINKS", 1}},
                  windowed});
    cs.push_back({"attention_decode_split",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"SPLIT", 16}},
                  windowed});
    Sizes paged = windowed;
    paged["n_pages"] = 4;
    cs.push_back({"attention_decode",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"PAGE", 16}},
                  paged});
    cs.push_back({"attention_prefill",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_M", 2}, {"PAGE", 16}},
                  paged});
    cs.push_back({"attention_decode_split",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"SPLIT", 16}, {"PAGE", 16}},
                  paged});
    cs.push_back(
        {"kv_cache_store",
         {{"KV", kv}},
         {{"HEAD_DIM", 32}, {"PAGE", 16}},
         {{"n_tokens", 3}, {"n_kv_heads", 2}, {"max_ctx", 40}, {"pos0", 14}, {"n_pages", 5}}});
    cs.push_back({"attention_prefill_varlen",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_M", 2}, {"PAGE", 16}, {"SINKS", 1}},
                  {{"n_tokens", 7},
                   {"n_heads", 4},
                   {"n_kv_heads", 2},
                   {"max_ctx", 24},
                   {"n_seqs", 2},
                   {"max_seq_tokens", 4},
                   {"window", 5},
                   {"n_pages", 4}}});
    cs.push_back({"kv_cache_store",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 32}},
                  {{"n_tokens", 3}, {"n_kv_heads", 2}, {"max_ctx", 20}, {"pos0", 14}}});
    cs.push_back(
        {"kv_cache_store",
         {{"KV", kv}},
         {{"HEAD_DIM", 32}, {"PAGE", 16}, {"VARLEN", 1}},
         {{"n_tokens", 5}, {"n_kv_heads", 2}, {"max_ctx", 32}, {"n_seqs", 2}, {"n_pages", 5}}});
    cs.push_back({"attention_decode_batch",
                  {{"KV", kv}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"PAGE", 16}, {"SINKS", 1}},
                  {{"n_seqs", 3},
                   {"n_heads", 4},
                   {"n_kv_heads", 2},
                   {"max_ctx", 40},
                   {"window", 9},
                   {"n_pages", 9}}});
  }
  // AURA: a compressed cache (KV = u32) of 3-bit keys (straddling words)
  // and 4-bit values; the encoder and the rotations.
  {
    Sizes att = {{"n_tokens", 3}, {"n_heads", 4}, {"n_kv_heads", 2}, {"max_ctx", 24},
                 {"kv_len", 21},  {"pos0", 18},   {"window", 5}};
    const std::map<std::string, int64_t> bits = {{"HEAD_DIM", 64}, {"KBITS", 3}, {"VBITS", 4}};
    auto with = [&](std::map<std::string, int64_t> c) {
      c.insert(bits.begin(), bits.end());
      return c;
    };
    cs.push_back(
        {"attention_decode", {{"KV", DType::u32}}, with({{"BLOCK_G", 2}, {"SINKS", 1}}), att});
    cs.push_back({"attention_prefill", {{"KV", DType::u32}}, with({{"BLOCK_M", 2}}), att});
    cs.push_back({"attention_decode_split",
                  {{"KV", DType::u32}},
                  with({{"BLOCK_G", 2}, {"SPLIT", 16}}),
                  att});
  }
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const bool f32 = t == DType::f32;
    cs.push_back({"aura_dequant",
                  {{"KV", t}},
                  {{"HEAD_DIM", f32 ? 64 : 32}, {"KBITS", f32 ? 3 : 8}, {"VBITS", f32 ? 2 : 4}},
                  {{"n_kv_heads", 2}, {"max_ctx", 20}, {"kv_len", 17}}});
    cs.push_back({"aura_encode",
                  {{"T", t}},
                  {{"HEAD_DIM", f32 ? 96 : 64}, {"KBITS", f32 ? 8 : 3}, {"VBITS", f32 ? 2 : 4}},
                  {{"n_tokens", 3}, {"n_kv_heads", 2}, {"max_ctx", 9}, {"pos0", 4}}});
    cs.push_back({"aura_rotate",
                  {{"X", t}, {"Y", f32 ? DType::bf16 : DType::f32}},
                  {{"DIN", 96}, {"DOUT", 128}, {"BLOCK_R", 2}},
                  {{"n_rows", 5}}});
    cs.push_back({"aura_rotate",
                  {{"X", DType::f32}, {"Y", t}},
                  {{"DIN", 64}, {"DOUT", 48}},
                  {{"n_rows", 3}}});
  }
  // q and out in f16 and bf16 (T).
  for (DType t : {DType::f16, DType::bf16}) {
    Sizes att = {{"n_tokens", 3}, {"n_heads", 4}, {"n_kv_heads", 2}, {"max_ctx", 24},
                 {"kv_len", 21},  {"pos0", 18},   {"window", 0}};
    cs.push_back({"attention_decode",
                  {{"KV", DType::f16}, {"T", t}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}},
                  att});
    cs.push_back({"attention_prefill",
                  {{"KV", DType::i8}, {"T", t}},
                  {{"HEAD_DIM", 64}, {"BLOCK_M", 2}},
                  att});
    cs.push_back({"attention_decode_split",
                  {{"KV", DType::f16}, {"T", t}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"SPLIT", 16}},
                  att});
    cs.push_back({"attention_decode_batch",
                  {{"KV", DType::bf16}, {"T", t}},
                  {{"HEAD_DIM", 64}, {"BLOCK_G", 2}, {"PAGE", 16}},
                  {{"n_seqs", 3},
                   {"n_heads", 4},
                   {"n_kv_heads", 2},
                   {"max_ctx", 40},
                   {"window", 0},
                   {"n_pages", 9}}});
    cs.push_back({"attention_prefill_varlen",
                  {{"KV", DType::f16}, {"T", t}},
                  {{"HEAD_DIM", 64}, {"BLOCK_M", 2}, {"PAGE", 16}},
                  {{"n_tokens", 7},
                   {"n_heads", 4},
                   {"n_kv_heads", 2},
                   {"max_ctx", 24},
                   {"n_seqs", 2},
                   {"max_seq_tokens", 4},
                   {"window", 0},
                   {"n_pages", 4}}});
    cs.push_back({"attention_decode_merge",
                  {{"T", t}},
                  {{"HEAD_DIM", 64}, {"SPLIT", 16}, {"SINKS", 0}},
                  {{"n_tokens", 3},
                   {"n_heads", 4},
                   {"max_ctx", 40},
                   {"kv_len", 37},
                   {"pos0", 34},
                   {"window", 0}}});
  }
  for (int64_t sinks : {0, 1})
    cs.push_back({"attention_decode_merge",
                  {},
                  {{"HEAD_DIM", 64}, {"SPLIT", 16}, {"SINKS", sinks}},
                  {{"n_tokens", 3},
                   {"n_heads", 4},
                   {"max_ctx", 40},
                   {"kv_len", 37},
                   {"pos0", 34},
                   {"window", sinks ? 20 : 0}}});
  // Tiles off every side: 19 rows, 9 tokens, a k tail.
  for (DType tw : {DType::f16, DType::bf16})
    cs.push_back({"gemm_tiles",
                  {{"W", tw}},
                  {{"BLOCK_N", 16}, {"BLOCK_T", 8}, {"BLOCK_K", 16}},
                  {{"t", 9}, {"n", 19}, {"k", 40}}});
  for (const TensorTypeInfo& f : block_types()) {
    const int64_t fmt = static_cast<int64_t>(f.type);
    cs.push_back({"qgemv",
                  {},
                  {{"FMT", fmt}, {"BLOCK_M", 8}, {"BLOCK_T", 1}},
                  {{"m", 12}, {"k", 512}, {"t", 1}}});
    cs.push_back({"qgemv",
                  {},
                  {{"FMT", fmt}, {"BLOCK_M", 4}, {"BLOCK_T", 4}},
                  {{"m", 8}, {"k", 256}, {"t", 5}}});
    // The smallest mma tiles, rows and tokens off them.
    cs.push_back({"qgemm_tiles",
                  {},
                  {{"FMT", fmt}, {"BLOCK_M", 16}, {"BLOCK_T", 8}},
                  {{"m", 19}, {"k", 256}, {"t", 9}}});
  }
  cs.push_back(
      {"qgemv", {}, {{"FMT", 8}, {"BLOCK_M", 1}, {"BLOCK_T", 1}}, {{"m", 3}, {"k", 96}, {"t", 1}}});
  for (int64_t fmt : {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 39})
    for (int64_t bt : {1, 4})
      cs.push_back(
          {"qgemv_rows16", {}, {{"FMT", fmt}, {"BLOCK_T", bt}}, {{"m", 32}, {"k", 512}, {"t", 5}}});
  // Q2_K's and Q3_K's codes decoded times their scales (from 12 tokens).
  for (int64_t fmt : {10, 11})
    cs.push_back(
        {"qgemv_rows16", {}, {{"FMT", fmt}, {"BLOCK_T", 12}}, {{"m", 16}, {"k", 256}, {"t", 13}}});
  cs.push_back(
      {"gemv_int4w", {}, {{"GROUP", 32}, {"BLOCK_M", 4}}, {{"m", 6}, {"k", 128}, {"t", 1}}});
  for (int64_t zp : {0, 1})
    cs.push_back({"gemm_int4w_tiles",
                  {},
                  {{"GROUP", 64}, {"ZP", zp}, {"BLOCK_M", 16}, {"BLOCK_T", 8}},
                  {{"m", 19}, {"k", 256}, {"t", 9}}});
  cs.push_back({"gemv_int4w",
                {},
                {{"GROUP", 64}, {"ZP", 1}, {"BLOCK_T", 4}},
                {{"m", 8}, {"k", 128}, {"t", 5}}});
  for (int64_t zp : {0, 1})
    cs.push_back({"gemv_int4w_rows16",
                  {},
                  {{"GROUP", zp ? 32 : 128}, {"ZP", zp}, {"BLOCK_T", zp ? 4 : 1}},
                  {{"m", 32}, {"k", 512}, {"t", 5}}});
  cs.push_back({"gemv_awq", {}, {{"GROUP", 32}, {"BLOCK_N", 32}}, {{"k", 64}, {"n", 40}}});
  cs.push_back(
      {"gemv_w8a8", {}, {{"BLOCK_M", 4}, {"BLOCK_T", 2}}, {{"m", 6}, {"k", 100}, {"t", 3}}});
  cs.push_back({"quantize_rows_i8", {}, {{"BLOCK", 64}}, {{"rows", 3}, {"n", 100}}});
  cs.push_back({"quantize_q8", {}, {{"QBLOCK", 32}}, {{"nblocks", 19}}});
  for (DType t : {DType::u8, DType::f32})
    cs.push_back({"dot_peak", {{"T", t}}, {{"ACC", 4}}, {{"programs", 3}, {"steps", 9}}});
  cs.push_back({"read_peak", {}, {{"BLOCK", 256}}, {{"programs", 3}, {"words", 768}}});
  for (DType t : {DType::f16, DType::bf16})
    cs.push_back({"mma_peak", {{"T", t}}, {{"TILE", 32}}, {{"programs", 2}, {"steps", 3}}});
  cs.push_back({"quantize_q8", {}, {{"QBLOCK", 256}, {"BLOCKS", 2}}, {{"nblocks", 40}}});
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    cs.push_back(
        {"get_rows", {{"W", t}}, {{"BLOCK", 128}}, {{"n", 300}, {"rows", 3}, {"table_rows", 10}}});
    cs.push_back({"add_rows", {{"T", t}}, {{"BLOCK", 128}}, {{"n", 300}, {"rows", 3}}});
    cs.push_back({"add_rows",
                  {{"T", t}},
                  {{"BLOCK", 128}, {"TILE", 2}},
                  {{"n", 300}, {"rows", 8}, {"n_expert", 3}}});
    cs.push_back({"fill", {{"T", t}}, {{"BLOCK", 256}}, {{"n", 700}}});
  }
  for (const TensorTypeInfo& f : block_types())
    cs.push_back({"get_rows",
                  {{"W", DType::u8}},
                  {{"FMT", static_cast<int64_t>(f.type)}, {"BLOCK", 128}},
                  {{"n", 512}, {"rows", 3}, {"table_rows", 5}}});
  for (int64_t norm : {0, 1})
    cs.push_back({"moe_topk",
                  {},
                  {{"BLOCK", 8}},
                  {{"tokens", 3}, {"n_expert", 6}, {"k", 2}, {"norm", norm}}});
  // Sigmoid gating in 3 groups of 2 experts, 2 groups kept; a pruned
  // model's remap (some experts gone), renormalised.
  cs.push_back(
      {"moe_topk",
       {},
       {{"BLOCK", 8}, {"GATING", 1}},
       {{"tokens", 3}, {"n_expert", 6}, {"k", 2}, {"norm", 1}, {"n_group", 3}, {"topk_group", 2}}});
  cs.push_back({"moe_topk",
                {},
                {{"BLOCK", 8}, {"REMAP", 1}},
                {{"tokens", 3}, {"n_expert", 6}, {"k", 2}, {"norm", 1}, {"renorm", 1}}});
  cs.push_back(
      {"moe_sort", {}, {{"TILE", 2}}, {{"tokens", 5}, {"k", 2}, {"n_expert", 6}, {"rows", 20}}});
  for (int64_t add : {0, 1})
    cs.push_back({"moe_combine",
                  {},
                  {{"BLOCK", 128}, {"ADD", add}},
                  {{"tokens", 4}, {"rows", 12}, {"n", 300}, {"k", 2}}});
  // Grouped matmuls: 8 rows in tiles of 2 over 3 experts, gathered from 5
  // tokens or in sorted order.
  for (int64_t mode : {1, 2}) {
    const Sizes grouped = {{"t", 8}, {"n_expert", 3}, {"tokens", 5}};
    auto with = [&](Sizes s, int64_t stride) {
      s.insert(grouped.begin(), grouped.end());
      s["w_stride"] = stride;
      return s;
    };
    for (int64_t fmt : {2, 8, 12, 14})
      cs.push_back({"qgemv",
                    {},
                    {{"FMT", fmt}, {"BLOCK_M", 4}, {"BLOCK_T", 2}, {"GROUPED", mode}},
                    with({{"m", 8}, {"k", 256}}, 8 * 256 / block_type_info(fmt).block_elems *
                                                     block_type_info(fmt).block_bytes)});
    for (int64_t fmt : {12, 14})
      cs.push_back({"qgemm_tiles",
                    {},
                    {{"FMT", fmt}, {"BLOCK_M", 16}, {"BLOCK_T", 8}, {"GROUPED", mode}},
                    with({{"m", 16}, {"k", 256}}, 16 * block_type_info(fmt).block_bytes)});
    for (auto fmt : {TensorType::q4_K, TensorType::q6_K, TensorType::mxfp4})
      cs.push_back({"qgemv_rows16",
                    {},
                    {{"FMT", static_cast<int64_t>(fmt)}, {"BLOCK_T", 2}, {"GROUPED", mode}},
                    with({{"m", 32}, {"k", 512}}, ggml::rows16_bytes(fmt, 32, 512))});
    cs.push_back({"gemv_int4w_rows16",
                  {},
                  {{"GROUP", 128}, {"BLOCK_T", 2}, {"GROUPED", mode}},
                  with({{"m", 32}, {"k", 512}}, Int4wRows16{128, false}.bytes(32, 512))});
    cs.push_back({"gemm",
                  {{"W", DType::f16}},
                  {{"BLOCK_T", 2}, {"PANEL_T", 2}, {"GROUPED", mode}},
                  with({{"n", 20}, {"k", 70}}, 20 * 70)});
    cs.push_back({"gemm_tiles",
                  {{"W", DType::bf16}},
                  {{"BLOCK_N", 16}, {"BLOCK_T", 8}, {"BLOCK_K", 16}, {"GROUPED", mode}},
                  with({{"n", 20}, {"k", 70}}, 20 * 70)});
  }
  // Experts with per-expert scales (gathered rows only: the sorted mode
  // reads the same weights): FP8 (a scale matrix each), int4w (scales and
  // zero points), INT8 (row scales).
  const Sizes gathered = {{"t", 8}, {"n_expert", 3}, {"tokens", 5}};
  auto experts = [&](Sizes s, int64_t stride) {
    s.insert(gathered.begin(), gathered.end());
    s["w_stride"] = stride;
    return s;
  };
  cs.push_back({"gemm",
                {{"W", DType::f8e4m3}},
                {{"BLOCK_T", 2}, {"PANEL_T", 2}, {"GROUPED", 1}, {"SCALE_BLOCK", 16}},
                experts({{"n", 20}, {"k", 40}}, 800)});
  cs.push_back({"gemv_int4w",
                {},
                {{"GROUP", 32}, {"ZP", 1}, {"BLOCK_M", 4}, {"BLOCK_T", 2}, {"GROUPED", 1}},
                experts({{"m", 8}, {"k", 64}}, 8 * 32)});
  cs.push_back({"gemm_int4w_tiles",
                {},
                {{"GROUP", 32}, {"ZP", 1}, {"BLOCK_M", 16}, {"BLOCK_T", 8}, {"GROUPED", 1}},
                experts({{"m", 16}, {"k", 64}}, 16 * 32)});
  cs.push_back({"gemv_w8a8",
                {},
                {{"BLOCK_M", 4}, {"BLOCK_T", 2}, {"GROUPED", 1}},
                experts({{"m", 8}, {"k", 64}}, 8 * 64)});
  return cs;
}

std::string case_name(const Case& c, const Spec& s) {
  std::string n = s.str();
  for (const auto& [k, v] : c.sizes) n += " " + k + "=" + std::to_string(v);
  return n;
}

// Buffers and scalars for one case: random values a kernel can meaningfully
// consume (real ggml blocks for qgemv's weights, valid positions for rope).
struct Inputs {
  std::vector<HostMemory> memory;
  std::vector<Arg> args;
  Grid grid{};
};

Inputs make_inputs(const Case& c, const Spec& spec, const Kernel& k) {
  const KernelDef& def = find_kernel(c.kernel);
  Inputs in;
  // By name for the runtime's checks; in parameter order (in.args) for
  // the CUDA launches below it.
  LaunchArgs named;
  Sizes launch = c.sizes;
  for (const Param& p : k.params) {
    if (p.kind != ParamKind::Scalar) continue;
    if (is_float(p.dtype)) {
      named.emplace_back(p.name, p.name == "eps" ? 1e-5 : 0.37);
    } else {
      named.emplace_back(p.name, c.sizes.at(p.name));
      launch.erase(p.name);
    }
  }
  for (const auto& [name, v] : launch) named.emplace_back(name, v);
  ScalarArgs sa;
  for (const auto& [name, v] : c.sizes) sa.set_int(name, v);
  LaunchShape shape = def.launch_shape(spec, sa);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(-1, 1);
  in.memory.reserve(k.params.size());
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    if (p.kind != ParamKind::Buffer) continue;
    int64_t n = std::max<int64_t>(shape.buffer_elems.at(p.name), 1);
    in.memory.emplace_back(static_cast<size_t>(n * dtype_bytes(p.dtype)));
    void* m = in.memory.back().data();
    if ((c.kernel == "qgemv" || c.kernel == "qgemm_tiles") && p.name == "w") {
      const TensorTypeInfo& f = block_type_info(spec.constexpr_("FMT"));
      std::vector<float> w(static_cast<size_t>(n / f.block_bytes * f.block_elems));
      for (float& x : w) x = static_cast<float>(unit(rng));
      ggml::sample_blocks(f.type, w.data(), static_cast<int64_t>(w.size()), 3,
                          static_cast<uint8_t*>(m));
    } else if (c.kernel == "qgemv_rows16" && p.name == "w") {
      int64_t rows = c.sizes.at("m"), cols = c.sizes.at("k");
      auto qt = static_cast<TensorType>(spec.constexpr_("FMT"));
      const TensorTypeInfo& f = tensor_type_info(qt);
      const int64_t one = ggml::rows16_bytes(qt, rows, cols);
      for (int64_t e = 0; e < n / one; ++e) {  // each expert of a grouped stack
        std::vector<float> w(static_cast<size_t>(rows * cols));
        for (float& x : w) x = static_cast<float>(unit(rng));
        std::vector<uint8_t> blocks(
            static_cast<size_t>(rows * cols / f.block_elems * f.block_bytes));
        ggml::quantize(qt, w.data(), rows * cols, blocks.data());
        ggml::interleave_rows16(qt, blocks.data(), rows, cols, static_cast<uint8_t*>(m) + e * one);
      }
    } else if (p.name == "tile_expert" || p.name == "sorted" ||
               (c.kernel == "moe_combine" && p.name == "pos")) {
      // Tiles of experts 2, 0, 1, then none; the rows' tokens, some padding
      // (never a tile's first); rows of y, some slots dropped.
      auto* idx = static_cast<int32_t*>(m);
      for (int64_t j = 0; j < n; ++j)
        idx[j] = p.name == "tile_expert" ? static_cast<int32_t>(j < 3 ? (j + 2) % 3 : -1)
                 : p.name == "sorted"    ? static_cast<int32_t>(j % 4 == 3 ? -1 : j % 5)
                                         : static_cast<int32_t>(j % 5 == 4 ? -1 : j * 7 % 12);
    } else if (p.name == "expert_map") {
      // Router experts to kept ones, every third pruned.
      for (int64_t j = 0; j < n; ++j)
        static_cast<int32_t*>(m)[j] = static_cast<int32_t>(j % 3 == 1 ? -1 : j * 2 / 3);
    } else if (c.kernel == "get_rows" && p.name == "table" && p.dtype == DType::u8) {
      auto qt = static_cast<TensorType>(spec.constexpr_("FMT"));
      int64_t elems = c.sizes.at("table_rows") * c.sizes.at("n");
      std::vector<float> w(static_cast<size_t>(elems));
      for (float& x : w) x = static_cast<float>(unit(rng));
      ggml::sample_blocks(qt, w.data(), elems, 3, static_cast<uint8_t*>(m));
    } else if (p.name == "cu_seqlens" || p.name == "seq_pos0") {
      // Two sequences of 3 and 4 tokens, at positions 5 and 16.
      const int32_t cu[] = {0, 3, 7}, pos[] = {5, 16};
      for (int64_t j = 0; j < n; ++j)
        static_cast<int32_t*>(m)[j] = p.name == "cu_seqlens" ? cu[j] : pos[j];
    } else if (p.name == "positions" || p.name == "tok_seq") {
      // A packed batch of two sequences, alternating: distinct rows.
      for (int64_t j = 0; j < n; ++j)
        static_cast<int32_t*>(m)[j] = static_cast<int32_t>(p.name == "tok_seq" ? j % 2 : 3 + j);
    } else if (p.name == "seq_len") {
      // Sequences of 1, 18 and 35 keys.
      for (int64_t j = 0; j < n; ++j)
        static_cast<int32_t*>(m)[j] = static_cast<int32_t>(1 + 17 * j);
    } else if (p.name == "block_table") {
      // Distinct pages of the pool, out of order.
      auto* idx = static_cast<int32_t*>(m);
      for (int64_t j = 0; j < n; ++j)
        idx[j] = static_cast<int32_t>((n - 1 - j) % c.sizes.at("n_pages"));
    } else if ((c.kernel == "get_rows" || c.kernel == "moe_sort") && p.name == "ids") {
      // Indices in range: table rows; experts (distinct within a token's k,
      // one slot dropped).
      auto* idx = static_cast<int32_t*>(m);
      for (int64_t j = 0; j < n; ++j)
        idx[j] = c.kernel == "get_rows" ? static_cast<int32_t>(j * 3 % c.sizes.at("table_rows"))
                 : j == 3               ? -1
                          : static_cast<int32_t>((j / c.sizes.at("k") * 5 + j % c.sizes.at("k")) %
                                                 c.sizes.at("n_expert"));
    } else if (c.kernel == "gemv_int4w_rows16" && p.name == "w") {
      Int4wRows r = test::random_int4w(c.sizes.at("m"), c.sizes.at("k"), spec.constexpr_("GROUP"),
                                       spec.constexpr_("ZP") != 0, rng());
      std::vector<uint8_t> packed = interleave_int4w_rows16(r);
      std::copy(packed.begin(), packed.end(), static_cast<uint8_t*>(m));
    } else {
      for (int64_t j = 0; j < n; ++j) {
        ScalarValue v;
        double u = unit(rng);
        if (p.name == "k_scale" || p.name == "v_scale")  // q8_0 values in [-1, 1]
          v.f = round_to_float_dtype(static_cast<float>((u + 3) / 4 / 127), p.dtype);
        else if (is_float(p.dtype))
          v.f = round_to_float_dtype(static_cast<float>(u), p.dtype);
        else if (p.name == "pos" && c.sizes.count("n_pos"))
          v.i = static_cast<int64_t>((u + 1) / 2 * static_cast<double>(c.sizes.at("n_pos") - 1));
        else if (p.dtype == DType::i8)
          v.i = static_cast<int64_t>(u * 127);
        else
          v.i = normalize_int(static_cast<int64_t>((u + 1) * 1000), p.dtype);
        store_element(m, j, p.dtype, v);
      }
    }
    named.emplace_back(p.name, LaunchArg(m, n, p.dtype));
  }
  const BoundArgs bound = bind_named(k, named);
  in.args = bound.args();
  in.grid = test::runtime().check_launch(spec, k, bound).grid;
  return in;
}

// The cases CI runs in the simulator and through NVRTC: the first case of
// each kernel for each dtype of each role and each block format (FMT), in
// list order. The rest repeat code paths those cover with other
// constexprs; `test_kernels "[long]"` runs every case.
std::vector<Case> covering_cases() {
  std::set<std::string> seen;
  std::vector<Case> out;
  for (const Case& c : cases()) {
    std::vector<std::string> features = {c.kernel};
    // The spec's dtypes: a case may leave a role at its default.
    for (const auto& [role, t] : find_kernel(c.kernel).make_spec(c.dtypes, c.constexprs).dtypes)
      features.push_back(c.kernel + " " + role + "=" + std::string(dtype_name(t)));
    if (auto f = c.constexprs.find("FMT"); f != c.constexprs.end())
      features.push_back(c.kernel + " FMT=" + std::to_string(f->second));
    bool fresh = false;
    for (const std::string& f : features) fresh |= seen.insert(f).second;
    if (fresh) out.push_back(c);
  }
  return out;
}

// The tolerance of Runtime's check mode (runtime/launch_check.h).
test::CudaCheck tolerance(const KernelDef& def, const Kernel& k) {
  const LaunchTolerance t = launch_tolerance(k, def.rtol, def.atol);
  test::CudaCheck chk;
  chk.rtol = t.rtol;
  chk.atol = t.atol;
  return chk;
}

}  // namespace

TEST_CASE("cuda: every library kernel has a CUDA case", "[cuda][kernels]") {
  std::set<std::string> covered;
  for (const Case& c : covering_cases()) covered.insert(c.kernel);
  for (const KernelDef& d : all_kernels()) {
    INFO(d.name);
    CHECK(covered.count(d.name) == 1);
    for (const auto& [role, dtypes] : d.dtype_roles)
      for (DType t : dtypes) {
        bool found = false;
        for (const Case& c : covering_cases()) {
          if (c.kernel != d.name) continue;
          Spec s = d.make_spec(c.dtypes, c.constexprs);
          found |= s.dtypes.count(role) && s.dtypes.at(role) == t;
        }
        INFO(role << "=" << dtype_name(t));
        CHECK(found);
      }
  }
}

namespace {

void simulator_matches_interpreter(const std::vector<Case>& cs) {
  for (const Case& c : cs) {
    const KernelDef& def = find_kernel(c.kernel);
    Spec spec = def.make_spec(c.dtypes, c.constexprs);
    Kernel k = run_pipeline(def.build(spec));
    INFO(case_name(c, spec));
    Inputs in = make_inputs(c, spec, k);
    test::CudaCheck chk = tolerance(def, k);
    CHECK(test::cuda_vs_interpreter(k, in.args, in.grid, chk) == "");
  }
}

}  // namespace

TEST_CASE("cuda: library kernels in the simulator match the interpreter", "[cuda][kernels][sim]") {
  simulator_matches_interpreter(covering_cases());
}

TEST_CASE("cuda: every library case in the simulator matches the interpreter",
          "[cuda][kernels][sim][.long]") {
  simulator_matches_interpreter(cases());
}

namespace {

// The cases NVRTC and ptxas compile: all but the 16-row GEMMs' scaled
// decode (BLOCK_T 12), whose unrolled tokens take NVRTC 80-110 s per arch;
// the simulator runs their CUDA C, and NVRTC compiles the same kernels at
// BLOCK_T 1 and 4.
bool compiled_by_nvrtc(const Case& c) {
  auto bt = c.constexprs.find("BLOCK_T");
  return c.kernel != "qgemv_rows16" || bt == c.constexprs.end() || bt->second < 12;
}

// Runs fn(i) for i in [0, n) on every core and returns each call's error
// ("" when it succeeded): nearly all of the NVRTC and GPU cases' time is
// NVRTC and ptxas, and separate programs compile independently.
std::vector<std::string> on_all_cores(size_t n, const std::function<void(size_t)>& fn) {
  static ThreadPool pool;
  std::vector<std::string> errors(n);
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) try {
        fn(static_cast<size_t>(i));
      } catch (const Error& err) {
        errors[static_cast<size_t>(i)] = err.what();
      }
  });
  return errors;
}

}  // namespace

// The same cases on a real GPU, where one is present (skipped otherwise).
TEST_CASE("cuda: library kernels on the GPU match the interpreter", "[cuda][kernels][gpu]") {
  CudaDevice* gpu = nullptr;
  try {
    gpu = &CudaDevice::get();
  } catch (const Error& e) {
    WARN("skipped: " << e.what());
    return;
  }
  struct Prepared {
    Kernel k;
    std::string name;
    Inputs in;
    test::CudaCheck chk;
  };
  std::vector<Prepared> ps;
  std::vector<CudaSource> srcs;
  for (const Case& c : cases()) {
    const KernelDef& def = find_kernel(c.kernel);
    Spec spec = def.make_spec(c.dtypes, c.constexprs);
    Kernel k = run_pipeline(def.build(spec));
    test::CudaCheck chk = tolerance(def, k);
    chk.options.sm = std::min(gpu->sm(), 90);
    srcs.push_back(emit_cuda(k, chk.options));
    Inputs in = make_inputs(c, spec, k);
    ps.push_back({std::move(k), case_name(c, spec), std::move(in), chk});
  }
  std::vector<CudaModule> modules(srcs.size());
  std::vector<std::string> errors =
      on_all_cores(srcs.size(), [&](size_t i) { modules[i] = compile_cubin(srcs[i], gpu->sm()); });
  for (size_t i = 0; i < ps.size(); ++i) {
    INFO(ps[i].name << " on " << gpu->name());
    CHECK(errors[i] == "");
    if (!errors[i].empty()) continue;
    // cuda_vs_interpreter emits the same source again; run the cubin compiled above.
    auto on_gpu = [&](const Kernel& kk, const CudaSource& src, const std::vector<Arg>& args,
                      const Grid& grid) {
      REQUIRE(src.code == srcs[i].code);
      gpu->run(kk, src, modules[i], args, grid);
    };
    CHECK(test::cuda_vs_interpreter(ps[i].k, ps[i].in.args, ps[i].in.grid, ps[i].chk, on_gpu) ==
          "");
  }
}

// Every case for sm_90, the GPUs Kiln is scheduled for. The CUDA C is the
// same for sm_80 (both have mma.sync); there ptxas only allocates registers
// for another arch, so sm_80 compiles the cases whose source holds tensor-core
// instructions, where the arch matters: the full sweep for both took NVRTC
// 11 minutes of the test suite on two cores.
namespace {

void nvrtc_compiles(const std::vector<Case>& cs) {
  if (!test::have_cuda_toolkit()) return;
  std::vector<std::string> names;
  std::vector<CudaSource> srcs;
  size_t compiled = 0;
  for (const Case& c : cs) {
    if (!compiled_by_nvrtc(c)) continue;
    ++compiled;
    const KernelDef& def = find_kernel(c.kernel);
    Spec spec = def.make_spec(c.dtypes, c.constexprs);
    Kernel k = run_pipeline(def.build(spec));
    for (int sm : {90, 80}) {
      CudaOptions o;
      o.sm = sm;
      CudaSource src = emit_cuda(k, o);
      if (sm == 80 && !src.uses_mma) continue;
      srcs.push_back(std::move(src));
      names.push_back(case_name(c, spec) + " sm_" + std::to_string(sm));
    }
  }
  std::vector<CudaModule> ptx(srcs.size());
  std::vector<PtxasReport> reports(srcs.size());
  std::vector<std::string> errors = on_all_cores(srcs.size(), [&](size_t i) {
    ptx[i] = compile_ptx(srcs[i]);
    reports[i] = run_ptxas(ptx[i], srcs[i].sm);
  });
  for (size_t i = 0; i < srcs.size(); ++i) {
    INFO(names[i]);
    CHECK(errors[i] == "");
    CHECK(ptx[i].ptx.find(".entry " + srcs[i].entry) != std::string::npos);
    CHECK(reports[i].registers > 0);
  }
  CHECK(srcs.size() > compiled);  // some cases use tensor cores
}

}  // namespace

TEST_CASE("cuda: library kernels compile through NVRTC and ptxas for sm_90 (tensor cores: sm_80)",
          "[cuda][kernels][nvrtc]") {
  nvrtc_compiles(covering_cases());
}

TEST_CASE("cuda: every library case compiles through NVRTC and ptxas",
          "[cuda][kernels][nvrtc][.long]") {
  nvrtc_compiles(cases());
  size_t skipped = 0;
  for (const Case& c : cases()) skipped += !compiled_by_nvrtc(c);
  CHECK(skipped == 2);  // only Q2_K's and Q3_K's scaled decode left out
}
