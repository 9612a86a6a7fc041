"""Pilots for issue 18: candidate cpu regimes for claims 3-5, judged by the paper's clocks.

Each candidate is a cell of one claim's grid at sigma_w 0.1 and 2.5, seed 0, on 01's cpu scale
(ResNet-9 width 0.125, 5,000 images, 1,000 val, 1,000 test, precise BatchNorm statistics)
unless it says otherwise. ``--plan`` prints, without training, each candidate's clocks at the
horizon beside the paper's for the cell it plays, and the two per-step quantities a smaller scale
must not trade away (issue 18): eta x lambda, and the per-step angle of a BatchNorm kernel,
of order lr / ||W||^2, relative to the paper's at the same sigma_w ((lr / 1e-3) x (1 / width)
for ResNet-9; x 4 / width' for the He ResNets, whose base is 16 channels, not 64).
``--train`` trains the candidates of ``--claims`` through the real sweep into runs_pilot/;
without it the table also shows, for trained runs, whether they interpolate, where selection
lands, and the spread.

Finished pilot runs are committed: every call (but ``--plan``) first imports
bench/claims_pilot_runs/ into runs_pilot/ and then exports the finished runs it names back
(config, per-epoch metrics, summary with checksums; no checkpoints, as results/cpu). The store
of one session does not survive into the next (a new checkout), so a pilot that spans
sessions keeps its finished runs here, and its tables can be rebuilt from them; a run stopped
mid-way is retrained from its start in the next session.

    python bench/claims_pilot.py --plan
    python bench/claims_pilot.py --train --claims 03
    python bench/claims_pilot.py --claims 03,04          # the table of what has run
    python bench/claims_pilot.py --train --claims 05 --only resnet20_w0.25,resnet56_w0.25
    python bench/claims_pilot.py --train --claims 04 --only lr0.015_b256 --seeds 1,2   # more seeds
    python bench/claims_pilot.py --train --claims 01 --sigmas 2.5   # one end only
    python bench/claims_pilot.py --claims 01 --only width0.25 --seeds 0,1,2 --sigmas 0.1,0.5,1.0,2.5 --grid
    python bench/claims_pilot.py --claims 03 --only lr0.15_l2_T4.7_width0.25 --seeds 0,1,2 \
        --sigmas 0.1,0.5,1.0,2.5 --grid --verdict03 width0.25   # 03's notebook rule on the pilot
    python bench/claims_pilot.py --claims 05 --only resnet110_w0.5 --verdict05 resnet110_w0.5  # 05's rule
    python bench/claims_pilot.py --claims 01 --only muon_width0.25 --beside-shipped  # and at width 0.125

The paper's cells (../shared/PAPER.md; 40,000 images, 313 steps per epoch at b = 128, 300
epochs): low-LR SGD eta 1e-3 (T_SGD 7.3e-4, flow eta x steps 94); claim 3's eta = lambda = 1e-2
(T_SGD 0.073, T_L2 9.4, eta lambda 1e-4); claim 4's b = 16..256 at eta 1e-3 (T_SGD 0.047 at
b = 16, 1.8e-4 at 256; flow 750 to 47).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from initlib.clocks import steps_per_epoch  # noqa: E402
STORE = ROOT / "runs_pilot"
RESULTS_CPU = ROOT / "results" / "cpu"  # the runs the cpu reports read (make results PROFILE=cpu)
PILOT_RUNS = ROOT / "bench" / "claims_pilot_runs"  # finished pilot runs, committed (no checkpoints)
# Where shipped runs are read: results/cpu, then bench/claims_pilot_runs/, which keeps the runs a
# notebook shipped before it was rerun with the last batch dropped (01's 48 until session 44, 06's
# 12 until session 45), so that the notes read beside them still print what they quote.
SHIPPED = (RESULTS_CPU, PILOT_RUNS)
RERUN_DROP_RUNS = ROOT / "bench" / "rerun_drop_runs"  # a rerun with the last batch dropped, while it trains
SIGMAS = (0.1, 2.5)
PAPER_EPOCHS = 300

BASE = dict(arch="resnet9", width=0.125, n_train=5000, n_val=1000, n_test=1000, n_selected_test=10000,
            batch_size=128, schedule="constant", optimizer="sgd", seed=0, bn_stats="precise", epochs=128)

# claim -> candidate name -> (config overrides, the paper's cell it plays: lr, l2, batch size)
CANDIDATES = {
    "01": {
        # The premise obstacle (every claim of low-lr SGD): at 5,000 images the validation loss
        # of 01's SGD is lowest before the net fits its training set (sigma_w >= 1: epochs 14-19
        # at 60-74% train accuracy), so the paper's predictor misses the paper's premise. Does
        # more data put the minimum past interpolation? 4x the images at 01's lr for 2x its steps
        # (the per-epoch history also gives 01's 5,120 steps, epoch 32, as a prefix); and 01's
        # own cell with augmentation (flip + crop: the usual CIFAR pipeline, slower to overfit).
        "n20000_e64": (dict(lr=0.015, n_train=20000, epochs=64), dict(lr=1e-3, l2=0.0, b=128)),
        "augment": (dict(lr=0.015, augment=True), dict(lr=1e-3, l2=0.0, b=128)),
        # 2x the width at 01's lr, data and horizon: the same clocks (T_SGD, flow), half the
        # per-step angle (60x the paper's, not 120x), 2x the channels the validation loss is
        # computed through. Does the minimum of sigma_w 2.5's validation loss move past
        # interpolation? (the one cheap route left untried by issue 19 and session 25)
        "width0.25": (dict(lr=0.015, width=0.25), dict(lr=1e-3, l2=0.0, b=128)),
        # 4x the width (32-256 channels), the next step after width0.25's 9 of 12 interpolating
        # selected predictors (session 36, chosen before it ran): 01's clocks again, the per-step
        # angle a quarter of width 0.125's (30x the paper's). At which width does the paper's
        # predictor meet the premise at both ends of sigma_w, and at what cost per epoch?
        "width0.5": (dict(lr=0.015, width=0.5), dict(lr=1e-3, l2=0.0, b=128)),
        # 01's other side at width 0.25 (session 37, chosen before it ran): Muon, Adam and AdamW
        # cells of 01's cpu profile with only the width doubled, as width0.25 is its SGD cell.
        # At width 0.125 the adaptive spreads are Muon 15.1, Adam 10.2, AdamW 4.5 pp (results/cpu;
        # the paper: Muon about 4.0). Does the width that moves SGD's selection past interpolation
        # move the adaptive spreads too? The paper gives no adaptive lr: its cell is None, and
        # --plan shows our clocks only (T_adapt is the flow column, lr x steps).
        "muon_width0.25": (dict(optimizer="muon", lr=0.02, width=0.25), None),
        "adam_width0.25": (dict(optimizer="adam", lr=5e-3, width=0.25), None),
        "adamw_width0.25": (dict(optimizer="adamw", lr=5e-3, weight_decay=0.1, width=0.25), None),
        # The last batch (session 41, chosen before any ran). 5,000 images at b = 128 leave a
        # last batch of 8 every epoch (1/16 of b; the paper's 40,000 leave 64, 1/2). Across 01
        # and 04's shipped SGD runs, the share of epochs after tau at >= 99% train accuracy goes
        # with the last batch's share of b, not with b: b = 16 (8/16) 0.96-1.00, 256 (136/256)
        # 1.00, 32 (8/32) 0.76-0.95, 64 (8/64) 0.40-0.82, 128 (8/128) 0.11-0.70. Is the end-of-
        # epoch step on 8 images (BatchNorm over 8) what throws b = 128's runs off after they
        # fit? 01's SGD cell with that batch dropped (39 full steps an epoch), and 01's Adam
        # cell the same (its end-of-training predictors stop at 88-98% train accuracy). (These
        # shares count the epochs from tau on; `--last-batch` prints those after tau.)
        "drop_last": (dict(lr=0.015, last_batch="drop"), dict(lr=1e-3, l2=0.0, b=128)),
        "adam_drop_last": (dict(optimizer="adam", lr=5e-3, last_batch="drop"), None),
        # width0.25 with the last batch dropped (session 45, chosen before it ran): at width 0.25
        # 9 of 12 selected predictors interpolated with the batch kept (sessions 26-27), the three
        # misses near-ties between epochs whose train accuracy swung, which the batch of 8 caused
        # at width 0.125. Do both sigma_w ends' selected predictors interpolate without it? These
        # are 03's low-lr runs with the batch dropped (the same configs: its rerun's first runs).
        "width0.25_drop_last": (dict(lr=0.015, width=0.25, last_batch="drop"), dict(lr=1e-3, l2=0.0, b=128)),
    },
    "03": {
        # the larger-lr arm at 10x 01's lr; L2 so that T_L2 is the paper's 9.4 (eta lambda 18x the
        # paper's), or half of it (9x); and the same lr without L2 (is it the lr or the L2?)
        "lr0.15": (dict(lr=0.15), dict(lr=1e-2, l2=0.0, b=128)),
        "lr0.15_l2_T4.7": (dict(lr=0.15, l2=6.1e-3), dict(lr=1e-2, l2=1e-2, b=128)),
        "lr0.15_l2_T9.4": (dict(lr=0.15, l2=1.22e-2), dict(lr=1e-2, l2=1e-2, b=128)),
        # 3.3x 01's lr: T_SGD 0.1, close to the paper's 0.073 for this cell; T_L2 9.4
        "lr0.05_l2_T9.4": (dict(lr=0.05, l2=3.7e-2), dict(lr=1e-2, l2=1e-2, b=128)),
        # 03's shipped L2 cell with only the width doubled (as 01's width0.25): at width 0.125, 4 of
        # its 12 selected predictors stopped at 97.0-98.9% train accuracy (the premise that left 03
        # undecided); the same clocks (T_L2 4.7, eta lambda 9x the paper's), half the per-step angle
        "lr0.15_l2_T4.7_width0.25": (dict(lr=0.15, l2=6.1e-3, width=0.25), dict(lr=1e-2, l2=1e-2, b=128)),
        # 03's L2 cell at width 0.125 with the last batch of 8 dropped (session 41, before it ran):
        # width 0.25 was chosen because at 0.125 this cell "trains unstably"; is that the batch
        # of 8? If it trains stably here, 03 can go back to 01's width and share 01's runs.
        "lr0.15_l2_T4.7_drop_last": (dict(lr=0.15, l2=6.1e-3, last_batch="drop"), dict(lr=1e-2, l2=1e-2, b=128)),
    },
    "04": {
        # fixed lr and epochs over b (as the paper). At 01's lr 0.015, b = 256 gets flow 38 in
        # 128 epochs, below the ~50-58 sigma_w 2.5 needed to interpolate (01's calibration): lr 0.03
        # gives b = 256 01's flow (77) and T_SGD 9e-3; or lr 0.02 for 192 epochs.
        # 01's own lr and horizon first: every b at 12x the paper's T_SGD, as 01's b = 128 is
        # (T_SGD goes as 1/b^2 at a fixed lr and number of epochs). Does b = 256 (flow 38)
        # interpolate, and what does b = 16 cost per epoch on a CPU?
        "lr0.015_b256": (dict(lr=0.015, batch_size=256), dict(lr=1e-3, l2=0.0, b=256)),
        "lr0.015_b16": (dict(lr=0.015, batch_size=16), dict(lr=1e-3, l2=0.0, b=16)),
        "lr0.03_b256": (dict(lr=0.03, batch_size=256), dict(lr=1e-3, l2=0.0, b=256)),
        "lr0.03_b16": (dict(lr=0.03, batch_size=16), dict(lr=1e-3, l2=0.0, b=16)),
        "lr0.02_e192_b256": (dict(lr=0.02, batch_size=256, epochs=192), dict(lr=1e-3, l2=0.0, b=256)),
    },
    "05": {
        # He ResNets at width 0.25 (4-16 channels) and 0.5, 01's lr and horizon: does the
        # smallest sigma_w interpolate (so that a failure at 2.5 is a failure of sigma_w)?
        "resnet20_w0.25": (dict(arch="resnet20", width=0.25, lr=0.015), dict(lr=1e-3, l2=0.0, b=128)),
        "resnet56_w0.25": (dict(arch="resnet56", width=0.25, lr=0.015), dict(lr=1e-3, l2=0.0, b=128)),
        "resnet56_w0.5": (dict(arch="resnet56", width=0.5, lr=0.015), dict(lr=1e-3, l2=0.0, b=128)),
        # The paper's second deep net (session 35), at ResNet-56's shipped width and everything
        # else 05's cpu cell: left out of the cpu profile for cost (~2x ResNet-56 per epoch).
        "resnet110_w0.5": (dict(arch="resnet110", width=0.5, lr=0.015), dict(lr=1e-3, l2=0.0, b=128)),
        # 05's shipped cell with the last batch of 8 dropped (session 41, before it ran): 05 holds
        # because ResNet-56 at sigma_w 2.5 never interpolates (89.4% best train accuracy). Does it
        # fail to fit without the end-of-epoch step on 8 images, or was that step the failure?
        "resnet56_w0.5_drop_last": (dict(arch="resnet56", width=0.5, lr=0.015, last_batch="drop"),
                                    dict(lr=1e-3, l2=0.0, b=128)),
    },
}


class Key(NamedTuple):
    """One pilot run: a candidate of one claim at one seed and sigma_w."""
    claim: str
    name: str
    seed: int
    sigma_w: float

    @property
    def cell(self) -> str:
        """The candidate and seed, the unit a spread is taken over (sigma_w varies within it)."""
        return f"{self.claim} {self.name}" + (f" seed {self.seed}" if self.seed else "")

    def __str__(self):
        return f"{self.cell} sigma_w {self.sigma_w:g}"


def configs(claims, only=None, seeds=(0,), sigmas=SIGMAS) -> dict[Key, dict]:
    """The candidates' configs by Key; seeds other than 0 are more seeds of a chosen cell (the
    same configs as its grid's, so the same runs); ``only``: names to keep (all if None)."""
    from initlib.config import resolve
    return {Key(claim, name, seed, sw): resolve({**BASE, **over, "sigma_w": sw, "seed": seed})
            for seed in seeds for claim in claims for name, (over, _) in CANDIDATES[claim].items()
            if only is None or name in only for sw in sigmas}


