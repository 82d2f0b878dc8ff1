#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the very llama.cpp that the installed
# llama-cpp-python vendors (its source distribution on PyPI), so that
# tools/bench_serving.py can compare `kiln serve` with llama.cpp's server at
# the same number of parallel slots (llama-cpp-python's own server runs one
# request at a time), and other llama.cpp programs the benchmarks compare
# with (llama-speculative: tools/bench_speculative.py). Prints the binary's
# path.
#
#   tools/build-llama-server.sh [WORKDIR [TARGET]]   (default: build/llama-server llama-server)
set -euo pipefail
work=$(realpath -m "${1:-build/llama-server}")
target=${2:-llama-server}
version=$(python3 -c 'import importlib.metadata as m; print(m.version("llama-cpp-python"))')
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
bin="$src/build/bin/$target"
# The server is a tool; the others are examples.
examples=$([[ $target == llama-server ]] && echo OFF || echo ON)
if [[ ! -x $bin ]]; then
  mkdir -p "$work"
  if [[ ! -d $src ]]; then
    python3 -m pip download --quiet "llama-cpp-python==$version" --no-deps --no-binary :all: -d "$work" >&2
    tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
  fi
  # The web UI and HTTPS are not needed for a benchmark over loopback.
  cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES="$examples" -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >&2
  cmake --build "$src/build" -j2 --target "$target" >&2
fi
echo "$bin"
