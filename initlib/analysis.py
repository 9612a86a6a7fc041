"""Tables and verdicts of the six findings, as pure functions of stored runs.

Inputs are the DataFrames of :func:`initlib.store.load_summaries` (one row per run) and
:func:`initlib.store.load_epochs` (one row per run and epoch). Accuracies there are
fractions; tables report percentages and percentage points (pp).

Spread (the paper's "test-accuracy spread"): for one group of runs that differ only in
``sigma_w`` (and one seed), max minus min of ``test_acc_at_best_val`` over the sigma_w grid.
With several seeds we compute the spread per seed and report its mean and range
(min..max over seeds); the range is the noise floor each verdict compares against.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .clocks import CLOCKS
from . import metrics
from .metrics import spread

ADAPTIVE = ("adam", "adamw", "muon")


@dataclass
class Verdict:
    holds: bool | None  # None: cannot be decided from these runs
    text: str           # our numbers, computed from the runs
    paper: str = ""     # the paper's number, quoted for comparison (never used to decide)
    rule: str = ""      # the rule that decided it, in words

    @property
    def word(self) -> str:
        return {True: "HOLDS", False: "DOES NOT HOLD at this scale", None: "UNDECIDED"}[self.holds]

    def __str__(self):
        return f"{self.word}: {self.text}" + (f" (paper: {self.paper})" if self.paper else "")

    def to_dict(self) -> dict:
        """The verdict as data (what the README, the site and the tests read)."""
        return {"holds": self.holds, "word": self.word, "ours": self.text, "paper": self.paper,
                "rule": self.rule}


def decided_by_rule(fn):
    """Attach ``fn``'s docstring (its rule, in words) to the Verdict it returns, so that the
    rule printed beside a verdict is the one the code states, never a paraphrase."""
    rule = " ".join(fn.__doc__.split())

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        (out[0] if isinstance(out, tuple) else out).rule = rule
        return out
    return wrapper


def pp_with_range(row) -> str:
    """'9.0 pp' for one seed, '9.0 pp (8.1..9.9)' (mean, min..max over seeds) for several."""
    out = f"{row['spread_pp']:.1f} pp"
    if row.get("seeds", 1) > 1:
        out += f" ({row['spread_min_pp']:.1f}..{row['spread_max_pp']:.1f})"
    return out


def _over_seeds(per_seed: pd.DataFrame, by: list[str], **extra) -> pd.DataFrame:
    """From one row per (group, seed) with its ``spread``: per group the mean spread and its
    range over seeds (in pp), the ``extra`` aggregations, and the mean clocks reached. A seed
    whose spread is undefined (NaN) makes the group's spread undefined: never a mean of what
    is left."""
    keys = by or ["_all"]
    g = per_seed.assign(_all=0).groupby(keys, dropna=False)
    strict_mean = lambda v: v.mean(skipna=False)  # noqa: E731
    strict_min = lambda v: v.min(skipna=False)  # noqa: E731
    strict_max = lambda v: v.max(skipna=False)  # noqa: E731
    out = g.agg(spread_pp=("spread", strict_mean), spread_min_pp=("spread", strict_min),
                spread_max_pp=("spread", strict_max), **extra,
                **{c: (c, "mean") for c in CLOCKS}).reset_index()
    for c in ("spread_pp", "spread_min_pp", "spread_max_pp"):
        out[c] = 100 * out[c]
    return out.drop(columns=["_all"], errors="ignore")


def complete_spread(runs: pd.DataFrame, n_sigma: int) -> float:
    """The spread of one group of runs over the sigma_w grid, defined only when all
    ``n_sigma`` runs are there, finished, with a selected accuracy; else NaN. A diverged or
    missing run never leaves a spread of the values that remain."""
    ok = (len(runs) == n_sigma and (runs["status"] == "finished").all()
          and np.isfinite(runs["test_acc_at_best_val"].astype(float)).all())
    return spread(runs["test_acc_at_best_val"]) if ok else math.nan


def with_selected_accuracy(summaries: pd.DataFrame) -> pd.DataFrame:
    """``test_acc_at_best_val`` measured on every test image (``selected_test_acc``) when every
    run has it, else on the per-epoch test subset (runs from before the selected predictor was
    kept); ``test_images`` says how many images each accuracy is over."""
    full = "selected_test_acc" in summaries and summaries["selected_test_acc"].notna().all()
    if full:
        return summaries.assign(test_acc_at_best_val=summaries["selected_test_acc"].astype(float),
                                test_images=summaries["selected_test_n"].astype(int))
    return summaries.assign(test_images=summaries["n_test"])


def spread_uncertainty(runs: pd.DataFrame) -> dict:
    """The 95% interval of one group's spread (bootstrap over test images and seeds, from the
    per-image correctness of each selected predictor; nan for runs without it) and its noise
    floor (initlib.stats.noise_floor), in pp."""
    from .stats import noise_floor, spread_interval
    from .train import unpack_correct
    acc = runs.pivot_table(index="seed", columns="sigma_w", values="test_acc_at_best_val", dropna=False)
    floor = noise_floor(acc.to_numpy(), int(runs["test_images"].min()))
    lo = hi = math.nan
    if ("selected_test_correct" in runs and runs["selected_test_correct"].notna().all()
            and np.isfinite(acc.to_numpy()).all()):
        n = int(runs["test_images"].iloc[0])
        by = {(r.seed, r.sigma_w): unpack_correct(r.selected_test_correct, n) for r in runs.itertuples()}
        correct = np.stack([[by[(seed, sw)] for sw in acc.columns] for seed in acc.index])
        lo, hi = spread_interval(correct)
    return {"ci_lo_pp": 100 * lo, "ci_hi_pp": 100 * hi, "floor_pp": 100 * floor["expected"],
            "floor_hi_pp": 100 * floor["upper"], "floor_from": floor["source"]}


def spread_table(summaries: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Spread over sigma_w for each group ``by`` (mean and range over seeds), with the mean
    clocks reached, the fraction of runs that interpolated, the lowest max train acc, how
    many runs of the group diverged or are missing (then its spread is undefined: nan), the
    number of test images behind each accuracy, the spread's 95% interval and its noise floor
    (expected, and 95% quantile; see :func:`spread_uncertainty`)."""
    summaries = with_selected_accuracy(summaries)
    n_sigma = summaries["sigma_w"].nunique()
    grouped = summaries.groupby(by + ["seed"], dropna=False)
    per_seed = grouped.agg(**{c: (c, "mean") for c in CLOCKS}).reset_index()
    per_seed["spread"] = [complete_spread(g, n_sigma) for _, g in grouped]
    out = _over_seeds(per_seed, by, seeds=("seed", "nunique"))
    runs = summaries.assign(_diverged=summaries["status"] == "diverged").groupby(by, dropna=False).agg(
        runs=("hash", "count"), diverged=("_diverged", "sum"), interpolated=("interpolated", "mean"),
        min_max_train_acc=("max_train_acc", "min")).reset_index()
    out = out.merge(runs, on=by)
    out["missing"] = out["seeds"] * n_sigma - out["runs"]
    out["interpolated"] = 100 * out["interpolated"]
    out["min_max_train_acc"] = 100 * out["min_max_train_acc"]
    unc = [{**dict(zip(by, k if isinstance(k, tuple) else (k,))),
            "test_images": int(g["test_images"].min()), **spread_uncertainty(g)}
           for k, g in summaries.groupby(by, dropna=False)]
    return out.merge(pd.DataFrame(unc), on=by)


