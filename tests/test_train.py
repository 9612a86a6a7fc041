import math

import pytest

from conftest import same_metrics, tiny
from initlib import store
from initlib.worker import run_one
from initlib.train import train


class Killed(Exception):
    pass


def killed_after(stop: int):
    """An on_epoch callback that raises Killed once epoch ``stop`` is recorded (a kill there)."""
    def on_epoch(epoch, row):
        if epoch == stop:
            raise Killed
    return on_epoch


def test_same_config_and_seed_same_metrics():
    e1, s1 = train(tiny(augment=True))
    e2, s2 = train(tiny(augment=True))
    same_metrics(e1, e2)
    assert s1 == s2
    e3, _ = train(tiny(augment=True, seed=1))
    assert not (e3["train_loss"].values == e1["train_loss"].values).all()


def test_records_what_the_paper_measures():
    e, s = train(tiny(epochs=2, optimizer="adam", lr=1e-3, l2=1e-3))
    assert list(e["epoch"]) == [0, 1, 2]
    for col in ("train_loss", "train_acc", "val_loss", "val_acc", "test_loss", "test_acc",
                "weight_norm", "lr", "T_SGD", "T_L2", "T_adapt", "norm/prep.0", "norm/fc"):
        assert col in e.columns
    steps = math.ceil(100 / 32)
    assert e["T_adapt"].iloc[-1] == pytest.approx(2 * steps * 1e-3)
    assert e["T_SGD"].iloc[-1] == pytest.approx(2 * steps * 1e-6 / 32)
    assert e["T_L2"].iloc[-1] == pytest.approx(1e-3 * 2 * steps * 1e-3)
    layers = [c for c in e.columns if c.startswith("norm/")]
    assert e["weight_norm"].iloc[0] == pytest.approx(math.sqrt(sum(e[c].iloc[0] ** 2 for c in layers)))
    assert s["status"] == "finished" and s["epochs_trained"] == 2


def test_a_dropped_last_batch_takes_floor_n_over_b_steps_and_changes_the_numbers():
    """100 images at b = 32: 'keep' takes 4 steps an epoch (the last on 4 images), 'drop' 3."""
    keep, _ = train(tiny(epochs=2, optimizer="adam", lr=1e-3))
    drop, _ = train(tiny(epochs=2, optimizer="adam", lr=1e-3, last_batch="drop"))
    assert keep["T_adapt"].iloc[-1] == pytest.approx(2 * 4 * 1e-3)
    assert drop["T_adapt"].iloc[-1] == pytest.approx(2 * 3 * 1e-3)
    assert drop["train_loss_running"].iloc[1] != keep["train_loss_running"].iloc[1]
    assert math.isfinite(drop["train_loss_running"].iloc[1])


def test_resume_after_kill_gives_identical_metrics(tmp_path):
    cfg = tiny(epochs=4, optimizer="momentum", augment=True)
    ref, ref_summary = train(cfg)
    rdir = tmp_path / "run"
    rdir.mkdir()
    with pytest.raises(Killed):
        train(cfg, run_dir=rdir, on_epoch=killed_after(2))
    assert (rdir / store.CHECKPOINT).exists() and not (rdir / store.SUMMARY).exists()
    assert len(store.read_epochs(rdir)) == 3  # epochs 0, 1, 2 kept
    resumed, summary = train(cfg, run_dir=rdir)
    same_metrics(resumed, ref)
    assert summary == ref_summary
    assert not (rdir / store.CHECKPOINT).exists()  # removed once finished
    same_metrics(store.read_epochs(rdir), ref)


def test_rerun_of_finished_config_trains_nothing(tmp_path, monkeypatch):
    cfg = tiny(epochs=1)
    assert run_one(cfg, tmp_path) == "trained"
    rdir = store.run_dir(tmp_path, cfg)
    mtime = (rdir / store.METRICS).stat().st_mtime_ns
    import initlib.train as tr
    monkeypatch.setattr(tr, "train", lambda *a, **k: pytest.fail("trained a finished run"))
    assert run_one(cfg, tmp_path) == "cached"
    assert (rdir / store.METRICS).stat().st_mtime_ns == mtime
    assert len(store.read_attempts(rdir)) == 1


def test_divergence_is_recorded_not_raised(tmp_path):
    cfg = tiny(epochs=3, optimizer="sgd", lr=1e30, sigma_w=2.5)  # BN nets survive lr=1e12
    assert run_one(cfg, tmp_path) == "trained"
    s = store.read_summary(store.run_dir(tmp_path, cfg))
    assert s["status"] == "diverged"
    e = store.read_epochs(store.run_dir(tmp_path, cfg))
    assert len(e) == s["epochs_trained"] + 1 and not math.isfinite(e["train_loss"].iloc[-1])


