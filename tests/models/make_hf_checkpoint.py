#!/usr/bin/env python3
"""Writes a Hugging Face model folder from a `kiln gen-model` GGUF file.

The independent side of Kiln's Hugging Face reader: the folder is built with
numpy and the `safetensors` package from the GGUF's own weights (read with
the `gguf` package), undoing what llama.cpp's converter does: GGUF names
back to Hugging Face's, llama's q/k rows back from interleaved pairs to
rotate-half order, per-expert matrices unstacked, and the tokenizer written
as tokenizer.json. Kiln reading the folder must then give the GGUF's logits.

  make_hf_checkpoint.py MODEL.gguf OUT_DIR [--dtype f16|f32|bf16] [--shards N]
                        [--llama3-rope ORIG_CTX] [--fp8 B | --awq G | --int8]
                        [--mxfp4] [--dequantized] [--multimodal] [--tokenizer-json]

--fp8 B quantizes every linear layer's weight but the embeddings' as FP8
checkpoints do (DeepSeek-V3, Qwen3 FP8): E4M3 values with a scale per B x B
block (`weight_scale_inv`, amax / 448), quantization_config quant_method
fp8. --awq G quantizes them as AutoAWQ's GEMM checkpoints store them: per
group of G inputs and output column, 4-bit codes q and zero points z with
an f16 scale s (w = (q - z) s), packed 8 to an int32 with column 8c +
[0, 2, 4, 6, 1, 3, 5, 7][i] in bits 4i..4i+3 (AutoAWQ's documented order),
qweight [in, out / 8], qzeros [in / G, out / 8], scales [in / G, out].
--int8 writes compressed-tensors' w8a8 checkpoints: int8 codes per output
channel (s = amax / 127, `weight_scale` [out, 1]), activations declared
dynamic per token; lm_head left as it is (its `ignore`).
--mxfp4 (gpt-oss) writes the experts as GPT-OSS's release holds them:
MXFP4 codes (e2m1, two a byte, element 2j in the low nibble) with an e8m0
scale per 32 inputs, the exponent chosen as ggml's quantizer does.
--multimodal (gemma3) writes a Gemma3ForConditionalGeneration folder: the
text model's config nested in text_config (keys equal to Gemma3TextConfig's
defaults left out, as transformers does), its tensors under
language_model.model., and a small vision tower and projector beside them.
With --dequantized the same values are written dequantized, as F32 and
without quantization_config: the reference the quantized folder must match.

bf16 tensors are stored by safetensors as U16 (numpy has no bfloat16) and
the header's dtype names rewritten to BF16 afterwards.
"""
import argparse
import json
import os
import struct

import numpy as np
from gguf import GGUFReader
from safetensors.numpy import save_file

HF_MODEL_TYPE = {"llama": ("llama", "LlamaForCausalLM"), "qwen2": ("qwen2", "Qwen2ForCausalLM"),
                 "qwen3": ("qwen3", "Qwen3ForCausalLM"),
                 "qwen3moe": ("qwen3_moe", "Qwen3MoeForCausalLM"),
                 "gemma3": ("gemma3_text", "Gemma3ForCausalLM"),
                 "gpt-oss": ("gpt_oss", "GptOssForCausalLM"), "phi3": ("phi3", "Phi3ForCausalLM")}
# Phi-3's fused projections.
PHI3_NAMES = {"attn_qkv.weight": "self_attn.qkv_proj.weight", "ffn_up.weight": "mlp.gate_up_proj.weight"}
# Gemma 3's norms under their own names (and stored as w, where GGUF has 1 + w).
GEMMA_NAMES = {"attn_norm.weight": "input_layernorm.weight",
               "post_attention_norm.weight": "post_attention_layernorm.weight",
               "ffn_norm.weight": "pre_feedforward_layernorm.weight",
               "post_ffw_norm.weight": "post_feedforward_layernorm.weight"}

