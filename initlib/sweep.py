"""Sweeps: train every run that the store does not hold yet, each exactly once.

The configs arrive validated and bound to their data (:mod:`initlib.params`). A worker claims
a run with its lock (:mod:`initlib.store`), trains or resumes it, and goes on; runs claimed by
live workers are waited for; a damaged finished run is named and retrained: that loop is
:mod:`initlib.worker`. Where the workers run (this process, K local processes, Slurm) is
:mod:`initlib.executors`' business. Layering: sweep -> executors -> worker -> train.
"""
from __future__ import annotations

import os

from . import executors, store
from .config import run_hash
from .data import CIFAR10_FINGERPRINT, data_available, fingerprint, load_raw, split_capacity
from .params import Sweep, bind_data


def bind_to_data(sweeps: list[Sweep], data_dir=None) -> str:
    """Fingerprint the data in ``data_dir`` (validating its files) and bind every config of
    ``sweeps`` to it. Without data at hand, the configs keep the full CIFAR-10's fingerprint:
    stored runs can still be analysed, and training will say where to get the data."""
    if not data_available(data_dir):
        bind_data(sweeps, CIFAR10_FINGERPRINT)
        return CIFAR10_FINGERPRINT
    fp = fingerprint(data_dir)
    y_train = load_raw(data_dir)[1]
    bind_data(sweeps, fp, lambda seed: split_capacity(y_train, seed))
    return fp


def clear_leftovers_of_done_runs(configs, store_dir) -> int:
    """Remove what a kill left in runs that are done (a checkpoint, temporaries, a lock file
    nobody holds: a kill right after summary.json was written), since workers are handed only
    unfinished runs. A run a live worker holds is left alone. Returns how many were cleaned."""
    n = 0
    for c in configs:
        rdir = store.run_dir(store_dir, c)
        # the cheap checks first: is_done hashes the run's files, and most runs have nothing left
        if ((rdir / store.LOCK).exists() or store.leftovers(rdir)) and store.is_done(rdir):
            if store.try_lock(rdir):  # removes the leftovers; releasing removes the lock file
                store.release_lock(rdir)
                n += 1
    return n


def run_sweep(configs, store_dir=None, data_dir=None, *, workers: int = 1,
              runs_per_gpu: int | None = None, executor: str = "local", slurm: dict | None = None,
              runs_per_task: int = 1, desc: str = "runs", progress: bool = True,
              train: bool = True, fuse: int = 1) -> pd.DataFrame:
    """Train what is missing and return the summaries of all ``configs`` as a DataFrame.

    ``configs`` are validated and bound to their data (``params.load_params`` and
    :func:`bind_to_data`). With ``train=False`` (or ``INITLIB_NO_TRAIN`` set) a missing run is
    an error instead. ``fuse`` > 1 trains fusable runs in groups of up to that many
    (initlib.train.train_group). Nothing is written before the store is known to be writable."""
    from .data import check_data_available
    store_dir = store.resolve_store(store_dir)
    clear_leftovers_of_done_runs(configs, store_dir)
    missing = [c for c in configs if not store.is_done(store.run_dir(store_dir, c))]
    if missing and (not train or os.environ.get("INITLIB_NO_TRAIN")):
        problem = store.damage(store.run_dir(store_dir, missing[0]))
        raise RuntimeError(
            f"{len(missing)} of {len(configs)} runs are not in the store {store_dir} and training "
            f"is off (train=False, or INITLIB_NO_TRAIN as `make figures` sets): import shipped results first "
            f"(python -m initlib import results/<profile> --store {store_dir}) or train them "
            f"(make <profile>). First missing: {run_hash(missing[0])}"
            + (f" (damaged: {problem})" if problem else ""))
    if missing:
        check_data_available(data_dir)  # a clear error before anything starts
        store.check_writable(store_dir)
        executors.run(missing, store_dir, data_dir, executor=executor, workers=workers,
                      runs_per_gpu=runs_per_gpu, slurm=slurm or {}, runs_per_task=runs_per_task,
                      desc=desc, progress=progress, fuse=fuse)
    still = [run_hash(c) for c in configs if not store.is_done(store.run_dir(store_dir, c))]
    if still:
        raise RuntimeError(f"{len(still)} runs did not finish (see error.txt in their run dirs "
                           f"under {store_dir}): {', '.join(still[:8])}")
    return store.load_summaries(store_dir, configs)
