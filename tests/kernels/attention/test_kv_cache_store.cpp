// kv_cache_store against the layout's host indices (kv_cache.h): new keys
// and values land rounded to the cache dtype, bit for bit, at their
// positions, and every other element stays as it was; in the JIT and the
// interpreter.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <tuple>

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

LaunchArgs store_args(HostBuffer& xk, HostBuffer& xv, HostBuffer& k, HostBuffer& v,
                      const StoreCase& c) {
  return {{"xk", xk},
          {"xv", xv},
          {"k", k},
          {"v", v},
          {"n_tokens", c.n_tokens},
          {"n_kv_heads", c.n_kv},
          {"max_ctx", c.max_ctx},
          {"pos0", c.pos0}};
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

TEST_CASE("kv_cache_store rounds a q8_0 cache as llama.cpp's x86 Q8_0", "[kernels][attention]") {
  // Scalar reference (q8_0_rounding.h): per 32 elements d = f16(amax / 127),
  // code = nearest-even(x * (127 / amax)) in f32, 0 for an all-zero block.
  // Contiguous and paged, JIT and interpreter; blocks that are all zero,
  // hold ties (x * 127 / amax = k + 0.5) or have tiny magnitudes included.
  const int64_t D = 64, nkv = 2, nt = 5, pos0 = 14, max_ctx = 40, P = 16, n_pages = 4;
  const std::vector<int32_t> pages = {2, 0, 3};  // rows 0-15, 16-31, 32-39
  auto xk = HostBuffer::random(DType::f32, nt * nkv * D, 3, -70, 70);
  auto xv = HostBuffer::random(DType::f32, nt * nkv * D, 4, -1e-3, 1e-3);
  for (int64_t i = 0; i < 32; ++i) xk.set(i, 0);  // token 0, head 0: zeros
  for (int64_t i = 32; i < 64; ++i) xk.set(i, i % 2 ? 127.0 : 0.5 + (i % 7));  // ties
  for (int64_t page : {int64_t{0}, P}) {
    INFO("PAGE=" << page);
    Spec spec = find_kernel("kv_cache_store")
                    .make_spec({{"KV", DType::i8}}, {{"HEAD_DIM", D}, {"PAGE", page}});
    const int64_t ke = page ? k_pool_elems(n_pages, nkv, D, P)
                            : k_cache_elems(max_ctx, nkv, D, kTestKeyBlock),
                  ve = page ? v_pool_elems(n_pages, nkv, D, P) : v_cache_elems(max_ctx, nkv, D);
    HostBuffer table(DType::i32, 3);
    for (int64_t i = 0; i < 3; ++i) table.set(i, pages[i]);
    for (bool interpret : {false, true}) {
      INFO("interpret=" << interpret);
      HostBuffer k(DType::i8, ke), v(DType::i8, ve), ks(DType::f16, ke / 32),
          vs(DType::f16, ve / 32);
      LaunchArgs args = {
          {"xk", xk},          {"xv", xv},           {"k", k},      {"v", v}, {"n_tokens", nt},
          {"n_kv_heads", nkv}, {"max_ctx", max_ctx}, {"pos0", pos0}};
      if (page) args.insert(args.end(), {{"block_table", table}, {"n_pages", n_pages}});
      args.insert(args.end(), {{"k_scale", ks}, {"v_scale", vs}});
      if (interpret)
        kiln::test::runtime().interpret(spec, args);
      else
        kiln::test::runtime().launch(spec, args);
      auto k_at = [&](int64_t j, int64_t h, int64_t d, int64_t dims) {
        return page ? k_page_index(pages[j / P], j % P, h, d, n_pages, dims, P, kTestKeyBlock)
                    : k_cache_index(j, h, d, max_ctx, dims, kTestKeyBlock);
      };
      auto v_at = [&](int64_t j, int64_t h, int64_t d, int64_t dims) {
        return page ? v_page_index(pages[j / P], j % P, h, d, n_pages, dims, P)
                    : v_cache_index(j, h, d, max_ctx, dims);
      };
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t h = 0; h < nkv; ++h)
          for (int64_t g = 0; g < D / 32; ++g)
            for (auto [x, codes, scales, at] :
                 {std::tuple{&xk, &k, &ks,
                             std::function<int64_t(int64_t, int64_t, int64_t, int64_t)>(k_at)},
                  std::tuple{&xv, &v, &vs,
                             std::function<int64_t(int64_t, int64_t, int64_t, int64_t)>(v_at)}}) {
              const int64_t x0 = (t * nkv + h) * D + g * 32, j = pos0 + t;
              float amax = 0;
              for (int64_t i = 0; i < 32; ++i)
                amax = std::max(amax, std::fabs(static_cast<float>(x->get(x0 + i))));
              const float id = amax != 0 ? 127.0f / amax : 0.0f;
              INFO("token " << t << " head " << h << " block " << g << (x == &xk ? " K" : " V"));
              CHECK(scales->get(at(j, h, g, D / 32)) ==
                    static_cast<double>(static_cast<_Float16>(amax / 127.0f)));
              for (int64_t i = 0; i < 32; ++i)
                CHECK(codes->get(at(j, h, g * 32 + i, D)) ==
                      std::nearbyint(static_cast<float>(x->get(x0 + i)) * id));
            }
    }
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
  refused(find_kernel("kv_cache_store").make_spec({{"KV", DType::i8}}, {{"HEAD_DIM", 48}}),
          {1, 1, 16, 0}, "a q8_0 cache needs HEAD_DIM a multiple of 32, got 48");
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
