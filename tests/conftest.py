import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "cifar10"


def pytest_configure(config):
    # Data: $INITLIB_DATA_DIR (the Makefile sets it), else the offline copy beside the checkout.
    if not os.environ.get("INITLIB_DATA_DIR") and (SHARED / "cifar10.npz").exists():
        os.environ["INITLIB_DATA_DIR"] = str(SHARED)
    # pytest-xdist (make test: one worker per core): a worker shares the store of the session
    # that started it (its locks let two workers wait for, not retrain, a run both need), and
    # its torch gets an equal share of the cores unless OMP_NUM_THREADS says otherwise.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        if not os.environ.get("OMP_NUM_THREADS"):  # also what the notebook kernels inherit
            workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
            os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
            import torch
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        if Path(os.environ.get("INITLIB_STORE", "")).name.startswith("initlib-test-store-"):
            return
    # A fresh, empty run store for this test session: the smoke notebooks must really train.
    # The shipped cpu results go in too: the cpu notebooks (executed with train=False)
    # re-analyse them and fail, rather than train, if a run is missing.
    os.environ["INITLIB_STORE"] = tempfile.mkdtemp(prefix="initlib-test-store-")
    if (ROOT / "results" / "cpu").is_dir():
        from initlib import store
        store.import_runs(ROOT / "results" / "cpu", os.environ["INITLIB_STORE"])


def tiny(**kw):
    """A real but tiny run: ResNet-9 at 1/8 width on 100 CIFAR-10 images."""
    cfg = dict(arch="resnet9", width=0.125, n_train=100, n_val=50, n_test=50, n_selected_test=500, epochs=3,
               batch_size=32, lr=0.05, optimizer="sgd", sigma_w=1.0, seed=0)
    cfg.update(kw)
    from initlib.config import resolve
    return resolve(cfg)


@pytest.fixture
def tiny_cfg():
    return tiny()


def same_metrics(a, b):
    """Per-epoch metrics equal in every column except wall time."""
    import pandas as pd
    pd.testing.assert_frame_equal(a.drop(columns=["wall_s"]), b.drop(columns=["wall_s"]), check_exact=True)


def pytest_unconfigure(config):
    import shutil
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the session that made the store removes it
    store = os.environ.get("INITLIB_STORE", "")
    if Path(store).name.startswith("initlib-test-store-"):
        shutil.rmtree(store, ignore_errors=True)
