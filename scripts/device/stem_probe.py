"""Times builtin candidates of a few-channel stem convolution + relu at a full size
(issue #14: AlexNet's conv1, 3 -> 96 channels, 11x11, stride 4, padding 2, batch 1024
on 224x224), against cuDNN's conv2d + relu, in one interleaved run.

Usage: python3 stem_probe.py DIR [--batch N] [--out C] [--reps N]

DIR holds candidate files written by the builtin proposer for the fixture
tests/fixtures/propose/conv_stems.py's first subkernel (`run(x0, alex_weight,
alex_bias)`: relu(conv2d(x0)), the fixture's 11x11 stride-4 stem); the sizes here
replace the fixture's. On the development machine:
    MK_KEEP_TMP=1 build/tests/mk_tests propose_e2e/few_channel_stems_match_reference
keeps them in the first temporary directory it names (`sk0/`, its first 8 GPU
configurations: the three stems, a gathering implicit GEMM, cuDNN's); copy its
`triton_igemm*.py` to an ignored folder (.dbg/stem) and carry it.
Each candidate's error against eager (TF32 allowed, PyTorch's default for cuDNN)
and against a float64 reference is printed beside its median.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from profile_whole import interleaved, load  # beside this script


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--out", type=int, default=96)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(1)
    x = torch.rand(a.batch, 3, 224, 224, device=dev)
    w = torch.randn(a.out, 3, 11, 11, device=dev) * 0.05
    b = torch.randn(a.out, device=dev) * 0.1
    with torch.no_grad():
        ref = F.relu(F.conv2d(x, w, b, stride=4, padding=2))
        exact = F.relu(F.conv2d(x[:8].double(), w.double(), b.double(), stride=4,
                                padding=2)).float()
    fns: dict[str, Callable[[], object]] = {
        "cudnn": lambda: F.relu(F.conv2d(x, w, b, stride=4, padding=2)),
        "cudnn_cl": lambda: F.relu(F.conv2d(x.contiguous(memory_format=torch.channels_last),
                                            w, b, stride=4, padding=2)),
    }
    print(f"eager vs float64: {(ref[:8] - exact).abs().max().item():.3g}")
    for path in sorted(glob.glob(os.path.join(a.dir, "triton_igemm*.py"))):
        name = os.path.basename(path)[:-3]
        try:
            mod = load(path, name)
            with torch.no_grad():
                got = mod.run(x, w, b)
            torch.cuda.synchronize()
        except Exception as e:  # a candidate that fails here is a finding, not a stop
            print(f"{name}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        err = (got - ref).abs().max().item()
        err64 = (got[:8] - exact).abs().max().item()
        print(f"{name}: max abs vs eager {err:.3g}, vs float64 {err64:.3g}")
        fns[name] = lambda m=mod: m.run(x, w, b)
    with torch.no_grad():
        ms = interleaved(fns, a.reps)
    base = ms["cudnn"]
    for k, v in sorted(ms.items(), key=lambda kv: kv[1]):
        print(f"{v:9.3f} ms  {base / v:5.2f}x of cuDNN  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
