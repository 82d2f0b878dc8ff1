// The attention kernels with q and out in f16 and bf16 (T): against the
// double-precision reference over the same rounded q, and against the
// interpreter, for decode, split-K decode and prefill, with and without a
// window, sinks, a paged or a q8_0 cache.
//
// Tolerance: the f32 kernels' 2e-5 plus one unit in the last place of T at
// 1 (output_atol): the kernels compute in f32 and round each output once.
#include <catch2/catch.hpp>

#include "attention_case.h"

using namespace kiln;
using kiln::test::AttentionCase;
using kiln::test::HostBuffer;

namespace {
constexpr double kAtol = 2e-5;
}  // namespace

TEST_CASE("attention in f16 and bf16 activations matches a double-precision reference",
          "[kernels][attention]") {
  for (DType act : {DType::f16, DType::bf16})
    for (const char* kernel : {"attention_decode", "split", "attention_prefill"})
      for (int variant = 0; variant < 3; ++variant) {
        AttentionCase c{
            .kv = DType::f16, .act = act, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
        c.n_tokens = std::string(kernel) == "attention_prefill" ? 9 : 1;
        c.pos0 = 60;
        c.kv_len = c.pos0 + c.n_tokens;
        if (variant == 1) c.window = 20, c.sinks = true, c.page = 16;
        if (variant == 2) c.kv = DType::i8, c.head_dim = 128;
        INFO(kernel << " " << c.describe());
        kiln::test::AttentionData d(c);
        HostBuffer out = kiln::test::run_any_attention(kernel, c, d, false, {});
        CHECK(out.dtype() == act);
        CHECK(kiln::test::worst_error(out, kiln::test::attention_reference(c, d),
                                      kiln::test::output_atol(c, kAtol), 0) <= 1.0);
      }
}

TEST_CASE("attention in f16 and bf16 activations matches the interpreter", "[kernels][attention]") {
  for (DType act : {DType::f16, DType::bf16}) {
    AttentionCase c{.kv = DType::f16, .act = act, .head_dim = 64, .n_heads = 8, .n_kv_heads = 2};
    c.n_tokens = 3;
    c.pos0 = 20;
    c.kv_len = 23;
    for (const char* kernel : {"attention_decode", "attention_prefill"})
      kiln::test::check_attention_interpreted(kernel, c, kAtol, {});
  }
}
