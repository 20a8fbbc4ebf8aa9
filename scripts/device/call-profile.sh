#!/usr/bin/env bash
# Issue 14, step 1: where the time goes on conv-led problems and two L3 nets.
# GPU tests of the interleaved timing, two evolves (ours), then the kernel-level
# profiles of eager / torch.compile / ours (scripts/device/profile_whole.py).
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 120 python3 -m pytest -q -rs \
  tests/python/test_verify_timing.py 2>&1 | tail -6) | tee "$OUT/pytest-gpu.txt"
mkdir -p /tmp/prof/ours
specs=()
for p in 25_Conv2d_Min_Tanh_Tanh 85_Conv2d_GroupNorm_Scale_MaxPool_Clamp; do
  timeout 110 "$MK" evolve "$KB/level2/$p.py" -o /tmp/prof/ours/$p.py --budget 6 --depth 0 2>&1 | tail -5
  if [ -f /tmp/prof/ours/$p.py ]; then specs+=("$KB/level2/$p.py=/tmp/prof/ours/$p.py"); else specs+=("$KB/level2/$p.py"); fi
done
for p in 5_ConvTranspose2d_Subtract_Tanh 35_Conv2d_Subtract_HardSwish_MaxPool_Mish 60_ConvTranspose3d_Swish_GroupNorm_HardSwish \
         100_ConvTranspose3d_Clamp_Min_Divide 65_Conv2d_AvgPool_Sigmoid_Sum; do specs+=("$KB/level2/$p.py"); done
for p in 20_MobileNetV2 25_ShuffleNetUnit; do specs+=("$KB/level3/$p.py"); done
PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout $((${CALL_SECONDS:-570} - SECONDS)) python3 "$root/scripts/device/profile_whole.py" /tmp/prof "${specs[@]}"
tar czf "$OUT/profiles.tgz" -C /tmp prof
