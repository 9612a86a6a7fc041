"""The worker loop: claim a run (or a group of fusable runs) by its lock, train or resume it,
go on; wait on runs that live workers hold; name and retrain a damaged finished run. Every
executor (this process, K local processes, Slurm array tasks) runs this loop; workers share
nothing but the store (initlib.store), whose locks make any mix of them train each run once.
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from tqdm import tqdm

from . import store
from .config import run_hash


# ---------------------------------------------------------------- one run
def _claim(rdir: Path, log) -> str:
    """'cached' (done and clean), 'busy' (locked by a live worker) or 'claimed' (locked by
    us, a damaged run cleared for retraining); try_lock removes what a kill left behind."""
    if store.is_done(rdir) and not store.leftovers(rdir):
        return "cached"
    if not store.try_lock(rdir):
        return "busy"
    if store.is_done(rdir):
        store.release_lock(rdir)
        return "cached"
    try:
        problem = store.damage(rdir)
        if problem:
            log(f"{rdir.name}: damaged ({problem}): training it again")
            store.clear_for_retraining(rdir)
    except BaseException:
        store.release_lock(rdir)
        raise
    return "claimed"


def run_one(cfg: dict, store_dir: Path, data_dir=None, log=print, on_epoch=None) -> str:
    """Train ``cfg`` unless it is done or claimed: 'cached', 'trained' or 'busy'. A damaged
    finished run is named and trained again from scratch. ``on_epoch``: as initlib.train.train's."""
    rdir = store.run_dir(store_dir, cfg)
    state = _claim(rdir, log)
    if state != "claimed":
        return state
    try:
        from .train import train
        try:
            train(cfg, data_dir=data_dir, run_dir=rdir, on_epoch=on_epoch)
        except Exception:
            (rdir / store.ERROR).write_text(traceback.format_exc())
            raise
        return "trained"
    finally:
        store.release_lock(rdir)


def one_line(cfg: dict, summary: dict) -> str:
    """A one-line summary of a finished run, for logs and progress bars."""
    keys = ("arch", "width", "optimizer", "lr", "l2", "batch_size", "sigma_w", "seed")
    desc = " ".join(f"{k}={cfg[k]}" for k in keys)
    acc = summary.get("test_acc_at_best_val")
    tau = summary.get("tau_interp")
    norm = lambda k: "nan" if summary.get(k) is None else f"{summary[k]:.1f}"  # noqa: E731
    return (f"{run_hash(cfg)} {desc} | {summary['status']} ep={summary['epochs_trained']} "
            f"test@bestval={'n/a' if acc is None else f'{100 * acc:.1f}%'} "
            f"tau_interp={tau if tau is not None else 'none'} "
            f"|W| {norm('initial_weight_norm')}->{norm('final_weight_norm')}")


def _print_now(msg: str) -> None:
    print(msg, flush=True)  # a worker's stdout is a pipe or a log file: do not hold lines back


def run_group(cfgs: list[dict], store_dir: Path, data_dir=None, log=print, on_epoch=None) -> dict[str, str]:
    """Train the runs of ``cfgs`` (fusable: initlib.fused.group_key) that are neither done nor
    claimed, as one fused model: per hash 'cached', 'trained' or 'busy'. ``on_epoch``: as
    initlib.train.train_group's."""
    from .train import train_group
    out, locked = {}, []
    try:
        for cfg in cfgs:
            state = _claim(store.run_dir(store_dir, cfg), log)
            if state == "claimed":
                locked.append(cfg)
            else:
                out[run_hash(cfg)] = state
        if locked:
            dirs = [store.run_dir(store_dir, c) for c in locked]
            try:
                train_group(locked, data_dir=data_dir, run_dirs=dirs, on_epoch=on_epoch)
            except Exception:
                for d in dirs:
                    (d / store.ERROR).write_text(traceback.format_exc())
                raise
            out.update({run_hash(c): "trained" for c in locked})
        return out
    finally:
        for c in locked:
            store.release_lock(store.run_dir(store_dir, c))


