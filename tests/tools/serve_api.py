#!/usr/bin/env python3
"""`kiln serve`'s HTTP contract, over loopback against a generated llama.

Starts `kiln serve --port 0` on a `kiln gen-model` model and checks, with
the standard library's HTTP client only:
- GET /health, /v1/models, /metrics;
- /v1/chat/completions: the chatml layout and tokens llama.cpp gives the
  same messages, chat.completion(.chunk) shapes, its own 400/422s;
- a chat sharing the last one's system prompt reuses its cached full KV
  pages and still gives `kiln run`'s greedy tokens;
- a greedy completion (temperature 0) gives the tokens `kiln run` picks:
  the argmax of its --logits-out rows, token for token; its usage counts;
- streaming: every event `data: {json}` and a blank line, text pieces
  whose concatenation is the whole completion's text, finish_reason only on
  the last chunk (which carries usage), then exactly one `data: [DONE]`;
- a stop string spanning two tokens ends the text before it (streamed and
  whole alike), finish_reason "stop";
- errors before the stream: 400 (bad JSON, no prompt, invalid UTF-8), 422
  (unknown field, out-of-range or wrongly typed values, n above --max-n,
  best_of, suffix, logprobs above 20, 17 stop strings, a prompt longer than
  the context, token ids past the vocabulary), 413 (a body over
  --max-body), 503 (the queue full);
- slow-loris clients (silent, or trickling a request line or body) are
  answered 408 or closed after --request-timeout while others are served;
- a streaming client that disconnects cancels its sequence (metrics:
  cancelled, nothing running) and the server keeps serving;
- speculative decoding (--spec ngram, --draft: the model's weights at
  Q4_0), K fixed: concurrent greedy completions give `kiln run`'s tokens,
  and /metrics counts the guesses made and kept;
- SIGTERM and SIGINT: connections refused at once, a running stream
  finishes within --shutdown-grace or ends with one error event past it,
  and the server exits 0;
- a bounded load (200 requests from 32 clients on 8 running sequences and
  a pool short of pages, some streamed, some dropped mid-stream) ends with
  every request answered once, batched greedy requests with `kiln run`'s
  tokens, nothing queued and no KV page held but by the prefix cache.

  serve_api.py --kiln build/tools/kiln
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

PROMPT = [1, 72, 101, 108, 108, 111]
failures = []


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


class Server:
    def __init__(self, kiln, model, extra):
        self.proc = subprocess.Popen([kiln, "serve", "-m", model, "--port", "0"] + extra,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
        if not m:
            raise SystemExit(f"FAIL: kiln serve did not start: {line}{self.proc.stderr.read()}")
        self.port = int(m.group(2))
        self.log = []  # the rest of stderr: a sanitizer's report, if any
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def conn(self):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def request(self, method, path, body=None, raw=None):
        c = self.conn()
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.status, r.read()
        c.close()
        return out

    def complete(self, body, path="/v1/completions"):
        status, data = self.request("POST", path, body)
        return status, json.loads(data)

    def stream(self, body, path="/v1/completions"):
        """(status, events): the data of each event, JSON-decoded but [DONE]."""
        c = self.conn()
        c.request("POST", path, body=json.dumps(dict(body, stream=True)).encode())
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        if r.status != 200:
            return r.status, text
        blocks = text.split("\n\n")
        ok = blocks[-1] == "" and all(b.startswith("data: ") and "\n" not in b for b in blocks[:-1])
        events = [b[6:] for b in blocks[:-1]]
        return (200 if ok else -1), [e if e == "[DONE]" else json.loads(e) for e in events]

    def metrics(self):
        _, data = self.request("GET", "/metrics")
        return {k: float(v) for k, v in re.findall(r"^(kiln_\w+) ([0-9.e+-]+)$", data.decode(), re.M)}

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        report = [line for line in self.log if "Sanitizer" in line or "runtime error" in line]
        check(not report, "the server's stderr holds no sanitizer report" + (f": {report[0]}" if report else ""))


def greedy_reference(kiln, model, tmp, n, prompt=PROMPT):
    """The tokens `kiln run` picks greedily after `prompt`: the argmax of its
    logits rows (ties to the lowest id, as its sampler)."""
    out = os.path.join(tmp, "run.npy")
    subprocess.run([kiln, "run", "-m", model, "--tokens", ",".join(map(str, prompt)), "-n", str(n),
                    "--temp", "0", "--logits-out", out], check=True, capture_output=True)
    logits = np.load(out)
    return [int(i) for i in logits[len(prompt) - 1:].argmax(-1)]


def contract(kiln, model, tmp):
    s = Server(kiln, model, ["--queue", "4", "--ctx", "256", "--max-body", "65536", "--kv-page", "32"])
    try:
        st, data = s.request("GET", "/health")
        check(st == 200 and json.loads(data) == {"status": "ok"}, "GET /health")
        st, data = s.request("GET", "/v1/models")
        check(st == 200 and json.loads(data)["data"][0]["id"] == os.path.basename(model), "GET /v1/models")

        greedy = {"prompt": PROMPT, "max_tokens": 12, "temperature": 0}
        st, r = s.complete(dict(greedy, return_token_ids=True))
        want = greedy_reference(kiln, model, tmp, 12)
        got = r["choices"][0]["token_ids"]
        check(st == 200 and got == want[:len(got)] and (len(got) == 12 or r["choices"][0]["finish_reason"] == "stop"),
              f"greedy completion = kiln run's argmax tokens ({len(got)} tokens)")
        check(r["usage"] == {"prompt_tokens": len(PROMPT), "completion_tokens": len(got),
                             "total_tokens": len(PROMPT) + len(got)} and r["prompt_token_ids"] == PROMPT,
              "usage counts")
        whole = r["choices"][0]["text"]

        st, ev = s.stream(greedy)
        chunks = [e for e in ev if e != "[DONE]"]
        check(st == 200 and ev[-1] == "[DONE]" and ev.count("[DONE]") == 1, "stream: one data: [DONE], last")
        check("".join(c["choices"][0]["text"] for c in chunks) == whole, "stream: the pieces make the whole text")
        check(all(c["choices"][0]["finish_reason"] is None and "usage" not in c for c in chunks[:-1]) and
              chunks[-1]["choices"][0]["finish_reason"] in ("length", "stop") and
              chunks[-1]["usage"]["completion_tokens"] == len(got), "stream: finish_reason and usage on the last chunk")

        # A stop string of two ASCII tokens in a row: it spans their boundary.
        pairs = [i for i in range(1, len(got) - 1) if all(32 <= t < 127 for t in got[i:i + 2])]
        check(bool(pairs), "the greedy text has two ASCII tokens in a row (for the stop string)")
        if pairs:
            stop = "".join(chr(t) for t in got[pairs[0]:pairs[0] + 2])
            before = whole[:whole.find(stop)]
            st, r = s.complete(dict(greedy, stop=[stop, "never seen"]))
            check(st == 200 and r["choices"][0]["text"] == before and r["choices"][0]["finish_reason"] == "stop",
                  f"stop string {stop!r} across a token boundary")
            st, ev = s.stream(dict(greedy, stop=stop))
            text = "".join(e["choices"][0]["text"] for e in ev if e != "[DONE]")
            check(st == 200 and text == before, "stop string, streamed")

        st, ev = s.stream(dict(greedy, stream_options={"include_usage": True}))
        chunks = [e for e in ev if e != "[DONE]"] if st == 200 else [{}]
        check(st == 200 and chunks[-1].get("choices") == [] and
              chunks[-1].get("usage", {}).get("completion_tokens") == len(got) and
              chunks[-2]["choices"][0]["finish_reason"] in ("length", "stop"),
              "stream_options.include_usage: a last chunk of usage alone, then [DONE]")

        chat_api(s, model)
        prefix_cache(s, kiln, model, tmp)
        penalties(s, kiln, model, tmp, got)

        bad = [({"prompt": "x", "max_tokens": -1}, 422, "negative max_tokens"),
               ({"prompt": "x", "temperature": 3}, 422, "temperature 3"),
               ({"prompt": "x", "top_p": 0}, 422, "top_p 0"),
               ({"prompt": "x", "n": 9}, 422, "n above the server's --max-n"),
               ({"prompt": ["x"] * 5, "n": 2}, 422, "choices (n times the prompts) above --max-n"),
               ({"prompt": "x", "stream": "yes"}, 422, "stream 'yes'"),
               ({"prompt": "x", "best_of": 2}, 422, "best_of"),
               ({"prompt": "x", "suffix": "y"}, 422, "suffix"),
               ({"prompt": "x", "logprobs": 21}, 422, "logprobs above 20"),
               ({"prompt": "x", "logprobs": True}, 422, "logprobs true (completions take a count)"),
               ({"prompt": "x", "presence_penalty": 2.5}, 422, "presence_penalty 2.5"),
               ({"prompt": "x", "frequency_penalty": "high"}, 422, "frequency_penalty 'high'"),
               ({"prompt": "x", "user": 7}, 422, "user 7"),
               ({"prompt": "x", "stream_options": {"include_usage": True}}, 422, "stream_options without stream"),
               ({"prompt": "x", "stream": True, "stream_options": {"continuous": True}}, 422,
                "an unknown stream option"),
               ({"prompt": "x", "stop": ["a"] * 17}, 422, "17 stop strings"),
               ({"prompt": list(range(1, 300))}, 422, "a prompt longer than the context"),
               ({"prompt": [1, 10 ** 6]}, 422, "a token id past the vocabulary"),
               ({"prompt": ["a", 7]}, 422, "a list of prompts holding a number"),
               ({"prompt": []}, 422, "an empty prompt list"),
               ({"max_tokens": 3}, 400, "no prompt")]
        for body, code, what in bad:
            st, r = s.complete(body)
            check(st == code and r["error"]["code"] == code and r["error"]["message"], f"{code}: {what}")
        for raw, code, what in ((b"{bad", 400, "malformed JSON"), (b"[1, 2]", 400, "not an object"),
                                (b'{"prompt": "\xff\xfe"}', 400, "invalid UTF-8"),
                                (b'{"prompt": "' + b"a" * 70000 + b'"}', 413, "a body over --max-body")):
            st, data = s.request("POST", "/v1/completions", raw=raw)
            check(st == code, f"{code}: {what}")
    finally:
        s.stop()


def penalties(s, kiln, model, tmp, plain):
    """OpenAI's presence and frequency penalties with the repetition penalty,
    as llama.cpp applies them over the last 64 tokens: each greedy token is
    the argmax of `kiln run`'s logits for the same tokens, penalised here in
    float32 by llama.cpp's rule, and the tokens differ from the unpenalised
    ones. Each penalty alone, then all three."""
    for rep, freq, present in ((1.0, 0.0, 2.0), (1.0, 1.0, 0.0), (1.5, 0.0, 0.0), (1.3, 1.5, 0.5)):
        st, r = s.complete({"prompt": PROMPT, "max_tokens": 12, "temperature": 0, "repetition_penalty": rep,
                            "frequency_penalty": freq, "presence_penalty": present, "user": "tester",
                            "return_token_ids": True})
        got = r["choices"][0]["token_ids"] if st == 200 else []
        what = f"repetition {rep}, frequency {freq}, presence {present}"
        if len(got) < 2:
            check(False, f"penalties ({what}): a greedy completion of 2 tokens or more ({st}, {got})")
            continue
        out = os.path.join(tmp, "pen.npy")
        seq = PROMPT + got
        subprocess.run([kiln, "run", "-m", model, "--tokens", ",".join(map(str, seq[:-1])), "-n", "1",
                        "--temp", "0", "--logits-out", out], check=True, capture_output=True)
        rows = np.load(out).astype(np.float32)
        want = []
        for i in range(len(got)):
            l = rows[len(PROMPT) - 1 + i].copy()
            window = seq[:len(PROMPT) + i][-64:]
            for t in set(window):
                c = window.count(t)
                x = l[t] * np.float32(rep) if l[t] <= 0 else l[t] / np.float32(rep)
                l[t] = x - (np.float32(c) * np.float32(freq) + np.float32(present))
            want.append(int(l.argmax()))
        check(got == want and got != plain[:len(got)],
              f"penalties ({what}): each token the argmax of kiln run's logits penalised as llama.cpp "
              f"does, not the unpenalised tokens")


def chat_api(s, model):
    """/v1/chat/completions: the chatml layout (the model has no template),
    tokenized with its special tokens, as llama.cpp lays out and tokenizes
    it; the response and stream shapes; its own errors."""
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    body = {"messages": chat, "max_tokens": 6, "temperature": 0}
    st, r = s.complete(dict(body, return_token_ids=True), "/v1/chat/completions")
    msg = r["choices"][0]["message"] if st == 200 else {}
    check(st == 200 and r["object"] == "chat.completion" and msg.get("role") == "assistant" and
          r["usage"]["completion_tokens"] == len(r["choices"][0]["token_ids"]), "chat: a chat.completion")
    try:
        import ctypes
        import llama_cpp
        arr = (llama_cpp.llama_chat_message * len(chat))(
            *[llama_cpp.llama_chat_message(role=m["role"].encode(), content=m["content"].encode()) for m in chat])
        buf = ctypes.create_string_buffer(4096)
        n = llama_cpp.llama_chat_apply_template(b"chatml", arr, len(chat), True, buf, len(buf))
        vocab = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
        want = vocab.tokenize(buf.raw[:n], add_bos=True, special=True)
        check(st == 200 and r["prompt_token_ids"] == want,
              f"chat: the prompt is llama.cpp's chatml layout and tokens ({len(want)} tokens)")
    except ImportError:
        print("skipped: llama-cpp-python is not installed (the chat prompt's tokens are not compared)")
    st, ev = s.stream(body, "/v1/chat/completions")
    chunks = [e for e in ev if e != "[DONE]"] if st == 200 else []
    check(st == 200 and ev[-1] == "[DONE]" and chunks[0]["object"] == "chat.completion.chunk" and
          chunks[0]["choices"][0]["delta"].get("role") == "assistant" and
          "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == msg.get("content") and
          chunks[-1]["choices"][0]["finish_reason"] is not None, "chat: streamed deltas make the message")
    for b, code, what in (({"max_tokens": 2}, 400, "no messages"),
                          ({"messages": []}, 422, "no message in the list"),
                          ({"messages": [{"role": "tool", "content": "x"}]}, 422, "a role Kiln does not take"),
                          ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, 422, "content parts"),
                          ({"messages": chat, "prompt": "x"}, 422, "a prompt beside the messages"),
                          ({"messages": chat, "top_logprobs": 21, "logprobs": True}, 422, "top_logprobs 21"),
                          ({"messages": chat, "top_logprobs": 2}, 422, "top_logprobs without logprobs"),
                          ({"messages": chat, "echo": True}, 422, "echo in a chat")):
        st, r = s.complete(b, "/v1/chat/completions")
        check(st == code and r["error"]["code"] == code, f"chat {code}: {what}")


def prefix_cache(s, kiln, model, tmp):
    """Two chats sharing a long system prompt, one after the other: the
    second prefills only what follows the shared tokens (metrics), and its
    greedy tokens are still `kiln run`'s from the whole prompt."""
    system = "You are a careful assistant who answers briefly. " * 2
    out = []
    for q in ("What is two and two?", "Name a colour."):
        before = s.metrics()["kiln_prompt_tokens_cached_total"]
        st, r = s.complete({"messages": [{"role": "system", "content": system}, {"role": "user", "content": q}],
                            "max_tokens": 6, "temperature": 0, "return_token_ids": True}, "/v1/chat/completions")
        out.append(r if st == 200 else None)
    cached = s.metrics()["kiln_prompt_tokens_cached_total"] - before  # the second chat's
    if not all(out):
        return check(False, "prefix cache: both chats answered")
    a, b = out[0]["prompt_token_ids"], out[1]["prompt_token_ids"]
    shared = next(i for i in range(min(len(a), len(b))) if a[i] != b[i])
    # Full KV pages of 32 are shared: the shared tokens rounded down to pages.
    check(shared > 64 and cached == shared // 32 * 32,
          f"prefix cache: the second chat reused {cached:.0f} of {len(b)} prompt tokens (the {shared} it "
          f"shares, in whole pages of 32)")
    got = out[1]["choices"][0]["token_ids"]
    want = greedy_reference(kiln, model, tmp, 6, b)
    check(got == want[:len(got)], "prefix cache: the reusing chat's greedy tokens are kiln run's")


