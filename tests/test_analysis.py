"""The tables and verdicts of initlib.analysis on hand-computed examples."""
import math

import numpy as np

import pandas as pd
import pytest

from initlib import analysis
from initlib.clocks import CLOCKS


def runs(rows):
    """Summaries as load_summaries gives them, from (group dict, sigma_w, seed, test acc)."""
    out = []
    for i, (group, sigma_w, seed, acc) in enumerate(rows):
        out.append({"hash": f"{i:012x}", "sigma_w": sigma_w, "seed": seed, "test_acc_at_best_val": acc,
                    "interpolated": True, "max_train_acc": 1.0, "status": "finished", "n_test": 1000,
                    **{c: 1.0 for c in CLOCKS}, **{f"{c}_at_best_val": 1.0 for c in CLOCKS}, **group})
    return pd.DataFrame(out)


def opt_runs(spreads):
    """Per optimizer and seed, two sigma_w runs whose accuracies differ by the given pp."""
    rows = []
    for opt, per_seed in spreads.items():
        for seed, pp in enumerate(per_seed):
            rows += [({"optimizer": opt, "lr": 0.1}, 0.1, seed, 0.5 + pp / 100),
                     ({"optimizer": opt, "lr": 0.1}, 2.5, seed, 0.5)]
    return runs(rows)


def test_spread_table_mean_and_range_over_seeds():
    t = analysis.spread_table(opt_runs({"sgd": [10.0, 14.0], "adam": [2.0, 3.0]}), ["optimizer"])
    t = t.set_index("optimizer")
    assert t.loc["sgd", "spread_pp"] == pytest.approx(12.0)
    assert (t.loc["sgd", "spread_min_pp"], t.loc["sgd", "spread_max_pp"]) == pytest.approx((10.0, 14.0))
    assert t.loc["adam", "spread_pp"] == pytest.approx(2.5)
    assert t.loc["sgd", "seeds"] == 2 and t.loc["sgd", "runs"] == 4
    assert analysis.seed_range_pp(t.reset_index()) == pytest.approx(4.0)
    assert analysis.pp_with_range(t.loc["sgd"]) == "12.0 pp (10.0..14.0)"


def with_correct(summaries, n=1000, seed=0):
    """The summaries with a selected predictor scored on n images: each run right on a random
    set of round(acc * n) of them (independent across runs), as train.score_selected stores it."""
    from initlib.store import pack_correct
    rng = np.random.default_rng(seed)
    correct = [rng.permutation(n) < round(a * n) for a in summaries["test_acc_at_best_val"]]
    return summaries.assign(selected_test_n=n, selected_test_acc=[c.mean() for c in correct],
                            selected_test_correct=[pack_correct(c) for c in correct])


def optimizer_verdict(spreads, n=1000):
    s = with_correct(opt_runs(spreads), n)
    t = analysis.spread_table(s, ["optimizer"])
    d = analysis.difference_table(s, "optimizer", "sgd")
    return analysis.verdict_optimizer_dependence(t, d), d.set_index("optimizer")


def test_optimizer_verdict_needs_the_difference_interval_above_zero():
    # SGD 12 pp against Adam 2.5 pp on 1,000 images per run: the difference, 9.5 pp, has an
    # interval of about +-5 pp (two seeds, independent test-sampling noise per run): above 0.
    v, d = optimizer_verdict({"sgd": [10.0, 14.0], "adam": [2.0, 3.0]})
    assert d.loc["adam", "diff_pp"] == pytest.approx(9.5, abs=0.01)
    assert 0 < d.loc["adam", "diff_lo_pp"] < 9.5 < d.loc["adam", "diff_hi_pp"]
    assert v.holds is True and "minus adam 2.5: +9.5 pp" in v.text
    # 4 pp against 3 pp: SGD is larger, but the interval contains 0: undecided
    v, d = optimizer_verdict({"sgd": [4.0, 4.0], "adam": [3.0, 3.0]})
    assert d.loc["adam", "diff_lo_pp"] < 0 < d.loc["adam", "diff_hi_pp"] and v.holds is None
    # SGD smaller than Adam: does not hold
    v, _ = optimizer_verdict({"sgd": [2.0, 3.0], "adam": [12.0, 14.0]})
    assert v.holds is False and "DOES NOT HOLD" in str(v)
    # no adaptive optimizer, or no per-image correctness: undecided
    v, _ = optimizer_verdict({"sgd": [6.0]})
    assert v.holds is None
    t = analysis.spread_table(opt_runs({"sgd": [10.0], "adam": [2.0]}), ["optimizer"])
    d = analysis.difference_table(opt_runs({"sgd": [10.0], "adam": [2.0]}), "optimizer", "sgd")
    assert math.isnan(d["diff_lo_pp"].iloc[0]) and analysis.verdict_optimizer_dependence(t, d).holds is None


def test_optimizer_verdict_needs_interpolating_sgd_predictors_and_a_spread_above_its_floor():
    # the spreads of the passing case above, but SGD's selected predictors at 70% train
    # accuracy: the claim's premise (">= 99.5% train accuracy") is not met -> undecided
    s = with_correct(opt_runs({"sgd": [10.0, 14.0], "adam": [2.0, 3.0]}))
    s["train_acc_at_best_val"] = np.where(s["optimizer"] == "sgd", 0.70, 0.999)
    t = analysis.spread_table(analysis.at_selected(s), ["optimizer"])
    assert t.set_index("optimizer").loc["sgd", "interpolated"] == 0
    v = analysis.verdict_optimizer_dependence(t, analysis.difference_table(s, "optimizer", "sgd"))
    assert v.holds is None and "premise" in v.text
    # sigma_w does nothing for SGD, but its runs are noisy (sd 8 pp from seed to seed) and
    # Adam's are not: the max - min of noisy numbers is larger than Adam's, not memory
    rng = np.random.default_rng(3)
    rows = [({"optimizer": "sgd", "lr": 0.1}, sw, seed, 0.6 + rng.normal(0, 0.08))
            for seed in range(3) for sw in (0.1, 0.5, 1.0, 2.5)]
    rows += [({"optimizer": "adam", "lr": 0.1}, sw, seed, 0.6) for seed in range(3) for sw in (0.1, 0.5, 1.0, 2.5)]
    s = with_correct(runs(rows), n=10000)
    t = analysis.spread_table(s, ["optimizer"])
    d = analysis.difference_table(s, "optimizer", "sgd")
    sgd = t.set_index("optimizer").loc["sgd"]
    assert sgd["spread_pp"] > 5 and d["diff_lo_pp"].iloc[0] > 0   # what the difference alone would say
    assert sgd["spread_pp"] < sgd["floor_hi_pp"]
    v = analysis.verdict_optimizer_dependence(t, d)
    # its spread's whole 95% interval lies within the floor: SGD does not remember
    assert sgd["ci_hi_pp"] <= sgd["floor_hi_pp"]
    assert v.holds is False and "not above it" in v.text


