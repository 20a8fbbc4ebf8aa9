#!/usr/bin/env bash
# Sourced on the GPU machine after env.sh: builds engine/worker/native against
# this machine's libtorch (g++, no CMake needed; cJSON from the devkit) into
# $NATIVE_BIN (default /tmp/mkworker-native), one object per source in
# parallel (libtorch's headers make each a slow compile), and exports
# MKEVOLVE_NATIVE_WORKER so sessions start it. The build's output is in
# $OUT/native-build.txt.
NATIVE_BIN=${NATIVE_BIN:-/tmp/mkworker-native}
native_t=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
native_abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
native_start=$(date +%s)
mkdir -p "$NATIVE_BIN.o"
ls "$root"/engine/worker/native/*.cpp | xargs -P "$(nproc)" -I{} sh -c \
  'g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI='"$native_abi"' -c "{}" -o '"$NATIVE_BIN"'.o/$(basename "{}" .cpp).o \
   -isystem '"$native_t/include"' -isystem '"$native_t/include/torch/csrc/api/include"' -I'"$root/.devkit/include"'' \
  2>&1 | tail -20 | tee "$OUT/native-build.txt"
g++ "$NATIVE_BIN".o/*.o -o "$NATIVE_BIN" \
  -L"$native_t/lib" -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10 -Wl,--as-needed \
  "$root/.devkit/lib/libcjson.so.1" -ldl -Wl,-rpath,"$native_t/lib" -Wl,-rpath,"$root/.devkit/lib" \
  2>&1 | tail -20 | tee -a "$OUT/native-build.txt"
echo "build: $(( $(date +%s) - native_start )) s, $(stat -c %s "$NATIVE_BIN" 2>/dev/null || echo no) bytes: mkworker-native" |
  tee -a "$OUT/native-build.txt"
[ -x "$NATIVE_BIN" ] && export MKEVOLVE_NATIVE_WORKER="$NATIVE_BIN"