def paper_cell(claim: str, name: str) -> dict:
    return CANDIDATES[claim][name][1]


def clocks_of(lr: float, l2: float, b: int, steps: int) -> dict:
    return {"T_SGD": steps * lr ** 2 / b, "T_L2": l2 * lr * steps, "flow": lr * steps, "eta_lambda": lr * l2}


def plan_row(key: Key, cfg: dict) -> dict:
    claim, name = key.claim, key.name
    steps = cfg["epochs"] * steps_per_epoch(cfg["n_train"], cfg["batch_size"], cfg["last_batch"])
    ours = clocks_of(cfg["lr"], cfg["l2"], cfg["batch_size"], steps)
    p = paper_cell(claim, name)  # None: an adaptive cell; the paper gives no lr, so no clock to quote
    theirs = clocks_of(p["lr"], p["l2"], p["b"], PAPER_EPOCHS * steps_per_epoch(40000, p["b"])) if p else None

    def beside(clock: str, spec: str) -> str:
        return f"{ours[clock]:{spec}} ({format(theirs[clock], spec) if theirs else '-'})"
    # the per-step angle: width is relative to each family's paper width
    angle = f"{(cfg['lr'] / p['lr']) / cfg['width']:.0f}x" if p else "-"
    return {"candidate": f"{claim} {name}", "steps": steps,
            "T_SGD (paper)": beside("T_SGD", ".2g"), "T_L2 (paper)": beside("T_L2", ".2g"),
            "flow lr x steps (paper)": beside("flow", ".0f"), "eta lambda (paper)": beside("eta_lambda", ".2g"),
            "angle vs paper": angle}