def l2_runs(spread_lo, spread_hi, doses=()):
    """Notebook 03's cells: (lr 0.1, no L2), (lr 0.3, no L2), (lr 0.3, L2 0.065), plus ``doses``:
    ((lr, l2), spread_pp) cells that are not the verdict's corners."""
    rows = []
    for (lr, l2), pp in (((0.1, 0.0), spread_lo), ((0.3, 0.0), spread_lo), ((0.3, 0.065), spread_hi), *doses):
        rows += [({"optimizer": "sgd", "lr": lr, "l2": l2}, 0.1, 0, 0.5 + pp / 100),
                 ({"optimizer": "sgd", "lr": lr, "l2": l2}, 2.5, 0, 0.5)]
    s = with_correct(runs(rows))
    return analysis.spread_table(s, ["lr", "l2"]), s


def test_l2_lr_corners_are_the_smallest_lr_without_l2_and_the_largest_lr_with_its_largest_l2():
    # 03's cpu grid by hand: three no-L2 controls, L2 doses at lr 0.05 and 0.15, repeats per seed
    grid = [(0.015, 0.0), (0.05, 0.0), (0.15, 0.0), (0.05, 0.002), (0.15, 0.002), (0.15, 0.0061),
            (0.15, 0.0061), (0.015, 0.0)]
    assert analysis.l2_lr_corners(grid) == ((0.015, 0.0), (0.15, 0.0061))
    # a larger L2 at a smaller lr is a dose, not a corner
    assert analysis.l2_lr_corners(grid + [(0.05, 0.02)]) == ((0.015, 0.0), (0.15, 0.0061))
    # no L2 at the largest lr, or no control at the smallest: no corners
    assert analysis.l2_lr_corners([(0.015, 0.0), (0.15, 0.0), (0.05, 0.002)]) is None
    assert analysis.l2_lr_corners([(0.015, 0.002), (0.15, 0.0061)]) is None
    assert analysis.l2_lr_corners([]) is None


def test_l2_verdict_needs_a_collapse_to_the_noise_floor():
    # 20 pp at the low lr against 1 pp with L2: the difference is far above 0, and 1 pp is
    # under the floor of one seed on 1,000 images (95% quantile: 2.77 * 1.58 = 4.4 pp)
    v = analysis.verdict_l2_lr(*l2_runs(20.0, 1.0))
    assert v.holds is True and "+19.0 pp" in v.text
    # 15 pp with L2: well above its floor -> does not hold
    assert analysis.verdict_l2_lr(*l2_runs(20.0, 15.0)).holds is False
    # no collapse relative to a 3 pp spread: the difference interval contains 0 -> does not hold
    assert analysis.verdict_l2_lr(*l2_runs(3.0, 2.0)).holds is False
    # a collapse in a cell whose runs did not train: not forgetting -> undecided
    table, s = l2_runs(20.0, 1.0)
    table.loc[table["l2"] > 0, "interpolated"] = 0.0
    v = analysis.verdict_l2_lr(table, s)
    assert v.holds is None and "premise (>= 99.5%) is not met" in v.text and not v.premise_met
    assert analysis.verdict_l2_lr(*l2_runs(20.0, 1.0)).premise_met
    # a larger L2 at a smaller lr (a dose for notebook 06) is not the corner cell: the verdict
    # still compares the largest lr's largest L2, whatever the dose's spread
    for dose_pp, holds in ((20.0, True), (0.0, True)):
        v = analysis.verdict_l2_lr(*l2_runs(20.0, 1.0, doses=(((0.1, 0.2), dose_pp),)))
        assert v.holds is holds and "lr=0.3, L2=0.065" in v.text, v.text
    assert analysis.verdict_l2_lr(*l2_runs(20.0, 15.0, doses=(((0.1, 0.2), 0.0),))).holds is False


def test_decide_l2_lr_reads_both_measures_as_notebook_03_does():
    _, s = l2_runs(20.0, 1.0)
    s = s.assign(train_acc_at_best_val=1.0)

    def with_end(end, train_acc=1.0):
        return s.assign(final_train_acc=train_acc, end_test_acc=end["selected_test_acc"].to_numpy(),
                        end_test_n=end["selected_test_n"].to_numpy(),
                        end_test_correct=end["selected_test_correct"].to_numpy())
    # the end-of-training predictors interpolate and collapse as well: the two measures agree
    v = analysis.decide_l2_lr(with_end(l2_runs(20.0, 1.0)[1]))
    assert v.holds is True and "agree" in v.text
    # they interpolate and the L2 cell keeps 15 pp there: the measures disagree -> undecided
    v = analysis.decide_l2_lr(with_end(l2_runs(20.0, 15.0)[1]))
    assert v.holds is None and "disagree" in v.text
    # they do not interpolate (30% train acc.): they cannot speak, and the verdict rests on the
    # selected predictors alone
    v = analysis.decide_l2_lr(with_end(l2_runs(20.0, 15.0)[1], train_acc=0.3))
    assert v.holds is True and "alone" in v.text and "do not interpolate" in v.text


def test_slope_and_trend_interval_on_hand_computed_cases():
    from initlib import stats
    assert stats.slope([1, 2, 3], [1, 3, 5]) == pytest.approx(2.0)
    assert stats.slope([0, 1, 2, 3], [4, 4, 4, 4]) == pytest.approx(0.0)
    # three groups (one seed, two sigma_w, 1,000 images) with spreads 0.10, 0.20, 0.30 at x
    # 0, 1, 2: slope 0.10, and an interval around it that excludes 0; flat spreads: around 0
    img = np.arange(1000)
    group = lambda pp: np.stack([img < 500 + 10 * pp, img < 500])[None]  # noqa: E731
    k, lo, hi = stats.trend_interval([group(10), group(20), group(30)], [0, 1, 2], n_resamples=500)
    assert k == pytest.approx(0.10) and 0 < lo < 0.10 < hi
    k, lo, hi = stats.trend_interval([group(10), group(10), group(10)], [0, 1, 2], n_resamples=500)
    assert k == pytest.approx(0.0) and lo <= 0 <= hi


