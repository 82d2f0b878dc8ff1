#!/usr/bin/env python3
"""llama.cpp's activations of a prompt, in the layout `kiln run --dump-activations` writes.

llama.cpp names the tensors of its graphs ("Qcur-0", "attn_out-0", "ffn_inp-0",
"ffn_out-0", "l_out-0", "result_norm", "result_output") and hands each to an
eval callback once computed; llama-cpp-python exposes that callback
(llama_context_params.cb_eval). This script evaluates the prompt's token ids
in one batch with every position's logits and copies each named f32 tensor
out as DIR/NAME.npy (2-D: positions, then the rest), with DIR/activations.json
listing them in the order llama.cpp computed them, so that
tools/diff_activations.py compares them with Kiln's tensor by tensor.

Where llama.cpp gives several tensors one name, the one Kiln names so is
kept: the last "Qcur"/"Kcur" (the projection is named so too, then its roped
result), the first "ffn_out" (the FFN's output; the residual after it is
named so again).

  dump_activations_llamacpp.py MODEL.gguf --tokens 1,2,3 -o DIR [--threads 2] [--kv f16|f32|q8_0]
"""
import argparse
import ctypes
import json
import os
import sys

try:
    import llama_cpp
    import numpy as np
except ImportError as e:
    sys.exit(f"dump_activations_llamacpp.py needs llama-cpp-python and numpy ({e})")

GGML_F32 = 0
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 8}
# Names llama.cpp gives to several tensors in turn, the last of which is Kiln's.
LAST_WINS = ("Qcur-", "Kcur-")


class TensorHead(ctypes.Structure):
    """The leading fields of ggml.h's struct ggml_tensor (stable across versions)."""
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
                ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4)]


def ggml_lib():
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_is_contiguous.restype = ctypes.c_bool
    lib.ggml_is_contiguous.argtypes = [ctypes.c_void_p]
    lib.ggml_nbytes.restype = ctypes.c_size_t
    lib.ggml_nbytes.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_size_t]
    return lib


def capture(model_path, tokens, threads=2, kv="f16"):
    """[(name, array [positions, ...])] in the order llama.cpp computed them."""
    ggml = ggml_lib()
    n = len(tokens)
    got, names = {}, []

    def on_tensor(t, ask, _user):
        name = ggml.ggml_get_name(t).decode()
        if ask:  # asked whether this tensor is wanted: then it is kept for the second call
            return True
        head = ctypes.cast(t, ctypes.POINTER(TensorHead)).contents
        if head.type != GGML_F32 or not ggml.ggml_is_contiguous(t):
            return True
        if name in got and not name.startswith(LAST_WINS):
            return True
        ne = list(head.ne)
        total = ne[0] * ne[1] * ne[2] * ne[3]
        # Positions are the outermost dimension of every per-token tensor.
        if total % n or n not in ne[1:]:
            return True
        buf = np.empty(total, dtype=np.float32)
        ggml.ggml_backend_tensor_get(t, buf.ctypes.data, 0, ggml.ggml_nbytes(t))
        if name in got:
            names.remove(name)
        got[name] = buf.reshape(n, total // n)
        names.append(name)
        return True

    callback = llama_cpp.ggml_backend_sched_eval_callback(on_tensor)
    quiet = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(quiet, None)
    llama_cpp.llama_backend_init()
    mp = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), mp)
    if not model:
        raise SystemExit(f"llama.cpp could not load {model_path}")
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = n + 8
    cp.n_batch = cp.n_ubatch = n
    cp.n_threads = cp.n_threads_batch = threads
    cp.type_k = cp.type_v = KV_TYPES[kv]
    cp.cb_eval = callback
    cp.cb_eval_user_data = None
    ctx = llama_cpp.llama_init_from_model(model, cp)
    batch = llama_cpp.llama_batch_init(n, 0, 1)
    for i, tok in enumerate(tokens):
        batch.token[i] = tok
        batch.pos[i] = i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = 1
    batch.n_tokens = n
    if llama_cpp.llama_decode(ctx, batch) != 0:
        raise SystemExit("llama_decode failed")
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return [(name, got[name]) for name in names]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("-o", "--out", required=True, help="directory for NAME.npy and activations.json")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", default="f16", choices=sorted(KV_TYPES), help="llama.cpp's KV cache type")
    a = ap.parse_args()
    tokens = [int(t) for t in a.tokens.split(",")]
    os.makedirs(a.out, exist_ok=True)
    tensors = capture(a.model, tokens, a.threads, a.kv)
    for name, arr in tensors:
        np.save(os.path.join(a.out, name + ".npy"), arr)
    with open(os.path.join(a.out, "activations.json"), "w") as f:
        json.dump({"model": a.model, "tokens": tokens, "tensors": [n for n, _ in tensors],
                   "shapes": {n: list(arr.shape) for n, arr in tensors}}, f, indent=1)
    print(f"{len(tensors)} tensors into {a.out}")


if __name__ == "__main__":
    main()
