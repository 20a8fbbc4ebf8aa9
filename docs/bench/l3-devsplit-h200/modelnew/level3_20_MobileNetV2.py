# Replayed as one CUDA graph per input signature (MKEvolve): the composed
# forward below, captured once, every call a fresh output.
# ModelNew composed by MKEvolve: no subkernel could be replaced.
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, num_classes=1000):
        """
        MobileNetV2 architecture implementation in PyTorch.

        :param num_classes: The number of output classes. Default is 1000.
        """
        super(Model, self).__init__()
        
        def _make_divisible(v, divisor, min_value=None):
            """
            This function ensures that the number of channels is divisible by the divisor.
            """
            if min_value is None:
                min_value = divisor
            new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
            # Make sure that round down does not go down by more than 10%.
            if new_v < 0.9 * v:
                new_v += divisor
            return new_v

        def _inverted_residual_block(inp, oup, stride, expand_ratio):
            """
            Inverted Residual Block for MobileNetV2.
            """
            hidden_dim = int(inp * expand_ratio)
            use_res_connect = stride == 1 and inp == oup

            layers = []
            if expand_ratio != 1:
                # Pointwise convolution
                layers.append(nn.Conv2d(inp, hidden_dim, 1, 1, 0, bias=False))
                layers.append(nn.BatchNorm2d(hidden_dim))
                layers.append(nn.ReLU6(inplace=True))

            layers.extend([
                # Depthwise convolution
                nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
                # Pointwise linear convolution
                nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup),
            ])

            if use_res_connect:
                return nn.Sequential(*layers), True
            else:
                return nn.Sequential(*layers), False

        # MobileNetV2 architecture
        input_channel = 32
        last_channel = 1280
        inverted_residual_setting = [
            # t, c, n, s
            [1, 16, 1, 1],
            [6, 24, 2, 2],
            [6, 32, 3, 2],
            [6, 64, 4, 2],
            [6, 96, 3, 1],
            [6, 160, 3, 2],
            [6, 320, 1, 1],
        ]

        # Building first layer
        features = [nn.Conv2d(3, input_channel, 3, 2, 1, bias=False),
                    nn.BatchNorm2d(input_channel),
                    nn.ReLU6(inplace=True)]

        # Building inverted residual blocks
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c, 8)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(_inverted_residual_block(input_channel, output_channel, stride, expand_ratio=t)[0])
                input_channel = output_channel

        # Building last several layers
        features.append(nn.Conv2d(input_channel, last_channel, 1, 1, 0, bias=False))
        features.append(nn.BatchNorm2d(last_channel))
        features.append(nn.ReLU6(inplace=True))

        # Final layer
        features.append(nn.AdaptiveAvgPool2d((1, 1)))

        self.features = nn.Sequential(*features)

        # Linear layer
        self.classifier = nn.Sequential(
            nn.Dropout(0.0),
            nn.Linear(last_channel, num_classes),
        )

        # Weight initialization
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out')
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        """
        Forward pass of the MobileNetV2 model.

        :param x: The input tensor, shape (batch_size, 3, 224, 224)
        :return: The output tensor, shape (batch_size, num_classes)
        """
        x = self.features(x)
        x = x.view(x.size(0), -1)
        x = self.classifier(x)
        return x

# Test code
batch_size = 10
num_classes = 1000

def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]

def get_init_inputs():
    return [num_classes]

class ModelNew(Model):
    pass


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
