"""Kernels written in Python: built with the DSL, run on NumPy arrays (and a
DLPack-only tensor) on the CPU and the CUDA simulator, against NumPy; their
code, tuning and the interpreter; and every misuse as a kiln.Error naming
the parameter."""
import numpy as np
import pytest

import kiln
from kiln import f16, f32, i32

BACKENDS = ["cpu", "cuda-sim"]


def _elementwise(s, a):
    return (kiln.cdiv(a["n"], s["BLOCK"]),), {"x": a["n"], "y": a["n"]}


@kiln.kernel(dtypes={"T": [f32, f16]}, constexprs={"BLOCK": 128}, tunables={"BLOCK": [32, 64, 128, 256, 512]},
             shape_keys=["n"], launch=_elementwise)
def py_affine(k, s):
    """y = a * x + b"""
    B, T = s["BLOCK"], s.dtype("T")
    x, y = k.buffer("x", T), k.buffer("y", T)
    n, a, b = k.scalar("n", i32), k.scalar("a", f32), k.scalar("b", f32)
    c = k.program_id(0) * B + kiln.arange(B)
    v = kiln.load(x + c, c < n, 0.0).to(f32)
    kiln.store(y + c, (v * a + b).to(T), c < n)


def _rows(s, a):
    return (a["rows"],), {"x": a["rows"] * a["n"], "y": a["rows"] * a["n"]}


@kiln.kernel(constexprs={"BLOCK": 64}, tunables={"BLOCK": [16, 32, 64, 128]}, shape_keys=["rows", "n"], launch=_rows)
def py_softmax(k, s):
    """row softmax, three passes with loop-carried accumulators"""
    B = s["BLOCK"]
    x, y = k.buffer("x", f32), k.buffer("y", f32)
    n = k.scalar("n", i32)
    base = k.program_id(0) * n
    mx = k.var(kiln.full([B], -np.inf, f32))

    def find_max(i):
        c = i + kiln.arange(B)
        mx.value = kiln.maximum(mx, kiln.load(x + (base + c), c < n, -np.inf))
    k.for_(0, n, B, find_max)
    m = kiln.max(mx)
    total = k.var(kiln.zeros(f32, [B]))

    def add(i):
        nonlocal total
        c = i + kiln.arange(B)
        total += kiln.exp(kiln.load(x + (base + c), c < n, -np.inf) - m)
    k.for_(0, n, B, add)
    inv = 1.0 / kiln.sum(total)

    def write(i):
        c = i + kiln.arange(B)
        kiln.store(y + (base + c), kiln.exp(kiln.load(x + (base + c), c < n, -np.inf) - m) * inv, c < n)
    k.for_(0, n, B, write)


def _tiles(s, a):
    return (a["m"] // 16, a["n"] // 16), {"a": a["m"] * a["k"], "b": a["k"] * a["n"], "c": a["m"] * a["n"]}


@kiln.kernel(launch=_tiles)
def py_matmul(k, s):
    """c = a @ b in 16 x 16 tiles through kiln.dot"""
    a, b, c = k.buffer("a", f32), k.buffer("b", f32), k.buffer("c", f32)
    m, n, kk = k.scalar("m", i32), k.scalar("n", i32), k.scalar("k", i32)
    rows = k.program_id(0) * 16 + kiln.arange(16)
    cols = k.program_id(1) * 16 + kiln.arange(16)
    acc = k.var(kiln.zeros(f32, [16, 16]))

    def step(i):
        kc = i + kiln.arange(8)
        ta = kiln.load(a + (kiln.expand_dims(rows, 1) * kk + kiln.expand_dims(kc, 0)))
        tb = kiln.load(b + (kiln.expand_dims(kc, 1) * n + kiln.expand_dims(cols, 0)))
        acc.value = kiln.dot(ta, tb, acc)
    k.for_(0, kk, 8, step)
    kiln.store(c + (kiln.expand_dims(rows, 1) * n + kiln.expand_dims(cols, 0)), acc)


@pytest.mark.parametrize("backend", BACKENDS)
def test_affine_matches_numpy(backend):
    dev = kiln.Device(backend, threads=2)
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    dev.launch("py_affine", x=x, y=y, n=x.size, a=1.5, b=-0.25)
    np.testing.assert_allclose(y, x * np.float32(1.5) - np.float32(0.25), rtol=1e-6, atol=1e-7)
    # f16: numpy's float16 arrays are the f16 dtype; the kernel rounds once.
    x16, y16 = x.astype(np.float16), np.zeros(1000, np.float16)
    dev.launch("py_affine", dtypes={"T": "f16"}, x=x16, y=y16, n=1000, a=1.5, b=-0.25)
    want = (x16.astype(np.float32) * np.float32(1.5) - np.float32(0.25)).astype(np.float16)
    assert np.array_equal(y16, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_and_dot_match_numpy(backend):
    dev = kiln.Device(backend, threads=2)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 300)).astype(np.float32) * 4
    y = np.zeros_like(x)
    dev.launch("py_softmax", x=x, y=y, n=300, rows=5)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-8)
    a = rng.standard_normal((32, 24)).astype(np.float32)
    b = rng.standard_normal((24, 48)).astype(np.float32)
    c = np.zeros((32, 48), np.float32)
    dev.launch("py_matmul", a=a, b=b, c=c, m=32, n=48, k=24)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


