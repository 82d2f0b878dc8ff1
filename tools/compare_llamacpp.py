#!/usr/bin/env python3
"""Kiln's quantized GEMV/GEMM next to llama.cpp's (ggml's CPU mul_mat) on the
same shapes, formats and thread counts, measured alternately in one run.

This machine's memory bandwidth drifts by 2x within minutes, so figures from
separate runs cannot be compared; here every Kiln measurement is followed by
the matching ggml one and the table reports their ratio, and both as a
fraction of the roofline Kiln measured right before its kernel: the bandwidth
probe for GEMVs (GB/s of weight bytes), the dot_peak probe for prompt GEMMs
(GFLOP/s against GOP/s: byte dots for quantized formats, f32 FMAs for f16).

ggml is loaded with ctypes from its shared libraries (libggml-base, libggml-cpu,
libggml): those installed by `pip install llama-cpp-python` are found
automatically, or pass --ggml-lib DIR (e.g. a ggml build's src/ folder). The
weights are quantised by ggml's own quantize_chunk; the activations are f32
and ggml quantises them inside mul_mat, as Kiln's timing includes
quantize_q8.

  python3 tools/compare_llamacpp.py --kiln build/tools/kiln \\
      --formats q4_K,q8_0 --shapes 4096x14336 --threads 2 --tokens 1,512
"""
import argparse
import ctypes
import glob
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

COLD_BYTES = 256 << 20  # as kiln bench's cold GEMVs (tools/cmd_bench.cpp)
GGML_TYPES = {"f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_K": 10,
              "q3_K": 11, "q4_K": 12, "q5_K": 13, "q6_K": 14, "iq2_xxs": 16, "iq2_xs": 17,
              "iq3_xxs": 18, "iq4_nl": 20, "iq3_s": 21, "iq2_s": 22, "iq4_xs": 23, "mxfp4": 39}
# ggml quantises these only with an importance matrix: a uniform one.
IMATRIX_TYPES = {16, 17, 18, 21, 22}
# Kiln formats that are a load-time layout of a ggml type: llama.cpp runs the
# ggml type itself.
for _base in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
              "iq4_nl", "iq4_xs", "mxfp4"):
    GGML_TYPES[_base + "-rows16"] = GGML_TYPES[_base]


class GgmlInitParams(ctypes.Structure):
    _fields_ = [("mem_size", ctypes.c_size_t), ("mem_buffer", ctypes.c_void_p),
                ("no_alloc", ctypes.c_bool)]


def find_ggml_dir(given):
    if given:
        return given
    try:
        import llama_cpp  # noqa: F401  (only to find its bundled libraries)
        base = os.path.dirname(llama_cpp.__file__)
        for d in (os.path.join(base, "lib"), base):
            if glob.glob(os.path.join(d, "libggml-cpu*.so*")):
                return d
    except ImportError:
        pass
    sys.exit("error: ggml's libraries not found: pip install llama-cpp-python, "
             "or pass --ggml-lib DIR")


