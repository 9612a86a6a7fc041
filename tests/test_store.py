"""The run store never serves a wrong result: locks of dead workers, the data in a run's
identity, damaged runs, leftovers after kills, signals, and bad input before any write."""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, SHARED, same_metrics, tiny
from initlib import store
from initlib.config import ConfigError
from initlib.data import DataError, fingerprint, load_raw
from initlib.params import load_params
from initlib.sweep import bind_to_data, run_sweep
from initlib.worker import run_one, work_through

CFG = tiny(epochs=4, optimizer="momentum", augment=True)
SHIPPED = {store.CONFIG, store.METRICS, store.SUMMARY, store.ATTEMPTS}


def cli(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "initlib", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, **kw)


def write_params(tmp_path, body="grid: {sigma_w: [0.5, 2.0]}", base="", name="p.yaml"):
    p = tmp_path / name
    p.write_text("profiles:\n  smoke:\n    base: {n_train: 100, n_val: 50, n_test: 50, epochs: 2, "
                 f"batch_size: 32, width: 0.125{base}}}\n    {body}\n")
    return p


def bound(path, data_dir=None):
    sw = load_params(path, "smoke")
    bind_to_data([sw], data_dir)
    return sw.configs


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """CFG trained once, uninterrupted, in a store of its own."""
    d = tmp_path_factory.mktemp("ref")
    run_sweep([CFG], d, progress=False)
    rdir = store.run_dir(d, CFG)
    return store.read_epochs(rdir), store.read_summary(rdir)


# ---------------------------------------------------------------- 1. locks
@pytest.mark.parametrize("content", ["", "{half a json", json.dumps({"host": socket.gethostname(), "pid": 1})])
def test_a_lock_file_nobody_holds_is_taken_at_once(tmp_path, content, capsys):
    rdir = tmp_path / "run"
    rdir.mkdir()
    (rdir / store.LOCK).write_text(content)  # empty, garbage, or a live unrelated pid (init)
    assert store.run_state(rdir) == "missing"
    assert store.try_lock(rdir)
    assert json.loads((rdir / store.LOCK).read_text())["pid"] == os.getpid()
    if content:
        assert "taking over the lock of a worker that is gone" in capsys.readouterr().err
    store.release_lock(rdir)


def _ctrl_c_as_from_a_terminal():
    """SIGINT as a terminal leaves it to Python (KeyboardInterrupt). A shell that starts a job
    in the background (``make test &``, ``nohup``) hands it on ignored, and Python then never
    raises KeyboardInterrupt: a Ctrl-C test sets up the Ctrl-C it tests."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # in the child, before exec: Python installs its handler


@pytest.fixture
def ctrl_c_reaches_python():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_stop_while_taking_a_lock_leaves_it_to_be_released(tmp_path, monkeypatch, ctrl_c_reaches_python):
    """Ctrl-C arriving between creating the lock file and recording it (it happened in CI: a
    lock file was left behind) is held back until the lock is recorded, so release_all_locks,
    a stopping worker's last step, removes it."""
    rdir = tmp_path / "run"
    monkeypatch.setattr(store, "fault_point",
                        lambda name: os.kill(os.getpid(), signal.SIGINT) if name == "locked" else None)
    with pytest.raises(KeyboardInterrupt):
        store.try_lock(rdir)
    assert (rdir / store.LOCK).exists() and store.lock_is_held(rdir)
    store.release_all_locks()
    assert not (rdir / store.LOCK).exists() and not store.lock_is_held(rdir)