def run_dir_in(stores: Path | tuple[Path, ...], cfg: dict) -> Path:
    """The run folder of ``cfg`` in the first of ``stores`` (one store or several) where it is
    done, else in the first: a run read beside another may live in results/cpu or, once its
    notebook no longer ships it, in bench/claims_pilot_runs/ (:data:`SHIPPED`)."""
    from initlib import store
    first = stores if isinstance(stores, Path) else stores[0]
    return store.find_done(stores, cfg) or store.run_dir(first, cfg)


def result_row(key: Key, cfg: dict, store_dir: Path | tuple[Path, ...] = STORE) -> dict:
    from initlib import store
    from initlib.metrics import share_interpolating_after_tau
    rdir = run_dir_in(store_dir, cfg)
    if not store.is_done(rdir):
        return {"candidate": str(key), "tau_interp": "(not run)"}
    s, e = store.read_summary(rdir), store.read_epochs(rdir)
    return {"candidate": str(key), "tau_interp": s["tau_interp"] or "never",
            "best_train_acc": f"{e['train_acc'].max():.1%}",
            "after_tau_at_99": f"{share_interpolating_after_tau(e):.0%}" if s["tau_interp"] else "-",
            "selected_epoch_train_acc": f"{s['best_val_epoch']}: {s['train_acc_at_best_val']:.1%}",
            "selected_test_acc": f"{s['selected_test_acc']:.1%}", "end_test_acc": f"{s['end_test_acc']:.1%}",
            "s_per_epoch": f"{e['wall_s'].median():.1f}"}


def spread_rows(cfgs: dict[Key, dict], store_dir: Path | tuple[Path, ...] = STORE) -> pd.DataFrame:
    """Per candidate with both sigma_w done: the spread (sigma_w 2.5 minus 0.1's test accuracy, as
    max - min, on all 10,000 test images) of the selected and of the end-of-training predictors,
    and the train accuracy of the predictors each scores. One seed: no interval, and the floor is
    test sampling alone (binomial, about 1.3 pp at its 95% quantile on 10,000 images)."""
    from initlib import store
    rows = []
    for cell in dict.fromkeys(k.cell for k in cfgs):
        runs = [(k, c) for k, c in cfgs.items() if k.cell == cell]
        if len(runs) < 2:
            continue  # one sigma_w: no spread
        if not all(store.is_done(run_dir_in(store_dir, c)) for _, c in runs):
            continue
        s = [store.read_summary(run_dir_in(store_dir, c)) for _, c in runs]
        sel, end = [x["selected_test_acc"] for x in s], [x["end_test_acc"] for x in s]
        rows.append({"candidate": cell,
                     "selected spread (pp)": f"{100 * (max(sel) - min(sel)):.1f}",
                     "train acc at selected": by_sigma(runs, s, "train_acc_at_best_val"),
                     "end spread (pp)": f"{100 * (max(end) - min(end)):.1f}",
                     "train acc at end": by_sigma(runs, s, "final_train_acc")})
    return pd.DataFrame(rows)


def run_tables(cfgs: dict[Key, dict], store_dir: Path | tuple[Path, ...] = STORE) -> str:
    """What the pilot prints for its selection: one row per run (where it interpolates and where
    selection lands), then, per cell with every sigma_w done, its spread on both measures."""
    out = markdown(pd.DataFrame([result_row(k, c, store_dir) for k, c in cfgs.items()]))
    spreads = spread_rows(cfgs, store_dir)
    return out if spreads.empty else out + "\n\n" + markdown(spreads)


def by_sigma(runs, summaries, column) -> str:
    """One summary value per sigma_w of a cell, each labelled with its sigma_w: '0.1: 98.5% / 2.5: 59.8%'."""
    return " / ".join(f"{k.sigma_w:g}: {x[column]:.1%}" for (k, _), x in zip(runs, summaries))


def grid_rows(cfgs: dict[Key, dict], shipped: tuple[str, dict] | None = None) -> pd.DataFrame:
    """Each candidate's sigma_w x seed grid read as its notebook reads it, on both measures (the
    selected predictors and the end-of-training ones): the spread (mean over seeds) with its 95%
    interval and noise floor, and how many of the predictors scored interpolate
    (analysis.at_selected, analysis.at_end_of_training, analysis.spread_table: what 01's notebook
    calls). ``shipped``: a (label, {"store": dir, "configs": [...]}) grid
    from the main store to read beside them. A candidate with a run not done reads 'incomplete'."""
    from initlib import analysis, store
    groups = {}
    for k, c in cfgs.items():
        groups.setdefault(f"{k.claim} {k.name}", []).append(c)
    sources = [(name, STORE, cs) for name, cs in groups.items()]
    if shipped is not None:
        sources.insert(0, (shipped[0], shipped[1]["store"], shipped[1]["configs"]))
    rows = []
    for name, store_dir, cs in sources:
        s = store.load_summaries(store_dir, cs)
        if len(s) < len(cs):
            rows.append({"grid": name, "runs": f"{len(s)} of {len(cs)} done: incomplete"})
            continue
        n_seeds = s["seed"].nunique()
        row = {"grid": name, "runs": f"{len(s)} ({n_seeds} seed{'s' if n_seeds > 1 else ''} x {s['sigma_w'].nunique()} sigma_w)"}
        for label, scored in (("selected", analysis.at_selected(s)), ("end", analysis.at_end_of_training(s))):
            t = analysis.spread_table(scored, ["width"]).iloc[0]
            row |= {f"{label} spread (pp) [95%]": f"{t['spread_pp']:.1f} [{t['ci_lo_pp']:.1f}, {t['ci_hi_pp']:.1f}]",
                    f"{label}: floor q95 (pp)": f"{t['floor_hi_pp']:.1f}",
                    f"{label}: interpolate (lowest train acc)":
                        f"{int(scored['interpolated'].sum())}/{len(s)} ({t['min_max_train_acc']:.1f}%)"}
        rows.append(row)
    return pd.DataFrame(rows)


