#!/usr/bin/env bash
# Several processes compiling the same kernels into one cache directory at
# once must all succeed and leave only valid entries.
set -euo pipefail
kiln="$1"
export KILN_CACHE_DIR="$(mktemp -d)"
trap 'rm -rf "$KILN_CACHE_DIR"' EXIT
pids=()
for i in 1 2 3 4; do "$kiln" list --compile > "$KILN_CACHE_DIR/out.$i" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
n=$("$kiln" list | wc -l)
"$kiln" cache stats
"$kiln" cache stats | grep -q "entries    $n (0 corrupt)"
! ls "$KILN_CACHE_DIR"/cpu-v1/*.tmp.* 2>/dev/null
"$kiln" list --compile | grep -q "($n from the disk cache)"
echo "concurrent cache: ok"
