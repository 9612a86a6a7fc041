"""The training loop: G runs trained side by side as one fused model; a single run is a group of
one (``train(cfg)`` is ``train_group([cfg])``). One definition of an epoch, a step, the per-epoch
record, selection, divergence and checkpointing, for every G.

Per epoch and per run it records train loss and accuracy (an eval-mode pass over the whole
training split, so that ``tau_interp`` is honest), validation and test loss and accuracy, the
Frobenius norm of all kernels together (``weight_norm``) and per layer (``norm/<layer>``), the
learning rate, and the cumulative clocks ``T_SGD``, ``T_L2``, ``T_adapt``. Epoch 0 is the
initialization. Every eval-mode number is read with the BatchNorm statistics of the run's key
``bn_stats``: ``precise`` recomputes them for the weights being evaluated before each evaluation
(initlib.bn_stats), ``running`` uses the running averages as training left them.

Runs fused together (initlib.fused: same architecture, optimizer, batch, horizon, data; own
sigma_w, seed, lr, L2, decay) each keep their own initialization, data order and augmentation
(seeded by their own seed), hyperparameters, metrics, selected predictor and ``runs/<hash>/``;
a run that diverges is finished (``diverged``) at that epoch and the others go on. Equal to the
runs trained alone within float tolerance (tests/test_fused_train.py, in float64).

GPU-first, CPU-correct: data and augmentation stay on the device, metrics are accumulated on
the device and read once per epoch, optional bf16 autocast (``precision: bf16``), float64
(``precision: fp64``: numerics checks) and ``torch.compile`` (``compile: true``). With run
dirs, a checkpoint (one slice per run: its unfused weights, optimizer state, rows and selected
weights) is written atomically every ``checkpoint_every`` epochs, and a killed group resumes to
the same metrics it would have given uninterrupted (shuffling and augmentation are seeded per
epoch, so nothing else needs restoring).
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from . import store
from .bn_stats import PRECISE_BN_BATCH, precise_bn_index, recompute_bn_stats_
from .clocks import cumulative_clocks, steps_per_epoch
from .config import ConfigError, aux_lr, decoupled_decay, resolve
from .data import DataError, augment_params, epoch_order, fingerprint, load_cifar10, random_crop_flip, resolve_data_dir
from .fused import (fuse, fused_input, fused_loss, fused_state_from, group_key, param_roles,
                    run_kernel_norms, unfused_state)
from .metrics import summarize
from .models import build_model
from .optim import RunsOptimizer, add_l2_, lr_factors

# Images per eval-mode forward pass. 250 on CPU (oneDNN, one thread) takes 0.64x the time of
# 1,000 (caches; bench/epoch_cost.md); the numbers are per image, so the batch never changes them.
EVAL_BATCH = 250
DTYPES = {"fp32": torch.float32, "bf16": torch.float32, "fp64": torch.float64}
_DATA_CACHE: dict = {}


def pick_device(name: str = "auto") -> torch.device:
    """The torch device of a run's ``device`` key; a CUDA device that is not there is an error
    (raised before anything is written)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"key 'device': {name!r} asked for, but no CUDA device is visible "
                              f"(use cpu or auto)")
        index = int(name.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise ConfigError(f"key 'device': {name!r} asked for, but only "
                              f"{torch.cuda.device_count()} CUDA device(s) are visible")
    return torch.device(name)


def get_data(cfg, device, data_dir=None):
    key = (str(resolve_data_dir(data_dir).resolve()), cfg["n_train"], cfg["n_val"], cfg["n_test"],
           cfg["n_selected_test"], cfg["split_seed"], str(device))
    if key not in _DATA_CACHE:
        _DATA_CACHE.clear()  # one data set on the device at a time
        _DATA_CACHE[key] = load_cifar10(data_dir, n_train=cfg["n_train"], n_val=cfg["n_val"],
                                        n_test=cfg["n_test"], split_seed=cfg["split_seed"],
                                        device=device, n_selected_test=cfg["n_selected_test"])
    return _DATA_CACHE[key]


def check_data_identity(cfg: dict, data_dir=None) -> None:
    """Refuse to train a run on data other than the data in its identity."""
    found = fingerprint(data_dir)
    if cfg["data"] != found:
        raise DataError(f"{resolve_data_dir(data_dir)}: its data has fingerprint {found}, but this run "
                        f"is the run on data {cfg['data']}: bind configs to the data they train on "
                        f"(initlib.sweep.bind_to_data)")


# ---------------------------------------------------------------- the group, fixed once
@dataclass
class Group:
    """Everything a group's loop reads, fixed before its first step."""
    cfgs: list
    device: torch.device
    data: object
    dtype: torch.dtype
    model: torch.nn.Module          # the fused model (G runs; G = 1 is a plain one in effect)
    net: torch.nn.Module            # what the forward passes call: the model, or it compiled
    plain_states: list              # each run's plain state dict (shapes for slicing)
    opt: RunsOptimizer
    l2s: torch.Tensor               # per-run coupled L2
    factors: np.ndarray             # per-step lr factors of the schedule
    steps_per_epoch: int
    clocks: list                    # per run: {clock: value at the end of each epoch}

    @property
    def runs(self) -> int:
        return len(self.cfgs)

    def autocast(self):
        bf16 = self.cfgs[0]["precision"] == "bf16"
        return torch.autocast(self.device.type, dtype=torch.bfloat16) if bf16 else nullcontext()

    def lr(self, r: int, epoch: int) -> float:
        """Run r's learning rate at the last step of ``epoch`` (epoch 0: the first step's)."""
        return float(self.cfgs[r]["lr"] * self.factors[max(0, epoch * self.steps_per_epoch - 1)])


def build_group(cfgs: list[dict], data_dir=None) -> Group:
    """The group of ``cfgs`` on the data they are bound to (checked against their identity)."""
    device = pick_device(cfgs[0]["device"])
    check_data_identity(cfgs[0], data_dir)
    return assemble_group(cfgs, get_data(cfgs[0], device, data_dir), device)


def assemble_group(cfgs: list[dict], data, device: torch.device) -> Group:
    """The fused model, optimizer, schedule and clocks of ``cfgs`` on ``data`` (any
    initlib.data.CIFAR10Data: plan.measure_images_per_s times the step on random images)."""
    c0 = cfgs[0]
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    dtype = DTYPES[c0["precision"]]
    plain = [build_model(c["arch"], width=c["width"], sigma_w=c["sigma_w"], seed=c["seed"],
                         logit_scale=c["logit_scale"]) for c in cfgs]
    plain_states = [{k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype)
                     for k, v in m.state_dict().items()} for m in plain]
    model = fuse(plain).to(device=device, dtype=dtype)
    net = _maybe_compile(model, c0["compile"], device, len(cfgs))
    opt = RunsOptimizer(c0["optimizer"], param_roles(model, c0["optimizer"]), len(cfgs),
                        [c["lr"] for c in cfgs], [decoupled_decay(c) for c in cfgs],
                        [aux_lr(c) for c in cfgs], momentum=c0["momentum"],
                        muon_momentum=c0["muon_momentum"], betas=(c0["beta1"], c0["beta2"]), eps=c0["eps"])
    spe = steps_per_epoch(len(data.train), c0["batch_size"], c0["last_batch"])
    factors = lr_factors(c0["schedule"], spe * c0["epochs"], round(c0["warmup_epochs"] * spe),
                         c0["step_milestones"], c0["step_gamma"])
    clocks = [cumulative_clocks(c["lr"] * factors, c0["batch_size"], c["l2"], spe) for c in cfgs]
    l2s = torch.tensor([float(c["l2"]) for c in cfgs], dtype=torch.float64)
    return Group(cfgs, device, data, dtype, model, net, plain_states, opt, l2s, factors, spe, clocks)


