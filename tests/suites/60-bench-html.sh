#!/usr/bin/env bash
# Renders a bench HTML report in headless Chromium and checks that the
# plots and table are in the rendered DOM (no network is used).
set -euo pipefail
build=${MK_BUILD_DIR:-build-asan}
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
  fi
fi
if ! command -v chromium >/dev/null; then
  echo "1 skipped: chromium is not installed"; exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
MK_BENCH_HTML_OUT="$out" "$build/tests/mk_tests" bench/markdown_and_html_reports >/dev/null
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$out/profile")
timeout 120 chromium "${flags[@]}" --dump-dom "file://$out/report.html" > "$out/dom.html" 2>/dev/null
timeout 120 chromium "${flags[@]}" --window-size=1100,1400 --screenshot="$out/shot.png" \
  "file://$out/report.html" >/dev/null 2>&1
passed=0; failed=0
check() { if grep -q "$1" "$out/dom.html"; then passed=$((passed+1)); else echo "missing in DOM: $1"; failed=$((failed+1)); fi; }
check '<svg role="img" aria-label="speedup distribution"'
check 'aria-label="speedup per problem"'
check 'aria-label="time per subkernel"'
check 'level2/b'
size=$(stat -c %s "$out/shot.png" 2>/dev/null || echo 0)
if [ "$size" -gt 10000 ]; then passed=$((passed+1)); else echo "screenshot too small ($size bytes)"; failed=$((failed+1)); fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
