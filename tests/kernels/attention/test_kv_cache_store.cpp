// kv_cache_store against the layout's host indices (kv_cache.h): new keys
// and values land rounded to the cache dtype, bit for bit, at their
// positions, and every other element stays as it was; in the JIT and the
// interpreter.
#include <catch2/catch.hpp>

#include "attention_case.h"
#include "kernels/attention/attention_shape.h"
#include "kernels/attention/kv_cache.h"

using namespace kiln;
using kiln::test::HostBuffer;
using kiln::test::kTestKeyBlock;

namespace {

struct StoreCase {
  int64_t n_tokens, n_kv, max_ctx, pos0;
};

std::vector<Arg> store_args(HostBuffer& xk, HostBuffer& xv, HostBuffer& k, HostBuffer& v,
                            const StoreCase& c) {
  return {xk.arg(),
          xv.arg(),
          k.arg(),
          v.arg(),
          Arg::scalar_int(c.n_tokens),
          Arg::scalar_int(c.n_kv),
          Arg::scalar_int(c.max_ctx),
          Arg::scalar_int(c.pos0)};
}

}  // namespace

TEST_CASE("kv_cache_store writes keys and values at their positions", "[kernels][attention]") {
  const int64_t D = 32;
  for (DType kv : {DType::f16, DType::bf16, DType::f32})
    for (StoreCase c : {StoreCase{1, 3, 20, 0}, StoreCase{1, 3, 16, 15}, StoreCase{5, 2, 37, 14},
                        StoreCase{40, 1, 43, 3}}) {
      INFO(dtype_name(kv) << " n_tokens=" << c.n_tokens << " n_kv=" << c.n_kv
                          << " max_ctx=" << c.max_ctx << " pos0=" << c.pos0);
      Spec spec = find_kernel("kv_cache_store").make_spec({{"KV", kv}}, {{"HEAD_DIM", D}});
      const int64_t nx = c.n_tokens * c.n_kv * D;
      auto xk = HostBuffer::random(DType::f32, nx, 3, -70, 70);
      auto xv = HostBuffer::random(DType::f32, nx, 4, -70, 70);
      auto k = HostBuffer::random(kv, k_cache_elems(c.max_ctx, c.n_kv, D, kTestKeyBlock), 5),
           ki = k, kw = k;
      auto v = HostBuffer::random(kv, v_cache_elems(c.max_ctx, c.n_kv, D), 6), vi = v, vw = v;
      for (int64_t t = 0; t < c.n_tokens; ++t)
        for (int64_t h = 0; h < c.n_kv; ++h)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t x = (t * c.n_kv + h) * D + d;
            kw.set(k_cache_index(c.pos0 + t, h, d, c.max_ctx, D, kTestKeyBlock), xk.get(x));
            vw.set(v_cache_index(c.pos0 + t, h, d, c.max_ctx, D), xv.get(x));
          }
      kiln::test::runtime().launch(spec, store_args(xk, xv, k, v, c));
      kiln::test::runtime().interpret(spec, store_args(xk, xv, ki, vi, c));
      CHECK(k.bytes() == kw.bytes());
      CHECK(v.bytes() == vw.bytes());
      CHECK(ki.bytes() == kw.bytes());
      CHECK(vi.bytes() == vw.bytes());
    }
}

TEST_CASE("kv_cache_store refuses rows past the cache and bad sizes",
          "[kernels][attention][error]") {
  Spec spec = find_kernel("kv_cache_store").make_spec({{"KV", DType::f16}}, {{"HEAD_DIM", 32}});
  auto xk = HostBuffer::random(DType::f32, 2 * 32, 3), xv = xk;
  auto k = HostBuffer::random(DType::f16, k_cache_elems(16, 1, 32, kTestKeyBlock), 4);
  auto v = HostBuffer::random(DType::f16, v_cache_elems(16, 1, 32), 4);
  auto refused = [&](const Spec& sp, StoreCase c, const std::string& why) {
    REQUIRE_THROWS_WITH(kiln::test::runtime().launch(sp, store_args(xk, xv, k, v, c)),
                        Catch::Contains("kernel 'kv_cache_store'") && Catch::Contains(why));
  };
  refused(spec, {2, 1, 16, 15}, "pos0 + n_tokens = 15 + 2 exceeds max_ctx = 16");
  refused(spec, {2, 1, 16, -1}, "pos0 = -1");
  REQUIRE_THROWS_WITH(kiln::test::runtime().launch(spec, store_args(xk, xv, k, v, {2, 1, 17, 0})),
                      Catch::Contains("buffer 'k' holds 512 elements, the launch needs 1024"));
  refused(find_kernel("kv_cache_store").make_spec({{"KV", DType::f16}}, {{"HEAD_DIM", 40}}),
          {1, 1, 16, 0}, "HEAD_DIM must be a positive multiple of 16, got 40");
}

TEST_CASE("attention lanes and the K cache block follow the target", "[kernels][attention]") {
  CHECK(attention_lanes(TargetDesc{}) == 16);               // AVX-512
  CHECK(attention_lanes(TargetDesc{256, 16, 1}) == 8);      // AVX2
  CHECK(attention_lanes(TargetDesc{128, 32, 1}) == 8);      // NEON: two registers
  CHECK(attention_lanes(TargetDesc{1024, 255, 32}) == 16);  // CUDA
  CHECK(kv_key_block(TargetDesc{256, 16, 1}) == 8);
  // 20 rows in blocks of 8 keys: 3 blocks of 8 x 32 per head.
  CHECK(k_cache_elems(20, 2, 32, 8) == 2 * 3 * 8 * 32);
  CHECK(k_cache_index(9, 1, 2, 20, 32, 8) == ((1 * 3 + 1) * 32 + 2) * 8 + 1);
}
