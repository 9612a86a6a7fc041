"""The run store: one folder per run, keyed by the hash of its canonical config.

    <store>/<hash>/config.json    the full config (identity and execution keys)
    <store>/<hash>/metrics.csv    per-epoch metrics (rewritten atomically every checkpoint)
    <store>/<hash>/summary.json   written once, when the run has finished or diverged
    <store>/<hash>/checkpoint.pt  model + optimizer + rows so far, while the run is unfinished
    <store>/<hash>/lock           held by the worker that trains the run
    <store>/<hash>/attempts.jsonl one line per (re)start of training: host, pid, from_epoch

A run is *done* when ``summary.json`` exists. Every file is written to a temporary name and
``os.replace``d into place, so a crash or kill at any moment leaves either the old or the new
file, never a torn one, and loses at most the epochs since the last checkpoint.

Locks: a worker claims a run by creating ``lock`` with O_EXCL. The lock records host and
pid and is touched after every epoch. A lock is stale when its process is gone (same host)
or when it has not been touched for ``INITLIB_LOCK_STALE_S`` seconds (default 1800; other
hosts, e.g. a dead Slurm task); a stale lock is taken over, and the run resumes from its
checkpoint.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

import pandas as pd
import torch

from .config import identity, run_hash
from .data import PROJECT_ROOT
from .metrics import summarize

CONFIG, METRICS, SUMMARY, CHECKPOINT, LOCK, ATTEMPTS = (
    "config.json", "metrics.csv", "summary.json", "checkpoint.pt", "lock", "attempts.jsonl")
RUN_FILES = (CONFIG, METRICS, SUMMARY)  # what export ships (never checkpoints)


def resolve_store(store_dir=None) -> Path:
    if store_dir is None:
        store_dir = os.environ.get("INITLIB_STORE") or (PROJECT_ROOT / "runs")
    return Path(store_dir).expanduser()


def run_dir(store_dir, cfg) -> Path:
    return resolve_store(store_dir) / run_hash(cfg)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, obj) -> None:
    _atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


def write_config(rdir: Path, cfg: dict) -> None:
    rdir.mkdir(parents=True, exist_ok=True)
    if not (rdir / CONFIG).exists():
        write_json(rdir / CONFIG, {"hash": rdir.name, "identity": identity(cfg), "config": cfg})


def save_progress(rdir: Path, model, optimizer, rows: list[dict], status: str,
                  keep_checkpoint: bool = False) -> None:
    """Write metrics, then either a checkpoint (running) or the summary (finished/diverged)."""
    epochs = pd.DataFrame(rows)
    _atomic_write_bytes(rdir / METRICS, epochs.to_csv(index=False).encode())
    if status == "running" or keep_checkpoint:
        tmp = rdir / f".{CHECKPOINT}.{os.getpid()}.tmp"
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "rows": rows, "status": status}, tmp)
        os.replace(tmp, rdir / CHECKPOINT)
    if status != "running":
        write_json(rdir / SUMMARY, summarize(epochs, status))
        if not keep_checkpoint:
            (rdir / CHECKPOINT).unlink(missing_ok=True)


def log_attempt(rdir: Path) -> None:
    """Append who starts training this run, and from which epoch (provenance of resumes)."""
    ckpt_epochs = 0
    if (rdir / METRICS).exists():
        ckpt_epochs = max(0, len(pd.read_csv(rdir / METRICS)) - 1)
    with open(rdir / ATTEMPTS, "a") as f:
        f.write(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
                            "torch": torch.__version__, "threads": torch.get_num_threads(),
                            "from_epoch": ckpt_epochs if (rdir / CHECKPOINT).exists() else 0}) + "\n")


def read_attempts(rdir: Path) -> list[dict]:
    p = rdir / ATTEMPTS
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def load_checkpoint(rdir: Path | None):
    if rdir is None or not (rdir / CHECKPOINT).exists() or (rdir / SUMMARY).exists():
        return None
    return torch.load(rdir / CHECKPOINT, map_location="cpu", weights_only=True)


def is_done(rdir: Path) -> bool:
    return (rdir / SUMMARY).exists()


def read_summary(rdir: Path) -> dict:
    return json.loads((rdir / SUMMARY).read_text())


def read_epochs(rdir: Path) -> pd.DataFrame:
    return pd.read_csv(rdir / METRICS)


# ---------------------------------------------------------------- locks
def _stale_after() -> float:
    return float(os.environ.get("INITLIB_LOCK_STALE_S", 1800))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped) is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def lock_is_stale(lock: Path) -> bool:
    try:
        info = json.loads(lock.read_text())
        age = time.time() - lock.stat().st_mtime
    except (OSError, ValueError):
        return False  # vanished or being written: not ours to judge now
    if info.get("host") == socket.gethostname():
        return not _pid_alive(int(info.get("pid", -1)))
    return age > _stale_after()


def _create_lock(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}, f)
    return True


def try_lock(rdir: Path) -> bool:
    """Claim the run: True if this process now holds its lock (taking over a stale one)."""
    rdir.mkdir(parents=True, exist_ok=True)
    lock = rdir / LOCK
    if _create_lock(lock):
        return True
    if not lock_is_stale(lock):
        return False
    guard = rdir / (LOCK + ".takeover")  # one taker at a time
    if guard.exists() and time.time() - guard.stat().st_mtime > 60:
        guard.unlink(missing_ok=True)
    if not _create_lock(guard):
        return False
    try:
        if lock_is_stale(lock):
            lock.unlink(missing_ok=True)
        return _create_lock(lock)
    finally:
        guard.unlink(missing_ok=True)


def touch_lock(rdir: Path) -> None:
    try:
        os.utime(rdir / LOCK)
    except OSError:
        pass


def release_lock(rdir: Path) -> None:
    lock = rdir / LOCK
    try:
        if json.loads(lock.read_text()).get("pid") == os.getpid():
            lock.unlink()
    except (OSError, ValueError):
        pass


def run_state(rdir: Path) -> str:
    """done | running (locked, live) | partial (checkpoint, nobody on it) | missing"""
    if is_done(rdir):
        return "done"
    if (rdir / LOCK).exists() and not lock_is_stale(rdir / LOCK):
        return "running"
    if (rdir / CHECKPOINT).exists():
        return "partial"
    return "missing"


# ---------------------------------------------------------------- loading many runs
def load_summaries(store_dir, configs) -> pd.DataFrame:
    """One row per config that is done: its identity keys, hash and summary."""
    rows = []
    for cfg in configs:
        rdir = run_dir(store_dir, cfg)
        if is_done(rdir):
            rows.append({**identity(cfg), "hash": rdir.name, **read_summary(rdir)})
    return pd.DataFrame(rows)


def load_epochs(store_dir, configs) -> pd.DataFrame:
    """The per-epoch metrics of every done config, with its identity keys and hash."""
    frames = []
    for cfg in configs:
        rdir = run_dir(store_dir, cfg)
        if is_done(rdir):
            e = read_epochs(rdir)
            for k, v in identity(cfg).items():
                e[k] = [v] * len(e) if isinstance(v, list) else v
            e["hash"] = rdir.name
            frames.append(e)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def export_runs(store_dir, configs, out_dir) -> int:
    """Copy config, metrics and summary (no checkpoints) of every done config to out_dir."""
    n = 0
    for cfg in configs:
        src = run_dir(store_dir, cfg)
        if is_done(src):
            dst = Path(out_dir) / src.name
            dst.mkdir(parents=True, exist_ok=True)
            for f in RUN_FILES:
                shutil.copy2(src / f, dst / f)
            n += 1
    return n


def import_runs(src_dir, store_dir) -> int:
    """Copy exported runs into the store (finished runs only; existing ones are kept)."""
    n = 0
    for src in sorted(Path(src_dir).iterdir()):
        if src.is_dir() and all((src / f).exists() for f in RUN_FILES):
            dst = resolve_store(store_dir) / src.name
            if not is_done(dst):
                dst.mkdir(parents=True, exist_ok=True)
                for f in (CONFIG, METRICS, SUMMARY):  # summary last: it marks the run done
                    shutil.copy2(src / f, dst / f)
                n += 1
    return n