def small_pool(kiln, model):
    """A pool smaller than the context bounds a prompt: 422 before it queues."""
    s = Server(kiln, model, ["--kv-blocks", "1", "--kv-page", "32"])
    try:
        st, r = s.complete({"prompt": list(range(1, 41))})
        check(st == 422 and "32" in r["error"]["message"],
              f"422: a prompt longer than a pool of one 32-row page ({st})")
        st, r = s.complete({"prompt": list(range(1, 21)), "max_tokens": 4, "temperature": 0})
        check(st == 200 and r["usage"]["completion_tokens"] == 4, "a prompt the pool holds is served")
    finally:
        s.stop()


def disconnect_and_queue(kiln, model):
    s = Server(kiln, model, ["--queue", "1", "--max-batch", "1"])
    try:
        # A stream dropped after its first event: cancelled at the next token
        # (greedy: no end of sequence in its 2000 tokens).
        c = s.conn()
        c.request("POST", "/v1/completions",
                  body=json.dumps({"prompt": PROMPT, "max_tokens": 2000, "temperature": 0, "stream": True}))
        r = c.getresponse()
        r.read(1)
        c.sock.close()
        c.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            m = s.metrics()
            if m.get("kiln_requests_cancelled_total", 0) >= 1 and m.get("kiln_running_sequences", 1) == 0:
                break
            time.sleep(0.05)
        check(m.get("kiln_requests_cancelled_total", 0) >= 1 and m["kiln_running_sequences"] == 0,
              "a dropped stream is cancelled and frees the engine")

        # One runs, the queue holds 1: one running (greedy, 2000 tokens: no end of
        # sequence among them), one waiting, a third refused.
        c = s.conn()
        c.request("POST", "/v1/completions",
                  body=json.dumps({"prompt": PROMPT, "max_tokens": 2000, "temperature": 0, "stream": True}))
        first = c.getresponse()
        first.read(1)  # running now
        waiting = threading.Thread(target=s.complete, args=({"prompt": PROMPT, "max_tokens": 4},))
        waiting.start()
        time.sleep(0.03)
        st, r = s.complete({"prompt": PROMPT, "max_tokens": 4})
        check(st == 503 and r["error"]["code"] == 503, "503 when the queue is full")
        rest = first.read().decode()
        c.close()
        check(rest.endswith("data: [DONE]\n\n") and '"finish_reason":"length"' in rest,
              "the running request ends at its max_tokens")
        waiting.join()

        st, data = s.request("GET", "/health")
        check(st == 200, "the server still serves after the queue was full")
    finally:
        s.stop()


