#!/usr/bin/env python3
"""Rewrites the paths of the machine that ran a sweep out of committed bench
artefacts (docs/bench/**): a KernelBench problem becomes kernelbench/levelN/...,
a checkout (/work/<name>/) becomes repository-relative, a /tmp folder its own name.
Run it on a sweep's folder before committing it; tests/python/test_bench_artefacts.py
fails on any such path left.

    scripts/bench-scrub.py docs/bench/NEW-SWEEP
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

# Absolute paths only (a relative ../shared/kernelbench is the project's layout, not
# the machine's). Order matters: the KernelBench rule sees the whole path before the others cut it.
RULES = [
    (re.compile(r"(?<![\w./])(?:/[\w.+-]+)*/(?:\.kb|kernelbench)(?=/|\b)"), "kernelbench"),
    (re.compile(r"(?<![\w./])/work/[\w.+-]+/"), ""),
    (re.compile(r"(?<![\w./])/tmp/"), ""),
]

# What counts as a machine path (the test's check too): an absolute path under
# one of these roots, not inside a longer word or URL.
MACHINE_PATH = re.compile(r"(?<![\w./:])/(?:work|home|root|tmp|shared|scratch|mnt|Users)/")


def scrub_text(text: str) -> str:
    for pattern, repl in RULES:
        text = pattern.sub(repl, text)
    return text


def scrub(root: Path) -> int:
    changed = 0
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = scrub_text(text)
        if new != text:
            f.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def main(argv: list[str]) -> int:
    roots = [Path(a) for a in argv] or [Path(__file__).resolve().parent.parent / "docs" / "bench"]
    for r in roots:
        print(f"{r}: {scrub(r)} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
