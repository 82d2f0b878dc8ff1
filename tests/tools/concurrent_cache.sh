#!/usr/bin/env bash
# Several processes compiling the same kernels into one cache directory at
# once must all succeed and leave only valid entries. Eight kernels (each
# written by four processes racing) rather than the library: the race is
# per entry, and every kernel's compile took 2.5 minutes of CI.
set -euo pipefail
kiln="$1"
export KILN_CACHE_DIR="$(mktemp -d)"
trap 'rm -rf "$KILN_CACHE_DIR"' EXIT
pids=()
kernels="add fill convert scaled_add glu rmsnorm softmax get_rows"
for i in 1 2 3 4; do "$kiln" list --compile $kernels > "$KILN_CACHE_DIR/out.$i" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
n=$("$kiln" list $kernels | wc -l)
[ "$n" -eq 8 ]
"$kiln" cache stats
"$kiln" cache stats | grep -q "entries    $n (0 corrupt)"
! ls "$KILN_CACHE_DIR"/cpu-v1/*.tmp.* 2>/dev/null
"$kiln" list --compile $kernels | grep -q "($n from the disk cache)"
echo "concurrent cache: ok"
