"""CUDA C++ candidates in the worker: binding the cubin, argument checks, the CPU refusal,
and (on a GPU) a real launch through the driver API on torch's stream.

The cubin of the GPU tests is compiled here with NVRTC through ctypes (the
nvidia-cuda-nvrtc wheel that scripts/setup.sh installs, or torch's); in the product the
engine compiles (engine/backend) and sends it with the job.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

import pytest
import torch
from mkworker import cuda_runtime
from mkworker.candidate import CandidateError, load_candidate

SCALE_CUDA = r"""
extern "C" __global__ void scale_add(const float *x, const float *b, float *y, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + b[i % 4];
}
"""

SCALE_MODULE = f'''
import math

import torch

MK_BACKEND = "cuda"
MK_CUDA_SOURCE = r"""{SCALE_CUDA}"""
MK_CUDA_KERNELS = {{"scale_add": "fffq"}}


def run(x, b):
    y = torch.empty_like(x)
    n = x.numel()
    _mk_cuda.launch("scale_add", ((n + 127) // 128,), (128,), (x.contiguous(), b, y, n))
    return y
'''

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA candidates need a GPU")


def test_cuda_candidate_without_cubin_is_a_compile_error() -> None:
    with pytest.raises(CandidateError) as e:
        load_candidate(SCALE_MODULE, "cuda_t128")
    assert e.value.status == "compile_error"
    assert "no cubin" in e.value.reason


def test_kernel_table_must_be_name_to_signature() -> None:
    bad = SCALE_MODULE.replace('{"scale_add": "fffq"}', '["scale_add"]')
    with pytest.raises(CandidateError) as e:
        load_candidate(bad, "cuda_t128", cubin=b"\x7fELF")
    assert "MK_CUDA_KERNELS" in e.value.reason


def test_cpu_tensors_get_the_need_a_gpu_reason() -> None:
    cand = load_candidate(SCALE_MODULE, "cuda_t128", cubin=b"\x7fELF not loaded on the CPU")
    try:
        assert cand.cuda is not None
        with pytest.raises(RuntimeError, match="CUDA candidates need a GPU"):
            cand.run(torch.ones(8), torch.ones(4))
        assert cand.cuda.launches == 0
    finally:
        cand.unload()


def test_arguments_are_checked_against_the_signature() -> None:
    dev = torch.device("cpu")
    x = torch.ones(4)
    packed = cuda_runtime._packed("fq", (x, 7), dev)
    assert packed[0].value == x.data_ptr() and packed[1].value == 7
    with pytest.raises(TypeError, match="2 arguments, 1 given"):
        cuda_runtime._packed("fq", (x,), dev)
    with pytest.raises(TypeError, match="float32 tensor"):
        cuda_runtime._packed("f", (x.double(),), dev)
    with pytest.raises(TypeError, match="bool tensor"):
        cuda_runtime._packed("b", (x,), dev)
    with pytest.raises(TypeError, match="must be an int"):
        cuda_runtime._packed("q", (True,), dev)
    with pytest.raises(TypeError, match="unknown parameter kind"):
        cuda_runtime._packed("z", (1,), dev)


def _nvrtc() -> ctypes.CDLL:
    """NVRTC from the wheels in this Python's site-packages (nvidia/cu13 or cuda_nvrtc)."""
    for site in sys.path:
        for pat in ("nvidia/cu*/lib/libnvrtc.so.*", "nvidia/cuda_nvrtc/lib/libnvrtc.so.*"):
            for path in sorted(glob.glob(os.path.join(site, pat))):
                if "builtins" in path or ".alt." in path:
                    continue
                lib_dir = os.path.dirname(path)
                for b in glob.glob(os.path.join(lib_dir, "libnvrtc-builtins.so.*")):
                    if ".alt." not in b:
                        ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
                return ctypes.CDLL(path)
    pytest.skip("no NVRTC in this Python's site-packages")


def _compile(src: str, arch: str) -> bytes:
    nv = _nvrtc()
    prog = ctypes.c_void_p()
    assert nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"t.cu", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(f"--gpu-architecture={arch}".encode())
    rc = nv.nvrtcCompileProgram(prog, 1, opts)
    size = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nv.nvrtcGetProgramLog(prog, log)
    assert rc == 0, log.value.decode()
    nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    assert nv.nvrtcGetCUBIN(prog, cubin) == 0
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw


@needs_gpu
def test_gpu_launch_on_torch_stream_matches_torch() -> None:
    major, minor = torch.cuda.get_device_capability()
    cubin = _compile(SCALE_CUDA, f"sm_{major}{minor}")
    cand = load_candidate(SCALE_MODULE, "cuda_t128", cubin=cubin)
    try:
        x = torch.randn(1000, device="cuda")
        b = torch.randn(4, device="cuda")
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):  # the launch goes on the current stream, not the default
            y = cand.run(x, b)
        s.synchronize()
        want = 2.0 * x + b.repeat(250)
        torch.testing.assert_close(y, want, rtol=1e-6, atol=1e-6)
        assert cand.cuda is not None and cand.cuda.launches == 1
        with pytest.raises(TypeError, match="float32 tensor"):
            cand.run(x.double(), b)
    finally:
        cand.unload()
