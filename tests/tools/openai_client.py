#!/usr/bin/env python3
"""`kiln serve` driven by the official `openai` Python client, as users do.

Against a generated llama served with pages of 16 tokens, with
`kiln run --logits-out` (the single-sequence forward) as the reference:
- completions `logprobs`: greedy tokens are kiln run's argmax; each token's
  logprob and its alternatives are the log-softmax of kiln run's logits
  (float64 here; within 2e-3: the serving and single-sequence kernels
  round differently);
- `echo` with `max_tokens: 0` scores the prompt: the first token null, the
  others kiln run's; `echo` with tokens prepends the prompt's text;
- `n` > 1: greedy choices over a prompt that ends inside a page (shared,
  then copied on write) all give kiln run's tokens; sampled choices i are
  the server's own n = 1 completions with seed + i, and differ;
- a list of prompts (strings and token lists) gives n choices each, in
  prompt order;
- streaming with n and logprobs: each index's chunks make that choice's
  text and logprobs of the whole response;
- chat `logprobs` + `top_logprobs` with `n` and `max_completion_tokens`,
  whole and streamed (`bytes` the token's bytes);
- embeddings: kiln run --embd-out's final hidden states mean-pooled to
  unit length, float and base64, strings as their tokens;
- structured output: json_schema replies over five schemas (nested,
  enums, formats, recursive $ref, anyOf), many seeds at temperature 1 and
  n = 4, each parsing and validating with jsonschema; json_object, whole
  even when cut at max_tokens;
  llama-server's GBNF grammar; 422s naming the field for a bad grammar
  (its line) or a schema keyword outside the subset;
- tools over Qwen 2.5's real template: a conversation with tool calls and
  tool results renders as Python's jinja2 renders it (as transformers);
  tool_choice "required" gives one call whose arguments validate against
  the function's schema, and a named tool_choice streams delta.tool_calls
  that make the whole response's calls;
- the 4xx the client raises: best_of, suffix, top_logprobs 21, n above the
  server's --max-n, top_logprobs without logprobs, dimensions, tools with a
  hand-written layout, a tool_choice naming no listed function.
Exit code 77 (ctest's skip) without the openai package.

  openai_client.py --kiln build/tools/kiln
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

try:
    import openai
except ImportError:
    print("skipped: the openai package is not installed (tools/setup-debian.sh --test)")
    sys.exit(77)

# The server's process, its log and check() are serve_api.py's.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_api  # noqa: E402
from serve_api import check, failures  # noqa: E402

TOL = 2e-3


class Server(serve_api.Server):
    """kiln serve with the official client on it."""

    def __init__(self, kiln, model, extra):
        super().__init__(kiln, model, extra)
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="none",
                                    max_retries=0, timeout=120)


def reference(kiln, model, tmp, tokens, n):
    """kiln run's log-softmax rows (float64) for `tokens` then n greedy
    tokens, and those tokens."""
    out = os.path.join(tmp, "ref.npy")
    subprocess.run([kiln, "run", "-m", model, "--tokens", ",".join(map(str, tokens)), "-n", str(n),
                    "--temp", "0", "--logits-out", out], check=True, capture_output=True)
    rows = np.load(out).astype(np.float64)
    rows = rows - rows.max(-1, keepdims=True)
    rows = rows - np.log(np.exp(rows).sum(-1, keepdims=True))
    greedy = [int(i) for i in rows[len(tokens) - 1:].argmax(-1)]
    return rows, greedy


def close(a, b):
    return a is not None and abs(a - b) <= TOL


def completions(c, kiln, model, tmp):
    prompt = [1, 72, 101, 108, 108, 111]  # ends inside the first page of 16
    rows, want = reference(kiln, model, tmp, prompt, 8)
    r = c.completions.create(model="m", prompt=prompt, max_tokens=8, temperature=0, logprobs=3,
                             extra_body={"return_token_ids": True})
    ch = r.choices[0]
    got = ch.token_ids
    lp = ch.logprobs
    check(got == want[:len(got)] and len(got) > 0, f"completions: greedy tokens are kiln run's ({len(got)})")
    ok = len(lp.token_logprobs) == len(got)
    for i, t in enumerate(got):
        row = rows[len(prompt) - 1 + i]
        top = sorted(lp.top_logprobs[i].values(), reverse=True)
        ok = ok and close(lp.token_logprobs[i], row[t]) and len(top) <= 3
        ok = ok and all(close(v, w) for v, w in zip(top, np.sort(row)[::-1][:len(top)]))
    check(ok, "completions logprobs: each token's and its 3 alternatives' are kiln run's log-softmax")
    check(lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0,
          "completions logprobs: text_offset starts at 0 and never goes back")

    r = c.completions.create(model="m", prompt=prompt, max_tokens=0, echo=True, logprobs=1)
    lp = r.choices[0].logprobs
    scores = lp.token_logprobs
    check(len(scores) == len(prompt) and scores[0] is None and lp.top_logprobs[0] is None and
          all(close(scores[i], rows[i - 1][prompt[i]]) for i in range(1, len(prompt))) and
          r.usage.completion_tokens == 0,
          "echo with max_tokens 0: the prompt scored, first token null, the rest kiln run's")
    plain = c.completions.create(model="m", prompt=prompt, max_tokens=4, temperature=0)
    echoed = c.completions.create(model="m", prompt=prompt, max_tokens=4, temperature=0, echo=True)
    check(echoed.choices[0].text.endswith(plain.choices[0].text) and
          len(echoed.choices[0].text) > len(plain.choices[0].text), "echo: the prompt's text leads the choice's")

    # A prompt past one page: a full page shared through the prefix cache
    # path, and a partial one copied on write by each choice.
    long_prompt = [1] + [72 + i % 40 for i in range(21)]
    _, long_want = reference(kiln, model, tmp, long_prompt, 6)
    for p, w in ((prompt, want), (long_prompt, long_want)):
        r = c.completions.create(model="m", prompt=p, max_tokens=6, temperature=0, n=3,
                                 extra_body={"return_token_ids": True})
        outs = [ch.token_ids for ch in sorted(r.choices, key=lambda x: x.index)]
        check([ch.index for ch in r.choices] == [0, 1, 2] and all(o == w[:len(o)] and o for o in outs),
              f"n 3, greedy, a {len(p)}-token prompt: every choice is kiln run's tokens (pages shared, copied on write)")

    r = c.completions.create(model="m", prompt=prompt, max_tokens=8, temperature=1, n=3, seed=11,
                             extra_body={"return_token_ids": True})
    outs = [ch.token_ids for ch in sorted(r.choices, key=lambda x: x.index)]
    alone = [c.completions.create(model="m", prompt=prompt, max_tokens=8, temperature=1, seed=11 + i,
                                  extra_body={"return_token_ids": True}).choices[0].token_ids for i in range(3)]
    check(outs == alone and len({tuple(o) for o in outs}) > 1,
          "n 3 sampled: choice i is the n = 1 completion with seed + i, and the choices differ")
    check(r.usage.prompt_tokens == len(prompt) and r.usage.completion_tokens == sum(map(len, outs)),
          "n 3: usage counts the prompt once and every choice's tokens")

    texts = ["Hello", "The sky"]
    r = c.completions.create(model="m", prompt=[texts[0], [1, 84, 104, 101], texts[1]], max_tokens=4,
                             temperature=0, n=2, extra_body={"return_token_ids": True})
    choices = sorted(r.choices, key=lambda x: x.index)
    ok = [ch.index for ch in choices] == list(range(6))
    for i, ch in enumerate(choices):
        _, w = reference(kiln, model, tmp, ch.prompt_token_ids, 4)
        ok = ok and ch.token_ids == w[:len(ch.token_ids)] and ch.token_ids
    ok = ok and choices[2].prompt_token_ids == [1, 84, 104, 101]
    check(ok, "a list of 3 prompts (strings and ids), n 2: 6 choices in prompt order, each kiln run's greedy tokens")

    whole = c.completions.create(model="m", prompt=prompt, max_tokens=8, temperature=0, n=2, logprobs=2)
    text, scores = {0: "", 1: ""}, {0: [], 1: []}
    for chunk in c.completions.create(model="m", prompt=prompt, max_tokens=8, temperature=0, n=2, logprobs=2,
                                      stream=True):
        for ch in chunk.choices:
            text[ch.index] += ch.text
            if ch.logprobs:
                scores[ch.index] += ch.logprobs.token_logprobs
    check(all(text[i] == whole.choices[i].text and scores[i] == whole.choices[i].logprobs.token_logprobs
              for i in (0, 1)), "stream, n 2, logprobs 2: each index's chunks make its whole choice")


def chat(c, kiln, model, tmp):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    r = c.chat.completions.create(model="m", messages=msgs, max_completion_tokens=5, temperature=0, n=2,
                                  logprobs=True, top_logprobs=2, extra_body={"return_token_ids": True})
    rows, want = reference(kiln, model, tmp, r.choices[0].prompt_token_ids, 5)
    ok = len(r.choices) == 2
    for ch in r.choices:
        content = ch.logprobs.content
        ok = ok and ch.token_ids == want[:len(ch.token_ids)] and len(content) == len(ch.token_ids)
        for i, (t, e) in enumerate(zip(ch.token_ids, content)):
            row = rows[len(ch.prompt_token_ids) - 1 + i]
            ok = ok and close(e.logprob, row[t]) and len(e.top_logprobs) == 2
            ok = ok and all(close(a.logprob, b) for a, b in zip(e.top_logprobs, np.sort(row)[::-1]))
            ok = ok and isinstance(e.bytes, list) and all(0 <= b < 256 for b in e.bytes)
    check(ok, "chat logprobs, top_logprobs 2, n 2: greedy tokens and scores are kiln run's")
    whole = r.choices[0]
    text, content = "", []
    for chunk in c.chat.completions.create(model="m", messages=msgs, max_completion_tokens=5, temperature=0,
                                           logprobs=True, top_logprobs=2, stream=True):
        for ch in chunk.choices:
            text += ch.delta.content or ""
            if ch.logprobs and ch.logprobs.content:
                content += [e.logprob for e in ch.logprobs.content]
    check(text == whole.message.content and content == [e.logprob for e in whole.logprobs.content],
          "chat stream with logprobs: the deltas make the message and its logprobs")


def embeddings(c, kiln, model, tmp):
    """/v1/embeddings: each input's final hidden states (kiln run
    --embd-out) mean-pooled and scaled to unit length; strings as their
    tokens; base64 (the client's default) as floats; dimensions refused."""
    inputs = [[1, 72, 101, 108, 108, 111], [1, 84, 104, 101, 32, 115, 107, 121, 32, 105, 115]]
    want = []
    for ids in inputs:
        out = os.path.join(tmp, "embd.npy")
        subprocess.run([kiln, "run", "-m", model, "--tokens", ",".join(map(str, ids)), "-n", "1",
                        "--embd-out", out], check=True, capture_output=True)
        v = np.load(out).astype(np.float64).mean(0)
        want.append(v / np.linalg.norm(v))
    r = c.embeddings.create(model="m", input=inputs, encoding_format="float")
    got = [np.array(d.embedding) for d in sorted(r.data, key=lambda d: d.index)]
    check(len(got) == 2 and all(g.shape == w.shape and np.abs(g - w).max() < TOL for g, w in zip(got, want)) and
          r.usage.prompt_tokens == sum(map(len, inputs)),
          "embeddings: kiln run's final hidden states, mean-pooled, unit length (float)")
    b64 = c.embeddings.create(model="m", input=inputs)  # the client asks base64 and decodes it
    check(all(np.array(d.embedding, dtype=np.float32).tobytes() == np.array(g, dtype=np.float32).tobytes()
              for d, g in zip(sorted(b64.data, key=lambda d: d.index), got)), "embeddings: base64 = float")
    text = subprocess.run([kiln, "tokenize", "-m", model, "-p", "Hello"], check=True, capture_output=True,
                          text=True).stdout.split()
    one = c.embeddings.create(model="m", input="Hello", encoding_format="float").data[0].embedding
    ids = c.embeddings.create(model="m", input=[int(t) for t in text], encoding_format="float").data[0].embedding
    check(one == ids, "embeddings: a string is its tokens")


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                   "required": ["city"], "additionalProperties": False}}}]


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 120}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "minItems": 1, "maxItems": 4},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                      "day": {"type": "string", "format": "date"},
                                      "ok": {"type": "boolean"}, "score": {"type": "number"}},
     "required": ["id", "day", "ok"], "additionalProperties": False},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                                                  "maxItems": 2}},
                        "required": ["v"], "additionalProperties": False}},
     "$ref": "#/$defs/node"},
    {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 2, "maxLength": 5},
               {"type": "object", "properties": {"k": {"const": 7}}, "required": ["k"],
                "additionalProperties": False}]},
]