def batch_runs(spreads):
    rows = []
    for b, pp in spreads.items():
        rows += [({"optimizer": "sgd", "lr": 0.1, "batch_size": b}, 0.1, 0, 0.5 + pp / 100),
                 ({"optimizer": "sgd", "lr": 0.1, "batch_size": b}, 2.5, 0, 0.5)]
    s = with_correct(runs(rows))
    return analysis.spread_table(s, ["batch_size"]), s


def test_batch_size_verdict_is_a_trend_whose_interval_excludes_zero():
    assert analysis.spearman([16, 32, 64], [1.0, 3.0, 2.0]) == pytest.approx(0.5)
    assert math.isnan(analysis.spearman([16, 32], [1.0, 2.0]))
    # spreads 2, 10, 20 pp at b = 16, 64, 256: +4.5 pp per doubling, interval above 0
    v = analysis.verdict_batch_size(*batch_runs({16: 2.0, 64: 10.0, 256: 20.0}))
    assert v.holds is True and "+4.50 pp" in v.text and "rho +1.00" in v.text
    assert analysis.verdict_batch_size(*batch_runs({16: 20.0, 64: 10.0, 256: 2.0})).holds is False
    assert analysis.verdict_batch_size(*batch_runs({16: 10.0, 64: 10.5, 256: 10.0})).holds is None
    # the same rising trend, but b = 256's predictors stop at 80% train accuracy: undecided
    table, s = batch_runs({16: 2.0, 64: 10.0, 256: 20.0})
    s.loc[s["batch_size"] == 256, ["interpolated", "max_train_acc"]] = [False, 0.8]
    table = analysis.spread_table(s, ["batch_size"])
    v = analysis.verdict_batch_size(table, s)
    assert v.holds is None and "b=256 (0% do, lowest train acc. 80.0%)" in v.text and not v.premise_met
    # 4 of its 6 predictors interpolate (2 per b): 66.7%, a share, never above 100
    share = next(m for m in v.measured if m["what"] == "predictors scored that interpolate")
    assert share["value"] == pytest.approx(66.6667) and share["unit"] == "%"
    # one run 0.02 pp short of the line: it reads as short, never as "99.5%"
    s.loc[s["batch_size"] == 256, "max_train_acc"] = 0.9948
    v = analysis.verdict_batch_size(analysis.spread_table(s, ["batch_size"]), s)
    assert v.holds is None and "b=256 (0% do, lowest train acc. 99.48%)" in v.text


@pytest.mark.parametrize("pct, text", [(73.26, "73.3"), (99.48, "99.48"), (99.4952, "99.495"), (99.5, "99.5"),
                                       (99.96, "100.0"), (99.44, "99.4"), (99.49996, "99.4999")])
def test_a_train_accuracy_below_the_line_never_reads_as_on_it(pct, text):
    assert analysis.train_acc_text(pct) == text


def horizon_rows(spreads, epochs=("28/45", "28/45")):
    """A horizon table (one seed, 1,000 test images at p = 0.5) with these spreads at 78 and
    156 epochs, and these selected epochs (per sigma_w) at each."""
    return pd.DataFrame({"horizon_epochs": [78, 156], "spread_pp": spreads, "min_train_acc": [100.0, 100.0],
                         "spread_min_pp": spreads, "spread_max_pp": spreads, "selected_epochs": list(epochs),
                         "mean_acc": [0.5, 0.5], "test_images": [1000, 1000], "floor_hi_pp": [4.4, 4.4]})


def test_long_training_verdict_uses_the_interval_of_the_change():
    # one seed, 1,000 test images at p = 0.5: the change has sd 2 * 1.58 = 3.16 pp (+-6.2)
    end = horizon_rows([20.0, 19.0])
    v = analysis.verdict_long_training(horizon_rows([20.0, 20.0]), end, 78)
    assert v.holds is True and "change -1.0 [-7.2, +5.2]" in v.text
    assert "the same checkpoints at 78 and 156 epochs" in v.text      # selected: not evidence
    end["spread_pp"] = [20.0, 12.0]                                   # -8 +- 6.2: a measurable fall
    assert analysis.verdict_long_training(horizon_rows([20.0, 20.0]), end, 78).holds is False
    end["spread_pp"] = [5.0, 4.0]                                     # no fall, but at the noise floor
    assert analysis.verdict_long_training(horizon_rows([20.0, 20.0]), end, 78).holds is False
    # selected checkpoints that differ are used: a measurable fall there is a 'does not hold'
    moved = horizon_rows([20.0, 10.0], epochs=("28/45", "150/140"))
    assert analysis.verdict_long_training(moved, horizon_rows([20.0, 19.0]), 78).holds is False
    # end-of-training predictors that do not interpolate at a horizon: not the claim's object
    unfit = horizon_rows([20.0, 19.0]).assign(min_train_acc=[60.8, 99.6])
    v = analysis.verdict_long_training(horizon_rows([20.0, 20.0]), unfit, 78)
    assert v.holds is None and "lowest train accuracy 60.8%" in v.text


def long_run_epochs(late_acc_at_2_5: float, horizon: int = 200) -> pd.DataFrame:
    """Per-epoch metrics of two long constant-lr runs (sigma_w 0.1 and 2.5), whose validation
    loss is lowest at epoch 10 and rises after (so the selected checkpoint never moves), while
    the test accuracy of sigma_w 2.5's weights climbs from 0.35 at epoch 100 to
    ``late_acc_at_2_5`` at the end; sigma_w 0.1 stays at 0.60."""
    rows = []
    for h, sw in (("a", 0.1), ("b", 2.5)):
        for ep in range(horizon + 1):
            acc = 0.60 if sw == 0.1 else 0.35 + (late_acc_at_2_5 - 0.35) * max(0, ep - 100) / (horizon - 100)
            rows.append({"hash": h, "sigma_w": sw, "seed": 0, "epoch": ep, "n_test": 1000,
                         "val_loss": 1.0 + abs(ep - 10) / 100, "test_acc": acc, "train_acc": 1.0,
                         "T_SGD": ep * 1e-4, "T_L2": 0.0, "T_adapt": ep * 0.1})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("late,expect", [(0.35, True), (0.60, False)])
