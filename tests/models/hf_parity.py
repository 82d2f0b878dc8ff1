#!/usr/bin/env python3
"""Kiln reading a Hugging Face folder gives the logits of the GGUF it came from.

For each architecture Kiln translates from Hugging Face (llama, qwen2, qwen3,
qwen3moe, Mixtral (llama-moe), gemma3, gpt-oss, phi3 with and without LongRoPE): `kiln gen-model` writes an F16 GGUF with random weights,
make_hf_checkpoint.py (numpy + safetensors, independent of Kiln's readers)
writes the same weights as a Hugging Face folder, and `kiln run` on both
must agree. F16 and F32 folders hold exactly the GGUF's values, so their
logits must be identical, bit for bit (one single-file, one sharded); a BF16
folder rounds every weight to bf16, so its logits may move by that
rounding (max|d| <= 0.1 std, top-1 agreeing on >= 80 % of positions; seen:
0.015-0.055; in MoE models over all but the 2 farthest positions, as a
rounding can flip a near-tie between experts), and converted to a BF16 GGUF it must give its own logits
exactly. Block-scaled FP8 folders must give the logits of their values
dequantized, AutoAWQ and INT8 folders theirs within their 8-bit
activations' error (`quantized` below). The
text prompt also checks that tokenizer.json reads back as the GGUF's
tokenizer (the same prompt token count); a llama with Llama 2's SentencePiece
vocabulary checks tokenizer.model the same way, and the same vocabulary as a
scoreless tokenizer.json (as Hugging Face's converter writes one). `kiln convert` of the folder must
write a GGUF that runs with the same logits again, in Kiln and in llama.cpp
(llama-cpp-python: the converted file against the generated one), and
`kiln convert --type` must write the tensors llama-quantize writes, in a file llama.cpp runs with
the same logits as llama-quantize's. Kiln(GGUF)
against llama.cpp is parity_llamacpp.py's job.

CI reads every architecture's F16 folder and the F32 and BF16 folders of
llama and qwen3moe; --full (ctest label long) every architecture's.

  hf_parity.py --kiln build/tools/kiln [--full]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def run(kiln, model, extra, out):
    cmd = [kiln, "run", "-m", model, "-n", "4", "--logits-out", out] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return np.load(out), json.loads(r.stdout.strip().splitlines()[-1])


def quantize_vs_llamacpp(kiln, llama_cpp, tmp, arch, folder, converted):
    """kiln convert --type against llama_model_quantize on the F16 converted
    file with the same ftype: every tensor of the same type, with the same
    bytes (Kiln's quantisers are ports of ggml's reference ones)."""
    import ctypes
    from gguf import GGUFReader
    bad = 0
    for name, ftype in (("q8_0", 7), ("q4_k_m", 15), ("q5_1", 9)):
        ours = os.path.join(tmp, f"{arch}-{name}.gguf")
        subprocess.run([kiln, "convert", folder, "--type", name, "-o", ours], check=True, capture_output=True)
        theirs = os.path.join(tmp, f"{arch}-{name}-llamacpp.gguf")
        p = llama_cpp.llama_model_quantize_default_params()
        p.ftype = ftype
        p.nthread = 2
        if llama_cpp.llama_model_quantize(converted.encode(), theirs.encode(), ctypes.byref(p)) != 0:
            raise SystemExit(f"FAIL: llama_model_quantize {converted} {name}")
        a = {t.name: t for t in GGUFReader(ours).tensors}
        b = {t.name: t for t in GGUFReader(theirs).tensors}
        diff = [n for n in sorted(set(a) | set(b)) if n not in a or n not in b or
                a[n].tensor_type != b[n].tensor_type or bytes(np.asarray(a[n].data).tobytes()) !=
                bytes(np.asarray(b[n].data).tobytes())]
        bad += bool(diff)
        print(f"{'ok  ' if not diff else 'FAIL'} {arch:9s} convert --type {name:6s}: {len(a) - len(diff)}/{len(a)} "
              f"tensors identical to llama-quantize's" + (f" (differ: {', '.join(diff[:4])})" if diff else ""))
        # And llama.cpp runs Kiln's file (its metadata is Kiln's) as its own.
        tokens = [1, 72, 101, 108, 108, 111]
        d = float(np.abs(llamacpp_logits(llama_cpp, ours, tokens) - llamacpp_logits(llama_cpp, theirs, tokens)).max())
        bad += d != 0.0
        print(f"{'ok  ' if d == 0.0 else 'FAIL'} {arch:9s} convert --type {name:6s}: llama.cpp runs it, logits "
              f"{'equal to' if d == 0.0 else f'max |d| {d:.2e} from'} llama-quantize's file's")
    return bad


def llamacpp_logits(llama_cpp, path, tokens):
    llm = llama_cpp.Llama(model_path=path, logits_all=True, n_ctx=64, verbose=False)
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)])


def llama3_rope(kiln, llama_cpp, tmp):
    """A folder declaring Llama 3.1's rope scaling (original context 64, so
    most pairs are scaled even at short positions): kiln convert writes the
    converter's rope_freqs.weight, llama.cpp runs that file, and Kiln on the
    folder must agree with it as parity_llamacpp.py's F16 bar asks (top-1 >=
    99 %, max|d|/std <= 0.02), while differing from the unscaled model."""
    if llama_cpp is None:
        return 0
    gguf = os.path.join(tmp, "llama.gguf")
    folder = os.path.join(tmp, "llama-rope3")
    subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), gguf, folder,
                    "--llama3-rope", "64"], check=True)
    converted = os.path.join(tmp, "llama-rope3.gguf")
    subprocess.run([kiln, "convert", folder, "-o", converted], check=True, capture_output=True)
    tokens = [1] + [(7 * i + 3) % 250 + 2 for i in range(40)]
    extra = ["--tokens", ",".join(map(str, tokens))]
    got, _ = run(kiln, folder, extra, os.path.join(tmp, "got.npy"))
    plain, _ = run(kiln, gguf, extra, os.path.join(tmp, "plain.npy"))
    want = llamacpp_logits(llama_cpp, converted, tokens)
    got = got[: len(tokens)]
    d = float(np.abs(got - want).max() / want.std())
    top1 = float((got.argmax(-1) == want.argmax(-1)).mean())
    moved = float(np.abs(got - plain[: len(tokens)]).max() / want.std())
    ok = d <= 0.02 and top1 >= 0.99 and moved > 0.05
    print(f"{'ok  ' if ok else 'FAIL'} llama3 rope: Kiln(folder) vs llama.cpp(converted) max|d|/std {d:.2e} "
          f"top-1 {top1:.3f}; the scaling moves logits by {moved:.2f} std")
    return 0 if ok else 1


def sentencepiece(kiln, vocab_dir, tmp):
    """A llama with Llama 2's SentencePiece vocabulary (the shared
    llama-spm GGUF): the folder carries it as tokenizer.model, and text
    prompts must give the GGUF's tokens and logits."""
    vocab = os.path.join(vocab_dir, "ggml-vocab-llama-spm.gguf")
    if not os.path.exists(vocab):
        print(f"skipped the SentencePiece folder: {vocab} is absent")
        return 0
    gguf = os.path.join(tmp, "llama-spm.gguf")
    folder = os.path.join(tmp, "llama-spm")
    subprocess.run([kiln, "gen-model", "--arch", "llama", "--preset", "tiny", "-o", gguf, "--type", "f16",
                    "--vocab", vocab], check=True, capture_output=True)
    subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), gguf, folder], check=True)
    folder_json = os.path.join(tmp, "llama-spm-json")
    subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), gguf, folder_json,
                    "--tokenizer-json"], check=True)
    bad = 0
    for prompt in ("Hello world, 123 times!", " leading space and\nnewline \u00fcber",
                   "Straße 東京 \U0001F600  tabs\tand    runs of spaces"):
        want, jw = run(kiln, gguf, ["-p", prompt], os.path.join(tmp, "want.npy"))
        for f, what in ((folder, "tokenizer.model"), (folder_json, "scoreless tokenizer.json")):
            got, jg = run(kiln, f, ["-p", prompt], os.path.join(tmp, "got.npy"))
            ok = jg["prompt_tokens"] == jw["prompt_tokens"] and got.shape == want.shape and \
                float(np.abs(got - want).max()) == 0.0
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} llama-spm folder ({what}): prompt "
                  f"{jg['prompt_tokens']}/{jw['prompt_tokens']} tokens, logits identical: {ok}")
    return bad


