"""The CUDA-graph variant of a composition (engine/compose/compose_graph.c) on
the GPU: correctness against the Model (outputs and buffers, three seeds) and
the interleaved timing of eager, torch.compile (default and reduce-overhead)
and the variant. Usage: python3 graph_probe.py GRAPH_VARIANT.py ..."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from profile_whole import interleaved


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("graph_variant", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def probe(path: str) -> dict[str, Any]:
    mod = load(path)
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(dev)
    torch.manual_seed(0)
    new = mod.ModelNew(*mod.get_init_inputs()).to(dev)
    new.load_state_dict(model.state_dict())
    row: dict[str, Any] = {"problem": path.rsplit("/", 1)[-1]}
    worst = 0.0
    with torch.no_grad():
        for seed in range(3):
            torch.manual_seed(seed)
            xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
            a, b = model(*xs), new(*xs)
            a = a if isinstance(a, (tuple, list)) else [a]
            b = b if isinstance(b, (tuple, list)) else [b]
            for p, q in zip(a, b, strict=True):
                worst = max(worst, float((p - q).abs().max()))
                assert torch.allclose(p, q, atol=1e-4, rtol=1e-4), "output differs"
        for (k, p), q in zip(model.state_dict().items(), new.state_dict().values(), strict=True):
            assert torch.allclose(p.float(), q.float(), atol=1e-4, rtol=1e-4), f"buffer {k} differs"
        row["max_abs_error"] = worst
        row["graphs"] = len(new._mk_graphs.entries)
        row["why_not"] = new._mk_graphs.why
        fns: dict[str, Callable[[], object]] = {"eager": lambda: model(*xs),
                                                "ours_graph": lambda: new(*xs)}
        for mode in ("default", "reduce-overhead"):
            t0 = time.time()
            cfn = torch.compile(model, mode=mode)
            cfn(*xs)
            cfn(*xs)
            torch.cuda.synchronize()
            row[f"compile_{mode}_s"] = round(time.time() - t0, 1)
            fns[f"compile_{mode}"] = lambda cfn=cfn: cfn(*xs)
        row["interleaved_ms"] = interleaved(fns)
    torch._dynamo.reset()
    return row


def main() -> None:
    for path in sys.argv[1:]:
        try:
            row = probe(path)
        except Exception as e:
            row = {"problem": path, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
