#!/usr/bin/env bash
# `mkevolve bench --slurm` against a real Slurm on this machine
# (scripts/slurm-local.sh: munged, slurmctld, slurmd on localhost; installed
# with apt when root and missing). A small CPU sweep of four problems as a
# job array with --wait: two run straight through; one task is killed in the
# middle of its run (scancel --batch --signal=KILL: the task's own process)
# and resubmitted, and then succeeds; one is killed in both rounds and gets
# a failure record saying so. Then without --wait: --report-only lists the
# problem whose task is still running as "no record", and running the
# --slurm command again resubmits only that one. Skips (exit 0, with the
# reason) only where Slurm cannot be installed or started.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${MK_BUILD_DIR:-build-asan}
bin=${MKEVOLVE_BIN:-$root/$build/mkevolve}
py=${MK_PYTHON:-$root/.venv/bin/python}
[ -x "$bin" ] || { echo "mkevolve not built: $bin"; exit 1; }
if ! why=$(bash scripts/slurm-local.sh install 2>&1); then
  echo "SKIP 58-bench-slurm: $why"; exit 0
fi
out=$(mktemp -d)
chmod 755 "$out"
cleanup() {
  bash "$root/scripts/slurm-local.sh" stop "$out/slurm" || true
  rm -rf "$out"
}
trap cleanup EXIT
if ! conf=$(bash scripts/slurm-local.sh start "$out/slurm" 2 2>"$out/slurm-start.err"); then
  echo "SKIP 58-bench-slurm: Slurm did not start here: $(cat "$out/slurm-start.err")"; exit 0
fi
export "$conf"
export MKEVOLVE_CACHE_DIR="$out/cache" MKEVOLVE_PYTHON="$py" MKEVOLVE_NODE_CACHE_DIR="$out/node-cache"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}

mkdir -p "$out/probs" "$out/later"
problem() { # problem FILE ACTIVATION [FLAG]: a tiny Linear+activation; with FLAG, its
            # inputs hang while that file exists (the task is then killed mid-run)
  local hang=""
  [ -n "${3:-}" ] && hang="    if os.path.exists(\"$3\"):
        time.sleep(3600)"
  cat > "$1" <<PY
import os
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return $2(self.lin(x)) * 1.5


def get_inputs() -> list[torch.Tensor]:
$hang
    return [torch.randn(8, 64)]


def get_init_inputs() -> list:
    return [64]
PY
}
problem "$out/probs/1_Linear_Relu.py" torch.relu
problem "$out/probs/2_Linear_Sigmoid.py" torch.sigmoid
problem "$out/probs/3_Linear_Tanh.py" torch.tanh "$out/flag3"
problem "$out/probs/4_Linear_Gelu.py" torch.nn.functional.gelu "$out/flag4"
touch "$out/flag3" "$out/flag4"

passed=0; failed=0
ok() { passed=$((passed+1)); }
bad() { echo "FAIL: $*"; failed=$((failed+1)); }
sweep_args=(--device cpu --budget 2 --trials 1 --slurm --gpus-per-task 0 --cpus-per-task 1)