def printed_tables(cfgs: dict[Key, dict], store_dir: Path = STORE, beside_shipped: bool = False) -> str:
    """The run tables main prints (:func:`run_tables`), and with ``beside_shipped`` those of the
    same cells at their notebook's cpu width after them, as shipped (:data:`SHIPPED`; a pilot's
    cells keep the last batch, as 01's shipped runs did until session 44): what a notes file quotes."""
    out = run_tables(cfgs, store_dir)
    return out + "\n\n" + run_tables(at_shipped_width(cfgs), SHIPPED) if beside_shipped else out


def shipped_width(claim: str) -> float:
    """The width claim ``claim``'s notebook runs at in the cpu profile (its params file)."""
    from initlib.params import load_params
    (params_file,) = (ROOT / "params").glob(f"{claim}_*.yaml")
    widths = {c["width"] for c in load_params(params_file, "cpu").configs}
    if len(widths) != 1:
        raise ValueError(f"{params_file.name}: the cpu profile runs widths {sorted(widths)}, not one")
    return widths.pop()


def at_shipped_width(cfgs: dict[Key, dict]) -> dict[Key, dict]:
    """The same cells with only the width changed to their notebook's cpu width (01's: 0.125):
    the runs results/cpu ships for them, where it has them, to read beside a wider pilot."""
    width = {claim: shipped_width(claim) for claim in {k.claim for k in cfgs}}
    return {Key(k.claim, f"{k.name} at width {width[k.claim]:g}", k.seed, k.sigma_w): {**c, "width": width[k.claim]}
            for k, c in cfgs.items()}


def bound(sw) -> list[dict]:
    """The configs of Sweep ``sw`` bound to the data in $INITLIB_DATA_DIR (its fingerprint is part
    of each run's identity, so a run on other data is another run), as the sweep binds them."""
    from initlib.sweep import bind_to_data
    bind_to_data([sw], os.environ.get("INITLIB_DATA_DIR"))
    return sw.configs


def pilot_configs(cs) -> list[dict]:
    """Pilot configs, bound to the data."""
    from initlib.params import Sweep
    return bound(Sweep(Path("claims_pilot"), "cpu", list(cs)))


def keyed_pilot_configs(cfgs: dict[Key, dict]) -> dict[Key, dict]:
    """:func:`configs`' candidates by Key, each bound to the data (the runs' identities)."""
    return dict(zip(cfgs, pilot_configs(cfgs.values())))


def shipped_configs(params_file: str) -> list[dict]:
    """A params file's cpu configs, bound to the data: the runs results/cpu ships for it."""
    from initlib.params import load_params
    return bound(load_params(ROOT / "params" / params_file, "cpu"))


def configs_with_last_batch(params_file: str, last_batch: str) -> list[dict]:
    """A params file's cpu configs with the epoch's last batch ``keep`` or ``drop``, bound to
    the data: its grid on either side of its rerun, whichever its params file declares today."""
    return [{**c, "last_batch": last_batch} for c in shipped_configs(params_file)]


def kept_batch_configs(params_file: str) -> list[dict]:
    """A params file's cpu configs with the epoch's last batch kept (``last_batch: keep``, the
    default), bound to the data: what results/cpu shipped for it before its rerun with the batch
    dropped. 01's were shipped until session 44 and are in bench/claims_pilot_runs/ since."""
    return configs_with_last_batch(params_file, "keep")


def shipped_sgd_grid() -> tuple[str, dict]:
    """01's low-lr SGD arm (cpu profile, width 0.125) with the last batch kept, as results/cpu
    shipped it until session 44 (the arm the earlier pilots were read beside), for the grid table."""
    return "01 SGD, width 0.125, last batch kept", {
        "store": PILOT_RUNS, "configs": [c for c in kept_batch_configs("01_optimizer_dependence.yaml") if c["optimizer"] == "sgd"]}


def verdict_03(arms: str, seeds, sigmas, low_sigmas) -> str:
    """Notebook 03's verdict, by the function its verdict cell calls (analysis.decide_l2_lr), on
    a pair of arms: ``shipped`` reads 03's cpu runs from results/cpu (width 0.25 since session
    30; it must print the committed report's verdict: the check that this reads a grid as the
    notebook does); ``width0.25`` reads the pilot's low-lr arm (01 width0.25: 01's SGD
    with only the width doubled) and its L2 arm (03 lr0.15_l2_T4.7_width0.25) from the pilot
    store, the low arm at ``low_sigmas`` (its ends are enough: a max - min over fewer sigma_w
    is no larger, so the difference the rule asks to be above 0 can only shrink). Every run of
    both arms must be done."""
    from initlib import analysis, store
    if arms == "shipped":
        cs = shipped_configs("03_l2_and_lr.yaml")
        store_dir = RESULTS_CPU
    elif arms == "width0.25":
        cs = pilot_configs(list(configs(["01"], ["width0.25"], seeds, low_sigmas).values()) +
                           list(configs(["03"], ["lr0.15_l2_T4.7_width0.25"], seeds, sigmas).values()))
        store_dir = STORE
    else:
        raise SystemExit(f"--verdict03 {arms}: expected 'shipped' or 'width0.25'")
    s = store.load_summaries(store_dir, cs)
    if len(s) < len(cs):
        return f"03 on {arms}: {len(s)} of {len(cs)} runs done: no verdict yet"
    v = analysis.decide_l2_lr(s)
    return f"03 on {arms} ({len(s)} runs): **{v.word}**: {v.text}"


def verdict_05(arms: str, pilot_store: Path = STORE) -> str:
    """Notebook 05's verdict, by the function its verdict cell calls (analysis.verdict_depth, at
    the params file's large_sigma_w), with the depth table its notebook shows: ``shipped`` reads
    05's cpu runs from results/cpu (it must print the committed report's verdict: the check that
    this reads the runs as the notebook does); ``resnet110_w0.5`` reads 05's ResNet-9 runs with the
    last batch kept, as the ResNet-110 pilot trained (01's SGD runs as shipped until session 44,
    and 04's b = 128 arm until session 46: bench/claims_pilot_runs/ since, read wherever they are,
    :data:`SHIPPED`; 05's own drop it since session 42), with the pilot's ResNet-110 in place of
    ResNet-56, so that the verdict speaks for ResNet-110 alone (the rule holds if some deep
    architecture fails at large sigma_w while it interpolates at the smallest: with ResNet-56
    beside it, ResNet-110 could not change the word).
    Every run must be done. ``pilot_store``: where the pilot's runs are read (PILOT_RUNS: the
    committed ones, without training)."""
    from initlib import analysis, store
    from initlib.params import load_params
    params = load_params(ROOT / "params" / "05_depth.yaml", "cpu")
    shipped = bound(params)
    if arms == "shipped":
        sources = [(RESULTS_CPU, shipped)]
    elif arms == "resnet110_w0.5":
        kept = [c for c in kept_batch_configs("05_depth.yaml") if c["arch"] == "resnet9"]
        sources = [(SHIPPED, kept),
                   (pilot_store, pilot_configs(configs(["05"], [arms]).values()))]
    else:
        raise SystemExit(f"--verdict05 {arms}: expected 'shipped' or 'resnet110_w0.5'")
    parts = [store.load_summaries(d, cs) for d, cs in sources]
    n, done = sum(len(cs) for _, cs in sources), sum(len(p) for p in parts)
    if done < n:
        return f"05 on {arms}: {done} of {n} runs done: no verdict yet"
    s = pd.concat(parts, ignore_index=True)
    v = analysis.verdict_depth(s, params.analysis["large_sigma_w"])
    t = analysis.depth_table(s).drop(columns="status")
    for c in ("max_train_acc", "test_acc_at_best_val"):
        t[c] = t[c].map(lambda x: f"{x:.1f}")
    return f"{markdown(t)}\n\n05 on {arms} ({n} runs): **{v.word}**: {v.text}"


