#!/usr/bin/env bash
# One GPU call: the device's ceilings, the rest of the level-2 sweep
# (resumable), then `mkevolve check` against a plain CUDA-event loop and the
# cost of a cached vs an uncached check. Everything under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 "$root/scripts/device/peak.py" | tee "$OUT/peak.json"
BENCH_SECONDS=${BENCH_SECONDS:-400} bash "$root/scripts/device/bench-l2.sh"
cp "$OUT/bench-l2.tgz" /tmp/ 2>/dev/null
bash "$root/scripts/device/check-vs-loop.sh"
