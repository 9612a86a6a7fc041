"""Pilot for issue 12: does ResNet-9 keep Myrtle's 0.125 logit scale? Low-LR SGD in the
paper's regime (T_SGD at the horizon <= 1e-2) with and without it, at the extreme sigma_w.

    python bench/output_scale_pilot.py [--epochs 40] [--n-train 5000] > bench/output_scale_pilot.md

ResNet-9 width 0.125, SGD lr 0.02, b 128, constant lr, no augmentation, seed 0, real CIFAR-10
(5,000 class-balanced training images, 1,000 validation, 1,000 test). T_SGD = steps * lr^2 / b.
Each run is real training through initlib.train; only the logit scale differs.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from initlib.config import resolve  # noqa: E402
from initlib.train import train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--n-train", type=int, default=5000)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--sigmas", default="0.1,2.5")
    ap.add_argument("--scales", default="0.125,1.0")
    a = ap.parse_args()
    steps = math.ceil(a.n_train / 128) * a.epochs
    print(f"# Output-scale pilot: ResNet-9 w0.125, SGD lr {a.lr}, b 128, {a.n_train} train images, "
          f"{a.epochs} epochs = {steps} steps, T_SGD = {steps * a.lr ** 2 / 128:.2g}\n")
    print("| logit scale | sigma_w | max train acc % | tau_interp | test acc at best val % | "
          "norm init -> final | minutes |")
    print("|---|---|---|---|---|---|---|")
    for scale in map(float, a.scales.split(",")):
        for sigma in map(float, a.sigmas.split(",")):
            t0 = time.time()
            cfg = resolve(dict(arch="resnet9", width=0.125, optimizer="sgd", lr=a.lr, batch_size=128,
                               n_train=a.n_train, n_val=1000, n_test=1000, epochs=a.epochs,
                               sigma_w=sigma, seed=0, logit_scale=scale, device="cpu"))
            _, s = train(cfg)
            tau = s["tau_interp"] if s["tau_interp"] is not None else "fails"
            print(f"| {scale:g} | {sigma:g} | {100 * s['max_train_acc']:.1f} | {tau} | "
                  f"{100 * s['test_acc_at_best_val']:.1f} | {s['initial_weight_norm']:.1f} -> "
                  f"{s['final_weight_norm']:.1f} | {(time.time() - t0) / 60:.1f} |", flush=True)


if __name__ == "__main__":
    main()