# 03's L2 doses as a 3 x 3 design (sessions 31-33): each eta lambda per step at lr 0.05, 0.1 and
# 0.15, so that the three lr share a T_L2 at the horizon (lr x lambda x 5,120 steps: 0.51, 1.55, 4.7).
SAME_CLOCK_03 = {"1.0e-4": ((0.05, 2.0e-3), (0.1, 1.0e-3), (0.15, 6.7e-4)),
                 "3.0e-4": ((0.05, 6.1e-3), (0.1, 3.0e-3), (0.15, 2.0e-3)),
                 "9.2e-4": ((0.05, 1.83e-2), (0.1, 9.2e-3), (0.15, 6.1e-3))}
SAME_CLOCK_LRS = tuple(lr for lr, _ in SAME_CLOCK_03["1.0e-4"])  # every row has its doses in this lr order
assert all(tuple(lr for lr, _ in row) == SAME_CLOCK_LRS for row in SAME_CLOCK_03.values())
SAME_CLOCK_SIGMAS = (0.1, 2.5)  # every dose runs the two sigma_w ends


def same_clock_03(store_dir: Path | tuple[Path, ...] | None = None) -> str:
    """03's L2 doses read as a 3 x 3 design (:data:`SAME_CLOCK_03`): per eta lambda, the doses at
    lr 0.05, 0.1 and 0.15 with (nearly) the same T_L2 at the horizon. Three tables:
    (1) each dose's selected predictors at the two sigma_w ends, on the seeds both end doses of
    its row (lr 0.05 and 0.15) ran, with their clocks at the selected epochs and the spread; (2)
    per eta lambda, spread(lr 0.05) - spread(lr 0.15) on those seeds with its 95% interval
    (initlib.stats.difference_interval: test images shared, seeds resampled), and the slope of
    the spread per decade of lr over the three doses at seed 0 (initlib.stats.trend_interval): if
    T_L2 alone governed, both would be 0 within the noise; (3) per lr, the slope of the spread
    against log10 T_L2 at the horizon over its three doses, seed 0: if T_L2 orders the spread at a
    fixed lr, the slope is below 0. Each of (2) and (3) says how many of its predictors
    interpolate (train acc. >= 99.5%): a pair or trend with one that does not is outside the
    claims' premise, as notebook 06 would leave it out. Observations beside notebook 06's rule,
    not a verdict. The runs are 03's with the last batch kept, as sessions 31-33 read them
    (results/cpu until 03's rerun with it dropped ships, bench/claims_pilot_runs/ after:
    :data:`SHIPPED`)."""
    from initlib import analysis, store
    from initlib.stats import difference_interval, trend_interval
    store_dir = store_dir or SHIPPED
    doses = {d for row in SAME_CLOCK_03.values() for d in row}
    cs = [c for c in kept_batch_configs("03_l2_and_lr.yaml")
          if (c["lr"], c["l2"]) in doses and c["sigma_w"] in SAME_CLOCK_SIGMAS]
    s = store.load_summaries(store_dir, cs)
    if s.empty:
        return "same clock: no dose is done yet: nothing to read"
    s = analysis.with_selected_accuracy(s)
    by_dose = {d: s[(s["lr"] == d[0]) & (s["l2"] == d[1])] for d in doses}
    # the claims' premise: a predictor counts if it fits its training set (train acc >= 99.5%)
    interpolating = lambda g: "{} of {}".format(*analysis.share_selected_interpolating(g))  # noqa: E731
    full = lambda g: set(g.groupby("seed").filter(lambda x: len(x) == len(SAME_CLOCK_SIGMAS))["seed"])  # noqa: E731
    # one dose on some seeds: its runs at the two sigma_w ends, ordered as correct_matrix stacks them
    cells = lambda d, seeds: by_dose[d][by_dose[d]["seed"].isin(seeds)].sort_values(["seed", "sigma_w"])  # noqa: E731
    done = lambda ds, seeds: all(set(seeds) <= full(by_dose[d]) for d in ds)  # noqa: E731
    rows, diffs = [], []
    for eta_lambda, row in SAME_CLOCK_03.items():
        ends = (row[0], row[-1])
        seeds = sorted(full(by_dose[ends[0]]) & full(by_dose[ends[1]]))
        if not seeds:
            diffs.append({"eta_lambda": eta_lambda, "seeds": "none yet"})
            continue
        for lr, l2 in row:
            g = cells((lr, l2), seeds)
            if len(g) == 0:
                continue
            rows.append({"eta_lambda": eta_lambda, "lr": lr, "l2": l2, "T_L2 at horizon": f"{g['T_L2'].iloc[0]:.2f}",
                         "seeds": ", ".join(str(v) for v in sorted(set(g["seed"]))),
                         "selected epochs": ", ".join(str(int(e)) for e in g["best_val_epoch"]),
                         "train acc at selection (%)": ", ".join(f"{100 * a:.1f}" for a in g["train_acc_at_best_val"]),
                         "T_L2 at selection": ", ".join(f"{t:.2f}" for t in g["T_L2_at_best_val"]),
                         "T_SGD at selection": ", ".join(f"{t:.3f}" for t in g["T_SGD_at_best_val"]),
                         "spread (pp)": f"{100 * analysis.spread(analysis.correct_matrix(g).mean(axis=-1)):.1f}"})
        correct = [analysis.correct_matrix(cells(d, seeds)) for d in ends]  # (seeds, sigma_w, images)
        d_point = 100 * (analysis.spread(correct[0].mean(axis=-1)) - analysis.spread(correct[1].mean(axis=-1)))
        lo, hi = (100 * v for v in difference_interval(*correct))
        lr_slope, lr_interpolating = "not all done", ""
        if done(row, [0]):
            b, b_lo, b_hi = (100 * v for v in trend_interval([analysis.correct_matrix(cells(d, [0])) for d in row],
                                             [np.log10(lr) for lr, _ in row]))
            lr_slope = f"{b:+.1f} [{b_lo:+.1f}, {b_hi:+.1f}]"
            lr_interpolating = interpolating(pd.concat([cells(d, [0]) for d in row]))
        diffs.append({"eta_lambda": eta_lambda, "seeds": ", ".join(map(str, seeds)),
                      "spread(lr 0.05) - spread(lr 0.15) (pp) [95%]": f"{d_point:+.1f} [{lo:+.1f}, {hi:+.1f}]",
                      "predictors that interpolate": interpolating(pd.concat([cells(d, seeds) for d in ends])),
                      "slope of the spread per decade of lr, seed 0 (pp) [95%]": lr_slope,
                      "its predictors that interpolate": lr_interpolating})
    trends = []
    for i, lr in enumerate(SAME_CLOCK_LRS):
        ds = [row[i] for row in SAME_CLOCK_03.values()]
        if not done(ds, [0]):
            trends.append({"lr": lr, "doses (lambda)": ", ".join(f"{d[1]:g}" for d in ds),
                           "slope of the spread per decade of T_L2 (pp) [95%]": "not all done"})
            continue
        groups = [cells(d, [0]) for d in ds]
        x = [np.log10(float(g["T_L2"].iloc[0])) for g in groups]  # each dose's clock at its horizon
        b, lo, hi = (100 * v for v in trend_interval([analysis.correct_matrix(g) for g in groups], x))
        trends.append({"lr": lr, "doses (lambda)": ", ".join(f"{d[1]:g}" for d in ds),
                       "T_L2 at horizon": ", ".join(f"{10 ** v:.2f}" for v in x),
                       "slope of the spread per decade of T_L2 (pp) [95%]": f"{b:+.1f} [{lo:+.1f}, {hi:+.1f}]",
                       "predictors that interpolate": interpolating(pd.concat(groups))})
    return "\n\n".join(markdown(pd.DataFrame(t)) for t in (rows, diffs, trends))


