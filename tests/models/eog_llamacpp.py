#!/usr/bin/env python3
"""The tokens that end a generation are llama.cpp's.

For every vocabulary llama.cpp ships for its tokenizer tests that Kiln
reads (extracted by `tools/setup-debian.sh --test` into
~/.cache/kiln/llama.cpp: Llama 3's <|eot_id|>/<|eom_id|>, Qwen's <|im_end|>
and FIM tokens, Phi-3's <|end|>, ...), the shared vocabularies, and small
vocabularies written here for the rules those lack (GPT-OSS's harmony
markers: <|return|> and <|call|> end a generation, <|end|> does not; </s>
beside <|tool_response>; an end-of-turn id given by the metadata),
`kiln tokenize --eog` must list exactly the ids llama.cpp's
llama_vocab_is_eog accepts. Exit 77 (skip) without llama-cpp-python or gguf.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

try:
    import gguf
    import llama_cpp
except ImportError as e:
    print(f"skipped: {e.name} is not installed")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))


def llamacpp_eog(path):
    quiet = llama_cpp.llama_log_callback(lambda level, text, user: None)
    llama_cpp.llama_log_set(quiet, None)
    p = llama_cpp.llama_model_default_params()
    p.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), p)
    if not model:
        return None  # a vocabulary this llama.cpp does not load
    vocab = llama_cpp.llama_model_get_vocab(model)
    ids = [i for i in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    llama_cpp.llama_model_free(model)
    return ids


def byte_chars():
    """GPT-2's printable stand-ins for the 256 bytes."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def write_vocab(path, specials, eos, eot=None):
    """A byte-level BPE vocabulary: the 256 bytes, one merge, `specials` as
    control tokens; eos (and eot) by text."""
    tokens = byte_chars() + ["\u0120t"] + specials
    types = [1] * (len(tokens) - len(specials)) + [3] * len(specials)
    w = gguf.GGUFWriter(path, "llama")
    for key, value in (("context_length", 64), ("embedding_length", 64), ("block_count", 1),
                       ("feed_forward_length", 128), ("attention.head_count", 1)):
        w.add_uint32(f"llama.{key}", value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["\u0120 t"])
    w.add_eos_token_id(tokens.index(eos))
    if eot:
        w.add_uint32("tokenizer.ggml.eot_token_id", tokens.index(eot))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--vocab-dir", default=os.path.join(HERE, "..", "..", "..", "shared", "data", "vocab"))
    ap.add_argument("--llamacpp-dir", default=os.path.expanduser("~/.cache/kiln/llama.cpp"))
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(a.llamacpp_dir, "ggml-vocab-*.gguf")) +
                   glob.glob(os.path.join(a.vocab_dir, "ggml-vocab-*.gguf")))
    failed = compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        written = []
        for name, specials, eos, eot in (
                ("harmony", ["<|endoftext|>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>",
                             "<|return|>", "<|call|>", "<|fim_pad|>", "<|file_sep|>"], "<|return|>", None),
                ("tool-response", ["<bos>", "<eos>", "</s>", "<|tool_response>", "<turn|>"], "<eos>", None),
                ("eot-by-metadata", ["<s>", "</s>", "<|custom_end|>"], "</s>", "<|custom_end|>")):
            written.append(os.path.join(tmp, f"vocab-{name}.gguf"))
            write_vocab(written[-1], specials, eos, eot)
        for path in paths + written:
            want = llamacpp_eog(path)
            r = subprocess.run([a.kiln, "tokenize", "-m", path, "--eog"], capture_output=True, text=True)
            if want is None:
                print(f"skip {os.path.basename(path)}: llama.cpp does not load it")
                continue
            if r.returncode != 0:
                # A vocabulary Kiln refuses (a tokenizer model it lacks) is named, not guessed.
                print(f"skip {os.path.basename(path)}: {r.stderr.strip().splitlines()[-1]}")
                continue
            got = [int(x) for x in r.stdout.split()]
            ok = got == want
            compared += 1
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(path):36s} {len(want)} ids"
                  + ("" if ok else f"\n  llama.cpp {want}\n  kiln      {got}"))
    if compared < 10:
        print(f"only {compared} vocabularies compared")
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
