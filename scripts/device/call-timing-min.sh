#!/usr/bin/env bash
# The smallest GPU check of interleaved timing (little device time left): the
# timing tests, the order probe on LSTM, and LSTM swept fresh.
set -uo pipefail
source "$(dirname "$0")/env.sh"
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 90 python3 -m pytest -q -rs \
  tests/python/test_verify_timing.py 2>&1 | tail -6) | tee "$OUT/pytest-gpu.txt"
PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 60 python3 "$root/scripts/device/order_probe.py" \
  "$KB/level3/35_LSTM.py" 2>/dev/null | tee "$OUT/order-probe.jsonl"
L3_OUT=/tmp/bench-l3-interleaved FRESH=1 PROBLEMS="35_LSTM.py" BENCH_SECONDS=60 \
  bash "$root/scripts/device/bench-l3.sh"
