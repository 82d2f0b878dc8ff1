#!/usr/bin/env python3
"""Checks that llama.cpp loads what `kiln gen-model` writes and gives sane logits.

For every architecture and weight type it generates the `tiny` preset, loads it
with llama-cpp-python, evaluates a short prompt and checks that every logit is
finite and that the logits are not degenerate (they vary across the vocabulary
and from one position to the next). Not run by ctest: it needs llama-cpp-python
(pip install llama-cpp-python).

usage: check_llamacpp_loads.py [--kiln build/tools/kiln] [--vocab-dir DIR]
                               [--arch A ...] [--type T ...] [--keep DIR]
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

ARCHES = ["llama", "qwen2", "qwen3", "qwen3moe", "llama-moe", "gemma3"]
TYPES = ["f16", "q8_0", "q4_0", "q4_k_m"]
PROMPT = "The quick brown fox jumps over the lazy dog. Ünïcödé, 数字 123!"


def check_model(llama_cpp, path, label):
    llm = llama_cpp.Llama(model_path=path, logits_all=True, n_ctx=64, verbose=False)
    tokens = llm.tokenize(PROMPT.encode("utf-8"), add_bos=True)
    if len(tokens) < 4:
        raise RuntimeError(f"{label}: the prompt tokenized to only {tokens}")
    # The vocabulary must spell the prompt back exactly (a SentencePiece
    # vocabulary keeps its dummy prefix space in llama-cpp-python's detokenize).
    text = llm.detokenize(tokens[1:]).decode("utf-8")
    if text not in (PROMPT, " " + PROMPT):
        raise RuntimeError(f"{label}: detokenized {text!r}")
    llm.eval(tokens[:16])
    n_vocab = llm.n_vocab()
    rows = [list(llm.scores[i][:n_vocab]) for i in range(min(16, len(tokens)))]
    for i, row in enumerate(rows):
        if not all(math.isfinite(x) for x in row):
            raise RuntimeError(f"{label}: non-finite logits at position {i}")
        mean = sum(row) / len(row)
        std = math.sqrt(sum((x - mean) ** 2 for x in row) / len(row))
        if std < 1e-3:
            raise RuntimeError(f"{label}: logits at position {i} are flat (std {std:g})")
    if all(rows[i] == rows[0] for i in range(1, len(rows))):
        raise RuntimeError(f"{label}: every position has the same logits")
    mean = sum(rows[-1]) / n_vocab
    std = math.sqrt(sum((x - mean) ** 2 for x in rows[-1]) / n_vocab)
    top = max(range(n_vocab), key=lambda j: rows[-1][j])
    return f"n_vocab {n_vocab}, {len(rows)} positions, last logits std {std:.3f}, argmax {top}"


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(root, "build", "tools", "kiln"))
    ap.add_argument("--vocab-dir", default=os.path.join(root, "..", "shared", "data", "vocab"))
    ap.add_argument("--arch", nargs="*", default=ARCHES)
    ap.add_argument("--type", nargs="*", default=TYPES)
    ap.add_argument("--keep", help="write the models here instead of a temporary folder")
    args = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        print("skipped: llama-cpp-python is not installed (pip install llama-cpp-python)")
        return 0
    print(f"llama-cpp-python {llama_cpp.__version__}")

    cases = [(a, t, None) for a in args.arch for t in args.type]
    spm = os.path.join(args.vocab_dir, "ggml-vocab-llama-spm.gguf")
    if os.path.exists(spm):
        cases.append(("llama", "q4_k_m", spm))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.keep or tmp
        os.makedirs(out_dir, exist_ok=True)
        for arch, wtype, vocab in cases:
            label = f"{arch}/tiny/{wtype}" + (" +llama-spm vocab" if vocab else "")
            path = os.path.join(out_dir, f"{arch}-tiny-{wtype}{'-spm' if vocab else ''}.gguf")
            cmd = [args.kiln, "gen-model", "--arch", arch, "--preset", "tiny", "--type", wtype,
                   "--seed", "7", "-o", path] + (["--vocab", vocab] if vocab else [])
            try:
                subprocess.run(cmd, check=True, capture_output=True, text=True)
                print(f"ok    {label}: {check_model(llama_cpp, path, label)}")
            except subprocess.CalledProcessError as e:
                failures += 1
                print(f"FAIL  {label}: kiln gen-model: {e.stderr.strip()}")
            except Exception as e:  # llama.cpp refuses the file, or the logits are wrong
                failures += 1
                print(f"FAIL  {label}: {e}")
    print(f"{len(cases) - failures} of {len(cases)} models load in llama.cpp with sane logits")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
