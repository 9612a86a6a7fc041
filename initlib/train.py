"""The training loop: one run of one config, recording what the paper measures per epoch.

Per epoch it records train loss and accuracy (an eval-mode pass over the whole training split,
so that ``tau_interp`` is honest), validation and test loss and accuracy, the Frobenius norm
of all kernels together (``weight_norm``) and per layer (``norm/<layer>``), the learning rate,
and the cumulative clocks ``T_SGD``, ``T_L2``, ``T_adapt``. Epoch 0 is the initialization.

GPU-first, CPU-correct: data and augmentation stay on the device, metrics are accumulated on
the device and read once per epoch (no per-step host sync), channels_last, optional bf16
autocast (``precision: bf16``), float64 (``precision: fp64``: for numerics checks, where
rounding must not hide a change) and ``torch.compile`` (``compile: true``). A non-finite loss
ends the run as ``diverged`` (recorded, not raised). With a ``run_dir``, a checkpoint is
written atomically every ``checkpoint_every`` epochs and a killed run resumes from it to the
same metrics it would have given uninterrupted (shuffling and augmentation are seeded per
epoch, so nothing else needs restoring).
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from . import store
from .clocks import cumulative_clocks
from .config import resolve
from .data import (DataError, augment_params, epoch_order, fingerprint, load_cifar10,
                   random_crop_flip, resolve_data_dir)
from .metrics import summarize
from .models import build_model, kernels
from .optim import add_l2_, build_optimizer, lr_factors, set_lr_factor

EVAL_BATCH = 1000
_DATA_CACHE: dict = {}


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {name!r} asked for, but no CUDA device is visible")
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


DTYPES = {"fp32": torch.float32, "bf16": torch.float32, "fp64": torch.float64}


@torch.no_grad()
def evaluate(model, split, data, autocast, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean loss, accuracy) of ``model`` in eval mode over a split, as device tensors."""
    model.eval()
    loss_sum = torch.zeros((), device=split.y.device, dtype=torch.float64)
    correct = torch.zeros((), device=split.y.device, dtype=torch.long)
    for i in range(0, len(split), EVAL_BATCH):
        x, y = data.normalize(split.x[i:i + EVAL_BATCH], dtype), split.y[i:i + EVAL_BATCH]
        with autocast():
            out = model(x)
        loss_sum += F.cross_entropy(out.to(dtype), y, reduction="sum").double()
        correct += (out.argmax(1) == y).sum()
    return loss_sum / len(split), correct.double() / len(split)


@torch.no_grad()
def correct_predictions(model, split, data, autocast, dtype=torch.float32) -> torch.Tensor:
    """Per image of ``split``, whether ``model`` (eval mode) classifies it correctly."""
    model.eval()
    out = []
    for i in range(0, len(split), EVAL_BATCH):
        with autocast():
            logits = model(data.normalize(split.x[i:i + EVAL_BATCH], dtype))
        out.append(logits.argmax(1) == split.y[i:i + EVAL_BATCH])
    return torch.cat(out)


def pack_correct(correct: np.ndarray) -> str:
    """A boolean vector as base64 of its packed bits (10,000 test images: 1,668 characters)."""
    import base64
    return base64.b64encode(np.packbits(np.asarray(correct, dtype=bool)).tobytes()).decode()


def unpack_correct(text: str, n: int) -> np.ndarray:
    import base64
    return np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))[:n].astype(bool)


@torch.no_grad()
def kernel_norms(model) -> dict[str, torch.Tensor]:
    return {name: w.detach().norm() for name, w in kernels(model).items()}


def _maybe_compile(model, enabled: bool, device):
    if not enabled:
        return model
    state = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        compiled = torch.compile(model)
        compiled(torch.zeros(2, 3, 32, 32, device=device).contiguous(memory_format=torch.channels_last))
        model.load_state_dict(state)  # the probe must not move BatchNorm's running statistics
        return compiled
    except Exception as e:  # noqa: BLE001 - any backend failure falls back to eager
        warnings.warn(f"torch.compile failed ({type(e).__name__}: {e}); training eagerly instead")
        model.load_state_dict(state)
        return model


