"""What the worker keeps between jobs, and giving it back after one runs out of memory.

The worker keeps things across jobs to save time: drawn inputs (replay), built
models and torch.compile'd references (verify; compile's reduce-overhead mode keeps
a CUDA-graph pool with static copies of the inputs). Each such cache registers a
releaser here. When a job runs out of memory, the server releases all of them and,
when that gave anything back, runs the job once more: memory the worker kept for
itself is not the candidate's fault. On an 80 GB H100 a level-1 problem's kept
6 GiB inputs and compile's graph pool left the next problem's reference no room,
and every candidate of two problems "ran out of memory" (docs/runtime.md).

Memory that stays allocated after every cache let go is memory nothing here can
reach (a graph pool whose capture failed half way): `stranded` says so, and the
server then exits once the job is answered, so the supervisor starts a clean worker.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# name -> a function that forgets that cache and says how many entries it dropped.
_RELEASERS: dict[str, Callable[[], int]] = {}

# Allocated device memory above this share of the device, with every cache released
# and no job running, is stranded: the worker exits to give it back.
STRANDED_SHARE = 0.25


@dataclass
class Released:
    entries: int      # cache entries dropped
    freed_bytes: int  # device memory the caching allocator gave back (0 on the CPU)

    def any(self) -> bool:
        return self.entries > 0 or self.freed_bytes > 0


def register(name: str, release: Callable[[], int]) -> None:
    """Registers (or replaces) the releaser of the cache called `name`."""
    _RELEASERS[name] = release


def _cuda() -> Any | None:
    """torch when this process has used CUDA, else None (never initialises CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return torch


def release() -> Released:
    """Forgets every registered cache, collects garbage and returns the caching
    allocator's free blocks to the device."""
    torch = _cuda()
    before = torch.cuda.memory_reserved() if torch is not None else 0
    entries = 0
    for fn in list(_RELEASERS.values()):
        try:
            entries += int(fn())
        except Exception as e:  # a releaser must not turn an answer into a crash
            print(f"mkworker: releasing a cache failed: {type(e).__name__}: {e}",
                  file=sys.stderr)
    gc.collect()
    freed = 0
    if torch is not None:
        torch.cuda.empty_cache()
        freed = max(0, before - torch.cuda.memory_reserved())
    return Released(entries, freed)


def stranded() -> str | None:
    """Why the worker should restart: device memory still allocated after release()
    (call it between jobs), or None."""
    torch = _cuda()
    if torch is None:
        return None
    held = torch.cuda.memory_allocated()
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    if held <= STRANDED_SHARE * total:
        return None
    return (f"{held / 2**30:.1f} GiB of device memory stays allocated with every cache "
            f"released")


def ran_out(result: Any = None, error_kind: str | None = None) -> bool:
    """Whether a method's answer says it ran out of memory: an error of kind "oom", or
    a result (a verification's) whose error_kind is "oom"."""
    if error_kind == "oom":
        return True
    return isinstance(result, dict) and result.get("error_kind") == "oom"