def test_compile_failure_falls_back_with_a_clear_message(monkeypatch):
    import torch

    def broken(model, **kw):
        raise RuntimeError("no compiler here")
    monkeypatch.setattr(torch, "compile", broken)
    with pytest.warns(UserWarning, match="torch.compile failed .*no compiler here.*training eagerly"):
        e, s = train(tiny(epochs=1, compile=True))
    assert s["status"] == "finished"
    same_metrics(e, train(tiny(epochs=1))[0])


def test_compile_probe_leaves_batchnorm_statistics_alone(monkeypatch):
    import torch
    monkeypatch.setattr(torch, "compile", lambda model, **kw: model)  # probe runs, compiles nothing
    same_metrics(train(tiny(epochs=1, compile=True))[0], train(tiny(epochs=1))[0])


def test_selected_predictor_is_scored_on_every_test_image():
    """The weights of the best-validation-loss epoch, kept and scored once on all 10,000 test
    images: on the per-epoch test subset they give exactly the per-epoch test accuracy of
    that epoch, so the kept weights are the selected ones."""
    from initlib.data import load_cifar10
    from initlib.store import unpack_correct
    e, s = train(tiny(epochs=4, lr=0.3, n_selected_test=10000))
    assert s["selected_test_n"] == 10000
    correct = unpack_correct(s["selected_test_correct"], 10000)
    assert s["selected_test_acc"] == pytest.approx(correct.mean())
    subset = load_cifar10(n_train=100, n_val=50, n_test=50, n_selected_test=10000).test_index
    best = e.loc[e["epoch"] == s["best_val_epoch"], "test_acc"].iloc[0]
    assert correct[subset].mean() == pytest.approx(best) == pytest.approx(s["test_acc_at_best_val"])


def test_precise_bn_statistics_are_the_mean_of_per_batch_statistics():
    """Hand-computed: a lone BatchNorm fed three batches ends with running mean = the mean of
    the batch means and running var = the mean of the (unbiased) batch variances; the model's
    mode and momentum are restored."""
    import torch
    from torch import nn
    from initlib.bn_stats import recompute_bn_stats_
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(4, 3, 2, 2, generator=g) * s + m for s, m in ((1.0, 0.0), (2.0, 1.0), (0.5, -3.0))]
    bn = nn.BatchNorm2d(3)
    model = nn.Sequential(bn).eval()
    recompute_bn_stats_(model, batches)
    torch.testing.assert_close(bn.running_mean, torch.stack([b.mean((0, 2, 3)) for b in batches]).mean(0))
    torch.testing.assert_close(bn.running_var, torch.stack([b.var((0, 2, 3)) for b in batches]).mean(0))
    assert not model.training and bn.momentum == 0.1


def test_bn_stats_change_the_evaluation_never_the_training():
    """Training normalises with batch statistics, so 'precise' and 'running' runs take the same
    steps (the train-mode loss is bitwise the same) and differ only in what eval mode reads."""
    running, _ = train(tiny(epochs=2, lr=0.3, bn_stats="running"))
    precise, _ = train(tiny(epochs=2, lr=0.3, bn_stats="precise"))
    assert (running["train_loss_running"].iloc[1:] == precise["train_loss_running"].iloc[1:]).all()
    assert (running["weight_norm"] == precise["weight_norm"]).all()
    assert not (running["val_loss"] == precise["val_loss"]).all()


def test_a_compiled_model_keeps_the_eager_models_state_and_layer_names(monkeypatch):
    """torch.compile wraps the model (its state_dict keys gain '_orig_mod.'): the forward
    passes go through the wrapper, while slicing, checkpoints and norms read the eager model,
    so a compiled run gives the eager run's metrics and column names."""
    import torch
    from torch import nn

    class Wrapped(nn.Module):  # what torch.compile returns, as far as names go
        def __init__(self, model):
            super().__init__()
            self._orig_mod = model

        def forward(self, x):
            return self._orig_mod(x)
    monkeypatch.setattr(torch, "compile", lambda model, **kw: Wrapped(model))
    same_metrics(train(tiny(epochs=2, compile=True))[0], train(tiny(epochs=2))[0])


def test_a_sweep_shows_progress_in_epochs_of_runs_in_progress(tmp_path):
    """The sweep's bar counts epochs, a run in progress included (a cpu run takes tens of
    minutes), and the in-process worker reports each epoch it trains."""
    from initlib.worker import sweep_progress, work_through
    done, stopped, untouched = tiny(epochs=2), tiny(epochs=4, seed=1), tiny(epochs=3, seed=2)
    assert run_one(done, tmp_path) == "trained"
    rdir = store.run_dir(tmp_path, stopped)
    rdir.mkdir()
    with pytest.raises(Killed):
        train(stopped, run_dir=rdir, on_epoch=killed_after(2))
    assert sweep_progress([done, stopped, untouched], tmp_path) == (1, 2 + 2 + 0)
    seen = []
    assert work_through([stopped], tmp_path, on_epoch=lambda epoch, row: seen.append(epoch)) == []
    assert seen == [3, 4]
    assert sweep_progress([done, stopped, untouched], tmp_path) == (2, 2 + 4 + 0)
