"""Launching CUDA C++ candidates: a cubin loaded through the CUDA driver API.

A CUDA candidate (docs/candidates.md) carries its CUDA text in `MK_CUDA_SOURCE` and the
parameter signature of each kernel in `MK_CUDA_KERNELS`; the engine compiles the text with
NVRTC (engine/backend) and sends the cubin with the job. `bind` gives the module its
`_mk_cuda` launcher, which loads the cubin on first use (cuModuleLoadData into the
current context, the one torch uses) and launches with cuLaunchKernel on torch's current
stream, so CUDA events and stream ordering time and order these kernels like Triton's.

Arguments are checked against the signature before a launch (a wrong dtype or a CPU
tensor would otherwise be a wild pointer): `f` float32 tensor, `b` bool tensor, `q` int.
Only ctypes and torch are imported, so the composer can later paste this file into a
ModelNew unchanged (docs/backend.md).
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

NEED_GPU = "CUDA candidates need a GPU"
_DRIVER: ctypes.CDLL | None = None


class CudaError(RuntimeError):
    """A driver call failed (the message has the driver's name for the error)."""


def _driver() -> ctypes.CDLL:
    global _DRIVER
    if _DRIVER is None:
        try:
            _DRIVER = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RuntimeError(f"{NEED_GPU}: no CUDA driver (libcuda.so.1: {e})") from None
    return _DRIVER


def _check(rc: int, what: str) -> None:
    if rc == 0:
        return
    name = ctypes.c_char_p()
    _driver().cuGetErrorName(rc, ctypes.byref(name))
    text = name.value.decode() if name.value else f"error {rc}"
    raise CudaError(f"{what} failed: {text}")


def _packed(sig: str, args: tuple[Any, ...], device: torch.device) -> list[Any]:
    if len(args) != len(sig):
        raise TypeError(f"the kernel takes {len(sig)} arguments, {len(args)} given")
    out: list[Any] = []
    for i, (kind, a) in enumerate(zip(sig, args, strict=True)):
        if kind in "fb":
            want = torch.float32 if kind == "f" else torch.bool
            if not isinstance(a, torch.Tensor) or a.dtype != want or a.device != device:
                got = (f"{a.dtype} on {a.device}" if isinstance(a, torch.Tensor)
                       else type(a).__name__)
                raise TypeError(f"argument {i} must be a {want} tensor on {device}, not {got}")
            out.append(ctypes.c_uint64(a.data_ptr()))
        elif kind == "q":
            if isinstance(a, bool) or not isinstance(a, int):
                raise TypeError(f"argument {i} must be an int, not {type(a).__name__}")
            out.append(ctypes.c_longlong(a))
        else:
            raise TypeError(f"unknown parameter kind {kind!r} in the signature")
    return out


class Launcher:
    """`_mk_cuda` of one candidate: its cubin, loaded on the first launch."""

    def __init__(self, cubin: bytes, kernels: dict[str, str]) -> None:
        self._cubin = cubin
        self._kernels = dict(kernels)
        self._module = ctypes.c_void_p()
        self._functions: dict[str, ctypes.c_void_p] = {}
        self._device: torch.device | None = None
        self.launches = 0

    def _load(self, device: torch.device) -> None:
        torch.cuda.init()
        torch.cuda.current_stream(device)  # makes torch's (primary) context current
        drv = _driver()
        ctx = ctypes.c_void_p()
        _check(drv.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise CudaError("no current CUDA context after torch's initialisation")
        _check(drv.cuModuleLoadData(ctypes.byref(self._module), self._cubin), "cuModuleLoadData")
        for name in self._kernels:
            fn = ctypes.c_void_p()
            _check(drv.cuModuleGetFunction(ctypes.byref(fn), self._module, name.encode()),
                   f"cuModuleGetFunction({name})")
            self._functions[name] = fn
        self._device = device

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...],
               args: tuple[Any, ...], shared: int = 0) -> None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        device = tensors[0].device if tensors else None
        if device is None or device.type != "cuda":
            raise RuntimeError(f"{NEED_GPU} (the kernel's tensors are on {device})")
        if name not in self._kernels:
            raise KeyError(f"{name} is not in MK_CUDA_KERNELS")
        if self._device is None:
            self._load(device)
        elif device != self._device:
            raise RuntimeError(f"the cubin was loaded on {self._device}, not {device}")
        values = _packed(self._kernels[name], args, device)
        params = (ctypes.c_void_p * len(values))(
            *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
        g = (*grid, 1, 1)[:3]
        b = (*block, 1, 1)[:3]
        stream = ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
        _check(_driver().cuLaunchKernel(self._functions[name], *[ctypes.c_uint(x) for x in g],
                                        *[ctypes.c_uint(x) for x in b], ctypes.c_uint(shared),
                                        stream, params, None), f"cuLaunchKernel({name})")
        self.launches += 1

    def close(self) -> None:
        if self._module.value:
            _driver().cuModuleUnload(self._module)
            self._module = ctypes.c_void_p()
            self._functions.clear()
            self._device = None


def is_cuda_module(module: Any) -> bool:
    return getattr(module, "MK_BACKEND", None) == "cuda"


def bind(module: Any, cubin: bytes | None) -> Launcher:
    """Gives a CUDA candidate module its `_mk_cuda`; ValueError without a cubin."""
    kernels = getattr(module, "MK_CUDA_KERNELS", None)
    if not isinstance(kernels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in kernels.items()):
        raise ValueError("MK_CUDA_KERNELS must map kernel names to signatures")
    if not cubin:
        raise ValueError("no cubin: the engine compiles CUDA candidates (engine/backend) and "
                         "sends the cubin with the job")
    launcher = Launcher(cubin, kernels)
    module._mk_cuda = launcher
    return launcher
