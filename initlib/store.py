"""The run store: one folder per run, keyed by the hash of its identity (its config and the
fingerprint of the data it trains on).

    <store>/<hash>/config.json    the identity, the full config and the data fingerprint
    <store>/<hash>/metrics.csv    per-epoch metrics (rewritten atomically every checkpoint)
    <store>/<hash>/summary.json   written once, when the run has finished or diverged, with
                                  the sha256 of config.json and metrics.csv
    <store>/<hash>/checkpoint.pt  model + optimizer + rows so far, while the run is unfinished
    <store>/<hash>/lock           exists while a worker trains the run (an OS lock on it)
    <store>/<hash>/attempts.jsonl one line per (re)start: host, pid, from_epoch, provenance
    <store>/<hash>/error.txt      the traceback of the last failed attempt (gone on success)

**Done** means: ``summary.json`` parses, ``config.json`` parses and names this hash, and both
files' checksums match the ones the summary recorded. Anything less is **damaged**: it is
never served (``load_*``), exported or imported; ``status`` says so and ``sweep`` retrains it.

**Writes** go to a temporary name and are ``os.replace``d into place, so a kill at any moment
leaves either the old or the new file, and loses at most the epochs since the last
checkpoint. Temporary files and the checkpoint of a finished run that a kill left behind are
removed by the next worker that holds the run's lock.

**Locks** are ``flock`` locks on ``lock``: the kernel releases them when their process dies,
so a lock file left by a killed worker (empty, half written or naming a pid that now belongs
to another process) is simply taken. The file records host and pid for people to read. On a
shared filesystem the locks work where the filesystem supports ``flock`` (local disks, NFSv4,
Lustre with ``-o flock``).
"""
from __future__ import annotations

import base64
import errno
import fcntl
import functools
import io
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .config import LEGACY_IDENTITY_VALUES, identity, run_hash
from .data import PROJECT_ROOT
from .metrics import summarize

CONFIG, METRICS, SUMMARY, CHECKPOINT, LOCK, ATTEMPTS, ERROR = (
    "config.json", "metrics.csv", "summary.json", "checkpoint.pt", "lock", "attempts.jsonl",
    "error.txt")
RUN_FILES = (CONFIG, METRICS, SUMMARY)  # what export ships (never checkpoints)
CHECKSUMMED = (CONFIG, METRICS)


class StoreError(OSError):
    """The store cannot be used (not a folder, not writable); raised before any training."""


def resolve_store(store_dir=None) -> Path:
    """The store folder: ``store_dir``, else $INITLIB_STORE, else runs/ in the project."""
    if store_dir is None:
        store_dir = os.environ.get("INITLIB_STORE") or (PROJECT_ROOT / "runs")
    return Path(store_dir).expanduser()