def test_long_training_verdict_can_come_out_either_way(late, expect):
    """A long run whose end-of-training spread falls to 0 (sigma_w 2.5 catches up) while the
    best-validation checkpoint stays at epoch 10: the selected spread is 25 pp at every horizon
    (by construction), and the verdict must still say 'does not hold'."""
    e = long_run_epochs(late)
    sel = analysis.horizon_table(e, [100, 200], measure="selected")
    end = analysis.horizon_table(e, [100, 200], measure="end")
    assert list(sel["spread_pp"]) == pytest.approx([25.0, 25.0]) and list(sel["selected_epochs"]) == ["10/10"] * 2
    assert list(end["spread_pp"]) == pytest.approx([25.0, 25.0 if late == 0.35 else 0.0])
    assert list(sel["T_SGD"]) == pytest.approx([1e-3, 1e-3]) and list(end["T_SGD"]) == pytest.approx([1e-2, 2e-2])
    assert analysis.verdict_long_training(sel, end, 100).holds is expect


def test_depth_verdict():
    s = pd.DataFrame({"arch": ["resnet9", "resnet9", "resnet56", "resnet56"], "sigma_w": [0.1, 2.5, 0.1, 2.5],
                      "interpolated": [True, True, True, False], "max_train_acc": [1.0, 1.0, 1.0, 0.9],
                      "n_train": 1000, "status": ["finished"] * 4})
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is True and "resnet56 sigma_w=2.5 (90.0%)" in v.text and "smaller sigma_w that interpolate: 1/1" in v.text
    assert "fail to interpolate: 1/1:" in v.text and [m["what"] for m in v.measured] == ["resnet56 sigma_w=2.5 best train acc."]
    # two seeds of the deep net: each run named with its seed, and how many of them fail
    two = pd.concat([s.assign(seed=0), s.iloc[2:].assign(seed=1, max_train_acc=[1.0, 0.995],
                                                         interpolated=[True, True])], ignore_index=True)
    v = analysis.verdict_depth(two, 2.0)
    assert v.holds is True and "fail to interpolate: 1/2: resnet56 sigma_w=2.5 seed 0 (90.0%)" in v.text
    assert [m["what"] for m in v.measured] == ["resnet56 sigma_w=2.5 seed 0 best train acc.",
                                               "resnet56 sigma_w=2.5 seed 1 best train acc."]
    # the table scores the selected predictor on every test image where the runs have it
    t = analysis.depth_table(s.assign(seed=0, tau_interp=[30.0, 80.0, 60.0, None], n_test=1000,
                                      test_acc_at_best_val=0.5, selected_test_acc=[0.61, 0.35, 0.42, 0.36],
                                      selected_test_n=10000))
    assert list(t["test_acc_at_best_val"]) == pytest.approx([61.0, 35.0, 42.0, 36.0])
    assert list(t["test_images"]) == [10000] * 4 and list(t["tau_interp"]) == ["30", "80", "60", "fails"]
    # 99.4% on 1,000 images: below 99.5%, but not beyond the noise of counting (exact upper end 99.8%)
    assert analysis.clearly_below(0.994, 1000) is False and analysis.clearly_below(0.98, 1000) is True
    assert analysis.verdict_depth(s.assign(max_train_acc=[1.0, 1.0, 1.0, 0.994]), 2.0).holds is False
    s.loc[1, "interpolated"] = False   # ResNet-9 fails there too
    assert analysis.verdict_depth(s, 2.0).holds is False
    # the deep net fails at the smallest sigma_w too: its failure is not sigma_w's -> undecided
    s = s.assign(interpolated=[True, True, False, False], max_train_acc=[1.0, 1.0, 0.9, 0.9])
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is None and "interpolate at sigma_w=0.1: none" in v.text


def test_clocks_verdict_per_family():
    from initlib import stats
    rho, lo, hi = stats.rho_interval([1, 2, 3, 4, 5], [5, 4, 3, 2, 1])
    assert (rho, lo, hi) == pytest.approx((-1.0, -1.0, -1.0))
    # five pipelines (each point its own), at epochs that order them otherwise than the clock
    pts = pd.DataFrame({"family": ["T_SGD"] * 5 + ["T_adapt"] * 2, "T_SGD": [0.1, 0.2, 0.4, 0.8, 1.6, 0, 0],
                        "T_adapt": [0, 0, 0, 0, 0, 1.0, 2.0], "spread_pp": [9.0, 8.0, 5.0, 4.0, 2.0, 3.0, 2.0],
                        "scored_epoch": [40, 10, 50, 20, 30, 5, 6]})
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is None   # the spread falls with the clock, but 5 points cannot show it beats epochs
    pts = pd.concat([pts.iloc[:5]] * 2, ignore_index=True).assign(lr=range(10))  # 10 pipelines
    pts["T_SGD"] = [0.1, 0.2, 0.4, 0.8, 1.6, 0.15, 0.3, 0.6, 1.2, 2.4]
    pts["spread_pp"] = [9.0, 8.0, 5.0, 4.0, 2.0, 8.5, 6.0, 4.5, 3.0, 1.0]
    pts["scored_epoch"] = [40, 10, 50, 20, 30, 15, 45, 25, 35, 5]
    pts = pd.concat([pts, pd.DataFrame({"family": ["T_adapt"] * 2, "T_adapt": [1.0, 2.0], "T_SGD": 0.0,
                                        "spread_pp": [3.0, 2.0], "scored_epoch": [5, 6], "lr": [0.1, 0.2]})])
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is True
    r = rho.set_index("clock")
    assert r.loc["T_SGD", "rho"] == pytest.approx(-1.0) and r.loc["T_SGD", "rho_hi"] < 0
    assert math.isnan(r.loc["T_adapt", "rho"]) and not r.loc["T_adapt", "decided"]  # 2 points
    sgd = pts["family"] == "T_SGD"
    pts.loc[sgd, "spread_pp"] = pts.loc[sgd, "T_SGD"].to_numpy()  # the spread rises with the clock
    assert analysis.verdict_clocks(pts)[0].holds is False
    pts.loc[sgd, "spread_pp"] = [5.0, 4.0, 6.0, 3.0, 5.0, 4.5, 5.5, 3.5, 6.0, 4.0]  # no trend
    assert analysis.verdict_clocks(pts)[0].holds is None
    # the spread follows the epochs, not the clock: does not hold
    pts.loc[sgd, "spread_pp"] = 60.0 - pts.loc[sgd, "scored_epoch"].to_numpy()
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is False and rho.set_index("clock").loc["T_SGD", "diff_lo"] > 0


