"""Does the order of the timing block bias it? Times a problem's Model eager,
then torch.compile of it, then eager again, then an identical subclass
(`class ModelNew(Model): pass`), each with the worker's own protocol
(mkworker.timing.time_cuda), then both interleaved in one run
(time_cuda_group, what the verifier uses), and prints the medians as JSON. Usage:
python3 order_probe.py PROBLEM.py [PROBLEM.py ...]"""

from __future__ import annotations

import importlib.util
import json
import sys
import time

import torch
from mkworker import timing


def load(path: str):  # noqa: ANN201
    spec = importlib.util.spec_from_file_location("probe_problem", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def probe(path: str, dev: torch.device) -> dict[str, object]:
    mod = load(path)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(dev)
    sub = type("ModelNew", (mod.Model,), {})
    torch.manual_seed(0)
    new = sub(*mod.get_init_inputs()).to(dev)
    new.load_state_dict(model.state_dict())
    xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]

    def ms(fn) -> float:  # noqa: ANN001
        return timing.time_cuda(lambda: fn(*xs), dev)["median_ms"]

    row: dict[str, object] = {"problem": path.rsplit("/", 1)[-1]}
    with torch.no_grad():
        row["eager_1"], row["subclass_1"] = ms(model), ms(new)
        cfn = torch.compile(model)
        t0 = time.perf_counter()
        cfn(*xs)
        torch.cuda.synchronize()
        row["compile_s"] = time.perf_counter() - t0
        row["compiled"] = ms(cfn)
        row["eager_2"], row["subclass_2"] = ms(model), ms(new)
        time.sleep(5)
        row["eager_3_after_5s"], row["subclass_3"] = ms(model), ms(new)
        # the protocol the verifier uses now: both in one interleaved run
        a, b = timing.time_cuda_group([lambda: model(*xs), lambda: new(*xs)], dev)
        row["interleaved_eager"], row["interleaved_subclass"] = a["median_ms"], b["median_ms"]
    torch._dynamo.reset()
    return row


def main() -> None:
    dev = torch.device("cuda", 0)
    for path in sys.argv[1:]:
        print(json.dumps(probe(path, dev)), flush=True)


if __name__ == "__main__":
    main()
