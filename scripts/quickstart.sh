#!/usr/bin/env bash
# One command on a fresh machine: set up, then evolve the example problem
# with the builtin proposer and CPU verification (no GPU, no LLM key).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
problem=${1:-examples/conv_bias_relu.py}
mkdir -p .mkevolve
./build/mkevolve analyze "$problem"
./build/mkevolve evolve "$problem" -o .mkevolve/ModelNew.py --proposer builtin
echo "quickstart: composed ModelNew written to .mkevolve/ModelNew.py"
