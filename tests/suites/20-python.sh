#!/usr/bin/env bash
# Python worker: lint (ruff) and tests (pytest).
set -euo pipefail
.venv/bin/ruff check engine/worker/python tests/python tests/fixtures/kernelbench_stub
PYTHONPATH=engine/worker/python .venv/bin/python -m pytest -q tests/python