# Prints JOB_TASK of the array task of problem index $1 (0-based in the
# task list) once it is running its problem (its log says it started its
# sweep of one); a task named $2 does not count (the one killed before).
wait_running() {
  local task=$1 not=${2:-} log
  for _ in $(seq 600); do
    for log in "$out"/res/slurm/logs/*_"$task".out "$out"/res2/slurm/logs/*_"$task".out; do
      [ -f "$log" ] && [ "$(basename "$log" .out)" != "$not" ] && grep -q "1 problems, 1 at a time" "$log" &&
        [ "$log" -nt "$out/round.stamp" ] && { basename "$log" .out; return 0; }
    done
    sleep 0.5
  done
  return 1
}
kill_task() { # kill_task JOB_TASK: SIGKILL to the task's own process, as a crash or an OOM kill
  scancel --batch --signal=KILL "$1"
}

# ---- 1. --wait: kills, one resubmission, a failure recorded -------------------
touch "$out/round.stamp"
t0=$(date +%s)
timeout 900 "$bin" bench "$out/probs" -o "$out/res" "${sweep_args[@]}" --wait \
  >"$out/wait.out" 2>"$out/wait.err" &
bench_pid=$!
# tasks 2 (problem 3) and 3 (problem 4) hang until killed
if j3=$(wait_running 2); then kill_task "$j3"; rm -f "$out/flag3"; else bad "task 2 never ran"; fi
if j4=$(wait_running 3); then kill_task "$j4"; else bad "task 3 never ran"; fi
if j4b=$(wait_running 3 "${j4:-}"); then
  [ "$j4b" != "$j4" ] && ok || bad "task 3 was not resubmitted as a new job ($j4b)"
  kill_task "$j4b"
else bad "task 3 was not resubmitted"; fi
rc=0; wait "$bench_pid" || rc=$?
wall=$(( $(date +%s) - t0 ))
echo "58-bench-slurm: --wait sweep of 4 problems (2 tasks killed, one twice) in ${wall}s"
[ "$rc" = 0 ] && ok || { bad "bench --slurm --wait exited $rc"; tail -20 "$out/wait.err"; }
record() { "$py" - "$out/res/problems/$1.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
PY
}
for p in 1_Linear_Relu 2_Linear_Sigmoid 3_Linear_Tanh; do
  [ "$(record "$p" 'r["correct"]' 2>/dev/null)" = True ] && ok || bad "$p: no correct record"
done
[ "$(record 4_Linear_Gelu 'r["correct"]' 2>/dev/null)" = False ] && ok || bad "4_Linear_Gelu: no failure record"
record 4_Linear_Gelu 'r["error"]' 2>/dev/null | grep -q "ended twice without a record" && ok ||
  bad "4_Linear_Gelu: the failure does not say the task ended twice without a record"
record 4_Linear_Gelu 'r["error"]' 2>/dev/null | grep -q "FAILED" && ok ||
  bad "4_Linear_Gelu: the failure does not give Slurm's state"
grep -q "task .*_2 (3_Linear_Tanh) ended without a record: .*resubmitting it" "$out/wait.err" && ok ||
  bad "the killed task 2 was not reported and resubmitted"
grep -q "merged the caches of" "$out/wait.err" && ok || bad "the tasks' caches were not merged"
[ -s "$out/cache/cache.sqlite" ] && ok || bad "no merged cache"
ls "$out/res/slurm/cache/"*_*.sqlite >/dev/null 2>&1 && bad "task caches left after the merge" || ok
grep -q "^| 4_Linear_Gelu | \*\*no\*\* |" "$out/res/summary.md" && ok || bad "summary lacks the failed problem"
[ "$(grep -c '^| [1-4]_Linear' "$out/res/summary.md" | head -1)" -ge 4 ] && ok || bad "summary does not list 4 problems"
grep -q "| ran on |" "$out/res/summary.md" && ok || bad "summary does not say where problems ran"
grep -q "SBATCH --cpus-per-task=1" "$out/res/slurm/bench.sbatch" && ok || bad "no --cpus-per-task in the script"

# ---- 2. without --wait: --report-only never loses a problem -----------------------
problem "$out/later/1_Linear_Relu.py" torch.relu
problem "$out/later/5_Linear_Hardtanh.py" torch.nn.functional.hardtanh "$out/flag5"
touch "$out/flag5" "$out/round.stamp"
"$bin" bench "$out/later" -o "$out/res2" "${sweep_args[@]}" >"$out/nowait.out" 2>"$out/nowait.err" && ok ||
  bad "bench --slurm (no wait) failed: $(tail -3 "$out/nowait.err")"
grep -q "submitted Slurm job array" "$out/nowait.out" && ok || bad "no job id printed"
if j5=$(wait_running 1); then
  "$bin" bench --report-only -o "$out/res2" >/dev/null 2>"$out/ro.err" && ok || bad "--report-only failed"
  grep -q "^| 5_Linear_Hardtanh | \*\*no\*\* |.*no record: its Slurm task has not ended yet" "$out/res2/summary.md" && ok ||
    bad "--report-only does not list the running task's problem"
  scancel "${j5%%_*}"  # the whole array: problem 1 may still be running too
else bad "task 1 of the second sweep never ran"; fi
for _ in $(seq 120); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
rm -f "$out/flag5"
timeout 900 "$bin" bench "$out/later" -o "$out/res2" "${sweep_args[@]}" --wait >"$out/again.out" 2>"$out/again.err" && ok ||
  bad "the resubmitting run failed: $(tail -3 "$out/again.err")"
grep -q "to run as Slurm tasks" "$out/again.err" && ok || bad "no submission line"
for p in 1_Linear_Relu 5_Linear_Hardtanh; do
  grep -q "^| $p | yes |" "$out/res2/summary.md" && ok || bad "$p is not correct in the second sweep's summary"
done

echo "58-bench-slurm: $passed passed, $failed failed"
[ "$failed" = 0 ]
