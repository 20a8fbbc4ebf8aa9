"""Scripted LLM replies for the end-to-end tests: Triton candidates written
as a model would write them (a "variant:" line, a "notes:" line, a fenced
module), right and wrong ones, for examples/conv_bias_relu.py and
tests/e2e/llm/two_linear.py."""

from __future__ import annotations

# conv2d (delegated to PyTorch, declared) + a fused Triton epilogue:
# (y + bias) * 1.5 -> gelu -> - 0.1 -> relu. SUBTRACT is the bug switch.
_CONV_EPILOGUE = """import torch
import triton
import triton.language as tl

MK_USES_TORCH = ("conv2d",)


@triton.jit
def _epilogue(y_ptr, b_ptr, out_ptr, n, C, HW, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask, other=0.0)
    c = (offs // HW) % C
    b = tl.load(b_ptr + c, mask=mask, other=0.0)
    v = (y + b) * 1.5
    v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
SUBTRACT    v = tl.where(v > 0, v, 0.0)
    tl.store(out_ptr + offs, v, mask=mask)


def run(x0, conv_weight, conv_bias, bias):
    y = torch.nn.functional.conv2d(x0, conv_weight, conv_bias).contiguous()
    out = torch.empty_like(y)
    n = y.numel()
    grid = (triton.cdiv(n, BLOCKSIZE),)
    _epilogue[grid](y, bias.contiguous().view(-1), out, n, y.shape[1], y.shape[2] * y.shape[3],
                    BLOCK=BLOCKSIZE)
    return out
"""


def conv_module(block: int, correct: bool) -> str:
    sub = "    v = v - 0.1\n" if correct else ""
    return _CONV_EPILOGUE.replace("SUBTRACT", sub).replace("BLOCKSIZE", str(block))


def fenced(name: str, notes: str, source: str) -> str:
    return f"variant: {name}\nnotes: {notes}\n```python\n{source}```\n"


CONV_WRONG = fenced(
    "fused_epilogue_b1024", "conv2d in PyTorch, one fused Triton epilogue", conv_module(1024, False)
)
CONV_RIGHT = fenced(
    "fused_epilogue_fixed_b1024", "restores the - 0.1 before relu", conv_module(1024, True)
)
CONV_RIGHT_2 = fenced(
    "fused_epilogue_fixed_b512", "same fix, smaller blocks", conv_module(512, True)
)
CONV_REPLY_WRONG = "Here is a fused version of the epilogue.\n\n" + CONV_WRONG
CONV_REPLY_REPAIRED = (
    "The subtraction of 0.1 was missing before the relu. Two fixed variants:\n\n"
    + CONV_RIGHT
    + "\n"
    + CONV_RIGHT_2
)
CONV_REPLY_ONE_RIGHT = "A fused epilogue:\n\n" + CONV_RIGHT
NO_CODE = (
    "The mismatch suggests the activation is applied in the wrong order. You should check "
    "the order of the subtraction and the relu, and make sure the bias is broadcast per "
    "channel. Let me know if you want me to write the kernel."
)

# Elementwise activations in Triton; the matmuls stay in PyTorch (declared).
_ACT = """import torch
import triton
import triton.language as tl

MK_USES_TORCH = ("linear",)


@triton.jit
def _act(x_ptr, y_ptr, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if MODE == 0:
        y = tl.where(x > 0, x, 0.0)
    else:
        y = 2.0 * (1.0 / (1.0 + tl.exp(-x)))
    tl.store(y_ptr + offs, y, mask=m)


def _apply(x, mode):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _act[(triton.cdiv(n, 256),)](x, y, n, MODE=mode, BLOCK=256)
    return y

"""

LINEAR_RELU = (
    _ACT
    + """
def run(x0, fc1_weight, fc1_bias):
    return _apply(torch.nn.functional.linear(x0, fc1_weight, fc1_bias), 0)
"""
)
LINEAR_SIGMOID_MUL = (
    _ACT
    + """
def run(v6, fc2_weight, fc2_bias):
    return _apply(torch.nn.functional.linear(v6, fc2_weight, fc2_bias), 1)
"""
)
WHOLE_MODULE = (
    _ACT
    + """
def run(x0, fc1_weight, fc1_bias, fc2_weight, fc2_bias):
    h = _apply(torch.nn.functional.linear(x0, fc1_weight, fc1_bias), 0)
    return _apply(torch.nn.functional.linear(h, fc2_weight, fc2_bias), 1)
"""
)