LAYER_NAMES = {"attn_norm.weight": "input_layernorm.weight", "attn_q.weight": "self_attn.q_proj.weight",
               "attn_k.weight": "self_attn.k_proj.weight", "attn_v.weight": "self_attn.v_proj.weight",
               "attn_output.weight": "self_attn.o_proj.weight", "attn_q.bias": "self_attn.q_proj.bias",
               "attn_k.bias": "self_attn.k_proj.bias", "attn_v.bias": "self_attn.v_proj.bias",
               "attn_q_norm.weight": "self_attn.q_norm.weight",
               "attn_k_norm.weight": "self_attn.k_norm.weight",
               "ffn_norm.weight": "post_attention_layernorm.weight", "ffn_gate.weight": "mlp.gate_proj.weight",
               "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
               "ffn_gate_inp.weight": "mlp.gate.weight"}
# GPT-OSS's own names; its experts are handled whole (gpt_oss_experts).
GPT_OSS_NAMES = {"attn_output.bias": "self_attn.o_proj.bias", "attn_sinks.weight": "self_attn.sinks",
                 "post_attention_norm.weight": "post_attention_layernorm.weight",
                 "ffn_gate_inp.weight": "mlp.router.weight", "ffn_gate_inp.bias": "mlp.router.bias"}
EXPERT_NAMES = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj",
                "ffn_down_exps.weight": "down_proj"}
# Mixtral's (block_sparse_moe.experts.N.w1/w3/w2).
MIXTRAL_EXPERTS = {"ffn_gate_exps.weight": "w1", "ffn_up_exps.weight": "w3", "ffn_down_exps.weight": "w2"}


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.parts[f.data[0]]
    if f.types[0].name == "STRING":
        return bytes(v).decode()
    return v.tolist()[0]


def string_array(r, key):
    f = r.fields[key]
    return [bytes(f.parts[i]).decode() for i in f.data]


def unpermute(w, heads):
    """GGUF llama q/k rows (pairs) -> Hugging Face's (halves): the inverse of
    llama.cpp's converter permute."""
    rows = w.shape[0]
    d = rows // heads
    return w.reshape(heads, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def varint(x):
    out = b""
    while x >= 0x80:
        out += bytes([(x & 0x7F) | 0x80])
        x >>= 7
    return out + bytes([x])


def proto_bytes(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def sentencepiece_model(r):
    """tokenizer.model (SentencePiece's ModelProto, protobuf) from a GGUF
    "llama" vocabulary: pieces (text, score, type), trainer_spec (BPE, byte
    fallback, unk/bos/eos ids), normalizer_spec (dummy prefix)."""
    tokens = string_array(r, "tokenizer.ggml.tokens")
    f = r.fields["tokenizer.ggml.scores"]
    scores = [float(f.parts[i][0]) for i in f.data]
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    out = b""
    for t, sc, ty in zip(tokens, scores, types):
        out += proto_bytes(1, proto_bytes(1, t.encode()) + varint(2 << 3 | 5) + struct.pack("<f", sc) +
                           varint(3 << 3) + varint(ty))
    trainer = b"".join(varint(tag << 3) + varint(v) for tag, v in
                       ((3, 2), (35, 1), (40, field(r, "tokenizer.ggml.unknown_token_id", 0)),
                        (41, field(r, "tokenizer.ggml.bos_token_id", 1)),
                        (42, field(r, "tokenizer.ggml.eos_token_id", 2))))
    prefix = bool(field(r, "tokenizer.ggml.add_space_prefix", True))
    return out + proto_bytes(2, trainer) + proto_bytes(3, varint(3 << 3) + varint(int(prefix)))


def sentencepiece_tokenizer_json(r):
    """A SentencePiece vocabulary as Hugging Face's converter writes it to
    tokenizer.json (tokenizers' SentencePieceExtractor): BPE with byte
    fallback and no scores; every split of a piece into two pieces is a
    merge, sorted stably by the piece's score (highest first); a U+2581
    prepended and spaces replaced by the normalizer."""
    tokens = string_array(r, "tokenizer.ggml.tokens")
    f = r.fields["tokenizer.ggml.scores"]
    scores = [float(f.parts[i][0]) for i in f.data]
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    for t, score in zip(tokens, scores):
        local = [(t[:c], t[c:], score) for c in range(1, len(t)) if t[:c] in ids and t[c:] in ids]
        merges += sorted(local, key=lambda m: (ids[m[0]], ids[m[1]]))
    merges.sort(key=lambda m: m[2], reverse=True)
    unk = field(r, "tokenizer.ggml.unknown_token_id", 0)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (2, 3)]
    space = "\u2581"
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": space},
                {"type": "Replace", "pattern": {"String": " "}, "content": space}]},
            "pre_tokenizer": None, "post_processor": None,
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": space}, "content": " "}, {"type": "ByteFallback"},
                {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": tokens[unk], "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                      "vocab": ids, "merges": [f"{a} {b}" for a, b, _ in merges]}}


