"""Run summaries: the paper's definitions as small pure functions of per-epoch records.

All functions take the per-epoch metrics of one run as a pandas DataFrame with one row per
epoch (column ``epoch``; epoch 0 is the initialization and is never selected) and the columns
written by :mod:`initlib.train` (``train_acc``, ``val_loss``, ``val_acc``, ``test_acc``,
``weight_norm``, ...). Accuracies are fractions in [0, 1].
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

INTERP_THRESHOLD = 0.995


def _trained(epochs: pd.DataFrame, horizon: int | None = None) -> pd.DataFrame:
    e = epochs[epochs["epoch"] >= 1]
    if horizon is not None:
        e = e[e["epoch"] <= horizon]
    return e


def best_val_epoch(epochs: pd.DataFrame, horizon: int | None = None) -> int | None:
    """Epoch of the checkpoint with the lowest validation loss (the first on ties), among
    epochs 1..horizon. None if no epoch has a finite validation loss."""
    e = _trained(epochs, horizon)
    e = e[np.isfinite(e["val_loss"])]
    if e.empty:
        return None
    return int(e.loc[e["val_loss"].idxmin(), "epoch"])


def test_acc_at_best_val(epochs: pd.DataFrame, horizon: int | None = None) -> float:
    """The paper's selected predictor: "the test accuracy at the checkpoint with the best
    validation loss". NaN if there is no such checkpoint."""
    ep = best_val_epoch(epochs, horizon)
    if ep is None:
        return math.nan
    return float(epochs.loc[epochs["epoch"] == ep, "test_acc"].iloc[0])


def tau_interp(epochs: pd.DataFrame, threshold: float = INTERP_THRESHOLD) -> int | None:
    """Interpolation epoch: "first epoch at which training accuracy reaches 99.5%". None if
    the run "fails to interpolate"."""
    e = _trained(epochs)
    hit = e[e["train_acc"] >= threshold]
    return None if hit.empty else int(hit["epoch"].iloc[0])


def repair_gap(epochs: pd.DataFrame, threshold: float = INTERP_THRESHOLD) -> float:
    """"Validation accuracy at the final checkpoint minus validation accuracy at
    tau_interp". NaN when the run never interpolates."""
    t = tau_interp(epochs, threshold)
    if t is None:
        return math.nan
    final = _trained(epochs)["val_acc"].iloc[-1]
    return float(final - epochs.loc[epochs["epoch"] == t, "val_acc"].iloc[0])


def share_interpolating_after_tau(epochs: pd.DataFrame, threshold: float = 0.99) -> float:
    """The fraction of the epochs after tau_interp whose (eval-mode) train accuracy is at least
    ``threshold``: whether a run that once interpolated stays there. NaN without tau or
    without epochs after it."""
    t = tau_interp(epochs)
    after = _trained(epochs)
    after = after[after["epoch"] > t] if t is not None else after.iloc[:0]
    return float((after["train_acc"] >= threshold).mean()) if len(after) else math.nan


def at_selection(epochs: pd.DataFrame) -> dict:
    """Where the selected predictor lies: its epoch's train accuracy and clocks, whether it
    interpolates (train acc >= 99.5%) and whether its epoch is at or past tau_interp."""
    best, t = best_val_epoch(epochs), tau_interp(epochs)
    if best is None:
        return {"train_acc_at_best_val": None, "best_val_interpolates": None, "best_val_past_tau": None,
                **{f"{c}_at_best_val": None for c in ("T_SGD", "T_L2", "T_adapt")}}
    row = epochs[epochs["epoch"] == best].iloc[0]
    return {"train_acc_at_best_val": float(row["train_acc"]),
            "best_val_interpolates": bool(row["train_acc"] >= INTERP_THRESHOLD),
            "best_val_past_tau": t is not None and best >= t,
            **{f"{c}_at_best_val": float(row[c]) for c in ("T_SGD", "T_L2", "T_adapt")}}


def summarize(epochs: pd.DataFrame, status: str) -> dict:
    """The summary of one run, as stored in summary.json."""
    best = best_val_epoch(epochs)
    t = tau_interp(epochs)
    e = _trained(epochs)
    last = e.iloc[-1] if len(e) else epochs.iloc[-1]
    init = epochs[epochs["epoch"] == 0].iloc[0]

    def f(x):
        x = float(x)
        return x if math.isfinite(x) else None

    row = lambda ep: epochs[epochs["epoch"] == ep].iloc[0]  # noqa: E731
    return {
        "status": status,
        "epochs_trained": int(last["epoch"]),
        "best_val_epoch": best,
        "test_acc_at_best_val": f(row(best)["test_acc"]) if best is not None else None,
        "val_acc_at_best_val": f(row(best)["val_acc"]) if best is not None else None,
        "tau_interp": t,
        "interpolated": t is not None,
        "repair_gap": f(repair_gap(epochs)) if t is not None else None,
        "final_train_acc": f(last["train_acc"]),
        "max_train_acc": f(e["train_acc"].max()) if len(e) else None,
        "final_val_acc": f(last["val_acc"]),
        "final_test_acc": f(last["test_acc"]),
        "initial_weight_norm": f(init["weight_norm"]),
        "final_weight_norm": f(last["weight_norm"]),
        "T_SGD": f(last["T_SGD"]),
        "T_L2": f(last["T_L2"]),
        "T_adapt": f(last["T_adapt"]),
        **at_selection(epochs),
        "share_after_tau_at_99": f(share_interpolating_after_tau(epochs)),
    }
