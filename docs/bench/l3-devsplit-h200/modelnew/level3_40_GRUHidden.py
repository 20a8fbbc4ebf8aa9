# Replayed as one CUDA graph per input signature (MKEvolve): the composed
# forward below, captured once, every call a fresh output.
# ModelNew composed by MKEvolve 0.1.0 from kernelbench/level3/40_GRUHidden.py (class Model).
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 gru                          lines 26-26  reference (PyTorch)

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the original module (verbatim) ----
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers=3, bias=True, batch_first=False):
        """
        :param input_size: The number of expected features in the input x
        :param hidden_size: The number of features in the hidden state h
        :param num_layers: Number of recurrent layers (default: 1)
        :param bias: If False, then the layer does not use bias weights b_ih and b_hh (default: True)
        :param batch_first: If True, then the input and output tensors are provided as (batch, seq, feature) (default: False)
        """
        super(Model, self).__init__()
        
        self.gru = nn.GRU(input_size, hidden_size, num_layers, bias, batch_first, dropout=0, bidirectional=False)
    
    def forward(self, x,h0):
        """
        :param x: The input tensor, shape (seq_len, batch_size, input_size) if batch_first=False, otherwise (batch_size, seq_len, input_size)
        :param h_0: The initial hidden state for the input sequence, shape (num_layers * num_directions, batch_size, hidden_size) (default: None)
        :return: output, h_n
            - output: The output features (h_t) from the last layer of the GRU, for each t, shape (seq_len, batch_size, num_directions * hidden_size) if batch_first=False, otherwise (batch_size, seq_len, num_directions * hidden_size)
            - h_n: The hidden state for t = seq_len, shape (num_layers * num_directions, batch_size, hidden_size)
        """
        output, h_n = self.gru(x, h0)
        return h_n

# Test code
batch_size = 10
seq_len = 512
input_size = 128
hidden_size = 256
num_layers = 6

def get_inputs():
    return [torch.rand(seq_len, batch_size, input_size),torch.rand((num_layers, batch_size, hidden_size))]

def get_init_inputs():
    return [input_size, hidden_size, num_layers]


class ModelNew(Model):
    """The same module, composed of verified subkernels."""

    def forward(self, x, h0):
        # made for the captured shapes; dim 0 of each batched input is free
        if x.shape[1:] != (10, 128) or h0.shape != (6, 10, 256):
            return super().forward(x, h0)
        # gru — lines 26-26 — PyTorch reference
        _r = torch.gru(x, h0, [self.gru.weight_ih_l0, self.gru.weight_hh_l0, self.gru.bias_ih_l0, self.gru.bias_hh_l0, self.gru.weight_ih_l1, self.gru.weight_hh_l1, self.gru.bias_ih_l1, self.gru.bias_hh_l1, self.gru.weight_ih_l2, self.gru.weight_hh_l2, self.gru.bias_ih_l2, self.gru.bias_hh_l2, self.gru.weight_ih_l3, self.gru.weight_hh_l3, self.gru.bias_ih_l3, self.gru.bias_hh_l3, self.gru.weight_ih_l4, self.gru.weight_hh_l4, self.gru.bias_ih_l4, self.gru.bias_hh_l4, self.gru.weight_ih_l5, self.gru.weight_hh_l5, self.gru.bias_ih_l5, self.gru.bias_hh_l5], True, 6, 0.0, True, False, False)
        v26 = _r[0]
        v27 = _r[1]
        return v27


# ---- CUDA graph of the whole forward (MKEvolve) ----
import torch  # noqa: E402 (the runtime of the graph variant)

MK_GRAPH_SHAPES = 4


class _MkGraphs:
    """One module's captured forwards, by input signature."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.modules = list(module.modules())
        self.entries: dict = {}
        self.why = ""
        # Live views of every module's parameter and buffer dicts: a replaced parameter
        # shows up in them, and walking them is ~4x cheaper per call than walking the
        # modules (ResNet-101: 626 tensors in 287 modules, ~80 us of Python otherwise).
        self.views = [d.values() for m in self.modules for d in (m._parameters, m._buffers)]

    def state(self) -> list:
        return [t for v in self.views for t in v if t is not None]

    def key(self, args: tuple, state: list):
        # every module's mode (one submodule may be put in eval alone)
        parts: list = [tuple([m.training for m in self.modules])]
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.device.type != "cuda":
                    return None
                parts.append((tuple(a.shape), a.stride(), a.dtype, a.device.index))
            elif a is None or isinstance(a, (bool, int, float, str)):
                parts.append((type(a).__name__, a))
            else:
                return None
        if not all([t.is_cuda for t in state]):
            return None
        # moved or replaced storage (.to(), .data = ...): a graph holds addresses
        parts.append(tuple([t.data_ptr() for t in state]))
        return tuple(parts)

    def capture(self, forward, args: tuple):
        # A replay records no autograd history, so neither does its capture.
        with torch.no_grad():
            static = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            saved = [(t, t.clone()) for t in self.state()]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    forward(*static)
            torch.cuda.current_stream().wait_stream(side)
            for t, s in saved:
                t.copy_(s)
            del saved
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = forward(*static)
        return graph, static, out


class _MkForwardOnly(torch.autograd.Function):
    """A replayed output while autograd records: the replay kept no history, so a
    backward through it stops here with the reason, never with gradients silently
    missing."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return out.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        raise RuntimeError(
            "this ModelNew replays its forward as a CUDA graph, which records no autograd "
            "history: it is for inference (gradients come from the original Model)")


def _mk_fresh(out, anchor):
    if isinstance(out, torch.Tensor):
        if anchor is not None and (out.is_floating_point() or out.is_complex()):
            return _MkForwardOnly.apply(anchor, out)
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_mk_fresh(o, anchor) for o in out)
    return out


def _mk_autograd_anchor(state: list, args: tuple):
    """A tensor autograd tracks, when it records: the outputs then carry a backward
    that says why there is none."""
    if not torch.is_grad_enabled():
        return None
    return next((t for t in (*state, *args)
                 if isinstance(t, torch.Tensor) and t.requires_grad), None)


def _mk_graph_call(module: torch.nn.Module, forward, args: tuple):
    graphs = getattr(module, "_mk_graphs", None)
    if graphs is None:
        graphs = _MkGraphs(module)
        module._mk_graphs = graphs
    state = graphs.state()
    key = graphs.key(args, state)
    if key is None:
        return forward(*args)
    entry = graphs.entries.get(key)
    if entry is None and key not in graphs.entries:
        if len(graphs.entries) >= MK_GRAPH_SHAPES:
            return forward(*args)
        try:
            entry = graphs.capture(forward, args)
        except Exception as e:  # not capturable (a host sync, say): run it plainly
            graphs.why = f"{type(e).__name__}: {e}"
            entry = None
        graphs.entries[key] = entry
    if entry is None:
        return forward(*args)
    graph, static, out = entry
    with torch.no_grad():
        for s, a in zip(static, args, strict=True):
            if isinstance(s, torch.Tensor):
                s.copy_(a)
    graph.replay()
    return _mk_fresh(out, _mk_autograd_anchor(state, args))


class ModelNew(ModelNew):
    """ModelNew above, its forward replayed as one CUDA graph (launch-bound
    programs); the plain forward where a graph would be wrong."""

    def forward(self, *args, **kwargs):
        if kwargs:  # keyword arguments: the plain forward (graphs key positional ones)
            return super().forward(*args, **kwargs)
        return _mk_graph_call(self, super().forward, args)
