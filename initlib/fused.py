"""Fused runs: G runs of one architecture trained as one model (the idea of HFTA, MLSys 2021).

Runs that share architecture, width, optimizer, batch size and horizon, and differ in
sigma_w, seed, learning rate, L2 or decay, become one module whose operators are G times
wider: every conv is a grouped conv (group g is run g), BatchNorm runs over G x C channels
(its statistics are per run by construction), the head is a batched matmul, and the loss is
the sum of the per-run losses, so each run's gradient is exactly its own. Every parameter
carries the run on its first axis, so the optimizers below take per-run hyperparameters as
tensors and Muon's Newton-Schulz iteration batches over runs.

This module is the model and the update; that G fused runs equal the same G runs trained alone
is tests/test_fused.py. The training loop of a group (data order, metrics, store, resume) is
initlib.fused_train; ``sweep --fuse G`` uses it.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .models import ShortcutA
from .optim import newton_schulz5


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
    x = torch.stack(xs, dim=1)
    return x.reshape(x.shape[0], -1, *x.shape[3:])


def fused_loss(logits: torch.Tensor, ys: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
    """Cross-entropy of each run (``ys``: N x G labels): mean over the batch per run; the sum
    over runs (the loss to differentiate: each run's gradient is its own), or 'none': (G,)."""
    n, g = ys.shape
    per = F.cross_entropy(logits.reshape(n, g, -1).transpose(1, 2), ys, reduction="none").mean(0)
    return per.sum() if reduction == "sum" else per


# ---------------------------------------------------------------- per-run updates
def _per_run(v, p: torch.Tensor) -> torch.Tensor:
    """A per-run hyperparameter (G,) shaped to broadcast against a parameter (G, ...)."""
    return torch.as_tensor(v, dtype=p.dtype, device=p.device).reshape(-1, *([1] * (p.ndim - 1)))


class FusedOptimizer:
    """One optimizer for G fused runs, each with its own lr, L2 (coupled), decoupled decay
    and (Muon) role routing; the rules are those of initlib.optim (torch's SGD, Adam and AdamW
    semantics, reference Muon). ``lrs``, ``l2s``, ``wds``: length-G sequences."""

    def __init__(self, name: str, model: nn.Module, lrs, l2s=None, wds=None, *, momentum=0.9,
                 muon_momentum=0.95, betas=(0.9, 0.999), eps=1e-8, aux_lrs=None):
        self.name, self.model = name, model
        g = model.runs
        self.lrs = torch.as_tensor(lrs, dtype=torch.float64)
        self.l2s = torch.as_tensor(l2s if l2s is not None else [0.0] * g, dtype=torch.float64)
        self.wds = torch.as_tensor(wds if wds is not None else [0.0] * g, dtype=torch.float64)
        self.aux_lrs = torch.as_tensor(aux_lrs if aux_lrs is not None else self.lrs * 0.015)
        self.momentum, self.muon_momentum, self.betas, self.eps = momentum, muon_momentum, betas, eps
        self.state: dict[int, dict] = {}
        self.factor = 1.0
        if name == "muon":
            convs = [m for m in model.modules() if isinstance(m, FusedConv2d)]
            lins = [m for m in model.modules() if isinstance(m, FusedLinear)]
            excluded = {id(convs[0].weight), id(lins[-1].weight)}  # stem and head: AdamW
            self.hidden = {id(p) for p in model.parameters() if p.ndim >= 3 and id(p) not in excluded}
        else:
            self.hidden = set()

    def zero_grad(self):
        for p in self.model.parameters():
            p.grad = None

    @torch.no_grad()
    def step(self):
        for p in self.model.parameters():
            if p.grad is None:
                continue
            grad = p.grad + _per_run(self.l2s, p) * p  # explicit L2, coupled, per run
            st = self.state.setdefault(id(p), {})
            if id(p) in self.hidden:
                self._muon(p, grad, st)
            elif self.name in ("adam", "adamw", "muon"):
                lr = self.aux_lrs if self.name == "muon" else self.lrs
                self._adam(p, grad, st, lr, decoupled=self.name in ("adamw", "muon"))
            else:
                self._sgd(p, grad, st)

    def _sgd(self, p, grad, st):
        lr = _per_run(self.lrs * self.factor, p)
        if self.name == "momentum":
            if "buf" not in st:
                st["buf"] = grad.clone()
            else:
                st["buf"].mul_(self.momentum).add_(grad)
            grad = st["buf"]
        p.sub_(lr * grad)

    def _adam(self, p, grad, st, lrs, decoupled: bool):
        b1, b2 = self.betas
        lr = _per_run(lrs * self.factor, p)
        if decoupled:
            p.mul_(1 - lr * _per_run(self.wds, p))
        if not st:
            st.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
        st["step"] += 1
        st["m"].lerp_(grad, 1 - b1)
        st["v"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
        c1, c2 = 1 - b1 ** st["step"], 1 - b2 ** st["step"]
        denom = (st["v"].sqrt() / math.sqrt(c2)).add_(self.eps)
        p.sub_(lr / c1 * st["m"] / denom)

    def _muon(self, p, grad, st):
        beta = self.muon_momentum
        lr = _per_run(self.lrs * self.factor, p)
        if "buf" not in st:
            st["buf"] = torch.zeros_like(p)
        st["buf"].lerp_(grad, 1 - beta)
        g = grad.lerp(st["buf"], beta)
        g2 = g.reshape(g.shape[0], g.shape[1], -1)
        u = newton_schulz5(g2) * math.sqrt(max(1.0, g2.size(1) / g2.size(2)))
        p.mul_(1 - lr * _per_run(self.wds, p)).sub_(lr * u.view_as(p))
