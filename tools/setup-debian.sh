#!/usr/bin/env bash
# Installs Kiln's build dependencies from Debian packages when they are
# missing (Debian 12 "bookworm" or newer; run as root, or with sudo on PATH).
# CUDA is optional and never installed here: with /usr/local/cuda present
# the CUDA target is built, without it it is simply absent.
#
# --test also installs the independent references the tests compare with:
# numpy, a pinned llama-cpp-python (llama.cpp built from source by pip),
# the pinned gguf and safetensors packages, so the llama.cpp parity tests
# run instead of skipping, and the clients and checkers of the serving
# tests: the official openai client, jinja2 (chat templates as Hugging Face
# renders them) and jsonschema. And what the Python package (python/) is
# built and tested with: nanobind (the build then makes the module),
# scikit-build-core (`pip install .`) and pytest.
set -euo pipefail

LLAMA_CPP_PYTHON=0.3.36
GGUF=0.17.1
SAFETENSORS=0.8.0
OPENAI=3.63.0
JINJA2=3.1.6
JSONSCHEMA=4.26.0
NANOBIND=2.9.2
SCIKIT_BUILD_CORE=0.11.6
PYTEST=8.4.2
test_deps=0
[ "${1:-}" = "--test" ] && test_deps=1

packages=(cmake make g++ pkg-config llvm-19-dev libfmt-dev libtomlplusplus-dev nlohmann-json3-dev
          libcpp-httplib-dev catch2 libbenchmark-dev)
[ $test_deps -eq 1 ] && ! command -v python3 >/dev/null && packages+=(python3)
[ $test_deps -eq 1 ] && ! python3 -m pip --version >/dev/null 2>&1 && packages+=(python3-pip)

run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
else
  echo "setup: installing ${missing[*]}"
  run apt-get update -qq
  DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ $test_deps -eq 1 ] || exit 0
# llama.cpp's AMX matmul crashes on hosts that report AMX to a guest without
# granting it (a segfault in ggml_backend_amx_mul_mat): build it without.
# A build that has AMX compiled in is replaced.
have_llama_cpp() {
  python3 - "$LLAMA_CPP_PYTHON" <<'PY' 2>/dev/null
import sys, numpy, llama_cpp
ok = llama_cpp.__version__ == sys.argv[1] and b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info()
sys.exit(0 if ok else 1)
PY
}
have_python_refs() {
  python3 - "$GGUF" "$SAFETENSORS" "$OPENAI" "$JINJA2" "$JSONSCHEMA" "$NANOBIND" "$SCIKIT_BUILD_CORE" \
    "$PYTEST" <<'PY' 2>/dev/null
import sys, importlib.metadata as m
names = ["gguf", "safetensors", "openai", "jinja2", "jsonschema", "nanobind", "scikit-build-core",
         "pytest"]
sys.exit(0 if [m.version(n) for n in names] == sys.argv[1:] else 1)
PY
}
pip_install() {
  run env CMAKE_ARGS="${cmake_args:-}" python3 -m pip install -q --no-cache-dir --break-system-packages "$@"
}
if have_python_refs; then
  echo "setup: gguf, safetensors, openai, jinja2, jsonschema, nanobind, scikit-build-core and pytest present"
else
  pip_install "gguf==$GGUF" "safetensors==$SAFETENSORS" "openai==$OPENAI" "jinja2==$JINJA2" \
    "jsonschema==$JSONSCHEMA" "nanobind==$NANOBIND" "scikit-build-core==$SCIKIT_BUILD_CORE" \
    "pytest==$PYTEST"
  have_python_refs || { echo "setup: a pinned Python reference did not install" >&2; exit 1; }
fi
# Real vocabularies (Llama 3's 128k tokens and larger) and the chat
# templates of real models, as llama.cpp keeps them for its own tests: read
# by the tests from the pinned llama-cpp-python source package (PyPI), never
# copied into Kiln. KILN_LLAMACPP_DATA moves them.
data="${KILN_LLAMACPP_DATA:-$HOME/.cache/kiln/llama.cpp}"
if [ "$(cat "$data/.version" 2>/dev/null)" = "$LLAMA_CPP_PYTHON" ]; then
  echo "setup: llama.cpp's vocabularies and chat templates present in $data"
else
  echo "setup: fetching llama.cpp's vocabularies and chat templates into $data"
  sdist=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary :all: -d "$sdist" "llama-cpp-python==$LLAMA_CPP_PYTHON"
  tar xzf "$sdist"/llama_cpp_python-*.tar.gz -C "$sdist" --wildcards \
    '*/vendor/llama.cpp/models/ggml-vocab-*' '*/vendor/llama.cpp/models/templates/*'
  mkdir -p "$data"
  cp -r "$sdist"/llama_cpp_python-*/vendor/llama.cpp/models/. "$data"/
  echo "$LLAMA_CPP_PYTHON" > "$data/.version"
  rm -rf "$sdist"
fi
if have_llama_cpp; then
  echo "setup: numpy and llama-cpp-python $LLAMA_CPP_PYTHON present"
  exit 0
fi
echo "setup: building llama-cpp-python $LLAMA_CPP_PYTHON (llama.cpp from source, a few minutes)"
flags=""
[ "$(uname -m)" = "x86_64" ] && flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake_args="-DCMAKE_C_FLAGS='$flags' -DCMAKE_CXX_FLAGS='$flags'"
pip_install numpy
pip_install --force-reinstall --no-deps "llama-cpp-python==$LLAMA_CPP_PYTHON"
pip_install "llama-cpp-python==$LLAMA_CPP_PYTHON"  # its remaining dependencies
have_llama_cpp || { echo "setup: llama-cpp-python did not install" >&2; exit 1; }
