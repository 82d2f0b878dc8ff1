#!/usr/bin/env python3
"""Serving benchmark: drives an OpenAI-compatible server with three workloads
and reports throughput, time to first token (TTFT), inter-token latency
(ITL) and request latency percentiles.

  W1 single:        one request at a time, prompt 256 tokens, 256 generated
  W2 mixed:         16 concurrent, prompts 32-1024 tokens, 64-256 generated
  W2L:              W2's requests asking logprobs: 5 (the cost of scoring)
  W2J:              W2's requests held to a JSON schema no reply completes (W2's tokens,
                    each under the grammar's mask)
  W3 shared prefix: 16 concurrent chats sharing one system prompt

The same script drives `kiln serve` (--kiln KILN -m MODEL, with
--serve-args for its options), llama.cpp's own server (--llama-server
LLAMA_SERVER -m MODEL --slots N: N parallel slots with continuous batching,
each slot given --ctx tokens of cache; tools/build-llama-server.sh builds it
from the llama.cpp that llama-cpp-python vendors), llama-cpp-python's server
(--llamacpp -m MODEL: `python3 -m llama_cpp.server`, which runs one request
at a time), or any server already listening (--url http://HOST:PORT), so all
are measured by one client. Prompts are text (words drawn with a fixed seed), so any
server tokenizes them; lengths are in words, about a token each. Streams
are timed per event: TTFT from the request to the first text, ITL between
later text events, tokens counted by the final usage (or by events).

--sweep runs the workloads once per `kiln serve --policy` and --step-tokens
value (a fresh server each), prints a table and with --svg draws output
tokens/s against TTFT p95, a panel per workload: the policy that serves a
workload best sits up and to the left.

  bench_serving.py --kiln build/tools/kiln -m MODEL.gguf [--workloads W1,W2,W3]
                   [--scale 1.0] [--ctx 2048] [--serve-args "--max-batch 16"] [--json OUT.json]
  bench_serving.py --kiln build/tools/kiln -m MODEL.gguf --sweep decode-first,prefill-first,round-robin,static
                   [--sweep-step-tokens 64,256] [--svg sweep.svg]
  bench_serving.py --llama-server PATH/llama-server -m MODEL.gguf --slots 16 ...
  bench_serving.py --llamacpp -m MODEL.gguf ...
  bench_serving.py --url http://127.0.0.1:8000 [--model NAME] ...
"""
import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse

WORDS = ("the of and to in is was that for on with as by at from his her they this which "
         "time people year way day man thing woman life child world school state family "
         "student group country problem hand part place case week company system program").split()


def text_of(n, rng):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def percentile(v, q):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))]