def seed_range_pp(table: pd.DataFrame) -> float:
    """The largest seed range of the spread among the rows of a spread table (pp)."""
    r = (table["spread_max_pp"] - table["spread_min_pp"]).max()
    return float(r) if np.isfinite(r) else 0.0


def accuracy_by_sigma(summaries: pd.DataFrame, by: list[str],
                      value: str = "test_acc_at_best_val") -> pd.DataFrame:
    """Mean, min and max over seeds of ``value`` (in %) per group and sigma_w, for plots."""
    g = summaries.groupby(by + ["sigma_w"], dropna=False)[value]
    out = g.agg(["mean", "min", "max", "count"]).reset_index()
    for c in ("mean", "min", "max"):
        out[c] = 100 * out[c]
    return out


def format_table(df: pd.DataFrame, digits: int = 1) -> str:
    """A plain-text table with fixed rounding (what the regression tests compare)."""
    out = df.copy()
    for c in out.columns:
        if c in ("lr", "l2", "weight_decay", "sigma_w", "width"):
            out[c] = out[c].map(lambda v: f"{v:g}")
        elif c in CLOCKS or c.startswith("T_"):
            out[c] = out[c].map(lambda v: f"{v:.3g}")
        elif out[c].dtype.kind == "f":
            out[c] = out[c].map(lambda v: "nan" if not np.isfinite(v) else f"{v:.{digits}f}")
    return out.to_string(index=False)


