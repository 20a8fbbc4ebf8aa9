#!/usr/bin/env bash
# Python worker: lint (ruff) and tests (pytest).
set -euo pipefail
.venv/bin/ruff check engine/worker/python tests/python
PYTHONPATH=engine/worker/python .venv/bin/python -m pytest -q tests/python
