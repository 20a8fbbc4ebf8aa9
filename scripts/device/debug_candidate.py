"""Runs one candidate against one subkernel with CUDA_LAUNCH_BLOCKING=1 and
prints the full report (debugging aid for GPU-only failures).
usage: debug_candidate.py PROBLEM CANDIDATE.py NODES INPUTS OUTPUTS (ids comma-separated)"""
import json
import os
import sys

os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")
from mkworker import capture, verify

problem, cand, nodes, ins, outs = sys.argv[1:6]
ids = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
graph = capture.capture({"file": os.path.abspath(problem)}, lambda m, f: None)
params = {"graph": graph, "nodes": ids(nodes), "inputs": ids(ins), "outputs": ids(outs),
          "candidate": {"source": open(cand).read(), "name": "debug", "origin": "builtin"},
          "device": "cuda", "timing": True, "trials": 2,
          "atol": 1e-4, "rtol": 1e-4}
rep = verify.verify_subkernel(params, lambda m, f: None)
shown = {k: rep[k] for k in rep if k not in ("trials_detail",)}
print(json.dumps(shown, indent=1, default=str)[:6000])
