#!/usr/bin/env python3
"""Kiln's logits against llama.cpp's on the same GGUF and token ids.

For each (architecture, type): `kiln gen-model` writes a random-weight model,
`kiln run --tokens ... --logits-out` gives Kiln's logits of every position,
and llama.cpp (llama-cpp-python) evaluates the same ids with logits_all.
Passes when the top-1 token agrees on at least 99 % of positions and the
largest |logit difference| is within the tolerance below, relative to the
logits' spread.

Tolerance: both sides quantise the activations of quantized matmuls to 8
bits (llama.cpp per 32 or 256 values, Kiln per 32) and accumulate in f32 in
different orders, and llama.cpp runs attention in f16 where Kiln uses f32;
over a few layers of random weights that gives differences of a few
percent of the logits' standard deviation for F16 models and more for 4-bit
ones. Exit code 77 (ctest's skip) when llama-cpp-python is not installed.

  python3 tests/models/parity_llamacpp.py --kiln build/tools/kiln
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import llama_cpp
except ImportError as e:
    print(f"skipped: {e.name} is not installed (pip install llama-cpp-python numpy)")
    sys.exit(77)

# (arch, preset, type): max |d logit| / std(logits).
CASES = [
    ("llama", "tiny", "f16", 0.05),
    ("llama", "tiny", "q8_0", 0.10),
    ("llama", "tiny", "q4_k_m", 0.15),
    ("qwen3", "tiny", "f16", 0.05),
    ("qwen3", "tiny", "q8_0", 0.10),
    ("qwen3", "tiny", "q4_k_m", 0.15),
]


def llamacpp_logits(path, tokens):
    m = llama_cpp.Llama(model_path=path, logits_all=True, n_ctx=len(tokens) + 8, n_threads=2,
                        n_batch=len(tokens), verbose=False)
    m.eval(tokens)
    return np.array(m.scores[: len(tokens)], dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/tools/kiln")
    ap.add_argument("--vocab", default=os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                   "shared", "data", "vocab",
                                                   "ggml-vocab-llama-spm.gguf"))
    ap.add_argument("--tokens", type=int, default=48)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for arch, preset, qtype, tol in CASES:
            path = os.path.join(tmp, f"{arch}-{preset}-{qtype}.gguf")
            gen = [a.kiln, "gen-model", "--arch", arch, "--preset", preset, "--type", qtype,
                   "-o", path, "--seed", "1"]
            if os.path.exists(a.vocab):
                gen += ["--vocab", a.vocab]
            subprocess.run(gen, check=True, capture_output=True)
            n_vocab = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False).n_vocab()
            tokens = [int(t) for t in rng.integers(3, n_vocab, a.tokens)]
            npy = os.path.join(tmp, "kiln.npy")
            subprocess.run([a.kiln, "run", "-m", path, "--tokens", ",".join(map(str, tokens)),
                            "-n", "0", "--threads", "2", "--logits-out", npy],
                           check=True, capture_output=True)
            ours = np.load(npy)
            theirs = llamacpp_logits(path, tokens)
            agree = float(np.mean(ours.argmax(1) == theirs.argmax(1)))
            rel = float(np.abs(ours - theirs).max() / theirs.std())
            ok = agree >= 0.99 and rel <= tol
            failed += not ok
            print(f"{arch:9s} {qtype:7s} top-1 agreement {agree * 100:6.2f} %   "
                  f"max|d|/std {rel:.4f} (tolerance {tol})  {'ok' if ok else 'FAIL'}")
    print("parity: ok" if not failed else f"parity: {failed} case(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
