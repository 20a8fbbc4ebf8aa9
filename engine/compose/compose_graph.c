/* compose_graph.c — the CUDA-graph variant of a composed ModelNew.
 *
 * Programs made of many small kernels are launch-bound: the GPU waits for
 * Python and the launcher between kernels (MobileNetV2 on the H200: 1.45 ms
 * of kernels in an 11.7 ms forward, docs/bench/profiles-h200). Replaying
 * the whole forward as one CUDA graph removes those gaps. The variant is a
 * subclass of the composed ModelNew whose forward replays a graph captured
 * per input signature; it is verified and timed like any composition, and
 * kept only when it is faster (engine/search).
 *
 * What the emitted code guarantees (each is what a caller of the plain
 * forward can rely on):
 *   - a fresh output every call: the graph's outputs are cloned, nothing
 *     returned aliases an earlier result;
 *   - the same module state: warm-up runs (needed before capture: Triton
 *     compiles, cuDNN picks algorithms) change buffers such as batch-norm
 *     statistics, so every parameter and buffer is restored before capture;
 *     the replay then updates them exactly once per call;
 *   - no silent loss of gradients: capture records no autograd history, and
 *     while autograd records (KernelBench times forwards that way) the
 *     replayed outputs carry a backward that raises with the reason: the
 *     variant is for inference, like the kernels it replays;
 *   - the plain forward whenever a graph would be wrong: an input or the
 *     state off the GPU, a submodule in another mode than at capture (every
 *     module's training flag is in the key), an argument that is not a tensor
 *     or a plain scalar, a parameter replaced by another tensor (the key
 *     holds every state tensor's address), or capture failing (the reason
 *     is kept in `_mk_graphs.why`);
 *   - bounded memory: at most MK_GRAPH_SHAPES signatures are captured, later
 *     ones run the plain forward;
 *   - little Python per call, the point of the variant: the key walks live
 *     views of the modules' parameter and buffer dicts and reads flags and
 *     addresses in list comprehensions (ResNet-101's 626 tensors: ~130 us of
 *     host time per call on this CPU, ~370-580 us before, most of it
 *     `tensor.device` objects). */
#include "mk_compose.h"

#include <stdbool.h>
#include <string.h>

