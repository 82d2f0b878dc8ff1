#!/usr/bin/env python3
"""Typed launches (runtime/typed_args.h over the generated kernel_params.h)
are checked by the compiler: a launch written right compiles, and one that
names a parameter its kernel lacks, passes a number for a buffer, a tensor
for a scalar, or another kernel's parameter does not, each with the
compiler naming the mistake."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HEAD = """#include "kernel_params.h"
using namespace kiln;
void f(Graph& g, const Tensor& x, const Tensor& y) {
  using K = kernels::rmsnorm;
"""
# What GCC and Clang say when no Bind constructor takes the pair.
NO_CONVERSION = r"no matching|could not convert|no viable"
RIGHT = "  launch<K>(g, \"rmsnorm\", {}, {{K::x, x}, {K::w, x}, {K::y, y}, {K::n, 8}, {K::eps, 1e-5}});\n"
WRONG = {
    "a parameter the kernel lacks": ("  launch<K>(g, \"rmsnorm\", {}, {{K::nope, x}});\n", "nope"),
    "a number for a buffer": ("  launch<K>(g, \"rmsnorm\", {}, {{K::x, 8}});\n", NO_CONVERSION),
    "a tensor for a scalar": ("  launch<K>(g, \"rmsnorm\", {}, {{K::n, x}});\n", NO_CONVERSION),
    "another kernel's parameter": ("  launch<K>(g, \"rmsnorm\", {}, {{kernels::softmax::x, x}});\n",
                                   NO_CONVERSION),
}


def compile_snippet(cxx, flags, body):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(HEAD + body + "}\n")
    p = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", *flags, f.name], capture_output=True, text=True)
    os.unlink(f.name)
    return p.returncode, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", help="unused: the common test runner passes it")
    ap.add_argument("--cxx", default="c++")
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    flags = ["-I", a.source_dir, "-I", os.path.join(a.build_dir, "generated")]
    rc, err = compile_snippet(a.cxx, flags, RIGHT)
    if rc != 0:
        sys.exit(f"FAILED: a right launch does not compile:\n{err}")
    for what, (body, needle) in WRONG.items():
        rc, err = compile_snippet(a.cxx, flags, body)
        if rc == 0:
            sys.exit(f"FAILED: {what} compiled")
        if not re.search(needle, err):
            sys.exit(f"FAILED: {what}: the compiler's error does not mention '{needle}':\n{err[:2000]}")
        print(f"ok  {what}: refused by the compiler")


if __name__ == "__main__":
    main()
