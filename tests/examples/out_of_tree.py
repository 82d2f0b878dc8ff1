#!/usr/bin/env python3
"""Kiln as an installed package: `cmake --install` to a fresh prefix, every
project under examples/ configured and built against it with find_package(Kiln)
and run (each checks its kernel against a float64 reference on the CPU and
the CUDA simulator and tunes it), and the installed kiln command driving the
examples' plugins: list, inspect, bench, tune. Plugins that are not Kiln's,
or were built against another Kiln, are refused with a message naming them.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def run(cmd, env=None, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = p.stdout + p.stderr
    if expect_ok and p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{out}")
    return p.returncode, out


def expect(pattern, text, what):
    if not re.search(pattern, text, re.S):
        sys.exit(f"FAILED: {what}: /{pattern}/ not in:\n{text}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    a.build_dir, a.source_dir = os.path.abspath(a.build_dir), os.path.abspath(a.source_dir)
    tmp = tempfile.mkdtemp(prefix="kiln-examples-")
    prefix = os.path.join(tmp, "prefix")
    run(["cmake", "--install", a.build_dir, "--prefix", prefix])
    kiln = os.path.join(prefix, "bin", "kiln")
    env = dict(os.environ, KILN_CACHE_DIR=os.path.join(tmp, "cache"))
    examples = os.path.join(a.source_dir, "examples")
    plugins = {}
    for name in sorted(os.listdir(examples)):
        src = os.path.join(examples, name)
        if not os.path.isfile(os.path.join(src, "CMakeLists.txt")):
            continue
        build = os.path.join(tmp, name)
        run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
             f"-DCMAKE_PREFIX_PATH={prefix}"])
        run(["cmake", "--build", build, "-j2"])
        _, out = run([os.path.join(build, name)], env=env)
        print(out, end="")
        expect(r"^cpu +%s .*: ok\ncuda-sim +%s .*: ok\n" % (name, name), out, f"{name} on cpu and cuda-sim")
        expect(r"tuned.*: ok\n", out, f"{name} tuned")
        plugins[name] = os.path.join(build, f"lib{name}_plugin.so")
    if len(plugins) < 3:
        sys.exit(f"FAILED: expected at least three examples, built {sorted(plugins)}")

    # The installed kiln loads the plugins.
    q3 = plugins["q3_gemv"]
    _, out = run([kiln, "list", "--plugin", q3, "--plugin", plugins["add_rmsnorm"], "q3_gemv", "add_rmsnorm"], env=env)
    expect(r"q3_gemv .*\[.*libq3_gemv_plugin\.so\]", out, "kiln list names the plugin")
    _, out = run([kiln, "inspect", "--plugin", q3, "q3_gemv", "--const", "BLOCK_K=128", "--ir"], env=env)
    expect(r"kernel q3_gemv\(", out, "kiln inspect --ir")
    _, out = run([kiln, "inspect", "--plugin", q3, "q3_gemv", "--target", "x86-64-v3", "--asm"], env=env)
    expect(r"ymm", out, "kiln inspect --asm for AVX2")
    _, out = run([kiln, "inspect", "--plugin", q3, "q3_gemv", "--target", "cuda", "--cuda"], env=env)
    expect(r"__global__ void .*q3_gemv\(", out, "kiln inspect --cuda")
    db = os.path.join(tmp, "tuning.toml")
    _, out = run([kiln, "tune", "--plugin", q3, "q3_gemv", "--shape", "m=256,k=1024", "--budget", "4",
                  "--threads", "2", "--db", db], env=env)
    expect(r"best: BLOCK_K=\d+", out, "kiln tune")
    expect(r'\[\[q3_gemv\]\].*BLOCK_K = \d+', open(db).read(), "the tuning entry")
    _, out = run([kiln, "bench", "--plugin", plugins["add_rmsnorm"], "add_rmsnorm", "--shape", "rows=64,n=4096",
                  "--threads", "2", "--repeats", "5"], env=env)
    expect(r"frac_of_probe [0-9.]+", out, "kiln bench KERNEL")

    # Refusals: another Kiln's plugin, a library that is no plugin, no file.
    stale_src = os.path.join(tmp, "stale.cpp")
    with open(stale_src, "w") as f:
        f.write('extern "C" const char* kiln_plugin_abi() { return "0.0.1+0123456789abcdef"; }\n'
                'extern "C" void kiln_plugin_register(void*) { __builtin_trap(); }\n'
                'extern "C" int not_kiln() { return 1; }\n')
    stale = os.path.join(tmp, "libstale.so")
    run(["c++", "-shared", "-fPIC", "-o", stale, stale_src])
    rc, out = run([kiln, "list", "--plugin", stale], env=env, expect_ok=False)
    expect(r"error: plugin '.*libstale\.so' was built against Kiln 0\.0\.1\+0123456789abcdef, "
           r"this is Kiln \d+\.\d+\.\d+\+[0-9a-f]{16}", out, "a stale plugin refused with both versions")
    assert rc != 0, out
    notkiln_src = os.path.join(tmp, "notkiln.cpp")
    with open(notkiln_src, "w") as f:
        f.write('extern "C" int not_kiln() { return 1; }\n')
    notkiln = os.path.join(tmp, "libnotkiln.so")
    run(["c++", "-shared", "-fPIC", "-o", notkiln, notkiln_src])
    rc, out = run([kiln, "inspect", "--plugin", notkiln, "add", "--ir"], env=env, expect_ok=False)
    expect(r"is not a Kiln plugin", out, "a library without the entry points")
    assert rc != 0, out
    rc, out = run([kiln, "tune", "--plugin", "/nonexistent/libx.so", "add", "--shape", "n=8"], env=env,
                  expect_ok=False)
    expect(r"plugin '/nonexistent/libx\.so': no such file", out, "a missing plugin")
    assert rc != 0, out
    print("examples out of tree: ok")


if __name__ == "__main__":
    main()