def one_request(host, port, path, body):
    """Streams one request; returns (ttft, [itl...], latency, tokens) or None on an error."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection(host, port, timeout=3600)
    c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        r.read()
        return None
    ttft, last, itl, events, tokens = None, None, [], 0, None
    buf = b""
    while True:
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            line = block.decode(errors="replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                continue
            ev = json.loads(data)
            ch = ev.get("choices") or [{}]
            piece = ch[0].get("text") or (ch[0].get("delta") or {}).get("content") or ""
            now = time.perf_counter()
            if piece:
                events += 1
                if ttft is None:
                    ttft = now - t0
                else:
                    itl.append(now - last)
                last = now
            if ev.get("usage"):
                tokens = ev["usage"].get("completion_tokens")
    c.close()
    return ttft, itl, time.perf_counter() - t0, tokens if tokens is not None else events


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(host, port, server, limit=120):
    deadline = time.time() + limit
    while time.time() < deadline:
        if server.poll() is not None:
            raise SystemExit("the server exited while starting")
        try:
            c = http.client.HTTPConnection(host, port, timeout=2)
            c.request("GET", "/v1/models")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the server did not start listening")


def run_workload(host, port, requests, concurrency):
    results, lock = [], threading.Lock()
    queue = list(requests)

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                path, body = queue.pop(0)
            try:
                res = one_request(host, port, path, body)
            except (OSError, http.client.HTTPException, ValueError):
                res = None  # a dropped or broken stream: failed
            with lock:
                results.append(res)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if r and r[0] is not None]
    itl = [x for r in ok for x in r[1]]
    tokens = sum(r[3] for r in ok)
    return {"requests": len(results), "failed": len(results) - len(ok), "wall_s": wall,
            "output_tokens": tokens, "output_tok_s": tokens / wall if wall > 0 else 0.0,
            "itl_mean_ms": 1e3 * sum(itl) / len(itl) if itl else float("nan"),
            "ttft_ms": {q: 1e3 * percentile([r[0] for r in ok], p) for q, p in (("p50", .5), ("p95", .95), ("p99", .99))},
            "itl_ms": {q: 1e3 * percentile(itl, p) for q, p in (("p50", .5), ("p95", .95), ("p99", .99))},
            "latency_s": {q: percentile([r[2] for r in ok], p) for q, p in (("p50", .5), ("p95", .95), ("p99", .99))}}


def workloads(names, scale, model, seed):
    rng = random.Random(seed)
    n = lambda x: max(1, int(x * scale))
    out = {}
    # llama.cpp's default sampling (top-k 40 as `kiln run`): a server's
    # default of no top-k sorts the whole vocabulary for top-p every token.
    common = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "seed": 1, "model": model}
    if "W1" in names:
        out["W1"] = (1, [("/v1/completions", dict(common, prompt=text_of(n(256), rng), max_tokens=n(256)))
                         for _ in range(3)])
    def w2(extra):
        # Each variant the same prompts and lengths: their own generator.
        r = random.Random(seed + 2)
        return (16, [("/v1/completions", dict(common, prompt=text_of(n(r.randint(32, 1024)), r),
                                              max_tokens=n(r.randint(64, 256)), **extra)) for _ in range(16)])
    if "W2" in names:
        out["W2"] = w2({})
    if "W2L" in names:
        out["W2L"] = w2({"logprobs": 5})
    if "W2J" in names:
        # A schema no reply completes within its max_tokens (1000 items at
        # least), so every reply is as long as W2's: the same tokens, each
        # sampled under the grammar's mask.
        out["W2J"] = w2({"response_format": {"type": "json_schema", "json_schema": {
            "name": "words", "schema": {"type": "array", "items": {"type": "string", "maxLength": 8},
                                        "minItems": 1000}}}})
    if "W3" in names:
        system = "You are a helpful assistant for a travel company. " + text_of(n(400), rng)
        out["W3"] = (16, [("/v1/chat/completions",
                           dict(common, max_tokens=n(64),
                                messages=[{"role": "system", "content": system},
                                          {"role": "user", "content": text_of(n(20), rng)}])) for _ in range(16)])
    return out


def start_server(a, serve_args):
    """Starts the server the options name (or none for --url): (process, host, port)."""
    server = None
    if a.kiln:
        server = subprocess.Popen([a.kiln, "serve", "-m", a.model_path, "--port", "0", "--ctx", str(a.ctx),
                                   "--threads", str(a.threads), "--queue", "64"] + serve_args,
                                  stderr=subprocess.PIPE, text=True)
        m = re.search(r"http://([0-9.]+):(\d+)", server.stderr.readline())
        if not m:
            raise SystemExit("kiln serve did not start")
        host, port = m.group(1), int(m.group(2))
        threading.Thread(target=server.stderr.read, daemon=True).start()
    elif a.llama_server:
        host, port = "127.0.0.1", free_port()
        # -c is the cache of all slots together; each slot gets --ctx.
        server = subprocess.Popen([a.llama_server, "-m", a.model_path, "-c", str(a.ctx * a.slots),
                                   "-np", str(a.slots), "-t", str(a.threads), "-tb", str(a.threads),
                                   "--host", host, "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(host, port, server)
    elif a.llamacpp:
        host, port = "127.0.0.1", free_port()
        server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", a.model_path,
                                   "--n_ctx", str(a.ctx), "--n_threads", str(a.threads),
                                   "--n_threads_batch", str(a.threads), "--host", host, "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(host, port, server)
    elif a.url:
        u = urllib.parse.urlparse(a.url)
        host, port = u.hostname, u.port
    else:
        raise SystemExit("give --kiln KILN -m MODEL, --llama-server PATH -m MODEL, --llamacpp -m MODEL or --url URL")
    return server, host, port


def run_all(a, host, port, tag=""):
    report = {}
    for name, (conc, reqs) in workloads(a.workloads.split(","), a.scale, a.model, 7).items():
        r = run_workload(host, port, reqs, min(conc, a.concurrency) if a.concurrency > 0 else conc)
        report[name] = r
        print(f"{tag}{name}: {r['requests']} requests ({r['failed']} failed), {r['output_tokens']} tokens, "
              f"{r['output_tok_s']:.1f} output tok/s, "
              f"TTFT p50/p95/p99 {r['ttft_ms']['p50']:.0f}/{r['ttft_ms']['p95']:.0f}/{r['ttft_ms']['p99']:.0f} ms, "
              f"ITL mean {r['itl_mean_ms']:.1f}, p50/p95/p99 {r['itl_ms']['p50']:.1f}/{r['itl_ms']['p95']:.1f}/{r['itl_ms']['p99']:.1f} ms, "
              f"latency p50 {r['latency_s']['p50']:.2f} s", flush=True)
    return report


def sweep(a):
    """Every --sweep policy at every --sweep-step-tokens value: a table, --json, --svg."""
    if not a.kiln:
        raise SystemExit("--sweep runs kiln serve: give --kiln KILN -m MODEL")
    configs = [(p, int(t)) for p in a.sweep.split(",") for t in a.sweep_step_tokens.split(",")]
    rows = []
    for policy, step in configs:
        server, host, port = start_server(a, a.serve_args.split() + ["--policy", policy, "--step-tokens", str(step)])
        try:
            # A fresh server loads its kernels on its first request: not a policy's cost.
            one_request(host, port, "/v1/completions", {"prompt": text_of(300, random.Random(0)), "max_tokens": 8,
                                                        "model": a.model})
            report = run_all(a, host, port, tag=f"{policy} --step-tokens {step}: ")
        finally:
            server.kill()
            server.wait()
        rows += [dict(policy=policy, step_tokens=step, workload=w, **r) for w, r in report.items()]
    print("\n| workload | policy | step tokens | output tok/s | TTFT p50 ms | TTFT p95 ms | ITL mean ms | latency p50 s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["workload"], -r["output_tok_s"])):
        print(f"| {r['workload']} | {r['policy']} | {r['step_tokens']} | {r['output_tok_s']:.1f} | "
              f"{r['ttft_ms']['p50']:.0f} | {r['ttft_ms']['p95']:.0f} | {r['itl_mean_ms']:.1f} | "
              f"{r['latency_s']['p50']:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(sweep_svg(rows))


def sweep_svg(rows):
    """Output tok/s (up) against TTFT p95 (right), one panel per workload, a point per config."""
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    policies = sorted({r["policy"] for r in rows})
    colour = {p: palette[i % len(palette)] for i, p in enumerate(policies)}
    names = sorted({r["workload"] for r in rows})
    W, H, pad = 360, 280, 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(names)}" height="{H + 30}" '
           'font-family="sans-serif" font-size="11">']
    for i, name in enumerate(names):
        pts = [r for r in rows if r["workload"] == name]
        xs = [r["ttft_ms"]["p95"] for r in pts]
        ys = [r["output_tok_s"] for r in pts]
        xmax, ymax = max(xs) * 1.1 or 1, max(ys) * 1.1 or 1
        ox = i * W
        X = lambda x: ox + pad + (W - pad - 20) * x / xmax
        Y = lambda y: H - pad + 10 - (H - pad - 20) * y / ymax
        out.append(f'<text x="{ox + W / 2}" y="14" text-anchor="middle" font-weight="bold">{name}</text>')
        out.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(xmax)}" y2="{Y(0)}" stroke="black"/>')
        out.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(0)}" y2="{Y(ymax)}" stroke="black"/>')
        out.append(f'<text x="{X(xmax / 2)}" y="{Y(0) + 28}" text-anchor="middle">TTFT p95 (ms)</text>')
        out.append(f'<text x="{ox + 12}" y="{Y(ymax / 2)}" transform="rotate(-90 {ox + 12} {Y(ymax / 2)})" '
                   'text-anchor="middle">output tok/s</text>')
        for t in range(5):
            out.append(f'<text x="{X(xmax * t / 4)}" y="{Y(0) + 13}" text-anchor="middle">{xmax * t / 4:.0f}</text>')
            out.append(f'<text x="{X(0) - 4}" y="{Y(ymax * t / 4) + 4}" text-anchor="end">{ymax * t / 4:.1f}</text>')
        for r, x, y in zip(pts, xs, ys):
            out.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="4" fill="{colour[r["policy"]]}"/>')
            out.append(f'<text x="{X(x) + 6:.1f}" y="{Y(y) - 4:.1f}" fill="{colour[r["policy"]]}">{r["step_tokens"]}</text>')
    for j, p in enumerate(policies):
        out.append(f'<circle cx="{20 + 130 * j}" cy="{H + 20}" r="4" fill="{colour[p]}"/>'
                   f'<text x="{28 + 130 * j}" y="{H + 24}">{p}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln")
    ap.add_argument("-m", "--model-path")
    ap.add_argument("--url")
    ap.add_argument("--llama-server", help="start this llama.cpp llama-server binary on -m")
    ap.add_argument("--slots", type=int, default=16, help="llama-server's parallel slots (-np)")
    ap.add_argument("--llamacpp", action="store_true", help="start llama-cpp-python's server on -m")
    ap.add_argument("--serve-args", default="", help="more options for kiln serve")
    ap.add_argument("--model", default="model")
    ap.add_argument("--workloads", default="W1,W2,W3")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every prompt and output length")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=0,
                    help="at most this many requests at once (llama-cpp-python's server takes one)")
    ap.add_argument("--json")
    ap.add_argument("--sweep", help="kiln serve policies to run the workloads under, comma-separated")
    ap.add_argument("--sweep-step-tokens", default="256", help="--step-tokens values for --sweep")
    ap.add_argument("--svg", help="--sweep: output tok/s against TTFT p95, a panel per workload")
    a = ap.parse_args()
    if a.sweep:
        return sweep(a)
    server, host, port = start_server(a, a.serve_args.split())
    try:
        report = run_all(a, host, port)
    finally:
        if server:
            server.kill()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
