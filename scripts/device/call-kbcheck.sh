#!/usr/bin/env bash
# One GPU call for #8's cross-check and the re-measurement of the slower-
# than-eager fallback: whether KernelBench is importable here; the GPU-marked
# Python tests with the cross-check's (the worker method on a GPU worker);
# four level-2 problems swept with --kb-root pointing at the stand-in
# checkout (the whole GPU path: GPU worker, fresh interpreter, CUDA) and
# again with --kb-crosscheck alone (KernelBench as installed here).
# The level-3 re-measurement is call-l3-fallback.sh (a second call).
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 - <<'PY' 2>&1 | tee -a "$OUT/gpu.txt"
import importlib.util as u
import torch, triton
print("torch", torch.__version__, "triton", triton.__version__)
for m in ("kernelbench", "src", "pydantic", "requests"):
    print(m, "importable" if u.find_spec(m) else "not importable")
PY
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 170 python3 -m pytest -q -rs \
  tests/python/test_verify_timing.py tests/python/test_verify_methods.py tests/python/test_guards.py \
  tests/python/test_kbcheck.py 2>&1 | tail -12) | tee "$OUT/pytest-gpu.txt"
out=/tmp/bench-l2-kb
mkdir -p "$out"
l2=(25_Conv2d_Min_Tanh_Tanh 40_Matmul_Scaling_ResidualAdd 70_Gemm_Sigmoid_Scaling_ResidualAdd
    95_Matmul_Add_Swish_Tanh_GELU_Hardtanh)
paths=(); for p in "${l2[@]}"; do paths+=("$KB/level2/$p.py"); done
timeout 170 "$MK" bench "${paths[@]}" -o "$out" --budget 6 --depth 0 \
  --kb-root "$root/tests/fixtures/kernelbench_stub" 2>&1 | tail -14 | tee "$OUT/bench-l2-kb.txt"
cp -r "$out" /tmp/bench-l2-kbreal
timeout 60 "$MK" bench "${paths[@]}" -o /tmp/bench-l2-kbreal --kb-crosscheck 2>&1 | tail -4 \
  | tee "$OUT/bench-l2-kbreal.txt"
tar czf "$OUT/bench-l2-kb.tgz" -C /tmp bench-l2-kb bench-l2-kbreal