def check_writable(store_dir) -> Path:
    """Create the store if needed and prove it writable, or raise StoreError saying why."""
    d = resolve_store(store_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".write-probe.{os.getpid()}.tmp"
        probe.write_bytes(b"ok")
        probe.unlink()
    except (OSError, ValueError) as e:
        why = "it is a file, not a folder" if d.exists() and not d.is_dir() else (
            e.strerror or str(e))
        raise StoreError(f"run store {d}: cannot write there ({why}); pass --store DIR or set "
                         f"INITLIB_STORE to a writable folder") from None
    return d


def run_dir(store_dir: Path, cfg) -> Path:
    """The folder of ``cfg``'s run in a store resolved once by the caller (resolve_store)."""
    return Path(store_dir) / run_hash(cfg)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_FAULTS: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Fault injection for the kill tests: with INITLIB_FAULT="<name>@<n>" this process
    SIGKILLs itself the n-th time it passes the point ``name``. A no-op otherwise."""
    spec = os.environ.get("INITLIB_FAULT")
    if not spec or spec.partition("@")[0] != name:
        return
    _FAULTS[name] = _FAULTS.get(name, 0) + 1
    if _FAULTS[name] == int(spec.partition("@")[2] or 1):
        os.kill(os.getpid(), signal.SIGKILL)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data[:len(data) // 2])
            fault_point(f"writing:{path.name}")  # a kill inside the write: a torn temp file
            f.write(data[len(data) // 2:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fault_point(f"wrote:{path.name}")
    finally:
        tmp.unlink(missing_ok=True)  # only there if the write failed


def write_json(path: Path, obj) -> None:
    _atomic_write_bytes(Path(path), (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode())


def write_config(rdir: Path, cfg: dict) -> None:
    rdir.mkdir(parents=True, exist_ok=True)
    if not (rdir / CONFIG).exists():
        write_json(rdir / CONFIG, {"hash": rdir.name, "identity": identity(cfg), "config": cfg})


def summary_digest(summary: dict) -> str:
    """The sha256 of a summary's own numbers (its canonical JSON without ``checksums``)."""
    body = {k: v for k, v in summary.items() if k != "checksums"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_summary(rdir: Path, summary: dict) -> None:
    """The summary, with the checksums that make the run verifiable (of config.json, of
    metrics.csv, and of the summary's own numbers); written last."""
    sums = {f: sha256_file(rdir / f) for f in CHECKSUMMED}
    sums[SUMMARY] = summary_digest(summary)
    write_json(rdir / SUMMARY, {**summary, "checksums": sums})


def save_progress(rdir: Path, checkpoint: dict | None, rows: list[dict], status: str,
                  keep_checkpoint: bool = False, selected: dict | None = None) -> dict | None:
    """Write metrics, then either the ``checkpoint`` (running, or kept) or the summary
    (finished/diverged; with the ``selected`` predictor's scores). Returns the summary, once
    written."""
    epochs = pd.DataFrame(rows)
    _atomic_write_bytes(rdir / METRICS, epochs.to_csv(index=False).encode())
    if checkpoint is not None and (status == "running" or keep_checkpoint):
        buf = io.BytesIO()
        torch.save(checkpoint, buf)
        _atomic_write_bytes(rdir / CHECKPOINT, buf.getvalue())
    if status == "running":
        return None
    summary = {**summarize(epochs, status), **(selected or {})}
    write_summary(rdir, summary)
    if not keep_checkpoint:
        (rdir / CHECKPOINT).unlink(missing_ok=True)
    (rdir / ERROR).unlink(missing_ok=True)
    return summary


def pack_correct(correct: np.ndarray) -> str:
    """Per-image correctness (a boolean vector) as base64 of its packed bits, as the summary
    stores it (10,000 test images: 1,668 characters)."""
    return base64.b64encode(np.packbits(np.asarray(correct, dtype=bool)).tobytes()).decode()


def unpack_correct(text: str, n: int) -> np.ndarray:
    """The inverse of :func:`pack_correct` for ``n`` images."""
    return np.unpackbits(np.frombuffer(base64.b64decode(text), dtype=np.uint8))[:n].astype(bool)


# ---------------------------------------------------------------- provenance
@functools.lru_cache(maxsize=1)
def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                           text=True, timeout=5)
        return (r.stdout.strip() or None) if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def log_attempt(rdir: Path, from_epoch: int) -> None:
    """Append who (re)starts training this run, from which epoch, with what code and where."""
    cfg = json.loads((rdir / CONFIG).read_text()) if (rdir / CONFIG).exists() else {}
    line = {"host": socket.gethostname(), "pid": os.getpid(), "time": time.time(),
            "from_epoch": int(from_epoch), "git_commit": _git_commit(), "torch": torch.__version__,
            "device": _device_name(), "threads": torch.get_num_threads(),
            "data": cfg.get("identity", {}).get("data")}
    with open(rdir / ATTEMPTS, "a") as f:
        f.write(json.dumps(line) + "\n")


def read_attempts(rdir: Path) -> list[dict]:
    p = rdir / ATTEMPTS
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


# ---------------------------------------------------------------- integrity
def damage(rdir: Path) -> str | None:
    """None if the run is done and intact; else what is wrong, naming the file. A run
    without summary.json is not damaged, only unfinished (see :func:`run_state`)."""
    if not (rdir / SUMMARY).exists():
        return None
    try:
        summary = json.loads((rdir / SUMMARY).read_text())
        sums = summary["checksums"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{rdir / SUMMARY}: unreadable or without checksums"
    if sums.get(SUMMARY) != summary_digest(summary):
        return f"{rdir / SUMMARY}: its numbers do not match its own checksum (changed by hand?)"
    for f in CHECKSUMMED:
        p = rdir / f
        if not p.is_file():
            return f"{p}: missing"
        if sha256_file(p) != sums.get(f):
            return f"{p}: does not match the checksum in {SUMMARY} (truncated or changed)"
    try:
        name = json.loads((rdir / CONFIG).read_text()).get("hash")
    except (OSError, ValueError):
        return f"{rdir / CONFIG}: not valid JSON"
    if name != rdir.name:
        return f"{rdir / CONFIG}: names run {name}, not {rdir.name}"
    return None


def is_done(rdir: Path) -> bool:
    """Finished (or diverged) and intact: safe to serve."""
    return (rdir / SUMMARY).exists() and damage(rdir) is None


def read_summary(rdir: Path) -> dict:
    s = json.loads((rdir / SUMMARY).read_text())
    s.pop("checksums", None)
    return s


def read_epochs(rdir: Path) -> pd.DataFrame:
    return pd.read_csv(rdir / METRICS)


def load_checkpoint(rdir: Path | None):
    if rdir is None or not (rdir / CHECKPOINT).exists() or (rdir / SUMMARY).exists():
        return None
    return torch.load(rdir / CHECKPOINT, map_location="cpu", weights_only=True)


def checkpoint_epoch(rdir: Path, fmt: str) -> int | None:
    """The epoch of a run's checkpoint of format ``fmt`` (None: none, or another format). Read
    once per version of the file (the sweep asks again on every pass over its pending runs)."""
    try:
        st = (rdir / CHECKPOINT).stat()
    except FileNotFoundError:
        return None
    return _checkpoint_epoch(str(rdir), fmt, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _checkpoint_epoch(rdir: str, fmt: str, mtime_ns: int, size: int) -> int | None:
    ckpt = load_checkpoint(Path(rdir))
    if ckpt is None or ckpt.get("format") != fmt:
        return None
    return len(ckpt["rows"]) - 1


def leftovers(rdir: Path) -> list[Path]:
    """Files a kill can leave behind: temporaries, and the checkpoint of a done run."""
    out = sorted(rdir.glob(".*.tmp"))
    if (rdir / CHECKPOINT).exists() and is_done(rdir):
        keep = json.loads((rdir / CONFIG).read_text()).get("config", {}).get("keep_checkpoint")
        if not keep:
            out.append(rdir / CHECKPOINT)
    return out


def clear_for_retraining(rdir: Path) -> None:
    """Remove a damaged run's files (not its attempts log) so that it trains from scratch."""
    for f in (SUMMARY, METRICS, CONFIG, CHECKPOINT):
        (rdir / f).unlink(missing_ok=True)


# ---------------------------------------------------------------- locks
_HELD: dict[str, int] = {}  # run dir -> fd of the lock this process holds
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


class _signals_deferred:
    """Hold Ctrl-C and SIGTERM back while a lock file and ``_HELD`` change together, so that a
    stop never falls between creating (or unlinking) the file and recording it: a signal that
    arrives meanwhile is recorded and raised again, through the handler it would have met, when
    the block ends. (A Python-level handler, not ``pthread_sigmask``: the signal may be
    delivered to any of torch's threads, and Python runs handlers in the main thread whatever
    the mask.) Outside the main thread handlers cannot change and nothing is held back. SIGKILL
    is never held back; the lock file it leaves is taken over by the next worker."""

    def __enter__(self):
        self.caught, self.old = [], {}
        if threading.current_thread() is threading.main_thread():
            for s in _STOP_SIGNALS:
                self.old[s] = signal.signal(s, lambda signum, _: self.caught.append(signum))

    def __exit__(self, *exc):
        for s, handler in self.old.items():
            signal.signal(s, handler)
        for s in self.caught[:1]:
            signal.raise_signal(s)
        return False


def try_lock(rdir: Path) -> bool:
    """Claim the run: True if this process now holds its lock. A lock file whose owner died
    (however it was left: empty, garbage, a reused pid) is not held, so it is taken at once;
    the previous owner, if the file names one, is said on stderr."""
    rdir.mkdir(parents=True, exist_ok=True)
    if str(rdir) in _HELD:
        return False
    with _signals_deferred():
        if not _take_lock(rdir):
            return False
    for f in leftovers(rdir):  # we hold the lock: nobody else is writing here
        f.unlink(missing_ok=True)
    return True


def _take_lock(rdir: Path) -> bool:
    path = rdir / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        try:  # the file may have been unlinked by its releaser since we opened it
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    previous = os.read(fd, 4096).decode(errors="replace").strip()
    if previous:
        import sys
        print(f"{rdir.name}: taking over the lock of a worker that is gone ({previous[:120]})",
              file=sys.stderr, flush=True)
    fault_point("locked")  # a kill between taking the lock and writing who holds it
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                              "since": time.time()}).encode(), 0)
    _HELD[str(rdir)] = fd
    return True


