#!/usr/bin/env bash
# Issue #18, the native worker on a GPU: builds engine/worker/native against
# this machine's libtorch (g++, no CMake needed; cJSON from the devkit), then
# the GPU test: a cubin compiled with NVRTC, launched by the worker through
# the driver API on tensors made from seeds, equals torch's result from the
# same seeds; and the time from start to the hello answer.
# Run from the repository root after scripts/devkit.sh; carry: .devkit
set -uo pipefail
source "$(dirname "$0")/env.sh"
T=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
bin=/tmp/mkworker-native
start=$(date +%s)
g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI="$abi" "$root"/engine/worker/native/*.cpp \
  -o "$bin" -isystem "$T/include" -isystem "$T/include/torch/csrc/api/include" -I"$root/.devkit/include" \
  -L"$T/lib" -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10 -Wl,--as-needed \
  "$root/.devkit/lib/libcjson.so.1" -ldl -Wl,-rpath,"$T/lib" -Wl,-rpath,"$root/.devkit/lib" \
  2>&1 | tail -20 | tee "$OUT/native-build.txt"
echo "build: $(( $(date +%s) - start )) s, $(ls -la "$bin" 2>&1)" | tee -a "$OUT/native-build.txt"
for i in 1 2 3; do # start-up: spawn to the hello answer, a warm page cache after the first
  python3 - "$bin" <<'PY' 2>&1 | tee -a "$OUT/native-start.txt"
import subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
p.stdin.write('{"v":1,"id":1,"method":"hello","params":{"protocol":1}}\n'); p.stdin.flush()
line = p.stdout.readline()
print(f"hello in {time.monotonic() - t0:.3f} s: {line.strip()}")
p.stdin.write('{"v":1,"id":2,"method":"shutdown","params":{}}\n'); p.stdin.close(); p.wait()
PY
done
(cd "$root/tests/python" && MK_NATIVE_WORKER="$bin" PYTHONPATH="$MKEVOLVE_WORKER_PATH" \
  timeout 180 python3 -m pytest -q -rs -s test_native_worker.py 2>&1 | tail -8) | tee "$OUT/pytest-native.txt"
