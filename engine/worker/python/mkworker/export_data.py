"""The data of a C++ export: weights, example inputs, the Model's outputs.

``mkevolve export`` writes ``DIR/export.json`` (docs/export.md) and runs
``python -m mkworker.export_data DIR/export.json``. This instantiates the
problem's ``Model`` as KernelBench does (seeded, ``Model(*get_init_inputs())``),
draws ``get_inputs()`` under the next seed, runs the Model once in full FP32
(TF32 off) on the manifest's device, and writes

- ``DIR/data/weights.mkt``: every tensor the manifest names (parameters,
  buffers, tensor attributes, by state_dict name), as they were *before*
  the forward ran (batch norm in training mode updates its statistics);
- ``DIR/data/example.mkt``: ``input.<i>`` and ``output.<i>`` (the forward's
  tensors, depth first), which the generated test compares with.

The tensor file format (little-endian)::

    b"MKTENS1\\n", u32 count, then per tensor:
    u32 len, name; u32 len, dtype name ("float32"); u32 ndim; i64 dims[ndim];
    u64 nbytes; the C-contiguous bytes
"""

from __future__ import annotations

import json
import os
import struct
import sys
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

import torch

from mkworker import loader

MAGIC = b"MKTENS1\n"

DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}


class ExportError(Exception):
    """A problem the export cannot write data for (said in the user's terms)."""


def _put_str(f: BinaryIO, s: str) -> None:
    b = s.encode()
    f.write(struct.pack("<I", len(b)))
    f.write(b)


def write_tensors(path: str, tensors: Iterable[tuple[str, torch.Tensor]]) -> int:
    """Writes named tensors to `path` in the format above; returns how many."""
    items = list(tensors)
    with open(path, "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<I", len(items)))
        for name, t in items:
            if t.dtype not in DTYPES:
                raise ExportError(f"{name}: dtype {t.dtype} is not exported")
            data = t.detach().to("cpu").contiguous()
            _put_str(f, name)
            _put_str(f, DTYPES[t.dtype])
            f.write(struct.pack("<I", data.dim()))
            f.write(struct.pack(f"<{data.dim()}q", *data.shape))
            raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
    return len(items)


def read_tensors(path: str) -> dict[str, torch.Tensor]:
    """Reads a file written by write_tensors (tests and tools)."""
    names = {v: k for k, v in DTYPES.items()}
    out: dict[str, torch.Tensor] = {}
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise ExportError(f"{path}: not an mkevolve tensor file")
        (count,) = struct.unpack("<I", f.read(4))
        for _ in range(count):
            name = f.read(struct.unpack("<I", f.read(4))[0]).decode()
            dtype = names[f.read(struct.unpack("<I", f.read(4))[0]).decode()]
            (ndim,) = struct.unpack("<I", f.read(4))
            shape = struct.unpack(f"<{ndim}q", f.read(8 * ndim))
            (nbytes,) = struct.unpack("<Q", f.read(8))
            raw = bytearray(f.read(nbytes))
            flat = (torch.frombuffer(raw, dtype=torch.uint8) if nbytes
                    else torch.empty(0, dtype=torch.uint8))
            out[name] = flat.view(dtype).reshape(shape).clone()
    return out


def flatten_tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors of a forward's result, depth first (as the C++ returns them)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from flatten_tensors(item)


def state_tensor(module: torch.nn.Module, name: str) -> torch.Tensor:
    """The parameter, buffer or tensor attribute at dotted path `name`."""
    obj: Any = module
    for part in name.split("."):
        obj = obj[int(part)] if part.isdigit() and not hasattr(obj, part) else getattr(obj, part)
    if not isinstance(obj, torch.Tensor):
        raise ExportError(f"{name} is not a tensor of the module")
    return obj


def make_data(manifest: dict[str, Any], folder: str) -> tuple[int, int, int]:
    """Writes data/weights.mkt and data/example.mkt; returns (weights, inputs, outputs)."""
    device = torch.device(manifest.get("device", "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ExportError("--device cuda, and torch sees no GPU here")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    problem = loader.load(os.path.join(folder, manifest["problem"]))
    seed = int(manifest.get("seed", 0))
    torch.manual_seed(seed)
    cls = problem.model_class(manifest.get("class", "Model"))
    model = cls(*problem.function("get_init_inputs")()).to(device)
    torch.manual_seed(seed + 1)
    inputs = list(problem.function("get_inputs")())
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise ExportError(f"get_inputs()[{i}] is not a tensor: "
                              "the C++ forward takes tensors only")
    inputs = [x.to(device) for x in inputs]
    weights = [(name, state_tensor(model, name).detach().clone()) for name in manifest["tensors"]]
    example = [(f"input.{i}", x.clone()) for i, x in enumerate(inputs)]
    with torch.no_grad():
        outputs = list(flatten_tensors(model(*inputs)))
    if not outputs:
        raise ExportError("the Model's forward returns no tensor")
    example += [(f"output.{i}", y) for i, y in enumerate(outputs)]
    data = os.path.join(folder, "data")
    os.makedirs(data, exist_ok=True)
    write_tensors(os.path.join(data, "weights.mkt"), weights)
    write_tensors(os.path.join(data, "example.mkt"), example)
    return len(weights), len(inputs), len(outputs)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m mkworker.export_data DIR/export.json", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    try:
        nw, ni, no = make_data(manifest, os.path.dirname(os.path.abspath(argv[1])))
    except ExportError as e:
        print(f"mkworker.export_data: {e}", file=sys.stderr)
        return 1
    print(f"data: {nw} weights, {ni} inputs, {no} outputs of the PyTorch Model "
          f"(seed {manifest.get('seed', 0)}, {manifest.get('device', 'cpu')})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
