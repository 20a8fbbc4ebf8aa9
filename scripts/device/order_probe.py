"""Does the order of the timing block bias it? Times a problem's Model eager,
then torch.compile of it, then eager again, then an identical subclass
(`class ModelNew(Model): pass`), each with the worker's own protocol
(mkworker.timing.time_cuda), and prints the medians as JSON. Usage:
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


def main() -> None:
    dev = torch.device("cuda", 0)
    for path in sys.argv[1:]:
        mod = load(path)
        torch.manual_seed(0)
        model = mod.Model(*mod.get_init_inputs()).to(dev)
        sub = type("ModelNew", (mod.Model,), {})
        torch.manual_seed(0)
        new = sub(*mod.get_init_inputs()).to(dev)
        new.load_state_dict(model.state_dict())
        xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
        row: dict[str, float] = {}
        with torch.no_grad():
            row["eager_1"] = timing.time_cuda(lambda: model(*xs), dev)["median_ms"]
            row["subclass_1"] = timing.time_cuda(lambda: new(*xs), dev)["median_ms"]
            cfn = torch.compile(model)
            t0 = time.perf_counter()
            cfn(*xs)
            torch.cuda.synchronize()
            row["compile_s"] = time.perf_counter() - t0
            row["compiled"] = timing.time_cuda(lambda: cfn(*xs), dev)["median_ms"]
            row["eager_2"] = timing.time_cuda(lambda: model(*xs), dev)["median_ms"]
            row["subclass_2"] = timing.time_cuda(lambda: new(*xs), dev)["median_ms"]
            time.sleep(5)
            row["eager_3_after_5s"] = timing.time_cuda(lambda: model(*xs), dev)["median_ms"]
            row["subclass_3"] = timing.time_cuda(lambda: new(*xs), dev)["median_ms"]
        print(json.dumps({"problem": path.rsplit("/", 1)[-1], **row}), flush=True)
        torch._dynamo.reset()


if __name__ == "__main__":
    main()
