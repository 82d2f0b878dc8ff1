#!/usr/bin/env bash
# Installs Kiln's build dependencies from Debian packages when they are
# missing (Debian 12 "bookworm" or newer; run as root, or with sudo on PATH).
# CUDA is optional and never installed here: with /usr/local/cuda present
# the CUDA target is built, without it it is simply absent.
set -euo pipefail

packages=(cmake make g++ llvm-19-dev libfmt-dev libtomlplusplus-dev catch2 libbenchmark-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi

run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
echo "setup: installing ${missing[*]}"
run apt-get update -qq
DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq --no-install-recommends "${missing[@]}"
