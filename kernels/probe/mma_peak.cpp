// The tile-dot roofline of a device, as a kernel: the rate at which Kiln's
// `dot` of f16 or bf16 tiles with f32 accumulators runs when a program does
// nothing else. Prompt attention as tile dots (attention_prefill_tiles) and
// any GEMM written with `dot` are bound by it, so `kiln bench --device`
// reports their GFLOP/s as a fraction of it, measured in the same run. On a
// GPU `dot` is mma.sync m16n8k16 with its operands staged through shared
// memory, as every dot is lowered: the probe measures that lowering's peak
// on the device, which is below the tensor cores' datasheet rate by the
// staging's cost, and it is the ceiling the kernels' schedules can reach
// today.
//
// Buffers a (T [TILE * TILE]), b (T [8 * TILE * TILE]: 8 windows the steps
// cycle through, so no product is loop-invariant), y (f32 [programs * TILE
// * TILE]); scalar steps; launch size programs. y holds each program's a
// times the sum of the windows its steps took.
#include "kernels/probe/mma_peak.h"

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t kWindows = 8;

Kernel build_mma_peak(const Spec& s) {
  KernelBuilder k("mma_peak", s);
  const DType T = s.dtype("T");
  const int64_t kTile = s.constexpr_("TILE");
  if (kTile < 16 || kTile % 16)
    throw Error("kernel 'mma_peak': TILE must be a positive multiple of 16, got " +
                std::to_string(kTile));
  auto a = k.buffer("a", T), b = k.buffer("b", T), y = k.buffer("y", DType::f32);
  auto steps = k.scalar("steps", DType::i32);
  auto tile = reshape(arange(kTile * kTile), {kTile, kTile});
  auto at = load(a + tile);
  auto acc = k.var(zeros(DType::f32, {kTile, kTile}));
  k.for_(0, steps, 1, [&](Value i) {
    auto window = (i & static_cast<int>(kWindows - 1)) * static_cast<int>(kTile * kTile);
    acc = dot(at, load(b + (broadcast_to(window, {kTile, kTile}) + tile)), Value(acc));
  });
  store(
      y + (broadcast_to(k.program_id(0) * static_cast<int>(kTile * kTile), {kTile, kTile}) + tile),
      Value(acc));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "mma_peak",
    .family = "probe",
    .summary = "the tile-dot roofline of a device: each program accumulates `steps` dots of "
               "TILE x TILE f16/bf16 tiles in f32 (mma.sync on a GPU; kiln bench --device)",
    .dtype_roles = {{"T", {DType::f16, DType::bf16}}},
    .constexpr_defaults = {{"TILE", 64}},
    .build = build_mma_peak,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t programs = a.i("programs"), kTile = s.constexpr_("TILE");
          if (programs < 1 || a.i("steps") < 0)
            throw Error("kernel 'mma_peak': needs programs >= 1 and steps >= 0, got " +
                        std::to_string(programs) + " and " + std::to_string(a.i("steps")));
          return LaunchShape{.grid = {programs, 1, 1},
                             .buffer_elems = {{"a", kTile * kTile},
                                              {"b", kWindows * kTile * kTile},
                                              {"y", programs * kTile * kTile}},
                             .compute_bound = true};
        },
    // A CPU takes 16 x 16 tiles, which its vector registers hold (64 x 64
    // leaves LLVM's register allocator 40 s of work at AVX2); a CPU's own
    // roofline is dot_peak's.
    .heuristic = [](const Spec& s) -> std::map<std::string, int64_t> {
      if (s.target.warp_size == 1) return {{"TILE", 16}};
      return {};
    },
    .shape_keys = {"programs"},
    // Products of f16/bf16 values are exact in f32; sums of small integers
    // (the tests' inputs) stay exact below 2^24.
    .rtol = 0,
    .atol = 0,
}));

}  // namespace

int64_t mma_peak_macs(int64_t tile, int64_t steps) { return steps * tile * tile * tile; }

}  // namespace kiln
