import math

import numpy as np
import pandas as pd
import pytest

from initlib.clocks import cumulative_clocks, steps_per_epoch


def forgetting_clocks(lrs, batch_size, l2):
    """The clocks at the end of training: one epoch of len(lrs) steps."""
    return {k: float(v[-1]) for k, v in cumulative_clocks(lrs, batch_size, l2, len(lrs)).items()}
from initlib import metrics
from initlib.metrics import best_val_epoch, repair_gap, summarize, tau_interp
from initlib.stats import spread


def test_forgetting_clocks_hand_computed():
    c = forgetting_clocks([0.1, 0.2, 0.3], batch_size=2, l2=0.5)
    assert c["T_SGD"] == pytest.approx((0.01 + 0.04 + 0.09) / 2)
    assert c["T_L2"] == pytest.approx(0.5 * 0.6)
    assert c["T_adapt"] == pytest.approx(0.6)


def test_clocks_reproduce_the_papers_T_SGD():
    """eta = 1e-3 constant, b = 128, 40k examples = 313 steps/epoch: 7.3e-4 at 300 epochs and
    1.2e-2 at 5,000 (../shared/PAPER.md)."""
    steps = steps_per_epoch(40000, 128)
    assert steps == 313
    assert forgetting_clocks(np.full(steps * 300, 1e-3), 128, 0.0)["T_SGD"] == pytest.approx(7.3e-4, rel=0.01)
    assert forgetting_clocks(np.full(steps * 5000, 1e-3), 128, 0.0)["T_SGD"] == pytest.approx(1.2e-2, rel=0.02)


def test_steps_per_epoch_keep_or_drop_the_last_batch():
    assert steps_per_epoch(5000, 128) == 40 and steps_per_epoch(5000, 128, "drop") == 39  # 39 x 128 + 8
    assert steps_per_epoch(5000, 8) == steps_per_epoch(5000, 8, "drop") == 625  # b divides n
    assert steps_per_epoch(100, 32, "keep") == 4 and steps_per_epoch(100, 32, "drop") == 3
    with pytest.raises(ValueError, match="last_batch"):
        steps_per_epoch(100, 32, "pad")


def test_cumulative_clocks_per_epoch():
    c = cumulative_clocks([1.0, 1.0, 0.5, 0.5], batch_size=4, l2=0.1, steps_per_epoch=2)
    np.testing.assert_allclose(c["T_adapt"], [2.0, 3.0])
    np.testing.assert_allclose(c["T_SGD"], [0.5, 0.625])
    np.testing.assert_allclose(c["T_L2"], [0.2, 0.3])


def epochs_frame():
    # epoch 0 = init; best val loss at epoch 2; train acc reaches 99.5% at epoch 3
    return pd.DataFrame({
        "epoch":      [0,    1,    2,    3,     4],
        "train_acc":  [0.1,  0.6,  0.9,  0.995, 1.0],
        "val_loss":   [2.3,  1.2,  0.9,  1.0,   0.9],
        "val_acc":    [0.1,  0.5,  0.7,  0.68,  0.72],
        "test_acc":   [0.1,  0.52, 0.71, 0.69,  0.73],
        "weight_norm": [10., 10.5, 11., 11.2,  11.3],
        "T_SGD": [0, 1, 2, 3, 4], "T_L2": [0] * 5, "T_adapt": [0, 1, 2, 3, 4],
    })


def test_best_val_and_selected_test_accuracy():
    e = epochs_frame()
    assert best_val_epoch(e) == 2          # first of the tied minima (0.9 at epochs 2 and 4)
    assert metrics.test_acc_at_best_val(e) == 0.71
    assert best_val_epoch(e, horizon=1) == 1
    assert metrics.test_acc_at_best_val(e, horizon=1) == 0.52


def test_tau_interp_and_repair_gap():
    e = epochs_frame()
    assert tau_interp(e) == 3
    assert repair_gap(e) == pytest.approx(0.72 - 0.68)
    e2 = e.assign(train_acc=[0.1, 0.5, 0.9, 0.99, 0.994])
    assert tau_interp(e2) is None and math.isnan(repair_gap(e2))


def test_spread_is_never_taken_over_what_a_diverged_run_leaves():
    import pandas as pd
    from initlib.analysis import complete_spread
    assert spread([0.5, 0.7, 0.6]) == pytest.approx(0.2)
    assert spread([[0.5, 0.7], [0.6, 0.9]]) == pytest.approx(0.25)  # mean over seeds (rows)
    runs = pd.DataFrame({"status": ["finished", "diverged", "finished"],
                         "test_acc_at_best_val": [0.5, float("nan"), 0.9]})
    assert math.isnan(complete_spread(runs, 3))
    assert complete_spread(runs.assign(status="finished", test_acc_at_best_val=[0.5, 0.6, 0.9]), 3) == pytest.approx(0.4)


def test_summary():
    s = summarize(epochs_frame(), "finished")
    assert s["best_val_epoch"] == 2 and s["test_acc_at_best_val"] == 0.71
    assert s["tau_interp"] == 3 and s["interpolated"]
    assert s["initial_weight_norm"] == 10.0 and s["final_weight_norm"] == 11.3
    assert s["T_SGD"] == 4 and s["epochs_trained"] == 4


def test_where_the_selected_predictor_lies_hand_computed():
    e = epochs_frame()  # best val epoch 2 (train acc 0.9, T_SGD 2), tau 3
    s = metrics.at_selection(e)
    assert s["train_acc_at_best_val"] == 0.9 and s["T_SGD_at_best_val"] == 2.0
    assert s["best_val_interpolates"] is False and s["best_val_past_tau"] is False
    later = e.assign(val_loss=[2.3, 1.2, 1.0, 0.95, 0.9])  # best at 4, past tau 3
    s = metrics.at_selection(later)
    assert s["best_val_past_tau"] is True and s["best_val_interpolates"] is True and s["T_adapt_at_best_val"] == 4.0
    # after tau (epoch 3): epoch 4 only; 1.0 >= 0.99
    assert metrics.share_interpolating_after_tau(e) == 1.0
    assert metrics.share_interpolating_after_tau(e.assign(train_acc=[0.1, 0.6, 0.9, 0.995, 0.98])) == 0.0
    assert math.isnan(metrics.share_interpolating_after_tau(e.assign(train_acc=[0.1] * 5)))
