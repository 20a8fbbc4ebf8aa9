#!/usr/bin/env bash
# `mkevolve bench` end to end on the CPU with the KernelBench cross-check:
# a tiny problem is evolved (builtin proposer, Triton interpreter), its
# ModelNew kept in the output folder and evaluated again by KernelBench's
# interface (the stand-in checkout tests/fixtures/kernelbench_stub: the real
# KernelBench asserts CUDA). Checks agreement, resume (a cached verdict is
# kept, unless it came from another KernelBench; a cached record without one
# is checked without evolving again), a
# disagreement (exit status 3, listed in the summary), KernelBench missing
# (reported, exit 0) and an evaluation that crashes (no verdict, exit 0).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${MK_BUILD_DIR:-build-asan}
bin=${MKEVOLVE_BIN:-$root/$build/mkevolve}
py=${MK_PYTHON:-$root/.venv/bin/python}
stub="$root/tests/fixtures/kernelbench_stub"
[ -x "$bin" ] || { echo "mkevolve not built: $bin"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export MKEVOLVE_CACHE_DIR="$out/cache" MKEVOLVE_PYTHON="$py"
# workers get an allow-listed environment: the stand-in's switch is passed by name
export MKEVOLVE_WORKER_ENV=STUB_KB_MODE
mkdir -p "$out/probs"
cat > "$out/probs/1_Linear_Gelu_Scale.py" <<'PY'
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n: int, scale: float) -> None:
        super().__init__()
        self.lin = nn.Linear(n, n)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.lin(x)) * self.scale + 0.5


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(8, 64)]


def get_init_inputs() -> list:
    return [64, 1.5]
PY
passed=0; failed=0
ok() { passed=$((passed+1)); }
bad() { echo "FAIL: $*"; failed=$((failed+1)); }
bench() { # bench DIR [args...]: runs, sets rc
  local dir=$1; shift
  rc=0
  timeout 600 "$bin" bench "$out/probs" --device cpu --budget 2 --trials 1 -o "$dir" "$@" \
    >"$dir.out" 2>"$dir.err" || rc=$?
}
field() { # field DIR EXPR: a Python expression over the record r
  "$py" - "$1" "$2" <<'PY'
import json, pathlib, sys
r = json.loads(next(pathlib.Path(sys.argv[1], "problems").glob("*.json")).read_text())
print(eval(sys.argv[2]))
PY
}

# 1. evolve + cross-check: agreement, ModelNew kept beside the records
bench "$out/a" --kb-root "$stub"
[ "$rc" = 0 ] && ok || bad "bench with the stub exited $rc: $(tail -3 "$out/a.err")"
[ "$(field "$out/a" 'r["kernelbench_check"]["status"]')" = agree ] && ok || bad "no agreement: $(field "$out/a" 'r["kernelbench_check"]')"
[ -f "$out/a/$(field "$out/a" 'r["modelnew"]')" ] && ok || bad "ModelNew not kept in the output folder"
grep -q "Cross-check with KernelBench's evaluation" "$out/a/summary.md" && ok || bad "summary lacks the cross-check"
grep -q "KernelBench agrees" "$out/a/report.html" && ok || bad "report lacks the cross-check card"

# 2. resumed with a verdict cached: nothing is run again
STUB_KB_MODE=reject bench "$out/a" --kb-root "$stub"
[ "$rc" = 0 ] && grep -q cached "$out/a.err" && ok || bad "cached verdict was not kept (rc $rc)"

# 2b. another KernelBench than the one that gave the cached verdict: checked again
cp -r "$stub" "$out/other-kb"
STUB_KB_MODE=reject bench "$out/a" --kb-root "$out/other-kb"
[ "$rc" = 3 ] && [ "$(field "$out/a" 'r["kernelbench_check"]["status"]')" = disagree ] && ok \
  || bad "a verdict from another KernelBench was kept (rc $rc)"
[ "$(field "$out/a" 'r["kernelbench_check"]["root"]')" = "$(realpath "$out/other-kb")" ] && ok \
  || bad "the checkout used is not recorded"

# 3. KernelBench missing: said so, exit 0; then checked later without evolving again
bench "$out/b" --kb-crosscheck
[ "$rc" = 0 ] && ok || bad "missing KernelBench made the sweep fail ($rc)"
[ "$(field "$out/b" 'r["kernelbench_check"]["status"]')" = unavailable ] && ok || bad "missing KernelBench not reported"
grep -q "not importable" "$out/b/summary.md" && ok || bad "summary does not say KernelBench was not importable"
wall=$(field "$out/b" 'r["wall_s"]')
STUB_KB_MODE=reject bench "$out/b" --kb-root "$stub"
[ "$rc" = 3 ] && ok || bad "a disagreement did not exit 3 (rc $rc)"
[ "$(field "$out/b" 'r["kernelbench_check"]["status"]')" = disagree ] && ok || bad "disagreement not recorded"
[ "$(field "$out/b" 'r["wall_s"]')" = "$wall" ] && ok || bad "the problem was evolved again for its check"
grep -q "1_Linear_Gelu_Scale: \*\*disagrees\*\* — KernelBench finds the ModelNew we verified incorrect" \
  "$out/b/summary.md" && ok || bad "summary does not list the disagreement"

# 4. an evaluation that crashes: no verdict, the sweep goes on
STUB_KB_MODE=crash bench "$out/c" --kb-root "$stub"
[ "$rc" = 0 ] && ok || bad "a crashing evaluation failed the sweep ($rc)"
[ "$(field "$out/c" 'r["kernelbench_check"]["status"]')" = error ] && ok || bad "crash not reported as no verdict"
field "$out/c" 'r["kernelbench_check"]["reason"]' | grep -q "signal 11" && ok || bad "crash reason missing"
[ "$(field "$out/c" 'r["correct"]')" = True ] && ok || bad "our verdict was lost"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
