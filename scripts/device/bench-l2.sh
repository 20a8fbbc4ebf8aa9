#!/usr/bin/env bash
# The dev-split level-2 sweep on the GPU with the builtin proposer. Resumable:
# records already in .kb/bench-l2/problems (carried back from an earlier call)
# are kept. The whole output folder comes back as one archive under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
out=/tmp/bench-l2
mkdir -p "$out/problems"
cp "$KB"/bench-l2/problems/*.json "$out/problems/" 2>/dev/null
timeout "${BENCH_SECONDS:-520}" "$MK" bench "$KB/level2" -o "$out" --budget 6 --depth 0 2>&1 | tail -30
tar czf "$OUT/bench-l2.tgz" -C /tmp bench-l2
