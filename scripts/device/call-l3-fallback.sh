#!/usr/bin/env bash
# One GPU call: the level-3 problems that came out slower than eager in the
# committed sweep (SwinV2, ResNet-101, LSTM), run fresh, to measure the
# fallback to the plain subclass (a composition > 2% slower than eager).
set -uo pipefail
source "$(dirname "$0")/env.sh"
L3_OUT=/tmp/bench-l3-fallback FRESH=1 PROBLEMS="30_SwinTransformerV2.py 10_ResNet101.py 35_LSTM.py" \
  BENCH_SECONDS=${BENCH_SECONDS:-480} bash "$root/scripts/device/bench-l3.sh"
