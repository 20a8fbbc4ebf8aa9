#!/usr/bin/env bash
# The dev-split level-3 sweep on the GPU with the builtin proposer. Resumable:
# records already in .kb/bench-l3/problems (carried back from an earlier call)
# are kept; PROBLEMS (file names in level3/, default all) picks which run.
# The whole output folder comes back as one archive under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
# L3_OUT names another folder (under /tmp) and FRESH=1 skips the carried records.
out=${L3_OUT:-/tmp/bench-l3}
mkdir -p "$out/problems"
[ -n "${FRESH:-}" ] || cp "$KB"/bench-l3/problems/*.json "$out/problems/" 2>/dev/null
paths=()
for p in ${PROBLEMS:-}; do paths+=("$KB/level3/$p"); done
[ ${#paths[@]} -gt 0 ] || paths=("$KB/level3")
timeout "${BENCH_SECONDS:-420}" "$MK" bench "${paths[@]}" -o "$out" --budget "${BUDGET:-6}" --depth 0 2>&1 | tail -30
tar czf "$OUT/$(basename "$out").tgz" -C "$(dirname "$out")" "$(basename "$out")"