def batch_sizes_04(store_dir: Path | None = None) -> str:
    """04's shipped grid, one row per b (the table of the notes' "Session 39"): T_SGD at the
    horizon beside the paper's (eta 1e-3, 300 epochs of 40,000 images at that b), the selected and
    end-of-training spreads with their 95% intervals and floors (analysis.spread_table, as notebook
    04 reads them), and how many of each measure's predictors interpolate (the lowest train acc.)."""
    from initlib import analysis, store
    s = store.load_summaries(store_dir or RESULTS_CPU, shipped_configs("04_batch_size.yaml"))
    sel = analysis.spread_table(analysis.at_selected(s), ["batch_size"])
    end = analysis.spread_table(analysis.at_end_of_training(s), ["batch_size"])

    def share(t) -> str:  # how many of a row's predictors interpolate (the lowest train acc.)
        return (f"{round(t['interpolated'] * t['runs'] / 100)}/{t['runs']} "
                f"({analysis.train_acc_text(t['min_max_train_acc'])}%)")
    rows = []
    for (_, a), (_, e) in zip(sel.iterrows(), end.iterrows()):
        b = int(a["batch_size"])
        paper = clocks_of(1e-3, 0.0, b, PAPER_EPOCHS * steps_per_epoch(40000, b))["T_SGD"]
        rows.append({"b": b, "T_SGD (paper's)": f"{a['T_SGD']:.2g} ({paper:.2g})",
                     "selected spread, pp [95%]": f"{a['spread_pp']:.1f} [{a['ci_lo_pp']:.1f}, {a['ci_hi_pp']:.1f}]",
                     "floor q95": f"{a['floor_hi_pp']:.1f}",
                     "selected predictors that interpolate (lowest)": share(a),
                     "end spread, pp [95%]": f"{e['spread_pp']:.1f} [{e['ci_lo_pp']:.1f}, {e['ci_hi_pp']:.1f}]",
                     "end predictors that interpolate (lowest)": share(e)})
    return markdown(pd.DataFrame(rows))


def _range(values, spec) -> str:
    """min - max of ``values``, one number where both read the same; ``spec`` is a format spec
    or a function of one value."""
    text = spec if callable(spec) else (lambda v: f"{v:{spec}}")
    lo, hi = text(min(values)), text(max(values))
    return lo if lo == hi else f"{lo} - {hi}"


def train_acc_percent(fraction: float) -> str:
    """A train accuracy (a fraction) in percent as the notebooks print it (analysis.train_acc_text:
    a value below the 99.5% line never reads as on it)."""
    from initlib.analysis import train_acc_text
    return f"{train_acc_text(100 * fraction)}%"


def last_batch_by_b(store_dir: Path | None = None) -> str:
    """01's and 04's SGD runs with the last batch kept (width 0.125, 5,000 images, lr 0.015, 128
    epochs; shipped until their reruns, in bench/claims_pilot_runs/ since), one row per b: the
    last batch (n mod b, or b) and its share of b, and, over the runs, the share of the epochs
    after tau_interp at >= 99% train accuracy, the lowest train accuracy after tau, and the train
    accuracy at the end (min - max)."""
    from initlib import store
    from initlib.metrics import share_interpolating_after_tau, tau_interp
    src = (store_dir,) if store_dir else SHIPPED
    cfgs = [c for f in ("01_optimizer_dependence.yaml", "04_batch_size.yaml") for c in kept_batch_configs(f)
            if c["optimizer"] == "sgd"]
    by_b: dict[int, list] = {}
    for c in {store.run_dir(src[0], c).name: c for c in cfgs}.values():
        rdir = run_dir_in(src, c)
        if store.is_done(rdir):
            by_b.setdefault(c["batch_size"], []).append((c, store.read_epochs(rdir)))
    def last_share(c) -> float:  # the last batch's share of b
        return (c["n_train"] % c["batch_size"] or c["batch_size"]) / c["batch_size"]
    rows = []
    for b, runs in sorted(by_b.items()):
        last = round(last_share(runs[0][0]) * b)
        after = [e[e["epoch"] > tau_interp(e)]["train_acc"].min() for _, e in runs if tau_interp(e) is not None]
        rows.append({"b": b, "last batch (share of b)": f"{last} ({last / b:.2f})", "runs": len(runs),
                     "interpolate": sum(tau_interp(e) is not None for _, e in runs),
                     "epochs after tau at >= 99%": _range([share_interpolating_after_tau(e) for _, e in runs
                                                            if tau_interp(e) is not None], ".2f"),
                     "lowest train acc after tau": _range(after, ".1%"),
                     "train acc at the end": _range([e["train_acc"].iloc[-1] for _, e in runs], ".1%")})
    # run by run: does staying fitted go with the last batch's share of b, or with b?
    fitted = [(c, share_interpolating_after_tau(e)) for runs in by_b.values() for c, e in runs if tau_interp(e) is not None]
    stay = np.array([f for _, f in fitted])
    lines = []
    for label, x in (("the last batch's share of b", [last_share(c) for c, _ in fitted]),
                     ("b", [c["batch_size"] for c, _ in fitted])):
        rho, lo, hi = spearman_interval(np.array(x, float), stay)
        lines.append(f"- Spearman rho(epochs after tau at >= 99%, {label}) over the {len(stay)} runs: "
                     f"{rho:+.2f} [{lo:+.2f}, {hi:+.2f}] (95%, runs resampled)")
    return markdown(pd.DataFrame(rows)) + "\n\n" + "\n".join(lines)


# Each rerun with the last batch dropped, read by the grid's own factor (the rows of its table).
# 03's by its cells (lr, l2): the arms, the control and the L2 doses, whose sigma_w grids differ.
RERUN_BY = {"01_optimizer_dependence": ("optimizer",), "03_l2_and_lr": ("lr", "l2"),
            "04_batch_size": ("batch_size",), "06_clocks": ("lr",)}


