#!/usr/bin/env bash
# The C++ export (docs/export.md), end to end on the CPU: the fixture ModelNew
# (Triton kernels) is refused on --device cpu without --kernels-as-pytorch
# (they are compiled in for a GPU otherwise), then exported with it,
# built against the CPU libtorch of .venv and its generated test run against
# the PyTorch Model's outputs; the test must then fail on a corrupted weight
# and on a wrong op. One small libtorch build (about 10 s of compile on two
# cores). Skips, saying so, without libtorch; the GPU variant (--device cuda)
# skips without a GPU.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${MKEVOLVE_BIN:-$root/build-asan/mkevolve}
py=$root/.venv/bin/python
prefix=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
if [ -z "$prefix" ] || [ ! -f "$prefix/Torch/TorchConfig.cmake" ]; then
  echo "SKIP 65-export: no libtorch through $py (torch.utils.cmake_prefix_path)"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fixture=$root/tests/fixtures/export/small_net_modelnew.py
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
fail() { echo "FAIL 65-export: $*"; exit 1; }

# 1. Triton subkernels are compiled for a GPU: --device cpu without
#    --kernels-as-pytorch is refused, each named, with the way out.
if "$bin" export "$fixture" -o "$work/refused" --device cpu 2> "$work/refused.err"; then
  fail "a ModelNew with Triton kernels was exported for --device cpu without --kernels-as-pytorch"
fi
grep -q "sk0 conv2d (Triton: triton_convcl)" "$work/refused.err" || fail "the refusal does not name sk0: $(cat "$work/refused.err")"
grep -q -- "--kernels-as-pytorch" "$work/refused.err" || fail "the refusal does not say what to do"
echo "ok   refuses Triton subkernels on --device cpu, naming them"

# 2. Export, build, test: the exported forward matches the PyTorch Model.
x=$work/small
"$bin" export "$fixture" -o "$x" --kernels-as-pytorch --namespace mk_small
cmake -S "$x" -B "$x/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log" ||
  { cat "$work/cmake.log"; fail "the generated project does not configure"; }
cmake --build "$x/build" -j 2 > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "the generated project does not build"; }
ctest --test-dir "$x/build" --output-on-failure || fail "the exported forward differs from the PyTorch Model"
echo "ok   exported, built against libtorch, its test passes"

# 3. The test can fail: a weight scaled by 1.5 ...
cp "$x/data/weights.mkt" "$work/weights.orig"
PYTHONPATH=engine/worker/python "$py" - "$x/data/weights.mkt" <<'PY'
import sys
from mkworker.export_data import read_tensors, write_tensors
w = read_tensors(sys.argv[1])
w["fc.weight"] = w["fc.weight"] * 1.5
write_tensors(sys.argv[1], w.items())
PY
if "$x/build/mk_small_test" "$x/data" > "$work/bad-weight.log"; then
  cat "$work/bad-weight.log"; fail "the test passed with a corrupted weight"
fi
grep -q "^FAIL output" "$work/bad-weight.log" || fail "a corrupted weight did not fail an output"
cp "$work/weights.orig" "$x/data/weights.mkt"
echo "ok   its test fails on a corrupted weight"

# ... and a wrong op (softmax -> log_softmax) in the generated forward.
sed -i 's/at::softmax(/at::log_softmax(/' "$x/mk_small.cpp"
grep -q "at::log_softmax(" "$x/mk_small.cpp" || fail "the fixture's forward has no softmax to corrupt"
cmake --build "$x/build" -j 2 > "$work/rebuild.log" 2>&1 || { cat "$work/rebuild.log"; fail "rebuild"; }
if "$x/build/mk_small_test" "$x/data" > "$work/bad-op.log"; then
  cat "$work/bad-op.log"; fail "the test passed with a wrong op"
fi
echo "ok   its test fails on a wrong op"

# 5. CUDA C++ subkernels compiled in (compile only: no GPU, and the CPU
#    wheel has no CUDA libraries to link): the C test writes the project of a
#    ModelNew composed of the builtin CUDA generator's candidates; nvcc
#    compiles its kernels and g++ checks its forward (the launchers) against
#    libtorch's headers. Skips without nvcc.
tests_bin=${MK_TESTS_BIN:-$(dirname "$bin")/tests/mk_tests}
if ! command -v nvcc >/dev/null; then
  echo "SKIP 65-export/cuda-compile: no nvcc"
elif [ ! -x "$tests_bin" ]; then
  echo "SKIP 65-export/cuda-compile: no $tests_bin"
