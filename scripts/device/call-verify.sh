#!/usr/bin/env bash
# One GPU call for the verification runtime (#3) and the level-2 table (#4,
# #8): the device's ceilings, the GPU-marked Python tests, the rest of the
# level-2 sweep (resumable), then `mkevolve check` against a plain
# CUDA-event loop with the cost of an uncached vs a cached check.
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/gpu.txt"
timeout 60 python3 "$root/scripts/device/peak.py" | tee "$OUT/peak.json"
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 150 python3 -m pytest -q -rs \
  tests/python/test_verify_timing.py tests/python/test_verify_methods.py tests/python/test_guards.py 2>&1 | tail -15) \
  | tee "$OUT/pytest-gpu.txt"
BENCH_SECONDS=${BENCH_SECONDS:-230} bash "$root/scripts/device/bench-l2.sh"
timeout "${CHECK_SECONDS:-150}" bash "$root/scripts/device/check-vs-loop.sh" 2>&1 | tee "$OUT/check-summary.txt"
