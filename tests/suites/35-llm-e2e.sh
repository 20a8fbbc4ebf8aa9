#!/usr/bin/env bash
# `mkevolve evolve --proposer llm` end to end on CPU against scripted LLM
# servers on loopback (OpenAI and Anthropic protocols; no network): a
# verified LLM kernel replaces a subkernel, a wrong one is repaired from its
# mismatch report, unusable replies, 429/5xx, timeouts and truncated
# streams are contained, the ledger matches the server's usage, the key
# never reaches a file or a log; modular vs --monolithic.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${MK_BUILD_DIR:-build-asan}
export MKEVOLVE_BIN=${MKEVOLVE_BIN:-$root/$build/mkevolve}
if [ ! -x "$MKEVOLVE_BIN" ]; then
  echo "35-llm-e2e: $MKEVOLVE_BIN is not built" >&2
  exit 1
fi
.venv/bin/ruff check tests/e2e/llm tests/llm
# The bound keeps a hung run from stalling CI; the suite takes well under it.
timeout 300 .venv/bin/python tests/e2e/llm/llm_e2e.py
