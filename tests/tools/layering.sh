#!/usr/bin/env bash
# The folders' one-way data flow (ARCHITECTURE.md): each folder includes only
# itself and the layers below it. models/ in particular reaches a backend's
# machine only through runtime/ (its kernel policy, its buffers), never
# through targets/ or codegen/.
set -uo pipefail
root="${1:?usage: layering.sh REPO_ROOT}"
declare -A allowed=(
  [ir]="ir"
  [codegen]="ir codegen"
  [targets]="ir codegen targets"
  [kernels]="ir kernels"
  [runtime]="ir codegen targets kernels runtime"
  [models]="ir kernels runtime models"
)
bad=0
for dir in "${!allowed[@]}"; do
  while IFS= read -r hit; do
    file="${hit%%:*}"
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$hit")
    if [[ " ${allowed[$dir]} " != *" $target "* ]]; then
      echo "layering: $file includes $target/ (a $dir/ file may include only: ${allowed[$dir]})"
      bad=1
    fi
  done < <(cd "$root" && grep -rnE '^#include "[a-z_]+/' "$dir" --include='*.h' --include='*.cpp')
done
[[ $bad == 0 ]] && echo "layering: every include follows the data flow"
exit $bad
