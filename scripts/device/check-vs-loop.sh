#!/usr/bin/env bash
# `mkevolve check` against a plain CUDA-event loop (scripts/device/check_loop.py)
# on evolved level-2 problems, and the wall time of an uncached vs a cached
# check. Evolves each problem first (builtin proposer, small budget) when no
# ModelNew for it is in /tmp/check-mn yet.
set -uo pipefail
source "$(dirname "$0")/env.sh"
STEMS=${STEMS:-"70_Gemm_Sigmoid_Scaling_ResidualAdd 95_Matmul_Add_Swish_Tanh_GELU_Hardtanh 65_Conv2d_AvgPool_Sigmoid_Sum"}
: > "$OUT/check.jsonl"
export MKEVOLVE_CACHE_DIR=/tmp/mkevolve-check-cache
rm -rf "$MKEVOLVE_CACHE_DIR"
for stem in $STEMS; do
  p="$KB/level2/$stem.py"; mn="/tmp/check-mn/$stem.py"
  mkdir -p /tmp/check-mn
  # the evolve has a cache of its own: the first check below must be uncached
  [ -f "$mn" ] || MKEVOLVE_CACHE_DIR=/tmp/mkevolve-evolve-cache "$MK" evolve "$p" -o "$mn" --budget 6 --depth 0 2>&1 | tail -8
  [ -f "$mn" ] || { echo "no ModelNew for $stem"; continue; }
  loop=$(python3 "$root/scripts/device/check_loop.py" "$p" 100)
  t0=$(date +%s.%N); "$MK" check "$mn" --against "$p" --json > /tmp/c1.json 2>/tmp/c1.err; t1=$(date +%s.%N)
  "$MK" check "$mn" --against "$p" --json > /tmp/c2.json 2>/dev/null; t2=$(date +%s.%N)
  python3 - "$stem" "$loop" "$t0" "$t1" "$t2" >> "$OUT/check.jsonl" <<'PY'
import json, sys
stem, loop, t0, t1, t2 = sys.argv[1], json.loads(sys.argv[2]), *map(float, sys.argv[3:])
c1, c2 = json.load(open("/tmp/c1.json")), json.load(open("/tmp/c2.json"))
print(json.dumps({"problem": stem, "loop": loop, "check_uncached": c1, "check_cached": c2,
                  "wall_uncached_s": t1 - t0, "wall_cached_s": t2 - t1}))
PY
  tail -c 300 /tmp/c1.err
done
python3 - "$OUT/check.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    tim = ((r["check_uncached"].get("result") or {}).get("timing") or {})
    eager = (tim.get("reference_eager") or {}).get("median_ms")
    loop = r["loop"]["flushed_ms"]
    dev = f"{100 * (eager - loop) / loop:+.1f}%" if eager else "n/a"
    print(f'{r["problem"]}: check eager {eager} ms, plain loop {loop:.3f} ms (flushed), '
          f'{r["loop"]["back_to_back_ms"]:.3f} ms (back to back), difference {dev}; '
          f'wall uncached {r["wall_uncached_s"]:.2f} s, cached {r["wall_cached_s"]:.3f} s, '
          f'cached flag {r["check_cached"].get("cached")}')
PY
