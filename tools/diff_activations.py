#!/usr/bin/env python3
"""Where two runs of a model part: two activation dumps compared tensor by tensor.

Each dump is a directory of NAME.npy files with activations.json listing the
names in the order the forward computed them: `kiln run --dump-activations
DIR` writes one (any backend, KV type or model file), and
tools/dump_activations_llamacpp.py writes llama.cpp's for the same prompt
under the same names. For every tensor both dumps hold, in the first dump's
order, this prints the relative error |a - b| / |a| (Euclidean norms over
the whole tensor) and the largest elementwise difference, and names the first
tensor whose relative error exceeds --tol: the layer and the step of the
forward where the two runs stop agreeing. Tensors only one dump holds, or
held in other shapes, are listed as skipped.

  diff_activations.py A_DIR B_DIR [--tol 1e-3] [--quiet]

Exit status: 0 when every compared tensor is within --tol, 1 when the runs
part (the first such tensor is on the last line), 2 on bad input (a missing
directory or manifest, different prompts, nothing in common).
"""
import argparse
import json
import os
import re
import sys

import numpy as np


def load(directory):
    path = os.path.join(directory, "activations.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except OSError as e:
        raise SystemExit(f"diff_activations: {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"diff_activations: {path}: not JSON ({e})") from None
    if not isinstance(manifest.get("tensors"), list):
        raise SystemExit(f"diff_activations: {path}: no 'tensors' list")
    return manifest


def layer_of(name):
    m = re.search(r"-(\d+)$", name)
    return int(m.group(1)) if m else None


def compare(a_dir, b_dir, tol):
    """[(name, shape, rel, max_abs | None, note)] in A's order, and the first name beyond tol."""
    a, b = load(a_dir), load(b_dir)
    if a.get("tokens") != b.get("tokens"):
        raise SystemExit("diff_activations: the dumps are of different prompts (their 'tokens' differ)")
    in_b = set(b["tensors"])
    rows, first = [], None
    for name in a["tensors"]:
        if name not in in_b:
            rows.append((name, None, None, None, f"only in {a_dir}"))
            continue
        x = np.load(os.path.join(a_dir, name + ".npy")).astype(np.float64)
        y = np.load(os.path.join(b_dir, name + ".npy")).astype(np.float64)
        if x.shape != y.shape:
            rows.append((name, x.shape, None, None, f"shapes {x.shape} and {y.shape}"))
            continue
        norm = np.linalg.norm(x)
        rel = float(np.linalg.norm(x - y) / norm) if norm > 0 else float(np.linalg.norm(y) > 0)
        if not np.isfinite(rel):
            rel = float("inf")
        rows.append((name, x.shape, rel, float(np.max(np.abs(x - y))), ""))
        if first is None and rel > tol:
            first = name
    if not any(r[2] is not None for r in rows):
        raise SystemExit("diff_activations: the dumps have no tensor in common")
    return rows, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-3, help="largest relative error taken as agreement")
    ap.add_argument("--quiet", action="store_true", help="only the verdict")
    args = ap.parse_args()
    try:
        rows, first = compare(args.a, args.b, args.tol)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"{'tensor':<18} {'shape':<14} {'rel error':>10} {'max |a-b|':>11}")
        for name, shape, rel, mx, note in rows:
            if rel is None:
                print(f"{name:<18} {'':<14} skipped: {note}")
            else:
                mark = "  <- first beyond tolerance" if name == first else ""
                print(f"{name:<18} {str(list(shape)):<14} {rel:10.3e} {mx:11.3e}{mark}")
    compared = sum(r[2] is not None for r in rows)
    if first is None:
        print(f"agree: {compared} tensors within relative error {args.tol:g}")
        return 0
    rel = next(r[2] for r in rows if r[0] == first)
    layer = layer_of(first)
    where = f"layer {layer}, tensor {first}" if layer is not None else f"tensor {first}"
    print(f"part at {where}: relative error {rel:.3e} > {args.tol:g}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