def structured(c):
    """response_format json_schema: every choice of many seeds at
    temperature 1 parses and validates (jsonschema, formats checked);
    json_object gives an object; llama-server's GBNF `grammar` gives its
    language; malformed grammars and schemas are 422s naming the field."""
    import jsonschema
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for i, schema in enumerate(SCHEMAS):
        texts, bad = [], []
        for seed in (0, 10, 20):
            r = c.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Answer in JSON."}], temperature=1, seed=seed,
                n=4, max_tokens=250,
                response_format={"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema,
                                                                        "strict": True}})
            for ch in r.choices:
                texts.append(ch.message.content)
                try:
                    jsonschema.validate(json.loads(ch.message.content), schema, format_checker=checker)
                except Exception as e:  # noqa: BLE001 - any failure is the finding
                    bad.append(f"{ch.finish_reason}: {ch.message.content!r}: {e}")
        check(not bad and len(set(texts)) > 1,
              f"json_schema {i}: {len(texts)} sampled replies parse and validate, {len(set(texts))} distinct"
              + (f"; first bad: {bad[0][:300]}" if bad else ""))
    # An open-ended object closes within max_tokens: past the point where
    # fewer tokens are left than bytes it needs, only its shortest
    # completion is sampled; so a reply cut by the limit parses too.
    objects, tokens = 0, {}
    for max_tokens in (12, 30, 250):
        r = c.completions.create(model="m", prompt="JSON:", temperature=1, seed=5, n=4,
                                 max_tokens=max_tokens,
                                 extra_body={"response_format": {"type": "json_object"}})
        tokens[max_tokens] = r.usage.completion_tokens
        for ch in r.choices:
            try:
                objects += isinstance(json.loads(ch.text), dict)
            except ValueError:
                pass
    check(objects == 12 and tokens[12] <= 48 and tokens[250] > tokens[12],
          f"json_object: {objects} of 12 replies are objects (completion tokens {tokens})")
    gbnf = 'root ::= "id-" [0-9]{2,4} ("," [a-c]+)?'
    r = c.completions.create(model="m", prompt="x", temperature=1, seed=2, n=4, max_tokens=50,
                             extra_body={"grammar": gbnf})
    check(all(re.fullmatch(r"id-[0-9]{2,4}(,[a-c]+)?", ch.text) for ch in r.choices),
          f"grammar: every reply is in the GBNF's language ({[ch.text for ch in r.choices]})")
    for body, param, what in (({"grammar": 'root ::= "a" |\nb ::= [0-9'}, "grammar", "line 2"),
                              ({"response_format": {"type": "json_schema", "json_schema": {
                                  "name": "x", "schema": {"type": "string", "pattern": "(?=a)"}}}},
                               "response_format", "pattern"),
                              ({"response_format": {"type": "json_schema", "json_schema": {
                                  "name": "x", "schema": {"type": "object", "propertyNames": {}}}}},
                               "response_format", "propertyNames")):
        try:
            c.completions.create(model="m", prompt="x", extra_body=body)
            check(False, f"422 naming '{param}' ({what})")
        except openai.UnprocessableEntityError as e:
            check(e.body.get("param") == param and what in e.body.get("message", ""),
                  f"422 naming '{param}' ({what}): {e.body.get('message')}")


