#!/usr/bin/env bash
# Installs everything MKEvolve needs on a fresh Debian/Ubuntu machine and
# builds it: system libraries (apt, when root), the Python environment for
# the runtime workers (.venv), the tree-sitter grammar, and the C build.
#   scripts/setup.sh            release build in build/
#   MK_BUILD_DIR=b MK_SANITIZE=ON scripts/setup.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build_dir=${MK_BUILD_DIR:-build}
sanitize=${MK_SANITIZE:-OFF}
build_type=${MK_BUILD_TYPE:-RelWithDebInfo}

apt_pkgs=(build-essential cmake ninja-build pkg-config libuv1-dev libcjson-dev
          libcurl4-openssl-dev libtree-sitter-dev libsqlite3-dev)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm and python3 -m venv may come from outside Debian (nodesource, pyenv).
command -v npm >/dev/null || missing+=(npm)
python3 -c "import venv, ensurepip" 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

python=${MK_PYTHON_FOR_VENV:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv (torch CPU, triton, numpy, pytest, ruff)"
  "$python" -m venv .venv
fi
if ! .venv/bin/python -c "import torch, triton, numpy, pytest" 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check -r engine/worker/requirements.txt
fi

# NVRTC for the CUDA C++ backend (engine/backend compiles CUDA candidates with
# it; no GPU needed). The toolkit on these machines may lack libnvrtc, so the
# wheel (a registry package) provides it inside .venv, where CMake looks.
# MK_NO_NVRTC=1 skips it: the backend then reports itself unavailable and its
# tests skip with that reason.
if [ "${MK_NO_NVRTC:-0}" != 1 ] && ! ls .venv/lib/python*/site-packages/nvidia/cu*/lib/libnvrtc.so.* >/dev/null 2>&1; then
  echo "setup: installing NVRTC (nvidia-cuda-nvrtc) into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r engine/backend/requirements-nvrtc.txt ||
    echo "setup: NVRTC not installed; the CUDA C++ backend will be unavailable" >&2
fi

bash scripts/fetch-grammar.sh

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE="$build_type" \
  -DMK_SANITIZE="$sanitize" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "setup: built $build_dir/mkevolve"