def test_clock_points_that_do_not_interpolate_are_left_out_and_two_pipelines_decide_nothing():
    """The 10-pipeline case of test_clocks_verdict_per_family where the spread rises with the
    clock ("does not hold"): if the predictors of half its points stop at 80% train accuracy,
    those points are left out and counted; if only 2 pipelines remain, no group is decided
    (a bootstrap over 2 pipelines has 3 distinct resamples)."""
    t = [0.1, 0.2, 0.4, 0.8, 1.6, 0.15, 0.3, 0.6, 1.2, 2.4]
    pts = pd.DataFrame({"family": "T_SGD", "T_SGD": t, "spread_pp": t, "lr": range(10),
                        "scored_epoch": [40, 10, 50, 20, 30, 15, 45, 25, 35, 5], "lowest_train_acc_scored": 100.0})
    assert analysis.verdict_clocks(pts)[0].holds is False
    pts.loc[5:, "lowest_train_acc_scored"] = 80.0
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is False and rho["not_interpolating"].tolist() == [5] and rho["points"].tolist() == [5]
    assert "5 left out: not interpolating" in v.text
    pts.loc[:4, "lowest_train_acc_scored"] = [100.0, 100.0, 80.0, 80.0, 80.0]
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is None and "no group is decided" in v.text and not rho["decided"].any()
    two = pd.DataFrame({"family": "T_SGD", "T_SGD": t[:6], "spread_pp": t[:6], "lr": [1, 1, 1, 2, 2, 2],
                        "scored_epoch": [40, 10, 50, 20, 30, 15]})
    v, rho = analysis.verdict_clocks(two)
    assert v.holds is None and rho["pipelines"].tolist() == [2] and not rho["decided"].any()


def test_one_pipelines_horizons_alone_decide_nothing():
    """Points from the horizons of one pipeline share runs, and their clock grows with their
    epochs: however well the spread falls along them, they are one sample and cannot tell a
    clock from epochs."""
    pts = pd.DataFrame({"family": "T_SGD", "optimizer": "sgd", "lr": 0.015, "l2": 0.0, "batch_size": 128,
                        "arch": "resnet9", "width": 0.125, "n_train": 5000, "epochs": [32, 64, 96, 128, 256],
                        "T_SGD": [1e-3, 2e-3, 3e-3, 4e-3, 8e-3], "scored_epoch": [32, 64, 96, 128, 256],
                        "spread_pp": [9.0, 7.0, 5.0, 3.0, 1.0]})
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is None and list(rho["pipelines"]) == [1] and not rho["decided"].any()
    assert (list(rho["rho_lo"]), list(rho["rho_hi"])) == (pytest.approx([-1.0]), pytest.approx([-1.0]))


def test_clocks_are_compared_within_one_scale_never_pooled():
    """Two training-set sizes, no trend within either; the larger one has larger spreads at
    smaller clocks. Pooled, rho would be about -0.8 (a false 'holds'); per scale, undecided."""
    t = [0.001, 0.002, 0.004, 0.008, 0.016]
    pts = pd.DataFrame({"family": ["T_SGD"] * 10, "arch": ["resnet9"] * 10, "width": [0.125] * 10, "lr": range(10),
                        "n_train": [5000] * 5 + [1000] * 5, "T_SGD": t + [10 * x for x in t],
                        "spread_pp": [25.0, 27.0, 24.0, 26.0, 25.5, 5.0, 6.0, 4.0, 5.5, 4.5]})
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is None
    assert list(rho["scale"]) == ["resnet9 w0.125 n1000", "resnet9 w0.125 n5000"]
    assert list(rho["points"]) == [5, 5] and rho["decided"].all()
    assert "T_SGD at resnet9 w0.125 n5000: rho=" in v.text
    from scipy.stats import spearmanr
    assert spearmanr(pts["T_SGD"], pts["spread_pp"]).statistic < -0.6  # what pooling would have said


def test_diverged_runs_make_a_spread_undefined_not_smaller():
    """A group in which 2 of 3 runs diverged has no spread (nan), says so, and decides nothing."""
    rows = [({"optimizer": "sgd", "lr": 0.1}, s, 0, a) for s, a in ((0.1, 0.6), (1.0, 0.5), (2.5, 0.4))]
    rows += [({"optimizer": "adam", "lr": 0.1}, s, 0, a) for s, a in ((0.1, 0.5), (1.0, math.nan), (2.5, math.nan))]
    summaries = runs(rows)
    summaries.loc[4:5, "status"] = "diverged"
    t = analysis.spread_table(summaries, ["optimizer"]).set_index("optimizer")
    assert t.loc["sgd", "spread_pp"] == pytest.approx(20.0) and t.loc["sgd", "diverged"] == 0
    assert math.isnan(t.loc["adam", "spread_pp"]) and t.loc["adam", "diverged"] == 2
    assert t.loc["adam", "missing"] == 0
    v = analysis.verdict_optimizer_dependence(t.reset_index(), analysis.difference_table(summaries, "optimizer", "sgd"))
    assert v.holds is None and "adam" in v.text
    # a run that is not there at all: counted as missing, spread undefined
    t = analysis.spread_table(summaries.drop(index=[0]), ["optimizer"]).set_index("optimizer")
    assert t.loc["sgd", "missing"] == 1 and math.isnan(t.loc["sgd", "spread_pp"])


def test_depth_verdict_leaves_diverged_runs_out():
    s = pd.DataFrame({"arch": ["resnet9", "resnet9", "resnet56", "resnet56"], "sigma_w": [0.1, 2.5, 0.1, 2.5],
                      "interpolated": [True, True, True, False], "max_train_acc": [1.0, 1.0, 1.0, 0.5],
                      "n_train": 1000, "status": ["finished", "finished", "finished", "diverged"]})
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is None and "(1 diverged)" in v.text      # not counted as a failure
    s = pd.concat([s, s.iloc[[3]].assign(status="finished", interpolated=True, max_train_acc=1.0)], ignore_index=True)
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is False and "fail to interpolate: 0/1: none" in v.text
    assert "left out, diverged: resnet56 sigma_w=2.5" in v.text


