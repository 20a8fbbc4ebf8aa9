#!/usr/bin/env bash
# Prepares, on the development machine, what the device scripts carry besides
# .devkit (scripts/devkit.sh): .kb (the dev split from ../shared/kernelbench,
# KernelBench's own eval as .kb/kbeval, stand-ins for the LLM modules its
# package imports but eval never uses) and .whl (pydantic, which the GPU
# machine lacks). Both folders are git-ignored. Carry: .devkit .kb .whl
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
shared=${MK_SHARED_DIR:-$root/../shared}
cd "$root"
rm -rf .kb && mkdir -p .kb/standins
cp -r "$shared"/kernelbench/level1 "$shared"/kernelbench/level2 "$shared"/kernelbench/level3 .kb/
cp -r "$shared"/kernelbench-eval .kb/kbeval
printf 'def load_dotenv(*a, **k):\n    return False\n' > .kb/standins/dotenv.py
printf 'class OpenAI:\n    def __init__(self, *a, **k):\n        raise RuntimeError("stand-in: no LLM here")\n' \
  > .kb/standins/openai.py
printf 'def completion(*a, **k):\n    raise RuntimeError("stand-in: no LLM here")\n' > .kb/standins/litellm.py
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl pydantic==2.11.7 pydantic-core==2.33.2 annotated-types==0.7.0 typing-inspection==0.4.1
echo "prepare-kb: $(ls .kb | tr '\n' ' ')/ .whl: $(ls .whl | wc -l) wheels"