def test_sweep_with_an_empty_lock_left_in_its_first_run_finishes(tmp_path):
    p = write_params(tmp_path)
    s = tmp_path / "store"
    rdir = store.run_dir(s, bound(p)[0])
    rdir.mkdir(parents=True)
    (rdir / store.LOCK).write_text("")
    old = time.time() - 3 * 3600
    os.utime(rdir / store.LOCK, (old, old))
    r = cli("sweep", p, "--store", s, timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(store.is_done(store.run_dir(s, c)) for c in bound(p))
    assert not (rdir / store.LOCK).exists()


# ---------------------------------------------------------------- 2. data identity
def _write_npz(path: Path, x_train, y_train, x_test, y_test):
    path.mkdir(parents=True, exist_ok=True)
    np.savez(path / "cifar10.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


def test_a_run_on_other_data_is_another_run(tmp_path):
    zeros = tmp_path / "zeros"
    _write_npz(zeros, np.zeros((500, 32, 32, 3), np.uint8), np.arange(500) % 10,
               np.zeros((100, 32, 32, 3), np.uint8), np.arange(100) % 10)
    p = write_params(tmp_path, "grid: {sigma_w: [1.0]}", base=", n_train: 100, n_val: 20, n_test: 50")
    on_zeros, on_real = bound(p, zeros)[0], bound(p)[0]
    assert on_zeros["data"] == fingerprint(zeros) != on_real["data"] == fingerprint(SHARED)
    s = tmp_path / "store"
    assert store.run_dir(s, on_zeros) != store.run_dir(s, on_real)
    run_sweep([on_zeros], s, zeros, progress=False)
    rz = store.run_dir(s, on_zeros)
    assert json.loads((rz / store.CONFIG).read_text())["identity"]["data"] == fingerprint(zeros)
    assert store.read_attempts(rz)[0]["data"] == fingerprint(zeros)
    assert not store.is_done(store.run_dir(s, on_real))       # not served for the real data
    with pytest.raises(DataError, match="fingerprint"):        # nor trainable on the wrong data
        run_one(on_real, s, zeros)


def test_torchvision_batches_and_npz_are_one_data_set(tmp_path):
    """torchvision's batches (file names inside, any order) load to the npz's arrays."""
    import pickle
    x_tr, y_tr, x_te, y_te = load_raw(SHARED)
    n_tr, n_te = 100, 20  # prefixes of the npz: class-balanced and in canonical order
    npz = tmp_path / "npz"
    _write_npz(npz, x_tr[:n_tr], y_tr[:n_tr], x_te[:n_te], y_te[:n_te])
    tv = tmp_path / "tv" / "cifar-10-batches-py"
    tv.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def batch(x, y, idx, offset):
        return {b"data": x[idx].transpose(0, 3, 1, 2).reshape(len(idx), -1), b"labels": y[idx].tolist(),
                b"filenames": [f"img_{i + offset:05d}.png".encode() for i in idx]}
    perm = rng.permutation(n_tr)
    for k in range(5):
        with open(tv / f"data_batch_{k + 1}", "wb") as f:
            pickle.dump(batch(x_tr, y_tr, perm[k * 20:(k + 1) * 20], 0), f)
    with open(tv / "test_batch", "wb") as f:
        pickle.dump(batch(x_te, y_te, rng.permutation(n_te), 0), f)
    a, b = load_raw(npz), load_raw(tv.parent)
    for u, v in zip(a, b):
        assert np.array_equal(u, v)
    assert fingerprint(npz) == fingerprint(tv.parent)


# ---------------------------------------------------------------- 3. damaged runs
def test_runs_read_from_several_stores_come_from_the_first_where_they_are_done(tmp_path):
    """load_summaries / load_epochs over several stores: a run is served from the first store
    where it is done and intact; a damaged copy in an earlier store is passed over, never served."""
    import shutil
    a, b = tmp_path / "a", tmp_path / "b"
    run_sweep([CFG], a, progress=False)
    shutil.copytree(store.run_dir(a, CFG), store.run_dir(b, CFG))
    assert store.find_done((a, b), CFG) == store.run_dir(a, CFG) and store.find_done(b, CFG) == store.run_dir(b, CFG)
    data = (store.run_dir(a, CFG) / store.METRICS).read_bytes()
    (store.run_dir(a, CFG) / store.METRICS).write_bytes(data[:len(data) // 2])  # a's copy damaged
    assert store.find_done(a, CFG) is None and store.load_summaries(a, [CFG]).empty
    assert store.find_done((a, b), CFG) == store.run_dir(b, CFG)
    assert len(store.load_summaries((a, b), [CFG])) == 1
    assert len(store.load_epochs([a, b], [CFG])) == CFG["epochs"] + 1  # epoch 0 (at init), then 1..4
    assert store.find_done((a, b), {**CFG, "seed": 99}) is None  # never trained: in neither


@pytest.mark.parametrize("damage", ["truncate metrics", "truncate summary", "delete config", "delete metrics"])
def test_a_damaged_run_is_named_never_served_and_retrained(tmp_path, damage, reference):
    s = tmp_path / "store"
    run_sweep([CFG], s, progress=False)
    rdir = store.run_dir(s, CFG)
    f = {"metrics": store.METRICS, "summary": store.SUMMARY, "config": store.CONFIG}[damage.split()[1]]
    if damage.startswith("truncate"):
        data = (rdir / f).read_bytes()
        (rdir / f).write_bytes(data[:len(data) // 2])
    else:
        (rdir / f).unlink()
    assert store.run_state(rdir) == "damaged" and f in store.damage(rdir)
    assert store.load_summaries(s, [CFG]).empty and store.load_epochs(s, [CFG]).empty
    said = []
    assert store.export_runs(s, [CFG], tmp_path / "out", warn=said.append) == 0
    assert f in said[0] and not (tmp_path / "out").exists()
    with pytest.raises(RuntimeError, match="damaged"):
        run_sweep([CFG], s, train=False, progress=False)
    logged = []
    assert work_through([CFG], s, log=logged.append) == []
    assert any("damaged" in m and f in m for m in logged)
    same_metrics(store.read_epochs(rdir), reference[0])
    assert store.read_summary(rdir) == reference[1]


def test_status_says_damaged(tmp_path):
    p = write_params(tmp_path, "grid: {sigma_w: [1.0]}")
    s = tmp_path / "store"
    assert cli("sweep", p, "--store", s).returncode == 0
    rdir = store.run_dir(s, bound(p)[0])
    (rdir / store.METRICS).write_text("epoch\n0\n")
    r = cli("status", p, "--store", s)
    assert "1 damaged" in r.stdout and "metrics.csv" in r.stdout


# ---------------------------------------------------------------- 4. kills and leftovers
def _worker(s: Path, configs, env=None):
    p = subprocess.Popen([sys.executable, "-m", "initlib", "worker", "--store", str(s)], cwd=ROOT,
                         stdin=subprocess.PIPE, env={**os.environ, **(env or {})})
    p.stdin.write(json.dumps(configs).encode())
    p.stdin.close()
    return p


FAULTS = ["locked@1", "writing:config.json@1", "writing:metrics.csv@2", "wrote:metrics.csv@2",
          "writing:checkpoint.pt@2", "wrote:checkpoint.pt@1", "writing:summary.json@1",
          "wrote:summary.json@1", "wrote:metrics.csv@4"]


@pytest.mark.parametrize("fault", FAULTS + ["random@0", "random@1", "random@2"])
def test_a_kill_anywhere_resumes_to_the_same_metrics_and_leaves_no_stray_file(tmp_path, fault, reference):
    s = tmp_path / "store"
    rdir = store.run_dir(s, CFG)
    if fault.startswith("random"):  # SIGKILL at a random moment of a run under way (seeded)
        p = _worker(s, [CFG])
        while not (rdir / store.CHECKPOINT).exists() and p.poll() is None:
            time.sleep(0.01)
        time.sleep(random.Random(int(fault[-1])).uniform(0.0, 0.3))
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not store.is_done(rdir), f"{fault}: the run had finished before the kill (make it longer)"
    else:
        p = _worker(s, [CFG], {"INITLIB_FAULT": fault})
        assert p.wait(timeout=120) == -signal.SIGKILL, f"{fault}: the fault point was not reached"
        assert not store.is_done(rdir) or fault.startswith("wrote:summary")
    assert work_through([CFG], s, log=lambda m: None) == []
    same_metrics(store.read_epochs(rdir), reference[0])
    assert store.read_summary(rdir) == reference[1]
    assert {f.name for f in rdir.iterdir()} == SHIPPED, f"stray files after {fault}"
    assert not any(x.name.startswith("_") for x in s.iterdir())
    attempts = store.read_attempts(rdir)
    if fault == "wrote:metrics.csv@2":  # metrics had epochs 0-2, the checkpoint only 0-1
        assert [a["from_epoch"] for a in attempts] == [0, 1]
    for a in attempts:
        assert {"git_commit", "torch", "device", "data", "threads"} <= set(a)


def test_a_kill_right_after_the_summary_is_cleaned_by_the_next_sweep(tmp_path, reference):
    """The run is done, so workers are never handed it: the sweep itself removes the
    checkpoint and the lock file the kill left (they stayed for good before)."""
    s = tmp_path / "store"
    rdir = store.run_dir(s, CFG)
    p = _worker(s, [CFG], {"INITLIB_FAULT": "wrote:summary.json@1"})
    assert p.wait(timeout=120) == -signal.SIGKILL
    assert store.is_done(rdir) and (rdir / store.CHECKPOINT).exists() and (rdir / store.LOCK).exists()
    run_sweep([CFG], s, progress=False)
    assert {f.name for f in rdir.iterdir()} == SHIPPED
    assert store.read_summary(rdir) == reference[1]


def test_an_edited_summary_is_damaged_never_served_exported_or_imported(tmp_path):
    """The summary's own numbers are covered by a checksum: a hand edit (0.21 -> 0.91) is
    named, not served, not exported, not imported, and the run is trained again."""
    s, out = tmp_path / "store", tmp_path / "out"
    run_sweep([CFG], s, progress=False)
    rdir = store.run_dir(s, CFG)
    honest = store.read_summary(rdir)
    edited = json.loads((rdir / store.SUMMARY).read_text())
    edited["test_acc_at_best_val"] = 0.91
    (rdir / store.SUMMARY).write_text(json.dumps(edited))
    assert store.run_state(rdir) == "damaged" and "its own checksum" in store.damage(rdir)
    assert store.load_summaries(s, [CFG]).empty
    said = []
    assert store.export_runs(s, [CFG], out, warn=said.append) == 0 and "summary.json" in said[0]
    store._copy_run(rdir, out / rdir.name)  # shipped by hand anyway: import refuses it
    said = []
    assert store.import_runs(out, tmp_path / "store2", warn=said.append) == 0 and "checksum" in said[0]
    run_sweep([CFG], s, progress=False)
    assert store.read_summary(rdir) == honest


@pytest.mark.parametrize("flags,expect", [
    (["--device", "cuda:7"], "no CUDA device is visible"),
    (["--device", "tpu"], "key 'device': must be auto, cpu, cuda or cuda:N"),
    (["--workers", "0"], "--workers: an integer >= 1"),
    (["--workers", "-1"], "--workers: an integer >= 1"),
    (["--runs-per-gpu", "0"], "--runs-per-gpu: an integer >= 1"),
])
def test_execution_flags_are_one_line_before_anything_is_written(tmp_path, flags, expect):
    import torch
    if "cuda:7" in flags and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    _sweep_fails(tmp_path, write_params(tmp_path, "grid: {sigma_w: [1.0]}"), flags=flags, expect=expect)


def test_malformed_yaml_is_one_line_naming_file_line_and_column(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("profiles:\n  smoke:\n    base: {n_train: 100\n")
    err = _sweep_fails(tmp_path, p, expect=f"{p}: not valid YAML: line 4, column 1: expected ',' or '}}'")
    assert err.startswith("error: ")


def test_a_later_success_removes_an_old_error(tmp_path):
    s = tmp_path / "store"
    rdir = store.run_dir(s, CFG)
    rdir.mkdir(parents=True)
    (rdir / store.ERROR).write_text("Traceback: an earlier attempt failed")
    assert run_one(CFG, s) == "trained"
    assert not (rdir / store.ERROR).exists()


def test_two_workers_leave_no_queue_file(tmp_path):
    from initlib.executors import run_workers
    grid = [tiny(epochs=1, sigma_w=w) for w in (0.5, 2.0)]
    assert run_workers(grid, tmp_path, None, [None, None], threads=1) == [0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(store.run_dir(tmp_path, c).name for c in grid)


# ---------------------------------------------------------------- 5. signals
def _processes_mentioning(text: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if text in (p / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_stop_every_worker_cleanly(tmp_path, how):
    # 12 epochs: the signal comes after the first checkpoints, long before any run can finish
    p = write_params(tmp_path, "grid: {sigma_w: [0.5, 1.0, 2.0]}", base=", epochs: 12, n_selected_test: 500")
    s = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "initlib", "sweep", str(p), "--store", str(s),
                             "--workers", "2"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_ctrl_c_as_from_a_terminal)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(s.glob("*/" + store.CHECKPOINT))) < 2:
        time.sleep(0.1)
    assert len(_processes_mentioning(str(s))) >= 3          # the sweep and its two workers
    if how == "ctrl-c":
        os.killpg(proc.pid, signal.SIGINT)                  # the terminal signals the whole group
    else:
        proc.send_signal(signal.SIGTERM)                    # Slurm / kill: the sweep alone
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.count("stopped:") == 1
    time.sleep(0.5)
    assert _processes_mentioning(str(s)) == []              # no worker left training
    assert not list(s.glob("*/" + store.LOCK)) and not list(s.glob("*/.*.tmp"))
    assert not any(x.name.startswith("_") for x in s.iterdir())
    assert cli("sweep", p, "--store", s, timeout=300).returncode == 0  # and it resumes


def test_sigterm_to_a_script_that_calls_run_sweep_stops_its_workers(tmp_path):
    """A bench script or notebook calls run_sweep without the CLI's signal handling; SIGTERM to
    it must still stop its workers (they would otherwise train on, orphaned), and leave no lock."""
    # 200 epochs: orphaned workers would still be training when the test looks
    p = write_params(tmp_path, "grid: {sigma_w: [0.5, 1.0, 2.0]}", base=", epochs: 200, n_selected_test: 500")
    s = tmp_path / "store"
    script = ("import sys\nfrom initlib.params import load_params\nfrom initlib.sweep import bind_to_data, run_sweep\n"
              "sw = load_params(sys.argv[1], 'smoke')\nbind_to_data([sw])\n"
              "run_sweep(sw.configs, sys.argv[2], workers=2, progress=False)\n")
    # no pipes: orphaned workers would hold them open, and waiting on them would wait for the workers
    proc = subprocess.Popen([sys.executable, "-c", script, str(p), str(s)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(s.glob("*/" + store.CHECKPOINT))) < 2:
        time.sleep(0.1)
    assert len(_processes_mentioning(str(s))) >= 3          # the script and its two workers
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) != 0
    time.sleep(0.5)
    left = _processes_mentioning(str(s))
    for pid in left:  # never leave an orphan behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert left == []                                       # no worker left training
    assert not list(s.glob("*/" + store.LOCK)) and not list(s.glob("*/.*.tmp"))


# ---------------------------------------------------------------- 6. bad input, before any write
def _sweep_fails(tmp_path, params, *, data=None, store_dir=None, expect, flags=()):
    s = store_dir or tmp_path / "store"
    args = ["sweep", params, "--store", s] + (["--data-dir", data] if data else []) + list(flags)
    r = cli(*args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert expect in r.stderr, r.stderr
    if store_dir is None:
        assert not s.exists()
    return r.stderr


def test_sizes_the_split_cannot_give_are_named(tmp_path):
    p = write_params(tmp_path, "grid: {sigma_w: [1.0]}", base=", n_train: 39990")
    err = _sweep_fails(tmp_path, p, expect="key 'n_train': 39990 needs 3999 images of each class")
    assert "p.yaml: profile 'smoke'" in err


@pytest.mark.parametrize("what,expect", [
    ("truncated", "not a readable npz file"),
    ("no y_test", "no array y_test"),
    ("wrong shape", "x_train has shape (500, 3, 32, 32)"),
])
def test_bad_data_files_are_named_before_anything_is_written(tmp_path, what, expect):
    d = tmp_path / "data"
    x, y = np.zeros((500, 32, 32, 3), np.uint8), np.arange(500) % 10
    if what == "no y_test":
        d.mkdir()
        np.savez(d / "cifar10.npz", x_train=x, y_train=y, x_test=x[:100])
    else:
        _write_npz(d, x.transpose(0, 3, 1, 2) if what == "wrong shape" else x, y, x[:100], y[:100])
        if what == "truncated":
            b = (d / "cifar10.npz").read_bytes()
            (d / "cifar10.npz").write_bytes(b[:len(b) // 2])
    err = _sweep_fails(tmp_path, write_params(tmp_path, "grid: {sigma_w: [1.0]}"), data=d, expect=expect)
    assert str(d / "cifar10.npz") in err


@pytest.mark.parametrize("where", ["file", "proc"])
def test_a_store_that_cannot_be_written_is_one_clear_line(tmp_path, where):
    s = tmp_path / "a_file"
    if where == "file":
        s.write_text("not a folder")
    else:
        s = Path("/proc/initmem-store")
    _sweep_fails(tmp_path, write_params(tmp_path, "grid: {sigma_w: [1.0]}"), store_dir=s,
                 expect=f"run store {s}: cannot write there")


@pytest.mark.parametrize("base,expect", [
    (", batch_size: 200", "key 'batch_size': must be at most n_train (100)"),
    (", lr: 5e-2", "YAML reads exponents without a dot"),
])
def test_values_that_used_to_pass_validation(tmp_path, base, expect):
    with pytest.raises(ConfigError, match=expect.replace("(", r"\(").replace(")", r"\)")):
        load_params(write_params(tmp_path, "grid: {sigma_w: [1.0]}", base=base), "smoke")


def test_export_then_import_through_the_cli_round_trips_intact_runs(tmp_path):
    p = write_params(tmp_path, "grid: {sigma_w: [1.0]}")
    s, out, s2 = tmp_path / "store", tmp_path / "results", tmp_path / "store2"
    assert cli("sweep", p, "--store", s).returncode == 0
    r = cli("export", p, "--store", s, "--out", out)
    assert r.returncode == 0 and "exported 1 of 1" in r.stdout, r.stderr
    r = cli("import", out, "--store", s2)
    assert r.returncode == 0 and "imported 1 runs" in r.stdout, r.stderr
    rdir = store.run_dir(s2, bound(p)[0])
    assert store.is_done(rdir)
    assert store.read_summary(rdir) == store.read_summary(store.run_dir(s, bound(p)[0]))


def test_export_with_prune_keeps_exactly_the_runs_the_params_name(tmp_path):
    out = tmp_path / "results"
    other = {**CFG, "seed": 7}                      # a run no params file names any more
    stale = store.run_dir(out, other)
    stale.mkdir(parents=True)
    (stale / store.CONFIG).write_text(json.dumps({"config": other}))
    kept = store.run_dir(out, CFG)
    kept.mkdir(parents=True)
    (kept / store.CONFIG).write_text(json.dumps({"config": CFG}))
    (out / "README.md").write_text("not a run")     # files and foreign folders are left alone
    (out / "notes").mkdir()
    assert store.prune_results(out, [CFG]) == [stale.name]
    assert kept.is_dir() and not stale.exists() and (out / "README.md").exists() and (out / "notes").is_dir()
    assert store.prune_results(tmp_path / "missing", [CFG]) == []
