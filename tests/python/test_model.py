"""The model runtime from Python against the kiln command on a generated
model: the same tokens, the same logits as `kiln run --logits-out`, the same
greedy text, streaming that adds up to it, and errors as kiln.Error."""
import json
import os
import subprocess

import numpy as np
import pytest

import kiln

PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def model(tiny_model):
    return kiln.Model(tiny_model, threads=2)


def test_tokens_and_logits_equal_kiln_run(model, tiny_model, kiln_cmd, tmp_path):
    tokens = model.tokenize(PROMPT)
    out = subprocess.run([kiln_cmd, "tokenize", "-m", tiny_model, "-p", PROMPT], check=True, capture_output=True,
                         text=True).stdout
    assert tokens == [int(t) for t in out.split()]
    assert model.detokenize(tokens).decode() == PROMPT
    logits = model.logits(tokens)
    assert logits.shape == (len(tokens), model.n_vocab) and logits.dtype == np.float32
    npy = tmp_path / "logits.npy"
    subprocess.run([kiln_cmd, "run", "-m", tiny_model, "-p", PROMPT, "-n", "1", "--threads", "2",
                    "--logits-out", str(npy)], check=True, capture_output=True)
    ref = np.load(npy)[: len(tokens)]
    # The same plans on the same thread count: equal to the bit.
    np.testing.assert_array_equal(logits, ref)


def test_greedy_generation_equals_kiln_run(model, tiny_model, kiln_cmd):
    r = model.generate(PROMPT, max_tokens=12)
    assert len(r["tokens"]) == 12 and r["stop_reason"] == "length"
    out = subprocess.run([kiln_cmd, "run", "-m", tiny_model, "-p", PROMPT, "-n", "12", "--threads", "2"], check=True,
                         capture_output=True).stdout.decode("utf-8", errors="replace")
    assert out.split("\n")[0] == PROMPT + r["text"]
    assert "".join(model.stream(PROMPT, max_tokens=12)) == r["text"]
    c = model(PROMPT, max_tokens=12)
    assert c["choices"][0]["text"] == r["text"] and c["choices"][0]["finish_reason"] == "length"
    assert c["usage"]["completion_tokens"] == 12
    chunks = list(model(PROMPT, max_tokens=12, stream=True))
    assert "".join(ch["choices"][0]["text"] for ch in chunks) == r["text"]
    # Sampling repeats for a seed.
    a = model.generate(PROMPT, max_tokens=8, temperature=0.9, seed=11)
    b = model.generate(list(r["prompt_tokens"]), max_tokens=8, temperature=0.9, seed=11)
    assert a["tokens"] == b["tokens"]


def test_model_errors(model, tmp_path):
    with pytest.raises(kiln.Error, match=r"GGUF file '/nonexistent\.gguf'"):
        kiln.Model("/nonexistent.gguf")
    with pytest.raises(kiln.Error, match=r"logits: no tokens"):
        model.logits([])
    with pytest.raises(kiln.Error, match=r"token"):
        model.logits([model.n_vocab + 5])
    with pytest.raises(kiln.Error, match=r"unknown backend 'tpu'"):
        kiln.Model(str(tmp_path), device="tpu")
