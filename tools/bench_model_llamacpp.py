#!/usr/bin/env python3
"""Prompt processing and generation speed of Kiln and llama.cpp on the same
GGUF models and threads, measured alternately in one run (the machine's
speed drifts, so only ratios from one run mean anything).

As llama-bench's pp and tg tests: prefill is one batch of P prompt ids on an
empty cache; decode is N single tokens starting from an empty cache, or with
--decode-after C, after the first C prompt ids are in the cache (decode as a
chat runs it, where attention reads C + i keys per token).
Kiln: `kiln run --tokens ... -n ... --ignore-eos`, reading prefill_tok_s and
decode_tok_s from its JSON line (plans are compiled before the clock
starts). llama.cpp (llama-cpp-python): eval() of the same ids after a
warm-up.

--kv q8_0 runs both with a q8_0 KV cache (llama.cpp: type_k = type_v = Q8_0,
which needs its flash attention).

  python3 tools/bench_model_llamacpp.py --kiln build/tools/kiln MODEL.gguf [...] \\
      --prompt 512 --gen 128 --threads 2 [--decode-after C] [--flash-attn] [--kv q8_0]
"""
import argparse
import json
import subprocess
import sys
import time

import numpy as np

try:
    import llama_cpp
except ImportError:
    sys.exit("error: pip install llama-cpp-python")


GGML_KV_TYPES = {"f16": 1, "q8_0": 8}


def kiln_json(kiln, model, tokens, gen, threads, kv):
    out = subprocess.run([kiln, "run", "-m", model, "--tokens", ",".join(map(str, tokens)),
                          "-n", str(gen), "--ignore-eos", "--threads", str(threads),
                          "--ctx", str(len(tokens) + gen + 8), "--kv", kv],
                         check=True, capture_output=True).stdout.decode("utf-8", "replace")
    return json.loads(out.strip().splitlines()[-1])


def kiln_speed(kiln, model, prompt, gen, threads, after, kv):
    prefill = kiln_json(kiln, model, prompt, 0, threads, kv)["prefill_tok_s"]
    # gen + 1 sampled tokens: the first comes from the prefill.
    decode = kiln_json(kiln, model, prompt[:max(1, after)], gen + 1, threads, kv)["decode_tok_s"]
    return prefill, decode


def llamacpp_speed(model, prompt, gen, threads, after, flash_attn, kv):
    m = llama_cpp.Llama(model_path=model, n_ctx=len(prompt) + gen + 8, n_batch=len(prompt),
                        n_ubatch=len(prompt), n_threads=threads, n_threads_batch=threads,
                        flash_attn=flash_attn or kv != "f16", type_k=GGML_KV_TYPES[kv],
                        type_v=GGML_KV_TYPES[kv], verbose=False)
    m.eval(prompt[:8])  # warm-up
    m.reset()
    t0 = time.perf_counter()
    m.eval(prompt)
    prefill = len(prompt) / (time.perf_counter() - t0)
    m.reset()
    if after:
        m.eval(prompt[:after])
    tok = prompt[0]
    t0 = time.perf_counter()
    for _ in range(gen):
        m.eval([tok])
    decode = gen / (time.perf_counter() - t0)
    return prefill, decode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--kiln", default="build/tools/kiln")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--decode-after", type=int, default=0,
                    help="prompt ids in the cache before decode starts (<= --prompt)")
    ap.add_argument("--flash-attn", action="store_true",
                    help="llama.cpp with flash attention (llama-bench -fa 1)")
    ap.add_argument("--kv", choices=sorted(GGML_KV_TYPES), default="f16", help="KV cache type")
    a = ap.parse_args()
    if not 0 <= a.decode_after <= a.prompt:
        ap.error("--decode-after must be in 0..--prompt")
    print("| model | engine | prefill tok/s | decode tok/s |")
    print("|---|---|---|---|")
    for model in a.models:
        n_vocab = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False).n_vocab()
        prompt = [int(t) for t in np.random.default_rng(0).integers(3, n_vocab, a.prompt)]
        for _ in range(a.repeat):
            kp, kd = kiln_speed(a.kiln, model, prompt, a.gen, a.threads, a.decode_after, a.kv)
            lp, ld = llamacpp_speed(model, prompt, a.gen, a.threads, a.decode_after, a.flash_attn,
                                    a.kv)
            name = model.rsplit("/", 1)[-1]
            print(f"| {name} | Kiln | {kp:.1f} | {kd:.1f} |")
            print(f"| {name} | llama.cpp | {lp:.1f} | {ld:.1f} |")
            print(f"| {name} | Kiln / llama.cpp | {kp / lp:.2f}x | {kd / ld:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
