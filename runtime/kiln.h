// Kiln as a library: write a kernel, compile it for the CPU or a GPU, run it
// on your arrays, read the code generated for it, tune it. Installed as
// <kiln/kiln.h>; `find_package(Kiln)` gives the target Kiln::kiln.
//
//   1. Write:   Kernel build(const Spec& s) { KernelBuilder k("name", s); ... }
//               with tiles, loads, stores, loops, reductions and dot
//               (ir/builder.h), and describe it in a KernelDef: its dtype
//               roles, constexprs and their tunable values, and how its
//               sizes give the grid and each buffer's length
//               (kernels/registry.h).
//   2. Register: register_kernel(def) in a program, or KILN_PLUGIN in a
//               shared library the kiln command loads with --plugin
//               (runtime/plugin.h).
//   3. Run:     Device dev("cpu" | "cuda" | "cuda-sim");
//               dev.launch("name", {{"x", x}, {"n", n}}) (runtime/device.h),
//               or dev.interpret(spec, ...) for the reference result.
//   4. Read:    generated_code(spec, CodeForm::assembly | cuda | ptx | ...)
//               (runtime/generated_code.h).
//   5. Tune:    dev.tune("name", {.shape = {{"n", 4096}}}) searches the
//               tunables, each candidate checked against the interpreter
//               (runtime/tuner.h).
//
// docs/writing-kernels.md walks through all five, in C++ and in Python.
#pragma once

#include "ir/builder.h"
#include "ir/error.h"
#include "kernels/registry.h"
#include "runtime/device.h"
#include "runtime/generated_code.h"
#include "runtime/named_args.h"
#include "runtime/plugin.h"
#include "runtime/tuner.h"
