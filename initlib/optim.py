"""The optimizers (SGD, momentum, Adam, AdamW, Muon) for G runs side by side, explicit L2, and
learning-rate schedules.

One implementation, :class:`RunsOptimizer`, a ``torch.optim.Optimizer`` (so ``state_dict``
works) whose every parameter carries the run on its first axis (initlib.fused: a single run is a
group of one) and whose learning rates and decays are per-run tensors (as HFTA's fused
optimizers). The updates follow torch's SGD, Adam and AdamW and the reference Muon; that G
fused runs equal the same runs under torch's own optimizers is tests/test_fused.py.

Explicit L2 (``l2``, the paper's "explicit L2 weight decay", lambda in ``T_L2``) is a
*coupled* penalty: ``lambda * w`` is added to every parameter's gradient before the optimizer
sees it, for every optimizer alike. It is not in here: the training step adds it
(:func:`add_l2_`), where it can be seen. AdamW's and Muon's *decoupled* decay is the separate
``weight_decay`` (which optimizers take it: initlib.config).

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

NS_COEFFS = (3.4445, -4.7750, 2.0315)


# ---------------------------------------------------------------- pure update rules
def newton_schulz5(G: torch.Tensor, steps: int = 5, eps: float = 1e-7) -> torch.Tensor:
    """Approximate the orthogonal polar factor U V^T of a matrix G = U S V^T by the
    quintic Newton-Schulz iteration X <- aX + (bA + cA^2)X, A = X X^T, from X = G/||G||_F.
    G is one matrix (m, n) or a batch of them (R, m, n): one per run."""
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


def muon_update(grad: torch.Tensor, buf: torch.Tensor, beta: float = 0.95, runs: int | None = None) -> torch.Tensor:
    """One Muon direction (Nesterov momentum, then orthogonalized). ``grad`` is one kernel
    (out, ...) or, with ``runs`` = G, G kernels stacked (G, out, ...), each orthogonalized on
    its own. Updates the momentum buffer ``buf`` in place."""
    buf.lerp_(grad, 1 - beta)
    g = grad.lerp(buf, beta)
    g2 = g.reshape(len(g), -1) if runs is None else g.reshape(runs, g.shape[1], -1)
    u = newton_schulz5(g2) * math.sqrt(max(1.0, g2.size(-2) / g2.size(-1)))
    return u.view_as(grad)


def adam_direction(grad, state: dict, betas, eps) -> torch.Tensor:
    """Adam's bias-corrected m / (sqrt(v) + eps), torch's formula; updates ``state``."""
    b1, b2 = betas
    if not state:
        state.update(step=0, exp_avg=torch.zeros_like(grad), exp_avg_sq=torch.zeros_like(grad))
    state["step"] += 1
    state["exp_avg"].lerp_(grad, 1 - b1)
    state["exp_avg_sq"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
    c1, c2 = 1 - b1 ** state["step"], 1 - b2 ** state["step"]
    return state["exp_avg"] / c1 / (state["exp_avg_sq"].sqrt() / math.sqrt(c2)).add_(eps)


def per_run(v: torch.Tensor, p: torch.Tensor) -> torch.Tensor | float:
    """A per-run hyperparameter (G,) shaped to broadcast against a parameter (G, ...); for a
    group of one, the number itself (no tensor to build and broadcast at every step)."""
    if v.numel() == 1:
        return float(v)
    return v.to(dtype=p.dtype, device=p.device).reshape(-1, *([1] * (p.ndim - 1)))


@torch.no_grad()
def add_l2_(params, l2s: torch.Tensor) -> None:
    """Explicit (coupled) L2, the paper's lambda, per run: add ``l2[g] * w`` to run g's
    gradient in place, i.e. the gradient of (l2/2) ||w||^2, before the optimizer steps. For
    every optimizer alike (for Adam it is then rescaled by the preconditioner, unlike AdamW's
    decay)."""
    if not bool((l2s != 0).any()):
        return
    for p in params:
        if p.grad is not None:
            p.grad.add_(per_run(l2s, p) * p)


# ---------------------------------------------------------------- the optimizer
class RunsOptimizer(torch.optim.Optimizer):
    """SGD, momentum (heavy ball), Adam, AdamW or Muon (+ AdamW for the rest) for G runs.

    ``params_by_role``: {"muon": [...], "adam": [...]} for Muon, {"main": [...]} otherwise;
    parameters carry the run on their first axis. ``lrs``, ``wds`` and ``aux_lrs`` are length-G
    sequences (the per-run base lr, decoupled decay and Muon's AdamW lr); :meth:`set_lr_factor`
    scales every base lr by the schedule's factor of the step."""

    def __init__(self, family: str, params_by_role: dict, runs: int, lrs, wds=None, aux_lrs=None, *,
                 momentum=0.9, muon_momentum=0.95, betas=(0.9, 0.999), eps=1e-8):
        as_t = lambda v: torch.as_tensor(np.asarray(v, dtype=np.float64))  # noqa: E731
        zeros = [0.0] * runs
        groups = []
        for role, params in params_by_role.items():
            base = aux_lrs if role == "adam" and family == "muon" else lrs
            groups.append(dict(params=list(params), role=role, base_lr=as_t(base), factor=1.0,
                               weight_decay=as_t(wds if wds is not None else zeros)))
        super().__init__(groups, dict(family=family, runs=runs, momentum=momentum,
                                      muon_momentum=muon_momentum, betas=betas, eps=eps))

    def set_lr_factor(self, factor: float) -> None:
        for g in self.param_groups:
            g["factor"] = float(factor)  # a numpy scalar would end up in checkpoints

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr_all = group["base_lr"] * group["factor"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                lr, wd, state = per_run(lr_all, p), per_run(group["weight_decay"], p), self.state[p]
                self._update(group, p, p.grad, state, lr, wd)

    def _update(self, group, p, grad, state, lr, wd):
        family = group["family"]
        if group["role"] == "muon":
            if not state:
                state["momentum_buffer"] = torch.zeros_like(p)
            u = muon_update(grad, state["momentum_buffer"], group["muon_momentum"], runs=group["runs"])
            p.mul_(1 - lr * wd).sub_(lr * u)
        elif family in ("adam", "adamw", "muon"):
            if family != "adam":  # decoupled decay (zero where not asked for)
                p.mul_(1 - lr * wd)
            p.sub_(lr * adam_direction(grad, state, group["betas"], group["eps"]))
        else:
            if family == "momentum":
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = grad.clone()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(grad)
                grad = state["momentum_buffer"]
            p.sub_(lr * grad)

    def run_state(self, g: int) -> list[dict]:
        """Run ``g``'s share of the state: per parameter (in order), its tensors' slice g."""
        return [{k: (v[g].clone() if torch.is_tensor(v) and v.ndim else v)
                 for k, v in self.state.get(p, {}).items()}
                for group in self.param_groups for p in group["params"]]

    def load_run_states(self, per_run_states: list[list[dict]]) -> None:
        """The inverse of :meth:`run_state` for every run at once (they stepped together)."""
        params = [p for group in self.param_groups for p in group["params"]]
        for i, p in enumerate(params):
            parts = [s[i] for s in per_run_states]
            if parts[0]:
                self.state[p] = {k: (torch.stack([r[k] for r in parts]).to(p.device)
                                     if torch.is_tensor(parts[0][k]) else parts[0][k]) for k in parts[0]}


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
