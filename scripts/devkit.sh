#!/usr/bin/env bash
# Packs a release build of mkevolve (and the C test runner) with the shared libraries a bare GPU
# machine lacks (libuv, cJSON, tree-sitter, SQLite) into .devkit/, so a
# remote machine with only the system's libc/libcurl and its own Python,
# torch and triton can run it:
#   LD_LIBRARY_PATH=.devkit/lib MKEVOLVE_PYTHON=python3 \
#   MKEVOLVE_WORKER_PATH=$PWD/engine/worker/python .devkit/mkevolve ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
MK_BUILD_DIR=build-release MK_BUILD_TYPE=RelWithDebInfo bash scripts/setup.sh >/dev/null
rm -rf .devkit && mkdir -p .devkit/lib
cp build-release/mkevolve .devkit/
# The C test runner too: device scripts use it to write fixtures (e.g. the
# composed CUDA ModelNew files of scripts/device/compose-cuda.sh).
cp build-release/tests/mk_tests .devkit/
for lib in libuv.so.1 libcjson.so.1 libtree-sitter.so.0 libsqlite3.so.0; do
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF}' | head -n 1 || true)
  [ -n "$path" ] && cp -L "$path" .devkit/lib/
done
# cJSON's header: the native worker is built on the GPU machine against its
# own libtorch (scripts/device/native-worker.sh), which has no cJSON headers.
mkdir -p .devkit/include/cjson
cp /usr/include/cjson/cJSON.h .devkit/include/cjson/
echo "devkit: $(ls .devkit .devkit/lib | tr '\n' ' ')"
