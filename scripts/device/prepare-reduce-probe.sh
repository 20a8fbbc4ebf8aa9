#!/usr/bin/env bash
# On the development machine, before a device call of scripts/device/reduce_probe.py:
# writes the builtin proposer's candidates for tests/fixtures/propose/rms_written_out.json
# as one subkernel (the fused broadcast-epilogue kernels and their `_apart` two-kernel
# variants, checked against the reference under the interpreter by the e2e test that
# writes them) into .kb/reduce-probe, which the call carries with .kb:
#   bash scripts/device/prepare-reduce-probe.sh [BUILD_DIR]        (default build-dev)
#   run: python3 scripts/device/reduce_probe.py .kb/reduce-probe $OUT   carry: .kb
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-dev}
log=$(MK_KEEP_TMP=1 "$root/$build/tests/mk_tests" \
  propose_e2e/reductions_with_broadcast_epilogues_match_reference 2>&1)
echo "$log" | grep -q "^ok " || { echo "$log" | tail -20 >&2; exit 1; }
dir=$(echo "$log" | awk '$1 == "rms_written_out.json" && $2 == "->" {print $3}' | tail -n 1)
[ -d "$dir/sk0" ] || { echo "prepare-reduce-probe: no candidates found" >&2; exit 1; }
rm -rf "$root/.kb/reduce-probe"
mkdir -p "$root/.kb"
cp -r "$dir/sk0" "$root/.kb/reduce-probe"
ls "$root/.kb/reduce-probe"
