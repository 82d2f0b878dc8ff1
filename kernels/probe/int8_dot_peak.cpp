// The compute roofline of the quantized GEMMs: how many byte dots (u8 x i8
// products summed in groups of 4 into i32, vpdpbusd on x86 VNNI, sdot on
// AArch64) a core issues per second when it does nothing else. Prompt GEMM
// over 4- and 8-bit weights is bound by this rate, not by memory, so
// `kiln bench` reports each GEMM as a fraction of it, measured in the same
// run, the way GEMVs are reported against the bandwidth probe.
//
// It is written in the DSL so that it is lowered exactly as the GEMMs' dots
// are: ACC independent [16] i32 accumulators, each fed a dot of a fixed
// code vector with 4 x bytes broadcast from memory (as the GEMMs read x),
// 4 rounds per loop step. The x window moves with the step so that nothing
// is loop-invariant, whatever form the dot lowers to on the host.
//
// Buffers codes (u8 [ACC * 64]), x (i8 [8 windows * 4 rounds * ACC * 4]),
// y (i32 [programs * ACC * 16]); scalar steps, launch size programs. Each
// program writes its accumulators to y.
#include "kernels/probe/int8_dot_peak.h"

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t kRounds = 4;   // dots per accumulator per loop step
constexpr int64_t kWindows = 8;  // x windows the steps cycle through
constexpr int64_t kMaxAcc = 16;

Kernel build_int8_dot_peak(const Spec& s) {
  KernelBuilder k("int8_dot_peak", s);
  const int64_t ACC = s.constexpr_("ACC");
  if (ACC < 1 || ACC > kMaxAcc)
    throw Error("kernel 'int8_dot_peak': ACC must be 1.." + std::to_string(kMaxAcc) + ", got " +
                std::to_string(ACC));
  auto codes = k.buffer("codes", DType::u8), x = k.buffer("x", DType::i8);
  auto y = k.buffer("y", DType::i32);
  auto steps = k.scalar("steps", DType::i32);
  std::vector<Value> c;
  std::vector<Var> acc;
  for (int64_t a = 0; a < ACC; ++a) {
    c.push_back(reshape(load(codes + (arange(64) + static_cast<int>(64 * a))), {16, 4}));
    acc.push_back(k.var(zeros(DType::i32, {16})));
  }
  const int64_t window = kRounds * ACC * 4;
  k.for_(0, steps, 1, [&](Value i) {
    auto base = (i & static_cast<int>(kWindows - 1)) * static_cast<int>(window);
    for (int64_t r = 0; r < kRounds; ++r)
      for (int64_t a = 0; a < ACC; ++a) {
        auto off = base + static_cast<int>((r * ACC + a) * 4) + arange(4);
        auto xb = broadcast_to(reshape(load(x + off), {1, 4}), {16, 4}).to(DType::i32);
        acc[a] = Value(acc[a]) + sum(c[a].to(DType::i32) * xb, 1);
      }
  });
  auto first = k.program_id(0) * static_cast<int>(16 * ACC);
  for (int64_t a = 0; a < ACC; ++a)
    store(y + (first + static_cast<int>(16 * a) + arange(16)), Value(acc[a]));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "int8_dot_peak",
    .family = "probe",
    .summary = "the byte-dot issue rate the quantized GEMMs are bound by (kiln bench's compute "
               "roofline); y = each program's ACC accumulators after `steps` loop steps",
    .dtype_roles = {},
    // 12 accumulators cover vpdpbusd's latency on current x86 cores with
    // registers to spare (codes, accumulators, one broadcast x).
    .constexpr_defaults = {{"ACC", 12}},
    .build = build_int8_dot_peak,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          int64_t programs = a.i("programs"), acc = s.constexpr_("ACC");
          if (programs < 1 || a.i("steps") < 0)
            throw Error("kernel 'int8_dot_peak': needs programs >= 1 and steps >= 0, got " +
                        std::to_string(programs) + " and " + std::to_string(a.i("steps")));
          return LaunchShape{.grid = {programs, 1, 1},
                             .buffer_elems = {{"codes", 64 * acc},
                                              {"x", kWindows * kRounds * acc * 4},
                                              {"y", programs * 16 * acc}},
                             .compute_bound = true};
        },
    .tunables = {{"ACC", {4, 8, 12, 16}}},
    .shape_keys = {"programs"},
    .rtol = 0,
    .atol = 0,
}));

}  // namespace

int64_t int8_dot_peak_macs(int64_t acc, int64_t steps) { return steps * kRounds * acc * 64; }

}  // namespace kiln