QUANT_TOKENS = [1, 72, 101, 108, 108, 111, 44, 32, 119]


def quantized_folder(kiln, tmp, gguf, label, flags, d_max, top1_min, spare=0):
    """A quantized folder written by make_hf_checkpoint.py `flags` and the
    same values dequantized to F32: Kiln on the first must give the
    logits of the second within (d_max, top1_min), over all but the `spare`
    farthest positions (MoE: 8-bit activations may flip a near-tie between
    experts). Returns (the quantized folder, Kiln's logits on the
    dequantized one, failures)."""
    folders = {}
    for what in ("q", "deq"):
        folders[what] = os.path.join(tmp, f"{label.replace(' ', '-')}-{what}")
        subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), gguf, folders[what]] + flags +
                       (["--dequantized"] if what == "deq" else []), check=True)
    extra = ["--tokens", ",".join(map(str, QUANT_TOKENS))]
    got, _ = run(kiln, folders["q"], extra, os.path.join(tmp, "got.npy"))
    want, _ = run(kiln, folders["deq"], extra, os.path.join(tmp, "want.npy"))
    d = float(np.sort(np.abs(got - want).max(-1))[-1 - spare] / want.std())
    top1 = float((got.argmax(-1) == want.argmax(-1)).mean())
    ok = d <= d_max and top1 >= top1_min
    print(f"{'ok  ' if ok else 'FAIL'} {label}: Kiln(quantized folder) vs the dequantized F32 folder "
          f"max|d|/std {d:.2e} top-1 {top1:.3f}" + (f" ({spare} positions spared)" if spare else ""))
    return folders["q"], want, int(not ok)


