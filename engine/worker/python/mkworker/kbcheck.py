"""Cross-check of an emitted ModelNew with KernelBench's own evaluation code.

``mkevolve bench --kb-crosscheck`` asks a worker for ``kernelbench_check``
with the problem file and the ModelNew file it emitted. The worker does not
run KernelBench's code itself: ``eval_kernel_against_ref`` execs both
sources, changes CUDA_VISIBLE_DEVICES and torch's print options, seeds the
global generators and can crash the interpreter with a bad kernel; none of
that may touch the long-lived verification worker. It runs in a fresh
interpreter instead (``python -m mkworker.kbcheck``, same environment, so the
same GPU), under a time limit, and whatever that process does (an exception,
no answer, a segfault) comes back as a clear ``error``.

Where KernelBench lives: a checkout given as ``root`` (its ``src/`` layout:
``src/kernelbench/eval.py`` today, ``src/eval.py`` in older releases), or an
installed ``kernelbench`` package. Nothing found: ``available`` is false and
``reason`` says what was tried. Only the keyword arguments that the found
version of ``eval_kernel_against_ref`` accepts are passed.

Result (all keys always present): ``available``, ``reason``, ``evaluator``
(module and function used), ``error`` (KernelBench did not produce a verdict,
or None), ``compiled``, ``correct`` (bool or None), ``runtime``,
``ref_runtime`` (KernelBench's own numbers in its own unit, None when not
measured), ``speedup`` (ref_runtime / runtime, unit-free, or None) and
``metadata`` (KernelBench's, values as bounded text).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mkworker import memory, protocol

EVAL_MODULES = ("kernelbench.eval", "src.eval")
EVAL_FUNCTION = "eval_kernel_against_ref"
_MAX_TEXT = 2000
_RESULT_TAG = "MKWORKER-KBCHECK "


def empty_result() -> dict[str, Any]:
    return {"available": False, "reason": "", "evaluator": None, "error": None,
            "compiled": None, "correct": None, "runtime": None, "ref_runtime": None,
            "speedup": None, "metadata": {}}


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT - 3] + "..."


@contextmanager
def _search_path(root: str | None) -> Iterator[None]:
    """Puts a KernelBench checkout (its src/ and itself) first on sys.path."""
    added = [p for p in ((str(Path(root) / "src"), str(root)) if root else ()) if Path(p).is_dir()]
    sys.path[:0] = added
    try:
        yield
    finally:
        for p in added:
            if p in sys.path:
                sys.path.remove(p)


def find_evaluator(root: str | None) -> tuple[Callable[..., Any] | None, str]:
    """KernelBench's eval_kernel_against_ref and "module.function", or None and
    why it was not found (every module tried, with its import error)."""
    if root and not Path(root).is_dir():
        return None, f"KernelBench root {root} is not a folder"
    tried: list[str] = []
    with _search_path(root):
        for name in EVAL_MODULES:
            try:
                module = importlib.import_module(name)
            except ImportError as exc:
                tried.append(f"{name}: {exc}")
                continue
            fn = getattr(module, EVAL_FUNCTION, None)
            if callable(fn):
                return fn, f"{name}.{EVAL_FUNCTION}"
            tried.append(f"{name}: has no {EVAL_FUNCTION}")
    where = f" under {root}" if root else " (no --kb-root given)"
    return None, ("KernelBench's evaluation code is not importable" + where + ": "
                  + "; ".join(tried))


def backend_for(source: str) -> str:
    """KernelBench loads Triton code from a temporary file (its @triton.jit needs
    one); plain exec is its "cuda" backend."""
    return "triton" if re.search(r"^\s*(import|from)\s+triton\b", source, re.M) else "cuda"


def _accepted(fn: Callable[..., Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments `fn` takes (older KernelBench releases take fewer)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return wanted
    return {k: v for k, v in wanted.items() if k in params}


def _field(res: Any, name: str) -> Any:
    return res.get(name) if isinstance(res, dict) else getattr(res, name, None)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


def _describe(res: Any) -> dict[str, Any]:
    """KernelBench's KernelExecResult (a pydantic model, or a dict) as JSON."""
    out = empty_result()
    compiled, correct = _field(res, "compiled"), _field(res, "correctness")
    out["compiled"] = bool(compiled) if compiled is not None else None
    out["correct"] = bool(correct) if correct is not None else None
    out["runtime"] = _number(_field(res, "runtime"))
    out["ref_runtime"] = _number(_field(res, "ref_runtime"))
    if out["runtime"] and out["ref_runtime"]:
        out["speedup"] = out["ref_runtime"] / out["runtime"]
    meta = _field(res, "metadata")
    if isinstance(meta, dict):
        out["metadata"] = {str(k): v if isinstance(v, bool | int | float) else _clip(str(v))
                           for k, v in meta.items()}
    return out