def _maybe_compile(model, enabled: bool, device, runs: int):
    if not enabled:
        return model
    state = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        compiled = torch.compile(model)
        compiled(torch.zeros(2, 3 * runs, 32, 32, device=device).contiguous(memory_format=torch.channels_last))
        model.load_state_dict(state)  # the probe must not move BatchNorm's running statistics
        return compiled
    except Exception as e:  # noqa: BLE001 - any backend failure falls back to eager
        warnings.warn(f"torch.compile failed ({type(e).__name__}: {e}); training eagerly instead")
        model.load_state_dict(state)
        return model


# ---------------------------------------------------------------- one epoch
def train_epoch(grp: Group, epoch: int) -> torch.Tensor:
    """One pass over the training split for every run, each in its own order (and its own
    augmentation), in ``grp.steps_per_epoch`` steps (with ``last_batch: drop`` the n mod b
    images last in the order sit this epoch out); returns the per-run mean minibatch loss per
    image trained on (G,) as a device tensor (no host sync). Every term of the update is here:
    the per-run minibatch losses, the gradient of their sum (each run's is its own), explicit L2
    (lambda * w, coupled, per run), the step."""
    data, b = grp.data, grp.cfgs[0]["batch_size"]
    n, opt = len(data.train), grp.opt
    params = [p for p in grp.model.parameters() if p.requires_grad]
    grp.model.train()
    orders = [epoch_order(n, c["seed"], epoch, grp.device) for c in grp.cfgs]
    aug = [augment_params(n, c["seed"], epoch, grp.device) if c["augment"] else None for c in grp.cfgs]
    loss_sum = torch.zeros(grp.runs, device=grp.device, dtype=grp.dtype)
    seen = 0
    for s, factor in enumerate(grp.factors[(epoch - 1) * grp.steps_per_epoch:epoch * grp.steps_per_epoch]):
        xs, ys = [], []
        for order, a in zip(orders, aug):
            idx = order[s * b:(s + 1) * b]
            x = data.train.x[idx] if a is None else random_crop_flip(data.train.x[idx], a[0][idx], a[1][idx])
            xs.append(data.normalize(x, grp.dtype))
            ys.append(data.train.y[idx])
        opt.set_lr_factor(factor)
        with grp.autocast():
            logits = grp.net(fused_input(xs))
        per_run = fused_loss(logits.to(grp.dtype), torch.stack(ys, dim=1), reduction="none")
        opt.zero_grad(set_to_none=True)
        per_run.sum().backward()
        add_l2_(params, grp.l2s)
        opt.step()
        loss_sum += per_run.detach() * len(ys[0])
        seen += len(ys[0])
    return loss_sum / seen