def tokenizer_files(r):
    tokens = string_array(r, "tokenizer.ggml.tokens")
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    merges = string_array(r, "tokenizer.ggml.merges")
    pre = field(r, "tokenizer.ggml.pre", "default")
    if pre == "default":  # llama.cpp's default regex set, as Split steps
        regexes = [r"[\p{P}\$\+<=>\^~\|]+",
                   r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
                   r"\p{N}+", "[0-9][0-9][0-9]"]
        pre_tok = {"type": "Sequence", "pretokenizers":
                   [{"type": "Split", "pattern": {"Regex": x}, "behavior": "Isolated", "invert": False}
                    for x in regexes] +
                   [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                     "use_regex": False}]}
    elif pre == "gpt-4o":  # OpenAI's o200k, as GPT-OSS's tokenizer.json has it
        o200k = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                 r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
                 r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
        pre_tok = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": o200k}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    elif pre in ("gpt-2", "gpt2"):
        pre_tok = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        raise SystemExit(f"make_hf_checkpoint: pre-tokenizer {pre!r} not written by this script")
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty in (3, 4):  # control, user-defined: added tokens
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": ty == 4, "special": ty == 3})
        if t not in vocab:
            vocab[t] = i
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": pre_tok, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": merges}}
    bos, eos = field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id")
    cfg = {"add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token", False)),
           "add_eos_token": bool(field(r, "tokenizer.ggml.add_eos_token", False)),
           "bos_token": tokens[bos] if bos is not None else None,
           "eos_token": tokens[eos] if eos is not None else None}
    return tok, cfg, bos, eos


def to_bf16_bits(a):
    """float32 -> bfloat16 bits, round to nearest even."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def e4m3_values():
    """The 127 non-negative finite E4M3FN values, by code (ascending)."""
    out = []
    for c in range(127):
        e, m = c >> 3, c & 7
        out.append(m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(out)


def fp8_quantize(w, b):
    """w [rows, cols] -> (E4M3 codes u8, scales f32 [ceil(rows/b), ceil(cols/b)]):
    per block s = amax / 448, codes the nearest values to w / s."""
    rows, cols = w.shape
    vals = e4m3_values()
    sr, sc = -(-rows // b), -(-cols // b)
    scale = np.ones((sr, sc), np.float32)
    for i in range(sr):
        for j in range(sc):
            amax = float(np.abs(w[i * b:(i + 1) * b, j * b:(j + 1) * b]).max())
            if amax > 0:
                scale[i, j] = amax / 448
    full = np.repeat(np.repeat(scale, b, 0), b, 1)[:rows, :cols]
    v = np.clip(np.abs(w.astype(np.float64) / full), 0, 448)
    hi = np.clip(np.searchsorted(vals, v), 1, 126)
    idx = np.where(v - vals[hi - 1] <= vals[hi] - v, hi - 1, hi)
    codes = (idx | np.where(w < 0, 0x80, 0)).astype(np.uint8)
    return codes, scale


def fp8_dequantize(codes, scale, b):
    vals = e4m3_values()
    mag = vals[codes & 0x7F] * np.where(codes & 0x80, -1.0, 1.0)
    rows, cols = codes.shape
    full = np.repeat(np.repeat(scale.astype(np.float64), b, 0), b, 1)[:rows, :cols]
    return (mag * full).astype(np.float32)


FP4_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])

def mxfp4_quantize(w):
    """w [..., k] -> (codes [..., k] 0..15, e8m0 scales [..., k / 32]) as
    ggml's reference picks the exponent: floor(log2(amax)) - 2."""
    b = w.astype(np.float64).reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = np.abs(b).max(-1)
    e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - 2 + 127, 0)
    e = np.clip(e, 0, 254).astype(np.int64)
    v = np.abs(b) / (2.0 ** (e - 127))[..., None]
    codes = np.abs(v[..., None] - FP4_VALUES).argmin(-1) | np.where(b < 0, 8, 0)
    return codes.reshape(w.shape).astype(np.uint8), e.astype(np.uint8)