# ------------------------------------------------------------------ 01 optimizer dependence
@decided_by_rule
def verdict_optimizer_dependence(table: pd.DataFrame) -> Verdict:
    """Holds if the SGD spread exceeds every adaptive optimizer's spread by more than the
    seed range (the largest range of any optimizer's spread over seeds)."""
    rows = table.set_index("optimizer")
    t = rows["spread_pp"]
    if "sgd" not in t or not any(o in t for o in ADAPTIVE):
        return Verdict(None, "needs sgd and at least one adaptive optimizer")
    undefined = [o for o in ("sgd", *ADAPTIVE) if o in t and not np.isfinite(t[o])]
    if undefined:
        return Verdict(None, f"spread undefined (diverged or missing runs) for {', '.join(undefined)}")
    noise = seed_range_pp(table)
    adaptive = {o: t[o] for o in ADAPTIVE if o in t}
    worst = max(adaptive, key=adaptive.get)
    holds = all(t["sgd"] - v > noise for v in adaptive.values())
    rel = ">" if holds else "is not >"
    parts = ", ".join(f"{o} {pp_with_range(rows.loc[o])}" for o in adaptive)
    return Verdict(holds, f"SGD spread {pp_with_range(rows.loc['sgd'])} {rel} {worst} "
                          f"{adaptive[worst]:.1f} pp + seed range {noise:.1f} pp (adaptive: {parts})",
                   "SGD 26.5 pp, Muon ~4.0 pp")


# ------------------------------------------------------------------ 02 long training
def horizon_table(epochs: pd.DataFrame, horizons: list[int], by: list[str] | None = None) -> pd.DataFrame:
    """Spread of the best-val-selected test accuracy when selection only sees epochs 1..E,
    for each horizon E, from the per-epoch metrics of long runs (one run per sigma_w)."""
    by = by or []
    rows = []
    n_sigma = epochs["sigma_w"].nunique() if len(epochs) else 0
    for E in horizons:
        per_run = []
        for h, e in epochs.groupby("hash"):
            e = e.sort_values("epoch")
            first = e.iloc[0]
            reached = e["epoch"].max() >= E  # a run that diverged earlier never got there
            last = e[e["epoch"] == min(E, e["epoch"].max())].iloc[0]
            per_run.append({**{k: first[k] for k in by + ["seed", "sigma_w"]},
                            "status": "finished" if reached else "diverged",
                            "test_acc_at_best_val": metrics.test_acc_at_best_val(e, horizon=E),
                            "train_acc": last["train_acc"], **{c: last[c] for c in CLOCKS}})
        if not per_run:
            continue
        grouped = pd.DataFrame(per_run).groupby(by + ["seed"], dropna=False)
        per_seed = grouped.agg(min_train_acc=("train_acc", "min"),
                               **{c: (c, "mean") for c in CLOCKS}).reset_index()
        per_seed["spread"] = [complete_spread(g, n_sigma) for _, g in grouped]
        t = _over_seeds(per_seed, by, min_train_acc=("min_train_acc", "min"))
        t["min_train_acc"] = 100 * t["min_train_acc"]
        t.insert(len(by), "horizon_epochs", E)
        rows.append(t)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


@decided_by_rule
def verdict_long_training(table: pd.DataFrame, main_horizon: int) -> Verdict:
    """Holds if the spread at the longest horizon is within the seed range of the spread at
    the main horizon, or larger."""
    t = table.set_index("horizon_epochs")
    if main_horizon not in t.index:
        return Verdict(None, f"main horizon {main_horizon} not among {list(t.index)}")
    longest = int(t.index.max())
    s_main, s_long = t.loc[main_horizon, "spread_pp"], t.loc[longest, "spread_pp"]
    if not (np.isfinite(s_main) and np.isfinite(s_long)):
        return Verdict(None, "spread undefined at the main or the longest horizon (diverged runs)")
    noise = seed_range_pp(table)
    holds = bool(s_long >= s_main - noise)
    return Verdict(holds, f"spread at {longest} epochs {s_long:.1f} pp vs {s_main:.1f} pp at "
                          f"{main_horizon} epochs (seed range {noise:.1f} pp)",
                   "~26 pp at 5,000 epochs vs 26.5 pp at 300")