def release_lock(rdir: Path) -> None:
    with _signals_deferred():
        fd = _HELD.pop(str(rdir), None)
        if fd is None:
            return
        try:
            (rdir / LOCK).unlink(missing_ok=True)  # unlink while still holding, then unlock
        finally:
            os.close(fd)


def release_all_locks() -> None:
    """Release every lock this process holds: the last step of a worker that is stopping, so
    that a stop arriving between two statements of a claim leaves no lock file behind."""
    for rdir in list(_HELD):
        release_lock(Path(rdir))


def lock_is_held(rdir: Path) -> bool:
    """True if some live process (this one included) holds the run's lock."""
    if str(rdir) in _HELD:
        return True
    try:
        fd = os.open(rdir / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def run_state(rdir: Path) -> str:
    """done | damaged | running (a live worker holds it) | partial (a checkpoint, nobody on
    it) | missing."""
    if (rdir / SUMMARY).exists():
        return "damaged" if damage(rdir) else "done"
    if lock_is_held(rdir):
        return "running"
    if (rdir / CHECKPOINT).exists():
        return "partial"
    return "missing"


# ---------------------------------------------------------------- loading many runs
def identity_columns(cfg) -> dict:
    """A run's identity as table columns: every key, those the identity leaves out at their
    legacy value (``LEGACY_IDENTITY_VALUES``) filled in, so that runs which differ in them are
    never grouped together."""
    return {**LEGACY_IDENTITY_VALUES, **identity(cfg)}


def find_done(stores, cfg) -> Path | None:
    """The folder of ``cfg``'s run in the first of ``stores`` (one store, or several searched in
    order) where it is done and intact; None where it is done in none of them. A run's folder is
    named by its identity, so whichever store holds it, it is the same run."""
    stores = (stores,) if isinstance(stores, (str, Path)) else tuple(stores)
    return next((rdir for rdir in (run_dir(s, cfg) for s in stores) if is_done(rdir)), None)


def load_summaries(store_dir, configs) -> pd.DataFrame:
    """One row per config that is done and intact: its identity keys, hash and summary.
    ``store_dir``: one store, or several searched in order (:func:`find_done`)."""
    rows = []
    for cfg in configs:
        rdir = find_done(store_dir, cfg)
        if rdir is not None:
            rows.append({**identity_columns(cfg), "hash": rdir.name, **read_summary(rdir)})
    return pd.DataFrame(rows)


def load_epochs(store_dir, configs) -> pd.DataFrame:
    """The per-epoch metrics of every done and intact config, with its identity keys and hash.
    ``store_dir``: one store, or several searched in order (:func:`find_done`)."""
    frames = []
    for cfg in configs:
        rdir = find_done(store_dir, cfg)
        if rdir is not None:
            e = read_epochs(rdir)
            for k, v in identity_columns(cfg).items():
                e[k] = [v] * len(e) if isinstance(v, list) else v
            e["hash"] = rdir.name
            frames.append(e)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def export_runs(store_dir, configs, out_dir, warn=print) -> int:
    """Copy config, metrics and summary (no checkpoints) of every done and intact config to
    out_dir; a damaged run is named and skipped."""
    n = 0
    for cfg in configs:
        src = run_dir(store_dir, cfg)
        problem = damage(src)
        if problem:
            warn(f"not exported, damaged: {problem}")
        elif (src / SUMMARY).exists():  # intact (damage() said so) and finished
            _copy_run(src, Path(out_dir) / src.name)
            n += 1
    return n


def prune_results(out_dir, configs) -> list[str]:
    """Remove from a results folder every run that none of ``configs`` names (a run whose
    config changed, e.g. a rerun with another ``bn_stats``): the folder then holds exactly the
    runs its params files describe. Returns the names removed."""
    keep = {run_dir(out_dir, c).name for c in configs}
    removed = []
    for d in sorted(Path(out_dir).iterdir()) if Path(out_dir).is_dir() else []:
        if d.is_dir() and d.name not in keep and (d / CONFIG).exists():
            shutil.rmtree(d)
            removed.append(d.name)
    return removed


def _copy_run(src: Path, dst: Path) -> None:
    """Copy a run's shipped files; the summary last, since it marks the run done."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in (CONFIG, METRICS, SUMMARY):
        shutil.copy2(src / f, dst / f)


def import_runs(src_dir, store_dir, warn=print) -> int:
    """Copy exported runs into the store (intact finished runs only; existing ones are kept)."""
    n = 0
    for src in sorted(Path(src_dir).iterdir()):
        if not src.is_dir():
            continue
        problem = damage(src) if (src / SUMMARY).exists() else f"{src}: no {SUMMARY}"
        if problem:
            warn(f"not imported, damaged: {problem}")
            continue
        dst = Path(store_dir) / src.name
        if not is_done(dst):
            _copy_run(src, dst)
            n += 1
    return n
