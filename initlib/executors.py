"""Where runs train: this process, K worker processes on this machine (CPU cores, or K per
visible GPU pinned with ``CUDA_VISIBLE_DEVICES``), or a Slurm job array through submitit.
Workers share nothing but the store; its locks make any mix of them train each run once.

Stopping: Ctrl-C (SIGINT, sent by the terminal to the whole process group) or SIGTERM (Slurm,
``kill``, a laptop shutting down) stops this process and every worker it started; each
releases its run's lock and exits, losing at most the epoch in progress, and the sweep prints
one line. The next sweep resumes from the checkpoints.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .config import ConfigError
from .worker import epoch_bar, progress_bar, show_progress, work_through


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised as an exception so that every ``finally`` (locks, bars) runs."""


def stop_on_sigterm(*, once: bool = False) -> None:
    """Turn SIGTERM into :class:`Stopped` in this process (main thread only). With ``once`` (a
    worker: Ctrl-C reaches it from the terminal and SIGTERM from its sweep, one after the other),
    the first stop signal ignores every later one, so that no second exception cuts through the
    ``finally`` blocks that release locks and remove temporary files."""
    def handler(signum, frame):
        if once:  # a no-op handler, not SIG_IGN: a signal already pending then stays quiet
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, lambda *_: None)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Stopped(f"signal {signum}")
    signal.signal(signal.SIGTERM, handler)
    if once:
        signal.signal(signal.SIGINT, handler)


@contextmanager
def stop_workers_on_sigterm():
    """While this process waits on workers, SIGTERM raises :class:`Stopped` here too, so that
    the workers are stopped with it, whoever called: the CLI turns SIGTERM into ``Stopped`` for
    good (``stop_on_sigterm``), a script or notebook that calls ``run_sweep`` gets it from here
    (left as it was where a handler is already set, or off the main thread)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    stop_on_sigterm()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run(missing, store_dir: Path, data_dir=None, *, executor: str = "local", workers: int = 1,
        runs_per_gpu: int | None = None, slurm: dict | None = None, runs_per_task: int = 1,
        desc: str = "runs", progress: bool = True, fuse: int = 1) -> None:
    if executor == "local":
        run_local(missing, store_dir, data_dir, workers, runs_per_gpu, desc, progress, fuse)
    elif executor in ("slurm", "submitit-local", "debug"):
        run_submitit(missing, store_dir, data_dir, executor, slurm or {}, runs_per_task,
                     runs_per_gpu or 1, desc, progress, fuse)
    else:
        raise ConfigError(f"unknown executor {executor!r} (local, slurm, submitit-local, debug)")


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    try:
        import torch
        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001
        return []


def run_local(missing, store_dir, data_dir, workers, runs_per_gpu, desc, progress, fuse=1):
    gpus = visible_gpus() if runs_per_gpu else []
    if runs_per_gpu and not gpus:
        print(f"no GPU visible: --runs-per-gpu ignored, {max(1, workers)} CPU worker(s)", file=sys.stderr)
    slots = [g for g in gpus for _ in range(runs_per_gpu)] if gpus else [None] * max(1, workers)
    bar = epoch_bar(missing, store_dir, desc) if progress else None
    try:
        if len(slots) > 1:
            run_workers(missing, store_dir, data_dir, slots, bar=bar, fuse=fuse)
            return

        def log_and_tick(msg):
            if bar is None:
                return print(msg, flush=True)
            bar.write(msg)
            show_progress(bar, missing, store_dir)
        work_through(missing, store_dir, data_dir, log=log_and_tick, fuse=fuse,
                     on_epoch=None if bar is None else lambda *_: show_progress(bar, missing, store_dir))
    finally:
        if bar is not None:
            bar.close()


def run_workers(configs, store_dir, data_dir, slots, bar=None, poll_s: float = 1.0,
                threads: int | None = None, fuse: int = 1) -> list[int]:
    """Start one ``python -m initlib worker`` process per slot (a GPU id, or None for CPU),
    each working through the same list (sent on its stdin: no file to leave behind); wait for
    all and return their exit codes. Interrupted, it stops them all before re-raising.

    Each worker uses ``threads`` CPU threads (default: cores // workers). On a CPU the
    numbers are bitwise reproducible for a given thread count; another thread count changes
    the reduction order inside oneDNN's convolutions, and training amplifies those last bits.
    """
    threads = threads or max(1, (os.cpu_count() or 1) // len(slots))
    queue = json.dumps(configs).encode()
    procs = []
    with stop_workers_on_sigterm():  # a script calling run_sweep stops its workers on SIGTERM too
        try:
            for gpu in slots:
                env = {**os.environ, "OMP_NUM_THREADS": str(threads), "INITLIB_THREADS": str(threads)}
                if gpu is not None:
                    env["CUDA_VISIBLE_DEVICES"] = gpu
                cmd = [sys.executable, "-m", "initlib", "worker", "--store", str(store_dir), "--fuse", str(fuse)]
                if data_dir is not None:
                    cmd += ["--data-dir", str(data_dir)]
                p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE)
                procs.append(p)
                p.stdin.write(queue)
                p.stdin.close()
            while any(p.poll() is None for p in procs):
                time.sleep(poll_s)
                if bar is not None:
                    show_progress(bar, configs, store_dir)
        except BaseException:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            raise
        if bar is not None:
            show_progress(bar, configs, store_dir)
        return [p.returncode for p in procs]


def submitit_task(configs, store_dir, data_dir, runs_per_gpu: int = 1, fuse: int = 1) -> list[str]:
    """One array task: train its share of runs (with K local workers if asked)."""
    if runs_per_gpu > 1:
        run_workers(configs, store_dir, data_dir, [None] * runs_per_gpu, fuse=fuse)
        return []
    return work_through(configs, Path(store_dir), data_dir, fuse=fuse)


def run_submitit(missing, store_dir, data_dir, executor_kind, slurm, runs_per_task,
                 runs_per_gpu, desc, progress, fuse=1):
    import submitit
    folder = Path(store_dir) / "_submitit" / "%j"
    if executor_kind == "slurm":
        ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
        params = {"slurm_partition": slurm.get("partition"), "timeout_min": slurm.get("time_min", 600),
                  "gpus_per_node": slurm.get("gpus", 1), "cpus_per_task": slurm.get("cpus", 8),
                  "slurm_array_parallelism": slurm.get("array_parallelism", 64)}
        ex.update_parameters(**{k: v for k, v in params.items() if v is not None})
    elif executor_kind == "submitit-local":
        ex = submitit.LocalExecutor(folder=folder)
        ex.update_parameters(timeout_min=slurm.get("time_min", 600))
    else:
        ex = submitit.DebugExecutor(folder=folder)
    chunks = [missing[i:i + runs_per_task] for i in range(0, len(missing), runs_per_task)]
    jobs = ex.map_array(submitit_task, chunks, [str(store_dir)] * len(chunks),
                        [None if data_dir is None else str(data_dir)] * len(chunks),
                        [runs_per_gpu] * len(chunks), [fuse] * len(chunks))
    print(f"submitted {len(jobs)} {executor_kind} tasks for {len(missing)} runs; "
          f"logs in {folder.parent}", file=sys.stderr)
    bar = progress_bar(len(jobs), desc, unit="task") if progress else None
    try:
        for job in jobs:
            try:
                job.result()
            except Exception as e:  # noqa: BLE001 - reported as unfinished runs below
                print(f"task {job.job_id} failed: {e}", file=sys.stderr)
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        for job in jobs:
            job.cancel(check=False)
        raise
    finally:
        if bar is not None:
            bar.close()
