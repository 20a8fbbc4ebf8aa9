# Replayed as one CUDA graph per input signature (MKEvolve): the composed
# forward below, captured once, every call a fresh output.
# ModelNew composed by MKEvolve: no subkernel could be replaced.
import torch
import torch.nn as nn
import torch.nn.functional as F

class DenseBlock(nn.Module):
    def __init__(self, num_layers: int, num_input_features: int, growth_rate: int):
        """
        :param num_layers: The number of layers in the dense block
        :param num_input_features: The number of input feature maps
        :param growth_rate: The growth rate for the dense block (new features added per layer)
        """
        super(DenseBlock, self).__init__()
        layers = []
        for i in range(num_layers):
            layers.append(self._make_layer(num_input_features + i * growth_rate, growth_rate))
        self.layers = nn.ModuleList(layers)

    def _make_layer(self, in_features: int, growth_rate: int):
        """
        Creates a single layer with BatchNorm, ReLU, Conv2D, and Dropout.
        """
        return nn.Sequential(
            nn.BatchNorm2d(in_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(in_features, growth_rate, kernel_size=3, padding=1, bias=False),
            nn.Dropout(0.0)
        )

    def forward(self, x):
        """
        :param x: Input tensor of shape (batch_size, num_input_features, height, width)
        :return: Concatenated output tensor with shape (batch_size, num_output_features, height, width)
        """
        features = [x]
        for layer in self.layers:
            new_feature = layer(x)
            features.append(new_feature)
            x = torch.cat(features, 1)  # Concatenate along channel axis
        return x

class TransitionLayer(nn.Module):
    def __init__(self, num_input_features: int, num_output_features: int):
        """
        :param num_input_features: The number of input feature maps
        :param num_output_features: The number of output feature maps
        """
        super(TransitionLayer, self).__init__()
        self.transition = nn.Sequential(
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2)
        )

    def forward(self, x):
        """
        :param x: Input tensor of shape (batch_size, num_input_features, height, width)
        :return: Downsampled tensor with reduced number of feature maps
        """
        return self.transition(x)

class Model(nn.Module):
    def __init__(self, growth_rate: int = 32, num_classes: int = 1000):
        """
        :param growth_rate: The growth rate of the DenseNet (new features added per layer)
        :param num_classes: The number of output classes for classification
        """
        super(Model, self).__init__()

        # Initial convolution and pooling
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        )

        # Each dense block is followed by a transition layer, except the last one
        num_features = 64
        block_layers = [6, 12, 24, 16]  # Corresponding layers in DenseNet121

        self.dense_blocks = nn.ModuleList()
        self.transition_layers = nn.ModuleList()

        for i, num_layers in enumerate(block_layers):
            block = DenseBlock(num_layers=num_layers, num_input_features=num_features, growth_rate=growth_rate)
            self.dense_blocks.append(block)
            num_features = num_features + num_layers * growth_rate

            if i != len(block_layers) - 1:
                transition = TransitionLayer(num_input_features=num_features, num_output_features=num_features // 2)
                self.transition_layers.append(transition)
                num_features = num_features // 2

        # Final batch norm and classifier
        self.final_bn = nn.BatchNorm2d(num_features)
        self.classifier = nn.Linear(num_features, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        :param x: Input tensor of shape (batch_size, 3, height, width)
        :return: Output tensor of shape (batch_size, num_classes)
        """
        x = self.features(x)

        for i, block in enumerate(self.dense_blocks):
            x = block(x)
            if i != len(self.dense_blocks) - 1:
                x = self.transition_layers[i](x)

        x = self.final_bn(x)
        x = F.relu(x, inplace=True)
        x = F.adaptive_avg_pool2d(x, (1, 1)).view(x.size(0), -1)
        x = self.classifier(x)
        return x

# Testing the DenseNet121 model
batch_size = 10
num_classes = 10
height, width = 224, 224  # Standard input size for DenseNet

def get_inputs():
    return [torch.rand(batch_size, 3, height, width)]

def get_init_inputs():
    return [32, num_classes]


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
