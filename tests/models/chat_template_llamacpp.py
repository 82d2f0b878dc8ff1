#!/usr/bin/env python3
"""Kiln lays out conversations as llama.cpp's llama_chat_apply_template does.

For every chat template family Kiln knows, named and as a template text
carrying the marks llama.cpp detects it by, `kiln tokenize --chat
--template ... --render` must give exactly llama.cpp's bytes
(llama-cpp-python's llama_chat_apply_template) for conversations with and
without a system message, several turns, contents padded with spaces and
newlines, non-ASCII text, with and without the assistant's turn opened.
Templates of families Kiln does not lay out, or of none, must be refused.
Exit code 77 (ctest's skip) without llama-cpp-python.

  chat_template_llamacpp.py --kiln build/tools/kiln
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

FAMILIES = ["chatml", "phi4", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1",
            "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "falcon3", "zephyr",
            "gemma", "command-r", "llama3", "llama4", "deepseek3", "granite", "gpt-oss"]
# Template texts as real ones carry the marks llama.cpp detects them by.
TEXTS = {
    "chatml": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
    "llama3": "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' }}",
    "llama2-sys": "{{ bos_token }}[INST] <<SYS>>\n{{ system }}\n<</SYS>>",
    "llama2-sys-strip": "[INST] <<SYS>>{{ message['content'].strip() }}",
    "mistral-v7": "[SYSTEM_PROMPT]{{ sys }}[/SYSTEM_PROMPT][INST]",
    "gemma": "<start_of_turn>{{ role }}\n{{ message['content'] | trim }}<end_of_turn>\n",
    "phi3": "<|user|>\n{{ c }}<|end|>\n<|assistant|>\n",
    "gpt-oss": "<|start|>{{ role }}<|channel|>final<|message|>",
    "command-r": "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
    "llama4": "<|header_start|>{{ role }}<|header_end|>",
}
UNSUPPORTED = ["{{ '[gMASK]<sop>' }}", "GPT4 Correct User: {{ c }}", "no marks at all {{ messages }}"]
CHATS = [
    [("user", "Hello")],
    [("system", " Be brief. "), ("user", "Hi there"), ("assistant", " Hello! "), ("user", "2+2?")],
    [("user", "\n padded \n"), ("assistant", "Stra\u00dfe \u6771\u4eac"), ("user", "tabs\tand  spaces ")],
    [("system", "sys"), ("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")],
]


def llamacpp(llama_cpp, tmpl, chat, add):
    arr = (llama_cpp.llama_chat_message * len(chat))(
        *[llama_cpp.llama_chat_message(role=r.encode(), content=c.encode()) for r, c in chat])
    buf = ctypes.create_string_buffer(1 << 16)
    n = llama_cpp.llama_chat_apply_template(tmpl.encode(), arr, len(chat), add, buf, len(buf))
    return buf.raw[:n] if n >= 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    a = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        print("skipped: llama-cpp-python is not installed")
        sys.exit(77)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        def kiln(template, chat, add):
            path = os.path.join(tmp, "chat.json")
            with open(path, "w") as f:
                json.dump([{"role": r, "content": c} for r, c in chat], f)
            if template not in FAMILIES:
                with open(os.path.join(tmp, "template.jinja"), "w") as f:
                    f.write(template)
                template = os.path.join(tmp, "template.jinja")
            cmd = [a.kiln, "tokenize", "--chat", path, "--template", template, "--render"] + \
                ([] if add else ["--no-generation-prompt"])
            r = subprocess.run(cmd, capture_output=True)
            return r.stdout if r.returncode == 0 else None, r.stderr.decode()

        cases = [(f, f) for f in FAMILIES] + [(f"{fam} (detected)", text) for fam, text in TEXTS.items()]
        for label, template in cases:
            wrong = 0
            for chat in CHATS:
                for add in (True, False):
                    want = llamacpp(llama_cpp, template, chat, add)
                    got, err = kiln(template, chat, add)
                    if got != want:
                        wrong += 1
                        if wrong == 1:
                            print(f"  {label} add={add}:\n    llama.cpp {want!r}\n    kiln      {got!r} {err.strip()}")
            bad += wrong > 0
            print(f"{'ok  ' if not wrong else 'FAIL'} {label:28s} {2 * len(CHATS) - wrong}/{2 * len(CHATS)} identical")
        for template in UNSUPPORTED:
            got, err = kiln(template, CHATS[0], True)
            ok = got is None and "Kiln lays out" in err
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} refused: {template[:30]!r}")
    if bad:
        raise SystemExit(f"{bad} case(s) failed")


if __name__ == "__main__":
    main()