def evaluate(ref_path: str, new_path: str, root: str | None, seed: int, trials: int,
             perf_trials: int, measure: bool) -> dict[str, Any]:
    """Runs KernelBench's evaluation in this process (call it in a fresh one)."""
    fn, evaluator = find_evaluator(root)
    if fn is None:
        out = empty_result()
        out["reason"] = evaluator
        return out
    ref_src = Path(ref_path).read_text(encoding="utf-8")
    new_src = Path(new_path).read_text(encoding="utf-8")
    import torch

    with tempfile.TemporaryDirectory(prefix="mk-kbcheck-") as build_dir:
        wanted: dict[str, Any] = {
            "original_model_src": ref_src, "custom_model_src": new_src, "seed_num": seed,
            "num_correct_trials": trials, "num_perf_trials": perf_trials,
            "measure_performance": measure, "verbose": False, "build_dir": build_dir,
            "backend": backend_for(new_src), "check_for_excessive_speedup": measure,
        }
        if torch.cuda.is_available():
            wanted["device"] = torch.device("cuda", 0)
        try:
            res = fn(**_accepted(fn, wanted))
        except Exception as exc:
            out = empty_result()
            out.update(available=True, evaluator=evaluator,
                       error=_clip(f"KernelBench's evaluation raised {type(exc).__name__}: {exc}"))
            return out
    if res is None:  # KernelBench's answer to a lock-file error while compiling
        out = empty_result()
        out.update(available=True, evaluator=evaluator,
                   error="KernelBench's evaluation returned no result (it does so when "
                         "compilation hit a lock file; run the check again)")
        return out
    out = _describe(res)
    out.update(available=True, evaluator=evaluator)
    return out


def _tail(text: str, lines: int = 12) -> str:
    return _clip("\n".join(text.strip().splitlines()[-lines:]))


def _answer_of(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(_RESULT_TAG):
            try:
                value = json.loads(line[len(_RESULT_TAG):])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def run_isolated(params: dict[str, Any]) -> dict[str, Any]:
    """Runs `evaluate` in a fresh interpreter; every failure of that process is
    reported in the result, never raised."""
    cmd = [sys.executable, "-m", "mkworker.kbcheck", "--ref", str(params["ref"]),
           "--new", str(params["new"]), "--seed", str(params["seed"]),
           "--trials", str(params["trials"]), "--perf-trials", str(params["perf_trials"])]
    if params.get("root"):
        cmd += ["--root", str(params["root"])]
    if not params.get("measure", True):
        cmd.append("--no-measure")
    timeout = float(params["timeout_s"])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent)] + ([env["PYTHONPATH"]]
                                                         if env.get("PYTHONPATH") else []))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        out = empty_result()
        out.update(available=True, error=f"KernelBench's evaluation did not finish in "
                   f"{timeout:.0f} s (killed); last output: "
                   + _tail(str(exc.stderr or "")))
        return out
    answer = _answer_of(proc.stdout)
    if answer is not None:
        return answer
    out = empty_result()
    how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
           else f"exited with status {proc.returncode}")
    out.update(available=True, error=f"KernelBench's evaluation process {how} without an "
               "answer; its last output: " + _tail(proc.stderr + proc.stdout))
    return out


def kernelbench_check(params: dict[str, Any], progress: Callable[[str, float], None]) -> dict[
        str, Any]:
    """Worker method: params ref, new (files), root (KernelBench checkout or None),
    seed, trials, perf_trials, measure, timeout_s. The engine always sends them; their one
    default is mk_session_kbcheck_opts_defaults."""
    for key in ("ref", "new"):
        if not isinstance(params.get(key), str) or not Path(params[key]).is_file():
            raise protocol.WorkerError("bad_request", f"kernelbench_check: {key!r} must name a "
                                       f"file, got {params.get(key)!r}")
    for key in ("seed", "trials", "perf_trials", "timeout_s"):
        if isinstance(params.get(key), bool) or not isinstance(params.get(key), (int, float)):
            raise protocol.WorkerError("bad_request", f"kernelbench_check: {key!r} must be a "
                                       f"number, got {params.get(key)!r}")
    progress("KernelBench evaluation", 0.0)
    release_gpu_memory()
    return run_isolated(params)


def release_gpu_memory() -> None:
    """Gives everything this worker keeps back before KernelBench's process
    allocates its own GPU memory: kept inputs, models, compiled references (and
    their CUDA-graph pools) and torch's cached blocks (memory.py). On an H100 a
    worker that had just verified problem 100 held 75 GiB of 79, and
    KernelBench's evaluation ran out of memory."""
    memory.release()


def register_methods() -> None:
    if protocol.lookup("kernelbench_check") is None:
        protocol.register("kernelbench_check", kernelbench_check)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mkworker.kbcheck",
                                 description="Evaluate a ModelNew with KernelBench's own code.")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--root")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--trials", type=int, required=True)
    ap.add_argument("--perf-trials", type=int, required=True)
    ap.add_argument("--no-measure", action="store_true")
    args = ap.parse_args(argv)
    from mkworker.server import claim_stdout, configure_triton_env

    # KernelBench prints freely: the answer goes on the original stdout, tagged, last.
    answer = claim_stdout()
    configure_triton_env()  # no GPU: Triton kernels run in the interpreter, as in the worker
    result = evaluate(args.ref, args.new, args.root, args.seed, args.trials, args.perf_trials,
                      not args.no_measure)
    answer.send(_RESULT_TAG + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
else:
    register_methods()
