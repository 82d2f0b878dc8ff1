"""Kiln from Python: kernels written in the tile DSL, JIT-compiled for the CPU
(LLVM) or CUDA (NVRTC, or the CPU simulator), launched on NumPy arrays and
DLPack tensors; and the model runtime.

A kernel::

    import numpy as np, kiln
    from kiln import f32, i32

    @kiln.kernel(dtypes={"T": [f32]}, constexprs={"BLOCK": 256},
                 tunables={"BLOCK": [64, 128, 256, 512]}, shape_keys=["n"],
                 launch=lambda s, a: ((kiln.cdiv(a["n"], s["BLOCK"]),), {"x": a["n"], "y": a["n"]}))
    def scale(k, s):
        B = s["BLOCK"]
        x, y = k.buffer("x", s.dtype("T")), k.buffer("y", s.dtype("T"))
        n, a = k.scalar("n", i32), k.scalar("a", f32)
        c = k.program_id(0) * B + kiln.arange(B)
        kiln.store(y + c, kiln.load(x + c, c < n, 0.0) * a, c < n)

    x = np.arange(1000, dtype=np.float32); y = np.empty_like(x)
    kiln.Device("cpu").launch("scale", x=x, y=y, n=x.size, a=2.0)

A model::

    m = kiln.Model("model.gguf", threads=8)
    print(m("Once upon a time", max_tokens=32)["choices"][0]["text"])
"""
import codecs
import queue
import threading

from . import _kiln
from ._kiln import (DType, Error, KernelBuilder, Spec, Value, Var, Buffer, Pointer, arange, full, zeros,
                    broadcast_to, reshape, expand_dims, transpose, slice, minimum, maximum, fma, where, lookup,
                    abs, floor, exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, erf, sum, max, min, argmax,
                    dot, dot_groups, load, store, atomic_add, generated_code, load_plugin, kernels)

__all__ = ["DType", "Error", "KernelBuilder", "Spec", "Value", "Var", "Buffer", "Pointer", "Device", "Model",
           "kernel", "cdiv", "generated_code", "load_plugin", "kernels", "arange", "full", "zeros", "load", "store",
           "where", "dot", "sum", "max", "min", "exp", "sqrt", "rsqrt"]

f32, f16, bf16 = DType.f32, DType.f16, DType.bf16
f8e4m3, f8e5m2 = DType.f8e4m3, DType.f8e5m2
i8, u8, i16, u16, i32, u32, i64 = DType.i8, DType.u8, DType.i16, DType.u16, DType.i32, DType.u32, DType.i64
abi = _kiln.abi