def converted_in_llamacpp(kiln, llama_cpp, tmp, label, folder, want, d_max, top1_min, spare=0):
    """kiln convert writes a quantized folder dequantized; llama.cpp must
    run the file as Kiln runs `want`'s folder (over all but the `spare`
    farthest positions: in MoE models the BF16 rounding may flip a near-tie
    between experts)."""
    if llama_cpp is None:
        return 0
    converted = os.path.join(tmp, label.replace(" ", "-") + ".gguf")
    subprocess.run([kiln, "convert", folder, "-o", converted], check=True, capture_output=True)
    theirs = llamacpp_logits(llama_cpp, converted, QUANT_TOKENS)
    want = want[: len(QUANT_TOKENS)]
    d = float(np.sort(np.abs(want - theirs).max(-1))[-1 - spare] / theirs.std())
    top1 = float((want.argmax(-1) == theirs.argmax(-1)).mean())
    ok = d <= d_max and top1 >= top1_min
    print(f"{'ok  ' if ok else 'FAIL'} {label} converted, in llama.cpp: max|d|/std {d:.2e} top-1 {top1:.3f}"
          + (f" ({spare} positions spared)" if spare else ""))
    return int(not ok)


def quantized(kiln, llama_cpp, tmp):
    """Quantized checkpoints, each built in numpy by make_hf_checkpoint.py:
    - FP8 (--fp8 B: E4M3 codes, a scale per B x B block): Kiln runs the
      codes as they are (gemv/gemm SCALE_BLOCK); prefill is bit-identical
      to the dequantized folder (the GEMM scales each weight to the same
      f32), decode within 1e-3 (the GEMV scales x instead; seen 1e-6 to
      1.3e-4). llama: 128 blocks, q/k rows permuted inside them; qwen3: 96,
      so the last blocks of rows and columns are partial; qwen3moe: 64, the
      experts' too (grouped gemm, a scale matrix per expert).
    - AutoAWQ (--awq G, packed by AutoAWQ's documented order): int4w
      kernels with 8-bit activations as llama.cpp's Q4 formats, within
      0.15 and 90 % top-1 (seen 0.04-0.08, 100 %). llama, groups of 128
      (all interleaved across 16 rows); SmolLM's widths (576, not whole
      256s) in one layer, groups of 64 (the row-major kernel); qwen3moe,
      groups of 64, its experts too (grouped: gate/up interleaved, down
      row-major).
    - compressed-tensors INT8 (--int8: a scale per channel): gemv_w8a8
      with per-token int8 activations, within 0.15 and 90 % (seen
      0.05-0.06, 100 %); qwen3moe's experts through the grouped gemv_w8a8.
    - GPT-OSS's MXFP4 experts (--mxfp4): the MXFP4 kernels with 8-bit
      activations, within 0.15 and 90 % (seen 0.017, 100 %).
    kiln convert writes FP8 and INT8 as BF16 (llama.cpp against Kiln on the
    quantized folder: the BF16 bar, 0.1 and 80 %) and AWQ as F16 (against
    the dequantized folder: 0.05 and 99 %)."""
    bad = 0
    llama, qwen3 = os.path.join(tmp, "llama.gguf"), os.path.join(tmp, "qwen3.gguf")
    smol = os.path.join(tmp, "smollm1.gguf")
    subprocess.run([kiln, "gen-model", "--arch", "llama", "--preset", "smollm", "--layers", "1", "-o", smol,
                    "--type", "f16"], check=True, capture_output=True)
    extra = ["--tokens", ",".join(map(str, QUANT_TOKENS))]
    qwen3moe = os.path.join(tmp, "qwen3moe.gguf")
    for gguf, label, block in ((llama, "llama fp8 128", 128), (qwen3, "qwen3 fp8 96", 96),
                               (qwen3moe, "qwen3moe fp8 64", 64)):
        folder, _, b = quantized_folder(kiln, tmp, gguf, label, ["--dtype", "f32", "--fp8", str(block)], 1e-3, 1.0)
        bad += b
        got, _ = run(kiln, folder, extra, os.path.join(tmp, "got.npy"))
        bad += converted_in_llamacpp(kiln, llama_cpp, tmp, label, folder, got, 0.1, 0.8,
                                     2 if gguf == qwen3moe else 0)
    for gguf, label, group in ((llama, "llama awq 128", 128), (smol, "smollm awq 64", 64),
                               (qwen3moe, "qwen3moe awq 64", 64)):
        folder, want, b = quantized_folder(kiln, tmp, gguf, label, ["--awq", str(group)], 0.15, 0.9,
                                           2 if gguf == qwen3moe else 0)
        bad += b
        if gguf == llama:
            bad += converted_in_llamacpp(kiln, llama_cpp, tmp, label, folder, want, 0.05, 0.99)
    # GPT-OSS's release: MXFP4 experts. Kiln (MXFP4 GEMV/GEMM with 8-bit
    # activations) against the dequantized folder, and llama.cpp on the
    # converted file (MXFP4 kept as it is, the nibble order ggml's) against
    # Kiln on the folder: the quantized bar of parity_llamacpp.py (seen 0.016).
    gpt_oss = os.path.join(tmp, "gpt-oss.gguf")
    folder, _, b = quantized_folder(kiln, tmp, gpt_oss, "gpt-oss mxfp4", ["--mxfp4"], 0.15, 0.9)
    bad += b
    got, _ = run(kiln, folder, extra, os.path.join(tmp, "got.npy"))
    bad += converted_in_llamacpp(kiln, llama_cpp, tmp, "gpt-oss mxfp4", folder, got, 0.05, 0.9)
    for gguf, label in ((llama, "llama int8"), (qwen3, "qwen3 int8"), (qwen3moe, "qwen3moe int8")):
        folder, _, b = quantized_folder(kiln, tmp, gguf, label, ["--int8"], 0.15, 0.9,
                                        2 if gguf == qwen3moe else 0)
        bad += b
        if gguf == llama:
            got, _ = run(kiln, folder, extra, os.path.join(tmp, "got.npy"))
            bad += converted_in_llamacpp(kiln, llama_cpp, tmp, label, folder, got, 0.1, 0.8)
    return bad


