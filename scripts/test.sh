#!/usr/bin/env bash
# The test command: sets up (idempotent), builds with ASan+UBSan, and runs
# every suite in tests/suites/ in name order (C via ctest, Python via
# pytest, editors, end-to-end). GPU tests skip themselves without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export MK_BUILD_DIR=${MK_BUILD_DIR:-build-asan}
MK_SANITIZE=ON MK_BUILD_TYPE=Debug bash scripts/setup.sh
export MKEVOLVE_BIN="$root/$MK_BUILD_DIR/mkevolve"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for suite in tests/suites/*.sh; do
  echo "=== suite $(basename "$suite")"
  if ! bash "$suite"; then failed+=("$(basename "$suite")"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed suites: ${failed[*]}"
  exit 1
fi
echo "test.sh: all suites passed"
