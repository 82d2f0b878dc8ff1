// Prompt GEMM over f16 or bf16 weights as tile dots: Y[t, n] = X[t, k]
// W[n, k]^T, W row-major [n, k] (the GEMV layout) in f16/bf16, X and Y f32.
//
// gemm keeps every product in f32 lanes, which is how a CPU core is fast.
// A GPU's tensor cores take f16 or bf16 tiles: a program owns BLOCK_N
// weight rows by BLOCK_T tokens and walks k BLOCK_K columns a step, one
// `dot` of the weight tile [BLOCK_N, BLOCK_K] with the tokens' columns
// [BLOCK_K, BLOCK_T] rounded to the weights' dtype (mma.sync m16n8k16 on
// sm_80 and later), accumulating in f32. Rounding X to the weights' dtype
// is the one difference from gemm: as a GPU engine runs f16 and bf16
// models, with activations in the model's dtype.
//
// Rows and tokens past the program's tile, and columns past k, load as
// zeros and are not stored.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/moe/expert_tiles.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_gemm_tiles(const Spec& s) {
  KernelBuilder k("gemm_tiles", s);
  const DType TW = s.dtype("W");
  const int64_t BN = s.constexpr_("BLOCK_N"), BT = s.constexpr_("BLOCK_T"),
                BK = s.constexpr_("BLOCK_K");
  auto w = k.buffer("w", TW), x = k.buffer("x", DType::f32), y = k.buffer("y", DType::f32);
  auto T = k.scalar("t", DType::i32), N = k.scalar("n", DType::i32), K = k.scalar("k", DType::i32);
  ExpertTiles tiles(k, s, BT, T);
  tiles.run([&] {
    auto we = tiles.weights(w);
    auto rows = tiles.row_block() * static_cast<int>(BN) + arange(BN);  // [BN]
    auto pos = tiles.first() + arange(BT);                              // [BT] tile slots
    auto K64 = K.to(DType::i64);
    auto w_at = expand_dims(rows.to(DType::i64) * K64, 1);                  // [BN, 1]
    auto x_at = expand_dims(tiles.x_row_tile(BT).to(DType::i64) * K64, 0);  // [1, BT]
    auto row_ok = expand_dims(rows < N, 1);
    auto acc = k.var(zeros(DType::f32, {BN, BT}));
    k.for_(0, K, static_cast<int>(BK), [&](Value k0) {
      auto cols = k0 + arange(BK);
      auto wcols = expand_dims(cols, 0), xcols = expand_dims(cols, 1);
      auto wt = load(we + (w_at + wcols.to(DType::i64)), row_ok & (wcols < K), 0.0);  // [BN, BK]
      auto xt = load(x + (x_at + xcols.to(DType::i64)), broadcast_to(xcols < K, {BK, BT}), 0.0);
      acc = dot(wt, xt.to(TW), Value(acc));
    });
    auto at = expand_dims(pos.to(DType::i64), 0) * N.to(DType::i64) +
              expand_dims(rows.to(DType::i64), 1);  // [BN, BT]
    store(y + at, Value(acc),
          broadcast_to(row_ok, {BN, BT}) & broadcast_to(expand_dims(pos < T, 0), {BN, BT}));
  });
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "gemm_tiles",
    .family = "gemm",
    .summary = "Y[t, n] = X[t, k] W[n, k]^T as tile dots (mma.sync f16/bf16 on a GPU), X rounded "
               "to W's dtype",
    .dtype_roles = {{"W", {DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"BLOCK_N", 64}, {"BLOCK_T", 32}, {"BLOCK_K", 32}, {"GROUPED", 0}},
    .build = build_gemm_tiles,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t t = a.i("t"), n = a.i("n"), kk = a.i("k");
          if (t < 1)
            throw Error("kernel 'gemm_tiles': t = " + std::to_string(t) + " tokens (need >= 1)");
          const int64_t bt = s.constexpr_("BLOCK_T");
          LaunchShape plain{{cdiv(t, bt), cdiv(n, s.constexpr_("BLOCK_N")), 1},
                            {{"w", n * kk}, {"x", t * kk}, {"y", t * n}}};
          return expert_tiles_launch("gemm_tiles", s, a, plain, bt, "w", {{"x", kk}});
        },
    // A CPU (no CPU policy picks this kernel; it runs there for tests and
    // inspection) takes an 8 x 8 tile, which its vector registers hold: a
    // 64 x 32 one leaves LLVM's register allocator minutes of work (AVX2).
    .heuristic = [](const Spec& s) -> std::map<std::string, int64_t> {
      if (s.target.warp_size == 1) return {{"BLOCK_N", 8}, {"BLOCK_T", 8}};
      return {};
    },
    // An mma tile is 16 rows by 8 tokens: the token block is the smallest
    // multiple of 8 that covers the prompt, up to 32.
    .shape_heuristic = [](const Spec& s, const ScalarArgs& a) -> std::map<std::string, int64_t> {
      if (s.target.warp_size == 1) return {};  // the heuristic's CPU tile, whatever t
      const int64_t t = a.i("t");
      return {{"BLOCK_T", t > 16 ? 32 : t > 8 ? 16 : 8}};
    },
    .tunables = {{"BLOCK_N", {32, 64, 128}},
                 {"BLOCK_T", {8, 16, 32, 64}},
                 {"BLOCK_K", {16, 32, 64}}},
    .shape_keys = {"t", "n", "k"},
    // JIT, simulator and interpreter round X alike; they differ in the
    // order of the f32 accumulation over k.
    .rtol = 1e-4,
    .atol = 1e-4,
}));

}  // namespace
}  // namespace kiln
