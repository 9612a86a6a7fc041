"""Training G runs as one fused model (initlib.fused), each run still its own run in the store.

Runs may be fused when they differ only in ``FUSABLE_KEYS`` (sigma_w, seed, learning rate, L2,
decoupled decay): the same architecture, width, optimizer, batch size, horizon, schedule and
data. Each run keeps everything that makes it itself:

- its own initialization (built alone, then fused), its own data order and augmentation (seeded
  by its own seed, as in ``train.train``), its own lr, L2 and decay (tensors of the optimizer);
- its own per-epoch metrics (one eval pass of the fused model scores every run on the same
  images), kernel norms and clocks, its own best-validation weights and selected predictor,
  scored on the full test set by the run alone, unfused;
- its own ``runs/<hash>/``: config, metrics, attempts, checkpoint and summary, as a plain run.
  A run that diverges is finished (``diverged``) at that epoch; the others go on.

The checkpoint of a group is one slice per run (its unfused weights, its share of the
optimizer state, its rows), marked ``format: fused-slice``; a group resumes when every run's
slice is at the same epoch (``checkpoint_epoch``), and the sweep groups runs by that epoch too.
A plain ``train`` does not resume from a slice (it starts the run again).

Equal to the same runs trained alone within float tolerance (grouped and plain convolutions
round differently; training amplifies the last bits), not bitwise: tests/test_fused_train.py
checks it in float64 (largest relative difference of any per-epoch metric, measured: 1.4e-12
with SGD, 6.6e-9 with Muon, whose Newton-Schulz iteration amplifies rounding; tolerance 1e-7).
bf16 autocast is applied as in train.train.
"""
from __future__ import annotations

import copy
import functools
import json
from contextlib import nullcontext
import math
import time
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F

from . import store
from .clocks import cumulative_clocks
from .config import identity, resolve
from .data import augment_params, epoch_order, random_crop_flip
from .fused import FusedConv2d, FusedLinear, FusedOptimizer, fuse, fused_loss
from .metrics import summarize
from .models import build_model
from .optim import lr_factors
from .train import DTYPES, EVAL_BATCH, check_data_identity, get_data, pick_device, score_selected

FUSABLE_KEYS = ("sigma_w", "seed", "lr", "l2", "weight_decay")
SLICE = "fused-slice"


def group_key(cfg: dict) -> str:
    """What runs fused together must share: their identity without ``FUSABLE_KEYS``."""
    ident = {k: v for k, v in identity(cfg).items() if k not in FUSABLE_KEYS}
    return json.dumps(ident, sort_keys=True)