class DLPackOnly:
    """A tensor that speaks only the DLPack protocol (as torch and jax tensors do)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_tensor():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    kiln.Device("cpu", threads=1).launch("py_affine", x=DLPackOnly(x), y=DLPackOnly(y), n=64, a=2.0, b=1.0)
    np.testing.assert_array_equal(y, x * 2 + 1)


def test_interpreter_generated_code_and_tuning():
    dev = kiln.Device("cpu", threads=2)
    x = np.linspace(-3, 3, 777, dtype=np.float32)
    y1, y2 = np.zeros_like(x), np.zeros_like(x)
    spec = dev.select("py_affine", x=x, y=y1, n=777, a=0.5, b=2.0)
    dev.launch_spec(spec, x=x, y=y1, n=777, a=0.5, b=2.0)
    dev.interpret(spec, x=x, y=y2, n=777, a=0.5, b=2.0)
    np.testing.assert_allclose(y1, y2, rtol=1e-7)
    assert "kernel py_affine(" in kiln.generated_code("py_affine", "ir", constexprs={"BLOCK": 64})
    assert "ymm" in kiln.generated_code("py_affine", "asm", target="x86-64-v3")
    assert "zmm" in kiln.generated_code("py_affine", "asm", target="x86-64-v4")
    assert "define void @py_affine" in kiln.generated_code("py_affine", "llvm")
    assert "__global__" in kiln.generated_code("py_affine", "cuda", target="cuda", sm=90)
    r = dev.tune("py_affine", shape={"n": 1 << 16}, budget_s=3)
    assert r["best"]["status"] == "ok" and r["heuristic"]["status"] == "ok"
    assert all(t["status"] == "ok" for t in r["trials"])
    xs, ys = np.zeros(1 << 16, np.float32), np.zeros(1 << 16, np.float32)
    assert dev.select("py_affine", x=xs, y=ys, n=1 << 16, a=1.0, b=0.0)["BLOCK"] == r["best"]["constexprs"]["BLOCK"]


def test_bad_launches_name_the_parameter():
    dev = kiln.Device("cpu", threads=1)
    x, y = np.zeros(100, np.float32), np.zeros(100, np.float32)
    with pytest.raises(kiln.Error, match=r"parameter 'x' is a buffer of f32, given an array of i32"):
        dev.launch("py_affine", x=np.zeros(100, np.int32), y=y, n=100, a=1.0, b=0.0)
    with pytest.raises(kiln.Error, match=r"argument 'x': Kiln has no dtype for arrays of 64-bit"):
        dev.launch("py_affine", x=np.zeros(100), y=y, n=100, a=1.0, b=0.0)
    with pytest.raises(kiln.Error, match=r"buffer 'y' holds 50 elements, the launch needs 100"):
        dev.launch("py_affine", x=x, y=y[:50], n=100, a=1.0, b=0.0)
    with pytest.raises(kiln.Error, match=r"no argument for parameter 'b' \(a scalar f32\)"):
        dev.launch("py_affine", x=x, y=y, n=100, a=1.0)
    with pytest.raises(kiln.Error, match=r"parameter 'n' is a scalar i32, given a float"):
        dev.launch("py_affine", x=x, y=y, n=100.0, a=1.0, b=0.0)
    with pytest.raises(kiln.Error, match=r"parameter 'a' is a scalar f32, given an array"):
        dev.launch("py_affine", x=x, y=y, n=100, a=x, b=0.0)
    with pytest.raises(kiln.Error, match=r"has no parameter 'bb'"):
        dev.launch("py_affine", x=x, y=y, n=100, a=1.0, b=0.0, bb=0.5)
    with pytest.raises(kiln.Error, match=r"argument 'x': the array is not C-contiguous"):
        dev.launch("py_affine", x=np.zeros(200, np.float32)[::2], y=y, n=100, a=1.0, b=0.0)
    with pytest.raises(kiln.Error, match=r"does not support dtype bf16 for role 'T'"):
        dev.launch("py_affine", dtypes={"T": "bf16"}, x=x, y=y, n=100, a=1.0, b=0.0)
    with pytest.raises(kiln.Error, match=r"unknown kernel 'nope'"):
        dev.launch("nope", x=x)
    with pytest.raises(kiln.Error, match=r"unknown backend 'tpu'"):
        kiln.Device("tpu")
    with pytest.raises(kiln.Error, match=r"unknown code form 'sass'"):
        kiln.generated_code("py_affine", "sass")


def test_bad_kernels_raise():
    def launch(s, a):
        return (1,), {"x": 8}

    @kiln.kernel(launch=launch)
    def py_raises(k, s):
        k.buffer("x", f32)
        raise ZeroDivisionError("inside the build function")

    @kiln.kernel(launch=launch)
    def py_truthy(k, s):
        x = k.buffer("x", f32)
        if kiln.load(x + kiln.arange(8)) > 0:
            pass

    @kiln.kernel(launch=launch)
    def py_mixed(k, s):
        x = k.buffer("x", f32)
        kiln.store(x + kiln.arange(8), kiln.arange(8))  # an i32 tile into an f32 buffer

    @kiln.kernel(launch=lambda s, a: "no grid")
    def py_bad_launch(k, s):
        k.buffer("x", f32)

    dev = kiln.Device("cpu", threads=1)
    x = np.zeros(8, np.float32)
    with pytest.raises(ZeroDivisionError, match="inside the build function"):
        dev.launch("py_raises", x=x)
    with pytest.raises(kiln.Error, match="has no truth value"):
        dev.launch("py_truthy", x=x)
    with pytest.raises(kiln.Error, match=r"py_mixed.*store"):
        dev.launch("py_mixed", x=x)
    with pytest.raises(kiln.Error, match=r"must return \(grid, \{buffer: elements\}\)"):
        dev.launch("py_bad_launch", x=x)
    with pytest.raises(kiln.Error, match=r"kernel 'py_affine' is registered already"):
        kiln.kernel("py_affine", launch=launch)(lambda k, s: None)


def test_dsl_objects_kept_past_their_build_raise():
    kept = {}

    @kiln.kernel(launch=lambda s, a: ((1,), {"x": 8}))
    def py_keeps(k, s):
        x = k.buffer("x", f32)
        kept.update(value=kiln.arange(8), builder=k, buffer=x, var=k.var(kiln.zeros(f32, [8])))
        kiln.store(x + kiln.arange(8), kiln.zeros(f32, [8]))

    kiln.Device("cpu", threads=1).launch("py_keeps", x=np.zeros(8, np.float32))
    stale = r"used after its kernel's build function returned"
    with pytest.raises(kiln.Error, match=stale):
        kept["value"] + 1
    with pytest.raises(kiln.Error, match=stale):
        kept["builder"].buffer("y", f32)
    with pytest.raises(kiln.Error, match=stale):
        kiln.load(kept["buffer"] + kept["value"])
    with pytest.raises(kiln.Error, match=stale):
        kept["var"].value
    with pytest.raises(kiln.Error, match="outside of a KernelBuilder"):
        kiln.arange(4)
