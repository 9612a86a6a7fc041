"""Fused runs: G runs of one architecture trained as one model (the idea of HFTA, MLSys 2021).

Runs that share architecture, width, optimizer, batch size and horizon, and differ in
sigma_w, seed, learning rate, L2 or decay, become one module whose operators are G times
wider: every conv is a grouped conv (group g is run g), BatchNorm runs over G x C channels
(its statistics are per run by construction), the head is a batched matmul, and the loss is
the sum of the per-run losses, so each run's gradient is exactly its own. Every parameter
carries the run on its first axis, so the optimizers below take per-run hyperparameters as
tensors and Muon's Newton-Schulz iteration batches over runs.

A single run is a group of one (grouped convolutions with one group are plain convolutions): the
one training loop, initlib.train, trains any G. This module is what is specific to fusing: the
fused model's construction, the slicing of a group's state into its runs' and back, and which
runs may be fused (``group_key``, ``plan_groups``; ``sweep --fuse G`` uses them). That G fused
runs equal the same G runs trained alone is tests/test_fused.py (the update) and
tests/test_fused_train.py (the whole run).
"""
from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch import nn

from .config import identity
from .models import ShortcutA

# Runs may be fused when they differ only in these: the same architecture, width, optimizer,
# batch size, horizon, schedule, BatchNorm statistics and data.
FUSABLE_KEYS = ("sigma_w", "seed", "lr", "l2", "weight_decay", "aux_lr")


class FusedConv2d(nn.Module):
    """G convs as one grouped conv; weight (G, C_out, C_in, kh, kw); input and output
    channels are run-major (run g owns channels g*C .. (g+1)*C - 1)."""

    def __init__(self, convs: list[nn.Conv2d]):
        super().__init__()
        c = convs[0]
        assert c.bias is None and c.groups == 1
        self.g, self.stride, self.padding = len(convs), c.stride, c.padding
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in convs]))

    def forward(self, x):
        w = self.weight.reshape(-1, *self.weight.shape[2:])
        return F.conv2d(x, w, stride=self.stride, padding=self.padding, groups=self.g)


class FusedBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm over G x C channels: per-run statistics by construction. Its affine
    parameters are viewed (G, C) so that they carry the run on their first axis."""

    def __init__(self, bns: list[nn.BatchNorm2d]):
        b = bns[0]
        super().__init__(len(bns) * b.num_features, eps=b.eps, momentum=b.momentum,
                         device=b.running_mean.device, dtype=b.running_mean.dtype)
        self.g = len(bns)
        with torch.no_grad():
            self.running_mean.copy_(torch.cat([m.running_mean for m in bns]))
            self.running_var.copy_(torch.cat([m.running_var for m in bns]))
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in bns]))
        self.bias = nn.Parameter(torch.stack([m.bias.detach() for m in bns]))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight.reshape(-1),
                            self.bias.reshape(-1), self.training, self.momentum, self.eps)


class FusedLinear(nn.Module):
    """G linear heads as one batched matmul; weight (G, out, in), bias (G, out) or None."""

    def __init__(self, linears: list[nn.Linear]):
        super().__init__()
        self.g = len(linears)
        self.weight = nn.Parameter(torch.stack([m.weight.detach() for m in linears]))
        self.bias = (nn.Parameter(torch.stack([m.bias.detach() for m in linears]))
                     if linears[0].bias is not None else None)

    def forward(self, x):
        x = x.reshape(len(x), self.g, -1)
        y = torch.einsum("ngi,goi->ngo", x, self.weight)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(len(x), -1)


class FusedShortcutA(nn.Module):
    """Option-A shortcut per run: subsample, zero-pad each run's channels (not the block's)."""

    def __init__(self, s: ShortcutA, g: int):
        super().__init__()
        self.pad, self.g = s.pad, g

    def forward(self, x):
        n, _, h, w = x.shape
        x = x[:, :, ::2, ::2].reshape(n, self.g, -1, (h + 1) // 2, (w + 1) // 2)
        x = F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return x.reshape(n, -1, *x.shape[3:])


def fuse(models: list[nn.Module]) -> nn.Module:
    """One module computing ``models`` side by side (same architecture; any weights): the
    fused counterpart of each conv, BatchNorm, linear and option-A shortcut; every other
    module (ReLU, pooling, residual sums, scaling) works on G x C channels as it is."""
    g = len(models)

    def build(mods: list[nn.Module]) -> nn.Module:
        m = mods[0]
        if isinstance(m, nn.Conv2d):
            return FusedConv2d(mods)
        if isinstance(m, nn.BatchNorm2d):
            return FusedBatchNorm2d(mods)
        if isinstance(m, nn.Linear):
            return FusedLinear(mods)
        if isinstance(m, ShortcutA):
            return FusedShortcutA(m, g)
        out = _shallow_copy(m)
        for name, _ in m.named_children():
            setattr(out, name, build([getattr(x, name) for x in mods]))
        return out
    fused = build(models)
    fused.runs = g
    return fused


def _shallow_copy(m: nn.Module) -> nn.Module:
    import copy
    out = copy.copy(m)
    out._modules = dict(m._modules)
    out._parameters = dict(m._parameters)
    out._buffers = dict(m._buffers)
    return out


def fused_input(xs: list[torch.Tensor]) -> torch.Tensor:
    """Per-run batches (each N x C x H x W, same N) as one run-major N x (G C) x H x W batch."""
    if len(xs) == 1:
        return xs[0]
    x = torch.stack(xs, dim=1)
    return x.reshape(x.shape[0], -1, *x.shape[3:])


def fused_loss(logits: torch.Tensor, ys: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
    """Cross-entropy of each run (``ys``: N x G labels): mean over the batch per run; the sum
    over runs (the loss to differentiate: each run's gradient is its own), or 'none': (G,)."""
    n, g = ys.shape
    per = F.cross_entropy(logits.reshape(n, g, -1).transpose(1, 2), ys, reduction="none").mean(0)
    return per.sum() if reduction == "sum" else per


# ---------------------------------------------------------------- which runs fuse
def group_key(cfg: dict) -> str:
    """What runs fused together must share: their identity without ``FUSABLE_KEYS``."""
    ident = {k: v for k, v in identity(cfg).items() if k not in FUSABLE_KEYS}
    return json.dumps(ident, sort_keys=True)


def plan_groups(configs: list[dict], size: int, epoch_of=lambda cfg: None) -> list[list[dict]]:
    """Split ``configs`` into groups of at most ``size`` runs that can be fused (same
    ``group_key`` and the same checkpoint epoch), in the order the configs come."""
    by: dict[tuple, list[dict]] = {}
    for cfg in configs:
        by.setdefault((group_key(cfg), epoch_of(cfg)), []).append(cfg)
    return [g[i:i + size] for g in by.values() for i in range(0, len(g), size)]


# ---------------------------------------------------------------- a group's parts per run
def unfused_state(fused_state: dict, g: int, plain_state: dict) -> dict:
    """Run ``g``'s plain state dict from the fused one: every tensor carries the run on its
    first axis (weights (G, ...); BatchNorm buffers (G * C,)); scalars are shared."""
    out = {}
    for k, ref in plain_state.items():
        v = fused_state[k]
        out[k] = v.clone() if v.ndim == 0 else v.reshape(-1, *ref.shape)[g].reshape(ref.shape).clone()
    return out


def fused_state_from(states: list[dict], fused_state: dict) -> dict:
    """The fused state dict from each run's plain one (the inverse of unfused_state)."""
    out = {}
    for k, ref in fused_state.items():
        vs = [s[k] for s in states]
        out[k] = vs[0].clone() if ref.ndim == 0 else torch.stack(vs).reshape(ref.shape)
    return out


def kernel_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The fused conv and linear layers, by the plain model's layer names."""
    return {name: m for name, m in model.named_modules() if isinstance(m, (FusedConv2d, FusedLinear))}


@torch.no_grad()
def run_kernel_norms(model: nn.Module) -> dict[str, torch.Tensor]:
    """Per run (G,), the Frobenius norm of each kernel, by the plain model's layer names."""
    return {name: m.weight.detach().reshape(model.runs, -1).norm(dim=1)
            for name, m in kernel_modules(model).items()}


def param_roles(model: nn.Module, optimizer: str) -> dict[str, list]:
    """Parameters by role for initlib.optim.RunsOptimizer. Muon: the hidden conv/linear
    kernels (not the stem, not the head) to Muon, the rest (stem, head, BatchNorm, biases) to
    AdamW; every other optimizer: all parameters alike."""
    params = list(model.parameters())
    if optimizer != "muon":
        return {"main": params}
    layers = list(kernel_modules(model).values())
    excluded = {id(layers[0].weight), id(layers[-1].weight)}  # stem and head
    hidden = [p for p in params if p.ndim >= 3 and id(p) not in excluded]
    ids = {id(p) for p in hidden}
    return {"muon": hidden, "adam": [p for p in params if id(p) not in ids]}
