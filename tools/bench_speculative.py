#!/usr/bin/env python3
"""Speculative decoding's speed: `kiln run` with and without guesses,
alternated in one run, against the cost model and against llama.cpp.

Each round runs the target alone (greedy), then each variant (--draft
MODEL, --spec ngram), so drift of the machine hits all alike; the table
gives medians. Per variant:

- tok/s and its ratio to the target alone (decode only: prefill excluded);
- acceptance (guesses kept / made), mean tokens per verify step, mean K;
- the cost model's speed-up, from the variant run's measured parts and the
  target-alone run's decode step T1: with acceptance a per guess
  (independent), a verify step of K guesses yields E = (1 - a^(K+1)) / (1 - a)
  tokens for K draft steps (Td each) and one verify forward (Tv), and the
  run's other steps are plain (T1 each), so

      predicted tok/s = tokens / (plain * T1 + steps * (K Td + Tv)),
      plain = tokens - steps * E;

  its error against the measured tok/s is the model's (the issue's bar: 15 %);
- with --llama-speculative BIN (tools/build-llama-server.sh DIR
  llama-speculative builds it from the llama.cpp that llama-cpp-python
  vendors): llama.cpp's own speculative decoding on the same pair, threads,
  prompt and K (its decode speed as it prints it); with --lookup-llamacpp,
  llama-cpp-python's LlamaPromptLookupDecoding for --spec ngram.

  python3 tools/bench_speculative.py --kiln build/tools/kiln -m target.gguf \\
      --draft draft.gguf --spec ngram [--draft-k 4] [--threads 2] [-n 128] [--rounds 2]
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time

PROMPT = ("def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + "
          "fibonacci(n - 2)\n\n\ndef factorial(n):\n    if n < 2:\n        return 1\n    return n * "
          "factorial(n - 1)\n\n\ndef")


def kiln_run(args, extra):
    cmd = [args.kiln, "run", "-m", args.model, "-p", args.prompt, "-n", str(args.n),
           "--threads", str(args.threads), "--ctx", str(args.ctx), "--ignore-eos"] + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def predicted_tok_s(m, t1_ms):
    """The cost model's decode tok/s for run m, T1 from the target alone."""
    steps, guesses = m["spec_steps"], m["draft_tokens"]
    tokens = m["generated_tokens"] - 1  # the first comes from the prefill
    if steps == 0:
        return 1e3 / t1_ms
    a = min(m["acceptance_rate"], 0.999)
    k = guesses / steps
    e = (1 - a ** (k + 1)) / (1 - a)
    td = m["draft_ms"] / guesses if guesses else 0.0
    tv = m["verify_ms"] / steps
    plain = max(0.0, tokens - steps * e)
    return tokens / (plain * t1_ms + steps * (k * td + tv)) * 1e3


