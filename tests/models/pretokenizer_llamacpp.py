#!/usr/bin/env python3
"""Kiln's BPE pre-tokenizers cut text as llama.cpp's do.

The GPT-2 vocabulary of ../shared/data/vocab is re-labelled with each
pre-tokenizer name Kiln knows (its tokenizer.ggml.pre value rewritten in a
vocabulary-only GGUF, which has no tensor data to move), and `kiln tokenize`
must give exactly the ids llama.cpp (llama-cpp-python, vocab_only) gives on
llama.cpp's own test inputs and on random strings built to hit every
alternative of the regexes: contractions in both cases, digit runs, CR/LF
and tab runs, punctuation before newlines, letters and numbers of other
scripts. Skipped (77) without llama-cpp-python or the shared vocabularies.

  pretokenizer_llamacpp.py --kiln build/tools/kiln [--vocab-dir DIR]
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PRES = ["gpt-2", "default", "llama-bpe", "qwen2", "gpt-4o", "falcon", "starcoder", "deepseek-llm"]
PIECES = ["a", "Z", "é", "ß", "世", "界", "д", "Ω", "0", "7", "12345", "٣", "½", "Ⅻ", " ", "  ", "\t",
          "\n", "\r\n", "\n\n", " \n", "'s", "'S", "'re", "'LL", "'d", "'", ".", "!", "?!", "(", ")", "$",
          "+=", "<", "^", "~", "|", "-", "_", "😀", "\u00a0", "\u3000", "don't", "I'M", "x2", "3.14",
          "Hello", "WORLD", "camelCase", "HTTPServer", "\u00c9cole", "\u03a9mega", "\u01c5", "e\u0301", "/", "\u0130",
          " McDonald", "iPhone", "YouTube", " JavaScript", "WordPress"]


def relabel(src, dst, pre):
    """Copies a vocabulary-only GGUF with tokenizer.ggml.pre set to `pre`."""
    data = open(src, "rb").read()
    key = b"tokenizer.ggml.pre"
    at = data.index(struct.pack("<Q", len(key)) + key)
    vpos = at + 8 + len(key) + 4  # past the key and its value type (string)
    n = struct.unpack_from("<Q", data, vpos)[0]
    new = pre.encode()
    open(dst, "wb").write(data[:vpos] + struct.pack("<Q", len(new)) + new + data[vpos + 8 + n:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--vocab-dir", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "vocab"))
    a = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        print("skipped: llama-cpp-python is not installed")
        sys.exit(77)
    src = os.path.join(a.vocab_dir, "ggml-vocab-gpt-2.gguf")
    if not os.path.exists(src):
        print(f"skipped: {src} is absent")
        sys.exit(77)
    texts = []
    for name in ("gpt-2", "llama-spm", "deepseek-coder"):
        inp = open(os.path.join(a.vocab_dir, f"ggml-vocab-{name}.gguf.inp"), encoding="utf-8").read()
        texts += [t for t in inp.split("\n__ggml_vocab_test__\n") if t]
    rng = random.Random(11)
    texts += ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))) for _ in range(120)]
    failures = 0
    by_pre = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRES:
            path = os.path.join(tmp, f"vocab-{pre}.gguf")
            relabel(src, path, pre)
            llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
            bad = 0
            by_pre[pre] = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts]
            # Every text in one kiln process (--jsonl: a text per line as a JSON string).
            f = os.path.join(tmp, "texts.jsonl")
            with open(f, "w", encoding="utf-8") as out:
                out.writelines(json.dumps(t) + "\n" for t in texts)
            r = subprocess.run([a.kiln, "tokenize", "-m", path, "--jsonl", f, "--no-bos"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"kiln tokenize failed: {r.stderr.strip()}")
            lines = r.stdout.split("\n")
            if len(lines) != len(texts) + 1:
                raise SystemExit(f"kiln tokenize gave {len(lines) - 1} lines for {len(texts)} texts")
            for text, want, line in zip(texts, by_pre[pre], lines):
                got = [int(x) for x in line.split()]
                if got != want:
                    bad += 1
                    if bad <= 3:
                        print(f"FAIL {pre}: {text!r}\n  llama.cpp {want}\n  kiln      {got}")
            # The relabelling took: each set cuts some texts unlike GPT-2's.
            differ = sum(x != y for x, y in zip(by_pre[pre], by_pre["gpt-2"]))
            if pre != "gpt-2" and differ < 10:
                bad += 1
                print(f"FAIL {pre}: only {differ} texts tokenize unlike gpt-2")
            # o200k is llama3's regex plus case-split words: that part is exercised too.
            if pre == "gpt-4o" and sum(x != y for x, y in zip(by_pre[pre], by_pre["llama-bpe"])) < 10:
                bad += 1
                print(f"FAIL {pre}: fewer than 10 texts tokenize unlike llama-bpe")
            print(f"{'ok  ' if bad == 0 else 'FAIL'} {pre:10s} {len(texts) - bad}/{len(texts)} texts identical "
                  f"({differ} unlike gpt-2)")
            failures += bad
    if failures:
        raise SystemExit(f"{failures} texts differ")


if __name__ == "__main__":
    main()
