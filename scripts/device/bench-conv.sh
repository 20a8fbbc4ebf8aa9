#!/usr/bin/env bash
# The conv-led dev-split level-2 problems on the GPU, with the settings of the
# committed sweep (docs/bench/l2-devsplit-h200: --budget 6 --depth 0), so the
# layout planning can be compared problem by problem. Resumable like
# bench-l2.sh; the output folder comes back as one archive under $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
out=/tmp/bench-conv
mkdir -p "$out/problems"
cp "$KB"/bench-conv/problems/*.json "$out/problems/" 2>/dev/null
probs=()
for p in ${BENCH_PROBLEMS:-25 65 85 35 5 100 60 90 15 20 50 10}; do
  probs+=("$(ls "$KB"/level2/${p}_*.py)")
done
timeout "${BENCH_SECONDS:-540}" "$MK" bench "${probs[@]}" -o "$out" --budget 6 --depth 0 2>&1 | tail -40
tar czf "$OUT/bench-conv.tgz" -C /tmp bench-conv
