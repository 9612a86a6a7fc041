"""Pilot for issue 19's item 3: a cpu regime in which low-LR SGD's runs stay interpolated after
tau_interp and the selection lands where the paper's does, all with precise BatchNorm
statistics (the trainer's default). Run through the real sweep (its own store, runs_pilot/),
so every number is what a profile would get.

Candidates (01's cpu SGD is the baseline: width 0.125, 5,000 images, b 128, lr 0.015, 128
epochs, T_SGD 9.0e-3, flow time lr x steps 77), each at sigma_w 0.1 and 2.5, seed 0:

- ``more_data``: 10,000 images for 64 epochs: the same steps, lr, T_SGD and flow time; each
  image seen half as often (the paper trains on 40,000).
- ``lower_lr``: lr 0.01 for 192 epochs: the same flow time 77, T_SGD 6.0e-3, and a per-step
  angle lr / ||W||^2 two thirds of the baseline's.

    python bench/regime_pilot.py --train      # 2 single-thread workers
    python bench/regime_pilot.py              # the table (bench/bn_stats_pilot.md)

The paper's per-step angle for a BatchNorm kernel is of order lr / ||W||^2 with ||W||^2 about
sigma_w^2 x its output channels, so ours relative to the paper's (width 1, lr 1e-3) is
(lr / 1e-3) x (1 / width) at the same sigma_w: the column ``angle_vs_paper``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STORE = ROOT / "runs_pilot"

BASE = dict(arch="resnet9", width=0.125, n_train=5000, n_val=1000, n_test=1000, n_selected_test=10000,
            batch_size=128, schedule="constant", optimizer="sgd", seed=0, bn_stats="precise")
CANDIDATES = {
    "more_data": dict(n_train=10000, lr=0.015, epochs=64),
    "lower_lr": dict(lr=0.01, epochs=192),
}
SIGMAS = (0.1, 2.5)


def configs() -> dict[str, dict]:
    from initlib.config import resolve
    return {f"{name}_s{sw}": resolve({**BASE, **c, "sigma_w": sw})
            for name, c in CANDIDATES.items() for sw in SIGMAS}


def run_row(name: str, cfg: dict, epochs: pd.DataFrame, summary: dict) -> dict:
    from initlib.metrics import share_interpolating_after_tau
    e = epochs[epochs.epoch >= 1]
    vl = e["val_loss"]
    share = share_interpolating_after_tau(epochs)
    after = int((e.epoch > summary["tau_interp"]).sum()) if summary["tau_interp"] is not None else 0
    return {"run": name, "tau_interp": summary["tau_interp"] or "never",
            "after_tau_at_99": f"{share:.0%} of {after}" if after else "-",
            "final_train_acc": f"{summary['final_train_acc']:.1%}",
            "val_loss_min_epoch_final": f"{vl.min():.3f} ({int(e.epoch[vl.idxmin()])}) / {vl.iloc[-1]:.3f}",
            "selected_epoch_train_acc": f"{summary['best_val_epoch']}: {summary['train_acc_at_best_val']:.1%}",
            "selected_test_acc": f"{summary['selected_test_acc']:.1%}",
            "end_test_acc": f"{summary['end_test_acc']:.1%}",
            "T_SGD_selected_horizon": f"{summary['T_SGD_at_best_val']:.2g} / {summary['T_SGD']:.2g}",
            "angle_vs_paper": f"{cfg['lr'] / 1e-3 / cfg['width']:.0f}x",
            "s_per_epoch": f"{e['wall_s'].median():.1f}"}


def table() -> str:
    from initlib import store
    rows = []
    for name, cfg in configs().items():
        rdir = store.run_dir(STORE, cfg)
        if store.is_done(rdir):
            rows.append(run_row(name, cfg, store.read_epochs(rdir), store.read_summary(rdir)))
        else:
            rows.append({"run": name, "tau_interp": "(not run)"})
    df = pd.DataFrame(rows).fillna("")
    return "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n" + "\n".join(
        "| " + " | ".join(str(v) for v in r) + " |" for r in df.itertuples(index=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", action="store_true")
    a = ap.parse_args()
    if a.train:
        from initlib.params import Sweep
        from initlib.sweep import bind_to_data, run_sweep
        sw = Sweep(Path("regime_pilot"), "cpu", list(configs().values()))
        bind_to_data([sw], os.environ.get("INITLIB_DATA_DIR"))
        run_sweep(sw.configs, STORE, os.environ.get("INITLIB_DATA_DIR"), workers=2, desc="regime pilot")
    print(table())


if __name__ == "__main__":
    main()