@torch.no_grad()
def evaluate(model, split, data, runs: int, dtype, autocast=nullcontext) -> tuple[torch.Tensor, torch.Tensor]:
    """Per run (G,), the mean loss and the accuracy of the model in eval mode on a split: every
    run sees the same images (repeated on the run axis of the channels)."""
    model.eval()
    loss_sum = torch.zeros(runs, device=split.y.device, dtype=torch.float64)
    correct = torch.zeros(runs, device=split.y.device, dtype=torch.long)
    for i in range(0, len(split), EVAL_BATCH):
        x, y = data.normalize(split.x[i:i + EVAL_BATCH], dtype), split.y[i:i + EVAL_BATCH]
        with autocast():
            out = model(fused_input([x] * runs))
        out = out.to(dtype).reshape(len(y), runs, -1)
        ys = y[:, None].expand(len(y), runs)
        loss_sum += F.cross_entropy(out.transpose(1, 2), ys, reduction="none").sum(0).double()
        correct += (out.argmax(2) == ys).sum(0)
    return loss_sum / len(split), correct.double() / len(split)


def prepare_eval_(grp: Group) -> None:
    """BatchNorm statistics for the weights about to be evaluated (``bn_stats: precise``):
    recomputed from the fixed training images of initlib.bn_stats, augmentation off. With
    ``running`` nothing changes."""
    if grp.cfgs[0]["bn_stats"] != "precise":
        return
    x_all, idx = grp.data.train.x, precise_bn_index(len(grp.data.train)).to(grp.device)

    def batches():
        for i in range(0, len(idx), PRECISE_BN_BATCH):
            x = grp.data.normalize(x_all[idx[i:i + PRECISE_BN_BATCH]], grp.dtype)
            yield fused_input([x] * grp.runs)
    with grp.autocast():
        recompute_bn_stats_(grp.model, batches())


