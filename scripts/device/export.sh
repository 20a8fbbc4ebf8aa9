#!/usr/bin/env bash
# Issue #18 item 4 on a GPU: `mkevolve export` of a level-2 and a level-3
# composition, each built against this machine's libtorch and its generated
# test run on the GPU (data made by the PyTorch Model on the GPU, TF32 off).
#   level 2: a committed H200 result (docs/bench/conv-layout-h200/modelnew/,
#            Triton kernels: exported with --kernels-as-pytorch, and compiled in), or $EXPORT_L2
#   level 3: evolved here with --backend cuda ($EXPORT_L3_BUDGET s of search, 120 by
#            default), or $EXPORT_L3
#            (a ModelNew file) to skip the evolve
# Each export is first tried without --kernels-as-pytorch (Triton and CUDA
# kernels compiled in), then with it; the level-2 composition (Triton) is also
# exported without it and its project built and tested (export-level2_triton.log); the level-3 composition
# (CUDA C++ subkernels) is also exported without it, its kernels compiled in
# by nvcc, built with CMake and tested on the GPU (export-level3_cuda.log). The project is
# built with CMake when the machine has it, else with g++ directly (the same
# sources; the log says which).
# Run from the repository root after scripts/devkit.sh and prepare-kb.sh;
# carry: .devkit .kb .whl. Logs and the generated sources come back in $OUT.
set -uo pipefail
source "$(dirname "$0")/env.sh"
source "$(dirname "$0")/cuda-env.sh"
T=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
prefix=$(python3 -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
summary="$OUT/export-summary.txt"
: > "$summary"

build_project() { # dir ns log
  local dir=$1 ns=$2 log=$3
  if command -v cmake >/dev/null; then
    echo "build: cmake $(cmake --version | head -1)" >> "$log"
    cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >> "$log" 2>&1 &&
      cmake --build "$dir/build" -j 16 >> "$log" 2>&1
  else
    echo "build: g++ (no cmake on this machine)" >> "$log"
    mkdir -p "$dir/build"
    g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI="$abi" -I"$dir" "$dir/$ns.cpp" "$dir/${ns}_test.cpp" \
      -o "$dir/build/${ns}_test" -isystem "$T/include" -isystem "$T/include/torch/csrc/api/include" \
      -L"$T/lib" -Wl,--no-as-needed -ltorch -ltorch_cuda -ltorch_cpu -lc10 -Wl,--as-needed \
      -Wl,-rpath,"$T/lib" >> "$log" 2>&1
  fi
}

export_and_test() { # modelnew name
  local modelnew=$1 name=$2 dir=/tmp/mk-export-$2 ns=mk_$2 log=$OUT/export-$2.log
  rm -rf "$dir"
  : > "$log"
  echo "== $name: $modelnew" | tee -a "$summary"
  timeout 120 "$MK" export "$modelnew" -o "$dir" --device cuda --namespace "$ns" >> "$log" 2>&1
  echo "  export without --kernels-as-pytorch: exit $? ($(grep -o '[0-9]* [A-Za-z+ ]*subkernels* compiled in' "$log" | tr '\n' ' '))" | tee -a "$summary"
  rm -rf "$dir"
  local start=$(date +%s)
  if ! timeout 300 "$MK" export "$modelnew" -o "$dir" --device cuda --namespace "$ns" --kernels-as-pytorch >> "$log" 2>&1; then
    echo "  export: FAILED ($(tail -2 "$log" | tr '\n' ' '))" | tee -a "$summary"
    return
  fi
  echo "  export: ok in $(( $(date +%s) - start )) s" | tee -a "$summary"
  start=$(date +%s)
  if ! build_project "$dir" "$ns" "$log"; then
    echo "  build: FAILED (see export-$name.log)" | tee -a "$summary"
    tail -30 "$log"
  else
    echo "  build: ok in $(( $(date +%s) - start )) s ($(grep '^build:' "$log"))" | tee -a "$summary"
    timeout 300 "$dir/build/${ns}_test" "$dir/data" --device cuda 2>&1 | tee -a "$log" | sed 's/^/  /' | tee -a "$summary"
    echo "  test exit status: ${PIPESTATUS[0]}" | tee -a "$summary"
  fi
  mkdir -p "$OUT/project-$name"
  cp "$dir"/*.h "$dir"/*.cpp "$dir"/CMakeLists.txt "$dir"/export.json "$dir"/README.md "$OUT/project-$name/" 2>/dev/null
}

# Builds an exported project with CMake and runs its generated test on the GPU,
# into the summary and export-<name>.log; status 1 when it could not build.
build_and_test() { # dir ns name log what-built-it
  local dir=$1 ns=$2 name=$3 log=$4 what=$5
  if ! command -v cmake >/dev/null; then
    echo "  build: SKIPPED (no cmake on this machine)" | tee -a "$summary"
    return 1
  fi
  local start=$(date +%s)
  if ! { cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >> "$log" 2>&1 &&
         cmake --build "$dir/build" -j 16 >> "$log" 2>&1; }; then
    echo "  build: FAILED (see export-$name.log)" | tee -a "$summary"
    tail -40 "$log"
    return 1
  fi
  echo "  build: ok in $(( $(date +%s) - start )) s ($what)" | tee -a "$summary"
  timeout 300 "$dir/build/${ns}_test" "$dir/data" --device cuda 2>&1 | tee -a "$log" | sed 's/^/  /' | tee -a "$summary"
  echo "  test exit status: ${PIPESTATUS[0]}" | tee -a "$summary"
}

# A --backend cuda composition WITHOUT --kernels-as-pytorch: its CUDA C++
# subkernels compiled in (DIR/<ns>_kernels.cu, nvcc through CMake's CUDA
# language), built and tested on the GPU. Needs cmake (no g++ fallback: the
# .cu needs nvcc); CUDACXX is set from nvcc on PATH when unset.
export_kernels_and_test() { # modelnew name
  local modelnew=$1 name=$2 dir=/tmp/mk-export-$2 ns=mk_$2 log=$OUT/export-$2.log
  rm -rf "$dir"
  : > "$log"
  echo "== $name (CUDA kernels compiled in): $modelnew" | tee -a "$summary"
  grep '^#   sk' "$modelnew" | sed 's/^/  /' | tee -a "$summary"
  local start=$(date +%s)
  if ! timeout 300 "$MK" export "$modelnew" -o "$dir" --device cuda --namespace "$ns" >> "$log" 2>&1; then
    echo "  export: FAILED ($(tail -3 "$log" | tr '\n' ' '))" | tee -a "$summary"
    return
  fi
  echo "  export: ok in $(( $(date +%s) - start )) s; $(grep -o '[0-9]* CUDA C++ subkernels* compiled in' "$log")" | tee -a "$summary"
  grep -o '"exported_as":[^,]*' "$dir/export.json" | sort | uniq -c | sed 's/^/  /' | tee -a "$summary"
  mkdir -p "$OUT/project-$name"
  cp "$dir"/*.h "$dir"/*.cpp "$dir"/*.cu "$dir"/CMakeLists.txt "$dir"/export.json "$OUT/project-$name/" 2>/dev/null
  [ -n "${CUDACXX:-}" ] || export CUDACXX=$(command -v nvcc)
  build_and_test "$dir" "$ns" "$name" "$log" "cmake, nvcc $(nvcc --version | grep -o 'release [0-9.]*')"
}

# A Triton composition WITHOUT --kernels-as-pytorch: its kernels compiled ahead
# of time for this GPU (mkworker.export_triton records the launches on the GPU,
# Triton compiles each for sm_<arch>), embedded as cubins, launched through the
# CUDA driver API; built with CMake (CUDA::cuda_driver) and tested on the GPU
# (export-<name>.log). Then the generated test must fail on a corrupted cubin
# launch argument (a kernel's largest int, an element count, halved), so a replay that
# ran nothing would not pass.
export_triton_and_test() { # modelnew name
  local modelnew=$1 name=$2 dir=/tmp/mk-export-$2 ns=mk_$2 log=$OUT/export-$2.log
  rm -rf "$dir"
  : > "$log"
  local arch
  arch=$(python3 -c 'import torch; M, m = torch.cuda.get_device_capability(); print(M * 10 + m)')
  echo "== $name (Triton kernels compiled in, sm_$arch): $modelnew" | tee -a "$summary"
  local start=$(date +%s)
  if ! timeout 600 "$MK" export "$modelnew" -o "$dir" --device cuda --namespace "$ns" --arch "sm_$arch" >> "$log" 2>&1; then
    echo "  export: FAILED ($(tail -3 "$log" | tr '\n' ' '))" | tee -a "$summary"
    return
  fi
  echo "  export: ok in $(( $(date +%s) - start )) s; $(grep -o '[0-9]* Triton subkernels* compiled in[^;]*' "$log")" | tee -a "$summary"
  grep -o '"exported_as":[^,]*' "$dir/export.json" | sort | uniq -c | sed 's/^/  /' | tee -a "$summary"
  mkdir -p "$OUT/project-$name"
  cp "$dir"/*.h "$dir"/$ns.cpp "$dir"/CMakeLists.txt "$dir"/export.json "$OUT/project-$name/" 2>/dev/null
  build_and_test "$dir" "$ns" "$name" "$log" "cmake, CUDA::cuda_driver" || return
  # the test must see the kernels: halve the largest int a launch passes (an element count:
  # the first int was a batch size no index read on 2026-12-06, so the corrupted test
  # passed), rebuild, expect FAIL
  if python3 - "$dir/$ns.cpp" <<'PY' && grep -q 'LL / 2)' "$dir/$ns.cpp" && cmake --build "$dir/build" -j 16 >> "$log" 2>&1; then
import re, sys
path = sys.argv[1]
text = open(path).read()
found = list(re.finditer(r"static_cast<int32_t>\((\d+)LL\)", text))
if not found:
    sys.exit(1)
m = max(found, key=lambda m: int(m.group(1)))
open(path, "w").write(text[:m.start()] + f"static_cast<int32_t>({m.group(1)}LL / 2)" + text[m.end():])
PY
    if timeout 300 "$dir/build/${ns}_test" "$dir/data" --device cuda >> "$log" 2>&1; then
      echo "  corrupted launch argument: test PASSED (bad: the replay is not what is tested)" | tee -a "$summary"
    else
      echo "  corrupted launch argument: test fails, as it must" | tee -a "$summary"
    fi
  else
    echo "  corrupted launch argument: not tried (no int32 argument or rebuild failed)" | tee -a "$summary"
  fi
}

# EXPORT_STEPS picks the exports to run (all four by default), so a call short of
# device time can run only what is new (e.g. EXPORT_STEPS=level2_triton).
steps=" ${EXPORT_STEPS:-level2 level2_triton level3 level3_cuda} "
want() { [[ "$steps" == *" $1 "* ]]; }
l2=${EXPORT_L2:-$root/docs/bench/conv-layout-h200/modelnew/level2_35_Conv2d_Subtract_HardSwish_MaxPool_Mish.py}
want level2 && export_and_test "$l2" level2
want level2_triton && export_triton_and_test "$l2" level2_triton
if want level3 || want level3_cuda; then
  l3=${EXPORT_L3:-}
  if [ -z "$l3" ]; then
    l3=$OUT/level3_25_ShuffleNetUnit.modelnew.py
    start=$(date +%s)
    budget=${EXPORT_L3_BUDGET:-120}
    timeout $(( budget + 120 )) "$MK" evolve "$KB/level3/25_ShuffleNetUnit.py" --backend cuda --time-budget "$budget" \
      --workdir /tmp/mk-export-evolve -o "$l3" > "$OUT/evolve-level3.log" 2>&1
    echo "evolve level3 25_ShuffleNetUnit --backend cuda: exit $? in $(( $(date +%s) - start )) s" | tee -a "$summary"
  fi
  [ -f "$l3" ] && want level3 && export_and_test "$l3" level3
  [ -f "$l3" ] && want level3_cuda && export_kernels_and_test "$l3" level3_cuda
fi
cat "$summary"
