# Sourced on the GPU machine: run the carried devkit build against the
# machine's own Python (torch, triton) with the repository's worker.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export LD_LIBRARY_PATH="$root/.devkit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MKEVOLVE_PYTHON=${MKEVOLVE_PYTHON:-$(command -v python3)}
export MKEVOLVE_WORKER_PATH="$root/engine/worker/python"
export MKEVOLVE_CACHE_DIR=${MKEVOLVE_CACHE_DIR:-/tmp/mkevolve-cache}
export PYTHONUNBUFFERED=1
MK="$root/.devkit/mkevolve"
KB="$root/.kb"
