// Optimisation passes over the IR, each a verified-kernel -> verified-kernel
// rewrite that preserves the interpreter's results exactly.
//
// fold_constants evaluates ops whose operands are all constants (with the
// interpreter's arithmetic, so folding never changes a result); cse merges
// identical side-effect-free ops within a block and from enclosing blocks;
// dce removes unused side-effect-free ops and variables that are never read;
// recognize_dot_groups turns the grouped 8-bit dot written as widened
// products summed in fours into the DotGroups op every backend lowers to
// its own instruction. `run_pipeline` runs it once, then the others to a
// fixed point and records the kernel after
// each pass so `kiln inspect --after PASS` can show it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/kernel.h"

namespace kiln {

Kernel fold_constants(const Kernel& k);
Kernel cse(const Kernel& k);
Kernel dce(const Kernel& k);
Kernel recognize_dot_groups(const Kernel& k);

struct PassDump {
  std::string pass;  // "recognize_dot_groups", "fold_constants", "cse", "dce"
  Kernel after;
};

// Runs recognize_dot_groups, then fold_constants, cse, dce until nothing
// changes (at most a few rounds).
// When `dumps` is given, appends the kernel after each pass of the first round.
Kernel run_pipeline(const Kernel& k, std::vector<PassDump>* dumps = nullptr);

}  // namespace kiln