def gemma3_multimodal(kiln, tmp):
    """A Gemma3ForConditionalGeneration folder (make_hf_checkpoint.py
    --multimodal: the text model nested, a vision tower beside it) runs as
    its text model: the GGUF's logits exactly."""
    gguf = os.path.join(tmp, "gemma3.gguf")
    folder = os.path.join(tmp, "gemma3-multimodal")
    subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), gguf, folder, "--multimodal"],
                   check=True)
    extra = ["-p", "Hello world, 123 times!"]
    want, jw = run(kiln, gguf, extra, os.path.join(tmp, "want.npy"))
    got, jg = run(kiln, folder, extra, os.path.join(tmp, "got.npy"))
    ok = got.shape == want.shape and jg["prompt_tokens"] == jw["prompt_tokens"] and \
        float(np.abs(got - want).max()) == 0.0
    print(f"{'ok  ' if ok else 'FAIL'} gemma3    multimodal folder (text model nested, vision tower not read): "
          f"logits identical: {ok}")
    return int(not ok)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--full", action="store_true", help="F32 and BF16 folders of every architecture")
    ap.add_argument("--vocab-dir", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "vocab"))
    a = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
        print("llama-cpp-python not installed: converted files are not loaded in llama.cpp")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for arch, preset in (("llama", "tiny"), ("qwen2", "tiny"), ("qwen3", "tiny"), ("qwen3moe", "tiny"),
                             ("llama-moe", "tiny"), ("gemma3", "tiny"), ("gpt-oss", "tiny"),
                             ("phi3", "tiny"), ("phi3", "tiny-longrope")):
            label = arch if preset == "tiny" else f"{arch}-{preset}"
            gguf = os.path.join(tmp, f"{label}.gguf")
            subprocess.run([a.kiln, "gen-model", "--arch", arch, "--preset", preset, "-o", gguf,
                            "--type", "f16"], check=True, capture_output=True)
            for dtype, shards in (("f16", 1), ("f32", 3), ("bf16", 2)):
                # CI reads every architecture's F16 folder, F32 and BF16 on llama and qwen3moe
                # (the dtype path is the same for all); --full every pair.
                if dtype != "f16" and not a.full and arch not in ("llama", "qwen3moe"):
                    continue
                folder = os.path.join(tmp, f"{label}-{dtype}")
                subprocess.run([sys.executable, os.path.join(HERE, "make_hf_checkpoint.py"), gguf, folder,
                                "--dtype", dtype, "--shards", str(shards)], check=True)
                models = [(folder, "folder")]
                if dtype == "f16":
                    converted = os.path.join(tmp, f"{label}-converted.gguf")
                    r = subprocess.run([a.kiln, "convert", folder, "-o", converted],
                                       capture_output=True, text=True)
                    if r.returncode != 0:
                        raise SystemExit(f"FAIL: kiln convert {folder}\n{r.stderr}")
                    models.append((converted, "converted"))
                    if llama_cpp is not None:
                        tokens = [1, 72, 101, 108, 108, 111]
                        want = llamacpp_logits(llama_cpp, gguf, tokens)
                        got = llamacpp_logits(llama_cpp, converted, tokens)
                        d = float(np.abs(got - want).max() / want.std())
                        ok = d == 0.0
                        failures += not ok
                        print(f"{'ok  ' if ok else 'FAIL'} {label:9s} llama.cpp loads the converted file: "
                              f"max|d|/std {d:.2e} against the generated one")
                        if arch in ("llama", "qwen3moe"):
                            failures += quantize_vs_llamacpp(a.kiln, llama_cpp, tmp, arch, folder, converted)
                for extra in (["--tokens", "1,72,101,108,108,111"], ["-p", "Hello world, 123 times!"]):
                    want, jw = run(a.kiln, gguf, extra, os.path.join(tmp, "want.npy"))
                    for model, what in models:
                        got, jg = run(a.kiln, model, extra, os.path.join(tmp, "got.npy"))
                        ok = got.shape == want.shape and jg["prompt_tokens"] == jw["prompt_tokens"]
                        # In MoE models the rounding may flip a token between two
                        # experts whose router logits nearly tie, moving that
                        # position far: up to 2 positions are spared there.
                        spare = 2 if dtype == "bf16" and arch in ("qwen3moe", "gpt-oss") else 0
                        d = float(np.sort(np.abs(got - want).max(-1))[-1 - spare] / want.std()) \
                            if ok else float("inf")
                        top1 = float((got.argmax(-1) == want.argmax(-1)).mean()) if ok else 0.0
                        ok = ok and (d == 0.0 if dtype != "bf16" else d <= 0.1 and top1 >= 0.8)
                        failures += not ok
                        print(f"{'ok  ' if ok else 'FAIL'} {label:9s} {dtype:4s} shards={shards} {what:9s} "
                              f"{extra[0]:8s} prompt {jg['prompt_tokens']}/{jw['prompt_tokens']} "
                              f"max|d|/std {d:.2e} top-1 {top1:.3f}")
                if dtype == "bf16":  # BF16 converts as it is: the same logits again
                    converted = os.path.join(tmp, f"{label}-bf16.gguf")
                    subprocess.run([a.kiln, "convert", folder, "-o", converted], check=True, capture_output=True)
                    extra = ["-p", "Hello world, 123 times!"]
                    want, _ = run(a.kiln, folder, extra, os.path.join(tmp, "want.npy"))
                    got, _ = run(a.kiln, converted, extra, os.path.join(tmp, "got.npy"))
                    ok = got.shape == want.shape and float(np.abs(got - want).max()) == 0.0
                    failures += not ok
                    print(f"{'ok  ' if ok else 'FAIL'} {label:9s} bf16 converted: the folder's logits exactly: {ok}")
        failures += quantized(a.kiln, llama_cpp, tmp)
        failures += gemma3_multimodal(a.kiln, tmp)
        failures += llama3_rope(a.kiln, llama_cpp, tmp)
        failures += sentencepiece(a.kiln, a.vocab_dir, tmp)
    if failures:
        raise SystemExit(f"{failures} comparison(s) failed")


if __name__ == "__main__":
    main()
