#!/usr/bin/env bash
# Issue #18 on a GPU, second call: a small level-2 sweep with --backend auto
# (Triton and CUDA C++ candidates in one beam), cross-checked by KernelBench's
# own eval (.kb/kbeval): the records' subkernel backends, the summary's
# "Subkernels by backend" line and KernelBench's verdict on the load_inline
# files. Carry: .devkit .kb .whl. BACKEND=cuda for CUDA-only.
set -uo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/cuda-env.sh"
out=/tmp/bench-cuda
mkdir -p "$out"
probs=()
for p in ${BENCH_PROBLEMS:-25 5 100}; do probs+=("$(ls "$KB"/level2/${p}_*.py)"); done
start=$(date +%s)
timeout "${BENCH_SECONDS:-520}" "$MK" bench "${probs[@]}" -o "$out" --backend "${BACKEND:-auto}" \
  --budget 10 --gpus 1 --kb-root "$KB/kbeval" 2>&1 | tail -30 | tee "$OUT/bench-tail.txt"
echo "wall_s=$(( $(date +%s) - start ))" | tee -a "$OUT/bench-tail.txt"
grep -h "Subkernels by backend\|(builtin, cuda)\|(builtin, triton)" "$out/summary.md" 2>/dev/null \
  | tee "$OUT/backends.txt"
tar czf "$OUT/bench-cuda.tgz" -C /tmp bench-cuda
