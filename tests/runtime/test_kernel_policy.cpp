// The kernel policies (runtime/kernel_policy.h): which layouts can hold
// which weights, the CPU's choices (16-row layouts, split-K decode beyond
// 512 keys, MoE tiles by tokens per expert) and the GPU's (the file's
// layout), and the ops that run a policy's choice or refuse one that does
// not fit the weight.
#include <catch2/catch.hpp>

#include "ir/error.h"
#include "runtime/cpu/cpu_policy.h"
#include "runtime/cuda/cuda_policy.h"
#include "runtime/ops.h"
#include "support/runtime_fixture.h"

using namespace kiln;

namespace {

constexpr TensorType kQ4K = TensorType::q4_K, kQ8_0 = TensorType::q8_0,
                     kIQ2XXS = TensorType::iq2_xxs;
constexpr std::optional<TensorType> kFloat;

WeightCase blocks(std::optional<TensorType> type, int64_t m, int64_t k, int64_t experts = 0) {
  return {type, m, k, experts, 0};
}
WeightCase int4w(int64_t m, int64_t k, int64_t group) { return {TensorType::i4, m, k, 0, group}; }

}  // namespace

TEST_CASE("a 16-row layout holds whole row groups and chunks of formats that have one",
          "[runtime][policy]") {
  CHECK(layout_fits(WeightLayout::rows16, blocks(kQ4K, 4096, 4096)));
  CHECK(layout_fits(WeightLayout::rows16, blocks(kQ8_0, 32, 256, 8)));
  CHECK_FALSE(layout_fits(WeightLayout::rows16, blocks(kQ4K, 4088, 4096)));   // 4088 % 16
  CHECK_FALSE(layout_fits(WeightLayout::rows16, blocks(kQ8_0, 64, 96)));      // 96 % 256
  CHECK_FALSE(layout_fits(WeightLayout::rows16, blocks(kIQ2XXS, 256, 256)));  // no interleave
  CHECK_FALSE(layout_fits(WeightLayout::rows16, blocks(kFloat, 256, 256)));
  CHECK_FALSE(layout_fits(WeightLayout::rows16, {TensorType::i8_channel, 256, 256, 0, 0}));
  for (int64_t g : {32, 64, 128}) CHECK(layout_fits(WeightLayout::rows16, int4w(64, 512, g)));
  CHECK_FALSE(layout_fits(WeightLayout::rows16, int4w(64, 512, 256)));
  for (const WeightCase& w : {blocks(kQ4K, 4088, 4096), blocks(kFloat, 3, 5), int4w(3, 64, 16)})
    CHECK(layout_fits(WeightLayout::as_stored, w));
}

