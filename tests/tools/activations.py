#!/usr/bin/env python3
"""`kiln run --dump-activations` and tools/diff_activations.py find where two runs part.

1. A planted bug: a copy of a generated llama (f32) whose rope.freq_base is
   changed in the GGUF metadata. Its dump against the original's must part
   first at layer 0's roped queries (Qcur-0): RoPE is the first step the base
   enters, and every tensor before it agrees exactly.
2. KV cache types: the same model with a q8_0 cache agrees exactly up to
   the cache (the roped queries and keys), and where it parts it parts at
   layer 0's attention output, the first tensor that reads the cache.
3. llama.cpp: the activations llama.cpp computes for the same GGUF and ids
   (tools/dump_activations_llamacpp.py, its eval callback) agree with Kiln's
   on every tensor both name, layer by layer: Qcur, Kcur, attn_out, ffn_inp,
   ffn_out, l_out, result_norm and result_output of each of the model's layers
   (1e-3 relative: both run f32 math on f32 weights and f16 KV caches; the
   differences are summation orders, about 1e-6).
Exit 77 (skip) without llama-cpp-python, numpy or gguf.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import gguf
    import llama_cpp  # noqa: F401 (the capture script's)
    import numpy as np
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)
    return r


def dump(kiln, model, tokens, out, *extra):
    r = run([kiln, "run", "-m", model, "--tokens", ",".join(map(str, tokens)), "-n", "0",
             "--threads", "2", "--dump-activations", out, *extra])
    assert r.returncode == 0, r.stderr
    return out


def diff(a, b, tol=1e-3):
    r = run([sys.executable, os.path.join(TOOLS, "diff_activations.py"), a, b, "--tol", str(tol)])
    return r.returncode, r.stdout, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/tools/kiln")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kiln-activations-")
    try:
        model = os.path.join(tmp, "llama.gguf")
        r = run([a.kiln, "gen-model", "--arch", "llama", "--preset", "tiny", "--type", "f32",
                 "--layers", "3", "-o", model])
        assert r.returncode == 0, r.stderr
        tokens = [1, 15, 27, 201, 42, 9, 77, 5, 120, 64, 33, 8]
        base = dump(a.kiln, model, tokens, os.path.join(tmp, "base"))
        names = open(os.path.join(base, "activations.json")).read()
        for n in ("Qcur-0", "Kcur-0", "attn_out-0", "ffn_inp-0", "ffn_out-0", "l_out-2",
                  "result_norm", "result_output"):
            assert f'"{n}"' in names, f"{n} missing from the dump: {names}"
        logits = np.load(os.path.join(base, "result_output.npy"))
        assert logits.shape[0] == len(tokens), logits.shape

        # 1. A wrong RoPE base is found at the first roped tensor.
        wrong = os.path.join(tmp, "wrong-rope.gguf")
        shutil.copy(model, wrong)
        reader = gguf.GGUFReader(wrong, "r+")
        field = reader.fields["llama.rope.freq_base"]
        field.parts[field.data[0]][0] = 500.0
        del reader
        bad = dump(a.kiln, wrong, tokens, os.path.join(tmp, "wrong"))
        code, out, err = diff(base, bad)
        assert code == 1, (code, out, err)
        last = out.strip().splitlines()[-1]
        assert last.startswith("part at layer 0, tensor Qcur-0:"), out
        print("wrong rope base:", last)

        # 2. A q8_0 KV cache against f16: the same until the cache is read.
        q8 = dump(a.kiln, model, tokens, os.path.join(tmp, "q8_0"), "--kv", "q8_0")
        code, out, err = diff(base, q8, tol=0)
        assert code == 1, (code, out, err)
        assert out.strip().splitlines()[-1].startswith("part at layer 0, tensor attn_out-0:"), out
        print("q8_0 cache:", out.strip().splitlines()[-1])

        # 3. llama.cpp's own activations under the same names.
        ref = os.path.join(tmp, "llamacpp")
        r = run([sys.executable, os.path.join(TOOLS, "dump_activations_llamacpp.py"), model,
                 "--tokens", ",".join(map(str, tokens)), "-o", ref])
        assert r.returncode == 0, r.stderr
        code, out, err = diff(base, ref)
        assert code == 0, (code, out, err)
        compared = [line.split()[0] for line in out.splitlines()[1:-1] if "skipped" not in line]
        for layer in range(3):
            for n in ("Qcur", "Kcur", "attn_out", "ffn_inp", "ffn_out", "l_out"):
                assert f"{n}-{layer}" in compared, (f"{n}-{layer} not compared with llama.cpp", out)
        for n in ("result_norm", "result_output"):
            assert n in compared, out
        print("llama.cpp:", out.strip().splitlines()[-1])

        # Bad input: an unwritable dump directory is refused before the run.
        r = run([a.kiln, "run", "-m", model, "--tokens", "1,2", "-n", "0", "--dump-activations",
                 "/proc/kiln-no"])
        assert r.returncode != 0 and "--dump-activations /proc/kiln-no" in r.stderr, r.stderr
        code, out, err = diff(base, os.path.join(tmp, "missing"))
        assert code == 2 and "activations.json" in err, (code, err)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")


if __name__ == "__main__":
    main()
