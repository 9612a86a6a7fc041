"""Figures of the six findings: labelled axes, units, legends, sigma_w on the x axis."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "axes.grid": True,
                     "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False})


def save(fig, out_dir, name: str) -> list[Path]:
    """Save ``fig`` as <out_dir>/<name>.png and .pdf; return the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for p in paths:
        fig.savefig(p, bbox_inches="tight", metadata={"CreationDate": None} if p.suffix == ".pdf" else None)
    return paths


def acc_vs_sigma(acc: pd.DataFrame, group: str, title: str, ylabel="test acc. at best val. loss (%)",
                 label_fmt="{}", ax=None):
    """One line per group: mean over seeds, error bars from min to max over seeds."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(6, 4))
    for key, g in acc.groupby(group, sort=False):
        g = g.sort_values("sigma_w")
        ax.errorbar(g["sigma_w"], g["mean"], yerr=[g["mean"] - g["min"], g["max"] - g["mean"]],
                    marker="o", capsize=3, label=label_fmt.format(key))
    ax.set_xlabel(r"initialization scale $\sigma_w$")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, title="mean; bars: min-max over seeds", title_fontsize=7)
    return fig


def norm_over_epochs(epochs: pd.DataFrame, panel: str, title: str, seed: int | None = None):
    """Frobenius norm of all kernels against epoch: one panel per ``panel`` value, one line
    per sigma_w (colour), log y. A flat line at its initial value is radial memory."""
    e = epochs if seed is None else epochs[epochs["seed"] == seed]
    if e.empty:
        raise ValueError(f"no per-epoch metrics of seed {seed} (the runs have seeds "
                         f"{sorted(int(s) for s in epochs['seed'].unique())})")
    keys = list(dict.fromkeys(e[panel]))
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 3.2), sharey=True, squeeze=False)
    sigmas = sorted(e["sigma_w"].unique())
    cmap = plt.get_cmap("viridis")
    for ax, k in zip(axes[0], keys):
        for i, s in enumerate(sigmas):
            g = e[(e[panel] == k) & (e["sigma_w"] == s)].sort_values("epoch")
            ax.plot(g["epoch"], g["weight_norm"], color=cmap(i / max(1, len(sigmas) - 1)),
                    label=fr"$\sigma_w$={s:g}")
        ax.set_yscale("log")
        ax.set_title(str(k))
        ax.set_xlabel("epoch")
    axes[0][0].set_ylabel(r"$\|W\|_F$ (all kernels)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _interval(g: pd.DataFrame):
    """Error bars for a spread: its 95% interval where there is one, else the seed range."""
    if "ci_lo_pp" in g and np.isfinite(g["ci_lo_pp"]).all():
        return [g["spread_pp"] - g["ci_lo_pp"], g["ci_hi_pp"] - g["spread_pp"]], "95% interval"
    return [g["spread_pp"] - g["spread_min_pp"], g["spread_max_pp"] - g["spread_pp"]], "seed range"


def spread_vs(table: pd.DataFrame, x: str, xlabel: str, title: str, group: str | None = None,
              logx: bool = False, paper: dict | None = None):
    """Spread (pp) against ``x``: error bars are its 95% interval (else the seed range); the
    grey dashed line is the noise floor's 95% quantile (the spread sigma_w would show if it did
    nothing)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    groups = table.groupby(group, sort=False) if group else [(None, table)]
    for i, (key, g) in enumerate(groups):
        g = g.sort_values(x)
        yerr, what = _interval(g)
        ax.errorbar(g[x], g["spread_pp"], yerr=yerr, marker="o", capsize=3,
                    label=(what if key is None else f"{group}={key} ({what})"))
        if "floor_hi_pp" in g:  # one legend entry for the floor, however many groups draw one
            ax.plot(g[x], g["floor_hi_pp"], ls="--", color="0.5",
                    label="noise floor (95% quantile)" if i == 0 else "_nolegend_")
    if paper:
        ax.scatter(list(paper), list(paper.values()), marker="*", s=140, color="k", zorder=5,
                   label="paper")
    if logx:  # ticks at the values run, labelled plainly (b = 16, 128, 256; no 10^k minors)
        ax.set_xscale("log")
        ticks = sorted(set(table[x]))
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(r"test-accuracy spread over $\sigma_w$ (pp)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


def spread_bars(table: pd.DataFrame, group: str, title: str, paper: dict | None = None):
    """One bar per group: its spread (pp) with the 95% interval, and the noise floor (expected,
    and its 95% quantile) as a grey band behind it; ``paper`` marks the paper's numbers."""
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(table))
    yerr, what = _interval(table)
    ax.bar(x, table["spread_pp"], color="tab:blue", alpha=0.8, label=f"spread ({what})")
    ax.errorbar(x, table["spread_pp"], yerr=yerr, fmt="none", color="k", capsize=4)
    for i, (lo, hi) in enumerate(zip(table["floor_pp"], table["floor_hi_pp"])):
        ax.fill_between([i - 0.45, i + 0.45], 0, hi, color="0.6", alpha=0.35, lw=0,
                        label="noise floor up to its 95% quantile" if i == 0 else None)
        ax.plot([i - 0.45, i + 0.45], [lo, lo], color="0.3", lw=1, label="noise floor, expected" if i == 0 else None)
    if paper:
        px = [i for i, k in enumerate(table[group]) if k in paper]
        ax.scatter(px, [paper[table[group].iloc[i]] for i in px], marker="*", s=140, color="k",
                   zorder=5, label="paper")
    ax.set_xticks(x, [str(k) for k in table[group]])
    ax.set_ylabel(r"test-accuracy spread over $\sigma_w$ (pp)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig


def spread_heatmap(table: pd.DataFrame, title: str, mark: tuple | None = None):
    """Spread (pp) on the learning rate x L2 grid; ``mark`` = (lr, l2) of the paper's point."""
    piv = table.pivot(index="l2", columns="lr", values="spread_pp").sort_index(ascending=False)
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    im = ax.imshow(piv.values, cmap="magma_r", aspect="auto")
    ax.grid(False)
    ax.set_xticks(range(len(piv.columns)), [f"{v:g}" for v in piv.columns])
    ax.set_yticks(range(len(piv.index)), [f"{v:g}" for v in piv.index])
    for i in range(piv.shape[0]):
        for j in range(piv.shape[1]):
            v = piv.values[i, j]
            ax.text(j, i, "not run" if not np.isfinite(v) else f"{v:.1f}", ha="center", va="center",
                    color="w" if np.isfinite(v) and v > np.nanmax(piv.values) / 2 else "k", fontsize=9)
    if mark is not None and mark[0] in piv.columns and mark[1] in piv.index:
        j, i = list(piv.columns).index(mark[0]), list(piv.index).index(mark[1])
        ax.add_patch(plt.Rectangle((j - .5, i - .5), 1, 1, fill=False, ec="cyan", lw=3))
        ax.text(j, i + 0.38, "paper: 0.3 pp", ha="center", va="center", color="cyan", fontsize=7)
    ax.set_xlabel(r"learning rate $\eta$")
    ax.set_ylabel(r"explicit L2 $\lambda$")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label=r"spread over $\sigma_w$ (pp)")
    return fig


