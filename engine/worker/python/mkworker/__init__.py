"""MKEvolve runtime worker: runs PyTorch and Triton for the C engine.

The engine talks to ``python -m mkworker`` in JSON lines (docs/protocol.md).
Method modules register themselves with :func:`register` (docs/capture.md).
"""

from mkworker.protocol import Progress, WorkerError, register

__all__ = ["Progress", "WorkerError", "register"]
