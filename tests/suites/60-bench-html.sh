#!/usr/bin/env bash
# Renders bench HTML reports in headless Chromium (no network) and checks
# what a person sees on the page: for a CPU sweep (no timings) a notice
# saying why, not styled as an error, "n/a" where a number cannot be known,
# no empty chart, correctness and what each subkernel became; for a GPU
# sweep the three charts, the numbers and no such notice. The reports come
# from the real binary (`bench --report-only`) over committed records
# (tests/fixtures/bench/{cpu,gpu}/problems), plus the C test's synthetic one.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${MK_BUILD_DIR:-build-asan}
bin=${MKEVOLVE_BIN:-$root/$build/mkevolve}
py=${MK_PYTHON:-$root/.venv/bin/python}
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
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
       --disable-background-networking --disable-component-update --disable-sync
       --user-data-dir="$out/profile")
render() { # report.html -> dom.html, shot.png beside it
  timeout 120 chromium "${flags[@]}" --dump-dom "file://$1/report.html" > "$1/dom.html" 2>/dev/null
  timeout 120 chromium "${flags[@]}" --window-size=1100,1400 --screenshot="$1/shot.png" \
    "file://$1/report.html" >/dev/null 2>&1
}
mkdir -p "$out/synthetic"
MK_BENCH_HTML_OUT="$out/synthetic" "$build/tests/mk_tests" bench/markdown_and_html_reports >/dev/null
render "$out/synthetic"
for kind in cpu gpu; do
  mkdir -p "$out/$kind"
  cp -r "tests/fixtures/bench/$kind/problems" "$out/$kind/"
  device=$([ "$kind" = cpu ] && echo cpu || echo "NVIDIA H200")
  "$bin" bench --report-only -o "$out/$kind" --device-name "$device" \
    --command "mkevolve bench level2 --device $kind" >/dev/null
  render "$out/$kind"
done
"$py" - "$out" <<'EOF'
"""What a person sees: the rendered DOM's text outside <style>/<title> (SVG
tooltips included in <title> are not on screen), per element class."""
import html.parser
import json
import os
import sys

out = sys.argv[1]
failed = 0
passed = 0


class Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.bad: list[str] = []      # text inside elements styled as errors (class=bad)
        self.notice: list[str] = []   # text inside class=notice
        self.labels: list[str] = []   # aria-labels (charts, tables)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("aria-label"):
            self.labels.append(a["aria-label"] or "")
        if tag not in ("br", "meta", "rect", "line", "img"):
            self.stack.append((tag, a.get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break

    def handle_data(self, data: str) -> None:
        if any(t in ("style", "title", "head") for t, _ in self.stack):
            return
        self.text.append(data)
        classes = {c for _, cl in self.stack for c in cl.split()}
        if "bad" in classes:
            self.bad.append(data)
        if "notice" in classes:
            self.notice.append(data)


def page(kind: str) -> Page:
    p = Page()
    with open(os.path.join(out, kind, "dom.html"), encoding="utf-8") as f:
        p.feed(f.read())
    return p


def check(ok: bool, what: str) -> None:
    global failed, passed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL", what)


for kind in ("synthetic", "cpu", "gpu"):
    size = os.path.getsize(os.path.join(out, kind, "shot.png")) if os.path.exists(
        os.path.join(out, kind, "shot.png")) else 0
    check(size > 10000, f"{kind}: screenshot too small ({size} bytes)")

syn = page("synthetic")
check({"speedup distribution", "speedup per problem", "time per subkernel"} <= set(syn.labels),
      "synthetic: the three charts are drawn")
check("level2/b" in "".join(syn.text), "synthetic: problem ids shown")

cpu = page("cpu")
text = " ".join(" ".join(cpu.text).split())
notice = " ".join(" ".join(cpu.notice).split())
check("No timings" in notice and "ran on the CPU" in notice and "interpreter" in notice,
      f"cpu: the no-timing notice says why ({notice[:80]!r})")
check(not any("No timings" in t for t in cpu.bad), "cpu: the notice is not styled as an error")
check(not any("reduced batch" in t for t in cpu.bad), "cpu: 'reduced batch 2 on CPU' is not an error")
check("reduced batch 2 on CPU" in text, "cpu: the reduced batch is still said")
check(not ({"speedup distribution", "speedup per problem", "time per subkernel"} & set(cpu.labels)),
      f"cpu: no empty chart ({cpu.labels})")
check("0.00" not in text, "cpu: no 0.00 anywhere")
check("n/a" in text, "cpu: n/a where a number cannot be known")
check("what each subkernel became" in cpu.labels, "cpu: the subkernel table is there")
check("triton_rows_b1024_w4 (builtin, triton)" in text, "cpu: a replaced subkernel names its kernel and backend")
check("Subkernels by backend: 0 CUDA C++," in text, "cpu: the subkernels counted by backend")
check("every candidate timed out" in text, "cpu: a kept reference says why")
check(any("timed out in verification" in t for t in cpu.bad), "cpu: a real failure is styled as one")
res = json.load(open(os.path.join(out, "cpu", "results.json"), encoding="utf-8"))
agg = res["aggregate"]
check(agg["timed"] == 0 and agg["fast_vs_eager"]["1"] is None and agg["fast_vs_eager"]["0"] > 0,
      f"cpu: results.json has fast_1 null, fast_0 known ({agg['fast_vs_eager']})")
old = [p for p in res["problems"] if p["id"].startswith("level2/30")][0]
check(old["error"] is None and old["note"] == "reduced batch 2 on CPU",
      "cpu: an old record's note moves out of error")

gpu = page("gpu")
text = " ".join(" ".join(gpu.text).split())
check({"speedup distribution", "speedup per problem", "time per subkernel"} <= set(gpu.labels),
      f"gpu: the three charts are drawn ({gpu.labels})")
check(not gpu.notice and "No timings" not in text, "gpu: no no-timing notice")
check("1.58x" in text, "gpu: speedups shown")
check("what each subkernel became" in gpu.labels and "triton_gemm128x128x32_w8_s3_tf32x3 (builtin, triton)" in text,
      "gpu: what each subkernel became")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