def record_epoch(grp: Group, epoch: int, running: torch.Tensor) -> list[dict]:
    """The rows of one epoch, one per run (one host sync). ``running``: the per-run mean
    train-mode minibatch loss of the epoch (NaN at epoch 0)."""
    prepare_eval_(grp)
    tensors = {}
    for split in ("train", "val", "test"):
        tensors[f"{split}_loss"], tensors[f"{split}_acc"] = evaluate(
            grp.net, getattr(grp.data, split), grp.data, grp.runs, grp.dtype, grp.autocast)
    tensors["train_loss_running"] = running.double()
    norms = {f"norm/{k}": v for k, v in run_kernel_norms(grp.model).items()}
    values = {k: v.double().cpu().numpy() for k, v in {**tensors, **norms}.items()}
    rows = []
    for r in range(grp.runs):
        row = {"epoch": epoch, **{k: float(values[k][r]) for k in tensors}}
        row["weight_norm"] = math.sqrt(sum(float(values[k][r]) ** 2 for k in norms))
        row["lr"] = grp.lr(r, epoch)
        row.update({k: float(v[epoch - 1]) if epoch else 0.0 for k, v in grp.clocks[r].items()})
        row.update({k: float(values[k][r]) for k in norms})
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the selected predictor
@torch.no_grad()
def correct_predictions(model, split, data, autocast=nullcontext, dtype=torch.float32) -> torch.Tensor:
    """Per image of ``split``, whether a plain ``model`` (eval mode) classifies it correctly."""
    model.eval()
    out = []
    for i in range(0, len(split), EVAL_BATCH):
        with autocast():
            logits = model(data.normalize(split.x[i:i + EVAL_BATCH], dtype))
        out.append(logits.argmax(1) == split.y[i:i + EVAL_BATCH])
    return torch.cat(out)


def score_on_test(grp: Group, r: int, state: dict | None, name: str) -> dict:
    """A predictor of run r (a plain model with ``state``: weights and BatchNorm statistics)
    scored on every test image: ``<name>_test_n``, ``_acc`` and, per image, whether it is right
    (``_correct``, packed; for intervals that resample the test images)."""
    if state is None:
        return {f"{name}_test_n": None, f"{name}_test_acc": None, f"{name}_test_correct": None}
    c = grp.cfgs[r]
    plain = build_model(c["arch"], width=c["width"], logit_scale=c["logit_scale"])
    plain = plain.to(device=grp.device, dtype=grp.dtype).to(memory_format=torch.channels_last)
    plain.load_state_dict(state)
    correct = correct_predictions(plain, grp.data.full_test, grp.data, grp.autocast, grp.dtype).cpu().numpy()
    return {f"{name}_test_n": int(len(correct)), f"{name}_test_acc": float(correct.mean()),
            f"{name}_test_correct": store.pack_correct(correct)}


# ---------------------------------------------------------------- the loop
CHECKPOINT_FORMAT = "run-slice-2"  # one run's share of a group's state (any G)


@dataclass
class RunState:
    """One run's progress in its group: its rows, status and selected (best-validation) weights."""
    rows: list
    status: str = "running"
    best: dict | None = None

    def __post_init__(self):
        self.best = self.best or {"epoch": None, "val_loss": math.inf, "state": None}


def checkpoint_epoch(rdir: Path) -> int | None:
    """The epoch of a run's checkpoint (None: none, or not one this loop can resume); the
    sweep groups runs to fuse by it."""
    return store.checkpoint_epoch(rdir, CHECKPOINT_FORMAT)


def start_or_resume(grp: Group, dirs: list) -> list[RunState]:
    """Every run's slice at one epoch (resume), or a fresh start for all (epoch 0 recorded)."""
    ckpts = [store.load_checkpoint(d) if d is not None else None for d in dirs]
    usable = [c is not None and c.get("format") == CHECKPOINT_FORMAT for c in ckpts]
    if any(usable) and not (all(usable) and len({len(c["rows"]) for c in ckpts}) == 1):
        raise ValueError("these runs' checkpoints are not one group's at one epoch: group them by "
                         "train.checkpoint_epoch (the sweep does)")
    if any(usable):
        states = [{k: v.to(grp.device) for k, v in c["model"].items()} for c in ckpts]
        grp.model.load_state_dict(fused_state_from(states, grp.model.state_dict()))
        grp.opt.load_run_states([c["optimizer"] for c in ckpts])
        return [RunState(c["rows"], c["status"], c["best"]) for c in ckpts]
    first = record_epoch(grp, 0, torch.full((grp.runs,), math.nan, device=grp.device))
    return [RunState([row]) for row in first]


