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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .clocks import CLOCKS
from . import metrics
from .config import ADAPTIVE_OPTIMIZERS as ADAPTIVE, LEGACY_IDENTITY_VALUES
from .stats import noise_floor, spread


@dataclass
class Verdict:
    holds: bool | None  # None: cannot be decided from these runs
    text: str           # our numbers, computed from the runs
    paper: str = ""     # the paper's numbers, from the params file (key 'paper'); never used to decide
    rule: str = ""      # the rule that decided it, in words
    measured: list = field(default_factory=list)  # headline numbers: measure(...) items
    # False where the predictors this measure scores do not interpolate (train acc < 99.5%):
    # the claim's premise is not met, so this measure cannot speak (on_both_measures reads it)
    premise_met: bool = True
    # True where the runs lack per-image correctness, so no interval exists: undecided for want
    # of an interval, not by one (on_both_measures reads it; see no_interval)
    without_interval: bool = False

    @property
    def word(self) -> str:
        return {True: "HOLDS", False: "DOES NOT HOLD at this scale", None: "UNDECIDED"}[self.holds]

    @property
    def short_word(self) -> str:
        """The word as the notes' tables write it, in lower case, with "(premise)" after
        "undecided" where this measure's predictors do not interpolate (so cannot speak)."""
        if self.holds is None and not self.premise_met:
            return "undecided (premise)"
        return {True: "holds", False: "does not hold", None: "undecided"}[self.holds]

    def __str__(self):
        return f"{self.word}: {self.text}" + (f" (paper: {self.paper})" if self.paper else "")

    def to_dict(self) -> dict:
        """The verdict as data (what the README, the site and the tests read)."""
        return {"holds": self.holds, "word": self.word, "ours": self.text, "paper": self.paper,
                "rule": self.rule, "measured": self.measured}


def no_interval(what: str) -> Verdict:
    """Undecided for want of an interval: runs stored without per-image correctness (scored on
    fewer images than the test set) give no bootstrap over test images."""
    return Verdict(None, f"no interval for the {what} (runs without per-image correctness)", without_interval=True)


def measure(what: str, value, lo=math.nan, hi=math.nan, floor=None, unit: str = "pp",
            digits: int = 1) -> dict:
    """One headline number of a verdict, with its 95% interval and (for a spread) its noise
    floor's 95% quantile; what the README's results table shows, with ``digits`` decimals
    (more than 1 where a rule compares an interval with a line that one decimal would blur:
    05's top 99.4952% shows as 99.495, not 99.5; recorded only where it is not 1)."""
    f = lambda v: None if v is None or not np.isfinite(v) else round(float(v), 4)  # noqa: E731
    out = {"what": what, "value": f(value), "lo": f(lo), "hi": f(hi), "floor": f(floor), "unit": unit}
    return out if digits == 1 else {**out, "digits": digits}


def train_acc_text(pct: float, digits: int = 1) -> str:
    """A train accuracy in percent, with ``digits`` decimals, or as many more as it takes (up to 4,
    then rounded down) not to show a value below the interpolation line (99.5%) as on it: 99.48
    reads "99.48", not "99.5" (a run the rule leaves out must not read as one that fits)."""
    line = 100 * metrics.INTERP_THRESHOLD
    for d in range(digits, max(digits, 4) + 1):
        text = f"{pct:.{d}f}"
        if not pct < line <= float(text):
            return text
    return f"{math.floor(pct * 1e4) / 1e4:.4f}"


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


END_MEASURE = "end-of-training predictors"
SELECTED_MEASURE = "selected predictors (best validation loss: the paper's measure)"


def _scored_train_acc(summaries: pd.DataFrame, column: str) -> pd.DataFrame:
    """``interpolated`` and ``max_train_acc`` from the train accuracy ``column`` of the
    predictors a table scores, in place of the run's best."""
    acc = summaries[column].astype(float)
    return summaries.assign(max_train_acc=acc, interpolated=acc >= metrics.INTERP_THRESHOLD)


def at_end_of_training(summaries: pd.DataFrame) -> pd.DataFrame:
    """The same runs measured by their end-of-training predictors (the weights of the last
    epoch) instead of the selected ones, in the columns the spread machinery reads: on every
    test image with per-image correctness (``end_test_*``) when every run has it, else on the
    per-epoch test images (``final_test_acc``; runs from before the end predictor was scored,
    so no bootstrap interval). Clocks: those of the horizon. ``interpolated`` and
    ``max_train_acc`` become the end predictors' own (their train accuracy at the last epoch),
    so a table says whether the predictors it scores interpolate, not whether the run once did."""
    full = "end_test_acc" in summaries and summaries["end_test_acc"].notna().all()
    summaries = _scored_train_acc(summaries, "final_train_acc")
    if full:
        return summaries.assign(selected_test_acc=summaries["end_test_acc"].astype(float),
                                selected_test_n=summaries["end_test_n"],
                                selected_test_correct=summaries["end_test_correct"],
                                test_acc_at_best_val=summaries["end_test_acc"].astype(float))
    out = summaries.assign(test_acc_at_best_val=summaries["final_test_acc"].astype(float))
    return out.drop(columns=["selected_test_acc", "selected_test_n", "selected_test_correct"], errors="ignore")


def at_selected(summaries: pd.DataFrame) -> pd.DataFrame:
    """The runs as the paper's measure scores them, with ``interpolated`` and ``max_train_acc``
    the selected predictors' own (their train accuracy at the best-validation-loss epoch), as
    :func:`at_end_of_training` does for the weights of the last epoch: a table then says whether
    the predictors it scores interpolate, not whether the run once did. Runs without
    ``train_acc_at_best_val`` keep the run's own."""
    if "train_acc_at_best_val" not in summaries or summaries["train_acc_at_best_val"].isna().any():
        return summaries
    return _scored_train_acc(summaries, "train_acc_at_best_val")


