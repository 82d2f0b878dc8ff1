#!/usr/bin/env python3
"""Kiln renders real chat templates byte for byte as Hugging Face transformers does.

For every template under tests/data/chat_templates/ (Llama 3.x, Qwen 2.5/3,
Gemma 3, Mistral with tools, Phi-3/4, DeepSeek V3/R1, GPT-OSS, Granite,
SmolLM3, ...), many seeded random conversations (system/user/assistant
turns, assistant tool calls, tool results, tool lists with JSON schemas,
non-ASCII and whitespace-padded contents, add_generation_prompt on and off,
enable_thinking and similar switches) are rendered by Python's jinja2,
configured exactly as transformers' apply_chat_template configures it, and
by `kiln tokenize --chat MESSAGES.json --template FILE --render`; the texts
must be identical. A conversation the template refuses with
raise_exception must make Kiln fail with the template's message; one
Python's jinja2 fails on otherwise must make Kiln fail too.

  chat_template_jinja.py --kiln build/tools/kiln
  chat_template_jinja.py --render-cmd "/tmp/driver"   # any command taking
                                                       # kiln tokenize's options
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "..", "data", "chat_templates")
NOW = datetime(2024, 7, 26, 10, 30, 0)  # strftime_now's clock on both sides


def transformers_env():
    """jinja2 as transformers' _compile_jinja_template sets it up."""
    import jinja2
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class AssistantTracker(Extension):
        # transformers' {% generation %} tag: renders its body (the index
        # tracking it adds does not change the text).
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

        def _generation_support(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return NOW.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


TEXTS = [
    "Hello", "Hi there!", "What's the weather in Paris?", "  padded with spaces  ", "\n\nleading newlines",
    "trailing newline\n", "Stra\u00dfe und \u00c4pfel", "\u6771\u4eac\u306f\u6674\u308c", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440",
    "emoji \U0001F642 and \u00e9", "quotes ' and \" and \\ backslash", "tabs\tand\tmore", "a\u3000ideographic space\u3000",
    "json {\"a\": 1, \"b\": [true, null]}", "<think>\nreasoning here\n</think>\n\nThe answer is 4.",
    "multi\nline\ntext", "", "x" * 50, "<tool_response>\nok\n</tool_response>", "2+2?", "Ne\u00f1and\u00fa \u00bfqu\u00e9?",
    "/no_think please be brief", "The <|im_start|> literal", "non-breaking\u00a0space", "{{ not a template }}",
]
NAMES = ["get_weather", "search", "calculate", "lookup_user", "send_email"]


def rand_args(r):
    pool = [
        lambda: r.choice(["Paris", "\u6771\u4eac", "New York", "caf\u00e9", "a \"quoted\" word", "line\nbreak"]),
        lambda: r.randint(-1000, 100000),
        lambda: r.choice([0.1, 1.0, 2.5, -3.75, 1e-05, 123456.789, 1e20, 0.0]),
        lambda: r.choice([True, False, None]),
        lambda: [r.randint(0, 9) for _ in range(r.randint(0, 3))],
        lambda: {"nested": r.choice(["x", 1, 2.0]), "list": ["a", "b"]},
    ]
    return {k: r.choice(pool)() for k in r.sample(["location", "unit", "count", "query", "ratio", "flag", "ids", "opts"],
                                                     r.randint(0, 4))}


def rand_tool(r):
    name = r.choice(NAMES)
    props = {}
    for p in r.sample(["location", "unit", "count", "query", "tags", "ratio", "mode"], r.randint(0, 4)):
        kind = r.choice(["string", "integer", "number", "boolean", "array", "enum", "object"])
        if kind == "enum":
            spec = {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The unit"}
        elif kind == "array":
            spec = {"type": "array", "items": {"type": r.choice(["string", "integer", "object"])}, "description": "A list"}
        elif kind == "object":
            spec = {"type": "object", "properties": {"x": {"type": "number"}}, "description": "Nested \u00e9"}
        else:
            spec = {"type": kind, "description": r.choice(["The city, e.g. Paris", "How many", "Search text \u6771", "A ratio"])}
        if r.random() < 0.2:
            spec["default"] = r.choice([1, "celsius", 0.5, True])
        if r.random() < 0.1:
            spec["nullable"] = True
        props[p] = spec
    params = {"type": "object", "properties": props}
    if props and r.random() < 0.7:
        params["required"] = r.sample(sorted(props), r.randint(1, len(props)))
    return {"type": "function", "function": {"name": name, "description": f"Use {name} to do things.", "parameters": params}}


def rand_id(r):
    n = 9 if r.random() < 0.9 else r.choice([5, 12])
    return "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789") for _ in range(n))


