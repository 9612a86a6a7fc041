"""Pilot for issue 19: BatchNorm's running statistics vs statistics recomputed for the weights
("precise BN", initlib.bn_stats), on ONE training trajectory per run.

Training in train mode normalises with batch statistics, so the weights do not depend on how
eval mode is done: each run here trains once and, after every epoch, is evaluated twice on the
same weights: (a) with the running statistics as training left them, (b) with statistics
recomputed on 2,000 fixed training images. The running statistics are put back after (b), so
arm (a) is exactly what a plain run sees. Each step of an epoch is timed (train, eval, recompute).

Runs: 01's cpu SGD (width 0.125, 5,000 images, b 128, lr 0.015, 128 epochs; T_SGD 9.0e-3) at
sigma_w 0.1 and 2.5, the same with augmentation (random crop + flip: a regime candidate for
issue 19's item 3: does the validation loss keep improving until the net interpolates?), and
01's Adam (lr 5e-3, 20 epochs) at both ends. Seed 0.

    python bench/bn_stats_pilot.py --worker 0 --of 2   # one single-thread worker per core
    python bench/bn_stats_pilot.py --table             # bench/bn_stats_pilot.md's table

Per run: bench/bn_stats_pilot/<name>.csv (per-epoch rows of both arms) and <name>.json (the
selected epoch of each arm and its predictor's accuracy on all 10,000 test images).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "bn_stats_pilot"

BASE = dict(arch="resnet9", width=0.125, n_train=5000, n_val=1000, n_test=1000,
            n_selected_test=10000, batch_size=128, schedule="constant", seed=0)
SGD = dict(optimizer="sgd", lr=0.015, epochs=128)
ADAM = dict(optimizer="adam", lr=5.0e-3, epochs=20)
RUNS = {
    "sgd_s0.1": {**SGD, "sigma_w": 0.1},
    "sgd_s2.5": {**SGD, "sigma_w": 2.5},
    "sgd_aug_s0.1": {**SGD, "sigma_w": 0.1, "augment": True},
    "sgd_aug_s2.5": {**SGD, "sigma_w": 2.5, "augment": True},
    "adam_s0.1": {**ADAM, "sigma_w": 0.1},
    "adam_s2.5": {**ADAM, "sigma_w": 2.5},
}
ARMS = ("running", "precise")


def run_pilot(name: str, overrides: dict, data_dir) -> None:
    from initlib.bn_stats import (PRECISE_BN_BATCH, bn_buffers, load_bn_buffers_, precise_bn_index,
                                  recompute_bn_stats_)
    from initlib.config import resolve
    from initlib.fused import unfused_state
    from initlib.train import assemble_group, get_data, record_epoch, score_on_test, train_epoch

    # bn_stats running: the trainer's own evaluation is arm (a); arm (b) is recomputed here
    cfg = resolve({**BASE, **overrides, "bn_stats": "running"})
    device = torch.device("cpu")
    data = get_data(cfg, device, data_dir)
    grp = assemble_group([cfg], data, device)
    bn_idx = precise_bn_index(len(data.train))
    batches = lambda: (data.normalize(data.train.x[bn_idx[i:i + PRECISE_BN_BATCH]])  # noqa: E731
                       for i in range(0, len(bn_idx), PRECISE_BN_BATCH))
    rows, best = [], {a: {"epoch": None, "val_loss": math.inf, "state": None} for a in ARMS}
    for epoch in range(0, cfg["epochs"] + 1):
        t0 = time.perf_counter()
        running = torch.full((1,), math.nan)
        if epoch:
            running = train_epoch(grp, epoch)
        t1 = time.perf_counter()
        rec = record_epoch(grp, epoch, running)[0]
        t2 = time.perf_counter()
        row = {"epoch": epoch, "train_s": t1 - t0, "eval_s": t2 - t1}
        row.update({k: v for k, v in rec.items() if not k.startswith("norm/")})
        for k in ("train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc"):
            row[f"running_{k}"] = row.pop(k)
        keep = {"running": unfused_state(grp.model.state_dict(), 0, grp.plain_states[0])}
        saved = bn_buffers(grp.model)
        recompute_bn_stats_(grp.model, batches())
        t3 = time.perf_counter()
        prec = record_epoch(grp, epoch, running)[0]
        t4 = time.perf_counter()
        keep["precise"] = unfused_state(grp.model.state_dict(), 0, grp.plain_states[0])
        for k in ("train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc"):
            row[f"precise_{k}"] = prec[k]
        row["recompute_s"], row["precise_eval_s"] = t3 - t2, t4 - t3
        for arm in ARMS:  # the arm's selected predictor: its weights with its own statistics
            v = row[f"{arm}_val_loss"]
            if epoch and math.isfinite(v) and v < best[arm]["val_loss"]:
                best[arm] = {"epoch": epoch, "val_loss": v, "state": keep[arm]}
        load_bn_buffers_(grp.model, saved)
        rows.append(row)
        if epoch % 8 == 0 or epoch == cfg["epochs"]:
            pd.DataFrame(rows).to_csv(OUT / f"{name}.csv", index=False)
            print(f"{name}: epoch {epoch}/{cfg['epochs']} train acc running "
                  f"{row['running_train_acc']:.3f} precise {row['precise_train_acc']:.3f} "
                  f"({row['train_s']:.1f}+{row['eval_s']:.1f}+{row['recompute_s']:.1f}+"
                  f"{row['precise_eval_s']:.1f} s)", flush=True)
        if not math.isfinite(row["train_loss_running"]) and epoch:
            break
    summary = {"name": name, "config": {k: cfg[k] for k in sorted({**BASE, **overrides})}}
    for arm in ARMS:
        sel = score_on_test(grp, 0, best[arm]["state"], "selected")
        summary[arm] = {"selected_epoch": best[arm]["epoch"], "selected_val_loss": best[arm]["val_loss"],
                        "selected_test_acc": sel["selected_test_acc"], "selected_test_n": sel["selected_test_n"]}
    (OUT / f"{name}.json").write_text(json.dumps(summary, indent=1))


def table() -> str:
    """The pilot table (markdown) from the per-run files."""
    from initlib.metrics import INTERP_THRESHOLD
    lines = ["| run | statistics | tau_interp | epochs after tau with train acc >= 99% | final train acc | "
             "val loss: min (epoch) / final | selected epoch: train acc | selected: test acc (10,000) | "
             "cost per epoch, s (train + eval [+ recompute]) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name in RUNS:
        csv, js = OUT / f"{name}.csv", OUT / f"{name}.json"
        if not csv.exists():
            lines.append(f"| {name} | (not run) | | | | | | | |")
            continue
        if not js.exists():  # stopped early: what its per-epoch rows say
            df = pd.read_csv(csv)
            e = df[df.epoch >= 1]
            for arm in ARMS:
                vl = e[f"{arm}_val_loss"]
                lines.append(f"| {name} | {arm} | never (stopped at epoch {int(e.epoch.max())}) | - | "
                             f"{e[f'{arm}_train_acc'].iloc[-1]:.1%} (best {e[f'{arm}_train_acc'].max():.1%}) | "
                             f"{vl.min():.3f} ({int(e.epoch[vl.idxmin()])}) / {vl.iloc[-1]:.3f} | - | - | "
                             f"{e.train_s.median():.1f} + {e.eval_s.median():.1f} |")
            continue
        df, s = pd.read_csv(csv), json.loads(js.read_text())
        e = df[df.epoch >= 1]
        for arm in ARMS:
            acc = e[f"{arm}_train_acc"]
            hit = e[acc >= INTERP_THRESHOLD]
            tau = int(hit.epoch.iloc[0]) if len(hit) else None
            after = e[e.epoch > tau] if tau is not None else e.iloc[:0]
            share = f"{(after[f'{arm}_train_acc'] >= 0.99).mean():.0%} of {len(after)}" if len(after) else "-"
            vl = e[f"{arm}_val_loss"]
            sel = s[arm]
            sel_acc = float(e.loc[e.epoch == sel["selected_epoch"], f"{arm}_train_acc"].iloc[0])
            cost_s = (f"{e.train_s.median():.1f} + {e.eval_s.median():.1f}" if arm == "running" else
                      f"{e.train_s.median():.1f} + {e.precise_eval_s.median():.1f} + {e.recompute_s.median():.1f}")
            lines.append(f"| {name} | {arm} | {tau if tau is not None else 'never'} | {share} | "
                         f"{acc.iloc[-1]:.1%} | {vl.min():.3f} ({int(e.epoch[vl.idxmin()])}) / {vl.iloc[-1]:.3f} | "
                         f"{sel['selected_epoch']}: {sel_acc:.1%} | {sel['selected_test_acc']:.1%} | {cost_s} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--of", type=int, default=1)
    ap.add_argument("--only", nargs="*", help="run names (default: all of this worker's)")
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    if a.table:
        print(table())
        return
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    data_dir = os.environ.get("INITLIB_DATA_DIR", str(ROOT.parent / "shared" / "data" / "cifar10"))
    names = a.only or [n for i, n in enumerate(RUNS) if i % a.of == a.worker]
    for name in names:
        if (OUT / f"{name}.json").exists():
            continue
        run_pilot(name, RUNS[name], data_dir)


if __name__ == "__main__":
    main()
