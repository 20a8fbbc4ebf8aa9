#!/usr/bin/env bash
# Issue #18, the native worker on a GPU: builds engine/worker/native against
# this machine's libtorch (g++, no CMake needed; cJSON from the devkit), then
# the GPU tests: a cubin compiled with NVRTC, launched by the worker through
# the driver API on tensors made from seeds, equals torch's result from the
# same seeds (test_native_worker.py); builtin CUDA candidates with a launch
# plan, and broken copies, get the same verdicts from the native worker's
# verify_subkernel as from the Python worker's (test_native_verify.py, cases
# from the devkit's C test runner); and the time from start to the hello answer.
# Run from the repository root after scripts/devkit.sh; carry: .devkit
set -uo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/build-native.sh"
bin=$NATIVE_BIN
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
source "$(dirname "$0")/cuda-env.sh" # NVRTC for the C test runner that writes the verify cases
(cd "$root/tests/python" && MK_NATIVE_WORKER="$bin" MK_TESTS_BIN="$root/.devkit/mk_tests" \
  PYTHONPATH="$MKEVOLVE_WORKER_PATH:$PYTHONPATH" \
  timeout 300 python3 -m pytest -q -rs -s test_native_worker.py test_native_verify.py 2>&1 | tail -40) |
  tee "$OUT/pytest-native.txt"