def selection_table(summaries: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Where the selected predictors lie, per group and sigma_w: the selected (best validation
    loss) epoch of each seed, the train accuracy there (mean and lowest, %), tau_interp of each
    seed, how many selected predictors interpolate (train acc >= 99.5% at their epoch) and are
    at or past tau_interp, and T_SGD at the selected epoch beside T_SGD at the horizon."""
    rows = []
    for key, g in summaries.groupby(by + ["sigma_w"], dropna=False):
        g = g.sort_values("seed")
        ints = lambda col: "/".join("-" if v is None or not np.isfinite(v) else str(int(v))  # noqa: E731
                                    for v in g[col].astype(float))
        train_at = 100 * g["train_acc_at_best_val"].astype(float)
        rows.append({**dict(zip(by + ["sigma_w"], key)), "selected_epochs": ints("best_val_epoch"),
                     "train_acc_at_selected": train_at.mean(), "lowest": train_at.min(),
                     "tau_interp": ints("tau_interp"),
                     "interpolating": f"{int(g['best_val_interpolates'].astype(bool).sum())}/{len(g)}",
                     "past_tau": f"{int(g['best_val_past_tau'].astype(bool).sum())}/{len(g)}",
                     "T_SGD_at_selected": g["T_SGD_at_best_val"].astype(float).mean(),
                     "T_SGD_at_horizon": g["T_SGD"].astype(float).mean()})
    return pd.DataFrame(rows)


def share_selected_interpolating(summaries: pd.DataFrame) -> tuple[int, int]:
    """(selected predictors that interpolate, runs): train acc >= 99.5% at the selected epoch."""
    ok = summaries["best_val_interpolates"].dropna().astype(bool)
    return int(ok.sum()), int(len(summaries))


def on_both_measures(selected: Verdict, end: Verdict) -> Verdict:
    """Decided on both measures: the paper's (the predictors selected by validation loss) and
    the end-of-training predictors (the weights of the last epoch, which interpolate where
    the selected ones may not). Where both verdicts agree, that verdict; where they disagree,
    or one decides and the other does not, undecided (the answer depends on which predictor is
    read). The paper's measure alone, and
    the text says so, where the end-of-training measure cannot speak: its predictors do not
    interpolate (the claim's premise is not met there: a run that trains unstably ends
    mid-swing, and its last weights are not a trained network), or it has no interval (runs
    without per-image correctness). Never the other way round: where the paper's own
    predictors do not interpolate, the verdict is undecided whatever the end measure says."""
    silent = (None if end.holds is not None or not selected.premise_met else
              "were not scored on every test image" if end.without_interval else
              "do not interpolate, so they cannot speak" if not end.premise_met else None)
    measured = selected.measured + [{**m, "what": f"end of training: {m['what']}"} for m in end.measured]
    if silent:
        out = Verdict(selected.holds, f"{selected.text}. Rests on the {SELECTED_MEASURE} alone: the "
                                      f"{END_MEASURE} of these runs {silent} ({end.text})",
                      selected.paper, measured=measured)
    elif selected.holds == end.holds:
        agree = "do not decide either" if end.holds is None else "agree"
        out = Verdict(selected.holds, f"{selected.text}. The {END_MEASURE} {agree}: {end.text}",
                      selected.paper, measured=measured)
    else:
        why = ("the two measures disagree" if None not in (selected.holds, end.holds) else
               "one measure decides and the other does not")
        out = Verdict(None, f"{why}. {SELECTED_MEASURE}: {selected.word}, "
                            f"{selected.text}. {END_MEASURE}: {end.word}, {end.text}",
                      selected.paper, measured=measured)
    out.premise_met = selected.premise_met  # the combined verdict is the paper's measure's
    out.rule = f"{selected.rule} {' '.join(on_both_measures.__doc__.split())}".strip()
    return out


def correct_matrix(runs: pd.DataFrame) -> np.ndarray | None:
    """Per-image correctness of each run's selected predictor as a (seeds, sigma_w, test
    images) boolean array, from a group with one run per (seed, sigma_w); None when a run has
    none (runs from before the selected predictor was kept) or is missing."""
    from .store import unpack_correct
    runs = with_selected_accuracy(runs) if "test_images" not in runs else runs
    acc = runs.pivot_table(index="seed", columns="sigma_w", values="test_acc_at_best_val", dropna=False)
    if not ("selected_test_correct" in runs and runs["selected_test_correct"].notna().all()
            and np.isfinite(acc.to_numpy()).all() and len(runs) == acc.size):
        return None
    n = int(runs["test_images"].iloc[0])
    by = {(r.seed, r.sigma_w): unpack_correct(r.selected_test_correct, n) for r in runs.itertuples()}
    return np.stack([[by[(seed, sw)] for sw in acc.columns] for seed in acc.index])


def spread_uncertainty(runs: pd.DataFrame) -> dict:
    """The 95% interval of one group's spread (bootstrap over test images and seeds, from the
    per-image correctness of each selected predictor; nan for runs without it) and its noise
    floor (initlib.stats.noise_floor), in pp."""
    from .stats import noise_floor, spread_interval
    acc = runs.pivot_table(index="seed", columns="sigma_w", values="test_acc_at_best_val", dropna=False)
    floor = noise_floor(acc.to_numpy(), int(runs["test_images"].min()))
    correct = correct_matrix(runs)
    lo, hi = spread_interval(correct) if correct is not None else (math.nan, math.nan)
    return {"ci_lo_pp": 100 * lo, "ci_hi_pp": 100 * hi, "floor_pp": 100 * floor["expected"],
            "floor_hi_pp": 100 * floor["upper"], "floor_from": floor["source"]}


def difference_table(summaries: pd.DataFrame, by: str, reference: str) -> pd.DataFrame:
    """For each group of ``by`` other than ``reference``: spread(reference) - spread(group)
    with its 95% interval (initlib.stats.difference_interval: test images paired, seeds of each
    group resampled on their own), in pp. nan where a group lacks per-image correctness."""
    from .stats import difference_interval
    summaries = with_selected_accuracy(summaries)
    groups = {k: g for k, g in summaries.groupby(by)}
    ref = correct_matrix(groups[reference]) if reference in groups else None
    rows = []
    for k, g in groups.items():
        if k == reference:
            continue
        other = correct_matrix(g)
        if ref is None or other is None:
            rows.append({by: k, "diff_pp": math.nan, "diff_lo_pp": math.nan, "diff_hi_pp": math.nan})
            continue
        d = spread(ref.mean(axis=-1)) - spread(other.mean(axis=-1))
        lo, hi = difference_interval(ref, other)
        rows.append({by: k, "diff_pp": 100 * d, "diff_lo_pp": 100 * lo, "diff_hi_pp": 100 * hi})
    return pd.DataFrame(rows, columns=[by, "diff_pp", "diff_lo_pp", "diff_hi_pp"])


def spread_table(summaries: pd.DataFrame, by: list[str], sigma_grid_per_group: bool = False) -> pd.DataFrame:
    """Spread over sigma_w for each group ``by`` (mean and range over seeds), with the mean
    clocks reached, the fraction of runs that interpolated, the lowest max train acc, how
    many runs of the group diverged or are missing (then its spread is undefined: nan), the
    number of test images behind each accuracy, the spread's 95% interval and its noise floor
    (expected, and 95% quantile; see :func:`spread_uncertainty`)."""
    summaries = with_selected_accuracy(summaries)
    # the size of each group's sigma_w grid: its own (groups from different grids, notebook 06)
    # or the whole table's
    grid = (summaries.groupby(by, dropna=False)["sigma_w"].transform("nunique") if sigma_grid_per_group
            else summaries["sigma_w"].nunique())
    summaries = summaries.assign(_n_sigma=grid)
    grouped = summaries.groupby(by + ["seed"], dropna=False)
    per_seed = grouped.agg(**{c: (c, "mean") for c in CLOCKS}).reset_index()
    per_seed["spread"] = [complete_spread(g, int(g["_n_sigma"].iloc[0])) for _, g in grouped]
    out = _over_seeds(per_seed, by, seeds=("seed", "nunique"))
    runs = summaries.assign(_diverged=summaries["status"] == "diverged").groupby(by, dropna=False).agg(
        runs=("hash", "count"), diverged=("_diverged", "sum"), interpolated=("interpolated", "mean"),
        min_max_train_acc=("max_train_acc", "min"), _n_sigma=("_n_sigma", "first")).reset_index()
    out = out.merge(runs, on=by)
    out["missing"] = out["seeds"] * out.pop("_n_sigma") - out["runs"]
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


# Columns that hold the lowest train accuracy (%) of the predictors scored: tables print them as
# :func:`train_acc_text` does, so that a row the rule leaves out never reads "99.5".
TRAIN_ACC_COLUMNS = ("min_max_train_acc", "lowest_train_acc_scored")


def format_table(df: pd.DataFrame, digits: int = 1) -> str:
    """A plain-text table with fixed rounding (what the regression tests compare); the lowest
    train accuracies (:data:`TRAIN_ACC_COLUMNS`) with more digits where one would blur the line."""
    out = df.copy()
    for c in out.columns:
        if c in ("lr", "l2", "weight_decay", "sigma_w", "width"):
            out[c] = out[c].map(lambda v: f"{v:g}")
        elif c in CLOCKS or c.startswith("T_"):
            out[c] = out[c].map(lambda v: f"{v:.3g}")
        elif c in TRAIN_ACC_COLUMNS:
            out[c] = out[c].map(lambda v: "nan" if not np.isfinite(v) else train_acc_text(v, digits))
        elif out[c].dtype.kind == "f":
            out[c] = out[c].map(lambda v: "nan" if not np.isfinite(v) else f"{v:.{digits}f}")
    return out.to_string(index=False)


# A pair of columns shown as one interval column in a rendered table: (low, high, heading).
INTERVAL_COLUMNS = (
    ("spread_min_pp", "spread_max_pp", "over seeds (pp)"),
    ("ci_lo_pp", "ci_hi_pp", "95% interval (pp)"),
    ("diff_lo_pp", "diff_hi_pp", "95% interval (pp)"),
)


def readable(df: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """``df`` as strings for reading: numbers rounded as :func:`format_table` rounds them, each
    interval in one column ("[lo, hi]", placed where its low end was), the noise floor with
    its 95% quantile ("mean (q95 hi)")."""
    text = pd.DataFrame({c: format_table(df[[c]], digits).splitlines()[1:] if len(df) else []
                         for c in df.columns}, index=df.index)
    text = text.apply(lambda col: col.str.strip())
    out = text.copy()
    for lo, hi, heading in INTERVAL_COLUMNS:
        if lo in out and hi in out:
            out.insert(list(out.columns).index(lo), heading,
                       "[" + text[lo] + ", " + text[hi] + "]")
            out = out.drop(columns=[lo, hi])
    if "floor_pp" in out and "floor_hi_pp" in out:
        out.insert(list(out.columns).index("floor_pp"), "noise floor (pp)",
                   text["floor_pp"] + " (q95 " + text["floor_hi_pp"] + ")")
        out = out.drop(columns=["floor_pp", "floor_hi_pp"])
    return out.replace({"[nan, nan]": "-", "nan": "-"})


class Table:
    """A table as a notebook shows it: rendered HTML (:func:`readable`: rounded, intervals in
    one column, no index), and as text the fixed rounding of :func:`format_table` (what a
    terminal shows and what the ``check`` cells compare, exactly)."""

    def __init__(self, df: pd.DataFrame, digits: int = 1):
        self.df, self.digits = df, digits

    def __repr__(self) -> str:
        return format_table(self.df, self.digits)

    def _repr_html_(self) -> str:
        return readable(self.df, self.digits).to_html(index=False, border=0, classes="initmem-table")


# ------------------------------------------------------------------ 01 optimizer dependence
@decided_by_rule
def verdict_optimizer_dependence(table: pd.DataFrame, differences: pd.DataFrame) -> Verdict:
    """Holds if SGD's scored predictors all interpolate (train acc >= 99.5%: the claim is a
    spread "despite >= 99.5% train accuracy"), SGD's spread is above its noise floor (95%
    quantile: sigma_w shows through the seed noise), and, for every adaptive optimizer, SGD's
    spread is larger and the 95% interval of the difference (SGD's spread minus the adaptive
    one's; bootstrap over test images and seeds) lies above 0. Does not hold, where SGD's
    predictors interpolate, if an interval lies below 0, SGD's spread is not larger, or the
    95% interval of SGD's spread lies within its noise floor (SGD does not remember). Undecided
    otherwise: an interval that contains 0, a spread between its floor and the rest, or SGD
    predictors that do not interpolate (the claim's premise is not met, whatever the spreads)."""
    rows = table.set_index("optimizer")
    t = rows["spread_pp"]
    if "sgd" not in t or not any(o in t for o in ADAPTIVE):
        return Verdict(None, "needs sgd and at least one adaptive optimizer")
    undefined = [o for o in ("sgd", *ADAPTIVE) if o in t and not np.isfinite(t[o])]
    if undefined:
        return Verdict(None, f"spread undefined (diverged or missing runs) for {', '.join(undefined)}")
    d = differences.set_index("optimizer")
    adaptive = [o for o in ADAPTIVE if o in t]
    if any(o not in d.index or not np.isfinite(d.loc[o, "diff_lo_pp"]) for o in adaptive):
        return no_interval("difference")
    sgd = rows.loc["sgd"]
    interpolating = bool(sgd["interpolated"] >= 100)
    floor = float(sgd["floor_hi_pp"])
    above_floor, within_floor = bool(t["sgd"] > floor), bool(sgd["ci_hi_pp"] <= floor)
    above = [o for o in adaptive if d.loc[o, "diff_lo_pp"] > 0]
    against = [o for o in adaptive if d.loc[o, "diff_hi_pp"] < 0 or t["sgd"] <= t[o]]
    if not interpolating:
        holds = None
    elif len(above) == len(adaptive) and above_floor:
        holds = True
    else:
        holds = False if (against or within_floor) else None
    parts = "; ".join(f"minus {o} {t[o]:.1f}: {d.loc[o, 'diff_pp']:+.1f} pp "
                      f"[{d.loc[o, 'diff_lo_pp']:+.1f}, {d.loc[o, 'diff_hi_pp']:+.1f}]" for o in adaptive)
    premise = (f"SGD's scored predictors interpolate in {sgd['interpolated']:.0f}% of runs (lowest train acc. "
               f"{train_acc_text(sgd['min_max_train_acc'])}%)")
    if not interpolating:
        premise += ": the claim's premise (>= 99.5% train accuracy) is not met"
    measured = [measure(f"{o} spread", t[o], rows.loc[o, "ci_lo_pp"], rows.loc[o, "ci_hi_pp"],
                        rows.loc[o, "floor_hi_pp"]) for o in ("sgd", *adaptive)]
    measured.append(measure("sgd predictors scored that interpolate", sgd["interpolated"], unit="%"))
    return Verdict(holds, f"SGD spread {t['sgd']:.1f} pp [{sgd['ci_lo_pp']:.1f}, {sgd['ci_hi_pp']:.1f}] "
                          f"(noise floor {sgd['floor_pp']:.1f}, 95% quantile {floor:.1f}: "
                          f"{'above' if above_floor else 'not above'} it); {parts} (95% intervals); {premise}",
                   measured=measured, premise_met=interpolating)


# ------------------------------------------------------------------ 02 long training
def horizon_table(epochs: pd.DataFrame, horizons: list[int], by: list[str] | None = None,
                  measure: str = "selected") -> pd.DataFrame:
    """Spread at each horizon E from the per-epoch metrics of long runs (one run per sigma_w
    and seed): what runs of E epochs would have given. ``measure`` "selected": the test accuracy
    at the best validation loss among epochs 1..E (the paper's), with the clocks at that
    selected epoch; "end": the test accuracy at epoch E (the end-of-training predictor), with
    the clocks at E. ``selected_epochs`` lists, per sigma_w (and seed), the epoch whose
    predictor is scored, ``lowest_train_acc_scored`` the lowest train accuracy (%) there."""
    by = by or []
    rows = []
    n_sigma = epochs["sigma_w"].nunique() if len(epochs) else 0
    for E in horizons:
        per_run = [_run_at_horizon(e.sort_values("epoch"), E, by, measure) for _, e in epochs.groupby("hash")]
        if not per_run:
            continue
        runs = pd.DataFrame(per_run)
        grouped = runs.groupby(by + ["seed"], dropna=False)
        per_seed = grouped.agg(min_train_acc=("train_acc", "min"),
                               **{c: (c, "mean") for c in CLOCKS}).reset_index()
        per_seed["spread"] = [complete_spread(g, n_sigma) for _, g in grouped]
        t = _over_seeds(per_seed, by, min_train_acc=("min_train_acc", "min"))
        t["min_train_acc"] = 100 * t["min_train_acc"]
        t.insert(len(by), "horizon_epochs", E)
        # the accuracies here are on the per-epoch test images (n_test): their noise floor
        floors = []
        for _, g in (runs.groupby(by, dropna=False) if by else [(None, runs)]):
            acc = g.pivot_table(index="seed", columns="sigma_w", values="test_acc_at_best_val", dropna=False)
            n_test = int(epochs["n_test"].min())
            fl = noise_floor(acc.to_numpy(), n_test)
            g = g.sort_values(["sigma_w", "seed"])
            floors.append({"selected_epochs": "/".join(str(v) for v in g["scored_epoch"]),
                           "scored_epoch": float(g["scored_epoch"].astype(float).mean()),
                           "lowest_train_acc_scored": 100 * float(g["train_acc_scored"].min()),
                           "mean_acc": float(np.nanmean(acc.to_numpy())), "test_images": n_test,
                           "floor_pp": 100 * fl["expected"], "floor_hi_pp": 100 * fl["upper"],
                           "floor_from": fl["source"]})
        t = pd.concat([t.reset_index(drop=True), pd.DataFrame(floors)], axis=1)
        rows.append(t)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def horizons_at_fractions(last: int, points: int) -> list[int]:
    """The horizons 1/points, 2/points, ..., 1 of a run of ``last`` epochs (distinct, >= 1)."""
    return sorted({max(1, round(last * k / points)) for k in range(1, points + 1)})


def horizon_table_on_both_measures(epochs: pd.DataFrame, horizons: list[int], by: list[str]) -> pd.DataFrame:
    """:func:`horizon_table` for the selected and for the end-of-training predictors, one
    below the other, with a ``measure`` column after ``by``."""
    parts = []
    for measure in ("selected", "end"):
        t = horizon_table(epochs, horizons, by=by, measure=measure)
        t.insert(len(by), "measure", measure)
        parts.append(t)
    return pd.concat(parts, ignore_index=True)


def within_horizon(epochs: pd.DataFrame, by: list[str], points: int = 4) -> pd.DataFrame:
    """Per group of ``by``, the spread (:func:`horizon_table`, on both measures: the selected
    predictors and the end-of-training ones) at 1/points, 2/points, ... of the group's own
    horizon: whether the spread is still falling when training stops (the adaptive optimizers'
    shorter horizon stays only if it is not)."""
    parts = [horizon_table_on_both_measures(g, horizons_at_fractions(int(g["epoch"].max()), points), by)
             for _, g in epochs.groupby(by, dropna=False)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _run_at_horizon(e: pd.DataFrame, E: int, by: list[str], measure: str) -> dict:
    """One run seen as a run of E epochs: its scored epoch (selected within 1..E, or E), that
    epoch's test accuracy and clocks, and its train accuracy at E."""
    first = e.iloc[0]
    reached = e["epoch"].max() >= E  # a run that diverged earlier never got there
    last = e[e["epoch"] == min(E, e["epoch"].max())].iloc[0]
    scored = metrics.best_val_epoch(e, horizon=E) if measure == "selected" else int(last["epoch"])
    at = e[e["epoch"] == scored].iloc[0] if scored is not None else None
    return {**{k: first[k] for k in by + ["seed", "sigma_w"]},
            "status": "finished" if reached else "diverged", "scored_epoch": scored,
            "test_acc_at_best_val": float(at["test_acc"]) if at is not None else math.nan,
            "train_acc": last["train_acc"], "train_acc_scored": float(at["train_acc"]) if at is not None else math.nan,
            **{c: (at[c] if at is not None else math.nan) for c in CLOCKS}}


def _horizon_change(t: pd.DataFrame, main: int, longest: int, seed_range: float) -> dict:
    """The spread at the main and the longest horizon, its change with a 95% interval (test
    sampling, initlib.stats.spread_change_sd, widened by the seed range) and the floor."""
    from .stats import normal_interval, spread_change_sd
    s_main, s_long = float(t.loc[main, "spread_pp"]), float(t.loc[longest, "spread_pp"])
    p = float(t.loc[[main, longest], "mean_acc"].mean())
    n = int(t.loc[longest, "test_images"])
    lo, hi = normal_interval(s_long - s_main, 100 * spread_change_sd(p, n))
    one = 100 * math.sqrt(2) * spread_change_sd(p, n) / 2  # one spread's sd
    return {"main": s_main, "long": s_long, "change": s_long - s_main, "lo": lo - seed_range,
            "hi": hi + seed_range, "floor": float(t.loc[longest, "floor_hi_pp"]),
            "floor_main": float(t.loc[main, "floor_hi_pp"]), "one_sd": one,
            "same_checkpoints": t.loc[main, "selected_epochs"] == t.loc[longest, "selected_epochs"]}


@decided_by_rule
def verdict_long_training(selected: pd.DataFrame, end: pd.DataFrame, main_horizon: int) -> Verdict:
    """Decided on the end-of-training predictors always, and on the selected predictors where
    they differ between the two horizons (where the best-validation checkpoint is the same at
    both, the selected spread cannot change and is not evidence). Undecided if the
    end-of-training predictors do not all interpolate (train accuracy >= 99.5%) at both
    horizons: the claim is about predictors that fit the training set. For each measure used: the
    spread at the longest horizon is above its noise floor (95% quantile) and the 95% interval
    of its change from the main horizon (test sampling, initlib.stats.spread_change_sd; with
    seeds, widened by the seed range) does not lie below 0. Holds if every measure used says
    so; does not hold if one measure's interval lies below 0 or its spread fell to its
    floor."""
    ts, te = selected.set_index("horizon_epochs"), end.set_index("horizon_epochs")
    if main_horizon not in ts.index or main_horizon not in te.index:
        return Verdict(None, f"main horizon {main_horizon} not among {list(ts.index)}")
    longest = int(te.index.max())
    parts, measured, verdicts = [], [], []
    for name, t, table in (("end-of-training", te, end), ("selected", ts, selected)):
        if not (np.isfinite(t.loc[main_horizon, "spread_pp"]) and np.isfinite(t.loc[longest, "spread_pp"])):
            return Verdict(None, f"{name} spread undefined at the main or the longest horizon (diverged runs)")
        c = _horizon_change(t, main_horizon, longest, seed_range_pp(table))
        fit = float(t.loc[[main_horizon, longest], "min_train_acc"].min())
        if name == "end-of-training" and not fit >= 100 * metrics.INTERP_THRESHOLD:
            verdicts.append(None)
            parts.append(f"end-of-training: the predictors do not all interpolate at {main_horizon} and {longest} "
                         f"epochs (lowest train accuracy {train_acc_text(fit)}%), so their spreads "
                         f"({c['main']:.1f} pp at "
                         f"{main_horizon}, {c['long']:.1f} at {longest}) are not the claim's: not decided")
            continue
        if name == "selected" and c["same_checkpoints"]:
            parts.append(f"selected: the same checkpoints at {main_horizon} and {longest} epochs (epochs "
                         f"{t.loc[longest, 'selected_epochs']}), so their spread ({c['long']:.1f} pp) cannot "
                         f"change: not used")
            continue
        ok = bool(c["hi"] >= 0 and c["long"] > c["floor"])
        verdicts.append(ok)
        parts.append(f"{name}: {c['long']:.1f} pp at {longest} epochs vs {c['main']:.1f} at {main_horizon}, "
                     f"change {c['change']:+.1f} [{c['lo']:+.1f}, {c['hi']:+.1f}] (95%), noise floor "
                     f"(95% quantile) {c['floor']:.1f}")
        measured += [measure(f"{name} spread at {main_horizon} epochs", c["main"], c["main"] - 1.96 * c["one_sd"],
                             c["main"] + 1.96 * c["one_sd"], c["floor_main"]),
                     measure(f"{name} spread at {longest} epochs", c["long"], c["long"] - 1.96 * c["one_sd"],
                             c["long"] + 1.96 * c["one_sd"], c["floor"]),
                     measure(f"{name} change", c["change"], c["lo"], c["hi"])]
    holds = None if None in verdicts else all(verdicts)
    if holds is None and False in verdicts:
        holds = False  # a measure that could decide says it does not hold
    return Verdict(holds, "; ".join(parts), measured=measured)


# ------------------------------------------------------------------ 03 L2 and learning rate
def l2_lr_corners(cells) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """Notebook 03's two corner cells among ``cells`` ((lr, l2) pairs, repeats allowed): the
    smallest lr without L2, and the largest lr with the largest L2 used at that lr; None where
    either is missing. The only cells :func:`verdict_l2_lr` decides on, so that anything reading
    03's word before its grid is complete finds the same cells the verdict will."""
    cells = {(float(lr), float(l2)) for lr, l2 in cells}
    if not cells:
        return None
    lr_lo, lr_hi = min(lr for lr, _ in cells), max(lr for lr, _ in cells)
    l2_hi = max(l2 for lr, l2 in cells if lr == lr_hi)
    if (lr_lo, 0.0) not in cells or l2_hi <= 0:
        return None
    return (lr_lo, 0.0), (lr_hi, l2_hi)


@decided_by_rule
def verdict_l2_lr(table: pd.DataFrame, summaries: pd.DataFrame) -> Verdict:
    """Holds if the 95% interval of spread(smallest lr, no L2) minus spread(largest lr,
    largest L2 at that lr) lies above 0 (bootstrap over test images and seeds) and the
    largest-lr, largest-L2 spread is within its noise floor (95% quantile): sigma_w no longer
    shows. The two corner cells are the paper's comparison; other cells (a larger L2 at a
    smaller lr, doses for notebook 06) are shown, not decided on.
    Undecided if the predictors scored in that cell do not all interpolate (train acc >= 99.5%,
    the claim's premise: a spread also shrinks in predictors that do not fit their training
    set, and that is not forgetting). Does not hold if the interval does not lie above 0 or
    that spread is above its floor."""
    from .stats import difference_interval
    corners = l2_lr_corners(zip(table["lr"], table["l2"]))
    if corners is None:
        return Verdict(None, "needs a no-L2 cell at the smallest lr and an L2 cell at the largest lr")
    (lr_lo, l2_lo), (lr_hi, l2_hi) = corners
    lo = table[(table["lr"] == lr_lo) & (table["l2"] == l2_lo)]
    hi = table[(table["lr"] == lr_hi) & (table["l2"] == l2_hi)]
    s_lo, s_hi = float(lo["spread_pp"].iloc[0]), float(hi["spread_pp"].iloc[0])
    if not (np.isfinite(s_lo) and np.isfinite(s_hi)):
        return Verdict(None, "spread undefined in a corner cell (diverged or missing runs)")
    summaries = with_selected_accuracy(summaries)
    cell = lambda r: summaries[(summaries["lr"] == r["lr"].iloc[0]) & (summaries["l2"] == r["l2"].iloc[0])]  # noqa: E731
    a, b = correct_matrix(cell(lo)), correct_matrix(cell(hi))
    if a is None or b is None:
        return no_interval("difference")
    d = 100 * (spread(a.mean(axis=-1)) - spread(b.mean(axis=-1)))
    d_lo, d_hi = (100 * v for v in difference_interval(a, b))
    floor = float(hi["floor_hi_pp"].iloc[0])
    trained = bool(hi["interpolated"].iloc[0] >= 100) if "interpolated" in hi else True
    holds = bool(d_lo > 0 and s_hi <= floor) if trained else None
    measured = [measure(f"spread at lr {lo['lr'].iloc[0]:g}, no L2", s_lo, lo["ci_lo_pp"].iloc[0], lo["ci_hi_pp"].iloc[0],
                        lo["floor_hi_pp"].iloc[0]),
                measure(f"at lr {hi['lr'].iloc[0]:g}, L2 {hi['l2'].iloc[0]:g}", s_hi, hi["ci_lo_pp"].iloc[0],
                        hi["ci_hi_pp"].iloc[0], floor),
                measure("difference", d, d_lo, d_hi)]
    return Verdict(holds, f"spread at lr={hi['lr'].iloc[0]:g}, L2={hi['l2'].iloc[0]:g}: {s_hi:.1f} pp "
                          f"(noise floor, 95% quantile, {floor:.1f}) against {s_lo:.1f} pp at "
                          f"lr={lo['lr'].iloc[0]:g}, no L2: difference {d:+.1f} pp [{d_lo:+.1f}, {d_hi:+.1f}] (95%)"
                          + ("" if trained else f"; but that cell's predictors scored interpolate in only "
                             f"{hi['interpolated'].iloc[0]:.0f}% of its runs (train acc. "
                             f"{train_acc_text(hi['min_max_train_acc'].iloc[0])}% at the lowest): "
                             "the claim's premise (>= 99.5%) is not met, and a spread also shrinks in predictors "
                             "that do not fit their training set"),
                   measured=measured, premise_met=trained)


def l2_lr_tables(summaries: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Notebook 03's spread per (lr, L2) cell, each cell over its own sigma_w grid, on both
    measures: (the selected predictors' table, the end-of-training summaries, their table)."""
    table = spread_table(at_selected(summaries), ["lr", "l2"], sigma_grid_per_group=True)
    end = at_end_of_training(summaries)
    return table, end, spread_table(end, ["lr", "l2"], sigma_grid_per_group=True)


def decide_l2_lr(summaries: pd.DataFrame, tables: tuple | None = None) -> Verdict:
    """Notebook 03's verdict: verdict_l2_lr on the selected predictors (the paper's measure) and
    on the end-of-training ones, combined by on_both_measures. ``tables``: what
    :func:`l2_lr_tables` returned for these summaries, where the caller has it already (their
    bootstrap intervals are the cost)."""
    table, end, end_table = tables if tables is not None else l2_lr_tables(summaries)
    return on_both_measures(verdict_l2_lr(table, summaries), verdict_l2_lr(end_table, end))


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
def verdict_batch_size(table: pd.DataFrame, summaries: pd.DataFrame) -> Verdict:
    """Holds if the spread rises with the batch size: the least-squares slope of the spread
    against log2(b) has a 95% interval above 0 (bootstrap over test images, paired across b,
    and seeds). Does not hold if the interval lies below 0; undecided if it contains 0, or if
    the predictors scored do not all interpolate (train acc >= 99.5%: the paper compares
    networks that fit their training set; a spread then also measures how far each b got
    with the training, not only its memory). Spearman's rho is reported beside it."""
    from .stats import trend_interval
    if not np.isfinite(table["spread_pp"]).all():
        bad = ", ".join(f"b={int(b)}" for b in table.loc[~np.isfinite(table["spread_pp"]), "batch_size"])
        return Verdict(None, f"spread undefined (diverged or missing runs) at {bad}")
    if len(table) < 3:
        return Verdict(None, "needs at least 3 batch sizes")
    summaries = with_selected_accuracy(summaries)
    groups = [correct_matrix(summaries[summaries["batch_size"] == b]) for b in table["batch_size"]]
    if any(g is None for g in groups):
        return no_interval("trend")
    k, lo, hi = (100 * v for v in trend_interval(groups, np.log2(table["batch_size"].to_numpy(float))))
    rho = spearman(table["batch_size"], table["spread_pp"])
    holds = True if lo > 0 else (False if hi < 0 else None)
    pairs = ", ".join(f"b={int(r['batch_size'])}: {r['spread_pp']:.1f}" for _, r in table.iterrows())
    short = table[table["interpolated"] < 100] if "interpolated" in table else table.iloc[:0]
    premise = ""
    if len(short):
        holds = None
        premise = ("; but the predictors scored do not all interpolate at " + ", ".join(
            f"b={int(r['batch_size'])} ({r['interpolated']:.0f}% do, "
            f"lowest train acc. {train_acc_text(r['min_max_train_acc'])}%)"
            for _, r in short.iterrows()) + ": the claim's premise is not met")
    return Verdict(holds, f"slope of the spread per doubling of b {k:+.2f} pp [{lo:+.2f}, {hi:+.2f}] (95%); "
                          f"Spearman rho {rho:+.2f} (spreads in pp: {pairs})" + premise,
                   measured=[measure("slope of the spread per doubling of b", k, lo, hi),
                             # ``interpolated`` is already a percentage per b: weight it by runs
                             measure("predictors scored that interpolate", float(
                                 (table["interpolated"] * table["runs"]).sum() / table["runs"].sum())
                                 if "interpolated" in table else math.nan, unit="%")],
                   premise_met=not len(short))


# ------------------------------------------------------------------ 05 depth
def depth_table(summaries: pd.DataFrame) -> pd.DataFrame:
    """One row per run: the best train accuracy it reached, tau_interp (or "fails"), and the
    selected predictor's test accuracy, on every test image where the runs have it
    (``test_images`` says how many)."""
    cols = ["arch", "sigma_w", "seed", "max_train_acc", "tau_interp", "interpolated",
            "test_acc_at_best_val", "test_images", "status"]
    t = with_selected_accuracy(summaries)[cols].copy()
    t["max_train_acc"] = 100 * t["max_train_acc"]
    t["test_acc_at_best_val"] = 100 * t["test_acc_at_best_val"]
    t["tau_interp"] = t["tau_interp"].map(lambda v: "fails" if v is None or not np.isfinite(v) else str(int(v)))
    order = {a: i for i, a in enumerate(["resnet9", "resnet20", "resnet56", "resnet110"])}
    return t.sort_values(["arch", "sigma_w", "seed"], key=lambda s: s.map(order) if s.name == "arch" else s)


def clearly_below(acc: float, n: int, threshold: float = 0.995, confidence: float = 0.95) -> bool:
    """Whether an accuracy ``acc`` on ``n`` images is below ``threshold`` beyond the noise of
    counting: the upper end of its exact (Clopper-Pearson, scipy.stats.binomtest) 95% interval
    is below the threshold."""
    from scipy.stats import binomtest
    k = int(round(acc * n))
    return bool(binomtest(k, n).proportion_ci(confidence).high < threshold)


def best_train_interval(acc: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95% interval of an accuracy on n images, in %."""
    from scipy.stats import binomtest
    ci = binomtest(int(round(acc * n)), n).proportion_ci(confidence)
    return 100 * ci.low, 100 * ci.high


@decided_by_rule
def verdict_depth(summaries: pd.DataFrame, large_sigma_w: float) -> Verdict:
    """Holds if some deep run (not ResNet-9) with sigma_w >= large_sigma_w fails to
    interpolate clearly (its best train accuracy's exact 95% interval lies below 99.5%) while
    the same architecture interpolates at the grid's smallest sigma_w (so the failure goes with
    sigma_w, not with a budget too short for that depth) and every ResNet-9 run at the large
    sigma_w interpolates. Undecided if no deep architecture interpolates at the smallest
    sigma_w. Diverged runs count neither way (a diverged run is not a failure to
    interpolate); they are reported."""
    diverged = summaries[summaries["status"] == "diverged"]
    summaries = summaries[summaries["status"] != "diverged"]
    big = summaries[summaries["sigma_w"] >= large_sigma_w]
    r9, deep = big[big["arch"] == "resnet9"], big[big["arch"] != "resnet9"]
    if r9.empty or deep.empty:
        return Verdict(None, f"needs ResNet-9 and deeper runs at sigma_w >= {large_sigma_w} that did "
                             f"not diverge ({len(diverged)} diverged)")
    clear = [clearly_below(a, int(n)) for a, n in zip(deep["max_train_acc"], deep["n_train"])]
    smallest = summaries["sigma_w"].min()
    base = summaries[(summaries["sigma_w"] == smallest) & (summaries["arch"] != "resnet9")]
    trainable = set(base.loc[base["interpolated"].astype(bool), "arch"])
    fails = deep[np.array(clear, dtype=bool)]
    r9_ok = bool(r9["interpolated"].astype(bool).all())
    attributable = fails[fails["arch"].isin(trainable)]
    holds = bool(len(attributable) and r9_ok) if trainable else None
    several = "seed" in deep and deep["seed"].nunique() > 1

    def name(r) -> str:  # a run's name; its seed too where the deep runs have more than one
        return f"{r['arch']} sigma_w={r['sigma_w']:g}" + (f" seed {int(r['seed'])}" if several else "")

    failed = ", ".join(f"{name(r)} ({100 * r['max_train_acc']:.1f}%)" for _, r in fails.iterrows()) or "none"
    small = summaries[(summaries["sigma_w"] < large_sigma_w) & (summaries["arch"] != "resnet9")]
    return Verdict(holds, f"deep runs at sigma_w >= {large_sigma_w:g} that clearly fail to interpolate: "
                          f"{len(fails)}/{len(deep)}: {failed}; "
                          f"ResNet-9 interpolates there: {'yes' if r9_ok else 'no'} "
                          f"({int(r9['interpolated'].sum())}/{len(r9)}); deep runs at smaller sigma_w "
                          f"that interpolate: {int(small['interpolated'].astype(bool).sum())}/{len(small)}; "
                          f"deep architectures that interpolate at sigma_w={smallest:g}: "
                          f"{', '.join(sorted(trainable)) or 'none'}"
                          + ("; left out, diverged: " + ", ".join(name(r) for _, r in diverged.iterrows())
                             if len(diverged) else ""),
                   measured=[measure(f"{name(r)} best train acc.", 100 * r["max_train_acc"],
                                     *best_train_interval(r["max_train_acc"], int(r["n_train"])), unit="%",
                                     digits=3)  # the rule's line is 99.5%: one decimal would blur it
                             for _, r in deep.iterrows()])


# ------------------------------------------------------------------ 06 clocks
def clock_family(optimizer: str, l2: float) -> str:
    """Which clock the paper says governs a pipeline: T_adapt for adaptive optimizers,
    T_L2 for SGD with explicit L2, T_SGD for plain (low-LR) SGD."""
    if optimizer in ADAPTIVE:
        return "T_adapt"
    return "T_L2" if l2 > 0 else "T_SGD"


def at_selected_clocks(summaries: pd.DataFrame) -> pd.DataFrame:
    """The runs with each clock read at the selected (best-validation) epoch, the predictor the
    spread scores, instead of at the horizon (``T_*_at_best_val``, in every summary)."""
    return summaries.assign(**{c: summaries[f"{c}_at_best_val"].astype(float) for c in CLOCKS})


MEASURES = ("selected", "end")  # the paper's predictors (best validation loss), and the last epoch's


def clock_points(summaries: pd.DataFrame, group_keys: list[str], measure: str = "selected") -> pd.DataFrame:
    """One point per group of runs differing only in sigma_w and seed: its spread (mean over
    seeds) and the clocks its scored predictors had reached, labelled with the family of its
    governing clock. ``measure`` "selected": the predictors at the best validation loss, clocks
    at their selected epochs; "end": the weights of the last epoch, clocks at the horizon.
    ``interpolated`` and ``min_max_train_acc`` describe the predictors scored."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, not {measure!r}")
    summaries = _keyed(summaries)
    runs = at_selected_clocks(at_selected(summaries)) if measure == "selected" else at_end_of_training(summaries)
    t = _with_family(spread_table(runs, group_keys, sigma_grid_per_group=True))
    col = "best_val_epoch" if measure == "selected" else "epochs"  # the epoch of the predictors scored
    scored = runs[col].astype(float) if col in runs else math.nan
    epoch = runs.assign(scored_epoch=scored).groupby(group_keys, dropna=False)["scored_epoch"].mean()
    return t.merge(epoch.reset_index(), on=group_keys, how="left")


CLOCK_GROUP_KEYS = ["optimizer", "lr", "l2", "batch_size", "epochs", "arch", "width", "n_train", "last_batch"]


def _keyed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every identity column a loaded table has (``store.identity_columns``): one a
    hand-built table lacks is filled at its legacy value (``last_batch`` "keep")."""
    missing = {k: v for k, v in LEGACY_IDENTITY_VALUES.items() if k not in df.columns}
    return df.assign(**missing) if missing and not df.empty else df
PIPELINE_KEYS = [k for k in CLOCK_GROUP_KEYS if k != "epochs"]  # one pipeline: its horizons share runs


def _with_family(t: pd.DataFrame) -> pd.DataFrame:
    """``t`` with each row's ``family``: the clock that governs its optimizer and L2."""
    return t.assign(family=[clock_family(o, l) for o, l in zip(t["optimizer"], t["l2"])])


def clock_points_with_horizons(summaries: pd.DataFrame, long_epochs: pd.DataFrame | None = None,
                               horizons: list[int] | None = None, run_epochs: pd.DataFrame | None = None,
                               points_per_run: int = 4, measure: str = "selected") -> pd.DataFrame:
    """The clock points of every finished configuration (``source`` "final"), plus points from
    shorter horizons of the same runs (what a run of E epochs would have given,
    :func:`horizon_table`; every schedule here is constant, so a run's first E epochs are
    those of a run of E epochs): one point per horizon in ``horizons`` from the per-epoch
    metrics ``long_epochs`` (02's long runs, ``source`` "02 horizon"), and one at each
    1/``points_per_run`` of its horizon for every configuration in ``run_epochs`` (``source``
    "horizon"), each in the family of its own governing clock. Every clock is that of the
    predictors scored (``measure``: see :func:`clock_points`). A horizon whose predictors are
    those of a longer one (the same selected epochs) is the same point, kept once, at the
    longer horizon; the horizon equal to a run's full length is that run's own final point."""
    final = clock_points(summaries, CLOCK_GROUP_KEYS, measure)
    points = [final.assign(source="final", lowest_train_acc_scored=final["min_max_train_acc"])]
    if long_epochs is not None and not long_epochs.empty and horizons:
        points.append(_horizon_points(long_epochs, horizons, "02 horizon", measure))
    if run_epochs is not None and not run_epochs.empty:
        run_epochs = _keyed(run_epochs).drop_duplicates(["hash", "epoch"])  # a run that two sources share
        for _, g in run_epochs.groupby(CLOCK_GROUP_KEYS, dropna=False):
            hs = horizons_at_fractions(int(g["epoch"].max()), points_per_run)
            points.append(_horizon_points(g, hs, "horizon", measure))
    points = [p for p in points if not p.empty]
    return pd.concat(points, ignore_index=True).drop_duplicates(CLOCK_GROUP_KEYS, keep="first")


def _horizon_points(epochs: pd.DataFrame, horizons: list[int], source: str,
                    measure: str = "selected") -> pd.DataFrame:
    """Clock points at shorter horizons of long runs, each in the family of its governing
    clock; of horizons that score the same predictors (the same selected epochs), the longest
    is kept."""
    h = horizon_table(_keyed(epochs), horizons, by=PIPELINE_KEYS, measure=measure)
    if h.empty:
        return h
    h = _with_family(h.rename(columns={"horizon_epochs": "epochs"}).assign(source=source))
    h = h.sort_values("epochs", ascending=False).drop_duplicates(PIPELINE_KEYS + ["selected_epochs"], keep="first")
    return h.sort_values("epochs")


MIN_CLOCK_POINTS = 5  # fewer points give a bootstrap interval of rho that says little
# a bootstrap that resamples 2 pipelines has 3 distinct resamples: its "95% interval" is the
# range of 3 values, not an interval; 3 pipelines give 10
MIN_CLOCK_PIPELINES = 3
CLOCK_SCALE_KEYS = ["arch", "width", "n_train"]  # points are compared only within one scale


def scale_label(scale: dict) -> str:
    """'resnet9 w0.125 n5000' for {'arch': 'resnet9', 'width': 0.125, 'n_train': 5000}."""
    parts = [str(scale["arch"])] if "arch" in scale else []
    parts += [f"w{scale['width']:g}"] if "width" in scale else []
    parts += [f"n{int(scale['n_train'])}"] if "n_train" in scale else []
    return " ".join(parts)




def pipelines_of(points: pd.DataFrame) -> np.ndarray:
    """A label per point naming its pipeline (every clock key but the horizon): the points of
    one pipeline's horizons come from the same runs, so they are resampled together. Without
    those columns, each point is its own pipeline."""
    keys = [k for k in PIPELINE_KEYS if k in points.columns]
    if not keys:
        return np.array([str(i) for i in range(len(points))])
    return np.array(["|".join(str(v) for v in r) for r in points[keys].itertuples(index=False)])


def predictors_interpolate(points: pd.DataFrame) -> pd.Series:
    """Per clock point, whether its scored predictors all interpolate (``lowest_train_acc_scored``
    >= metrics.INTERP_THRESHOLD); points without that column are taken as interpolating. The
    points :func:`verdict_clocks` counts are these, with a defined spread."""
    if "lowest_train_acc_scored" not in points:
        return pd.Series(True, index=points.index)
    return points["lowest_train_acc_scored"].astype(float) >= 100 * metrics.INTERP_THRESHOLD


def counted_clock_points(points: pd.DataFrame) -> pd.Series:
    """Per clock point, whether :func:`verdict_clocks` counts it: a defined spread and scored
    predictors that all interpolate (:func:`predictors_interpolate`)."""
    return np.isfinite(points["spread_pp"].astype(float)) & predictors_interpolate(points)


def family_against_each_clock(points: pd.DataFrame, family: str) -> pd.DataFrame:
    """The points :func:`verdict_clocks` counts in one family (finite spread, interpolating
    predictors), at each scale, ranked against every clock, not only the family's own: Spearman's
    rho(clock, spread) and rho(clock) - rho(family's clock), with 95% intervals from the same
    pipeline bootstrap. An observation beside the rule (which reads only the family's clock):
    whether another clock orders the family's points better. Empty without such points."""
    from .stats import rho_difference_interval, rho_interval
    scale_keys = [k for k in CLOCK_SCALE_KEYS if k in points.columns]
    fam = points[(points["family"] == family) & counted_clock_points(points)]
    rows = []
    for key, g in (fam.groupby(scale_keys) if scale_keys else [((), fam)]):
        if len(g) < 3:
            continue
        pipes = pipelines_of(g)
        scale = scale_label(dict(zip(scale_keys, key if isinstance(key, tuple) else (key,))))
        for clock in CLOCKS:
            rho, lo, hi = rho_interval(g[clock], g["spread_pp"], clusters=pipes)
            d, d_lo, d_hi = ((math.nan, math.nan, math.nan) if clock == family else
                             rho_difference_interval(g[clock], g[family], g["spread_pp"], pipes))
            rows.append({"family": family, "scale": scale, "points": len(g), "pipelines": len(set(pipes.tolist())),
                         "clock": clock, "rho": rho, "rho_lo": lo, "rho_hi": hi,
                         f"rho - rho({family})": d, "diff_lo": d_lo, "diff_hi": d_hi})
    return pd.DataFrame(rows)


@decided_by_rule
def verdict_clocks(points: pd.DataFrame) -> tuple[Verdict, pd.DataFrame]:
    """Within each family at each scale (architecture, width, training-set size), Spearman's
    rho between the governing clock and the spread, and rho(clock) - rho(epoch of the
    predictors scored): whether the clock, not the epoch count, orders the spread where the
    two disagree (another lr, batch size or L2 at the same epochs). 95% intervals from a
    bootstrap that resamples whole pipelines (the horizons of one pipeline share runs;
    initlib.stats.rho_interval, rho_difference_interval). Only points whose scored predictors
    all interpolate (train acc >= 99.5%: the claims compare networks that fit their training
    set; a spread of predictors that do not, or of weights caught mid-swing, measures the
    training, not the memory) count. A group is decided with >= 5 of them from >= 3 pipelines
    (2 pipelines give a bootstrap 3 distinct resamples; with 3, 3 of its 27 resamples repeat one
    pipeline, along which clock and epochs rank alike, so the difference's interval contains 0
    whatever the data: only a group of >= 4 pipelines can show the clock ordering the spread
    better, or worse, than epochs). Holds if in every decided group the
    spread falls as the clock grows (rho's interval below 0) and in at least one the clock
    orders it better than epochs (the difference's interval below 0). Does not hold if in a decided group the spread rises with
    the clock (interval above 0) or epochs order it better than the clock (difference above 0).
    Undecided otherwise. Scales are never pooled: a larger training set gives larger spreads at
    smaller clocks, which alone would make a pooled rho negative. Points whose spread is
    undefined (diverged or missing runs) or whose predictors do not interpolate are left out
    and counted; other groups are shown, not decided."""
    from .stats import rho_difference_interval, rho_interval
    scale_keys = [k for k in CLOCK_SCALE_KEYS if k in points.columns]
    nan3 = (math.nan, math.nan, math.nan)
    rows = []
    for key, g in points.groupby(["family", *scale_keys], sort=True):
        fam = key[0]
        finite = g[np.isfinite(g["spread_pp"])]
        ok = g[counted_clock_points(g)]
        pipes = pipelines_of(ok)
        n_pipes = len(set(pipes.tolist()))
        rho, lo, hi = rho_interval(ok[fam], ok["spread_pp"], clusters=pipes) if len(ok) >= 3 else nan3
        has_epochs = ("scored_epoch" in ok and len(ok) >= 3
                      and bool(np.isfinite(ok["scored_epoch"].astype(float)).all()))
        d, d_lo, d_hi = (rho_difference_interval(ok[fam], ok["scored_epoch"], ok["spread_pp"], pipes)
                         if has_epochs else nan3)
        rows.append({"clock": fam, "scale": scale_label(dict(zip(scale_keys, key[1:]))),
                     "points": len(ok), "pipelines": n_pipes, "undefined": len(g) - len(finite),
                     "not_interpolating": len(finite) - len(ok),
                     "rho": rho, "rho_lo": lo, "rho_hi": hi,
                     "rho_minus_rho_epochs": d, "diff_lo": d_lo, "diff_hi": d_hi,
                     "decided": len(ok) >= MIN_CLOCK_POINTS and n_pipes >= MIN_CLOCK_PIPELINES})
    rho = pd.DataFrame(rows)
    decided = rho[rho["decided"]] if len(rho) else rho
    rises, epochs_better = bool((decided["rho_lo"] > 0).any()), bool((decided["diff_lo"] > 0).any())
    falls, clock_better = bool((decided["rho_hi"] < 0).all()), bool((decided["diff_hi"] < 0).any())
    holds = None if decided.empty else (
        False if (rises or epochs_better) else (True if (falls and clock_better) else None))
    name = lambda c, sc: f"{c} at {sc}" if sc else c  # noqa: E731
    interval = lambda v, lo, hi: f"{v:+.2f} [{lo:+.2f}, {hi:+.2f}]" if np.isfinite(v) else "n/a"  # noqa: E731
    parts = "; ".join(f"{name(r.clock, r.scale)}: rho={interval(r.rho, r.rho_lo, r.rho_hi)}, rho - rho(epochs)="
                      f"{interval(r.rho_minus_rho_epochs, r.diff_lo, r.diff_hi)} ({r.points} pts, {r.pipelines} "
                      f"pipeline{'' if r.pipelines == 1 else 's'}"
                      f"{f', {r.not_interpolating} left out: not interpolating' if r.not_interpolating else ''}"
                      f"{'' if r.decided else ', not decided'})" for r in rho.itertuples())
    measured = [measure(f"rho({name(r.clock, r.scale)}, spread), {r.points} points", r.rho, r.rho_lo, r.rho_hi,
                        unit="") for r in rho.itertuples() if np.isfinite(r.rho)]
    measured += [measure(f"rho({name(r.clock, r.scale)}) - rho(epochs)", r.rho_minus_rho_epochs, r.diff_lo,
                         r.diff_hi, unit="") for r in rho.itertuples()
                 if r.decided and np.isfinite(r.rho_minus_rho_epochs)]
    none = ("" if len(decided) else f"no group is decided (each needs {MIN_CLOCK_POINTS} or more points with a "
            f"defined spread and interpolating predictors from {MIN_CLOCK_PIPELINES} or more pipelines at one "
            f"scale). ")
    return Verdict(holds, f"{none}spread vs governing clock, Spearman (95% intervals, pipelines resampled): {parts}",
                   measured=measured), rho