def checkpoint_epoch(rdir: Path) -> int | None:
    """The epoch of a run's fused-slice checkpoint (None: none, or a plain one). Read once per
    version of the file (the sweep asks again on every pass over its pending runs)."""
    try:
        st = (rdir / store.CHECKPOINT).stat()
    except FileNotFoundError:
        return None
    return _checkpoint_epoch(str(rdir), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _checkpoint_epoch(rdir: str, mtime_ns: int, size: int) -> int | None:
    ckpt = store.load_checkpoint(Path(rdir))
    if ckpt is None or ckpt.get("format") != SLICE:
        return None
    return len(ckpt["rows"]) - 1


def plan_groups(configs: list[dict], size: int, epoch_of=lambda cfg: None) -> list[list[dict]]:
    """Split ``configs`` into groups of at most ``size`` runs that can be fused (same
    ``group_key`` and the same checkpoint epoch), in the order the configs come."""
    by: dict[tuple, list[dict]] = {}
    for cfg in configs:
        by.setdefault((group_key(cfg), epoch_of(cfg)), []).append(cfg)
    return [g[i:i + size] for g in by.values() for i in range(0, len(g), size)]


# ---------------------------------------------------------------- run <-> group
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


def _opt_slice(opt: FusedOptimizer, g: int) -> list[dict]:
    params = list(opt.model.parameters())
    return [{k: (v[g].clone() if torch.is_tensor(v) and v.ndim else v)
             for k, v in opt.state.get(id(p), {}).items()} for p in params]


def _opt_restore(opt: FusedOptimizer, slices: list[list[dict]]) -> None:
    for i, p in enumerate(opt.model.parameters()):
        per_run = [s[i] for s in slices]
        if not per_run[0]:
            continue
        opt.state[id(p)] = {k: (torch.stack([r[k] for r in per_run]).to(p.device)
                                if torch.is_tensor(per_run[0][k]) else per_run[0][k]) for k in per_run[0]}


class _Holder:
    """Something with a state_dict(), for store.save_progress."""

    def __init__(self, state):
        self.state = state

    def state_dict(self):
        return self.state


# ---------------------------------------------------------------- metrics of a group
@torch.no_grad()
def evaluate_group(model, split, data, g: int, dtype, autocast=nullcontext) -> tuple[torch.Tensor, torch.Tensor]:
    """Per run (G,), the mean loss and the accuracy of the fused model on a split: every run
    sees the same images (the input repeated on the run axis of the channels)."""
    model.eval()
    loss_sum = torch.zeros(g, device=split.y.device, dtype=torch.float64)
    correct = torch.zeros(g, device=split.y.device, dtype=torch.long)
    for i in range(0, len(split), EVAL_BATCH):
        x, y = data.normalize(split.x[i:i + EVAL_BATCH], dtype), split.y[i:i + EVAL_BATCH]
        with autocast():
            out = model(x.repeat(1, g, 1, 1))
        out = out.to(dtype).reshape(len(y), g, -1)
        ys = y[:, None].expand(len(y), g)
        loss_sum += F.cross_entropy(out.transpose(1, 2), ys, reduction="none").sum(0).double()
        correct += (out.argmax(2) == ys).sum(0)
    return loss_sum / len(split), correct.double() / len(split)


@torch.no_grad()
def group_kernel_norms(model, g: int) -> dict[str, torch.Tensor]:
    """Per run (G,), the Frobenius norm of each kernel, by the plain model's layer names."""
    return {name: m.weight.detach().reshape(g, -1).norm(dim=1) for name, m in model.named_modules()
            if isinstance(m, (FusedConv2d, FusedLinear))}


def record_group_epoch(epoch, model, data, g, dtype, running, lrs, clocks, factor,
                       autocast=nullcontext) -> list[dict]:
    """The rows of one epoch, one per run, in train.record_epoch's columns (one host sync)."""
    tensors = {}
    for split in ("train", "val", "test"):
        tensors[f"{split}_loss"], tensors[f"{split}_acc"] = evaluate_group(model, getattr(data, split), data, g, dtype, autocast)
    tensors["train_loss_running"] = running.double()
    norms = {f"norm/{k}": v for k, v in group_kernel_norms(model, g).items()}
    values = {k: v.double().cpu().numpy() for k, v in {**tensors, **norms}.items()}
    rows = []
    for r in range(g):
        row = {"epoch": epoch, **{k: float(values[k][r]) for k in tensors}}
        row["weight_norm"] = math.sqrt(sum(float(values[k][r]) ** 2 for k in norms))
        row["lr"] = float(lrs[r] * factor)
        row.update({k: float(clocks[r][k][epoch - 1]) if epoch else 0.0 for k in clocks[r]})
        row.update({k: float(values[k][r]) for k in norms})
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the loop
def train_group(cfgs: list[dict], *, data_dir=None, run_dirs: list[Path] | None = None, on_epoch=None):
    """Train ``cfgs`` (fusable: one ``group_key``) as one fused model. Returns, per run, its
    (per-epoch DataFrame, summary), as ``train.train`` does for one run."""
    cfgs = [resolve(c) for c in cfgs]
    if len({group_key(c) for c in cfgs}) != 1:
        raise ValueError("these runs cannot be fused: they differ in more than " + ", ".join(FUSABLE_KEYS))
    c0, G = cfgs[0], len(cfgs)
    device = pick_device(c0["device"])
    check_data_identity(c0, data_dir)
    data = get_data(c0, device, data_dir)
    dtype = DTYPES[c0["precision"]]
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=c0["precision"] == "bf16")  # noqa: E731
    plain = [build_model(c["arch"], width=c["width"], sigma_w=c["sigma_w"], seed=c["seed"],
                         logit_scale=c["logit_scale"]) for c in cfgs]
    plain_states = [{k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype)
                     for k, v in m.state_dict().items()} for m in plain]
    model = fuse([copy.deepcopy(m) for m in plain]).to(device=device, dtype=dtype)
    opt = FusedOptimizer(c0["optimizer"], model, [c["lr"] for c in cfgs], [c["l2"] for c in cfgs],
                         [c["weight_decay"] if c0["optimizer"] in ("adamw", "muon") else 0.0 for c in cfgs],
                         momentum=c0["momentum"], muon_momentum=c0["muon_momentum"],
                         betas=(c0["beta1"], c0["beta2"]), eps=c0["eps"],
                         aux_lrs=[c["aux_lr"] if c["aux_lr"] is not None else c["lr"] * 0.015 for c in cfgs])
    n, b = len(data.train), c0["batch_size"]
    spe = math.ceil(n / b)
    factors = lr_factors(c0["schedule"], spe * c0["epochs"], round(c0["warmup_epochs"] * spe),
                         c0["step_milestones"], c0["step_gamma"])
    clocks = [cumulative_clocks(c["lr"] * factors, b, c["l2"], spe) for c in cfgs]
    lrs = [c["lr"] for c in cfgs]
    dirs = run_dirs or [None] * G

    # resume: every run's slice at one epoch, or a fresh start for all
    ckpts = [store.load_checkpoint(d) if d is not None else None for d in dirs]
    usable = [c is not None and c.get("format") == SLICE for c in ckpts]
    if any(usable) and not (all(usable) and len({len(c["rows"]) for c in ckpts}) == 1):
        raise ValueError("these runs' checkpoints are not one group's at one epoch: group them by "
                         "fused_train.checkpoint_epoch (the sweep does)")
    if all(usable) and ckpts:
        model.load_state_dict(fused_state_from([{k: v.to(device) for k, v in c["model"].items()} for c in ckpts],
                                               model.state_dict()))
        _opt_restore(opt, [c["optimizer"]["state"] for c in ckpts])
        rows = [c["rows"] for c in ckpts]
        status = [c["status"] for c in ckpts]
        best = [c["best"] for c in ckpts]
    else:
        first = record_group_epoch(0, model, data, G, dtype, torch.full((G,), math.nan, device=device),
                                   lrs, clocks, factors[0], autocast)
        rows = [[r] for r in first]
        status = ["running"] * G
        best = [{"epoch": None, "val_loss": math.inf, "state": None} for _ in range(G)]
    for c, d in zip(cfgs, dirs):
        if d is not None:
            store.write_config(d, c)
            store.log_attempt(d, from_epoch=len(rows[0]) - 1)

    results: list = [None] * G
    for epoch in range(len(rows[0]), c0["epochs"] + 1):
        t0 = time.perf_counter()
        live = [r for r in range(G) if status[r] == "running"]
        if not live:
            break
        running = train_group_epoch(model, opt, data, cfgs, epoch, factors[(epoch - 1) * spe:epoch * spe],
                                    dtype, autocast)
        new = record_group_epoch(epoch, model, data, G, dtype, running / n, lrs, clocks,
                                 factors[max(0, epoch * spe - 1)], autocast)
        wall = time.perf_counter() - t0  # the group's epoch, shared equally by its live runs
        fused_state = model.state_dict()
        for r in live:
            row = {**new[r], "wall_s": wall / len(live)}
            rows[r].append(row)
            if math.isfinite(row["val_loss"]) and row["val_loss"] < best[r]["val_loss"]:
                best[r] = {"epoch": epoch, "val_loss": row["val_loss"],
                           "state": unfused_state(fused_state, r, plain_states[r])}
            if not all(math.isfinite(row[k]) for k in ("train_loss_running", "train_loss", "val_loss")):
                status[r] = "diverged"
            elif epoch == c0["epochs"]:
                status[r] = "finished"
            done = status[r] != "running"
            selected = score_selected_alone(best[r], cfgs[r], data, dtype, device, autocast) if done else None
            if dirs[r] is not None and (done or epoch % c0["checkpoint_every"] == 0):
                summary = store.save_progress(
                    dirs[r], _Holder(unfused_state(fused_state, r, plain_states[r])),
                    _Holder({"format": SLICE, "state": _opt_slice(opt, r)}), rows[r], status[r],
                    keep_checkpoint=c0["keep_checkpoint"], extra_state={"best": best[r], "format": SLICE},
                    selected=selected)
            else:
                summary = {**summarize(pd.DataFrame(rows[r]), status[r]), **(selected or {})}
            if done:
                results[r] = (pd.DataFrame(rows[r]), summary)
        if on_epoch is not None:
            on_epoch(epoch, [rows[r][-1] for r in range(G)])
    for r in range(G):
        if results[r] is None:  # resumed from a finished slice (keep_checkpoint) or 0 epochs
            results[r] = (pd.DataFrame(rows[r]), summarize(pd.DataFrame(rows[r]), status[r]))
    return results


