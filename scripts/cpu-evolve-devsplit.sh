#!/usr/bin/env bash
# Default-option `mkevolve evolve` on the CPU over the KernelBench dev split
# (levels 2 and 3), one problem at a time, each with a fresh verdict cache
# (what a new user has): wall time, how each problem ended and why.
#   scripts/cpu-evolve-devsplit.sh [OUT_DIR]      (default docs/bench/cpu-evolve-devsplit)
# Problems are read from $MK_SHARED_DIR/kernelbench (default ../shared beside
# the checkout) and never copied. Writes OUT_DIR/results.jsonl (one record per
# problem) and OUT_DIR/results.md (the table). MK_BIN picks the binary
# (default build/mkevolve); MK_LEVELS the levels (default "3 2"); MK_EVOLVE_ARGS options added
# to every evolve (e.g. "--time-budget 40" for a quick pass over level 1).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs/bench/cpu-evolve-devsplit}
shared=${MK_SHARED_DIR:-$root/../shared}
bin=${MK_BIN:-$root/build/mkevolve}
py=$root/.venv/bin/python
levels=${MK_LEVELS:-3 2}
[ -x "$bin" ] || { echo "no $bin: run scripts/setup.sh" >&2; exit 1; }
[ -d "$shared/kernelbench" ] || { echo "no $shared/kernelbench" >&2; exit 1; }
mkdir -p "$out"
: > "$out/results.jsonl"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

for level in $levels; do
  # numeric order of the problem number
  for f in $(ls "$shared/kernelbench/level$level" | grep '\.py$' | sort -V); do
    f="$shared/kernelbench/level$level/$f"
    name=$(basename "$f" .py)
    run="$scratch/$level-$name"
    mkdir -p "$run/cache" "$run/work"
    load0=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    (cd "$run" && "$bin" evolve "$f" --json -q ${MK_EVOLVE_ARGS:-} --cache-dir "$run/cache" --workdir "$run/work" \
        > "$run/out.json" 2> "$run/err.txt")
    rc=$?
    t1=$(date +%s.%N)
    load1=$(cut -d' ' -f1 /proc/loadavg)
    "$py" - "$level" "$name" "$rc" "$t0" "$t1" "$load0" "$load1" "$run" >> "$out/results.jsonl" <<'EOF'
import json, sys
level, name, rc, t0, t1, load0, load1, run = sys.argv[1:]
rec = {"level": int(level), "problem": name, "exit": int(rc),
       "wall_s": round(float(t1) - float(t0), 1), "load_start": float(load0), "load_end": float(load1)}
try:
    j = json.load(open(f"{run}/out.json"))
except (OSError, ValueError):
    j = None
if j is None:
    err = open(f"{run}/err.txt", errors="replace").read().strip().splitlines()
    rec.update(verified=False, error=(err[-1] if err else "no output"))
else:
    sks = j.get("subkernels", [])
    states: dict[str, int] = {}
    for s in sks:
        states[s["state"]] = states.get(s["state"], 0) + 1
    rec.update(verified=bool(j.get("verified")), note=j.get("note", ""), subkernels=len(sks),
               states=states,
               kept=[{"subkernel": s["name"], "state": s["state"], "why": s["summary"]}
                     for s in sks if s["state"] != "verified"])
print(json.dumps(rec))
EOF
    tail -1 "$out/results.jsonl" | cut -c1-200
  done
done

"$py" - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
recs = [json.loads(line) for line in open(f"{out}/results.jsonl")]
rows = ["| level | problem | wall (s) | load at start/end | ended | subkernels: Triton / PyTorch | why PyTorch stayed (first) |",
        "|---|---|---:|---|---|---|---|"]
for r in recs:
    ended = "verified" if r.get("verified") else f"error: {r.get('error', 'not verified')}"
    st = r.get("states", {})
    tri = st.get("verified", 0)
    kept = r.get("subkernels", 0) - tri
    why = ""
    if r.get("kept"):
        k = r["kept"][0]
        why = f"{k['subkernel']}: {k['why']}".replace("|", "/")[:160]
        if len(r["kept"]) > 1:
            why += f" (+{len(r['kept']) - 1} more)"
    rows.append(f"| {r['level']} | {r['problem']} | {r['wall_s']:.0f} | {r['load_start']:.1f}/{r['load_end']:.1f} "
                f"| {ended} | {tri} / {kept} | {why} |")
walls = [r["wall_s"] for r in recs]
rows.append("")
rows.append(f"{len(recs)} problems; wall time max {max(walls):.0f} s, median "
            f"{sorted(walls)[len(walls) // 2]:.0f} s, total {sum(walls) / 60:.1f} min; "
            f"{sum(w < 300 for w in walls)} under 5 minutes; "
            f"{sum(bool(r.get('verified')) for r in recs)} verified as a whole.")
open(f"{out}/results.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows[-1:]))
EOF
