#!/usr/bin/env python3
"""Traces and serving metrics, end to end.

kiln run --trace FILE --profile on a generated model:
  - the file is Trace Event Format JSON (a jsonschema of the format's object
    form: complete "X" spans, "M" thread names, "b"/"e" async pairs), as
    Perfetto and chrome://tracing load it;
  - spans nest on each thread (a child inside its parent, siblings apart);
    every kernel launch sits in a forward and carries its label, spec, grid
    and bytes;
  - the --profile table equals the trace's kernel and copy spans summed per
    label (ms to its 3 printed decimals, calls exactly);
  - the JSON line's weights_mib is the GGUF's tensor bytes (read by gguf-py).
kiln serve --trace DIR with three completions:
  - the trace has a step span per scheduler step on the "scheduler" thread,
    forwards and launches inside them, and one request span per request;
  - /metrics' queue wait, request latency and per-request token histograms
    count the three requests, their token sums equal the responses' usage;
    the KV pool bytes (in use, prefix-cached, free) add up to the pool,
    pages x layers x K and V x KV heads x head size x 2 bytes (f16).
Exit 77 (skip) without jsonschema or gguf.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

try:
    import gguf
    import jsonschema
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

NUM = {"type": "number"}
INT = {"type": "integer"}
SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"type": "object", "required": ["name", "ph", "ts", "dur", "pid", "tid"],
             "properties": {"name": {"type": "string"}, "cat": {"type": "string"}, "ph": {"const": "X"},
                            "ts": NUM, "dur": {"type": "number", "minimum": 0}, "pid": INT, "tid": INT,
                            "args": {"type": "object"}}},
            {"type": "object", "required": ["name", "ph", "pid", "tid", "args"],
             "properties": {"name": {"enum": ["process_name", "thread_name"]}, "ph": {"const": "M"},
                            "pid": INT, "tid": INT,
                            "args": {"type": "object", "required": ["name"],
                                     "properties": {"name": {"type": "string"}}}}},
            {"type": "object", "required": ["name", "cat", "ph", "id", "ts", "pid", "tid"],
             "properties": {"name": {"type": "string"}, "cat": {"type": "string"},
                            "ph": {"enum": ["b", "e"]}, "id": {"type": ["integer", "string"]},
                            "ts": NUM, "pid": INT, "tid": INT}},
        ]}},
    },
}
KERNEL_ARGS = {"type": "object", "required": ["label", "spec", "grid", "bytes"],
               "properties": {"label": {"type": "string"}, "spec": {"type": "string"},
                              "grid": {"type": "string", "pattern": r"^\d+,\d+,\d+$"},
                              "bytes": {"type": "integer", "minimum": 0}}}


def load_trace(path):
    with open(path) as f:
        doc = json.load(f)
    jsonschema.validate(doc, SCHEMA)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            jsonschema.validate(e["args"], KERNEL_ARGS)
    return doc["traceEvents"]


def check_nesting(events):
    """Complete spans on one thread nest: each inside the one open, or after it. Returns parents."""
    eps = 1e-3  # us: the file's rounding
    parent = {}
    by_tid = {}
    for i, e in enumerate(events):
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append(i)
    for tid, ids in by_tid.items():
        ids.sort(key=lambda i: (events[i]["ts"], -events[i]["dur"]))
        stack = []
        for i in ids:
            e = events[i]
            while stack and e["ts"] >= events[stack[-1]]["ts"] + events[stack[-1]]["dur"] - eps:
                stack.pop()
            if stack:
                p = events[stack[-1]]
                assert e["ts"] + e["dur"] <= p["ts"] + p["dur"] + eps, (e, p)
                parent[i] = stack[-1]
            stack.append(i)
    return parent


def kiln_run_trace(kiln, model, tmp):
    path = os.path.join(tmp, "run.json")
    r = subprocess.run([kiln, "run", "-m", model, "-p", "Once upon a time", "-n", "6", "--threads", "2",
                        "--trace", path, "--profile"], capture_output=True, text=True, errors="replace")
    assert r.returncode == 0, r.stderr
    metrics = json.loads(r.stdout.strip().splitlines()[-1])
    events = load_trace(path)
    parent = check_nesting(events)
    forwards = [i for i, e in enumerate(events) if e["ph"] == "X" and e["name"] == "forward"]
    kernels = [i for i, e in enumerate(events) if e.get("cat") == "kernel"]
    assert len(forwards) >= metrics["generated_tokens"], (len(forwards), metrics)
    assert len(kernels) >= len(forwards) * metrics["kernels_per_token"] // 2, len(kernels)
    for i in kernels:
        assert events[parent[i]]["name"] == "forward", events[i]
    # The profile table on stderr, against the spans summed per label.
    table = {}
    lines = r.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^step\s+ms\s+calls\s+share", line))
    for line in lines[start + 1:]:
        m = re.match(r"^(\S+)\s+([0-9.]+)\s+(\d+)\s+[0-9.]+%$", line)
        if not m:
            break
        table[m.group(1)] = (float(m.group(2)), int(m.group(3)))
    want = {}
    for e in events:
        if e.get("cat") in ("kernel", "copy"):
            ms, calls = want.get(e["args"]["label"], (0.0, 0))
            want[e["args"]["label"]] = (ms + e["dur"] / 1e3, calls + 1)
    assert set(table) == set(want), (sorted(table), sorted(want))
    for label, (ms, calls) in want.items():
        assert table[label][1] == calls, (label, table[label], calls)
        assert abs(table[label][0] - ms) <= 0.0006 + 1e-6 * ms, (label, table[label], ms)
    # The weights as the file holds them.
    tensor_bytes = sum(int(t.n_bytes) for t in gguf.GGUFReader(model).tensors)
    assert abs(metrics["weights_mib"] - tensor_bytes / 2**20) < 0.06, (metrics["weights_mib"], tensor_bytes)
    assert metrics["scratch_mib"] > 0 and metrics["weight_copies_mib"] >= 0, metrics
    print(f"kiln run: {len(events)} events, {len(forwards)} forwards, {len(kernels)} launches, "
          f"profile of {len(table)} labels matches")


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def metric(text, name):
    m = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.M)
    assert m, (name, text)
    return float(m.group(1))


def kiln_serve_trace(kiln, model, tmp):
    tdir = os.path.join(tmp, "serve-trace")
    server = subprocess.Popen([kiln, "serve", "-m", model, "--port", "0", "--threads", "2", "--ctx", "256",
                               "--kv-page", "16", "--trace", tdir], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        port = int(re.search(r":(\d+) \(", line).group(1))
        usage = [post(port, "/v1/completions", {"prompt": p, "max_tokens": n, "temperature": 0})["usage"]
                 for p, n in (("Once upon a time", 8), ("The quick brown fox", 5), ("Hello", 3))]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            text = r.read().decode()
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0
    for h in ("kiln_queue_wait_seconds", "kiln_request_latency_seconds", "kiln_request_prompt_tokens",
              "kiln_request_generated_tokens"):
        assert metric(text, h + "_count") == 3, (h, text)
    assert metric(text, "kiln_request_prompt_tokens_sum") == sum(u["prompt_tokens"] for u in usage)
    assert metric(text, "kiln_request_generated_tokens_sum") == sum(u["completion_tokens"] for u in usage)
    assert metric(text, 'kiln_request_prompt_tokens_bucket{le="+Inf"}') == 3
    # The pool's bytes, split three ways, against its shape.
    r = gguf.GGUFReader(model)
    kv = lambda k: int(r.fields[k].parts[r.fields[k].data[0]][0])
    head_dim = kv("llama.embedding_length") // kv("llama.attention.head_count")
    page_bytes = 16 * kv("llama.block_count") * 2 * kv("llama.attention.head_count_kv") * head_dim * 2
    split = [metric(text, f'kiln_kv_cache_bytes{{state="{s}"}}') for s in ("in_use", "prefix_cached", "free")]
    assert abs(sum(split) - metric(text, "kiln_kv_blocks_total") * page_bytes) < 1, (split, page_bytes)
    assert split[1] > 0  # the prompts' full pages stay cached
    assert metric(text, 'kiln_weights_bytes{form="file"}') == sum(int(t.n_bytes) for t in r.tensors)
    assert metric(text, "kiln_scratch_bytes") > 0
    # The trace: steps on the scheduler thread, forwards in them, requests.
    files = glob.glob(os.path.join(tdir, "trace-*.json"))
    assert len(files) == 1, files
    events = load_trace(files[0])
    parent = check_nesting(events)
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    steps = [i for i, e in enumerate(events) if e["ph"] == "X" and e["name"] == "step"]
    assert steps and all(names[events[i]["tid"]] == "scheduler" for i in steps)
    for i in steps:
        assert {"sequences", "decodes", "prompt_tokens", "guesses"} <= set(events[i]["args"]), events[i]
    for i, e in enumerate(events):
        if e["ph"] == "X" and e["name"] == "forward":
            assert events[parent[i]]["name"] == "step"
        if e.get("cat") == "kernel":
            assert events[parent[i]]["name"] == "forward"
    begins = [e for e in events if e["ph"] == "b" and e["name"] == "request"]
    ends = [e for e in events if e["ph"] == "e" and e["name"] == "request"]
    assert len(begins) == len(ends) == 3 and len({e["id"] for e in begins}) == 3
    assert sorted(e["args"]["generated_tokens"] for e in begins) == sorted(u["completion_tokens"] for u in usage)
    print(f"kiln serve: {len(events)} events, {len(steps)} steps, 3 requests; metrics match")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/tools/kiln")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kiln-trace-")
    try:
        model = os.path.join(tmp, "llama.gguf")
        r = subprocess.run([a.kiln, "gen-model", "--arch", "llama", "--preset", "tiny", "--type", "q8_0",
                            "--seed", "4", "-o", model], capture_output=True, text=True, errors="replace")
        assert r.returncode == 0, r.stderr
        kiln_run_trace(a.kiln, model, tmp)
        kiln_serve_trace(a.kiln, model, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok")


if __name__ == "__main__":
    main()