def last_batch_sides(f: str) -> dict[str, tuple]:
    """A grid's two sides, each (where its runs are read, its configs): the last batch kept
    (:data:`SHIPPED`) and dropped (results/cpu, and bench/rerun_drop_runs/ while its rerun trains)."""
    return {"kept": (SHIPPED, kept_batch_configs(f)),
            "dropped": ((RESULTS_CPU, RERUN_DROP_RUNS), configs_with_last_batch(f, "drop"))}


def rerun(notebook: str) -> str:
    """A notebook's cpu grid with the last batch kept (shipped until its rerun; the runs in
    bench/claims_pilot_runs/ since) beside the same grid with it dropped (results/cpu), read as
    the notebooks read them: per measure (the selected predictors, the paper's, then the
    end-of-training ones) and value of the grid's factor (:data:`RERUN_BY`: 01's optimizer, 03's
    cell, 04's b, 06's lr), the spread (mean over seeds, over each group's own sigma_w grid) with
    its 95% interval, its noise floor (95% quantile), and how many predictors scored interpolate
    (the lowest train accuracy among them); then, per value, whether its runs stay fitted after
    they first interpolate. Each side is read wherever its runs are (:data:`SHIPPED`; the dropped
    side also from bench/rerun_drop_runs/ while its rerun trains). A grid with a run not done
    reads 'incomplete'."""
    from initlib import analysis, store
    from initlib.metrics import share_interpolating_after_tau, tau_interp
    f, by = f"{notebook}.yaml", list(RERUN_BY[notebook])
    key = lambda c: tuple(c[k] for k in by)  # noqa: E731  (a config's value of the factor)
    grids = last_batch_sides(f)
    tables = {}  # (measure, last batch) -> (spread table by the factor, predictors scored)
    for label, (src, cfgs) in grids.items():
        s = store.load_summaries(src, cfgs)
        if len(s) < len(cfgs):
            return f"{notebook} with the last batch {label}: {len(s)} of {len(cfgs)} runs done: incomplete"
        for measure, scored in (("selected", analysis.at_selected(s)), ("end", analysis.at_end_of_training(s))):
            tables[measure, label] = (analysis.spread_table(scored, by, sigma_grid_per_group=True)
                                      .set_index(by), scored)
    rows = []
    for measure in ("selected", "end"):
        for value in tables[measure, "kept"][0].index:
            for label in grids:
                t, scored = tables[measure, label]
                r = t.loc[value]
                mine = scored[[row == _as_tuple(value) for row in scored[by].itertuples(index=False, name=None)]]
                rows.append({"measure": measure, **dict(zip(by, _as_tuple(value))), "last batch": label,
                             "spread pp [95%]": f"{r['spread_pp']:.1f} [{r['ci_lo_pp']:.1f}, {r['ci_hi_pp']:.1f}]",
                             "floor q95": f"{r['floor_hi_pp']:.1f}",
                             "interpolate (lowest train acc)":
                                 f"{int(mine['interpolated'].sum())}/{len(mine)} "
                                 f"({analysis.train_acc_text(r['min_max_train_acc'])}%)"})
    fitted = []  # run by run: does training stay fitted after it first interpolates?
    for value in tables["selected", "kept"][0].index:
        for label, (src, cfgs) in grids.items():
            runs = [store.read_epochs(store.find_done(src, c)) for c in cfgs if key(c) == _as_tuple(value)]
            after = [share_interpolating_after_tau(e) for e in runs if tau_interp(e) is not None]
            fitted.append({**dict(zip(by, _as_tuple(value))), "last batch": label,
                           "runs that interpolate": f"{len(after)}/{len(runs)}",
                           "epochs after tau at >= 99%": _range(after, ".0%") if after else "-",
                           "train acc at the end": _range([e["train_acc"].iloc[-1] for e in runs], train_acc_percent)})
    return markdown(pd.DataFrame(rows)) + "\n\n" + markdown(pd.DataFrame(fitted))


def corners_03() -> str:
    """Notebook 03's rule (analysis.verdict_l2_lr, by measure) on its two corner cells, the only
    cells it decides on (found among 03's configs by analysis.l2_lr_corners, the rule's own
    choice: in the cpu profile lr 0.015 without L2, and lr 0.15 with its largest L2, 6.1e-3), with
    the last batch kept (as shipped until its rerun) and dropped (its rerun, read wherever its runs
    are, bench/rerun_drop_runs/ while it trains): each cell's spread with its 95% interval and noise
    floor, their difference, how many of the L2 cell's predictors interpolate, and the word. Each
    cell's interval is drawn with its own fixed seed, so the rerun's other cells cannot change
    these numbers: the dropped rows are 03's word before its grid is complete."""
    from initlib import analysis, store
    f = "03_l2_and_lr.yaml"
    sides = last_batch_sides(f)
    corners = analysis.l2_lr_corners((c["lr"], c["l2"]) for c in sides["dropped"][1])
    if corners is None:
        return "03's configs have no corner cells (a no-L2 cell at the smallest lr, an L2 cell at the largest)"
    (lr_lo, _), (lr_hi, l2_hi) = corners
    corner = lambda c: (float(c["lr"]), float(c["l2"])) in corners  # noqa: E731
    rows = []
    for label, (src, cfgs) in sides.items():
        cfgs = [c for c in cfgs if corner(c)]
        s = store.load_summaries(src, cfgs)
        if len(s) < len(cfgs):
            return f"03's corner cells with the last batch {label}: {len(s)} of {len(cfgs)} runs done: incomplete"
        table, end, end_table = analysis.l2_lr_tables(s)
        for measure, t, scored in (("selected", table, analysis.at_selected(s)), ("end", end_table, end)):
            v = analysis.verdict_l2_lr(t, s if measure == "selected" else end)
            low, high, diff = v.measured
            cell = scored[(scored["lr"] == lr_hi) & (scored["l2"] == l2_hi)]
            top = t[(t["lr"] == lr_hi) & (t["l2"] == l2_hi)].iloc[0]
            rows.append({"measure": measure, "last batch": label,
                         f"spread, lr {lr_lo:g} no L2 [95%] (floor)": _cite(low),
                         f"spread, lr {lr_hi:g} L2 {_short_e(l2_hi)} [95%] (floor)": _cite(high),
                         "difference [95%]": _cite(diff, "+"),
                         "L2 cell interpolates (lowest)": f"{int(cell['interpolated'].sum())}/{len(cell)} "
                                                           f"({analysis.train_acc_text(top['min_max_train_acc'])}%)",
                         "word": v.short_word})
    return markdown(pd.DataFrame(rows))


def _cite(m: dict, sign: str = "") -> str:
    """A measured value the way the notes cite it: '4.6 [2.6, 6.6] (5.6)', value [95%] (floor)."""
    return (f"{m['value']:{sign}.1f} [{m['lo']:{sign}.1f}, {m['hi']:{sign}.1f}]"
            + (f" ({m['floor']:.1f})" if m["floor"] is not None else ""))


def _short_e(x: float) -> str:
    """A small number the way the notes write it: 0.0061 -> '6.1e-3'."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _as_tuple(value) -> tuple:
    """An index value of a table set on one column (a scalar) or several (a tuple), as a tuple."""
    return value if isinstance(value, tuple) else (value,)


def spearman_interval(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Spearman's rho of paired x, y and its 95% percentile interval over resampled pairs
    (scipy.stats.bootstrap, 2,000 resamples, a fixed seed)."""
    from scipy import stats
    res = stats.bootstrap((x, y), lambda a, b: stats.spearmanr(a, b).statistic, paired=True, vectorized=False,
                          n_resamples=2000, method="percentile", random_state=0)
    return float(stats.spearmanr(x, y).statistic), *map(float, res.confidence_interval)


