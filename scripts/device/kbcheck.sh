#!/usr/bin/env bash
# KernelBench's own eval_kernel_against_ref on ModelNew files already emitted
# (python -m mkworker.kbcheck, as `bench --kb-root` runs it), without a new
# search: for re-checking an emitted file after a change to what wraps it.
#   usage: kbcheck.sh PROBLEM.py MODELNEW.py [PROBLEM.py MODELNEW.py ...]
#   carry: .devkit .kb .whl (scripts/devkit.sh, scripts/device/prepare-kb.sh)
set -uo pipefail
source "$(dirname "$0")/env.sh"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$root"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$KB/standins:$MKEVOLVE_WORKER_PATH
while [ $# -ge 2 ]; do
  echo "== $2"
  timeout 300 python3 -m mkworker.kbcheck --ref "$1" --new "$2" --root "$KB/kbeval" \
    --seed 0 --trials 5 --perf-trials 100 2>>"${OUT:-/tmp}/kbcheck-stderr.txt" | grep '^MKWORKER-KBCHECK ' |
    python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l.split(" ", 1)[1])
    print({k: r[k] for k in ("correct", "runtime", "ref_runtime", "speedup", "error")})'
  shift 2
done