def rand_conversation(r):
    plain = r.random() < 0.3  # a chat without tool calls: one every template accepts
    msgs = []
    if r.random() < 0.5:
        msgs.append({"role": "system", "content": r.choice(TEXTS[:12] + ["You are a helpful assistant.", "/think"])})
    turns = r.randint(1, 4)
    for t in range(turns):
        msgs.append({"role": "user", "content": r.choice(TEXTS)})
        if t == turns - 1 and r.random() < 0.6:
            break  # end on the user's turn
        if not plain and r.random() < 0.35:
            calls = []
            for _ in range(1 if r.random() < 0.7 else 2):
                args = rand_args(r)
                call = {"id": rand_id(r), "type": "function",
                        "function": {"name": r.choice(NAMES),
                                     "arguments": args if r.random() < 0.7 else json.dumps(args, ensure_ascii=False)}}
                calls.append(call)
            m = {"role": "assistant", "content": r.choice(["", "Let me check.", None]) if r.random() < 0.8 else "calling"}
            if m["content"] is None and r.random() < 0.5:
                m["content"] = ""
            m["tool_calls"] = calls
            msgs.append(m)
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                             "content": r.choice(["22 degrees", "{\"temp\": 22.5, \"sky\": \"clear\"}", "\u6674\u308c", "error: not found"])})
            if r.random() < 0.7:
                msgs.append({"role": "assistant", "content": r.choice(TEXTS)})
        else:
            m = {"role": "assistant", "content": r.choice(TEXTS)}
            if r.random() < 0.15:
                m["reasoning_content"] = "thinking about " + r.choice(TEXTS[:6])
            if r.random() < 0.1:
                m["thinking"] = "let me think"
            msgs.append(m)
    if not plain and r.random() < 0.05:
        msgs.append({"role": "moderator", "content": "an unexpected role"})
    tools = [rand_tool(r) for _ in range(r.randint(1, 3))] if r.random() < 0.45 else None
    extra = {}
    for key, values in (("enable_thinking", [True, False]), ("thinking", [True, False]),
                        ("reasoning_effort", ["low", "high"]), ("tools_in_user_message", [False]),
                        ("date_string", ["01 Jan 2025"]), ("builtin_tools", [["browser", "python"]]),
                        ("controls", [{"citations": True}]), ("model_identity", ["You are Kiln."])):
        if r.random() < (0.4 if key in ("enable_thinking", "thinking") else 0.08):
            extra[key] = r.choice(values)
    return msgs, tools, r.random() < 0.7, extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", help="the kiln binary (runs `kiln tokenize`)")
    ap.add_argument("--render-cmd", help="a command taking kiln tokenize's options instead of KILN tokenize")
    ap.add_argument("--conversations", type=int, default=60, help="random conversations per template")
    ap.add_argument("--seed", type=int, default=65)
    ap.add_argument("--only", help="only templates whose file name contains this")
    a = ap.parse_args()
    if not a.kiln and not a.render_cmd:
        ap.error("give --kiln or --render-cmd")
    try:
        import jinja2
    except ImportError:
        print("skipped: jinja2 is not installed")
        sys.exit(77)
    env = transformers_env()
    cmd = shlex.split(a.render_cmd) if a.render_cmd else [a.kiln, "tokenize"]
    bad = total = 0
    files = sorted(f for f in os.listdir(TEMPLATES) if f.endswith(".jinja") and (not a.only or a.only in f))
    with tempfile.TemporaryDirectory() as tmp:
        chat_path, tools_path = os.path.join(tmp, "chat.json"), os.path.join(tmp, "tools.json")
        for name in files:
            path = os.path.join(TEMPLATES, name)
            with open(path, encoding="utf-8") as f:
                template = env.from_string(f.read())
            r = random.Random(f"{a.seed}:{name}")
            ok = refused = 0
            shown = 0
            for i in range(a.conversations):
                msgs, tools, add, extra = rand_conversation(r)
                bos, eos = r.choice([("<s>", "</s>"), ("<|begin_of_text|>", "<|eot_id|>"), ("", "")])
                ctx = {"messages": msgs, "tools": tools, "documents": None, "add_generation_prompt": add,
                       "bos_token": bos, "eos_token": eos, **extra}
                want, want_err, raised = None, None, False
                try:
                    want = template.render(**ctx)
                except jinja2.exceptions.TemplateError as e:
                    want_err, raised = str(e), type(e) is jinja2.exceptions.TemplateError
                except Exception as e:  # a template bug Python hits (TypeError, ...)
                    want_err = f"{type(e).__name__}: {e}"
                with open(chat_path, "w", encoding="utf-8") as f:
                    json.dump(msgs, f, ensure_ascii=False)
                args = cmd + ["--chat", chat_path, "--template", path, "--render", "--bos", bos, "--eos", eos,
                              "--now", NOW.strftime("%Y-%m-%d %H:%M:%S")]
                if tools is not None:
                    with open(tools_path, "w", encoding="utf-8") as f:
                        json.dump(tools, f, ensure_ascii=False)
                    args += ["--tools", tools_path]
                if not add:
                    args.append("--no-generation-prompt")
                if extra:
                    args += ["--template-kwargs", json.dumps(extra, ensure_ascii=False)]
                res = subprocess.run(args, capture_output=True)
                got, err = res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace").strip()
                if want_err is None:
                    good = res.returncode == 0 and got == want
                else:
                    refused += 1
                    good = res.returncode != 0 and (not raised or want_err in err)
                total += 1
                if good:
                    ok += 1
                    continue
                if shown < 2:
                    shown += 1
                    print(f"  {name} conversation {i}: {json.dumps(ctx, ensure_ascii=False)[:600]}")
                    if want_err is None:
                        print(f"    python {want!r}\n    kiln   {got!r} {err}")
                    else:
                        print(f"    python refused: {want_err}\n    kiln   rc={res.returncode} {got[:200]!r} {err}")
            bad += ok != a.conversations
            print(f"{'ok  ' if ok == a.conversations else 'FAIL'} {name:55s} {ok}/{a.conversations} identical "
                  f"({refused} refused by the template)")
    print(f"{len(files)} templates x {a.conversations} conversations: {total} renders")
    if bad:
        raise SystemExit(f"{bad} template(s) differ from Python's jinja2")


if __name__ == "__main__":
    main()
