"""The GPU's two ceilings, measured once: device-to-device copy bandwidth and
the float32 matrix rate (plain IEEE fp32 and TF32), medians of CUDA-event runs
on random data. Prints one JSON object."""

from __future__ import annotations

import json
import statistics

import torch


def median_ms(fn, reps: int = 20) -> float:  # noqa: ANN001
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main() -> None:
    n = 1 << 28  # 1 GiB of float32
    a = torch.rand(n, device="cuda")
    b = torch.empty_like(a)
    copy_ms = median_ms(lambda: b.copy_(a))
    bw = 2 * a.numel() * 4 / (copy_ms * 1e-3) / 1e9
    m = 8192
    x = torch.rand(m, m, device="cuda")
    y = torch.rand(m, m, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    fp32_ms = median_ms(lambda: x @ y, 10)
    torch.backends.cuda.matmul.allow_tf32 = True
    tf32_ms = median_ms(lambda: x @ y, 10)
    torch.backends.cuda.matmul.allow_tf32 = False
    flops = 2 * m**3
    print(json.dumps({"device": torch.cuda.get_device_name(), "copy_gbs": bw,
                      "fp32_tflops": flops / (fp32_ms * 1e-3) / 1e12,
                      "tf32_tflops": flops / (tf32_ms * 1e-3) / 1e12}))


if __name__ == "__main__":
    main()