else
  c=$work/cuda_project
  n=$work/cuda_norm_project
  g=$work/cuda_gemm_project
  a=$work/cuda_attention_project
  MK_EXPORT_CUDA_DIR=$c MK_EXPORT_CUDA_NORM_DIR=$n MK_EXPORT_CUDA_GEMM_DIR=$g MK_EXPORT_CUDA_ATTN_DIR=$a \
    "$tests_bin" export_cuda > "$work/cuda-plan.log" 2>&1 ||
    { cat "$work/cuda-plan.log"; fail "the CUDA export's C test"; }
  ti=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')/include
  # the CPU wheel ships c10/cuda's headers without the CMake-made one they include
  mkdir -p "$work/stub/c10/cuda/impl"
  [ -f "$ti/c10/cuda/impl/cuda_cmake_macros.h" ] || echo '#pragma once' > "$work/stub/c10/cuda/impl/cuda_cmake_macros.h"
  cuda_inc=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")/include
  [ -f "$cuda_inc/cuda_runtime_api.h" ] || cuda_inc=/usr/local/cuda/include
  # conv_chain (elementwise runs), norm_pools (norms, pools), linear_epilogue and
  # attention_4d (GEMMs on tensor cores)
  for proj in "$c/mk_conv_chain" "$n/mk_norm_pools" "$g/mk_linear_epilogue" "$a/mk_attention_4d"; do
    nvcc -c -std=c++17 "${proj}_kernels.cu" -o "$work/kernels.o" > "$work/nvcc.log" 2>&1 ||
      { cat "$work/nvcc.log"; fail "nvcc does not compile the exported kernels of $proj"; }
    g++ -std=c++17 -fsyntax-only -I"$(dirname "$proj")" -I"$work/stub" -isystem "$ti" \
      -isystem "$ti/torch/csrc/api/include" -isystem "$cuda_inc" "$proj.cpp" > "$work/gxx.log" 2>&1 ||
      { cat "$work/gxx.log"; fail "the exported CUDA launchers of $proj do not compile against libtorch's headers"; }
  done
  echo "ok   CUDA C++ subkernels: kernels compile with nvcc, launchers against libtorch's headers (no link: no GPU)"
fi

# 6. Triton subkernels compiled in (compile only: no GPU): the C test writes
#    the project of a plan (a conv_chain ModelNew, sk0 Triton, the rest CUDA
#    C++); g++ checks its replays against libtorch's and the CUDA driver API's
#    headers and compiles the embedded cubins. (mkworker.export_triton itself:
#    tests/python/test_export_triton.py.) Skips without the CUDA headers.
cuda_h=""
for d in ${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-*; do [ -f "$d/include/cuda.h" ] && { cuda_h=$d/include; break; }; done
if [ -z "$cuda_h" ]; then
  echo "SKIP 65-export/triton-compile: no cuda.h"
elif [ ! -x "$tests_bin" ]; then
  echo "SKIP 65-export/triton-compile: no $tests_bin"
else
  tp=$work/triton_project
  MK_EXPORT_TRITON_DIR=$tp "$tests_bin" export/triton_subkernels_are_replayed_from_their_plan > "$work/triton-plan.log" 2>&1 ||
    { cat "$work/triton-plan.log"; fail "the Triton export's C test"; }
  ti=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')/include
  mkdir -p "$work/stub/c10/cuda/impl"
  [ -f "$ti/c10/cuda/impl/cuda_cmake_macros.h" ] || echo '#pragma once' > "$work/stub/c10/cuda/impl/cuda_cmake_macros.h"
  g++ -std=c++17 -fsyntax-only -I"$tp" -I"$work/stub" -isystem "$ti" -isystem "$ti/torch/csrc/api/include" \
    -isystem "$cuda_h" "$tp/mk_mixed.cpp" > "$work/gxx-triton.log" 2>&1 ||
    { cat "$work/gxx-triton.log"; fail "the exported Triton replays do not compile against libtorch's headers"; }
  g++ -std=c++17 -c -I"$tp" "$tp/mk_mixed_triton.cpp" -o "$work/triton.o" > "$work/gxx-cubins.log" 2>&1 ||
    { cat "$work/gxx-cubins.log"; fail "the embedded cubins do not compile"; }
  echo "ok   Triton subkernels: replays compile against libtorch's and cuda.h's headers, cubins embed (no link: no GPU)"
fi

# 4. The GPU variant: data made on the GPU, the test run there (TF32 off).
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "SKIP 65-export/cuda: no GPU"
  exit 0
fi
g=$work/small_cuda
"$bin" export "$fixture" -o "$g" --kernels-as-pytorch --namespace mk_small_cuda --device cuda
cmake -S "$g" -B "$g/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake-cuda.log"
cmake --build "$g/build" -j 2 > "$work/build-cuda.log" 2>&1 || { cat "$work/build-cuda.log"; fail "the CUDA project does not build"; }
"$g/build/mk_small_cuda_test" "$g/data" || fail "the exported forward differs from the PyTorch Model on the GPU"
echo "ok   exported with --device cuda, its test passes on the GPU"
