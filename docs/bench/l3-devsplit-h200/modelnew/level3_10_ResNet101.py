# Replayed as one CUDA graph per input signature (MKEvolve): the composed
# forward below, captured once, every call a fresh output.
# ModelNew composed by MKEvolve: no subkernel could be replaced.
import torch
import torch.nn as nn
import torch.nn.functional as F

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels, out_channels, stride=1, downsample=None):
        """
        :param in_channels: Number of input channels
        :param out_channels: Number of output channels
        :param stride: Stride for the first convolutional layer
        :param downsample: Downsample layer for the shortcut connection
        """
        super(Bottleneck, self).__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.conv3 = nn.Conv2d(out_channels, out_channels * self.expansion, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        """
        :param x: Input tensor, shape (batch_size, in_channels, height, width)
        :return: Output tensor, shape (batch_size, out_channels * expansion, height, width)
        """
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        out = self.relu(out)

        out = self.conv3(out)
        out = self.bn3(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)

        return out

class Model(nn.Module):
    def __init__(self, layers, num_classes=1000):
        """
        :param block: Type of block to use (BasicBlock or Bottleneck)
        :param layers: List of integers specifying the number of blocks in each layer
        :param num_classes: Number of output classes
        """
        super(Model, self).__init__()
        self.in_channels = 64

        self.conv1 = nn.Conv2d(3, self.in_channels, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.in_channels)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

        block = Bottleneck

        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)

        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _make_layer(self, block, out_channels, blocks, stride=1):
        downsample = None
        if stride != 1 or self.in_channels != out_channels * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.in_channels, out_channels * block.expansion, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels * block.expansion),
            )

        layers = []
        layers.append(block(self.in_channels, out_channels, stride, downsample))
        self.in_channels = out_channels * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.in_channels, out_channels))

        return nn.Sequential(*layers)

    def forward(self, x):
        """
        :param x: Input tensor, shape (batch_size, 3, height, width)
        :return: Output tensor, shape (batch_size, num_classes)
        """
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.layer4(x)

        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)

        return x

# Test code
batch_size = 10
height = 224
width = 224
layers = [3, 4, 23, 3]
num_classes = 1000

def get_inputs():
    return [torch.rand(batch_size, 3, height, width)]

def get_init_inputs():
    return [layers, num_classes]

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