def llama_speculative(args, draft):
    cmd = [args.llama_speculative, "-m", args.model, "-md", draft, "-p", args.prompt,
           "-n", str(args.n), "-t", str(args.threads), "-tb", str(args.threads),
           "-td", str(args.threads), "-tbd", str(args.threads), "-c", str(args.ctx),
           "--spec-draft-n-max", str(args.draft_k), "--spec-draft-n-min", "0", "--temp", "0",
           "--ignore-eos", "-ngl", "0", "-ngld", "0"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    text = out.stdout + out.stderr
    speed = re.search(r"decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s", text)
    accept = re.search(r"accept\s*=\s*([0-9.]+)%", text)
    if out.returncode != 0 or not speed:
        sys.exit(f"{' '.join(cmd)} failed:\n{text[-3000:]}")
    return float(speed.group(1)), float(accept.group(1)) / 100 if accept else float("nan")


def llamacpp_lookup(args):
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
    llm = Llama(model_path=args.model, n_ctx=args.ctx, n_threads=args.threads,
                n_threads_batch=args.threads, verbose=False,
                draft_model=LlamaPromptLookupDecoding(num_pred_tokens=args.draft_k))
    # Decode time: the whole request less one that stops after the first token.
    t0 = time.perf_counter()
    llm(args.prompt, max_tokens=1, temperature=0)
    first = time.perf_counter() - t0
    llm.reset()
    t0 = time.perf_counter()
    out = llm(args.prompt, max_tokens=args.n, temperature=0)
    total = time.perf_counter() - t0
    return (out["usage"]["completion_tokens"] - 1) / max(total - first, 1e-9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("-m", "--model", required=True, help="the target model")
    ap.add_argument("--draft", action="append", default=[], help="a draft model (repeatable)")
    ap.add_argument("--spec", action="append", default=[], help="ngram[:N] (repeatable)")
    ap.add_argument("--draft-k", type=int, default=4)
    ap.add_argument("--fixed-k", action="store_true", help="--draft-k-fixed for Kiln")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--llama-speculative", help="llama.cpp's llama-speculative binary")
    ap.add_argument("--lookup-llamacpp", action="store_true",
                    help="llama-cpp-python's prompt lookup beside --spec ngram")
    ap.add_argument("--json", help="write every run's metrics here")
    args = ap.parse_args()

    k_args = ["--draft-k", str(args.draft_k)] + (["--draft-k-fixed"] if args.fixed_k else [])
    variants = [("target alone", [])]
    variants += [(f"draft {d}", ["--draft", d] + k_args) for d in args.draft]
    variants += [(f"spec {s}", ["--spec", s] + k_args) for s in args.spec]
    runs = {name: [] for name, _ in variants}
    for r in range(args.rounds):
        for name, extra in variants:
            m = kiln_run(args, extra)
            runs[name].append(m)
            print(f"round {r + 1} {name}: {m['decode_tok_s']:.2f} tok/s", file=sys.stderr)
    base = statistics.median(m["decode_tok_s"] for m in runs["target alone"])
    t1_ms = 1e3 / base
    print(f"target {args.model}, {args.threads} threads, {args.n} tokens, K up to {args.draft_k}"
          f"{' (fixed)' if args.fixed_k else ' (adaptive)'}, {args.rounds} rounds alternated")
    print(f"{'variant':<40} {'tok/s':>8} {'x alone':>8} {'accept':>7} {'tok/step':>8} {'K':>5}"
          f" {'model x':>8} {'error':>7}")
    summary = {}
    for name, _ in variants:
        ms = runs[name]
        tok_s = statistics.median(m["decode_tok_s"] for m in ms)
        pred = statistics.median(predicted_tok_s(m, t1_ms) for m in ms)
        steps = sum(m["spec_steps"] for m in ms)
        acc = statistics.median(m["acceptance_rate"] for m in ms)
        per_step = statistics.median(m["mean_accepted_len"] for m in ms)
        k = sum(m["draft_tokens"] for m in ms) / steps if steps else 0.0
        err = (pred - tok_s) / tok_s
        print(f"{name:<40} {tok_s:8.2f} {tok_s / base:8.3f} {acc:7.3f} {per_step:8.3f} {k:5.2f}"
              f" {pred / base:8.3f} {100 * err:+6.1f}%")
        summary[name] = {"tok_s": tok_s, "speedup": tok_s / base, "acceptance": acc,
                         "tokens_per_step": per_step, "mean_k": k,
                         "predicted_speedup": pred / base, "model_error": err}
    if args.llama_speculative:
        for d in args.draft:
            speeds = [llama_speculative(args, d) for _ in range(args.rounds)]
            tok_s = statistics.median(s for s, _ in speeds)
            kiln = summary[f"draft {d}"]["tok_s"]
            print(f"llama.cpp llama-speculative, draft {d}: {tok_s:.2f} tok/s, acceptance "
                  f"{speeds[0][1]:.3f}; Kiln / llama.cpp {kiln / tok_s:.3f}")
            summary[f"llama.cpp draft {d}"] = {"tok_s": tok_s, "kiln_ratio": kiln / tok_s}
    if args.lookup_llamacpp and args.spec:
        tok_s = statistics.median(llamacpp_lookup(args) for _ in range(args.rounds))
        kiln = summary[f"spec {args.spec[0]}"]["tok_s"]
        print(f"llama-cpp-python LlamaPromptLookupDecoding: {tok_s:.2f} tok/s; "
              f"Kiln / llama.cpp {kiln / tok_s:.3f}")
        summary["llama.cpp lookup"] = {"tok_s": tok_s, "kiln_ratio": kiln / tok_s}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
