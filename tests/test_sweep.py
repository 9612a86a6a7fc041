"""Workers, locks, resume and submitit: the paths that scale a sweep out, tested on CPU."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import same_metrics, tiny
from initlib import store
from initlib.executors import run_workers
from initlib.params import load_params
from initlib.plan import order_longest_first, plan
from initlib.sweep import run_sweep
from initlib.worker import work_through

ROOT = Path(__file__).resolve().parent.parent
GRID = [tiny(epochs=2, sigma_w=s, optimizer=o, lr=lr)
        for s in (0.5, 2.0) for o, lr in (("sgd", 0.05), ("adam", 1e-3))]


def test_two_workers_train_each_run_once_with_the_same_metrics(tmp_path):
    # CPU numbers are bitwise reproducible for a given thread count, so both sides use 1 thread
    one, two = tmp_path / "one", tmp_path / "two"
    assert run_workers(GRID, one, None, [None], threads=1) == [0]           # one worker
    assert run_workers(GRID, two, None, [None, None], threads=1) == [0, 0]  # two, one store
    pids = set()
    for cfg in GRID:
        attempts = store.read_attempts(store.run_dir(two, cfg))
        assert len(attempts) == 1                              # trained exactly once
        pids.add(attempts[0]["pid"])
        assert attempts[0]["threads"] == 1
        same_metrics(store.read_epochs(store.run_dir(two, cfg)), store.read_epochs(store.run_dir(one, cfg)))
    assert len(pids) == 2                                      # both workers did share the work


def test_killed_worker_is_resumed_to_identical_metrics(tmp_path):
    cfg = tiny(n_train=200, epochs=12, optimizer="momentum", augment=True)
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    run_sweep([cfg], ref, progress=False)
    proc = subprocess.Popen([sys.executable, "-m", "initlib", "worker", "--store", str(killed)],
                            cwd=ROOT, stdin=subprocess.PIPE)
    proc.stdin.write(json.dumps([cfg]).encode())
    proc.stdin.close()
    rdir = store.run_dir(killed, cfg)
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until at least 2 epochs are checkpointed
        if (rdir / store.CHECKPOINT).exists() and len(store.read_epochs(rdir)) >= 3:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not store.is_done(rdir), "the worker finished before it could be killed"
    assert (rdir / store.LOCK).exists()                        # left behind by the dead worker
    assert store.run_state(rdir) == "partial"                  # ... and recognised as stale
    assert work_through([cfg], killed, log=lambda m: None) == []
    attempts = store.read_attempts(rdir)
    # metrics had epochs 0-2 when it was killed, so the checkpoint (written before each
    # epoch's metrics) held at least epochs 0-1: the resume starts from epoch 1 or later
    assert len(attempts) == 2 and attempts[1]["from_epoch"] >= 1
    same_metrics(store.read_epochs(rdir), store.read_epochs(store.run_dir(ref, cfg)))
    assert store.read_summary(rdir) == store.read_summary(store.run_dir(ref, cfg))


def test_live_lock_is_respected_and_released(tmp_path):
    rdir = tmp_path / "abc"
    assert store.try_lock(rdir)
    assert not store.try_lock(rdir)                            # held by this live process
    assert store.lock_is_held(rdir) and store.run_state(rdir) == "running"
    holder = subprocess.run([sys.executable, "-c", "from initlib import store; import sys; "
                             f"sys.exit(0 if store.try_lock(__import__('pathlib').Path({str(rdir)!r})) else 3)"],
                            cwd=ROOT)
    assert holder.returncode == 3                              # another process cannot take it
    store.release_lock(rdir)
    assert not (rdir / store.LOCK).exists() and not store.lock_is_held(rdir)
    assert store.try_lock(rdir)
    store.release_lock(rdir)


@pytest.mark.parametrize("executor", ["debug", "submitit-local"])
def test_submitit_executors_train_a_grid(tmp_path, executor):
    grid = GRID[:2]
    df = run_sweep(grid, tmp_path, executor=executor, runs_per_task=1, progress=False)
    assert len(df) == 2 and set(df["status"]) == {"finished"}
    ref = tmp_path / "ref"
    run_sweep(grid, ref, progress=False)
    for cfg in grid:
        same_metrics(store.read_epochs(store.run_dir(tmp_path, cfg)), store.read_epochs(store.run_dir(ref, cfg)))


def test_plan_prints_a_total_for_the_paper_profile():
    sweeps = [load_params(p, "paper") for p in sorted((ROOT / "params").glob("0*.yaml"))]
    df = plan(sweeps, gpu="h200")
    total = df[df["params"] == "TOTAL (unique runs)"].iloc[0]
    from initlib.config import run_hash
    unique = {run_hash(c) for s in sweeps for c in s.configs}
    assert total["runs"] == len(unique) > 300   # a run shared by two files trains once
    assert len(unique) < sum(len(s.configs) for s in sweeps)
    assert total["gpu_hours"] > 0 and total["flops"] > 1e18
    r = subprocess.run([sys.executable, "-m", "initlib", "plan", *map(str, sorted((ROOT / "params").glob("0*.yaml"))),
                        "--profile", "paper"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "TOTAL" in r.stdout and "gpu_hours" in r.stdout


def test_order_longest_first_drops_duplicates_and_starts_with_deep_and_long_runs():
    short, long, deep = tiny(), tiny(epochs=6), tiny(arch="resnet56", width=0.25)
    ordered = order_longest_first([short, long, dict(short), deep, short])
    assert [(c["arch"], c["epochs"]) for c in ordered] == [("resnet56", 3), ("resnet9", 6), ("resnet9", 3)]


def test_train_false_is_an_error_before_anything_trains(tmp_path, monkeypatch):
    with pytest.raises(RuntimeError, match="1 of 1 runs are not in the store"):
        run_sweep([tiny()], tmp_path, train=False, progress=False)
    monkeypatch.setenv("INITLIB_NO_TRAIN", "1")
    with pytest.raises(RuntimeError, match="import shipped results first"):
        run_sweep([tiny()], tmp_path, progress=False)
    assert not any(tmp_path.iterdir())