def mxfp4_dequantize(codes, scales):
    v = FP4_VALUES[codes & 7] * np.where(codes & 8, -1.0, 1.0)
    v = v.reshape(*scales.shape, 32) * (2.0 ** (scales.astype(np.int64) - 127))[..., None]
    return v.reshape(codes.shape).astype(np.float32)


def hf_mxfp4_blocks(codes):
    """codes [..., k] -> Hugging Face's blocks [..., k / 32, 16]: element 2j
    in the low nibble of byte j, 2j + 1 in the high one."""
    c = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 32, 32)
    return np.ascontiguousarray(c[..., 0::2] | (c[..., 1::2] << 4))


def gpt_oss_experts(parts, pre, out, wdt, mxfp4, dequantized):
    """One layer's GPT-OSS experts as its checkpoints hold them: gate and up
    interleaved in gate_up_proj (gate the even rows, up the odd ones), MXFP4
    as _blocks/_scales [E, out, ...] (quantized here with `mxfp4`; with
    `dequantized` their values as floats), else floats stored input-major
    [E, in, out]."""
    x = pre + "mlp.experts."
    gb, ub, db = (np.array(parts[n].data, np.float32) for n in
                  ("ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"))
    bias = np.empty((gb.shape[0], 2 * gb.shape[1]), np.float32)
    bias[:, 0::2], bias[:, 1::2] = gb, ub
    out[x + "gate_up_proj_bias"], out[x + "down_proj_bias"] = bias, db  # F32, as the GGUF's biases
    mats = {}
    for n in ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"):
        w = np.array(parts[n].data, np.float32)
        mats[n] = mxfp4_quantize(w) if mxfp4 else w
    g, u, d = (mats[n] for n in ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"))
    if isinstance(g, tuple) and not dequantized:
        codes = np.empty((g[0].shape[0], 2 * g[0].shape[1], g[0].shape[2]), np.uint8)
        scales = np.empty((g[1].shape[0], 2 * g[1].shape[1], g[1].shape[2]), np.uint8)
        codes[:, 0::2], codes[:, 1::2] = g[0], u[0]
        scales[:, 0::2], scales[:, 1::2] = g[1], u[1]
        out[x + "gate_up_proj_blocks"], out[x + "gate_up_proj_scales"] = hf_mxfp4_blocks(codes), scales
        out[x + "down_proj_blocks"], out[x + "down_proj_scales"] = hf_mxfp4_blocks(d[0]), d[1]
        return
    if isinstance(g, tuple):
        g, u, d = (mxfp4_dequantize(*m) for m in (g, u, d))
    gu = np.empty((g.shape[0], g.shape[2], 2 * g.shape[1]), np.float32)
    gu[:, :, 0::2], gu[:, :, 1::2] = g.transpose(0, 2, 1), u.transpose(0, 2, 1)
    out[x + "gate_up_proj"] = np.ascontiguousarray(gu.astype(wdt))
    out[x + "down_proj"] = np.ascontiguousarray(d.transpose(0, 2, 1).astype(wdt))


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def awq_quantize(w, g):
    """w [out, in] -> (qweight, qzeros, scales, dequantized [out, in])."""
    wt = w.astype(np.float64).T  # [in, out], AWQ's input-major layout
    k, n = wt.shape
    grp = wt.reshape(k // g, g, n)
    lo, hi = np.minimum(grp.min(1), 0), np.maximum(grp.max(1), 0)
    scales = np.maximum((hi - lo) / 15, 1e-8).astype(np.float16)
    s = scales.astype(np.float64)
    z = np.clip(np.round(-lo / s), 0, 15).astype(np.int64)
    q = np.clip(np.round(grp / s[:, None, :]) + z[:, None, :], 0, 15).astype(np.int64)
    deq = ((q - z[:, None, :]) * s[:, None, :]).reshape(k, n).T.astype(np.float32)

    def pack(v):  # [rows, n] nibbles -> int32 [rows, n / 8]
        v = v.reshape(v.shape[0], n // 8, 8)
        words = np.zeros(v.shape[:2], np.uint32)
        for i, col in enumerate(AWQ_ORDER):
            words |= (v[:, :, col].astype(np.uint32) << (4 * i))
        return words.view(np.int32)

    c = np.ascontiguousarray  # safetensors writes an array's memory as it lies
    return c(pack(q.reshape(k, n))), c(pack(z)), c(scales), c(deq)


def save(tensors, path, dtype, fp8=()):
    """fp8: names of u8 tensors that hold E4M3 codes (numpy has no FP8:
    written as U8 and the header's dtype renamed)."""
    if dtype != "bf16" and not fp8:
        save_file(tensors, path)
        return
    bf16 = {k for k, v in tensors.items() if dtype == "bf16" and k not in fp8 and v.dtype.kind == "f"}
    bits = {k: to_bf16_bits(v) if k in bf16 else v for k, v in tensors.items()}
    save_file(bits, path)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    for k, v in header.items():
        if k in fp8:
            v["dtype"] = "F8_E4M3"
        elif k in bf16:
            v["dtype"] = "BF16"
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="f16", choices=["f16", "f32", "bf16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--llama3-rope", type=int, default=0, metavar="ORIG_CTX",
                    help="declare Llama 3.1's rope scaling (factor 8) with this original context")
    ap.add_argument("--fp8", type=int, default=0, metavar="B",
                    help="linear layers as E4M3 with a scale per B x B block")
    ap.add_argument("--awq", type=int, default=0, metavar="G",
                    help="linear layers as AutoAWQ int4 with groups of G inputs")
    ap.add_argument("--int8", action="store_true",
                    help="linear layers as compressed-tensors int8 w8a8 (a scale per output channel)")
    ap.add_argument("--mxfp4", action="store_true",
                    help="gpt-oss: experts as MXFP4 blocks and scales, as its release holds them")
    ap.add_argument("--tokenizer-json", action="store_true",
                    help="a SentencePiece vocabulary as tokenizer.json (scoreless, as converted folders "
                         "without tokenizer.model hold it) instead of tokenizer.model")
    ap.add_argument("--multimodal", action="store_true",
                    help="gemma3: a Gemma3ForConditionalGeneration folder (text model nested)")
    ap.add_argument("--dequantized", action="store_true",
                    help="with --fp8 or --awq: write the quantized values dequantized, as F32")
    a = ap.parse_args()
    r = GGUFReader(a.gguf)
    arch = field(r, "general.architecture")
    model_type, cls = HF_MODEL_TYPE[arch]
    k = lambda key, d=None: field(r, f"{arch}.{key}", d)
    # A llama with experts is Mixtral: its own model type and names.
    mixtral = arch == "llama" and k("expert_count") is not None
    if mixtral:
        model_type, cls = "mixtral", "MixtralForCausalLM"
    n_head, n_head_kv = k("attention.head_count"), k("attention.head_count_kv")
    wdt = {"f16": np.float16, "f32": np.float32, "bf16": np.float32}[a.dtype]

    out = {}
    fp8_names = set()

    def linear(name, w):
        """A linear layer's weight, quantized with --fp8 or --awq (AutoAWQ
        leaves lm_head as it is)."""
        if a.awq and name != "lm_head.weight":
            qweight, qzeros, scales, deq = awq_quantize(w, a.awq)
            if a.dequantized:
                out[name] = deq
                return
            base = name[: -len(".weight")]
            out.update({base + ".qweight": qweight, base + ".qzeros": qzeros, base + ".scales": scales})
            return
        if a.int8 and name != "lm_head.weight":
            w32 = w.astype(np.float32)
            scale = np.maximum(np.abs(w32).max(1, keepdims=True) / 127, 1e-12).astype(np.float32)
            q = np.clip(np.round(w32 / scale), -127, 127).astype(np.int8)
            if a.dequantized:
                out[name] = np.ascontiguousarray(q.astype(np.float32) * scale)
                return
            out[name] = np.ascontiguousarray(q)
            out[name + "_scale"] = scale
            return
        if not a.fp8:
            out[name] = np.ascontiguousarray(w.astype(np.float32) if a.dequantized else w)
            return
        codes, scale = fp8_quantize(w.astype(np.float32), a.fp8)
        if a.dequantized:
            out[name] = fp8_dequantize(codes, scale, a.fp8)
            return
        out[name] = codes
        out[name + "_scale_inv"] = scale
        fp8_names.add(name)

    n_vocab = None
    tied = True
    experts = {}  # gpt-oss: layer -> its expert tensors, written whole
    rope_factors = {}  # phi3's LongRoPE: config.json's, not tensors
    for t in r.tensors:
        name = t.name
        if name.startswith("rope_factors_"):
            rope_factors[name[len("rope_factors_"):-len(".weight")]] = [float(x) for x in np.array(t.data)]
            continue
        if arch == "gpt-oss" and "_exps." in name:
            _, layer, rest = name.split(".", 2)
            experts.setdefault(layer, {})[rest] = t
            continue
        w = np.array(t.data)
        if name == "token_embd.weight":
            n_vocab = w.shape[0]
        if name == "output.weight":
            tied = False
        # 1-D tensors and the router stay F32 as in the GGUF (HF allows mixed dtypes).
        if arch == "gemma3" and name.endswith("norm.weight"):
            w = w - 1
        keep_f32 = w.ndim == 1 or name.endswith("ffn_gate_inp.weight")
        w = w.astype(np.float32 if keep_f32 and a.dtype != "bf16" else wdt)
        if name.startswith("blk."):
            _, layer, rest = name.split(".", 2)
            pre = f"model.layers.{layer}."
            if rest in EXPERT_NAMES:
                for e in range(w.shape[0]):
                    if mixtral:
                        linear(f"{pre}block_sparse_moe.experts.{e}.{MIXTRAL_EXPERTS[rest]}.weight", w[e])
                    else:
                        linear(f"{pre}mlp.experts.{e}.{EXPERT_NAMES[rest]}.weight", w[e])
                continue
            if mixtral and rest == "ffn_gate_inp.weight":
                out[pre + "block_sparse_moe.gate.weight"] = np.ascontiguousarray(w)
                continue
            if arch == "llama" and rest.startswith("attn_q."):
                w = unpermute(w, n_head)
            if arch == "llama" and rest.startswith("attn_k."):
                w = unpermute(w, n_head_kv)
            hf = GEMMA_NAMES.get(rest, LAYER_NAMES.get(rest)) if arch == "gemma3" else \
                GPT_OSS_NAMES.get(rest, LAYER_NAMES.get(rest)) if arch == "gpt-oss" else \
                PHI3_NAMES.get(rest, LAYER_NAMES.get(rest)) if arch == "phi3" else LAYER_NAMES[rest]
            if w.ndim == 2 and rest != "ffn_gate_inp.weight":
                linear(pre + hf, w)
            else:
                out[pre + hf] = np.ascontiguousarray(w)
        else:
            hf = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                  "output.weight": "lm_head.weight"}[name]
            if name == "output.weight":
                linear(hf, w)
            else:
                out[hf] = np.ascontiguousarray(w)

    for layer, parts in experts.items():
        gpt_oss_experts(parts, f"model.layers.{layer}.", out, wdt, a.mxfp4, a.dequantized)
        if a.dequantized:  # the reference holds F32, as the other --dequantized folders
            for n in (f"model.layers.{layer}.mlp.experts.gate_up_proj", f"model.layers.{layer}.mlp.experts.down_proj"):
                out[n] = out[n].astype(np.float32)
    os.makedirs(a.out, exist_ok=True)
    cfg = {"architectures": [cls], "model_type": model_type, "hidden_size": k("embedding_length"),
           "num_hidden_layers": k("block_count"), "num_attention_heads": n_head,
           "num_key_value_heads": n_head_kv, "max_position_embeddings": k("context_length"),
           "rms_norm_eps": k("attention.layer_norm_rms_epsilon"), "rope_theta": k("rope.freq_base"),
           "vocab_size": n_vocab, "tie_word_embeddings": tied, "torch_dtype": {"f16": "float16",
           "f32": "float32", "bf16": "bfloat16"}[a.dtype], "intermediate_size": k("feed_forward_length")}
    if a.fp8 and not a.dequantized:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [a.fp8, a.fp8]}
    if a.int8 and not a.dequantized:
        scheme = {"num_bits": 8, "type": "int", "symmetric": True}
        cfg["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {
                "targets": ["Linear"], "weights": dict(scheme, strategy="channel", dynamic=False),
                "input_activations": dict(scheme, strategy="token", dynamic=True)}}}
    if a.awq and not a.dequantized:
        cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": a.awq, "zero_point": True,
                                      "version": "gemm"}
    if a.llama3_rope:
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": a.llama3_rope}
    if k("attention.key_length") is not None:
        cfg["head_dim"] = k("attention.key_length")
    if arch == "gemma3":
        cfg.update({"sliding_window": k("attention.sliding_window"), "sliding_window_pattern": 6,
                    "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": k("attention.key_length"),
                    "hidden_activation": "gelu_pytorch_tanh"})
    if arch == "gpt-oss":
        n_layer = k("block_count")
        cfg.update({"num_local_experts": k("expert_count"), "num_experts_per_tok": k("expert_used_count"),
                    "experts_per_token": k("expert_used_count"),
                    "intermediate_size": k("expert_feed_forward_length"),
                    "sliding_window": k("attention.sliding_window"), "swiglu_limit": 7.0, "attention_bias": True,
                    "layer_types": ["full_attention" if i % 2 else "sliding_attention" for i in range(n_layer)],
                    "rope_scaling": {"rope_type": "yarn", "factor": k("rope.scaling.factor"), "beta_fast": 32.0,
                                     "beta_slow": 1.0, "truncate": False,
                                     "original_max_position_embeddings": k("rope.scaling.original_context_length")}})
        if a.mxfp4 and not a.dequantized:
            cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
                "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    if rope_factors:
        cfg.update({"original_max_position_embeddings": k("rope.scaling.original_context_length"),
                    "rope_scaling": {"type": "longrope", "long_factor": rope_factors["long"],
                                     "short_factor": rope_factors["short"]}})
    if mixtral:
        cfg.update({"num_local_experts": k("expert_count"), "num_experts_per_tok": k("expert_used_count")})
    if arch == "qwen3moe":
        cfg.update({"num_experts": k("expert_count"), "num_experts_per_tok": k("expert_used_count"),
                    "moe_intermediate_size": k("expert_feed_forward_length"), "norm_topk_prob": True})
    if a.multimodal:
        gemma3_defaults = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                           "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                           "head_dim": 256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
                           "rope_theta": 1000000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
                           "tie_word_embeddings": True}
        text = {k: v for k, v in cfg.items() if k not in ("architectures", "torch_dtype")
                and gemma3_defaults.get(k, object()) != v}
        text["model_type"] = "gemma3_text"
        cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
               "text_config": text, "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8},
               "mm_tokens_per_image": 256, "torch_dtype": cfg["torch_dtype"]}
        out = {("language_model.model." + n[len("model."):] if n.startswith("model.") else
                "language_model." + n): v for n, v in out.items()}
        rng = np.random.default_rng(0)
        out["vision_tower.vision_model.embeddings.patch_embedding.weight"] = \
            rng.standard_normal((8, 3, 2, 2)).astype(wdt)
        out["multi_modal_projector.mm_input_projection_weight"] = rng.standard_normal((8, 4)).astype(wdt)
    files = [("config.json", cfg)]
    if field(r, "tokenizer.ggml.model") == "llama" and a.tokenizer_json:
        files += [("tokenizer.json", sentencepiece_tokenizer_json(r)),
                  ("tokenizer_config.json", {"add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token", True))})]
    elif field(r, "tokenizer.ggml.model") == "llama":  # SentencePiece: tokenizer.model
        with open(os.path.join(a.out, "tokenizer.model"), "wb") as f:
            f.write(sentencepiece_model(r))
        files.append(("tokenizer_config.json",
                      {"add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token", True))}))
    else:
        tok, tok_cfg, bos, eos = tokenizer_files(r)
        if bos is not None:
            cfg["bos_token_id"] = bos
        if eos is not None:
            cfg["eos_token_id"] = eos
        files += [("tokenizer.json", tok), ("tokenizer_config.json", tok_cfg)]
    for name, obj in files:
        with open(os.path.join(a.out, name), "w") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False)

    names = list(out)
    if a.shards == 1:
        save(out, os.path.join(a.out, "model.safetensors"), a.dtype, fp8_names)
        return
    weight_map = {}
    for s in range(a.shards):
        shard = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
        part = {n: out[n] for n in names[s::a.shards]}
        save(part, os.path.join(a.out, shard), a.dtype, fp8_names)
        weight_map.update({n: shard for n in part})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(v.nbytes for v in out.values())}, "weight_map": weight_map},
                  f, indent=1)


if __name__ == "__main__":
    main()