def train_group_epoch(model, opt, data, cfgs, epoch, factors_of_epoch, dtype, autocast=nullcontext) -> torch.Tensor:
    """One pass over the training split for every run, each in its own order (and its own
    augmentation): per step, the G minibatches side by side, the sum of the per-run losses,
    its gradient (each run's is its own), the per-run step. Returns per-run summed losses."""
    n, b, g = len(data.train), cfgs[0]["batch_size"], len(cfgs)
    device = data.train.y.device
    model.train()
    orders = [epoch_order(n, c["seed"], epoch, device) for c in cfgs]
    aug = [augment_params(n, c["seed"], epoch, device) if c["augment"] else None for c in cfgs]
    loss_sum = torch.zeros(g, device=device, dtype=dtype)
    for s, factor in enumerate(factors_of_epoch):
        xs, ys = [], []
        for order, a in zip(orders, aug):
            idx = order[s * b:(s + 1) * b]
            x = data.train.x[idx]
            if a is not None:
                x = random_crop_flip(x, a[0][idx], a[1][idx])
            xs.append(data.normalize(x, dtype))
            ys.append(data.train.y[idx])
        x = torch.stack(xs, dim=1).reshape(len(ys[0]), -1, *xs[0].shape[2:])
        opt.factor = float(factor)
        with autocast():
            logits = model(x)
        per_run = fused_loss(logits.to(dtype), torch.stack(ys, dim=1), reduction="none")
        opt.zero_grad()
        per_run.sum().backward()
        opt.step()
        loss_sum += per_run.detach() * len(ys[0])
    return loss_sum


def score_selected_alone(best: dict, cfg: dict, data, dtype, device, autocast=nullcontext) -> dict:
    """The selected predictor of one run, unfused (a plain model of the run's architecture),
    scored on every test image by train.score_selected."""
    plain = build_model(cfg["arch"], width=cfg["width"], logit_scale=cfg["logit_scale"]).to(device=device, dtype=dtype)
    return score_selected(best, plain, data, autocast, dtype)
