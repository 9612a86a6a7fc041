"""Fused training (initlib.train.train_group with G > 1) gives each run the per-epoch metrics, clocks, norms,
selected predictor and store files it gets trained alone (train.train), within a float
tolerance; a killed group resumes to the same numbers; a diverging run ends alone.

In float64 (``precision: fp64``), so that the tolerance is about the update, not rounding:
grouped and plain convolutions add in different orders. Measured here: the largest relative
difference of any per-epoch metric is 1.4e-12 (SGD) and 6.6e-9 (Muon) (3 epochs of 200 images); the tolerance is 1e-7."""

import numpy as np
import pandas as pd
import pytest

from initlib import store
from initlib.config import run_hash
from initlib.fused import group_key, plan_groups
from initlib.train import checkpoint_epoch, train, train_group

RTOL = 1e-7
BASE = dict(arch="resnet9", width=0.125, n_train=130, n_val=50, n_test=50, n_selected_test=200,
            batch_size=64, epochs=2, precision="fp64", device="cpu")
COLUMNS = ["train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc",
           "train_loss_running", "weight_norm", "lr", "T_SGD", "T_L2", "T_adapt"]


def group(optimizer, **extra):
    runs = [dict(sigma_w=0.5, seed=0, lr=0.05, l2=0.0, weight_decay=0.0),
            dict(sigma_w=2.5, seed=1, lr=0.1, l2=1e-3, weight_decay=0.1),
            dict(sigma_w=1.0, seed=2, lr=0.02, l2=5e-3, weight_decay=0.05)]
    lr_scale = {"sgd": 1.0, "adamw": 0.02, "muon": 0.4}[optimizer]
    out = []
    for r in runs:
        if optimizer != "adamw" and optimizer != "muon":
            r["weight_decay"] = 0.0
        out.append({**BASE, **r, "lr": r["lr"] * lr_scale, "optimizer": optimizer, **extra})
    return out


def assert_same_run(fused, alone, what=""):
    (fe, fs), (ae, as_) = fused, alone
    assert list(fe["epoch"]) == list(ae["epoch"])
    for c in COLUMNS + [c for c in ae if c.startswith("norm/")]:
        np.testing.assert_allclose(fe[c].to_numpy(float), ae[c].to_numpy(float), rtol=RTOL, atol=1e-12,
                                   err_msg=f"{what} {c}")
    assert fs["status"] == as_["status"]
    assert fs["selected_test_n"] == as_["selected_test_n"] == 200
    assert fs["selected_test_acc"] == pytest.approx(as_["selected_test_acc"], abs=1 / 200 + 1e-12)


# SGD (with L2) and Muon (with decay; its AdamW side for the stem, head and gains): the step
# of every optimizer is checked fused against alone in tests/test_fused.py
@pytest.mark.parametrize("optimizer", ["sgd", "muon"])
def test_fused_group_equals_its_runs_trained_alone(optimizer, tmp_path):
    cfgs = group(optimizer)
    assert len({group_key(c) for c in cfgs}) == 1
    dirs = [tmp_path / run_hash(c) for c in cfgs]
    for d in dirs:
        d.mkdir()
    fused = train_group(cfgs, run_dirs=dirs)
    for c, d, f in zip(cfgs, dirs, fused):
        assert_same_run(f, train(c), f"{optimizer} sigma_w={c['sigma_w']}")
        # each run is its own run in the store: config, metrics, summary, attempts; no checkpoint
        assert store.is_done(d) and not store.damage(d)
        assert sorted(p.name for p in d.iterdir()) == sorted([store.CONFIG, store.METRICS, store.SUMMARY,
                                                              store.ATTEMPTS])
        assert store.read_summary(d)["status"] == "finished"


def test_a_killed_group_resumes_to_the_same_numbers(tmp_path):
    cfgs = group("sgd")
    dirs = [tmp_path / "a" / run_hash(c) for c in cfgs]
    for d in dirs:
        d.mkdir(parents=True)

    class Killed(Exception):
        pass

    def kill(epoch, rows):
        if epoch == 1:
            raise Killed
    with pytest.raises(Killed):
        train_group(cfgs, run_dirs=dirs, on_epoch=kill)
    assert [checkpoint_epoch(d) for d in dirs] == [1, 1, 1]
    assert [len(g) for g in plan_groups(cfgs, 8, lambda c: checkpoint_epoch(tmp_path / "a" / run_hash(c)))] == [3]
    resumed = train_group(cfgs, run_dirs=dirs)
    clean = train_group(cfgs)
    for r, c in zip(resumed, clean):
        pd.testing.assert_frame_equal(r[0].drop(columns="wall_s"), c[0].drop(columns="wall_s"))
    assert [store.read_attempts(d)[-1]["from_epoch"] for d in dirs] == [1, 1, 1]


def test_a_diverging_run_ends_alone_and_the_others_go_on(tmp_path):
    cfgs = group("sgd", epochs=3)
    cfgs[1] = {**cfgs[1], "lr": 1e30}
    fused = train_group(cfgs)
    assert fused[1][1]["status"] == "diverged" and len(fused[1][0]) < 4   # ended before epoch 3
    assert fused[0][1]["status"] == fused[2][1]["status"] == "finished" and len(fused[0][0]) == 4
    for i in (0, 2):
        assert_same_run(fused[i], train(cfgs[i]), f"run {i}")


def test_groups_are_split_by_what_cannot_be_fused():
    a = group("sgd")
    b = [{**c, "batch_size": 32} for c in a]
    groups = plan_groups(a + b + a[:1], 2)
    assert [len(g) for g in groups] == [2, 2, 2, 1]
    assert all(len({group_key(c) for c in g}) == 1 for g in groups)
    with pytest.raises(ValueError, match="cannot be trained as one group"):
        train_group([a[0], b[0]])


def test_the_sweep_fuses_when_asked_and_stores_every_run(tmp_path):
    from initlib.sweep import run_sweep
    cfgs = [{**c, "epochs": 2} for c in group("sgd")]
    summaries = run_sweep(cfgs, tmp_path, fuse=3, progress=False)
    assert len(summaries) == 3 and (summaries["status"] == "finished").all()
    alone = train(cfgs[1])[0]
    fused = store.read_epochs(tmp_path / run_hash(cfgs[1]))
    np.testing.assert_allclose(fused["val_loss"], alone["val_loss"], rtol=RTOL)
    attempts = store.read_attempts(tmp_path / run_hash(cfgs[1]))
    assert len(attempts) == 1
    again = run_sweep(cfgs, tmp_path, fuse=3, progress=False)        # all cached: nothing trains
    assert len(store.read_attempts(tmp_path / run_hash(cfgs[1]))) == 1
    pd.testing.assert_frame_equal(again, summaries)


def test_fuse_setting():
    from initlib.cli import FUSE_DEFAULT_CUDA, fuse_setting
    from initlib.config import ConfigError
    assert fuse_setting("8", "cpu") == 8 and fuse_setting("auto", "cpu") == 1
    assert fuse_setting("auto", "cuda") == FUSE_DEFAULT_CUDA
    for bad in ("0", "many"):
        with pytest.raises(ConfigError, match="--fuse"):
            fuse_setting(bad, "cpu")
