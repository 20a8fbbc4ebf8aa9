#!/usr/bin/env bash
# Wall time of a network twice as deep as the dev split's deepest: issue #14 asks for
# every problem under 5 minutes with bench's defaults, and on the H200 DenseNet-121 took
# 271 s (docs/bench/l3-devsplit-h200), most of the time after the 150 s search being
# torch.compile's compile of the whole program (the baselines) and the CUDA-graph
# variant. This derives a deeper DenseNet from the dev split's 15_DenseNet121 (dense
# blocks of 6, 12, 48 and 32 layers instead of 6, 12, 24 and 16: 116 dense layers, not
# 58) on the device, runs `mkevolve bench` on it with the defaults (no KernelBench
# check), and brings back the record, the run log and the wall time.
#   carry: .devkit .kb .whl        run: bash scripts/device/bench-deep.sh
set -uo pipefail
source "$(dirname "$0")/env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
src="$KB/level3/15_DenseNet121.py"
deep=/tmp/deep/DeepDenseNet.py
mkdir -p /tmp/deep
grep -q 'block_layers = \[6, 12, 24, 16\]' "$src" || { echo "bench-deep: $src has no block_layers line" >&2; exit 1; }
sed 's/block_layers = \[6, 12, 24, 16\].*/block_layers = [6, 12, 48, 32]  # twice the deep blocks of DenseNet-121/' \
  "$src" > "$deep"
start=$(date +%s)
timeout "${BENCH_SECONDS:-560}" "$MK" bench "$deep" -o /tmp/deep/out --gpus 1 --workdir /tmp/deep/work \
  ${BENCH_ARGS:-} 2>&1 | tail -20 | tee "$OUT/bench-tail.txt"
echo "wall_s=$(( $(date +%s) - start ))" | tee -a "$OUT/bench-tail.txt"
cp /tmp/deep/out/problems/*.json "$OUT/" 2>/dev/null
cp /tmp/deep/work/*/run.jsonl "$OUT/run.jsonl" 2>/dev/null
# what the compiles ahead of the reference did (mkworker/warm.py)
mkdir -p "$OUT/warm" && cp /tmp/mkworker-warm-*/*.log "$OUT/warm/" 2>/dev/null
exit 0
