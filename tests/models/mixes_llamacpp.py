#!/usr/bin/env python3
"""`kiln gen-model`'s quantization mixes against llama.cpp's own quantizer.

For each (architecture/preset, mix): gen-model writes the model in f16 and
in the mix; llama.cpp's llama_model_quantize quantizes the f16 file with the
same ftype; every tensor must have the same ggml type in both files. The
presets cover the rules' branches: dense models 256 wide (K types kept),
576 wide (SmolLM: 32-weight fallbacks), 8 experts (Q8_0 attn_k/attn_v,
Q5_K attn_output) and 4 query heads per KV head (q2_k's attn_v).
Without --full (CI) every mix runs on llama/tiny and each other preset runs
the mixes whose rules it is there for (SmolLM's fallbacks: q4_k_m, iq4_xs;
experts: q4_k_m, q2_k; GQA 4: q2_k; Gemma: q4_k_m); --full runs every pair
(ctest label long).
Exit code 77 (ctest's skip) when llama-cpp-python or gguf is not installed.

  python3 tests/models/mixes_llamacpp.py --kiln build/tools/kiln [--full]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

try:
    import gguf
    import llama_cpp
except ImportError as e:
    print(f"skipped: {e.name} is not installed (pip install llama-cpp-python gguf)")
    sys.exit(77)

PRESETS = (("llama", "tiny"), ("llama", "smollm"), ("qwen3moe", "tiny"), ("qwen2", "tiny"),
           ("gemma3", "tiny"), ("phi3", "tiny"))
# gen-model's name -> llama_ftype
MIXES = (("q2_k", 10), ("q3_k_m", 12), ("q4_k_m", 15), ("q5_k_m", 17), ("iq4_nl", 25),
         ("iq4_xs", 30))


# The (preset, mix) pairs CI runs: every mix on llama/tiny, each other preset's own rules.
CI = {("llama", "smollm"): ("q4_k_m", "iq4_xs"), ("qwen3moe", "tiny"): ("q4_k_m", "q2_k"),
      ("qwen2", "tiny"): ("q2_k",), ("gemma3", "tiny"): ("q4_k_m",),
      ("phi3", "tiny"): ("q4_k_m",)}


def types(path):
    return {t.name: t.tensor_type.name for t in gguf.GGUFReader(path).tensors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/tools/kiln")
    ap.add_argument("--full", action="store_true", help="every preset with every mix")
    a = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for arch, preset in PRESETS:
            def gen(kind):
                path = os.path.join(tmp, f"{arch}-{preset}-{kind}.gguf")
                # Two layers keep it quick; smollm keeps its 4 (the rules look at layer counts).
                extra = ["--layers", "2"] if preset != "smollm" else []
                subprocess.run([a.kiln, "gen-model", "--arch", arch, "--preset", preset, "--type",
                                kind, "-o", path, "--seed", "1"] + extra,
                               check=True, capture_output=True)
                return path
            src = gen("f16")
            for name, ftype in MIXES:
                if not a.full and (arch, preset) in CI and name not in CI[(arch, preset)]:
                    continue
                ours = types(gen(name))
                p = llama_cpp.llama_model_quantize_default_params()
                p.ftype = ftype
                p.nthread = 2
                ref_path = os.path.join(tmp, "ref.gguf")
                if llama_cpp.llama_model_quantize(src.encode(), ref_path.encode(),
                                                  ctypes.byref(p)) != 0:
                    raise RuntimeError(f"llama_model_quantize failed for {name}")
                theirs = types(ref_path)
                diff = [f"{t}: kiln {ours.get(t)}, llama.cpp {theirs.get(t)}"
                        for t in sorted(set(ours) | set(theirs)) if ours.get(t) != theirs.get(t)]
                counts = {}
                for t in ours.values():
                    counts[t] = counts.get(t, 0) + 1
                mix = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
                print(f"{arch}/{preset:7s} {name:7s} {'ok' if not diff else 'FAIL'}  ({mix})",
                      flush=True)
                for d in diff:
                    print("    " + d)
                failed += bool(diff)
    print("mixes: ok" if not failed else f"mixes: {failed} case(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