def last_batch_pairs(cfgs: dict[Key, dict], store_dir: Path = STORE) -> str:
    """Each pilot run with the last batch dropped beside its twin that kept it (the same config
    otherwise: the same hash as a shipped or earlier pilot run, read from results/cpu or
    ``store_dir``, :func:`run_dir_in`), one row each (:func:`result_row`); then, per cell, both
    spreads."""
    dropped = {k: c for k, c in cfgs.items() if c["last_batch"] == "drop"}
    kept = {k: {**c, "last_batch": "keep"} for k, c in dropped.items()}
    sides = (("dropped", dropped, store_dir), ("kept", kept, (RESULTS_CPU, store_dir)))
    rows = [{**result_row(k, side[k], stores), "last batch": label}
            for k in dropped for label, side, stores in sides]
    spreads = [{**r, "last batch": label}  # each side's spread, cell by cell
               for label, side, stores in sides for cell in dict.fromkeys(k.cell for k in dropped)
               for r in spread_rows({k: c for k, c in side.items() if k.cell == cell}, stores).to_dict("records")]
    out = markdown(pd.DataFrame(rows))
    return out + ("\n\n" + markdown(pd.DataFrame(spreads)) if spreads else "")


def markdown(df: pd.DataFrame) -> str:
    return "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n" + "\n".join(
        "| " + " | ".join(str(v) for v in r) + " |" for r in df.fillna("").itertuples(index=False))


def listed(ap: argparse.ArgumentParser, flag: str, text: str, kind) -> tuple:
    """A comma-separated option as a tuple of ``kind``; a clear error naming the option, before
    anything is trained, if it is not one."""
    try:
        return tuple(kind(v) for v in text.split(","))
    except ValueError:
        ap.error(f"{flag} {text}: not a comma-separated list of {'integers' if kind is int else 'numbers'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--claims", default="03,04,05")
    ap.add_argument("--plan", action="store_true", help="the clock table only, no training")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--only", default=None, help="comma-separated candidate names (default: all of --claims)")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    ap.add_argument("--sigmas", default=",".join(map(str, SIGMAS)),
                    help="comma-separated sigma_w (default: both ends, %(default)s)")
    ap.add_argument("--grid", action="store_true",
                    help="also read each candidate's whole sigma_w x seed grid as its notebook would "
                         "(spread with interval and floor, interpolating share); with --claims 01, beside "
                         "01's shipped SGD arm from results/cpu")
    ap.add_argument("--verdict03", choices=("shipped", "width0.25"), default=None,
                    help="notebook 03's verdict on its shipped cpu arms, or on the width-0.25 pilot's two arms "
                         "(01 width0.25 and 03 lr0.15_l2_T4.7_width0.25 at --seeds x --sigmas)")
    ap.add_argument("--verdict05", choices=("shipped", "resnet110_w0.5"), default=None,
                    help="notebook 05's verdict on its shipped cpu runs, or on 05's ResNet-9 runs with the "
                         "ResNet-110 pilot in place of ResNet-56")
    ap.add_argument("--beside-shipped", action="store_true",
                    help="also the same cells at width 0.125 from results/cpu (only the width differs)")
    ap.add_argument("--low-sigmas", default=None,
                    help="with --verdict03 width0.25: the low-lr arm's sigma_w (default: --sigmas)")
    ap.add_argument("--same-clock03", action="store_true",
                    help="03's L2 doses as a 3 x 3 design: per eta lambda, the spreads at lr 0.05, 0.1 and 0.15, the "
                         "difference of the end lr and the slope against log10 lr; per lr, the slope of the spread "
                         "against log10 T_L2")
    ap.add_argument("--batch-sizes04", action="store_true",
                    help="04's shipped grid, one row per b: T_SGD beside the paper's, both measures' spreads")
    ap.add_argument("--workers", type=int, default=2,
                    help="with --train: worker processes (default 2, single-threaded, one per core; 1 trains in "
                         "this process on torch's default threads)")
    ap.add_argument("--corners03", action="store_true",
                    help="03's rule on its two corner cells, last batch kept beside dropped (no training)")
    ap.add_argument("--rerun", choices=sorted(RERUN_BY), default=None,
                    help="a notebook's cpu grid with the last batch kept beside its rerun with it dropped, per value "
                         "of its factor (01: optimizer, 04: b, 06: lr)")
    ap.add_argument("--last-batch", action="store_true",
                    help="01/04's shipped SGD runs by b: the last batch's share of b and whether runs stay fitted; "
                         "then each pilot run of --claims/--only with the last batch dropped beside its twin that kept it")
    a = ap.parse_args()
    if a.batch_sizes04:
        print(batch_sizes_04())
        return
    if a.rerun:
        print(rerun(a.rerun))
        return
    if a.corners03:
        print(corners_03())
        return
    if a.same_clock03:
        print(same_clock_03())
        return
    claims = a.claims.split(",")
    seeds = listed(ap, "--seeds", a.seeds, int)
    sigmas = listed(ap, "--sigmas", a.sigmas, float)
    low_sigmas = listed(ap, "--low-sigmas", a.low_sigmas, float) if a.low_sigmas else sigmas
    cfgs = configs(claims, a.only.split(",") if a.only else None, seeds, sigmas)
    if not cfgs:
        ap.error(f"--only {a.only}: no candidate of claims {a.claims} has that name")
    if a.last_batch:
        from initlib import store
        if PILOT_RUNS.is_dir():
            store.import_runs(PILOT_RUNS, STORE, warn=lambda m: print(m, file=sys.stderr))
        print(last_batch_by_b() + "\n\n" + last_batch_pairs(keyed_pilot_configs(cfgs)))
        return
    if a.plan:
        # sigma_w changes no clock: one row per candidate
        print(markdown(pd.DataFrame([plan_row(k, c) for k, c in cfgs.items() if k.sigma_w == sigmas[0] and k.seed == seeds[0]])))
        return
    from initlib import store
    if PILOT_RUNS.is_dir():
        store.import_runs(PILOT_RUNS, STORE, warn=lambda m: print(m, file=sys.stderr))
    cfgs = keyed_pilot_configs(cfgs)
    if a.train:
        from initlib.sweep import run_sweep
        run_sweep(list(cfgs.values()), STORE, os.environ.get("INITLIB_DATA_DIR"), workers=a.workers, desc="claims pilot")
    if STORE.is_dir():
        n = store.export_runs(STORE, list(cfgs.values()), PILOT_RUNS, warn=lambda m: print(m, file=sys.stderr))
        print(f"{n} finished pilot runs of this selection kept in {PILOT_RUNS.relative_to(ROOT)}/", file=sys.stderr)
    print(printed_tables(cfgs, beside_shipped=a.beside_shipped))
    if a.grid:
        print("\n" + markdown(grid_rows(cfgs, shipped_sgd_grid() if claims == ["01"] else None)))
    if a.verdict03:
        print("\n" + verdict_03(a.verdict03, seeds, sigmas, low_sigmas))
    if a.verdict05:
        print("\n" + verdict_05(a.verdict05))


if __name__ == "__main__":
    main()
