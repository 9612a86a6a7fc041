"""Optimizers (SGD, momentum, Adam, AdamW, Muon), explicit L2, and learning-rate schedules.

Explicit L2 (``l2``, the paper's "explicit L2 weight decay", lambda in ``T_L2``) is a
*coupled* penalty: ``lambda * w`` is added to every parameter's gradient before the
optimizer sees it, for every optimizer alike (:func:`add_l2_`, called in the training step). AdamW's and Muon's *decoupled* decay is the
separate ``weight_decay`` hyperparameter.

Muon follows the reference algorithm (K. Jordan, github.com/KellerJordan/Muon): momentum
0.95 with Nesterov, the update orthogonalized by 5 quintic Newton-Schulz steps with
coefficients (3.4445, -4.7750, 2.0315), conv kernels flattened to (out, in*kh*kw), scaled by
sqrt(max(1, rows/cols)). It applies to hidden conv/linear kernels; the stem, head, biases
and BatchNorm go to AdamW. It never renormalizes weights (that would erase sigma_w).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .models import head_and_stem

NS_COEFFS = (3.4445, -4.7750, 2.0315)


def newton_schulz5(G: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """Approximate the orthogonal polar factor U V^T of a matrix G = U S V^T by the
    quintic Newton-Schulz iteration X <- aX + (bA + cA^2)X, A = X X^T, from X = G/||G||_F.
    G is one matrix (m, n) or a batch of them (R, m, n): fused runs (initlib.fused)."""
    assert G.ndim in (2, 3)
    a, b, c = NS_COEFFS
    X = G.bfloat16() if G.is_cuda else G.to(torch.promote_types(G.dtype, torch.float32))
    transposed = X.size(-2) > X.size(-1)
    if transposed:
        X = X.mT
    X = X / ((X.norm() if X.ndim == 2 else X.norm(dim=(-2, -1), keepdim=True)) + eps)
    for _ in range(steps):
        A = X @ X.mT
        X = a * X + (b * A + c * A @ A) @ X
    if transposed:
        X = X.mT
    return X.to(G.dtype)


def muon_update(grad: torch.Tensor, buf: torch.Tensor, beta: float = 0.95,
                nesterov: bool = True, ns_steps: int = 5) -> torch.Tensor:
    """One Muon direction for a kernel of any shape (2-D, or 4-D conv flattened to 2-D).
    Updates the momentum buffer ``buf`` in place."""
    buf.lerp_(grad, 1 - beta)
    g = grad.lerp(buf, beta) if nesterov else buf
    g2 = g.reshape(len(g), -1)
    u = newton_schulz5(g2, ns_steps)
    u = u * math.sqrt(max(1.0, g2.size(0) / g2.size(1)))
    return u.view_as(grad)


class Muon(torch.optim.Optimizer):
    """Muon for groups with ``use_muon=True``, AdamW for the others (like the reference
    ``MuonWithAuxAdam``). Decoupled ``weight_decay`` multiplies weights by (1 - lr*wd)."""

    def __init__(self, param_groups):
        for g in param_groups:
            if g["use_muon"]:
                g.setdefault("momentum", 0.95)
                g.setdefault("weight_decay", 0.0)
            else:
                g.setdefault("betas", (0.9, 0.999))
                g.setdefault("eps", 1e-8)
                g.setdefault("weight_decay", 0.0)
        super().__init__(param_groups, {})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if group["use_muon"]:
                    if not state:
                        state["momentum_buffer"] = torch.zeros_like(p)
                    u = muon_update(p.grad, state["momentum_buffer"], group["momentum"])
                    p.mul_(1 - lr * wd).add_(u, alpha=-lr)
                else:
                    if not state:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                    state["step"] += 1
                    b1, b2 = group["betas"]
                    state["exp_avg"].lerp_(p.grad, 1 - b1)
                    state["exp_avg_sq"].lerp_(p.grad.square(), 1 - b2)
                    m_hat = state["exp_avg"] / (1 - b1 ** state["step"])
                    v_hat = state["exp_avg_sq"] / (1 - b2 ** state["step"])
                    p.mul_(1 - lr * wd).addcdiv_(m_hat, v_hat.sqrt_().add_(group["eps"]), value=-lr)


@torch.no_grad()
def add_l2_(params, l2: float) -> None:
    """Explicit (coupled) L2, the paper's lambda: add ``l2 * w`` to each gradient in place,
    i.e. the gradient of (l2/2) * ||w||^2, before the optimizer steps. For every optimizer
    alike (for Adam it is then rescaled by the preconditioner, unlike AdamW's decay)."""
    params = [p for p in params if p.grad is not None]
    if l2 and params:
        torch._foreach_add_([p.grad for p in params], params, alpha=float(l2))


def muon_param_groups(model: nn.Module, lr: float, aux_lr: float, momentum: float,
                      betas, eps: float, weight_decay: float):
    """Route parameters by role: hidden conv/linear kernels (ndim >= 2, not the stem or the
    head) to Muon; the stem and head kernels, biases and BatchNorm parameters to AdamW."""
    stem, head = head_and_stem(model)
    excluded = {id(stem.weight), id(head.weight)}
    hidden = [p for p in model.parameters() if p.ndim >= 2 and id(p) not in excluded]
    hidden_ids = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in hidden_ids]
    return [dict(params=hidden, lr=lr, base_lr=lr, use_muon=True, momentum=momentum,
                 weight_decay=weight_decay),
            dict(params=rest, lr=aux_lr, base_lr=aux_lr, use_muon=False, betas=betas, eps=eps,
                 weight_decay=weight_decay)]