def work_through(configs, store_dir: Path, data_dir=None, poll_s: float = 2.0, log=_print_now,
                 fuse: int = 1, on_epoch=None) -> list[str]:
    """Train every config not yet done, waiting on runs claimed by live workers, until all are
    done. With ``fuse`` > 1, runs that can be fused train in groups of up to ``fuse``
    (initlib.train.train_group; grouped by what they share and by their checkpoint's epoch). Returns
    the hashes of runs that raised (their traceback is in error.txt). ``on_epoch`` is called
    after each epoch of each run this process trains (as initlib.train.train_group's)."""
    try:
        return _work_through(configs, store_dir, data_dir, poll_s, log, fuse, on_epoch)
    finally:  # a stop between two statements of a claim must not leave a lock behind
        store.release_all_locks()


def _work_through(configs, store_dir, data_dir, poll_s, log, fuse, on_epoch) -> list[str]:
    from .fused import plan_groups
    from .train import checkpoint_epoch
    pending, failed = list(configs), []
    while pending:
        progressed, busy = False, []
        if fuse > 1:
            units = plan_groups(pending, fuse, lambda c: checkpoint_epoch(store.run_dir(store_dir, c)))
        else:
            units = [[c] for c in pending]
        for unit in units:
            try:
                if len(unit) == 1:
                    results = {run_hash(unit[0]): run_one(unit[0], store_dir, data_dir, log, on_epoch)}
                else:
                    results = run_group(unit, store_dir, data_dir, log, on_epoch)
            except Exception:  # noqa: BLE001 - log, record, go on with the rest
                hashes = [run_hash(c) for c in unit]
                log(f"{', '.join(hashes)} FAILED:\n{traceback.format_exc()}")
                failed.extend(hashes)
                continue
            for cfg in unit:
                r = results[run_hash(cfg)]
                if r == "busy":
                    busy.append(cfg)
                else:
                    progressed = True
                    if r == "trained":
                        log(one_line(cfg, store.read_summary(store.run_dir(store_dir, cfg))))
        pending = busy
        if pending and not progressed:
            time.sleep(poll_s)
    return failed


def count_done(configs, store_dir) -> int:
    """How many of ``configs`` are finished, intact runs in the store."""
    return sum(store.is_done(store.run_dir(store_dir, c)) for c in configs)


def epochs_recorded(rdir: Path) -> int:
    """The epochs a run's metrics record after its epoch 0 (each epoch rewrites the file
    whole, so a reader sees the rows of some finished epoch): 0 before the first ends."""
    try:
        with open(rdir / store.METRICS, "rb") as f:
            return max(0, sum(1 for _ in f) - 2)  # a header and epoch 0
    except FileNotFoundError:
        return 0


def sweep_progress(configs, store_dir) -> tuple[int, int]:
    """(runs done, epochs trained) of ``configs`` in the store; a done run counts all its
    epochs (a diverged one stopped early but has nothing left to train)."""
    done = epochs = 0
    for c in configs:
        rdir = store.run_dir(store_dir, c)
        if store.is_done(rdir):
            done, epochs = done + 1, epochs + c["epochs"]
        else:
            epochs += min(c["epochs"], epochs_recorded(rdir))
    return done, epochs


def progress_bar(total, desc, unit, initial=0):
    """A tqdm bar on stderr counting ``total`` of ``unit`` (epochs of a sweep, tasks of an executor)."""
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, file=sys.stderr)


def epoch_bar(configs, store_dir, desc):
    """A bar over the epochs of ``configs`` (a run of a cpu sweep takes tens of minutes: a
    bar over runs would stand still that long), the runs done beside it. What a resumed
    sweep trained before is its start, so the rate and the time left are this process's."""
    done, epochs = sweep_progress(configs, store_dir)
    bar = progress_bar(sum(c["epochs"] for c in configs), desc, unit="epoch", initial=epochs)
    show_progress(bar, configs, store_dir, (done, epochs))
    return bar


def show_progress(bar, configs, store_dir, progress: tuple[int, int] | None = None) -> None:
    """Move ``bar`` (from :func:`epoch_bar`) to what the store holds now (``progress``: the
    (runs done, epochs) :func:`sweep_progress` returned for it, where the caller has them)."""
    done, epochs = progress or sweep_progress(configs, store_dir)
    bar.n = epochs
    bar.set_postfix_str(f"{done}/{len(configs)} runs", refresh=False)
    bar.refresh()


