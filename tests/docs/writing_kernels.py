#!/usr/bin/env python3
"""Runs every code block of docs/writing-kernels.md, so the page never rots.

Blocks after a `<!-- file: NAME -->` line are concatenated, in order, into
that file of one project; Kiln is installed to a fresh prefix; the `sh`
blocks run in order in the project's folder with the installed kiln on PATH
(any failing command fails the test); the `python` blocks run in order as one
script against the build tree's package. A block fenced as `sh skip` (the
install commands, which this test performs itself into a temporary prefix)
is the only kind left out.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<info>[^\n]*)\n(?P<body>.*?)```\n", re.S)


def blocks(text):
    for m in FENCE.finditer(text):
        info = m.group("info").split()
        yield (info[0] if info else ""), info[1:], m.group("file"), m.group("body")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    a = ap.parse_args()
    a.build_dir, a.source_dir = os.path.abspath(a.build_dir), os.path.abspath(a.source_dir)
    page = os.path.join(a.source_dir, "docs", "writing-kernels.md")
    files, shell, python = {}, [], []
    for lang, flags, name, body in blocks(open(page).read()):
        if "skip" in flags:
            continue
        if name:
            files.setdefault(name, []).append(body)
        elif lang == "sh":
            shell.append(body)
        elif lang == "python":
            python.append(body)
        else:
            sys.exit(f"FAILED: a {lang or 'plain'} block with no file name and no way to run it:\n{body}")
    if not files or not shell or not python:
        sys.exit("FAILED: the page lost its C++, shell or Python blocks")

    tmp = tempfile.mkdtemp(prefix="kiln-docs-")
    prefix = os.path.join(tmp, "prefix")
    subprocess.run(["cmake", "--install", a.build_dir, "--prefix", prefix], check=True, capture_output=True)
    project = os.path.join(tmp, "project")
    os.makedirs(project)
    for name, parts in files.items():
        with open(os.path.join(project, name), "w") as f:
            f.write("\n".join(parts))
    env = dict(os.environ, PATH=os.path.join(prefix, "bin") + os.pathsep + os.environ["PATH"],
               KILN_PREFIX=prefix, KILN_CACHE_DIR=os.path.join(tmp, "cache"),
               PYTHONPATH=os.path.join(a.build_dir, "python"))
    for i, body in enumerate(shell):
        p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=project, env=env, capture_output=True,
                           text=True)
        print(p.stdout, end="")
        if p.returncode != 0:
            sys.exit(f"FAILED: shell block {i + 1} exited {p.returncode}:\n{body}\n{p.stdout}{p.stderr}")
    script = os.path.join(tmp, "page.py")
    with open(script, "w") as f:
        f.write("\n".join(python))
    p = subprocess.run([sys.executable, script], cwd=tmp, env=env, capture_output=True, text=True)
    print(p.stdout, end="")
    if p.returncode != 0:
        sys.exit(f"FAILED: the Python blocks:\n{p.stdout}{p.stderr}")
    print(f"docs/writing-kernels.md: {sum(len(v) for v in files.values())} file blocks, {len(shell)} shell blocks, "
          f"{len(python)} Python blocks ran")


if __name__ == "__main__":
    main()
