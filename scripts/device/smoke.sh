#!/usr/bin/env bash
# First GPU call: environment, GPU-marked Python tests, one evolve of the
# example and two dev-split problems. Results under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
"$MK" version
(PYTHONPATH="$MKEVOLVE_WORKER_PATH" timeout 240 python3 -m pytest -q -rs tests/python/test_verify_timing.py tests/python/test_verify_methods.py tests/python/test_guards.py 2>&1 | tail -15) | tee "$OUT/pytest-gpu.txt"
for p in "$root/examples/conv_bias_relu.py" "$KB/level2/40_Matmul_Scaling_ResidualAdd.py" "$KB/level2/25_Conv2d_Min_Tanh_Tanh.py"; do
  name=$(basename "$p" .py)
  echo "=== evolve $name"
  timeout 150 "$MK" evolve "$p" -o "$OUT/$name.ModelNew.py" --budget 24 --workdir "$root/.mkevolve" 2>&1 | tail -14
  cp "$root/.mkevolve/$name/run.jsonl" "$OUT/$name.run.jsonl" 2>/dev/null
done
