#!/usr/bin/env bash
# One GPU call: the GPU-marked Python tests, `mkevolve check` vs a plain
# CUDA-event loop with an uncached and a cached check (separate caches for
# the evolve and the checks), then the level-3 sweep (resumable).
set -uo pipefail
source "$(dirname "$0")/env.sh"
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 120 python3 -m pytest -q -rs \
  tests/python/test_verify_timing.py tests/python/test_verify_methods.py tests/python/test_guards.py 2>&1 | tail -8) \
  | tee "$OUT/pytest-gpu.txt"
[ -n "${SKIP_CHECK:-}" ] || timeout "${CHECK_SECONDS:-120}" bash "$root/scripts/device/check-vs-loop.sh" 2>&1 | tee "$OUT/check-summary.txt"
bash "$root/scripts/device/bench-l3.sh"