def tools_chat(kiln, model, tmp):
    """Chats with tools over a real template (Qwen 2.5's, Hermes syntax):
    the prompt of a conversation holding tool calls and tool results is the
    text Python's jinja2 renders (as transformers) tokenized as llama.cpp
    does; tool_choice naming an unknown function is refused."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "models"))
    from chat_template_jinja import transformers_env
    template = os.path.join(here, "..", "data", "chat_templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
    s = Server(kiln, model, ["--ctx", "1024", "--chat-template", template])
    try:
        c = s.client
        msgs = [{"role": "system", "content": "Use tools."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "abc123xyz", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'}}]},
                {"role": "tool", "tool_call_id": "abc123xyz", "content": "sunny, 24 C"}]
        r = c.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=2, temperature=0,
                                      extra_body={"return_token_ids": True})
        # transformers passes tool-call arguments to the template as objects.
        want_msgs = json.loads(json.dumps(msgs))
        want_msgs[2]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris", "days": 2}
        text = transformers_env().from_string(open(template).read()).render(
            messages=want_msgs, tools=TOOLS, add_generation_prompt=True, bos_token="", eos_token="")
        try:
            import llama_cpp
            vocab = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
            want = vocab.tokenize(text.encode(), add_bos=True, special=True)
            check(r.choices[0].prompt_token_ids == want,
                  f"tools: the prompt is Qwen 2.5's template rendered by jinja2, tokenized as llama.cpp ({len(want)} tokens)")
        except ImportError:
            print("skipped: llama-cpp-python is not installed (the tools prompt's tokens are not compared)")
        # Forced calls: every reply a call of a listed function whose
        # arguments validate; a stream's deltas make the same calls.
        import jsonschema
        schema = TOOLS[0]["function"]["parameters"]
        bad, calls = [], 0
        for seed in range(4):
            r = c.chat.completions.create(model="m", messages=msgs[:2], tools=TOOLS, tool_choice="required",
                                          temperature=1, seed=seed, max_tokens=400, parallel_tool_calls=False)
            ch = r.choices[0]
            for call in ch.message.tool_calls or []:
                calls += 1
                try:
                    assert call.function.name == "get_weather" and len(call.id) == 9
                    jsonschema.validate(json.loads(call.function.arguments), schema)
                except Exception as e:  # noqa: BLE001
                    bad.append(f"{call.function}: {e}")
            if ch.finish_reason != "tool_calls" or len(ch.message.tool_calls or []) != 1:
                bad.append(f"finish {ch.finish_reason}, {ch.message}")
        check(not bad and calls == 4, f"tool_choice required: 4 replies each one call whose arguments validate"
              + (f"; {bad[0][:300]}" if bad else ""))
        whole = c.chat.completions.create(model="m", messages=msgs[:2], tools=TOOLS, temperature=1, seed=9,
                                          max_tokens=400, tool_choice={"type": "function",
                                                                       "function": {"name": "get_weather"}})
        names, args, finish = {}, {}, None
        for chunk in c.chat.completions.create(model="m", messages=msgs[:2], tools=TOOLS, temperature=1, seed=9,
                                               max_tokens=400, stream=True,
                                               tool_choice={"type": "function", "function": {"name": "get_weather"}}):
            for ch in chunk.choices:
                finish = ch.finish_reason or finish
                for d in ch.delta.tool_calls or []:
                    if d.function and d.function.name:
                        names[d.index] = d.function.name
                    args[d.index] = args.get(d.index, "") + ((d.function and d.function.arguments) or "")
        want = [(t.function.name, t.function.arguments) for t in whole.choices[0].message.tool_calls or []]
        check(want and [(names[i], args[i]) for i in sorted(names)] == want and finish == "tool_calls",
              f"a named tool_choice streamed: delta.tool_calls make the whole response's {len(want)} call(s)")
        try:
            c.chat.completions.create(model="m", messages=msgs[:2], tools=TOOLS,
                                      tool_choice={"type": "function", "function": {"name": "nope"}})
            check(False, "422 naming 'tool_choice' for an unknown function")
        except openai.UnprocessableEntityError as e:
            check(e.body.get("param") == "tool_choice" and "nope" in e.body.get("message", ""),
                  "422 naming 'tool_choice' for an unknown function")
    finally:
        s.stop()


def errors(c):
    msgs = [{"role": "user", "content": "x"}]
    cases = [("best_of", lambda: c.completions.create(model="m", prompt="x", best_of=2)),
             ("suffix", lambda: c.completions.create(model="m", prompt="x", suffix="y")),
             ("n", lambda: c.completions.create(model="m", prompt="x", n=7)),
             ("top_logprobs", lambda: c.chat.completions.create(model="m", messages=msgs, logprobs=True,
                                                                top_logprobs=21)),
             ("top_logprobs", lambda: c.chat.completions.create(model="m", messages=msgs, top_logprobs=2)),
             ("dimensions", lambda: c.embeddings.create(model="m", input="x", dimensions=8)),
             ("tools", lambda: c.chat.completions.create(model="m", messages=msgs, tools=TOOLS))]
    for param, call in cases:
        try:
            call()
            check(False, f"422 naming '{param}'")
        except openai.UnprocessableEntityError as e:
            check(e.body.get("param") == param and param in e.body.get("message", ""), f"422 naming '{param}'")
    r = c.completions.create(model="m", prompt="x", max_tokens=1)
    check(len(r.choices) == 1, "the server keeps serving after the errors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = serve_api.tiny_llama(a.kiln, tmp)
        s = Server(a.kiln, model, ["--ctx", "256", "--kv-page", "16", "--max-batch", "8", "--max-n", "6"])
        try:
            completions(s.client, a.kiln, model, tmp)
            chat(s.client, a.kiln, model, tmp)
            embeddings(s.client, a.kiln, model, tmp)
            structured(s.client)
            errors(s.client)
        finally:
            s.stop()
        tools_chat(a.kiln, model, tmp)
    if failures:
        raise SystemExit(f"{len(failures)} check(s) failed")
    print("openai client: ok")


if __name__ == "__main__":
    main()