TEST_CASE("the cpu policy interleaves what fits and splits long decodes", "[runtime][policy]") {
  const KernelPolicy& p = cpu_kernel_policy();
  CHECK(p.name() == "cpu");
  CHECK(p.weight_layout(blocks(kQ4K, 4096, 4096)) == WeightLayout::rows16);
  CHECK(p.weight_layout(blocks(kQ4K, 4096, 4096, 128)) == WeightLayout::rows16);
  CHECK(p.weight_layout(int4w(4096, 4096, 128)) == WeightLayout::rows16);
  CHECK(p.weight_layout(blocks(kQ4K, 4088, 4096)) == WeightLayout::as_stored);
  CHECK(p.weight_layout(blocks(kIQ2XXS, 4096, 4096)) == WeightLayout::as_stored);
  CHECK(p.weight_layout({TensorType::i8_channel, 4096, 4096, 0, 0}) == WeightLayout::as_stored);

  const WeightCase q = blocks(kQ4K, 4096, 4096);
  for (int64_t t : {1, 512}) {
    CHECK(p.matmul(q, WeightLayout::rows16, t, 0) == MatmulKernel::qgemv_rows16);
    CHECK(p.matmul(q, WeightLayout::as_stored, t, 0) == MatmulKernel::qgemv);
    CHECK(p.matmul(int4w(64, 512, 32), WeightLayout::rows16, t, 0) ==
          MatmulKernel::gemv_int4w_rows16);
    CHECK(p.matmul(int4w(64, 512, 32), WeightLayout::as_stored, t, 0) == MatmulKernel::gemv_int4w);
    CHECK(p.matmul({TensorType::i8_channel, 64, 512, 0, 0}, WeightLayout::as_stored, t, 4) ==
          MatmulKernel::gemv_w8a8);
  }
  const WeightCase f = blocks(kFloat, 64, 512);
  CHECK(p.matmul(f, WeightLayout::as_stored, 1, 0) == MatmulKernel::gemv);
  CHECK(p.matmul(f, WeightLayout::as_stored, 2, 0) == MatmulKernel::gemm);
  CHECK(p.matmul(f, WeightLayout::as_stored, 1, 4) == MatmulKernel::gemm);

  CHECK(p.decode_split_keys(512) == 0);
  CHECK(p.decode_split_keys(513) == 512);
  CHECK(p.decode_split_keys(32768) == 512);
  for (DType kv : {DType::f16, DType::bf16, DType::f32, DType::i8, DType::u32})
    for (int64_t t : {1, 512}) CHECK(p.attention_blocks(kv, t) == AttentionBlocks::walk);

  CHECK(p.moe_tile(1, 8, 128) == 1);    // decode: one token per expert
  CHECK(p.moe_tile(32, 8, 128) == 2);   // 2 per expert
  CHECK(p.moe_tile(512, 8, 128) == 4);  // 32 per expert: the GEMMs' token block
  CHECK(p.moe_tile(7, 2, 4) == 2);      // 3.5 per expert
}