def test_every_verdict_carries_its_rule():
    v = analysis.verdict_l2_lr(*l2_runs(20.0, 1.0))
    assert v.rule.startswith("Holds if the 95% interval of spread(smallest lr, no L2)")
    assert v.to_dict()["rule"] == v.rule and v.to_dict()["holds"] is True


def test_spread_table_gives_the_noise_floor_and_an_interval_when_it_can():
    # sgd seeds: (0.60, 0.50) and (0.64, 0.50): pooled seed sd 0.02, floor 0.02 * d_2 = 0.02 * 2/sqrt(pi)
    t = analysis.spread_table(opt_runs({"sgd": [10.0, 14.0]}), ["optimizer"]).set_index("optimizer")
    assert t.loc["sgd", "floor_pp"] == pytest.approx(100 * 0.02 * 2 / math.sqrt(math.pi))
    assert t.loc["sgd", "floor_from"] == "seeds" and t.loc["sgd", "test_images"] == 1000
    assert math.isnan(t.loc["sgd", "ci_lo_pp"])      # no per-image correctness stored: no interval
    # one seed: the floor of test sampling alone, binomial at the mean accuracy 0.55 on 1000 images
    t = analysis.spread_table(opt_runs({"sgd": [10.0]}), ["optimizer"]).set_index("optimizer")
    sd = math.sqrt(0.55 * 0.45 / 1000)
    assert t.loc["sgd", "floor_from"] == "test sampling"
    assert t.loc["sgd", "floor_pp"] == pytest.approx(100 * sd * 2 / math.sqrt(math.pi))


def test_spread_table_uses_the_full_test_set_and_its_interval():
    from initlib.store import pack_correct
    i = np.arange(1000)
    summaries = runs([({"optimizer": "sgd", "lr": 0.1}, 0.1, 0, 0.0), ({"optimizer": "sgd", "lr": 0.1}, 2.5, 0, 0.0)])
    summaries["selected_test_n"] = 1000
    summaries["selected_test_acc"] = [0.6, 0.4]
    summaries["selected_test_correct"] = [pack_correct(i < 600), pack_correct(i < 400)]
    t = analysis.spread_table(summaries, ["optimizer"]).iloc[0]
    assert t["spread_pp"] == pytest.approx(20.0)            # from selected_test_acc, not the 0.0s
    sd = math.sqrt(0.2 * 0.8 / 1000)                        # the band [400, 600): binomial
    assert t["ci_lo_pp"] == pytest.approx(100 * (0.2 - 1.96 * sd), abs=0.5)
    assert t["ci_hi_pp"] == pytest.approx(100 * (0.2 + 1.96 * sd), abs=0.5)


def test_headline_numbers_for_the_results_table():
    from initlib.notebook import format_measured
    items = [analysis.measure("SGD spread", 12.345, 9.0, 15.5, 3.21),
             analysis.measure("rho(T_SGD, spread), 5 points", -0.9, -1.0, -0.5, unit=""),
             analysis.measure("slope", 1.0)]
    assert format_measured(items) == (
        "SGD spread 12.3 [9.0, 15.5] pp; rho(T_SGD, spread), 5 points -0.90 [-1.00, -0.50]; slope 1.0 pp",
        "SGD spread 3.2 pp")
    assert analysis.measure("x", float("nan"))["value"] is None
    # a rule's line finer than one decimal: 05's best train accuracy against 99.5%
    edge = analysis.measure("best train acc.", 99.28, 99.0046, 99.4952, unit="%", digits=3)
    assert format_measured([edge])[0] == "best train acc. 99.280 [99.005, 99.495] %"
    fine = analysis.measure("spread", 0.34, 0.1, 0.61, 0.456, digits=2)   # its floor too
    assert format_measured([fine]) == ("spread 0.34 [0.10, 0.61] pp", "spread 0.46 pp")
    assert "digits" not in items[0]   # recorded only where it is not 1 (older verdict files read as 1)


def test_clock_points_take_each_group_with_its_own_sigma_grid():
    # 01-like group on 3 sigma_w, 03-like group on 2: both spreads defined (06 mixes grids)
    rows = [({"optimizer": "sgd", "lr": 0.02, "l2": 0.0, "batch_size": 128, "epochs": 78, "arch": "resnet9",
              "width": 0.125, "n_train": 5000}, s, 0, a) for s, a in ((0.1, 0.6), (1.0, 0.5), (2.5, 0.4))]
    rows += [({"optimizer": "sgd", "lr": 0.1, "l2": 0.0, "batch_size": 128, "epochs": 60, "arch": "resnet9",
               "width": 0.125, "n_train": 1000}, s, 0, a) for s, a in ((0.1, 0.5), (2.5, 0.45))]
    pts = analysis.clock_points(runs(rows), analysis.CLOCK_GROUP_KEYS).set_index("lr")
    assert pts.loc[0.02, "spread_pp"] == pytest.approx(20.0) and pts.loc[0.1, "spread_pp"] == pytest.approx(5.0)
    assert (pts["missing"] == 0).all()


def test_a_verdicts_short_word_says_why_it_is_undecided():
    """The notes' tables write each word in lower case; "(premise)" only where undecided because
    the predictors scored do not interpolate, never beside a decided word."""
    assert analysis.Verdict(True, "a").short_word == "holds"
    assert analysis.Verdict(False, "b").short_word == "does not hold"
    assert analysis.Verdict(None, "interval contains 0").short_word == "undecided"
    assert analysis.Verdict(None, "selected at 60%", premise_met=False).short_word == "undecided (premise)"
    assert analysis.Verdict(True, "a", premise_met=False).short_word == "holds"
    assert analysis.no_interval("trend").short_word == "undecided"