# ------------------------------------------------------------------ 03 L2 and learning rate
@decided_by_rule
def verdict_l2_lr(table: pd.DataFrame) -> Verdict:
    """Holds if the spread in the largest-lr, largest-L2 cell is below a third of the spread in
    the smallest-lr, no-L2 cell."""
    lo = table[(table["lr"] == table["lr"].min()) & (table["l2"] == 0)]
    hi = table[(table["lr"] == table["lr"].max()) & (table["l2"] == table["l2"].max())]
    if lo.empty or hi.empty or table["l2"].max() == 0:
        return Verdict(None, "needs a no-L2 cell at the smallest lr and an L2 cell at the largest lr")
    s_lo, s_hi = float(lo["spread_pp"].iloc[0]), float(hi["spread_pp"].iloc[0])
    if not (np.isfinite(s_lo) and np.isfinite(s_hi)):
        return Verdict(None, "spread undefined in a corner cell (diverged or missing runs)")
    holds = s_hi < s_lo / 3
    return Verdict(holds, f"spread at lr={hi['lr'].iloc[0]:g}, L2={hi['l2'].iloc[0]:g}: {s_hi:.1f} pp "
                          f"{'<' if holds else 'is not <'} 1/3 of {s_lo:.1f} pp at lr={lo['lr'].iloc[0]:g}, "
                          f"no L2", "0.3 pp at lr=1e-2, L2=1e-2, against 26.5 pp at lr=1e-3")


