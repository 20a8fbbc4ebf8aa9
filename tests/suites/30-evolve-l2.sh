#!/usr/bin/env bash
# `mkevolve evolve` end to end on five KernelBench level-2 problems, on the
# CPU (Triton interpreter, batch 1, builtin proposer, small budget): each run
# must end with a composition verified as a whole, and with at least the
# listed number of subkernels running builtin kernels (chosen variant not the
# PyTorch reference). Together they cover a conv with a fused reduction tail,
# GEMM + group norm, conv + avg pool + reduction, conv-transpose + batch norm
# in training mode (running statistics updated in place), and GEMM + max +
# mean + GELU. About 4 minutes on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${MK_BUILD_DIR:-build-asan}
bin=${MKEVOLVE_BIN:-$root/$build/mkevolve}
shared=${MK_SHARED_DIR:-$root/../shared}
l2="$shared/kernelbench/level2"
if [ ! -d "$l2" ]; then
  echo "1 skipped: no KernelBench problems in $l2"; exit 0
fi
if [ ! -x "$bin" ]; then
  echo "mkevolve not built: $bin"; exit 1
fi
py=${MK_PYTHON:-$root/.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# A fresh verdict cache: every candidate is verified in this run, none reused.
export MKEVOLVE_CACHE_DIR="$out/cache"

# problem, budget (candidates in all), minimum builtin subkernels chosen
problems=(
  "25_Conv2d_Min_Tanh_Tanh 3 2"
  "30_Gemm_GroupNorm_Hardtanh 4 2"
  "65_Conv2d_AvgPool_Sigmoid_Sum 3 2"
  "15_ConvTranspose3d_BatchNorm_Subtract 5 3"
  "80_Gemm_Max_Subtract_GELU 4 2"
)
passed=0; failed=0
for entry in "${problems[@]}"; do
  read -r name budget want <<<"$entry"
  file="$l2/$name.py"
  if [ ! -f "$file" ]; then
    echo "skip $name: not in $l2"; continue
  fi
  start=$(date +%s)
  rc=0
  timeout 600 "$bin" evolve "$file" --device cpu --batch 1 --trials 1 --beam 2 --budget "$budget" \
    --json -q --workdir "$out/$name" -o "$out/$name.py" >"$out/$name.json" 2>"$out/$name.err" || rc=$?
  secs=$(( $(date +%s) - start ))
  verdict=$("$py" - "$out/$name.json" "$want" <<'EOF'
import json
import sys

try:
    with open(sys.argv[1]) as f:
        d = json.load(f)
except (OSError, ValueError) as exc:
    print(f"FAIL no JSON result ({exc})")
    sys.exit(0)
want = int(sys.argv[2])
chosen = []
for sk in d.get("subkernels", []):
    v = sk["variants"][sk["chosen"]] if sk.get("variants") else {}
    if sk.get("chosen", 0) > 0 and v.get("origin") == "builtin" and v.get("status") == "ok":
        chosen.append(f"{sk['name']}={v['name']}")
n = len(d.get("subkernels", []))
detail = f"{len(chosen)}/{n} builtin: " + ", ".join(chosen)
if d.get("verified") is not True:
    print("FAIL composition not verified; " + detail)
elif len(chosen) < want:
    print(f"FAIL fewer than {want} builtin subkernels; " + detail)
else:
    print("ok verified; " + detail)
EOF
)
  if [ "$rc" -eq 0 ] && [[ "$verdict" == ok* ]]; then
    passed=$((passed+1)); echo "ok   $name (${secs}s): $verdict"
  else
    failed=$((failed+1)); echo "FAIL $name (${secs}s, rc=$rc): $verdict"
    tail -n 5 "$out/$name.err" | sed 's/^/    /'
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