def test_where_the_selected_predictors_lie_and_both_measures():
    s = pd.DataFrame({"optimizer": "sgd", "sigma_w": [0.1, 0.1, 2.5, 2.5], "seed": [0, 1, 0, 1],
                      "best_val_epoch": [28, 30, 13, 19], "tau_interp": [28, 25, 91, None],
                      "train_acc_at_best_val": [0.998, 0.999, 0.54, 0.70],
                      "best_val_interpolates": [True, True, False, False],
                      "best_val_past_tau": [True, True, False, False],
                      "T_SGD_at_best_val": [1e-3, 2e-3, 5e-4, 7e-4], "T_SGD": [9e-3] * 4})
    t = analysis.selection_table(s, ["optimizer"]).set_index("sigma_w")
    assert t.loc[0.1, "selected_epochs"] == "28/30" and t.loc[2.5, "tau_interp"] == "91/-"
    assert t.loc[2.5, "train_acc_at_selected"] == pytest.approx(62.0) and t.loc[2.5, "lowest"] == pytest.approx(54.0)
    assert t.loc[0.1, "interpolating"] == "2/2" and t.loc[2.5, "past_tau"] == "0/2"
    assert t.loc[0.1, "T_SGD_at_selected"] == pytest.approx(1.5e-3)
    assert analysis.share_selected_interpolating(s) == (2, 4)
    yes, no = analysis.Verdict(True, "a"), analysis.Verdict(False, "b")
    assert analysis.on_both_measures(yes, analysis.Verdict(True, "c")).holds is True
    assert analysis.on_both_measures(yes, no).holds is None               # they disagree
    assert analysis.on_both_measures(no, no).holds is False
    alone = analysis.on_both_measures(yes, analysis.no_interval("trend"))
    assert alone.holds is True and "alone" in alone.text and "not scored on every test image" in alone.text
    # the flag, not the text, says so: an undecided end verdict that merely mentions the words
    # is undecided by its interval, and leaves the combined verdict undecided
    one_decides = analysis.on_both_measures(yes, analysis.Verdict(None, "per-image interval contains 0"))
    assert one_decides.holds is None and one_decides.text.startswith("one measure decides and the other does not")
    assert analysis.on_both_measures(yes, no).text.startswith("the two measures disagree")
    # an end measure whose predictors do not interpolate cannot speak: the paper's measure decides,
    # either way; one that is undecided by its interval still leaves the verdict undecided
    mid_swing = analysis.Verdict(None, "ends at 32% train accuracy", premise_met=False)
    for v in (yes, no):
        alone = analysis.on_both_measures(v, mid_swing)
        assert alone.holds is v.holds and "do not interpolate" in alone.text and "alone" in alone.text
    assert analysis.on_both_measures(yes, analysis.Verdict(None, "interval contains 0")).holds is None
    both = analysis.on_both_measures(analysis.Verdict(None, "a"), analysis.Verdict(None, "b"))
    assert both.holds is None and "do not decide either: b" in both.text and "agree" not in both.text
    # never the other way round: where the paper's predictors do not interpolate, undecided
    untrained = analysis.Verdict(None, "selected at 60%", premise_met=False)
    assert analysis.on_both_measures(untrained, yes).holds is None
    assert analysis.on_both_measures(untrained, mid_swing).holds is None
    # the end-of-training measure reads the end predictor's numbers in the selected one's columns
    e = analysis.at_end_of_training(s.assign(final_test_acc=[0.6, 0.6, 0.5, 0.5], selected_test_acc=0.1,
                                             final_train_acc=[1.0, 0.996, 0.62, 0.999],
                                             max_train_acc=1.0, interpolated=True))
    assert list(e["test_acc_at_best_val"]) == [0.6, 0.6, 0.5, 0.5] and "selected_test_acc" not in e
    # and its train accuracy is the end predictor's own: a run that once interpolated may not now
    assert list(e["interpolated"]) == [True, True, False, True]
    assert list(e["max_train_acc"]) == [1.0, 0.996, 0.62, 0.999]


def test_a_rendered_table_keeps_each_interval_in_one_column_and_its_text_form():
    df = pd.DataFrame({"optimizer": ["adam", "sgd"], "spread_pp": [10.34, 25.26],
                       "spread_min_pp": [9.5, 20.8], "spread_max_pp": [11.7, 31.2],
                       "ci_lo_pp": [9.06, math.nan], "ci_hi_pp": [11.84, math.nan],
                       "floor_pp": [2.31, 5.1], "floor_hi_pp": [4.1, 9.04], "T_SGD": [0.000156, 0.009]})
    r = analysis.readable(df)
    assert list(r.columns) == ["optimizer", "spread_pp", "over seeds (pp)", "95% interval (pp)",
                               "noise floor (pp)", "T_SGD"]
    assert list(r["95% interval (pp)"]) == ["[9.1, 11.8]", "-"]
    assert list(r["over seeds (pp)"]) == ["[9.5, 11.7]", "[20.8, 31.2]"]
    assert list(r["noise floor (pp)"]) == ["2.3 (q95 4.1)", "5.1 (q95 9.0)"]
    assert list(r["T_SGD"]) == ["0.000156", "0.009"]
    t = analysis.Table(df)
    assert repr(t) == analysis.format_table(df)           # what the check cells compare
    html = t._repr_html_()
    assert "<table" in html and "[9.1, 11.8]" in html and "ci_lo_pp" not in html


def adaptive_run_epochs(decreasing_val_loss: bool) -> pd.DataFrame:
    """long_run_epochs as Adam runs (the keys of a clock point), with the validation loss either
    lowest at epoch 10 (every horizon from 10 on scores the same predictors) or still falling."""
    e = long_run_epochs(0.35)
    if decreasing_val_loss:
        e["val_loss"] = 2.0 - e["epoch"] / 1000
    return e.assign(optimizer="adam", lr=0.005, l2=0.0, batch_size=128, epochs=200, arch="resnet9",
                    width=0.125, n_train=5000)


@pytest.mark.parametrize("decreasing,expect", [(False, [200]), (True, [50, 100, 150, 200])])
def test_horizon_points_count_each_set_of_predictors_once(decreasing, expect):
    e = adaptive_run_epochs(decreasing)
    pts = analysis._horizon_points(e, [50, 100, 150, 200], "horizon")
    assert list(pts["epochs"]) == expect
    assert set(pts["family"]) == {"T_adapt"} and set(pts["source"]) == {"horizon"}
    if decreasing:   # each horizon's clock is read at its own selected epoch
        assert list(pts["T_adapt"]) == pytest.approx([5.0, 10.0, 15.0, 20.0])