class Ggml:
    def __init__(self, libdir):
        load = lambda name: ctypes.CDLL(os.path.join(libdir, name), mode=ctypes.RTLD_GLOBAL)
        self.base = load("libggml-base.so")
        self.cpu = load("libggml-cpu.so")
        P, I64, I = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        b, c = self.base, self.cpu
        b.ggml_init.argtypes, b.ggml_init.restype = [GgmlInitParams], P
        b.ggml_free.argtypes = [P]
        b.ggml_new_tensor_2d.argtypes, b.ggml_new_tensor_2d.restype = [P, I, I64, I64], P
        b.ggml_mul_mat.argtypes, b.ggml_mul_mat.restype = [P, P, P], P
        b.ggml_new_graph.argtypes, b.ggml_new_graph.restype = [P], P
        b.ggml_build_forward_expand.argtypes = [P, P]
        b.ggml_get_data.argtypes, b.ggml_get_data.restype = [P], P
        b.ggml_nbytes.argtypes, b.ggml_nbytes.restype = [P], ctypes.c_size_t
        b.ggml_row_size.argtypes, b.ggml_row_size.restype = [I, I64], ctypes.c_size_t
        b.ggml_quantize_chunk.argtypes = [I, P, P, I64, I64, I64, P]
        b.ggml_quantize_chunk.restype = ctypes.c_size_t
        b.ggml_backend_graph_compute.argtypes, b.ggml_backend_graph_compute.restype = [P, P], I
        b.ggml_backend_free.argtypes = [P]
        c.ggml_backend_cpu_init.restype = P
        c.ggml_backend_cpu_set_n_threads.argtypes = [P, I]

    def matmul(self, fmt, m, k, tokens, threads, seconds, cold):
        """Seconds per y = W x over `tokens` columns, and W's bytes. `cold`:
        cycle through copies of W totalling COLD_BYTES, as `kiln bench` does
        for GEMVs, so each product reads W from DRAM."""
        b = self.base
        rng = np.random.default_rng(1)
        weights = rng.standard_normal(m * k, dtype=np.float32)
        x = rng.standard_normal(tokens * k, dtype=np.float32)
        wbytes = b.ggml_row_size(GGML_TYPES[fmt], k) * m
        copies = max(1, -(-COLD_BYTES // wbytes)) if cold else 1
        mem = copies * (wbytes + tokens * m * 4 + (1 << 20)) + x.nbytes + (64 << 20)
        ctx = b.ggml_init(GgmlInitParams(mem, None, False))
        xt = b.ggml_new_tensor_2d(ctx, 0, k, tokens)
        ctypes.memmove(b.ggml_get_data(xt), x.ctypes.data, x.nbytes)
        graphs, w0 = [], None
        for _ in range(copies):
            w = b.ggml_new_tensor_2d(ctx, GGML_TYPES[fmt], k, m)
            if w0 is None:
                imatrix = np.ones(k, dtype=np.float32)
                b.ggml_quantize_chunk(GGML_TYPES[fmt], weights.ctypes.data, b.ggml_get_data(w), 0,
                                      m, k, imatrix.ctypes.data
                                      if GGML_TYPES[fmt] in IMATRIX_TYPES else None)
                w0 = w
            else:
                ctypes.memmove(b.ggml_get_data(w), b.ggml_get_data(w0), wbytes)
            gf = b.ggml_new_graph(ctx)
            b.ggml_build_forward_expand(gf, b.ggml_mul_mat(ctx, w, xt))
            graphs.append(gf)
        backend = self.cpu.ggml_backend_cpu_init()
        self.cpu.ggml_backend_cpu_set_n_threads(backend, threads)
        for gf in graphs[:2]:
            b.ggml_backend_graph_compute(backend, gf)
        n, t0 = 0, time.perf_counter()
        while n < 3 or time.perf_counter() - t0 < seconds:
            b.ggml_backend_graph_compute(backend, graphs[n % copies])
            n += 1
        per = (time.perf_counter() - t0) / n
        nbytes = b.ggml_nbytes(w0)
        b.ggml_backend_free(backend)
        b.ggml_free(ctx)
        return per, nbytes


def kiln_run(kiln, fmt, m, k, tokens, threads, seconds, cold):
    """Seconds per call from `kiln bench` and its roofline: the bandwidth probe's
    GB/s for a GEMV, the dot_peak GOP/s for a GEMM (byte dots for quantized
    formats, f32 FMAs for f16)."""
    is_gemv = tokens == 1
    if fmt == "f16":
        args = ["--dtypes", "f16", "--formats", "", "--tokens", str(tokens if not is_gemv else 0)]
        pattern = ("gemv/f16/" if is_gemv else "gemm/f16/")
    else:
        args = ["--dtypes", "", "--formats", fmt, "--tokens", str(max(tokens, 0) if not is_gemv else 0)]
        pattern = ("qgemv/" if is_gemv else "qgemm/") + fmt + "/"
    pattern += f"{m}x{k}/" + ("" if is_gemv else f"tokens:{tokens}/") + f"threads:{threads}"
    if not cold:
        args.append("--warm")
    out = subprocess.run([kiln, "bench", "--threads", str(threads), "--shapes", f"{m}x{k}", *args,
                          f"--benchmark_filter=^{pattern}", f"--benchmark_min_time={seconds}",
                          "--benchmark_format=json"], check=True, capture_output=True, text=True)
    runs = [r for r in json.loads(out.stdout)["benchmarks"] if r["name"].startswith(pattern)]
    if not runs:
        sys.exit(f"error: kiln bench ran no benchmark named {pattern}")
    r = runs[0]
    unit = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9}[r["time_unit"]]
    return r["real_time"] * unit, r.get("probe_GB/s" if is_gemv else "peak_GOP/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", default="build/tools/kiln")
    ap.add_argument("--ggml-lib", default=os.environ.get("KILN_GGML_LIB"))
    ap.add_argument("--formats", default="q4_K-rows16,q4_K,q8_0,q4_0,q6_K-rows16,q6_K,f16")
    ap.add_argument("--shapes", default="4096x4096,4096x14336,14336x4096")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--tokens", default="1,512")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of the whole table, each Kiln then llama.cpp per row: on a "
                         "shared machine the spread of the ratios says how far one round is off")
    ap.add_argument("--warm", action="store_true",
                    help="re-read one copy of each GEMV's weights (cache-resident when small)")
    a = ap.parse_args()
    ggml = Ggml(find_ggml_dir(a.ggml_lib))
    print("| format | M x K | tokens | threads | Kiln | llama.cpp | Kiln / llama.cpp "
          "| roofline | Kiln / roofline | llama.cpp / roofline |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ratios = {}  # (format, shape, tokens, threads) -> Kiln / llama.cpp per round
    for fmt in [f for _ in range(a.repeat) for f in a.formats.split(",")]:
        for shape in a.shapes.split(","):
            m, k = (int(v) for v in shape.split("x"))
            for tokens in (int(t) for t in a.tokens.split(",")):
                for threads in (int(t) for t in a.threads.split(",")):
                    cold = tokens == 1 and not a.warm
                    ks, roof = kiln_run(a.kiln, fmt, m, k, tokens, threads, a.seconds, cold)
                    gs, wbytes = ggml.matmul(fmt, m, k, tokens, threads, a.seconds, cold)
                    if tokens == 1:  # bandwidth-bound: GB/s of weight bytes
                        rate, unit = lambda s: wbytes / s / 1e9, "GB/s"
                    else:  # compute-bound: GFLOP/s
                        rate, unit = lambda s: 2 * m * k * tokens / s / 1e9, "GFLOP/s"
                    roof_cells = (f"{roof:.1f} {'GB/s' if tokens == 1 else 'GOP/s'} "
                                  f"| {rate(ks) / roof:.2f} | {rate(gs) / roof:.2f}"
                                  if roof else "| |")
                    print(f"| {fmt} | {m}x{k} | {tokens} | {threads} | {rate(ks):.1f} {unit} "
                          f"| {rate(gs):.1f} {unit} | {gs / ks:.2f} | {roof_cells} |", flush=True)
                    ratios.setdefault((fmt, shape, tokens, threads), []).append(gs / ks)
    if a.repeat > 1:
        # One neighbour's burst moves a single round by tens of per cent;
        # the median of the alternated rounds is the figure to quote.
        print("\n| format | M x K | tokens | threads | rounds | median Kiln / llama.cpp | range |")
        print("|---|---|---|---|---|---|---|")
        for (fmt, shape, tokens, threads), r in ratios.items():
            print(f"| {fmt} | {shape} | {tokens} | {threads} | {len(r)} "
                  f"| {statistics.median(r):.2f} | {min(r):.2f}-{max(r):.2f} |")


if __name__ == "__main__":
    main()