def train_epoch(fmodel, opt, data, cfg, epoch: int, lr_factors_of_epoch, autocast,
                dtype=torch.float32) -> torch.Tensor:
    """One pass over the shuffled (and, if asked, augmented) training split; returns the
    summed minibatch loss as a device tensor (no host sync). Every term of the update is
    here: the minibatch loss, its gradient, explicit L2 (lambda * w, coupled), the step."""
    n, b = len(data.train), cfg["batch_size"]
    device = data.train.y.device
    params = [p for p in fmodel.parameters() if p.requires_grad]
    fmodel.train()
    order = epoch_order(n, cfg["seed"], epoch, device)
    if cfg["augment"]:
        offsets, flips = augment_params(n, cfg["seed"], epoch, device)
    loss_sum = torch.zeros((), device=device, dtype=dtype)
    for s, factor in enumerate(lr_factors_of_epoch):
        idx = order[s * b:(s + 1) * b]
        x = data.train.x[idx]
        if cfg["augment"]:
            x = random_crop_flip(x, offsets[idx], flips[idx])
        set_lr_factor(opt, factor)
        with autocast():
            loss = F.cross_entropy(fmodel(data.normalize(x, dtype)).to(dtype), data.train.y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        add_l2_(params, cfg["l2"])
        opt.step()
        loss_sum += loss.detach() * len(idx)
    return loss_sum


def record_epoch(epoch: int, fmodel, model, data, autocast, dtype, train_loss_running,
                 lr: float, clocks_at_epoch: dict) -> dict:
    """The metrics of one epoch (epoch 0: the initialization), with one host sync."""
    metrics = {}
    for split in ("train", "val", "test"):
        metrics[f"{split}_loss"], metrics[f"{split}_acc"] = evaluate(fmodel, getattr(data, split), data,
                                                                      autocast, dtype)
    metrics["train_loss_running"] = train_loss_running
    norms = {f"norm/{name}": v for name, v in kernel_norms(model).items()}
    tensors = {**metrics, **norms}
    values = dict(zip(tensors, torch.stack([t.double() for t in tensors.values()]).tolist()))
    row = {"epoch": epoch, **{k: values[k] for k in metrics}}
    row["weight_norm"] = math.sqrt(sum(values[k] ** 2 for k in norms))
    row["lr"] = float(lr)
    row.update({k: float(v) for k, v in clocks_at_epoch.items()})
    row.update({k: values[k] for k in norms})
    return row


def check_data_identity(cfg: dict, data_dir=None) -> None:
    """Refuse to train a run on data other than the data in its identity."""
    found = fingerprint(data_dir)
    if cfg["data"] != found:
        raise DataError(f"{resolve_data_dir(data_dir)}: its data has fingerprint {found}, but this run "
                        f"is the run on data {cfg['data']}: bind configs to the data they train on "
                        f"(initlib.sweep.bind_to_data)")


def train(cfg: dict, *, data_dir=None, run_dir: Path | None = None, on_epoch=None):
    """Train one run. Returns (per-epoch DataFrame, summary dict).

    ``on_epoch(epoch, row)`` is called after each epoch is recorded (and checkpointed);
    tests use it to simulate a kill. With a ``run_dir``, each (re)start is logged to its
    attempts file with the epoch it starts from.
    """
    cfg = resolve(cfg)
    device = pick_device(cfg["device"])
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    check_data_identity(cfg, data_dir)
    data = get_data(cfg, device, data_dir)
    dtype = DTYPES[cfg["precision"]]
    model = build_model(cfg["arch"], width=cfg["width"], sigma_w=cfg["sigma_w"], seed=cfg["seed"],
                        logit_scale=cfg["logit_scale"])
    model = model.to(device=device, dtype=dtype).to(memory_format=torch.channels_last)
    opt = build_optimizer(cfg["optimizer"], model, **cfg)
    n, b = len(data.train), cfg["batch_size"]
    steps_per_epoch = math.ceil(n / b)
    factors = lr_factors(cfg["schedule"], steps_per_epoch * cfg["epochs"],
                         round(cfg["warmup_epochs"] * steps_per_epoch),
                         cfg["step_milestones"], cfg["step_gamma"])
    clocks = cumulative_clocks(cfg["lr"] * factors, b, cfg["l2"], steps_per_epoch)
    use_bf16 = cfg["precision"] == "bf16"
    autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)  # noqa: E731
    fmodel = _maybe_compile(model, cfg["compile"], device)

    def record(epoch, train_loss_running, t0):
        row = record_epoch(epoch, fmodel, model, data, autocast, dtype, train_loss_running,
                           cfg["lr"] * factors[max(0, epoch * steps_per_epoch - 1)],
                           {k: clocks[k][epoch - 1] if epoch else 0.0 for k in clocks})
        row["wall_s"] = time.perf_counter() - t0
        return row

    if run_dir is not None:
        store.write_config(run_dir, cfg)
    # The selected predictor: the weights of the epoch with the best validation loss (the first
    # on ties, epoch 0 never), kept on the device and scored once, at the end, on every test image.
    best = {"epoch": None, "val_loss": math.inf, "state": None}

    def keep_if_best(row):
        if math.isfinite(row["val_loss"]) and row["val_loss"] < best["val_loss"]:
            best.update(epoch=row["epoch"], val_loss=row["val_loss"],
                        state={k: v.detach().clone() for k, v in model.state_dict().items()})

    ckpt = store.load_checkpoint(run_dir) if run_dir is not None else None
    if ckpt is not None and ("best" not in ckpt or ckpt.get("format") == "fused-slice"):
        ckpt = None  # from before the selected predictor was kept, or a fused group's: start again
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        rows, status = ckpt["rows"], ckpt["status"]
        best.update(ckpt["best"])
    else:
        rows, status = [record(0, torch.tensor(math.nan, device=device), time.perf_counter())], "running"
    if run_dir is not None:
        store.log_attempt(run_dir, from_epoch=len(rows) - 1)

    summary = None
    for epoch in range(len(rows), cfg["epochs"] + 1):
        t0 = time.perf_counter()
        epoch_factors = factors[(epoch - 1) * steps_per_epoch:epoch * steps_per_epoch]
        loss_sum = train_epoch(fmodel, opt, data, cfg, epoch, epoch_factors, autocast, dtype)
        row = record(epoch, loss_sum / n, t0)
        rows.append(row)
        keep_if_best(row)
        if not all(math.isfinite(row[k]) for k in ("train_loss_running", "train_loss", "val_loss")):
            status = "diverged"
        elif epoch == cfg["epochs"]:
            status = "finished"
        selected = score_selected(best, model, data, autocast, dtype) if status != "running" else None
        if run_dir is not None and (status != "running" or epoch % cfg["checkpoint_every"] == 0):
            summary = store.save_progress(run_dir, model, opt, rows, status,
                                          keep_checkpoint=cfg["keep_checkpoint"],
                                          extra_state={"best": best}, selected=selected)
        if on_epoch is not None:
            on_epoch(epoch, row)
        if status != "running":
            break
    epochs = pd.DataFrame(rows)
    if summary is None:
        summary = {**summarize(epochs, status), **(selected or {})}
    return epochs, summary


def score_selected(best: dict, model, data, autocast, dtype) -> dict:
    """The selected predictor (best validation loss) scored on every test image: its accuracy
    and, per image, whether it is right (for intervals that resample the test images)."""
    if best["state"] is None:
        return {"selected_test_n": None, "selected_test_acc": None, "selected_test_correct": None}
    selected = copy.deepcopy(model)
    selected.load_state_dict(best["state"])
    correct = correct_predictions(selected, data.full_test, data, autocast, dtype).cpu().numpy()
    return {"selected_test_n": int(len(correct)), "selected_test_acc": float(correct.mean()),
            "selected_test_correct": pack_correct(correct)}
