#!/usr/bin/env python3
"""Kiln lays out conversations as llama.cpp's llama_chat_apply_template does.

For every chat template family Kiln knows, by name, `kiln tokenize --chat
--template NAME --render` must give exactly llama.cpp's bytes
(llama-cpp-python's llama_chat_apply_template, given the same name) for
conversations with and without a system message, several turns, contents
padded with spaces and newlines, non-ASCII text, with and without the
assistant's turn opened. (A template's text is Jinja, rendered as
transformers renders it: chat_template_jinja.py tests that.) Exit code 77
(ctest's skip) without llama-cpp-python.

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
            cmd = [a.kiln, "tokenize", "--chat", path, "--template", template, "--render"] + \
                ([] if add else ["--no-generation-prompt"])
            r = subprocess.run(cmd, capture_output=True)
            return r.stdout if r.returncode == 0 else None, r.stderr.decode()

        for template in FAMILIES:
            wrong = 0
            for chat in CHATS:
                for add in (True, False):
                    want = llamacpp(llama_cpp, template, chat, add)
                    got, err = kiln(template, chat, add)
                    if got != want:
                        wrong += 1
                        if wrong == 1:
                            print(f"  {template} add={add}:\n    llama.cpp {want!r}\n    kiln      {got!r} {err.strip()}")
            bad += wrong > 0
            print(f"{'ok  ' if not wrong else 'FAIL'} {template:28s} {2 * len(CHATS) - wrong}/{2 * len(CHATS)} identical")
    if bad:
        raise SystemExit(f"{bad} case(s) failed")


if __name__ == "__main__":
    main()