# ------------------------------------------------------------------ 04 batch size
def spearman(x, y) -> float:
    """Spearman's rank correlation (scipy.stats.spearmanr) over the finite pairs; NaN with
    fewer than 3 of them."""
    from scipy.stats import spearmanr
    x, y = np.asarray(list(x), dtype=float), np.asarray(list(y), dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return math.nan
    return float(spearmanr(x[ok], y[ok]).statistic)


@decided_by_rule
def verdict_batch_size(table: pd.DataFrame) -> Verdict:
    """Holds if the spread rises with the batch size (Spearman rho > 0)."""
    if not np.isfinite(table["spread_pp"]).all():
        bad = ", ".join(f"b={int(b)}" for b in table.loc[~np.isfinite(table["spread_pp"]), "batch_size"])
        return Verdict(None, f"spread undefined (diverged or missing runs) at {bad}")
    rho = spearman(table["batch_size"], table["spread_pp"])
    if not np.isfinite(rho):
        return Verdict(None, "needs at least 3 batch sizes")
    pairs = ", ".join(f"b={int(r['batch_size'])}: {pp_with_range(r)}" for _, r in table.iterrows())
    return Verdict(bool(rho > 0), f"Spearman rho(b, spread) = {rho:+.2f} ({pairs})",
                   "the spread grows with b over b = 16..256")


# ------------------------------------------------------------------ 05 depth
def depth_table(summaries: pd.DataFrame) -> pd.DataFrame:
    cols = ["arch", "sigma_w", "seed", "max_train_acc", "tau_interp", "interpolated",
            "test_acc_at_best_val", "status"]
    t = summaries[cols].copy()
    t["max_train_acc"] = 100 * t["max_train_acc"]
    t["test_acc_at_best_val"] = 100 * t["test_acc_at_best_val"]
    t["tau_interp"] = t["tau_interp"].map(lambda v: "fails" if v is None or not np.isfinite(v) else str(int(v)))
    order = {a: i for i, a in enumerate(["resnet9", "resnet20", "resnet56", "resnet110"])}
    return t.sort_values(["arch", "sigma_w", "seed"], key=lambda s: s.map(order) if s.name == "arch" else s)


@decided_by_rule
def verdict_depth(summaries: pd.DataFrame, large_sigma_w: float) -> Verdict:
    """Holds if some deep run (not ResNet-9) with sigma_w >= large_sigma_w fails to
    interpolate while every ResNet-9 run at those sigma_w does interpolate. Diverged runs
    count neither way (a diverged run is not a failure to interpolate); they are reported."""
    diverged = summaries[summaries["status"] == "diverged"]
    summaries = summaries[summaries["status"] != "diverged"]
    big = summaries[summaries["sigma_w"] >= large_sigma_w]
    r9, deep = big[big["arch"] == "resnet9"], big[big["arch"] != "resnet9"]
    if r9.empty or deep.empty:
        return Verdict(None, f"needs ResNet-9 and deeper runs at sigma_w >= {large_sigma_w} that did "
                             f"not diverge ({len(diverged)} diverged)")
    fails = deep[~deep["interpolated"].astype(bool)]
    r9_ok = bool(r9["interpolated"].astype(bool).all())
    holds = bool(len(fails) and r9_ok)
    failed = ", ".join(f"{a} sigma_w={s:g}" for a, s in zip(fails["arch"], fails["sigma_w"])) or "none"
    small = summaries[(summaries["sigma_w"] < large_sigma_w) & (summaries["arch"] != "resnet9")]
    return Verdict(holds, f"deep runs at sigma_w >= {large_sigma_w:g} that fail to interpolate: {failed}; "
                          f"ResNet-9 interpolates there: {'yes' if r9_ok else 'no'} "
                          f"({int(r9['interpolated'].sum())}/{len(r9)}); deep runs at smaller sigma_w "
                          f"that interpolate: {int(small['interpolated'].astype(bool).sum())}/{len(small)}"
                          + ("; left out, diverged: " + ", ".join(
                              f"{a} sigma_w={s:g}" for a, s in zip(diverged["arch"], diverged["sigma_w"]))
                             if len(diverged) else ""),
                   "ResNet-56/110 often fail to interpolate at large sigma_w")


# ------------------------------------------------------------------ 06 clocks
def clock_family(optimizer: str, l2: float) -> str:
    """Which clock the paper says governs a pipeline: T_adapt for adaptive optimizers,
    T_L2 for SGD with explicit L2, T_SGD for plain (low-LR) SGD."""
    if optimizer in ADAPTIVE:
        return "T_adapt"
    return "T_L2" if l2 > 0 else "T_SGD"


def clock_points(summaries: pd.DataFrame, group_keys: list[str]) -> pd.DataFrame:
    """One point per group of runs differing only in sigma_w and seed: its spread (mean over
    seeds) and the clocks it reached, labelled with the family of its governing clock."""
    t = spread_table(summaries, group_keys)
    t["family"] = [clock_family(o, l) for o, l in zip(t["optimizer"], t["l2"])]
    return t


CLOCK_GROUP_KEYS = ["optimizer", "lr", "l2", "batch_size", "epochs", "arch", "width"]


def clock_points_with_horizons(summaries: pd.DataFrame, long_epochs: pd.DataFrame | None = None,
                               horizons: list[int] | None = None) -> pd.DataFrame:
    """The clock points of every finished configuration (``source`` "final"), plus, from the
    per-epoch metrics of long constant-lr runs, one T_SGD point per shorter horizon (``source``
    "02 horizon": what a run of that many epochs would have given). The horizon equal to a
    run's full length is that run's own final point and is kept once."""
    points = clock_points(summaries, CLOCK_GROUP_KEYS).assign(source="final")
    if long_epochs is None or long_epochs.empty or not horizons:
        return points
    h = horizon_table(long_epochs, horizons, by=["optimizer", "lr", "l2", "batch_size"])
    h = h.rename(columns={"horizon_epochs": "epochs"}).assign(family="T_SGD", source="02 horizon")
    points = pd.concat([points, h], ignore_index=True)
    return points.drop_duplicates(["optimizer", "lr", "l2", "batch_size", "epochs"], keep="first")


@decided_by_rule
def verdict_clocks(points: pd.DataFrame) -> tuple[Verdict, pd.DataFrame]:
    """Holds if, within each family, the spread falls monotonically as its governing clock
    grows: Spearman rho(clock, spread) < 0 for every family with >= 3 points. Points whose
    spread is undefined (diverged or missing runs) are left out and counted."""
    rows = []
    for fam, g in points.groupby("family"):
        ok = g[np.isfinite(g["spread_pp"])]
        rows.append({"clock": fam, "points": len(ok), "undefined": len(g) - len(ok),
                     "rho": spearman(ok[fam], ok["spread_pp"])})
    rho = pd.DataFrame(rows)
    decided = rho[np.isfinite(rho["rho"])]
    if decided.empty:
        return Verdict(None, "no family has 3 or more points"), rho
    holds = bool((decided["rho"] < 0).all())
    parts = ", ".join(f"{c}: rho={r:+.2f} ({n} pts)" if np.isfinite(r) else f"{c}: n/a ({n} pts)"
                      for c, n, r in zip(rho["clock"], rho["points"], rho["rho"]))
    return Verdict(holds, f"spread vs governing clock, Spearman {parts} (holds if every decided "
                          f"rho < 0)", "clocks, not epochs, govern forgetting; T_SGD 7.3e-4 at 300 "
                          "epochs, 1.2e-2 at 5,000"), rho
