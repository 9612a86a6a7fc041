"""Pilot for issue 19's item 6: has the adaptive optimizers' spread stopped falling by their
cpu horizon (20 epochs, for cost), or does it keep falling to SGD's (128 epochs)?

01's cpu Adam, AdamW and Muon (width 0.125, 5,000 images, b 128, precise BatchNorm statistics,
the same lr and decay), seed 0, at the two ends of sigma_w (0.1, 2.5), trained to SGD's horizon,
128 epochs. One long run per cell gives every shorter horizon (initlib.analysis.horizon_table:
the selected predictor within epochs 1..E, and the weights of epoch E), so the table reads the
spread at E = 20 (the cpu horizon), 32, 64, 96 and 128 on both measures. Runs go through the
real sweep into their own store (runs_pilot/), so every number is what a profile would get.

    python bench/adaptive_horizon_pilot.py --train      # 2 single-thread workers, ~40 min
    python bench/adaptive_horizon_pilot.py              # the table

The accuracies are those of the per-epoch test images (1,000), so the noise floor is the
test-sampling one (binomial), one seed: the table shows a trend, not a verdict.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STORE = ROOT / "runs_pilot"

BASE = dict(arch="resnet9", width=0.125, n_train=5000, n_val=1000, n_test=1000, n_selected_test=10000,
            batch_size=128, schedule="constant", seed=0, bn_stats="precise", epochs=128)
# 01's cpu adaptive variants (params/01_optimizer_dependence.yaml), to SGD's horizon
OPTIMIZERS = {
    "adam": dict(optimizer="adam", lr=5.0e-3),
    "adamw": dict(optimizer="adamw", lr=5.0e-3, weight_decay=0.1),
    "muon": dict(optimizer="muon", lr=0.02),
}
SIGMAS = (0.1, 2.5)
HORIZONS = (20, 32, 64, 96, 128)


def configs() -> list[dict]:
    from initlib.config import resolve
    return [resolve({**BASE, **o, "sigma_w": sw}) for o in OPTIMIZERS.values() for sw in SIGMAS]


def table():
    from initlib import analysis, store
    done = [c for c in configs() if store.is_done(store.run_dir(STORE, c))]
    if not done:
        return "(no run finished yet)"
    t = analysis.horizon_table_on_both_measures(store.load_epochs(STORE, done), list(HORIZONS), ["optimizer"])
    cols = ["optimizer", "measure", "horizon_epochs", "spread_pp", "selected_epochs",
            "lowest_train_acc_scored", "T_adapt", "floor_pp", "floor_hi_pp"]
    return analysis.format_table(t.sort_values(["optimizer", "measure", "horizon_epochs"])[cols])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", action="store_true")
    a = ap.parse_args()
    if a.train:
        from initlib.params import Sweep
        from initlib.sweep import bind_to_data, run_sweep
        sw = Sweep(Path("adaptive_horizon_pilot"), "cpu", configs())
        bind_to_data([sw], os.environ.get("INITLIB_DATA_DIR"))
        run_sweep(sw.configs, STORE, os.environ.get("INITLIB_DATA_DIR"), workers=2, desc="adaptive horizon")
    print(table())


if __name__ == "__main__":
    main()
