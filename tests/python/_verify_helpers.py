"""Shared helpers for the verifier tests (not a test module)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")
# Candidates are written to a content-addressed cache: keep the tests' out of ~/.cache.
os.environ.setdefault("MKEVOLVE_CACHE_DIR", tempfile.mkdtemp(prefix="mk-verify-tests-"))

import torch
from mkworker.candidate import Candidate, kernel_codes, load_candidate
from mkworker.verify import Outcome, Side, TrialSpec, run_trials

KERNELS = Path(__file__).resolve().parent / "kernels"

# What the engine sends with every verification (its mk_verify_options_init values):
# the worker has no default of its own for them.
ENGINE_OPTIONS = {"trials": 5, "atol": 1e-4, "rtol": 1e-4}


def source(name: str) -> str:
    return (KERNELS / f"{name}.py").read_text(encoding="utf-8")


def load(name: str, origin: str = "builtin") -> Candidate:
    return load_candidate(source(name), name, origin)


def sbr_reference(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x * 2.0 + b)


def sbr_inputs(rows: int = 4, cols: int = 300):
    def inputs_for(seed: int) -> list[Any]:
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)]
    return inputs_for


def check(cand: Candidate, trials: int = 3, ref=sbr_reference, inputs_for=None,
          allowed: tuple[str, ...] | None = None) -> Outcome:
    run = cand.run
    spec = TrialSpec(
        seeds=[100 + t for t in range(trials)], atol=1e-4, rtol=1e-4,
        device=torch.device("cpu"), check_ops=cand.origin != "reference",
        allowed_ops=cand.uses_torch if allowed is None else allowed,
        cand_file=str(cand.path), kernel_codes=kernel_codes(cand.module),
        input_names=["input 0 (x)", "input 1 (bias)"], output_names=["output 0"])
    try:
        return run_trials(Side(call=lambda xs: ref(*xs)), Side(call=lambda xs: run(*xs)),
                          inputs_for or sbr_inputs(), spec)
    finally:
        cand.unload()
