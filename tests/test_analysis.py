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
                    "interpolated": True, "max_train_acc": 1.0, "status": "finished", "n_test": 1000, **{c: 1.0 for c in CLOCKS}, **group})
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


def test_optimizer_verdict_needs_a_gap_larger_than_the_seed_range():
    # SGD 12 (10..14), adam 2.5: gap 9.5 > seed range 4 -> holds
    t = analysis.spread_table(opt_runs({"sgd": [10.0, 14.0], "adam": [2.0, 3.0]}), ["optimizer"])
    v = analysis.verdict_optimizer_dependence(t)
    assert v.holds is True and "12.0 pp (10.0..14.0) > adam 2.5 pp + seed range 4.0 pp" in v.text
    # SGD 12 (6..18), adam 2.5: gap 9.5 < seed range 12 -> does not hold
    t = analysis.spread_table(opt_runs({"sgd": [6.0, 18.0], "adam": [2.0, 3.0]}), ["optimizer"])
    assert analysis.verdict_optimizer_dependence(t).holds is False
    assert "DOES NOT HOLD" in str(analysis.verdict_optimizer_dependence(t))
    t = analysis.spread_table(opt_runs({"sgd": [6.0]}), ["optimizer"])
    assert analysis.verdict_optimizer_dependence(t).holds is None


def test_l2_verdict_compares_the_corner_cells():
    table = pd.DataFrame({"lr": [0.2, 0.5, 0.5], "l2": [0.0, 0.0, 0.02], "spread_pp": [9.0, 6.0, 2.9]})
    assert analysis.verdict_l2_lr(table).holds is True       # 2.9 < 9 / 3
    table.loc[2, "spread_pp"] = 3.1
    assert analysis.verdict_l2_lr(table).holds is False


def test_batch_size_verdict_is_spearman_rho_positive():
    assert analysis.spearman([16, 32, 64], [1.0, 3.0, 2.0]) == pytest.approx(0.5)
    assert math.isnan(analysis.spearman([16, 32], [1.0, 2.0]))
    t = pd.DataFrame({"batch_size": [16, 64, 256], "spread_pp": [1.0, 3.0, 2.0],
                      "spread_min_pp": [1.0, 3.0, 2.0], "spread_max_pp": [1.0, 3.0, 2.0], "seeds": 1})
    v = analysis.verdict_batch_size(t)
    assert v.holds is True and "+0.50" in v.text
    assert analysis.verdict_batch_size(t.assign(spread_pp=[3.0, 2.0, 1.0])).holds is False


def test_long_training_verdict_allows_the_seed_range():
    t = pd.DataFrame({"horizon_epochs": [60, 150], "spread_pp": [8.0, 7.5],
                      "spread_min_pp": [8.0, 7.0], "spread_max_pp": [8.0, 8.0]})
    assert analysis.verdict_long_training(t, 60).holds is True    # 7.5 >= 8.0 - 1.0
    t["spread_pp"] = [8.0, 6.5]
    assert analysis.verdict_long_training(t, 60).holds is False


def test_depth_verdict():
    s = pd.DataFrame({"arch": ["resnet9", "resnet9", "resnet56", "resnet56"], "sigma_w": [0.1, 2.5, 0.1, 2.5],
                      "interpolated": [True, True, True, False], "status": ["finished"] * 4})
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is True and "resnet56 sigma_w=2.5" in v.text and "smaller sigma_w that interpolate: 1/1" in v.text
    s.loc[1, "interpolated"] = False   # ResNet-9 fails there too
    assert analysis.verdict_depth(s, 2.0).holds is False


def test_clocks_verdict_per_family():
    pts = pd.DataFrame({"family": ["T_SGD"] * 3 + ["T_adapt"] * 2, "T_SGD": [0.1, 0.2, 0.4, 0, 0],
                        "T_adapt": [0, 0, 0, 1.0, 2.0], "spread_pp": [9.0, 8.0, 5.0, 3.0, 2.0]})
    v, rho = analysis.verdict_clocks(pts)
    assert v.holds is True
    assert rho.set_index("clock").loc["T_SGD", "rho"] == pytest.approx(-1.0)
    assert math.isnan(rho.set_index("clock").loc["T_adapt", "rho"])  # 2 points: undecided
    pts.loc[2, "spread_pp"] = 10.0
    assert analysis.verdict_clocks(pts)[0].holds is False


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
    v = analysis.verdict_optimizer_dependence(t.reset_index())
    assert v.holds is None and "adam" in v.text
    # a run that is not there at all: counted as missing, spread undefined
    t = analysis.spread_table(summaries.drop(index=[0]), ["optimizer"]).set_index("optimizer")
    assert t.loc["sgd", "missing"] == 1 and math.isnan(t.loc["sgd", "spread_pp"])


def test_depth_verdict_leaves_diverged_runs_out():
    s = pd.DataFrame({"arch": ["resnet9", "resnet9", "resnet56", "resnet56"], "sigma_w": [0.1, 2.5, 0.1, 2.5],
                      "interpolated": [True, True, True, False], "status": ["finished", "finished", "finished", "diverged"]})
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is None and "(1 diverged)" in v.text      # not counted as a failure
    s = pd.concat([s, s.iloc[[3]].assign(status="finished", interpolated=True)], ignore_index=True)
    v = analysis.verdict_depth(s, 2.0)
    assert v.holds is False and "fail to interpolate: none" in v.text
    assert "left out, diverged: resnet56 sigma_w=2.5" in v.text


def test_every_verdict_carries_its_rule():
    v = analysis.verdict_l2_lr(pd.DataFrame({"lr": [0.2, 0.5], "l2": [0.0, 0.02], "spread_pp": [9.0, 1.0]}))
    assert v.rule.startswith("Holds if the spread in the largest-lr, largest-L2 cell")
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
    from initlib.train import pack_correct
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