def test_end_of_training_horizon_points_read_each_clock_at_the_horizon_in_its_own_family():
    """SGD with L2 whose sigma_w 2.5 run catches up late: on the end measure each quarter of the
    horizon scores other weights (4 points, T_L2 at E, the spread falling to 0); on the selected
    measure every horizon scores epoch 10's (one point)."""
    e = long_run_epochs(0.60).assign(optimizer="sgd", lr=0.1, l2=0.01, batch_size=128, epochs=200,
                                     arch="resnet9", width=0.125, n_train=5000)
    e["T_L2"] = e["epoch"] * 0.01
    end = analysis._horizon_points(e, [50, 100, 150, 200], "horizon", measure="end")
    assert list(end["epochs"]) == [50, 100, 150, 200] and set(end["family"]) == {"T_L2"}
    assert list(end["T_L2"]) == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert list(end["spread_pp"]) == pytest.approx([25.0, 25.0, 12.5, 0.0])
    sel = analysis._horizon_points(e, [50, 100, 150, 200], "horizon", measure="selected")
    assert list(sel["epochs"]) == [200] and list(sel["T_L2"]) == pytest.approx([0.1])
    with pytest.raises(ValueError, match="measure"):
        analysis.clock_points(e, analysis.CLOCK_GROUP_KEYS, measure="best")


def test_spread_vs_labels_the_noise_floor_once_with_groups():
    """Two groups each draw their noise floor; the legend names it once, and every group once."""
    import matplotlib
    matplotlib.use("Agg")
    from initlib import plots
    table = pd.DataFrame({"lr": [0.1, 0.1, 0.3, 0.3], "epochs": [10, 20, 10, 20],
                          "spread_pp": [5.0, 4.0, 3.0, 2.0], "ci_lo_pp": [4.0, 3.0, 2.0, 1.0],
                          "ci_hi_pp": [6.0, 5.0, 4.0, 3.0], "floor_hi_pp": [1.0, 1.0, 1.5, 1.5]})
    fig = plots.spread_vs(table, "epochs", "epochs", "t", group="lr")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert sum(l.startswith("noise floor") for l in labels) == 1
    assert sum(l.startswith("lr=") for l in labels) == 2


def test_the_norm_figure_names_a_seed_the_runs_do_not_have():
    """A replica's seeds are 1000 N + the profile's: asking for seed 0 there is an error that
    names the seeds the runs have, not an empty figure (matplotlib: 'columns ... not 0')."""
    import matplotlib
    matplotlib.use("Agg")
    from initlib import plots
    e = pd.DataFrame({"optimizer": "sgd", "sigma_w": [0.1, 0.1, 2.5, 2.5], "seed": 1000,
                      "epoch": [0, 1, 0, 1], "weight_norm": [1.0, 1.1, 20.0, 20.0]})
    assert len(plots.norm_over_epochs(e, "optimizer", "t", seed=1000).axes[0].get_lines()) == 2
    with pytest.raises(ValueError, match=r"no per-epoch metrics of seed 0 \(the runs have seeds \[1000\]\)"):
        plots.norm_over_epochs(e, "optimizer", "t", seed=0)


def test_a_clock_family_by_lr_draws_each_lr_once_and_each_pipeline_as_one_line():
    """Two lr, three pipelines (two at lr 0.05), two horizons each, one point that does not
    interpolate (hollow); another family's points are not drawn; no point of the family: None."""
    import matplotlib
    matplotlib.use("Agg")
    from initlib import plots
    pts = pd.DataFrame({"family": ["T_L2"] * 6 + ["T_SGD"], "optimizer": "sgd", "batch_size": 128,
                        "arch": "resnet9", "width": 0.25, "n_train": 5000,
                        "lr": [0.05, 0.05, 0.05, 0.05, 0.15, 0.15, 0.015],
                        "l2": [2e-3, 2e-3, 6e-3, 6e-3, 2e-3, 2e-3, 0.0], "epochs": [64, 128] * 3 + [128],
                        "T_L2": [0.2, 0.5, 0.8, 1.5, 0.6, 1.1, 0.0], "spread_pp": [14.0, 15.0, 17.0, 10.0, 4.0, 4.0, 28.0],
                        "lowest_train_acc_scored": [100.0, 100.0, 100.0, 100.0, 80.0, 100.0, 60.0]})
    fig = plots.clock_family_by_lr(pts, "T_L2", "t")
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 3  # one line per pipeline
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["lr 0.05", "lr 0.15"]
    drawn = sum(len(c.get_offsets()) for c in ax.collections)
    assert drawn == 6  # the T_SGD point is another family's
    hollow = [c for c in ax.collections  # facecolor "none": no face colour, or a transparent one
              if len(c.get_offsets()) and (len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0)]
    assert [len(c.get_offsets()) for c in hollow] == [1]
    assert plots.clock_family_by_lr(pts, "T_adapt", "t") is None


def test_a_family_against_each_clock_ranks_its_points_by_every_clock():
    """Six T_L2 points from six pipelines whose spread follows T_SGD exactly and T_L2 not at
    all: rho(T_SGD) is -1 and beats T_L2's; a point whose predictors do not interpolate and
    another family's points are left out; the family's own clock has no difference."""
    pts = pd.DataFrame({"family": ["T_L2"] * 7 + ["T_SGD"], "arch": "resnet9", "width": 0.25, "n_train": 5000,
                        "lr": [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.01],
                        "T_SGD": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1.0],
                        "T_L2": [3.0, 1.0, 6.0, 2.0, 5.0, 4.0, 0.5, 0.0],
                        "T_adapt": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1.0],
                        "spread_pp": [12.0, 10.0, 8.0, 6.0, 4.0, 2.0, 30.0, 1.0],
                        "lowest_train_acc_scored": [100.0] * 6 + [80.0, 100.0]})
    t = analysis.family_against_each_clock(pts, "T_L2").set_index("clock")
    assert (t["points"] == 6).all() and (t["pipelines"] == 6).all()
    assert t.loc["T_SGD", "rho"] == pytest.approx(-1.0) and t.loc["T_SGD", "rho_hi"] == pytest.approx(-1.0)
    from scipy.stats import spearmanr
    assert t.loc["T_L2", "rho"] == pytest.approx(spearmanr([3, 1, 6, 2, 5, 4], [12, 10, 8, 6, 4, 2]).statistic)
    assert t.loc["T_SGD", "rho - rho(T_L2)"] < 0 and math.isnan(t.loc["T_L2", "rho - rho(T_L2)"])
    assert analysis.family_against_each_clock(pts, "T_adapt").empty
