#!/usr/bin/env bash
# Issue #18 on a GPU: CUDA C++ subkernels composed into ModelNew with
# load_inline (KernelBench's format), and --backend cuda|auto end to end.
#   1. the composer writes conv_chain's ModelNew (all CUDA; Triton + CUDA)
#      with the devkit's C test runner; its NVRTC test compiles all sections;
#   2. the GPU pytests: nvcc builds them, ModelNew matches Model, KernelBench's
#      eval_kernel_against_ref compiles it and finds it correct; the worker's
#      CUDA launches (test_cuda_candidates.py); the CUDA norm and pool
#      candidates against torch, NCHW and channels_last (test_cuda_norm_pool.py);
#      the CUDA GEMM candidates (3xTF32, TF32) against torch at odd and larger
#      sizes, contiguous and transposed operands (test_cuda_gemm.py);
#   3. evolve --backend cuda and --backend auto on conv_chain through the native
#      worker (built here, scripts/device/build-native.sh): the search,
#      the whole-program check of the load_inline file, the JSON's backends.
# Run from the repository root after scripts/devkit.sh; carry: .devkit .kb .whl
# Everything comes back under $OUT. The bench with --kb-crosscheck is
# bench-cuda.sh (a second call).
set -uo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/cuda-env.sh"
mkdir -p "$OUT/composed"
MK_REPO_DIR="$root" MK_COMPOSE_CUDA_OUT="$OUT/composed" timeout 60 "$root/.devkit/mk_tests" compose_cuda \
  2>&1 | tail -8 | tee "$OUT/compose-tests.txt"
(cd "$root/tests/python" && MK_COMPOSED_CUDA_DIR="$OUT/composed" MK_KB_ROOT="$KB/kbeval" \
  MK_TESTS_BIN="$root/.devkit/mk_tests" PYTHONPATH="$MKEVOLVE_WORKER_PATH:$PYTHONPATH" timeout 400 \
  python3 -m pytest -q -rs test_compose_cuda.py test_cuda_candidates.py test_cuda_norm_pool.py \
  test_cuda_gemm.py 2>&1 |
  tail -25) | tee "$OUT/pytest-gpu.txt"
# SKIP_EVOLVE=1: the composer and GPU tests only (a call short of device time).
[ "${SKIP_EVOLVE:-0}" = 1 ] && exit 0
fixture="$root/tests/fixtures/propose/conv_chain.py"
# The evolves verify CUDA candidates in the native worker (the default), built here.
source "$(dirname "$0")/build-native.sh"
# EVOLVE_BACKENDS="auto": one of the two (a call short of device time).
for b in ${EVOLVE_BACKENDS:-cuda auto}; do
  work=/tmp/mk-evolve-$b
  rm -rf "$work"
  start=$(date +%s)
  timeout 200 "$MK" evolve "$fixture" --backend "$b" --budget 12 --time-budget 100 --json \
    --workdir "$work" -o "$OUT/conv_chain_$b.modelnew.py" >"$OUT/evolve-$b.json" 2>"$OUT/evolve-$b.err"
  echo "evolve --backend $b: exit $? in $(( $(date +%s) - start )) s" | tee -a "$OUT/evolve.txt"
  python3 - "$OUT/evolve-$b.json" <<'PY' 2>&1 | tee -a "$OUT/evolve.txt"
import json, sys
try:
    o = json.load(open(sys.argv[1]))
except Exception as e:  # the .err file says why
    sys.exit(f"  no JSON: {e}")
print("  verified", o.get("verified"), "backend", o.get("backend"), "counts", o.get("backend_counts"),
      "eager_ms", o.get("eager_ms"), "ours_ms", o.get("ours_ms"), "cuda_graph", o.get("cuda_graph"))
for sk in o.get("subkernels", []):
    v = sk["variants"][sk["chosen"]]
    tried = {}
    for x in sk["variants"][1:]:
        tried.setdefault(x.get("backend"), []).append(x["status"])
    print(f"  {sk['name']}: {sk['backend']} {v['name']} {v.get('time_ms')} ms; tried {tried}")
    if sk["chosen"] == 0:
        print("    why PyTorch:", sk.get("summary"))
PY
  cp "$work"/*/run.jsonl "$OUT/run-$b.jsonl" 2>/dev/null
done
grep -c "load_inline(" "$OUT"/conv_chain_*.modelnew.py 2>/dev/null | tee -a "$OUT/evolve.txt"
