"""Which TF32 rounding does cuDNN's convolution use? (device probe, issue #14)

KernelBench compares a ModelNew with the reference at atol = rtol = 1e-4, and the
reference convolution runs cuDNN with TF32 allowed. A kernel agrees with it only if it
rounds its inputs to TF32 the same way. This computes the convolution in float64 from
inputs rounded to TF32 by truncation and by round-to-nearest, and prints how far cuDNN's
TF32 result is from each (and from the exact float32 one).
"""
import torch
import torch.nn.functional as F


def tf32_truncate(t: torch.Tensor) -> torch.Tensor:
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)


def tf32_nearest(t: torch.Tensor) -> torch.Tensor:
    i = t.view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


def main() -> None:
    torch.manual_seed(0)
    for cin, cout, hw in ((16, 64, 128), (8, 64, 96), (64, 128, 64)):
        x = torch.rand(8, cin, hw, hw, device="cuda")
        w = torch.randn(cout, cin, 3, 3, device="cuda") / (cin * 9) ** 0.5
        torch.backends.cudnn.allow_tf32 = True
        ref = F.conv2d(x, w)
        ref_cl = F.conv2d(x.contiguous(memory_format=torch.channels_last),
                          w.contiguous(memory_format=torch.channels_last))
        torch.backends.cudnn.allow_tf32 = False
        exact = F.conv2d(x.double(), w.double()).float()
        trunc = F.conv2d(tf32_truncate(x).double(), tf32_truncate(w).double()).float()
        near = F.conv2d(tf32_nearest(x).double(), tf32_nearest(w).double()).float()
        torch.backends.cudnn.allow_tf32 = True
        for name, r in (("cudnn nchw", ref), ("cudnn channels_last", ref_cl)):
            print(f"C={cin} OC={cout}: {name}: vs exact {(r - exact).abs().max().item():.3g}, "
                  f"vs truncated {(r - trunc).abs().max().item():.3g}, "
                  f"vs nearest {(r - near).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
