#!/usr/bin/env bash
# One command on a GPU: Kiln's GPU tests, its kernel families against the
# device's own rooflines, and model throughput, all measured in this run.
#
#   bash tools/gpu-bench.sh [cuda|cuda-sim]
#
# Needs a built tree (KILN_BUILD, default ./build) and no network. Steps:
#   1. the [gpu] tests: every library kernel and model forwards on the GPU
#      against the interpreter;
#   2. `kiln bench --device`: the read_peak (bandwidth) and mma_peak (tile
#      dot) probe kernels, then decode qgemv per format, split-K decode
#      attention and prompt attention, each as a fraction of its probe;
#   3. `kiln run --device` on three generated models (random weights of real
#      shapes): TinyLlama-1.1B Q4_K_M, Qwen3-0.6B Q8_0 and an 8-layer
#      Qwen3-30B-A3B Q4_K_M: prefill and decode tok/s for a 512-token prompt
#      and 128 generated tokens, and for the dense models decode as a
#      fraction of the roofline read_peak / (weight bytes + KV bytes read per
#      token).
# cuda-sim runs the same steps as a dry run (small sizes, one tiny model,
# no [gpu] tests): a check of this script, not a speed.
set -euo pipefail

device=${1:-cuda}
case "$device" in
  cuda | cuda-sim) ;;
  *) echo "gpu-bench: device must be cuda or cuda-sim, got '$device'" >&2; exit 2 ;;
esac
build=${KILN_BUILD:-build}
kiln=$build/tools/kiln
if [ ! -x "$kiln" ]; then
  echo "gpu-bench: no $kiln: build first (see README)" >&2
  exit 2
fi
work=${KILN_GPU_BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
start=$(date +%s)
say() { printf '\n== %s (%ds)\n' "$1" $(($(date +%s) - start)); }

if [ "$device" = cuda ]; then
  say "[gpu] tests"
  "$build/tests/test_kernels" "[gpu]"
  "$build/tests/test_models" "[gpu]"
fi

say "kernels against the device's rooflines (kiln bench --device $device)"
"$kiln" bench --device "$device" | tee "$work/bench.txt"
probe_gbps=$(awk '$1 == "probe" && $2 == "read_peak," { print $(NF-1) }' "$work/bench.txt")

say "models (kiln run --device $device)"
if [ "$device" = cuda ]; then
  models=("llama tinyllama-1.1b q4_k_m 22" "qwen3 small q8_0 28 --tie-embeddings"
          "qwen3moe 30b-a3b q4_k_m 8")
  prompt=512 gen=128
else
  models=("llama tiny q4_k_m 2") prompt=16 gen=4
fi
tokens=$(seq -s, 1 "$prompt")
printf '%-34s %8s %8s %10s %10s %9s\n' model GiB prefill decode roofline fraction
for m in "${models[@]}"; do
  read -r arch preset type layers extra <<<"$m"
  gguf="$work/$arch-$preset-$type-$layers.gguf"
  [ -f "$gguf" ] || "$kiln" gen-model --arch "$arch" --preset "$preset" --type "$type" \
    --layers "$layers" ${extra:-} -o "$gguf" >/dev/null
  ctx=$((prompt + gen))
  "$kiln" run -m "$gguf" --device "$device" --tokens "$tokens" -n "$gen" --ignore-eos \
    --ctx "$ctx" >"$work/run.txt" 2>"$work/run.err" || { cat "$work/run.err" >&2; exit 1; }
  python3 - "$gguf" "$arch" "$prompt" "$gen" "$probe_gbps" "$work/run.txt" <<'EOF'
import json, os, sys
gguf, arch, prompt, gen, probe, run = sys.argv[1:7]
m = json.loads(open(run, errors="replace").read().strip().splitlines()[-1])
weights = os.path.getsize(gguf)
# KV rows a decode step reads, on average over the generated tokens.
kv = m["kv_cache_mib"] * 2**20 * (int(prompt) + int(gen) / 2) / (int(prompt) + int(gen))
name = os.path.basename(gguf)[:-5]
if arch == "qwen3moe":  # a token reads only its routed experts: no file-size roofline
    roof, frac = "-", "-"
else:
    r = float(probe) * 1e9 / (weights + kv)
    roof, frac = f"{r:.1f}", f"{m['decode_tok_s'] / r:.2f}"
print(f"{name:34s} {weights / 2**30:8.2f} {m['prefill_tok_s']:8.1f} {m['decode_tok_s']:10.1f} "
      f"{roof:>10s} {frac:>9s}")
EOF
done
say "done; files in $work"
