"""BatchNorm ResNets for CIFAR-10 and the paper's initialization scale ``sigma_w``.

The paper: "``sigma_w``: global scale of the random kernel initialization, swept over
[0.1, 2.5]". Our reading (signal-propagation convention, see ../shared/PAPER.md): every
conv and linear kernel is drawn ``W ~ N(0, sigma_w^2 / fan_in)``; biases 0; BatchNorm
gamma 1, beta 0. So ``sigma_w = sqrt(2)`` is He/Kaiming-normal.

Architectures (the paper does not state its variants; these are our choices):

- ``resnet9``: the DAWNBench/Myrtle ResNet-9 (channels 64/128/256/512 x width; conv-BN-ReLU
  blocks, max-pooling, two residual blocks, global max-pool, bias-free linear head, output
  scaled by 0.125 as in the Myrtle recipe).
- ``resnet20/56/110``: He et al. (2016) CIFAR ResNets, 3 stages of (depth-2)/6 basic
  blocks at 16/32/64 x width channels, option-A (parameter-free) shortcuts, global
  average pool, linear head with bias.

No lambdas anywhere, so every model pickles.
"""
from __future__ import annotations

import math

import torch
from torch import nn
import torch.nn.functional as F


def _ch(c: int, width: float) -> int:
    return max(1, int(round(c * width)))


def conv_bn(c_in, c_out, stride=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
                         nn.ReLU(inplace=True))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.res1, self.res2 = conv_bn(c, c), conv_bn(c, c)

    def forward(self, x):
        return x + self.res2(self.res1(x))


class Scale(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        self.s = s

    def forward(self, x):
        return x * self.s


# Myrtle's ResNet-9 multiplies its logits by 0.125. Under SGD this slows every layer's effect
# on the logits by roughly 0.125^2 = 1/64 at a given lr. We do NOT keep it (default 1.0, i.e.
# no scale, in every profile, paper included), decided by the measured pilot in
# bench/output_scale_pilot.md (issue 12): with the 0.125, SGD at lr 0.02 in the paper's regime
# (T_SGD 5e-3, 1,600 steps, 5,000 images) reached only 59% / 48% train accuracy at sigma_w
# 0.1 / 2.5; without it, sigma_w 0.1 interpolated by epoch 28 and sigma_w 2.5 by epoch 72 of
# 80 (T_SGD 1e-2). The paper describes a plain BatchNorm ResNet and says nothing of a scale.
# It is the run key ``logit_scale`` (part of a run's identity), so 0.125 stays available.
RESNET9_LOGIT_SCALE = 1.0


class ResNet9(nn.Module):
    """DAWNBench/Myrtle ResNet-9 (Page, 2018)."""

    def __init__(self, width=1.0, num_classes=10, logit_scale: float | None = None):
        super().__init__()
        c = [_ch(k, width) for k in (64, 128, 256, 512)]
        self.prep = conv_bn(3, c[0])
        self.layer1 = nn.Sequential(conv_bn(c[0], c[1]), nn.MaxPool2d(2), Residual(c[1]))
        self.layer2 = nn.Sequential(conv_bn(c[1], c[2]), nn.MaxPool2d(2))
        self.layer3 = nn.Sequential(conv_bn(c[2], c[3]), nn.MaxPool2d(2), Residual(c[3]))
        self.pool = nn.AdaptiveMaxPool2d(1)
        self.fc = nn.Linear(c[3], num_classes, bias=False)
        self.scale = Scale(RESNET9_LOGIT_SCALE if logit_scale is None else logit_scale)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(self.prep(x))))
        return self.scale(self.fc(torch.flatten(self.pool(x), 1)))


class ShortcutA(nn.Module):
    """Option-A shortcut: subsample by 2 and zero-pad the new channels (no parameters)."""

    def __init__(self, c_in, c_out):
        super().__init__()
        self.pad = c_out - c_in

    def forward(self, x):
        x = x[:, :, ::2, ::2]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = ShortcutA(c_in, c_out) if (stride != 1 or c_in != c_out) else nn.Identity()

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """He et al. (2016), Sec. 4.2: 6n+2 layers, 16/32/64 channels, option-A shortcuts."""

    def __init__(self, depth, width=1.0, num_classes=10):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"He CIFAR ResNet depth must be 6n+2, got {depth}")
        n = (depth - 2) // 6
        c = [_ch(k, width) for k in (16, 32, 64)]
        self.conv1 = nn.Conv2d(3, c[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c[0])
        layers, c_in = [], c[0]
        for i, c_out in enumerate(c):
            for j in range(n):
                layers.append(BasicBlock(c_in, c_out, 2 if (i > 0 and j == 0) else 1))
                c_in = c_out
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c[2], num_classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def init_sigma_w_(model: nn.Module, sigma_w: float, generator: torch.Generator) -> nn.Module:
    """The paper's initialization: every conv and linear kernel W ~ N(0, sigma_w^2 / fan_in),
    biases 0, BatchNorm gamma 1 and beta 0. ``fan_in`` = in_channels * kh * kw (conv) or
    in_features (linear). Layers are drawn in module order from ``generator``."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                w = torch.randn(m.weight.shape, generator=generator) * (sigma_w / math.sqrt(fan_in))
                m.weight.copy_(w)
                if m.bias is not None:
                    m.bias.zero_()
            elif isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.reset_running_stats()
                m.weight.fill_(1.0)
                m.bias.zero_()
    return model


def build_model(arch: str, *, width: float = 1.0, sigma_w: float = 1.0, num_classes: int = 10,
                seed: int = 0, logit_scale: float = RESNET9_LOGIT_SCALE) -> nn.Module:
    """A freshly initialized model (seeded), on the CPU in fp32. ``logit_scale`` multiplies
    ResNet-9's logits (Myrtle's 0.125; 1.0 = none, our default); other architectures have none."""
    if arch == "resnet9":
        model = ResNet9(width, num_classes, logit_scale=logit_scale)
    elif arch.startswith("resnet") and arch[6:].isdigit():
        model = CifarResNet(int(arch[6:]), width, num_classes)
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    return init_sigma_w_(model, sigma_w, torch.Generator().manual_seed(seed))


def kernels(model: nn.Module) -> dict[str, torch.Tensor]:
    """The conv and linear kernels by layer name: the weights whose norm the paper tracks."""
    return {name: m.weight for name, m in model.named_modules()
            if isinstance(m, (nn.Conv2d, nn.Linear))}


def head_and_stem(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """The first conv and the classifier: the kernels Muon leaves to AdamW."""
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    return convs[0], linears[-1]


def count_macs(model: nn.Module, input_shape=(1, 3, 32, 32)) -> int:
    """Multiply-accumulates of one forward pass (conv and linear layers only)."""
    total = 0

    def hook(m, inp, out):
        nonlocal total
        if isinstance(m, nn.Conv2d):
            total += out.numel() // out.shape[0] * m.weight[0].numel()
        elif isinstance(m, nn.Linear):
            total += m.weight.numel()

    hs = [m.register_forward_hook(hook) for m in model.modules()
          if isinstance(m, (nn.Conv2d, nn.Linear))]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        model(torch.zeros(input_shape))
    model.train(was_training)
    for h in hs:
        h.remove()
    return total
