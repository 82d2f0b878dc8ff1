// A compiled launch checked against the reference interpreter on its own
// inputs: Runtime's check mode (RuntimeOptions::check, `kiln run --check`).
//
// End-to-end logits are a poor judge of a backend: a forward quantises its
// activations to 8 bits and rounds attention weights to f16, so a
// reassociated sum one ulp off can flip a rounding and move the logits by a
// percent without any kernel being wrong. Checking each launch on the
// buffers the plan gives it finds the one kernel whose code disagrees with
// the IR's definition, whatever happened before it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ir/kernel.h"

namespace kiln {

// How far a compiled result may lie from the interpreter's: floats within
// atol + rtol * |reference| (NaN where it has NaN), integers exactly.
struct LaunchTolerance {
  double rtol = 1e-4, atol = 1e-5;
};
// A kernel's tolerance from its declared one (KernelDef::rtol, atol), at
// least 1e-4 relative and 1e-5 absolute, widened by a unit in the last
// place of its narrowest f16 or bf16 buffer (such results round once more).
LaunchTolerance launch_tolerance(const Kernel& k, double rtol, double atol);

// Copies every buffer of `args` (host memory), runs `run` (the compiled
// launch, on the originals) and the interpreter on the copies, and returns
// "" when all buffers agree, else the first difference: the buffer, the
// element and both values.
std::string check_against_interpreter(const Kernel& k, const std::vector<Arg>& args,
                                      const Grid& grid, const LaunchTolerance& tol,
                                      const std::function<void()>& run);

}  // namespace kiln