def cdiv(a, b):
    """Ceiling division: the programs that cover a elements b at a time."""
    return -(-a // b)


def _dtype(t):
    return t if isinstance(t, DType) else _kiln.parse_dtype(str(t))


def _dtypes(d):
    return {role: _dtype(t) for role, t in (d or {}).items()}


def kernel(name=None, *, launch, dtypes=None, constexprs=None, tunables=None, shape_keys=None, family="python",
           summary="", rtol=1e-5, atol=1e-6):
    """Registers the decorated function as a kernel named `name` (default: the function's name).

    The function receives a KernelBuilder and the Spec (dtypes by role, constexprs by name) and writes the
    tile program. `launch(spec, sizes)` returns `(grid, {buffer: elements})`: the programs to run (1 to 3
    axes) and how many elements each buffer must hold, given the launch's scalars and sizes by name;
    launches with smaller arrays are refused before any code runs. `dtypes`: each role's accepted dtypes,
    the first the default; `constexprs`: defaults; `tunables`: the values `tune` may try; `shape_keys`: the
    sizes whose power-of-two buckets key the tuning database. `rtol`/`atol`: how far tuned candidates may
    lie from the interpreter.
    """
    def register(fn):
        _kiln.register_kernel(
            name or fn.__name__, fn, launch,
            [(role, [_dtype(t) for t in ts]) for role, ts in (dtypes or {}).items()],
            list((constexprs or {}).items()),
            [(t, sorted(vs)) for t, vs in (tunables or {}).items()],
            list(shape_keys or []), family, summary or (fn.__doc__ or "").strip().split("\n")[0], rtol, atol)
        return fn
    return register


class Device(_kiln.Device):
    """A backend to run kernels on: "cpu", "cuda" or "cuda-sim" (the CUDA C on a CPU simulator)."""

    def launch(self, kernel, /, *, dtypes=None, constexprs=None, **args):
        """Runs `kernel` on the arguments, by parameter name: arrays for buffers, numbers for scalars,
        integer sizes the launch function reads. Results are in the arrays when it returns."""
        self._launch(kernel, args, _dtypes(dtypes), dict(constexprs or {}))

    def select(self, kernel, /, *, dtypes=None, constexprs=None, **args):
        """The Spec a launch with these arguments runs: tuned constexprs for its shape, else heuristics."""
        return self._select(kernel, args, _dtypes(dtypes), dict(constexprs or {}))

    def launch_spec(self, spec, /, **args):
        self._launch_spec(spec, args)

    def interpret(self, spec, /, **args):
        """The launch through the reference interpreter (host arrays): the oracle."""
        self._interpret(spec, args)

    def tune(self, kernel, /, *, shape, dtypes=None, constexprs=None, scalars=None, budget_s=30.0, warm=False):
        """Searches the kernel's tunables at `shape` (sizes by name), every candidate checked against the
        interpreter; the winner becomes this device's choice for that shape bucket. Returns the trials."""
        return self._tune(kernel, dict(shape), _dtypes(dtypes), dict(constexprs or {}),
                          {k: float(v) for k, v in (scalars or {}).items()}, float(budget_s), bool(warm))


class Model:
    """A language model (GGUF file or Hugging Face folder) on a backend, in the manner of llama-cpp-python."""

    def __init__(self, path, *, threads=0, device="cpu", n_ctx=0, kv="f16"):
        self._m = _kiln._Model(str(path), threads, device, n_ctx, kv)

    arch = property(lambda self: self._m.arch)
    n_vocab = property(lambda self: self._m.n_vocab)
    n_embd = property(lambda self: self._m.n_embd)
    n_ctx = property(lambda self: self._m.n_ctx)
    bos = property(lambda self: self._m.bos)
    eos = property(lambda self: self._m.eos)

    def tokenize(self, text, add_bos=None, special=False):
        """Token ids of `text` (str or bytes); add_bos None: as the model's metadata says."""
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return self._m.tokenize(text, add_bos, special)

    def detokenize(self, tokens):
        """The bytes the tokens spell (control tokens left out)."""
        return self._m.detokenize(list(tokens))

    def logits(self, tokens):
        """Every position's logits, a float32 array [len(tokens), n_vocab], from an empty cache."""
        return self._m.logits(list(tokens))

    def _prompt(self, prompt):
        return self.tokenize(prompt) if isinstance(prompt, (str, bytes)) else list(prompt)

    def generate(self, prompt, *, max_tokens=16, temperature=0.0, top_k=40, top_p=0.95, repeat_penalty=1.0,
                 seed=0, stop=None, on_text=None):
        """Generates after `prompt` (text or token ids); temperature 0 is greedy. Returns a dict: text,
        tokens, prompt_tokens, stop_reason ("length", "eos", "stop string"), prefill_ms, token_ms."""
        if isinstance(stop, str):
            stop = [stop]
        r = self._m._generate(self._prompt(prompt), max_tokens, temperature, top_k, top_p, repeat_penalty, seed,
                              list(stop or []), on_text)
        r["text"] = r["text"].decode("utf-8", errors="replace")
        return r

    def stream(self, prompt, **kw):
        """Yields the generated text piece by piece as it is decoded (whole UTF-8 characters)."""
        q = queue.Queue()
        done = object()

        def work():
            try:
                self.generate(prompt, on_text=q.put, **kw)
                q.put(done)
            except BaseException as e:  # handed to the consumer
                q.put(e)

        t = threading.Thread(target=work, daemon=True)
        t.start()
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            item = q.get()
            if item is done:
                tail = dec.decode(b"", final=True)
                if tail:
                    yield tail
                break
            if isinstance(item, BaseException):
                raise item
            piece = dec.decode(item)
            if piece:
                yield piece
        t.join()

    def __call__(self, prompt, *, max_tokens=16, stream=False, **kw):
        """A completion as llama-cpp-python returns one ({"choices": [{"text", "finish_reason"}], "usage"}),
        or with stream=True an iterator of such chunks."""
        finish = {"length": "length", "eos": "stop", "stop string": "stop"}
        if stream:
            return ({"object": "text_completion", "choices": [{"index": 0, "text": piece, "finish_reason": None}]}
                    for piece in self.stream(prompt, max_tokens=max_tokens, **kw))
        r = self.generate(prompt, max_tokens=max_tokens, **kw)
        return {"object": "text_completion",
                "choices": [{"index": 0, "text": r["text"], "finish_reason": finish.get(r["stop_reason"], "stop")}],
                "usage": {"prompt_tokens": len(r["prompt_tokens"]), "completion_tokens": len(r["tokens"]),
                          "total_tokens": len(r["prompt_tokens"]) + len(r["tokens"])}}