def depth_panels(summaries: pd.DataFrame, title: str):
    """Per depth, against sigma_w: the best train accuracy reached (failures to interpolate
    below the 99.5% line, hollow markers) and the test accuracy at best validation loss; a
    marker per run (seed), a line through their means."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for arch, runs in summaries.groupby("arch", sort=False):
        g = runs.groupby("sigma_w").agg(train=("max_train_acc", "mean"),
                                        test=("test_acc_at_best_val", "mean")).reset_index()
        seeds = runs["seed"].nunique() if "seed" in runs else 1
        line, = a1.plot(g["sigma_w"], 100 * g["train"], label=f"{arch} ({seeds} seed{'s' * (seeds > 1)})")
        c = line.get_color()
        for s, tr, ok in zip(runs["sigma_w"], runs["max_train_acc"], runs["interpolated"].astype(bool)):
            a1.plot(s, 100 * tr, "o", color=c, mfc=c if ok else "none")
        a2.plot(g["sigma_w"], 100 * g["test"], "-", color=c, label=arch)
        a2.plot(runs["sigma_w"], 100 * runs["test_acc_at_best_val"], "o", color=c)
    a1.axhline(99.5, color="k", ls="--", lw=1, label="interpolation (99.5%)")
    a1.set_ylabel("best train accuracy (%)\nhollow: fails to interpolate")
    a2.set_ylabel("test acc. at best val. loss (%)\nmarkers: runs; line: their mean")
    for a in (a1, a2):
        a.set_xlabel(r"initialization scale $\sigma_w$")
        a.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def clocks_scatter(points: pd.DataFrame, title: str):
    """Spread against each clock (log x), coloured by the family whose clock governs it, one
    marker per scale (architecture, width, training-set size): the verdict compares points only
    within one scale. Hollow: points whose scored predictors do not interpolate (train acc. below
    metrics.INTERP_THRESHOLD), which the verdict leaves out."""
    from .analysis import CLOCK_SCALE_KEYS, predictors_interpolate, scale_label
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), sharey=True)
    colors = {"T_SGD": "tab:blue", "T_L2": "tab:green", "T_adapt": "tab:red"}
    keys = [k for k in CLOCK_SCALE_KEYS if k in points.columns]
    scales = sorted({tuple(r) for r in points[keys].itertuples(index=False)}) if keys else [()]
    markers = dict(zip(scales, "o^sDvP*X"))
    fits = predictors_interpolate(points)
    for ax, clock in zip(axes, ("T_SGD", "T_L2", "T_adapt")):
        for (fam, *scale), g in points.groupby(["family", *keys]):
            x = g[clock].where(g[clock] > 0)
            edge = "k" if fam == clock else "none"
            for fit in (True, False):
                m = fits.loc[g.index] == fit
                if not m.any():
                    continue
                label = f"{fam}, {scale_label(dict(zip(keys, scale)))}".rstrip(", ")
                ax.scatter(x[m], g["spread_pp"][m], marker=markers.get(tuple(scale), "o"),
                           s=40 if fam == clock else 18,
                           **({"color": colors[fam], "edgecolor": edge, "label": label} if fit else
                              {"facecolor": "none", "edgecolor": colors[fam], "linewidth": 0.8,
                               "label": label + ", not interpolating"}))
        shown = (points[clock] > 0) & np.isfinite(points["spread_pp"])
        if shown.any():  # a log axis needs a point on it (no family may reach this clock)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(plt.NullFormatter())
        else:
            ax.text(0.5, 0.5, "no point with a defined spread", transform=ax.transAxes, ha="center")
        ax.set_xlabel(f"{clock} at the predictors scored")
    axes[0].set_ylabel(r"spread over $\sigma_w$ (pp)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def clock_family_by_lr(points: pd.DataFrame, family: str, title: str):
    """One clock family's points (spread against its governing clock, log x), one colour per
    learning rate and one line per pipeline (its horizons, in clock order), a panel per scale.
    Hollow: predictors that do not interpolate (the verdict leaves them out). It shows what a
    pooled rank correlation cannot: whether the clock orders the spread at each lr, and whether
    two lr at one clock spread alike. Returns None when the family has no point."""
    from .analysis import CLOCK_SCALE_KEYS, PIPELINE_KEYS, predictors_interpolate, scale_label
    if family not in points:
        return None
    fam = points[(points["family"] == family) & np.isfinite(points["spread_pp"].astype(float))
                 & (points[family] > 0)]
    if fam.empty:
        return None
    keys = [k for k in CLOCK_SCALE_KEYS if k in fam.columns]
    at_scales = [(dict(zip(keys, k)), g) for k, g in fam.groupby(keys)] if keys else [({}, fam)]
    fig, axes = plt.subplots(1, len(at_scales), figsize=(5.5 * len(at_scales), 3.8), squeeze=False)
    lrs = sorted(fam["lr"].unique())
    cmap = plt.get_cmap("viridis")
    colors = {lr: cmap(i / max(1, len(lrs) - 1) * 0.85) for i, lr in enumerate(lrs)}
    pipe_keys = [k for k in PIPELINE_KEYS if k in fam.columns]
    for ax, (scale, at) in zip(axes[0], at_scales):
        for _, g in at.groupby(pipe_keys, dropna=False):
            g = g.sort_values(family)
            c = colors[g["lr"].iloc[0]]
            ax.plot(g[family], g["spread_pp"], "-", color=c, lw=0.8, alpha=0.6)
            fits = predictors_interpolate(g)
            ax.scatter(g[family][fits], g["spread_pp"][fits], color=c, edgecolor="k", s=36, zorder=3)
            ax.scatter(g[family][~fits], g["spread_pp"][~fits], facecolor="none", edgecolor=c, s=36, zorder=3)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xlabel(f"{family} at the predictors scored")
        ax.set_title(scale_label(scale), fontsize=9)
    axes[0][0].set_ylabel(r"spread over $\sigma_w$ (pp)")
    handles = [plt.Line2D([], [], marker="o", ls="-", color=colors[lr], markeredgecolor="k", label=f"lr {lr:g}")
               for lr in lrs]
    axes[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
