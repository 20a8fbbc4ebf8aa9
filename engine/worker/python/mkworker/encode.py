"""Argument encoding of docs/protocol.md, both directions.

Every Python value a torch call receives or returns is written as JSON that
decodes back to an equal value, so a recorded node can be replayed and
emitted as Python. Tensors are not encoded here: the caller maps each tensor
to a value id (``{"t": id}``) through a callback, and back again on decode.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from typing import Any

import torch

JSON = Any
TensorToId = Callable[[torch.Tensor], int]
IdToTensor = Callable[[int], torch.Tensor]


class NotReplayable(Exception):
    """An encoded value that cannot be turned back into the original object."""


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (protocol dtype names)."""
    return str(dtype).removeprefix("torch.")


def _torch_attr_name(obj: object) -> str:
    return str(obj).removeprefix("torch.")


# Python's scalar types, which torch takes where it takes a dtype
# (`torch.ones(n, dtype=bool)`): written by name, decoded to the type itself.
_PYTYPES: dict[str, type] = {"bool": bool, "int": int, "float": float, "complex": complex}


def encode_float(x: float) -> JSON:
    """Non-integral floats are plain numbers; integral ones and non-finite ones
    are tagged so that ``2.0`` never comes back as the int ``2``."""
    if math.isnan(x):
        return {"float": "nan"}
    if math.isinf(x):
        return {"float": "inf" if x > 0 else "-inf"}
    if x.is_integer():
        return {"float": x}
    return x


def encode(value: object, tensor_id: TensorToId) -> JSON:
    """Encodes one Python value; tensors go through ``tensor_id``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return value
    if isinstance(value, torch.Tensor):
        return {"t": tensor_id(value)}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return encode_float(float(value))
    if isinstance(value, numbers.Integral) and not isinstance(value, torch.SymInt):
        return int(value)  # numpy integers
    if isinstance(value, numbers.Real) and not isinstance(value, torch.SymFloat):
        return encode_float(float(value))  # numpy floats
    if isinstance(value, torch.Size):
        return {"size": [int(v) for v in value]}
    if isinstance(value, tuple):
        # namedtuples and torch.return_types structseqs are tuples to replay
        return {"tuple": [encode(v, tensor_id) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v, tensor_id) for v in value]}
    if isinstance(value, slice):
        return {"slice": [encode(value.start, tensor_id), encode(value.stop, tensor_id),
                          encode(value.step, tensor_id)]}
    if value is Ellipsis:
        return {"ellipsis": True}
    if isinstance(value, torch.dtype):
        return {"dtype": dtype_name(value)}
    if isinstance(value, type) and value in _PYTYPES.values():
        return {"pytype": value.__name__}  # `dtype=bool` (Mamba's masks)
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.memory_format):
        return {"memory_format": _torch_attr_name(value)}
    if isinstance(value, torch.layout):
        return {"layout": _torch_attr_name(value)}
    if isinstance(value, dict):
        return {"dict": [[encode(k, tensor_id), encode(v, tensor_id)] for k, v in value.items()]}
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        return {"opaque": repr(value)}
    return {"opaque": _short_repr(value)}


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a user object whose __repr__ fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 200 else text[:197] + "..."


def _torch_attr(kind: str, name: object) -> object:
    if not isinstance(name, str) or not name.isidentifier():
        raise NotReplayable(f"bad {kind} name {name!r}")
    obj = getattr(torch, name, None)
    if obj is None:
        raise NotReplayable(f"unknown {kind} {name!r} in this torch version")
    return obj


def decode(enc: JSON, tensor: IdToTensor, device: torch.device | str | None = None) -> object:
    """Inverse of :func:`encode`. ``{"t": id}`` goes through ``tensor``.

    ``device`` replaces every encoded device constant (captures run on cpu,
    meta or fake tensors; replays run where the caller says). None keeps them.
    Raises NotReplayable for ``{"opaque": ...}``.
    """
    if enc is None or isinstance(enc, bool | int | float | str):
        return enc
    if isinstance(enc, list):  # not produced by encode; accept as a list
        return [decode(v, tensor, device) for v in enc]
    if not isinstance(enc, dict) or len(enc) != 1:
        raise NotReplayable(f"malformed encoded value {enc!r:.80}")
    (tag, body), = enc.items()
    if tag == "t":
        return tensor(int(body))
    if tag == "float":
        return float(body)
    if tag == "tuple":
        return tuple(decode(v, tensor, device) for v in body)
    if tag == "list":
        return [decode(v, tensor, device) for v in body]
    if tag == "size":
        return torch.Size(int(v) for v in body)
    if tag == "slice":
        return slice(*(decode(v, tensor, device) for v in body))
    if tag == "ellipsis":
        return Ellipsis
    if tag == "dtype":
        return _torch_attr("dtype", body)
    if tag == "pytype":
        if body not in _PYTYPES:
            raise NotReplayable(f"unknown Python type {body!r}")
        return _PYTYPES[body]
    if tag == "device":
        return torch.device(device) if device is not None else torch.device(body)
    if tag in ("memory_format", "layout"):
        return _torch_attr(tag, body)
    if tag == "dict":
        return {decode(k, tensor, device): decode(v, tensor, device) for k, v in body}
    if tag == "opaque":
        raise NotReplayable(f"argument {body} was recorded as opaque")
    raise NotReplayable(f"unknown encoding tag {tag!r}")


def tensor_ids(enc: JSON, out: list[int] | None = None) -> list[int]:
    """Tensor value ids in an encoded value, in order of first appearance."""
    if out is None:
        out = []
    if isinstance(enc, dict):
        if "t" in enc and len(enc) == 1:
            if enc["t"] not in out:
                out.append(enc["t"])
        else:
            for v in enc.values():
                tensor_ids(v, out)
    elif isinstance(enc, list):
        for v in enc:
            tensor_ids(v, out)
    return out


def is_replayable(enc: JSON) -> bool:
    """False when the encoded value contains an opaque object."""
    if isinstance(enc, dict):
        if "opaque" in enc and len(enc) == 1:
            return False
        return all(is_replayable(v) for v in enc.values())
    if isinstance(enc, list):
        return all(is_replayable(v) for v in enc)
    return True


# --- op names ----------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def resolve_op(name: str) -> Callable[..., Any]:
    """The callable a recorded ``op`` names: attribute lookup from ``torch``
    (``torch.nn.functional.gelu``, ``torch.Tensor.__add__``,
    ``torch.Tensor.T.__get__``). Names outside torch (an op defined by a
    library that takes part in ``__torch_function__``) are looked up from the
    longest importable module prefix. Raises NotReplayable."""
    import importlib

    parts = name.split(".")
    if not parts or not all(p.isidentifier() for p in parts):
        raise NotReplayable(f"bad op name {name!r}")
    obj: Any = None
    start = 0
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        if parts[0] != "torch" and i == len(parts):
            continue
        try:
            obj = importlib.import_module(module_name)
        except ImportError:
            continue
        start = i
        break
    if obj is None:
        raise NotReplayable(f"op {name!r}: no importable module")
    for part in parts[start:]:
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise NotReplayable(
                f"op {name!r} does not exist in torch {torch.__version__}") from None
    if not callable(obj):
        raise NotReplayable(f"op {name!r} is not callable")
    return obj
