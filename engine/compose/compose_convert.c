/* compose_convert.c — the layout plan's conversions in a composed forward.
 *
 * The plan converts values between NCHW and channels_last where the program
 * needs it: its inputs before the first convolution, a value a reader wants
 * in the other layout. `x.contiguous(memory_format=torch.channels_last)` runs
 * PyTorch's generic strided copy, which reads or writes across the layout
 * with poor coalescing: 0.96 ms for ShuffleNetUnit's 481 MB input on an H100
 * where torch.compile's tiled copy takes 0.28 ms (docs/bench/profiles-h100).
 * The composition calls `_mk_convert` instead: a Triton kernel transposing
 * each image's [C x pixels] plane in tiles (loads and stores both along
 * memory; Triton stages the tile through shared memory), for large tensors
 * on a GPU (or under Triton's interpreter), and PyTorch's copy otherwise:
 * small tensors (a Python launch costs more than the copy), tensors autograd
 * records (the kernel keeps no history), layouts it does not know. */
#include "compose_internal.h"

#include "mk_layout.h"

static const char helper[] =
    "\n\n# ---- layout conversions of the composed forward (MKEvolve) ----\n"
    "# x.contiguous(memory_format=fmt), as a tiled Triton transpose where that is faster.\n"
    "import os\n"
    "\n"
    "try:\n"
    "    import triton\n"
    "    import triton.language as tl\n"
    "except ImportError:  # no Triton: PyTorch's copy everywhere\n"
    "    triton = None\n"
    "\n"
    "_MK_CONVERT_MIN_NUMEL = 1 << 20  # below this, launching from Python costs more than the copy\n"
    "_MK_CONVERT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)\n"
    "\n"
    "if triton is not None:\n"
    "    @triton.jit\n"
    "    def _mk_transpose_kernel(src, dst, A, B, BLOCK_A: tl.constexpr,\n"
    "                             BLOCK_B: tl.constexpr):\n"
    "        # dst[n, b, a] = src[n, a, b] for one [BLOCK_A x BLOCK_B] tile of image n; the\n"
    "        # tiles of one image on axis 0 (no 65535 limit), consecutive ones along b\n"
    "        tiles_b = tl.cdiv(B, BLOCK_B)\n"
    "        tile = tl.program_id(0)\n"
    "        n = tl.program_id(1).to(tl.int64)\n"
    "        a = (tile // tiles_b) * BLOCK_A + tl.arange(0, BLOCK_A).to(tl.int64)\n"
    "        b = (tile % tiles_b) * BLOCK_B + tl.arange(0, BLOCK_B).to(tl.int64)\n"
    "        mask = (a[:, None] < A) & (b[None, :] < B)\n"
    "        base = n * A * B\n"
    "        val = tl.load(src + base + a[:, None] * B + b[None, :], mask=mask)\n"
    "        tl.store(dst + base + b[None, :] * A + a[:, None], val, mask=mask)\n"
    "\n"
    "\n"
    "def _mk_convert(x, fmt):\n"
    "    if x.is_contiguous(memory_format=fmt):\n"
    "        return x\n"
    "    cl = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())\n"
    "    usable = (triton is not None and cl is not None and x.numel() >= _MK_CONVERT_MIN_NUMEL\n"
    "              and x.dtype in _MK_CONVERT_DTYPES\n"
    "              and (x.is_cuda or os.environ.get('TRITON_INTERPRET') == '1')\n"
    "              and not (x.requires_grad and torch.is_grad_enabled()))\n"
    "    if usable and fmt == cl and x.is_contiguous():\n"
    "        a, b = x.shape[1], x[0, 0].numel()  # [C x pixels] planes become [pixels x C]\n"
    "    elif usable and fmt == torch.contiguous_format and x.is_contiguous(memory_format=cl):\n"
    "        a, b = x[0, 0].numel(), x.shape[1]\n"
    "    else:\n"
    "        return x.contiguous(memory_format=fmt)\n"
    "    out = torch.empty_like(x, memory_format=fmt)\n"
    "    grid = (triton.cdiv(a, 64) * triton.cdiv(b, 64), x.shape[0])\n"
    "    _mk_transpose_kernel[grid](x, out, a, b, BLOCK_A=64, BLOCK_B=64, num_warps=4)\n"
    "    return out\n";

/* Without Triton: a composition of CUDA C++ sections only is run by
 * KernelBench's plain exec (no source file, which @triton.jit needs), so it
 * must not define a Triton kernel. */
static const char plain_helper[] =
    "\n\n# ---- layout conversions of the composed forward (MKEvolve) ----\n"
    "def _mk_convert(x, fmt):\n"
    "    return x.contiguous(memory_format=fmt)\n";

int compose_convert_helper(mk_buf *out, bool triton) { return mk_buf_puts(out, triton ? helper : plain_helper); }

int compose_convert(mk_buf *out, const char *name, int conv, int rank) {
  const char *fmt = NULL;
  if (conv == MK_LAYOUT_TO_CL) fmt = rank == 5 ? "torch.channels_last_3d" : "torch.channels_last";
  else if (conv == MK_LAYOUT_TO_CONTIG) fmt = "torch.contiguous_format";
  if (fmt == NULL) return 0;
  return mk_buf_printf(out, "        %s = _mk_convert(%s, %s)\n", name, name, fmt);
}
