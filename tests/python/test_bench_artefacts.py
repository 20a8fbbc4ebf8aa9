"""Committed bench artefacts (docs/bench/**) hold no paths of the machine that made
them (scripts/bench-scrub.py rewrites them), and the scrubber does what it says."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_scrub", REPO / "scripts" / "bench-scrub.py")
assert _spec is not None and _spec.loader is not None
scrub = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scrub)


def test_no_machine_paths_in_committed_bench_artefacts():
    found = []
    for f in sorted(p for p in (REPO / "docs" / "bench").rglob("*") if p.is_file()):
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for m in scrub.MACHINE_PATH.finditer(text):
            found.append(f"{f.relative_to(REPO)}: {text[m.start():m.start() + 60]!r}")
    assert not found, "run scripts/bench-scrub.py on:\n" + "\n".join(found[:20])


def test_scrub_rewrites_machine_paths_and_keeps_relative_ones():
    text = ("mkevolve bench /work/main/.kb/level3/35_LSTM.py /shared/kernelbench/level2/40_x.py "
            "-o /tmp/bench-out --kb-root /work/shared/kernelbench; "
            "exec '/work/wt19/build/mkevolve' "
            "from ../shared/kernelbench/level2/65_y.py")
    out = scrub.scrub_text(text)
    assert out == ("mkevolve bench kernelbench/level3/35_LSTM.py kernelbench/level2/40_x.py "
                   "-o bench-out --kb-root kernelbench; exec 'build/mkevolve' "
                   "from ../shared/kernelbench/level2/65_y.py")
    assert not scrub.MACHINE_PATH.search(out)
    assert scrub.MACHINE_PATH.search(text)
