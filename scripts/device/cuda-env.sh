# Sourced after env.sh by the CUDA C++ backend's device scripts: NVRTC for
# the engine (the toolkit's, else the nvidia wheel torch installed; the
# devkit was built where neither is on the loader's path), the wheels and
# stand-ins KernelBench's eval imports, and one folder for torch's
# load_inline builds so a warm machine reuses them.
if [ -z "${MK_NVRTC_LIBRARY:-}" ]; then
  MK_NVRTC_LIBRARY=$(python3 - <<'PY'
import glob, os, site
found = sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so.1*"))
for sp in site.getsitepackages():
    for sub in ("nvidia/*/lib", "nvidia/cuda_nvrtc/lib"):
        found += sorted(glob.glob(os.path.join(sp, sub, "libnvrtc.so.1*")))
found = [f for f in found if "builtins" not in f and "alt" not in f]
print(found[0] if found else "")
PY
)
  [ -n "$MK_NVRTC_LIBRARY" ] && export MK_NVRTC_LIBRARY || unset MK_NVRTC_LIBRARY
fi
if ls "$root"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$root"/.whl/*.whl
fi
export PYTHONPATH=/tmp/site:$KB/standins${PYTHONPATH:+:$PYTHONPATH}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/mk-torch-ext}
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  nvcc --version | tail -2
  echo "ninja $(ninja --version 2>&1)"
  echo "NVRTC: ${MK_NVRTC_LIBRARY:-not found (CUDA candidates will be compile_error)}"
} 2>&1 | tee "$OUT/tools.txt"
