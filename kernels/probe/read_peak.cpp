// The memory-bandwidth roofline of a device, as a kernel: every program
// reads its own contiguous slice of a buffer far larger than the caches,
// BLOCK words a step, and writes one sum. A GEMV or a decode attention
// step streams its weights or cache the same way, so their GB/s over this
// kernel's, measured in the same run, is the fraction of the machine's
// bandwidth they reach. On a GPU a step's BLOCK words are spread over the
// block's threads in order, so a warp's loads are coalesced 128-byte
// lines; `kiln bench --device` runs it (the CPU benchmark has its own
// host probe, tools/bandwidth_probe.h, on the kernels' thread pool).
//
// Buffers x (u32 [programs * words]) and y (u32 [programs]); scalar words
// (per program, a multiple of BLOCK); launch size programs. y[p] is the
// wrapping sum of program p's words.
#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Kernel build_read_peak(const Spec& s) {
  KernelBuilder k("read_peak", s);
  const int64_t B = s.constexpr_("BLOCK");
  auto x = k.buffer("x", DType::u32), y = k.buffer("y", DType::u32);
  auto words = k.scalar("words", DType::i32);
  auto base = k.program_id(0).to(DType::i64) * words.to(DType::i64);
  auto acc = k.var(zeros(DType::u32, {B}));
  k.for_(0, words / static_cast<int>(B), 1, [&](Value step) {
    auto at = base + (step * static_cast<int>(B)).to(DType::i64);
    acc = Value(acc) + load(x + (broadcast_to(at, {B}) + arange(B).to(DType::i64)));
  });
  store(y + k.program_id(0), sum(Value(acc), 0));
  return k.finish();
}

KILN_REGISTER_KERNEL((KernelDef{
    .name = "read_peak",
    .family = "probe",
    .summary = "the memory-bandwidth roofline of a device: each program sums its contiguous "
               "slice of `words` u32 words of x into y (kiln bench --device)",
    .dtype_roles = {},
    .constexpr_defaults = {{"BLOCK", 1024}},
    .build = build_read_peak,
    .launch_shape =
        [](const Spec& s, const ScalarArgs& a) {
          const int64_t programs = a.i("programs"), words = a.i("words");
          if (programs < 1 || words < 0 || words % s.constexpr_("BLOCK"))
            throw Error("kernel 'read_peak': needs programs >= 1 and words a multiple of BLOCK (" +
                        std::to_string(s.constexpr_("BLOCK")) + "), got " +
                        std::to_string(programs) + " and " + std::to_string(words));
          return LaunchShape{.grid = {programs, 1, 1},
                             .buffer_elems = {{"x", programs * words}, {"y", programs}}};
        },
    .tunables = {{"BLOCK", {256, 512, 1024, 2048}}},
    .shape_keys = {"programs", "words"},
    // Integer sums, exact (wrapping).
    .rtol = 0,
    .atol = 0,
}));

}  // namespace
}  // namespace kiln
