#!/usr/bin/env bash
# One GPU call after interleaved timing landed: the GPU-marked Python tests,
# the order probe (sequential vs interleaved timing of identical programs),
# then the level-3 problems of the fallback re-measurement, fresh.
set -uo pipefail
source "$(dirname "$0")/env.sh"
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 150 python3 -m pytest -q -rs \
  tests/python/test_verify_timing.py tests/python/test_verify_methods.py tests/python/test_guards.py \
  tests/python/test_kbcheck.py 2>&1 | tail -8) | tee "$OUT/pytest-gpu.txt"
PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 170 python3 "$root/scripts/device/order_probe.py" \
  "$KB/level3/35_LSTM.py" "$KB/level3/30_SwinTransformerV2.py" 2>/dev/null \
  | tee "$OUT/order-probe.jsonl"
L3_OUT=/tmp/bench-l3-interleaved FRESH=1 PROBLEMS="30_SwinTransformerV2.py 10_ResNet101.py 35_LSTM.py" \
  BENCH_SECONDS=${BENCH_SECONDS:-250} bash "$root/scripts/device/bench-l3.sh"
# What time is left of the call's 600 s: the level-2 cross-check sweep (4 problems, stand-in checkout).
left=$((${CALL_SECONDS:-560} - SECONDS))
if [ "$left" -gt 60 ]; then
  out=/tmp/bench-l2-kb
  paths=()
  for p in 25_Conv2d_Min_Tanh_Tanh 40_Matmul_Scaling_ResidualAdd 70_Gemm_Sigmoid_Scaling_ResidualAdd \
           95_Matmul_Add_Swish_Tanh_GELU_Hardtanh; do paths+=("$KB/level2/$p.py"); done
  timeout "$left" "$MK" bench "${paths[@]}" -o "$out" --budget 6 --depth 0 \
    --kb-root "$root/tests/fixtures/kernelbench_stub" 2>&1 | tail -12 | tee "$OUT/bench-l2-kb.txt"
  tar czf "$OUT/bench-l2-kb.tgz" -C /tmp bench-l2-kb
fi