def slow_clients(kiln, model):
    """Slow-loris: connections that send nothing, trickle a request line, or
    trickle a body hold every worker thread (--queue 1 --max-batch 1: 6), yet
    each is answered 408 (or closed, if it sent nothing) once --request-timeout
    has passed, and a normal request is served meanwhile."""
    import socket
    limit = 1.5
    s = Server(kiln, model, ["--queue", "1", "--max-batch", "1", "--request-timeout", str(limit)])
    try:
        body = json.dumps({"prompt": PROMPT, "max_tokens": 2}).encode()
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        kinds = ["silent", "line", "body"] * 3  # 9 connections for 6 workers
        socks, t0 = [], time.time()
        for _ in kinds:
            k = socket.create_connection(("127.0.0.1", s.port))
            k.settimeout(0.01)
            socks.append(k)
        answers = [b""] * len(kinds)
        closed_at = [None] * len(kinds)
        sent = [0] * len(kinds)
        ok_at = [None]

        def normal():
            st, r = s.complete({"prompt": PROMPT, "max_tokens": 2})
            if st == 200 and r["usage"]["completion_tokens"] == 2:
                ok_at[0] = time.time() - t0
        client = threading.Thread(target=normal)
        client.start()
        while time.time() - t0 < 4 * limit + 2 and None in closed_at:
            for i, (k, kind) in enumerate(zip(socks, kinds)):
                if closed_at[i] is not None:
                    continue
                try:
                    got = k.recv(4096)
                    answers[i] += got
                    if not got:
                        closed_at[i] = time.time() - t0
                except socket.timeout:
                    pass
                except OSError:
                    closed_at[i] = time.time() - t0
                if closed_at[i] is not None:
                    continue
                # one more byte each round, never the last: the headers whole
                # at once for a trickled body
                data = {"line": head, "body": head + body}.get(kind, b"")
                n = len(head) if kind == "body" and sent[i] == 0 else sent[i] + 1
                if n < len(data):
                    try:
                        k.send(data[sent[i]:n])
                        sent[i] = n
                    except OSError:
                        pass
            time.sleep(0.1)
        client.join(timeout=30)
        for k in socks:
            k.close()
        # 9 connections on 6 workers: the last ones wait a round for a worker
        # (2 * limit), and a loaded machine is given one more
        late = [t for t in closed_at if t is None or t > 3 * limit + 1.5]
        check(not late, f"every slow connection is closed within the deadline (at {closed_at})")
        check(all(a.startswith(b"HTTP/1.1 408 ") and b'"code": 408' in a
                  for a, kind in zip(answers, kinds) if kind != "silent"),
              f"a request trickled past the deadline is answered 408 ({[a[:12] for a in answers]})")
        check(all(a == b"" for a, kind in zip(answers, kinds) if kind == "silent"),
              "a connection that sends nothing is closed without an answer")
        check(ok_at[0] is not None and ok_at[0] < 2 * limit + 5,
              f"a normal request is served while slow clients hold the workers ({ok_at[0]} s)")
        st, _ = s.request("GET", "/health")
        check(st == 200, "the server still serves after the slow clients")
    finally:
        s.stop()


