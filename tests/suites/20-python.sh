#!/usr/bin/env bash
# Python worker: lint (ruff) and tests (pytest).
set -euo pipefail
# The whole tree: committed ModelNew outputs are excluded in pyproject.toml, by name.
.venv/bin/ruff check .
PYTHONPATH=engine/worker/python .venv/bin/python -m pytest -q tests/python
