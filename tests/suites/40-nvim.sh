#!/usr/bin/env bash
# End-to-end in a real editor: headless Neovim (Debian's 0.7.2 or newer)
# runs editors/nvim against `mkevolve lsp` on a KernelBench problem.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${MKEVOLVE_BIN:-$root/${MK_BUILD_DIR:-build-asan}/mkevolve}
if ! command -v nvim >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq neovim >/dev/null
  fi
fi
if ! command -v nvim >/dev/null; then
  echo "40-nvim: skipped (neovim is not installed and cannot be installed here)"
  exit 0
fi
[ -x "$bin" ] || { echo "40-nvim: $bin not built" >&2; exit 1; }
problem=${MK_SHARED_DIR:-$root/../shared}/kernelbench/level2/40_Matmul_Scaling_ResidualAdd.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -f "$problem" ]; then
  cp "$problem" "$tmp/model.py"
  chmod u+w "$tmp/model.py"
else # a KernelBench-format problem of our own when ../shared is absent
  cat > "$tmp/model.py" <<'PY'
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x)
        original_x = x.clone().detach()
        x = x * self.scaling_factor
        x = x + original_x
        return x


def get_inputs():
    return [torch.rand(128, 64)]


def get_init_inputs():
    return [64, 128, 0.5]
PY
fi
# A fresh result cache: the engine run below really captures and verifies.
export MKEVOLVE_CACHE_DIR="$tmp/cache"
export MKEVOLVE_BIN="$bin" MK_E2E_FILE="$tmp/model.py" MK_REPO_DIR="$root"
# ASan's leak report at exit would go to the editor's pipe, not ours.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:log_path="$tmp/asan"
nvim --version | head -1
run() { # script, time limit
  timeout "$2" nvim --headless -u NONE -i NONE -n \
    -c "lua local ok, e = pcall(dofile, '$root/tests/e2e/nvim/$1'); if not ok then print(e); vim.cmd('cquit 1') end"
}
rc=0
echo "40-nvim: static diagnostics"
run diagnostics.lua 120 || rc=$?
# The engine end to end: capture, decompose, evolve all on CPU with the
# builtin proposer, swap, restore, edit + save, cancel.
mkdir -p "$tmp/engine"
cp "$root/examples/conv_bias_relu.py" "$tmp/engine/conv_bias_relu.py"
echo "40-nvim: engine (capture, decompose, evolve, swap, restore, save, cancel)"
MK_E2E_FILE="$tmp/engine/conv_bias_relu.py" run engine.lua 420 || rc=$?
if ls "$tmp"/asan* >/dev/null 2>&1; then
  cat "$tmp"/asan* >&2
  echo "40-nvim: the server reported sanitizer errors" >&2
  exit 1
fi
exit $rc
