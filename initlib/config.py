"""Run configuration: every hyperparameter of one training run, in one place.

A run is fully described by a flat dict of the keys in ``RUN_DEFAULTS``. Keys in
``EXECUTION_KEYS`` say *how* a run is executed (device, compile, checkpoint cadence); they
are recorded in ``config.json`` but are not part of the run's identity (its hash), because
they do not change what is being measured. Everything else, including ``precision`` (bf16
autocast changes the numbers), is hashed.

Validation happens before any training: an unknown key, optimizer or architecture, or a
non-positive ``sigma_w`` raises :class:`ConfigError` naming the key and the file.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Mapping

from .data import CIFAR10_FINGERPRINT

ARCHS = ("resnet9", "resnet20", "resnet56", "resnet110")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "muon")
# The optimizer families, stated once. Adaptive: run on the paper's T_adapt = sum eta.
ADAPTIVE_OPTIMIZERS = ("adam", "adamw", "muon")
# Those that take decoupled weight_decay (w <- w (1 - lr wd)); every optimizer takes coupled l2.
DECOUPLED_DECAY_OPTIMIZERS = ("adamw", "muon")
# Muon's AdamW (stem, head, BatchNorm, biases) runs at this fraction of Muon's lr unless aux_lr is
# given: the reference pairs Muon lr 0.02 with AdamW lr 3e-4.
MUON_AUX_LR_RATIO = 0.015
BN_STATS = ("running", "precise")
SCHEDULES = ("constant", "cosine", "step")
LAST_BATCH = ("keep", "drop")
PRECISIONS = ("fp32", "bf16", "fp64")

# The defaults are the paper's main setting where the paper states it (ResNet-9, b=128,
# 40k/10k split, 300 epochs, constant low-LR SGD at eta=1e-3, see ../shared/PAPER.md) and our
# documented choice elsewhere.
RUN_DEFAULTS: dict[str, Any] = {
    # model
    "arch": "resnet9",
    "width": 1.0,            # channel multiplier (ResNet-9: 64/128/256/512 x width)
    "sigma_w": 1.0,          # kernels ~ N(0, sigma_w^2 / fan_in)
    # ResNet-9's logits are multiplied by this (Myrtle: 0.125). 1.0 = no scale, chosen by the
    # pilot in bench/output_scale_pilot.md (see initlib.models.RESNET9_LOGIT_SCALE).
    "logit_scale": 1.0,
    # optimizer
    "optimizer": "sgd",
    "lr": 1e-3,              # eta; for muon, the lr of the hidden (Muon) kernels
    "aux_lr": None,          # muon only: AdamW lr for stem/head/BN/bias (None: 3e-4 x lr/0.02)
    "momentum": 0.9,         # 'momentum' optimizer (heavy ball); our choice, the paper is silent
    "muon_momentum": 0.95,   # reference Muon
    "beta1": 0.9,            # adam/adamw/muon-aux
    "beta2": 0.999,
    "eps": 1e-8,
    "l2": 0.0,               # explicit, coupled L2: lambda * w added to every gradient
    "weight_decay": 0.0,     # decoupled decay (adamw, muon); separate from l2
    # schedule
    "schedule": "constant",
    "warmup_epochs": 0,
    "step_milestones": [0.5, 0.75],  # 'step': fractions of the horizon
    "step_gamma": 0.1,
    # data
    "batch_size": 128,
    # The epoch's last step when b does not divide n_train: 'keep' trains it on the n_train mod b
    # images left (PyTorch's DataLoader default, drop_last=False: the paper's 40,000 at b = 128
    # leave a half batch of 64); 'drop' leaves them out of that epoch (each epoch takes
    # floor(n_train / b) full batches; the shuffle decides which images sit out). At 5,000
    # images 'keep' gives a last batch of 8 at b = 32..128 (1/16 of b at 128), a noisy step
    # with BatchNorm over 8 images at the end of every epoch (bench/claims_pilot.md, "Session 41").
    "last_batch": "keep",
    "epochs": 300,
    "n_train": 40000,
    "n_val": 10000,
    "n_test": 10000,         # test images of the per-epoch test curves
    # test images the selected predictor (best validation loss) is scored on, once, at the end:
    # the paper's whole test set. Smaller only for pipeline checks (smoke, unit tests).
    "n_selected_test": 10000,
    "augment": False,        # random crop (pad 4) + horizontal flip; off unless asked
    "split_seed": 0,         # the fixed 40k/10k split of the 50k training images
    # run
    "seed": 0,               # initialization and data order together
    "precision": "fp32",
    # BatchNorm statistics of every eval-mode number (per-epoch train/val/test, the selected
    # predictor): 'precise' recomputes them for the weights being evaluated from 2,000 fixed
    # training images before each evaluation (initlib.bn_stats); 'running' uses the running
    # averages training left, which lag fast-turning weights. Default 'precise', decided by the
    # pilot in bench/bn_stats_pilot.md (issue 19).
    "bn_stats": "precise",
    # the content fingerprint of the CIFAR-10 files (initlib.data.fingerprint); set by the
    # sweep from the data it finds, never in a params file. Default: the full CIFAR-10.
    "data": CIFAR10_FINGERPRINT,
}
DATA_KEY = "data"

EXECUTION_DEFAULTS: dict[str, Any] = {
    "device": "auto",        # auto | cpu | cuda | cuda:N
    "compile": False,        # torch.compile the model (CUDA path)
    "checkpoint_every": 1,   # epochs between checkpoints (a kill loses at most this many)
    "keep_checkpoint": False,  # keep the last checkpoint after the run finishes
}
EXECUTION_KEYS = tuple(EXECUTION_DEFAULTS)
# Keys added after runs were stored, left out of the identity at the value those runs trained
# with, so that their hashes (and the shipped results) stay theirs. Any other value is hashed.
LEGACY_IDENTITY_VALUES: dict[str, Any] = {"last_batch": "keep"}
ALL_KEYS = tuple(RUN_DEFAULTS) + EXECUTION_KEYS


class ConfigError(ValueError):
    """A configuration value that cannot be trained; raised before any training."""


def _where(source: str | None, key: str | None = None) -> str:
    parts = [p for p in (source, f"key '{key}'" if key else None) if p]
    return (": ".join(parts) + ": ") if parts else ""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _check(cond: bool, source, key, msg):
    if not cond:
        raise ConfigError(f"{_where(source, key)}{msg}")


def _looks_numeric(v) -> bool:
    try:
        float(v)
        return isinstance(v, str)
    except (TypeError, ValueError):
        return False


def _number_hint(v) -> str:
    """What to say when a number arrived as text (YAML 1.1 reads 5e-2 as a string)."""
    if _looks_numeric(v):
        return (f" (it was read as the text {v!r}: YAML reads exponents without a dot, like 5e-2, "
                f"as text; write 5.0e-2 or 0.05)")
    return ""


def validate_keys(d: Mapping[str, Any], source: str | None = None) -> None:
    for k in d:
        if k not in ALL_KEYS:
            raise ConfigError(
                f"{_where(source, k)}unknown key (known keys: {', '.join(ALL_KEYS)})")


def validate(cfg: Mapping[str, Any], source: str | None = None) -> None:
    """Raise ConfigError, naming key and source, for any value that cannot be trained."""
    validate_keys(cfg, source)
    c = {**RUN_DEFAULTS, **EXECUTION_DEFAULTS, **cfg}
    s = source
    _check(c["arch"] in ARCHS, s, "arch", f"unknown architecture {c['arch']!r} (one of {ARCHS})")
    _check(c["optimizer"] in OPTIMIZERS, s, "optimizer",
           f"unknown optimizer {c['optimizer']!r} (one of {OPTIMIZERS})")
    _check(c["schedule"] in SCHEDULES, s, "schedule",
           f"unknown schedule {c['schedule']!r} (one of {SCHEDULES})")
    _check(c["precision"] in PRECISIONS, s, "precision",
           f"unknown precision {c['precision']!r} (one of {PRECISIONS})")
    _check(c["last_batch"] in LAST_BATCH, s, "last_batch",
           f"must be one of {LAST_BATCH}, got {c['last_batch']!r}")
    _check(c["bn_stats"] in BN_STATS, s, "bn_stats",
           f"unknown BatchNorm statistics {c['bn_stats']!r} (one of {BN_STATS})")
    h = _number_hint
    for k in ("sigma_w", "width", "lr", "logit_scale"):
        _check(_is_num(c[k]) and c[k] > 0, s, k, f"must be a positive number, got {c[k]!r}{h(c[k])}")
    _check(c["arch"] == "resnet9" or c["logit_scale"] == 1.0, s, "logit_scale",
           f"only ResNet-9 has a logit scale (arch {c['arch']!r} needs 1.0)")
    if c["aux_lr"] is not None:
        _check(_is_num(c["aux_lr"]) and c["aux_lr"] > 0, s, "aux_lr",
               f"must be a positive number or null, got {c['aux_lr']!r}{h(c['aux_lr'])}")
    for k in ("l2", "weight_decay", "warmup_epochs"):
        _check(_is_num(c[k]) and c[k] >= 0, s, k, f"must be a number >= 0, got {c[k]!r}{h(c[k])}")
    for k in ("momentum", "muon_momentum", "beta1", "beta2"):
        _check(_is_num(c[k]) and 0 <= c[k] < 1, s, k, f"must be in [0, 1), got {c[k]!r}{h(c[k])}")
    _check(_is_num(c["eps"]) and c["eps"] > 0, s, "eps", f"must be > 0, got {c['eps']!r}{h(c['eps'])}")
    _check(_is_num(c["step_gamma"]) and 0 < c["step_gamma"] <= 1, s, "step_gamma",
           f"must be in (0, 1], got {c['step_gamma']!r}{h(c['step_gamma'])}")
    ms = c["step_milestones"]
    _check(isinstance(ms, (list, tuple)) and all(_is_num(m) and 0 < m < 1 for m in ms),
           s, "step_milestones", f"must be a list of fractions in (0, 1), got {ms!r}")
    for k in ("batch_size", "epochs", "checkpoint_every"):
        _check(_is_int(c[k]) and c[k] >= 1, s, k, f"must be an integer >= 1, got {c[k]!r}")
    for k, most in (("n_train", 40000), ("n_val", 10000), ("n_test", 10000), ("n_selected_test", 10000)):
        _check(_is_int(c[k]) and 10 <= c[k] <= most and c[k] % 10 == 0, s, k,
               f"must be a multiple of 10 in [10, {most}] (class-balanced subset), got {c[k]!r}")
    _check(c["n_selected_test"] >= c["n_test"], s, "n_selected_test",
           f"must be at least n_test ({c['n_test']}): the per-epoch test images are among them, "
           f"got {c['n_selected_test']}")
    _check(c["batch_size"] <= c["n_train"], s, "batch_size",
           f"must be at most n_train ({c['n_train']}), got {c['batch_size']}: one step would see "
           f"fewer images than b, and T_SGD = (1/b) sum eta^2 would count a batch that is not there")
    _check(isinstance(c["data"], str) and len(c["data"]) == 16
           and all(ch in "0123456789abcdef" for ch in c["data"]), s, "data",
           f"must be a data fingerprint (16 hex digits, set by initlib), got {c['data']!r}")
    for k in ("seed", "split_seed"):
        _check(_is_int(c[k]) and c[k] >= 0, s, k, f"must be an integer >= 0, got {c[k]!r}")
    for k in ("augment", "compile", "keep_checkpoint"):
        _check(isinstance(c[k], bool), s, k, f"must be true or false, got {c[k]!r}")
    _check(isinstance(c["device"], str) and (c["device"] in ("auto", "cpu", "cuda")
           or c["device"].startswith("cuda:")), s, "device",
           f"must be auto, cpu, cuda or cuda:N, got {c['device']!r}")
    _check(c["weight_decay"] == 0 or c["optimizer"] in DECOUPLED_DECAY_OPTIMIZERS, s, "weight_decay",
           f"decoupled weight_decay applies to {' and '.join(DECOUPLED_DECAY_OPTIMIZERS)} only; "
           f"use l2 for explicit L2")
    _check(c["warmup_epochs"] < c["epochs"], s, "warmup_epochs",
           f"must be smaller than epochs ({c['epochs']}), got {c['warmup_epochs']!r}")


def aux_lr(cfg: Mapping[str, Any]) -> float:
    """Muon's AdamW lr: ``aux_lr`` if given, else MUON_AUX_LR_RATIO x Muon's lr."""
    return cfg["aux_lr"] if cfg.get("aux_lr") is not None else cfg["lr"] * MUON_AUX_LR_RATIO


def decoupled_decay(cfg: Mapping[str, Any]) -> float:
    """The decoupled decay the run's optimizer applies (0 for those that take none)."""
    return cfg["weight_decay"] if cfg["optimizer"] in DECOUPLED_DECAY_OPTIMIZERS else 0.0


def _canon(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        # 1 and 1.0 and 1e0 are the same value, so they must hash the same
        return int(v) if float(v).is_integer() else float(v)
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    raise TypeError(f"cannot canonicalize {v!r}")


def resolve(cfg: Mapping[str, Any], source: str | None = None) -> dict[str, Any]:
    """Validate ``cfg`` and return the full config (defaults filled in)."""
    validate(cfg, source)
    full = {**RUN_DEFAULTS, **EXECUTION_DEFAULTS, **cfg}
    full["step_milestones"] = list(full["step_milestones"])
    return full


def identity(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a config that defines what is measured (everything but execution keys)."""
    full = {**RUN_DEFAULTS, **{k: v for k, v in cfg.items() if k not in EXECUTION_KEYS}}
    return {k: _canon(full[k]) for k in sorted(RUN_DEFAULTS)
            if not (k in LEGACY_IDENTITY_VALUES and full[k] == LEGACY_IDENTITY_VALUES[k])}


def run_hash(cfg: Mapping[str, Any]) -> str:
    """12 hex digits of sha256 over the canonical JSON of the run's identity."""
    blob = json.dumps(identity(cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]