def build_optimizer(name: str, model: nn.Module, *, lr: float, weight_decay: float = 0.0, momentum: float = 0.9,
                    muon_momentum: float = 0.95, beta1: float = 0.9, beta2: float = 0.999,
                    eps: float = 1e-8, aux_lr: float | None = None, **_ignored):
    """The optimizer ``name`` over ``model``'s parameters. Explicit L2 is not here: it is
    added to the gradients in the training step (:func:`add_l2_`), where it can be seen.
    Which optimizers take decoupled ``weight_decay`` is checked once, in ``config.validate``.

    Each param group carries ``base_lr``; the trainer sets ``lr = base_lr * factor_k`` at
    step k from :func:`lr_factors`.
    """
    params = list(model.parameters())
    betas = (beta1, beta2)
    if name == "sgd":
        inner = torch.optim.SGD(params, lr=lr, momentum=0.0)
    elif name == "momentum":
        inner = torch.optim.SGD(params, lr=lr, momentum=momentum)
    elif name == "adam":
        inner = torch.optim.Adam(params, lr=lr, betas=betas, eps=eps)
    elif name == "adamw":
        inner = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    elif name == "muon":
        aux = aux_lr if aux_lr is not None else lr * 0.015  # reference: 0.02 Muon, 3e-4 AdamW
        inner = Muon(muon_param_groups(model, lr, aux, muon_momentum, betas, eps, weight_decay))
    else:
        raise ValueError(f"unknown optimizer {name!r}")
    for g in inner.param_groups:
        g.setdefault("base_lr", g["lr"])
    return inner


def set_lr_factor(optimizer, factor: float) -> None:
    factor = float(factor)  # a numpy scalar would end up in checkpoints
    for g in optimizer.param_groups:
        g["lr"] = g["base_lr"] * factor


def lr_factors(schedule: str, total_steps: int, warmup_steps: int = 0,
               milestones=(0.5, 0.75), gamma: float = 0.1) -> np.ndarray:
    """Per-step multipliers of the base learning rate, so that eta_k = lr * factor[k].

    constant: 1; cosine: 0.5 (1 + cos(pi t)) over the steps after warm-up, t in [0, 1);
    step: gamma^(number of milestones passed), milestones as fractions of total_steps.
    A linear warm-up over the first ``warmup_steps`` steps ramps (k+1)/warmup_steps.
    """
    k = np.arange(total_steps, dtype=np.float64)
    if schedule == "constant":
        f = np.ones(total_steps)
    elif schedule == "cosine":
        span = max(1, total_steps - warmup_steps)
        t = np.clip((k - warmup_steps) / span, 0.0, 1.0)
        f = 0.5 * (1.0 + np.cos(np.pi * t))
    elif schedule == "step":
        f = np.ones(total_steps)
        for m in milestones:
            f[k >= round(m * total_steps)] *= gamma
    else:
        raise ValueError(f"unknown schedule {schedule!r}")
    if warmup_steps:
        f = np.where(k < warmup_steps, f * (k + 1) / warmup_steps, f)
    return f