static const char graph_runtime[] =
    "\n"
    "\n"
    "# ---- CUDA graph of the whole forward (MKEvolve) ----\n"
    "import torch  # noqa: E402 (the runtime of the graph variant)\n"
    "\n"
    "MK_GRAPH_SHAPES = 4\n"
    "\n"
    "\n"
    "class _MkGraphs:\n"
    "    \"\"\"One module's captured forwards, by input signature.\"\"\"\n"
    "\n"
    "    def __init__(self, module: torch.nn.Module) -> None:\n"
    "        self.modules = list(module.modules())\n"
    "        self.entries: dict = {}\n"
    "        self.why = \"\"\n"
    "        # Live views of every module's parameter and buffer dicts: a replaced parameter\n"
    "        # shows up in them, and walking them is ~4x cheaper per call than walking the\n"
    "        # modules (ResNet-101: 626 tensors in 287 modules, ~80 us of Python otherwise).\n"
    "        self.views = [d.values() for m in self.modules for d in (m._parameters, m._buffers)]\n"
    "\n"
    "    def state(self) -> list:\n"
    "        return [t for v in self.views for t in v if t is not None]\n"
    "\n"
    "    def key(self, args: tuple, state: list):\n"
    "        # every module's mode (one submodule may be put in eval alone)\n"
    "        parts: list = [tuple([m.training for m in self.modules])]\n"
    "        for a in args:\n"
    "            if isinstance(a, torch.Tensor):\n"
    "                if a.device.type != \"cuda\":\n"
    "                    return None\n"
    "                parts.append((tuple(a.shape), a.stride(), a.dtype, a.device.index))\n"
    "            elif a is None or isinstance(a, (bool, int, float, str)):\n"
    "                parts.append((type(a).__name__, a))\n"
    "            else:\n"
    "                return None\n"
    "        if not all([t.is_cuda for t in state]):\n"
    "            return None\n"
    "        # moved or replaced storage (.to(), .data = ...): a graph holds addresses\n"
    "        parts.append(tuple([t.data_ptr() for t in state]))\n"
    "        return tuple(parts)\n"
    "\n"
    "    def capture(self, forward, args: tuple):\n"
    "        # A replay records no autograd history, so neither does its capture.\n"
    "        with torch.no_grad():\n"
    "            static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]\n"
    "            saved = [(t, t.clone()) for t in self.state()]\n"
    "            side = torch.cuda.Stream()\n"
    "            side.wait_stream(torch.cuda.current_stream())\n"
    "            with torch.cuda.stream(side):\n"
    "                for _ in range(2):\n"
    "                    forward(*static)\n"
    "            torch.cuda.current_stream().wait_stream(side)\n"
    "            for t, s in saved:\n"
    "                t.copy_(s)\n"
    "            del saved\n"
    "            graph = torch.cuda.CUDAGraph()\n"
    "            with torch.cuda.graph(graph):\n"
    "                out = forward(*static)\n"
    "        return graph, static, out\n"
    "\n"
    "\n"
    "class _MkForwardOnly(torch.autograd.Function):\n"
    "    \"\"\"A replayed output while autograd records: the replay kept no history, so a\n"
    "    backward through it stops here with the reason, never with gradients silently\n"
    "    missing.\"\"\"\n"
    "\n"
    "    @staticmethod\n"
    "    def forward(ctx, anchor: torch.Tensor, out: torch.Tensor) -> torch.Tensor:\n"
    "        return out.clone()\n"
    "\n"
    "    @staticmethod\n"
    "    def backward(ctx, grad: torch.Tensor):\n"
    "        raise RuntimeError(\n"
    "            \"this ModelNew replays its forward as a CUDA graph, which records no autograd \"\n"
    "            \"history: it is for inference (gradients come from the original Model)\")\n"
    "\n"
    "\n"
    "def _mk_fresh(out, anchor):\n"
    "    if isinstance(out, torch.Tensor):\n"
    "        if anchor is not None and (out.is_floating_point() or out.is_complex()):\n"
    "            return _MkForwardOnly.apply(anchor, out)\n"
    "        return out.clone()\n"
    "    if isinstance(out, (tuple, list)):\n"
    "        return type(out)(_mk_fresh(o, anchor) for o in out)\n"
    "    return out\n"
    "\n"
    "\n"
    "def _mk_autograd_anchor(state: list, args: tuple):\n"
    "    \"\"\"A tensor autograd tracks, when it records: the outputs then carry a backward\n"
    "    that says why there is none.\"\"\"\n"
    "    if not torch.is_grad_enabled():\n"
    "        return None\n"
    "    return next((t for t in (*state, *args)\n"
    "                 if isinstance(t, torch.Tensor) and t.requires_grad), None)\n"
    "\n"
    "\n"
    "def _mk_graph_call(module: torch.nn.Module, forward, args: tuple):\n"
    "    graphs = getattr(module, \"_mk_graphs\", None)\n"
    "    if graphs is None:\n"
    "        graphs = _MkGraphs(module)\n"
    "        module._mk_graphs = graphs\n"
    "    state = graphs.state()\n"
    "    key = graphs.key(args, state)\n"
    "    if key is None:\n"
    "        return forward(*args)\n"
    "    entry = graphs.entries.get(key)\n"
    "    if entry is None and key not in graphs.entries:\n"
    "        if len(graphs.entries) >= MK_GRAPH_SHAPES:\n"
    "            return forward(*args)\n"
    "        try:\n"
    "            entry = graphs.capture(forward, args)\n"
    "        except Exception as e:  # not capturable (a host sync, say): run it plainly\n"
    "            graphs.why = f\"{type(e).__name__}: {e}\"\n"
    "            entry = None\n"
    "        graphs.entries[key] = entry\n"
    "    if entry is None:\n"
    "        return forward(*args)\n"
    "    graph, static, out = entry\n"
    "    with torch.no_grad():\n"
    "        for s, a in zip(static, args, strict=True):\n"
    "            if isinstance(s, torch.Tensor):\n"
    "                s.copy_(a)\n"
    "    graph.replay()\n"
    "    return _mk_fresh(out, _mk_autograd_anchor(state, args))\n";

/* Finds the last "class ModelNew(" at the start of a line. */
static const char *find_class(const char *src, const char *cls) {
  const char *found = NULL;
  size_t n = strlen(cls);
  for (const char *p = src; (p = strstr(p, "class ")) != NULL; p += 6) {
    bool at_line = p == src || p[-1] == '\n';
    if (at_line && strncmp(p + 6, cls, n) == 0 && (p[6 + n] == '(' || p[6 + n] == ':'))
      found = p;
  }
  return found;
}

int mk_compose_cuda_graph(const char *modelnew_source, const char *class_name, mk_buf *out,
                          mk_errmsg *err) {
  const char *cls = class_name ? class_name : "ModelNew";
  if (modelnew_source == NULL) return mk_errf(err, MK_EINVAL, "compose: no ModelNew source");
  if (find_class(modelnew_source, cls) == NULL)
    return mk_errf(err, MK_EINVAL, "compose: the file defines no class %s", cls);
  if (strstr(modelnew_source, "class _MkGraphs:") != NULL)
    return mk_errf(err, MK_EINVAL, "compose: %s already replays a CUDA graph", cls);
  mk_buf_puts(out, "# Replayed as one CUDA graph per input signature (MKEvolve): the composed\n"
                   "# forward below, captured once, every call a fresh output.\n");
  mk_buf_puts(out, modelnew_source);
  if (out->len && out->data[out->len - 1] != '\n') mk_buf_putc(out, '\n');
  mk_buf_puts(out, graph_runtime);
  mk_buf_printf(out,
                "\n\nclass %s(%s):\n"
                "    \"\"\"%s above, its forward replayed as one CUDA graph (launch-bound\n"
                "    programs); the plain forward where a graph would be wrong.\"\"\"\n"
                "\n"
                "    def forward(self, *args, **kwargs):\n"
                "        if kwargs:  # keyword arguments: the plain forward (graphs key positional ones)\n"
                "            return super().forward(*args, **kwargs)\n"
                "        return _mk_graph_call(self, super().forward, args)\n",
                cls, cls, cls);
  if (out->err) return mk_errf(err, out->err, "compose: output too large");
  return 0;
}