TEST_CASE("the cuda policy keeps the file's layout", "[runtime][policy]") {
  const KernelPolicy& p = cuda_kernel_policy(90);
  CHECK(p.name() == "cuda");
  for (const WeightCase& w :
       {blocks(kQ4K, 4096, 4096), blocks(kQ8_0, 4096, 4096, 128), int4w(4096, 4096, 128)})
    CHECK(p.weight_layout(w) == WeightLayout::as_stored);
  CHECK(p.matmul(blocks(kQ4K, 4096, 4096), WeightLayout::as_stored, 1, 0) == MatmulKernel::qgemv);
  CHECK(p.matmul(blocks(kQ4K, 4096, 4096), WeightLayout::as_stored, 512, 4) == MatmulKernel::qgemv);
  // Grouped experts as tile dots in whole mma tiles of tokens.
  CHECK(p.matmul(blocks(kQ4K, 4096, 4096), WeightLayout::as_stored, 512, 16) ==
        MatmulKernel::qgemm_tiles);
  CHECK(p.moe_tile(32, 8, 128) == 2);   // 2 per expert: the default's
  CHECK(p.moe_tile(128, 8, 128) == 8);  // 8 per expert: one mma tile
  CHECK(p.moe_tile(512, 8, 128) == 32);
  CHECK(cuda_kernel_policy(75).moe_tile(512, 8, 128) == 4);
  // Prompts as tile dots; not before sm_80.
  for (const WeightCase& w : {blocks(kQ4K, 4096, 4096), blocks(kQ8_0, 4096, 4096, 128)})
    for (int64_t t : {2, 7, 512})
      CHECK(p.matmul(w, WeightLayout::as_stored, t, 0) == MatmulKernel::qgemm_tiles);
  CHECK(cuda_kernel_policy(75).matmul(blocks(kQ4K, 4096, 4096), WeightLayout::as_stored, 512, 0) ==
        MatmulKernel::qgemv);
  CHECK(p.matmul(int4w(4096, 4096, 128), WeightLayout::as_stored, 512, 0) ==
        MatmulKernel::gemm_int4w_tiles);
  CHECK(p.matmul(int4w(4096, 4096, 128), WeightLayout::as_stored, 512, 8) ==
        MatmulKernel::gemm_int4w_tiles);
  CHECK(p.matmul(int4w(4096, 4096, 128), WeightLayout::as_stored, 1, 0) ==
        MatmulKernel::gemv_int4w);
  // f16 and bf16 matrices' prompts as tile dots; f32 and block-scaled FP8
  // keep gemm, decode gemv.
  for (DType dt : {DType::f16, DType::bf16}) {
    const WeightCase half{std::nullopt, 4096, 4096, 0, 0, dt};
    CHECK(p.matmul(half, WeightLayout::as_stored, 512, 0) == MatmulKernel::gemm_tiles);
    CHECK(p.matmul(half, WeightLayout::as_stored, 512, 16) == MatmulKernel::gemm_tiles);
    CHECK(p.matmul(half, WeightLayout::as_stored, 1, 0) == MatmulKernel::gemv);
    CHECK(cpu_kernel_policy().matmul(half, WeightLayout::as_stored, 512, 0) == MatmulKernel::gemm);
  }
  CHECK(p.matmul({std::nullopt, 4096, 4096, 0, 0, DType::f32}, WeightLayout::as_stored, 512, 0) ==
        MatmulKernel::gemm);
  CHECK(p.matmul({std::nullopt, 4096, 4096, 0, 128, DType::f8e4m3}, WeightLayout::as_stored, 512,
                 0) == MatmulKernel::gemm);
  // Prompt token blocks that ptxas holds without spilling.
  const WeightCase q6 = blocks(TensorType::q6_K, 4096, 4096), q4 = blocks(kQ4K, 4096, 4096);
  CHECK(p.matmul_token_block(q6, MatmulKernel::qgemv, 512) == 2);
  CHECK(p.matmul_token_block(q4, MatmulKernel::qgemv, 512) == 4);
  CHECK(p.matmul_token_block(blocks(kQ8_0, 4096, 4096, 128), MatmulKernel::qgemv, 512) == 0);
  CHECK(p.matmul_token_block(q6, MatmulKernel::qgemv, 1) == 0);
  CHECK(cpu_kernel_policy().matmul_token_block(q6, MatmulKernel::qgemv, 512) == 0);
  // Before sm_80 (no mma.sync) attention keeps the walk.
  for (int64_t t : {1, 512})
    CHECK(cuda_kernel_policy(75).attention_blocks(DType::f16, t) == AttentionBlocks::walk);
  CHECK(cuda_kernel_policy(80).attention_blocks(DType::f16, 1) == AttentionBlocks::tiles);
  // Decode always splits (the tile strategy has no unsplit decode).
  for (int64_t span : {16, 512, 4096}) CHECK(p.decode_split_keys(span) == 256);
  for (int64_t t : {1, 512}) {
    CHECK(p.attention_blocks(DType::f16, t) == AttentionBlocks::tiles);
    CHECK(p.attention_blocks(DType::bf16, t) == AttentionBlocks::tiles);
    CHECK(p.attention_blocks(DType::i8, t) == AttentionBlocks::tiles);
    for (DType kv : {DType::f32, DType::u32})
      CHECK(p.attention_blocks(kv, t) == AttentionBlocks::walk);
  }
}

TEST_CASE("linear refuses a weight its layout cannot hold", "[runtime][policy][error]") {
  Graph g(test::runtime());
  std::vector<uint8_t> bytes(64 * 1024);
  Weight w;
  w.label = "attn_q";
  w.m = 24;  // not a multiple of 16
  w.k = 256;
  w.quant = kQ4K;
  w.data = g.external(bytes.data(), DType::u8, {24, 144});
  w.rows16 = g.external(bytes.data(), DType::u8, {24 * 144});
  std::vector<float> x(256);
  Tensor xt = g.external(x.data(), DType::f32, {1, 256});
  REQUIRE_THROWS_WITH(ops::linear(g, w, xt),
                      Catch::Contains("weight 'attn_q'") &&
                          Catch::Contains("cannot be held in a 16-row interleaved layout"));
}