def end_epoch(grp: Group, r: int, run: RunState, row: dict, fused_state: dict, rdir) -> tuple | None:
    """Run r's bookkeeping after an epoch: keep the row, the selected weights (the epoch with the
    best validation loss; the first on ties, epoch 0 never), the status (diverged on a
    non-finite loss), the checkpoint or, once done, the summary with the selected predictor
    and the end-of-training predictor scored on every test image. Returns (per-epoch DataFrame,
    summary) once the run is done."""
    cfg = grp.cfgs[r]
    run.rows.append(row)
    state = unfused_state(fused_state, r, grp.plain_states[r])
    if math.isfinite(row["val_loss"]) and row["val_loss"] < run.best["val_loss"]:
        run.best = {"epoch": row["epoch"], "val_loss": row["val_loss"], "state": state}
    if not all(math.isfinite(row[k]) for k in ("train_loss_running", "train_loss", "val_loss")):
        run.status = "diverged"
    elif row["epoch"] == cfg["epochs"]:
        run.status = "finished"
    done = run.status != "running"
    # the paper's predictor (best validation loss) and the end-of-training one, on every test image
    selected = ({**score_on_test(grp, r, run.best["state"], "selected"), **score_on_test(grp, r, state, "end")}
                if done else None)
    summary = None
    if rdir is not None and (done or row["epoch"] % cfg["checkpoint_every"] == 0):
        checkpoint = {"format": CHECKPOINT_FORMAT, "model": state, "optimizer": grp.opt.run_state(r),
                      "rows": run.rows, "status": run.status, "best": run.best}
        summary = store.save_progress(rdir, checkpoint, run.rows, run.status, cfg["keep_checkpoint"], selected)
    if not done:
        return None
    epochs = pd.DataFrame(run.rows)
    return epochs, summary or {**summarize(epochs, run.status), **selected}


def train_group(cfgs: list[dict], *, data_dir=None, run_dirs: list[Path] | None = None, on_epoch=None):
    """Train ``cfgs`` (one ``fused.group_key``; one config is a group of one) side by side.
    Returns, per run, its (per-epoch DataFrame, summary). ``on_epoch(epoch, rows)`` is called
    after each epoch is recorded and checkpointed (tests use it to simulate a kill); with run
    dirs, each (re)start is logged to the run's attempts file with the epoch it starts from."""
    cfgs = [resolve(c) for c in cfgs]
    if len({group_key(c) for c in cfgs}) != 1:
        raise ValueError("these runs cannot be trained as one group: they differ in more than "
                         "initlib.fused.FUSABLE_KEYS")
    grp = build_group(cfgs, data_dir)
    dirs = list(run_dirs) if run_dirs is not None else [None] * grp.runs
    runs = start_or_resume(grp, dirs)
    for c, d, run in zip(cfgs, dirs, runs):
        if d is not None:
            store.write_config(d, c)
            store.log_attempt(d, from_epoch=len(run.rows) - 1)
    results: list = [None] * grp.runs
    for epoch in range(len(runs[0].rows), cfgs[0]["epochs"] + 1):
        live = [r for r in range(grp.runs) if runs[r].status == "running"]
        if not live:
            break
        t0 = time.perf_counter()
        rows = record_epoch(grp, epoch, train_epoch(grp, epoch))
        wall = time.perf_counter() - t0  # the group's epoch, shared equally by its live runs
        fused_state = grp.model.state_dict()
        for r in live:
            results[r] = end_epoch(grp, r, runs[r], {**rows[r], "wall_s": wall / len(live)}, fused_state, dirs[r])
        if on_epoch is not None:
            on_epoch(epoch, [run.rows[-1] for run in runs])
    for r, run in enumerate(runs):
        if results[r] is None:  # resumed from a finished slice (keep_checkpoint), or 0 epochs
            results[r] = (pd.DataFrame(run.rows), summarize(pd.DataFrame(run.rows), run.status))
    return results


def train(cfg: dict, *, data_dir=None, run_dir: Path | None = None, on_epoch=None):
    """Train one run: a group of one. Returns (per-epoch DataFrame, summary dict).
    ``on_epoch(epoch, row)`` is called after each epoch is recorded (and checkpointed)."""
    per_run = None if on_epoch is None else (lambda epoch, rows: on_epoch(epoch, rows[0]))
    return train_group([cfg], data_dir=data_dir, run_dirs=None if run_dir is None else [run_dir],
                       on_epoch=per_run)[0]
