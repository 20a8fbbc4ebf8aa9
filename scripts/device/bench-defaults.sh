#!/usr/bin/env bash
# The dev-split level-2 (LEVEL=3: level-3, LEVEL=1: a level-1 sample) sweep with bench's DEFAULTS (merges and splits on, no
# --budget/--depth overrides) on one GPU through `--gpus 1`, cross-checked by
# KernelBench's own eval (.kb/kbeval, with stand-ins for its LLM imports and
# pydantic carried as wheels in .whl). Conv-led problems first. Resumable:
# records in .kb/bench-l2d/problems (carried back from an earlier call:
# scripts/device/resume.sh FILES_AT unpacks them there) are kept, except those of BENCH_RERUN. First the GPU-marked precision tests (the TF32-aware comparison on a
# real channels_last convolution) and input draws on the GPU (test_replay.py). Everything comes back under $OUT.
# BACKEND=auto|cuda: the same sweep for issue #18 (below). BENCH_ARGS: more bench options
# (e.g. "--compile-baselines": compile's max-autotune-no-cudagraphs and reduce-overhead too).
#   carry: .devkit .kb .whl (scripts/devkit.sh, scripts/device/prepare-kb.sh)
set -uo pipefail
source "$(dirname "$0")/env.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$root"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$KB/standins
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
if [ "${SKIP_PYTEST:-0}" != 1 ]; then
  (cd "$root/tests/python" && PYTHONPATH="$MKEVOLVE_WORKER_PATH:$PYTHONPATH" timeout 120 \
    python3 -m pytest -q -rs -m gpu ${PYTEST_FILES:-test_verify_precision.py test_replay.py} 2>&1 | tail -8) \
    | tee "$OUT/pytest-gpu.txt"
fi
level=${LEVEL:-2}
name=bench-l${level}d
# BACKEND=auto (issue #18): Triton and CUDA C++ candidates in one beam, CUDA ones verified in
# the native worker built here; its sweep resumes from its own records (bench-l<N>d-auto).
backend=${BACKEND:-triton}
if [ "$backend" != triton ]; then
  name=$name-$backend
  source "$(dirname "$0")/cuda-env.sh"
  source "$(dirname "$0")/build-native.sh"
fi
out=/tmp/$name
mkdir -p "$out/problems"
cp "$KB"/$name/problems/*.json "$out/problems/" 2>/dev/null
cp -r "$KB"/$name/modelnew "$out/" 2>/dev/null
# BENCH_SEED=docs/bench/l2-devsplit-h200: start from a committed sweep's records (those not
# already here), their KernelBench root made this machine's, so that a session can measure
# a few problems again (BENCH_RERUN) and rewrite the whole sweep's reports.
if [ -n "${BENCH_SEED:-}" ]; then
  python3 - "$root/$BENCH_SEED" "$out" "$KB/kbeval" <<'PY'
import json, os, shutil, sys
seed, out, kb = sys.argv[1:4]
for name in sorted(os.listdir(os.path.join(seed, "problems"))):
    dst = os.path.join(out, "problems", name)
    if not name.endswith(".json") or os.path.exists(dst):
        continue
    rec = json.load(open(os.path.join(seed, "problems", name)))
    if isinstance(rec.get("kernelbench_check"), dict) and rec["kernelbench_check"].get("root"):
        rec["kernelbench_check"]["root"] = kb
    json.dump(rec, open(dst, "w"), indent=1)
    mn = rec.get("modelnew")
    if mn and os.path.exists(os.path.join(seed, mn)):
        os.makedirs(os.path.join(out, os.path.dirname(mn)), exist_ok=True)
        shutil.copy(os.path.join(seed, mn), os.path.join(out, mn))
PY
fi
# BENCH_RERUN="30 45": measure these again (their kept records and files are dropped, also
# those an earlier call on this machine left in $out).
for p in ${BENCH_RERUN:-}; do
  rm -f "$out"/problems/level${level}_${p}_*.json "$out"/modelnew/level${level}_${p}_*.py
done
default_l2="25 65 85 35 10 5 15 60 90 50 20 100 30 40 45 55 70 75 80 95"
default_l3="20 25 45 5 10 15 50 30 35 40"
# LEVEL=1: one or two problems of each family (GEMMs, activations, softmax, norms,
# pools, reductions, norms of vectors, argmax, convolutions, scans, losses, a
# scalar argument); a whole level-1 sweep is 100 problems, several calls.
default_l1="1 5 9 16 19 23 26 33 36 40 42 47 51 37 54 63 82 89 93 96"
case "$level" in 1) default=$default_l1 ;; 3) default=$default_l3 ;; *) default=$default_l2 ;; esac
probs=()
for p in ${BENCH_PROBLEMS:-$default}; do
  probs+=("$(ls "$KB"/level$level/${p}_*.py)")
done
start=$(date +%s)
# A snapshot of the records every 20 s: a call the device stops at its limit (less device time
# left than asked for) still brings back the problems that finished.
( while sleep 20; do tar czf "$OUT/.$name.tgz" -C /tmp "$name" 2>/dev/null && mv "$OUT/.$name.tgz" "$OUT/$name.tgz"; done ) &
snap=$!
# The run logs (run.jsonl: every evaluation with its time and reason) come back too.
timeout "${BENCH_SECONDS:-500}" "$MK" bench "${probs[@]}" -o "$out" --gpus 1 --workdir "$out/work" --backend "$backend" \
  --kb-root "$KB/kbeval" ${BENCH_ARGS:-} 2>&1 | tail -45 | tee "$OUT/bench-tail.txt"
echo "wall_s=$(( $(date +%s) - start ))" | tee -a "$OUT/bench-tail.txt"
kill "$snap" 2>/dev/null
wait "$snap" 2>/dev/null
tar czf "$OUT/$name.tgz" -C /tmp "$name"
# what the compiles ahead of the references did (mkworker/warm.py)
mkdir -p "$OUT/warm" && cp /tmp/mkworker-warm-*/*.log "$OUT/warm/" 2>/dev/null
exit 0