def load(kiln, model, tmp):
    """200 requests from 32 clients at once on 8 running sequences and a pool
    too small for all of them (preemptions): every 7th stream dropped after
    its first event, every 11th after a few; greedy requests of three prompts
    must get `kiln run`'s tokens however they were batched; at the end nothing
    runs or waits and only the prefix cache holds KV pages."""
    prompts = [PROMPT, [1, 87, 111, 114, 108, 100, 33, 32, 72, 105] * 3, [1] + list(range(200, 250))]
    want = [greedy_reference(kiln, model, tmp, 24, p) for p in prompts]
    s = Server(kiln, model, ["--queue", "32", "--max-batch", "8", "--kv-blocks", "10", "--kv-page", "32",
                             "--ctx", "256", "--step-tokens", "64"])
    try:
        results, greedy = [], []

        def client(i):
            p = prompts[i % 3]
            body = {"prompt": p, "max_tokens": 8 + i % 40, "temperature": 0.8, "seed": i}
            if i % 7 == 0 or i % 11 == 0:
                try:
                    c = s.conn()
                    c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)))
                    r = c.getresponse()
                    r.read(1 if i % 7 == 0 else 400)
                    c.sock.close()
                except (OSError, http.client.HTTPException):
                    pass
                results.append("dropped")
                return
            try:
                served(i, p, body)
            except Exception as e:  # reported by the check below
                results.append(repr(e))

        def served(i, p, body):
            if i % 4 == 1:
                body = {"prompt": p, "max_tokens": 24, "temperature": 0, "return_token_ids": True}
                st, r = s.complete(body)
                results.append(st)
                if st == 200:
                    greedy.append(r["choices"][0]["token_ids"] == want[i % 3][:len(r["choices"][0]["token_ids"])])
                return
            st, r = s.stream(body) if i % 2 else s.complete(body)
            results.append(st)

        threads = [threading.Thread(target=lambda k=k: [client(i) for i in range(k, 200, 32)]) for k in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        # A dropped stream holds its place until the engine's next step, so a
        # client's next request may briefly find the server full (503).
        served, refused = results.count(200), results.count(503)
        check(len(results) == 200 and served + refused + results.count("dropped") == 200
              and not any(t.is_alive() for t in threads),
              f"load: 200 requests from 32 clients served, refused or dropped ({served} served, {refused} "
              f"refused, others {[r for r in results if r not in (200, 503, 'dropped')]})")
        check(greedy and all(greedy), f"load: {sum(greedy)} of {len(greedy)} batched greedy requests got kiln run's tokens")
        deadline = time.time() + 10
        while time.time() < deadline:
            m = s.metrics()
            if m["kiln_queue_depth"] == 0 and m["kiln_running_sequences"] == 0:
                break
            time.sleep(0.05)
        check(m["kiln_queue_depth"] == 0 and m["kiln_running_sequences"] == 0, "load: nothing left queued or running")
        check(m["kiln_kv_blocks_used"] == m["kiln_kv_blocks_cached"],
              f"load: no KV page leaked ({m['kiln_kv_blocks_used']:.0f} used, all by the prefix cache; "
              f"{m['kiln_preemptions_total']:.0f} preemptions, {m['kiln_steps_total']:.0f} steps)")
        st, data = s.request("GET", "/health")
        check(st == 200, "the server still serves after the load")
    finally:
        s.stop()


def shutdown(kiln, model):
    """SIGINT and SIGTERM: no new connections; a running stream finishes
    within the grace (its [DONE] arrives), or past it ends with one error
    event; the server exits 0 either way."""
    import signal
    import socket
    for sig, grace, tokens, finishes in ((signal.SIGTERM, "10", 48, True), (signal.SIGINT, "0.3", 3000, False)):
        name = signal.Signals(sig).name
        s = Server(kiln, model, ["--ctx", "4096", "--shutdown-grace", grace])
        c = s.conn()
        c.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": PROMPT, "max_tokens": tokens, "temperature": 0, "stream": True}).encode())
        r = c.getresponse()
        first = r.readline()  # the first event: the request is running
        s.proc.send_signal(sig)
        refused, deadline = False, time.time() + 5
        while time.time() < deadline and not refused:
            try:
                socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
                time.sleep(0.02)
            except OSError:
                refused = True
        rest = r.read().decode()
        c.close()
        try:
            code = s.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        events = [b[6:] for b in (first.decode() + rest).split("\n\n") if b.startswith("data: ")]
        last = events[-1] if events else ""
        if finishes:
            ok = last == "[DONE]" and json.loads(events[-2])["choices"][0]["finish_reason"] is not None
            what = f"{name}, grace {grace} s: the running stream finishes ([DONE])"
        else:
            ok = last != "[DONE]" and "shut down" in json.loads(last).get("error", {}).get("message", "")
            what = f"{name}, grace {grace} s: the stream still running ends with one error event"
        check(first.startswith(b"data: ") and ok, what)
        check(refused, f"{name}: new connections are refused")
        check(code == 0, f"{name}: the server exits 0 (got {code})")
        s.proc.wait()


def speculation(kiln, model, tmp):
    draft = os.path.join(tmp, "llama-tiny-q4_0.gguf")
    subprocess.run([kiln, "gen-model", "--arch", "llama", "--preset", "tiny", "--type", "q4_0", "-o", draft,
                    "--seed", "1"], check=True, capture_output=True)
    loop = [1] + [17, 42, 99, 7, 150] * 4  # repeats: prompt lookup finds matches
    want = {tuple(p): greedy_reference(kiln, model, tmp, 24, p) for p in (loop, PROMPT)}
    for label, extra in (("--spec ngram", ["--spec", "ngram"]), ("--draft", ["--draft", draft])):
        s = Server(kiln, model, extra + ["--draft-k", "3", "--draft-k-fixed", "--ctx", "256"])
        try:
            out = {}

            def ask(p):
                out[tuple(p)] = s.complete({"prompt": p, "max_tokens": 24, "temperature": 0,
                                            "return_token_ids": True})

            threads = [threading.Thread(target=ask, args=(p,)) for p in (loop, PROMPT)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for p, (st, r) in out.items():
                got = r["choices"][0]["token_ids"] if st == 200 else []
                whole = len(got) == 24 or (got and r["choices"][0]["finish_reason"] == "stop")
                check(whole and got == want[p][:len(got)],
                      f"{label}: greedy completion of {len(p)} tokens is kiln run's ({st})")
            m = s.metrics()
            made, kept = m.get("kiln_spec_draft_tokens_total", 0), m.get("kiln_spec_accepted_tokens_total", 0)
            rate = m.get("kiln_spec_acceptance_rate", -1)
            check(made > 0 and 0 < kept <= made and abs(rate - kept / made) < 1e-6,
                  f"{label}: /metrics counts {made:.0f} guesses, {kept:.0f} kept")
        finally:
            s.stop()


def tiny_llama(kiln, tmp):
    """The served model: a generated tiny llama, Q8_0, seed 1."""
    model = os.path.join(tmp, "llama-tiny.gguf")
    subprocess.run([kiln, "gen-model", "--arch", "llama", "--preset", "tiny", "--type", "q8_0", "-o", model,
                    "--seed", "1"], check=True, capture_output=True)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_llama(a.kiln, tmp)
        contract(a.kiln, model, tmp)
        small_pool(a.kiln, model)
        disconnect_and_queue(a.kiln, model)
        slow_clients(a.kiln, model)
        load(a.kiln, model, tmp)
        speculation(a.kiln, model, tmp)
        shutdown(a.kiln, model)
    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed")
    print("serve: ok")


if __name__ == "__main__":
    main()
