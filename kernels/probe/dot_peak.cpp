// The compute rooflines of the prompt GEMMs: how many multiply-adds a core
// issues per second when it does nothing else. Prompt GEMM is bound by this
// rate, not by memory, so `kiln bench` reports each GEMM as a fraction of
// it, measured in the same run, the way GEMVs are reported against the
// bandwidth probe. The operand type T picks the instruction the GEMMs use:
// - u8: byte dots (u8 x i8 products summed in groups of 4 into i32,
//   vpdpbusd on x86 VNNI, sdot on AArch64), the quantized GEMMs';
// - f32: f32 FMAs, the gemm kernel's for f32/f16/bf16 weights.
//
// It is written in the DSL so that it is lowered exactly as the GEMMs' loops
// are: ACC independent [16] accumulators, each fed a fixed code vector times
// x broadcast from memory (4 bytes for a byte dot, one f32 for an FMA),
// 4 rounds per loop step. The x window moves with the step so that nothing
// is loop-invariant, whatever form the product lowers to on the host.
//
// Buffers codes (T [ACC * 16 * G]), x (i8 or f32 [8 windows * 4 rounds *
// ACC * G]), y (i32 or f32 [programs * ACC * 16]), G = 4 for u8 and 1 for
// f32; scalar steps, launch size programs. Each program writes its
// accumulators to y.
#include "kernels/probe/dot_peak.h"

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t kRounds = 4;   // dots per accumulator per loop step
constexpr int64_t kWindows = 8;  // x windows the steps cycle through
constexpr int64_t kMaxAcc = 16;

// Products per lane summed into one accumulator lane: a byte dot's 4, an FMA's 1.
int64_t group(DType t) { return t == DType::u8 ? 4 : 1; }

Kernel build_dot_peak(const Spec& s) {
  KernelBuilder k("dot_peak", s);
  const DType T = s.dtype("T");
  const int64_t ACC = s.constexpr_("ACC"), G = group(T);
  if (ACC < 1 || ACC > kMaxAcc)
    throw Error("kernel 'dot_peak': ACC must be 1.." + std::to_string(kMaxAcc) + ", got " +
                std::to_string(ACC));
  const bool bytes = T == DType::u8;
  auto codes = k.buffer("codes", T), x = k.buffer("x", bytes ? DType::i8 : DType::f32);
  auto y = k.buffer("y", bytes ? DType::i32 : DType::f32);
  auto steps = k.scalar("steps", DType::i32);
  std::vector<Value> c;
  std::vector<Var> acc;
  for (int64_t a = 0; a < ACC; ++a) {
    auto v = load(codes + (arange(16 * G) + static_cast<int>(16 * G * a)));
    c.push_back(bytes ? reshape(v, {16, 4}) : v);
    acc.push_back(k.var(zeros(bytes ? DType::i32 : DType::f32, {16})));
  }
  const int64_t window = kRounds * ACC * G;
  k.for_(0, steps, 1, [&](Value i) {
    auto base = (i & static_cast<int>(kWindows - 1)) * static_cast<int>(window);
    for (int64_t r = 0; r < kRounds; ++r)
      for (int64_t a = 0; a < ACC; ++a) {
        auto first = base + static_cast<int>((r * ACC + a) * G);
        if (bytes) {
          auto xb =
              broadcast_to(reshape(load(x + (first + arange(4))), {1, 4}), {16, 4}).to(DType::i32);
          acc[a] = Value(acc[a]) + sum(c[a].to(DType::i32) * xb, 1);
        } else {
          acc[a] = fma(c[a], broadcast_to(load(x + first), {16}), Value(acc[a]));
        }
      }
  });
  auto out = k.program_id(0) * static_cast<int>(16 * ACC);
  for (int64_t a = 0; a < ACC; ++a)
    store(y + (out + static_cast<int>(16 * a) + arange(16)), Value(acc[a]));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "dot_peak",
    .family = "probe",
    .summary = "the multiply-add issue rate prompt GEMMs are bound by (kiln bench's compute "
               "roofline): byte dots (T=u8) or f32 FMAs (T=f32); y = each program's ACC "
               "accumulators after `steps` loop steps",
    .dtype_roles = {{"T", {DType::u8, DType::f32}}},
    // 12 accumulators cover vpdpbusd's and vfmadd's latency on current x86
    // cores with registers to spare (codes, accumulators, one broadcast x).
    .constexpr_defaults = {{"ACC", 12}},
    .build = build_dot_peak,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t programs = a.i("programs"), acc = s.constexpr_("ACC"), g = group(s.dtype("T"));
          if (programs < 1 || a.i("steps") < 0)
            throw Error("kernel 'dot_peak': needs programs >= 1 and steps >= 0, got " +
                        std::to_string(programs) + " and " + std::to_string(a.i("steps")));
          return LaunchShape{.grid = {programs, 1, 1},
                             .buffer_elems = {{"codes", 16 * g * acc},
                                              {"x", kWindows * kRounds * acc * g},
                                              {"y", programs * 16 * acc}},
                             .compute_bound = true};
        },
    .tunables = {{"ACC", {4, 8, 12, 16}}},
    .shape_keys = {"programs"},
    // Exact for integer-valued inputs: byte dots are integer sums, and the
    // FMA sums stay integers below 2^24 in the tests.
    .rtol = 0,
    .atol = 0,
}));

}  // namespace

int64_t dot_peak_macs(DType t, int64_t acc, int64_t steps) {
  return steps * kRounds * acc * 16 * group(t);
}

}  // namespace kiln
