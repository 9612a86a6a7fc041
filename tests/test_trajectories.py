"""Training semantics, pinned: the per-epoch trajectory of one tiny real run per optimizer
(with explicit L2, decoupled decay, schedules, warm-up, augmentation and a He ResNet among
them) against stored values in tests/snapshots/trajectories.json.

A change to initialization, an optimizer, L2, a schedule, the data split or the metrics moves
these numbers far beyond the tolerance; another CPU or thread count moves them by rounding
only. Tolerance (RTOL, relative): chosen from the difference measured between
OMP_NUM_THREADS=1 and 2 on the machine that wrote the snapshot (see MEASURED below), times a
wide margin for other CPUs' kernels.

    python tests/test_trajectories.py --write     # rewrite the snapshot (say why in the commit)
    python tests/test_trajectories.py --measure   # print the 1- vs 2-thread difference
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import tiny  # noqa: E402

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "trajectories.json"
COLUMNS = ("train_loss_running", "train_loss", "val_loss", "test_loss", "weight_norm",
           "T_SGD", "T_L2", "T_adapt", "lr")
# Relative difference between 1 and 2 threads, measured with --measure when the snapshot was
# written (largest over all configs and columns), and the tolerance used.
MEASURED = 1.3e-10
RTOL = 1e-6

def case(**kw):
    """A tiny real run in float64: rounding differences between CPUs and thread counts stay
    near 1e-16 and grow to ~1e-11 over these steps, where float32's grow to ~1e-3; so the
    tolerance can be tight enough to see any change of what is computed."""
    return tiny(precision="fp64", bn_stats="running", **kw)  # as when the snapshot was written


CASES = {
    "sgd_l2_cosine": case(optimizer="sgd", lr=0.1, l2=5e-3, schedule="cosine", epochs=4),
    "momentum_step_warmup_augment": case(optimizer="momentum", lr=0.02, schedule="step",
                                         warmup_epochs=1, augment=True, epochs=4),
    "adam_l2_sigma2.5": case(optimizer="adam", lr=1e-3, l2=1e-3, sigma_w=2.5, epochs=4),
    "adamw_decay_sigma0.1": case(optimizer="adamw", lr=2e-3, weight_decay=0.1, sigma_w=0.1, epochs=4),
    "muon_decay": case(optimizer="muon", lr=0.02, weight_decay=0.05, epochs=4),
    "resnet20_sgd_b16": case(arch="resnet20", width=0.25, optimizer="sgd", lr=0.05, batch_size=16, epochs=3),
}


def trajectories() -> dict:
    from initlib.train import train
    out = {}
    for name, cfg in CASES.items():
        epochs, _ = train(cfg)
        out[name] = {c: [float(v) for v in epochs[c]] for c in COLUMNS}
        out[name]["train_acc"] = [float(v) for v in epochs["train_acc"]]
    return out


def rel_diff(a: dict, b: dict) -> float:
    worst = 0.0
    for name in a:
        for c in COLUMNS:
            x, y = np.asarray(a[name][c]), np.asarray(b[name][c])
            d = np.abs(x - y) / np.maximum(np.abs(y), 1e-12)
            worst = max(worst, float(np.nanmax(d)) if len(d) else 0.0)
    return worst


@pytest.mark.parametrize("name", list(CASES))
def test_trajectory_matches_snapshot(name):
    from initlib.train import train
    stored = json.loads(SNAPSHOT.read_text())[name]
    epochs, summary = train(CASES[name])
    assert summary["status"] == "finished"
    for c in COLUMNS:
        np.testing.assert_allclose(epochs[c].to_numpy(), stored[c], rtol=RTOL, atol=1e-12,
                                   err_msg=f"{name}: {c}")
    # accuracies are counts of images: allow one flipped prediction per split at most
    np.testing.assert_allclose(epochs["train_acc"].to_numpy(), stored["train_acc"], atol=1.01 / 100)


def test_snapshot_would_catch_a_changed_learning_rate():
    """The tolerance is tight enough to see a 0.1% change of one hyperparameter."""
    from initlib.train import train
    stored = json.loads(SNAPSHOT.read_text())["sgd_l2_cosine"]
    epochs, _ = train({**CASES["sgd_l2_cosine"], "lr": 0.1001})
    d = np.abs(epochs["train_loss"].to_numpy() - stored["train_loss"]) / np.abs(stored["train_loss"])
    assert d.max() > 10 * RTOL


def _in_subprocess(threads: int) -> dict:
    code = ("import json, sys; sys.path.insert(0, 'tests'); import torch; "
            f"torch.set_num_threads({threads}); "
            "from test_trajectories import trajectories; print(json.dumps(trajectories()))")
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       check=True, env={**__import__("os").environ, "OMP_NUM_THREADS": str(threads)})
    return json.loads(r.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    import os
    from conftest import SHARED
    os.environ.setdefault("INITLIB_DATA_DIR", str(SHARED))
    if sys.argv[1:] == ["--write"]:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(_in_subprocess(1), indent=1) + "\n")
        print("wrote", SNAPSHOT)
    elif sys.argv[1:] == ["--measure"]:
        print(f"max relative difference, 1 vs 2 threads: {rel_diff(_in_subprocess(1), _in_subprocess(2)):.2e}")
    else:
        sys.exit(__doc__)
