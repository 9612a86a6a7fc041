"""Command line: ``python -m initlib {sweep,status,plan,export,import,worker} ...``."""
from __future__ import annotations

import argparse
import json
import os
import sys

from . import store
from .config import ConfigError
from .data import DataError, DataNotFoundError

# Runs fused per group on CUDA unless --fuse says otherwise. NOT chosen by measurement yet: no
# GPU has run this project's benchmark (bench/gpu_check.sh prints the throughput per G to
# choose it from). 16 is a guess that fits width-1 ResNet-9 groups in a 24 GB GPU at b = 128.
FUSE_DEFAULT_CUDA = 16


def fuse_setting(value: str, device: str | None) -> int:
    """--fuse: an integer >= 1, or 'auto' (FUSE_DEFAULT_CUDA where runs go to CUDA, else 1).
    CPU keeps the plain path, as issue 13 asks (fusion reported slower there; not re-measured in
    this project: ``python bench/throughput.py --fused 4,8`` measures it side by side)."""
    if value != "auto":
        try:
            g = int(value)
        except ValueError:
            raise ConfigError(f"--fuse: an integer >= 1 or auto, got {value!r}") from None
        if g < 1:
            raise ConfigError(f"--fuse: an integer >= 1 or auto, got {value!r}")
        return g
    import torch
    cuda = (device or "auto").startswith("cuda") or ((device or "auto") == "auto" and torch.cuda.is_available())
    return FUSE_DEFAULT_CUDA if cuda else 1


def _common(p):
    p.add_argument("params", nargs="*", help="params/<name>.yaml files")
    p.add_argument("--profile", default="smoke",
                   help="smoke | cpu | paper, or <profile>-replica<N>: its grid on another data split "
                        "and other seeds (initlib.params.parse_profile) (default: smoke)")
    p.add_argument("--store", default=None, help="run store (default: $INITLIB_STORE or runs/)")
    p.add_argument("--data-dir", default=None,
                   help="folder with cifar10.npz or cifar-10-batches-py (default: $INITLIB_DATA_DIR or data/)")


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m initlib", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("sweep", help="train every missing run of the params files")
    _common(p)
    p.add_argument("--download", action="store_true", help="let torchvision download CIFAR-10")
    p.add_argument("--device", default=None, help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--compile", action="store_true", default=None, help="torch.compile the model")
    p.add_argument("--workers", type=int, default=1, help="concurrent worker processes (CPU)")
    p.add_argument("--runs-per-gpu", type=int, default=None, help="concurrent runs on each visible GPU")
    p.add_argument("--fuse", default="auto",
                   help="train up to G fusable runs as one fused model (initlib.train.train_group): "
                        "an integer, or auto = %d on CUDA, 1 (off) on CPU" % FUSE_DEFAULT_CUDA)
    p.add_argument("--executor", default="local", choices=["local", "slurm", "submitit-local", "debug"])
    p.add_argument("--runs-per-task", type=int, default=1, help="runs per Slurm array task")
    p.add_argument("--partition", default=None)
    p.add_argument("--time-min", type=int, default=600, help="Slurm time limit per task, minutes")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per Slurm task")
    p.add_argument("--cpus", type=int, default=8, help="CPUs per Slurm task")
    p.add_argument("--array-parallelism", type=int, default=64)

    p = sub.add_parser("status", help="what is done, damaged, running, partial and missing")
    _common(p)

    p = sub.add_parser("plan", help="runs, epochs, FLOPs and GPU-hours before you spend them")
    _common(p)
    p.add_argument("--gpu", default="h200", help="h200 | h100 | a100: assumed throughput")
    p.add_argument("--images-per-s", type=float, default=None, help="measured training images/s")
    p.add_argument("--measure", action="store_true", help="time real steps on this machine")
    p.add_argument("--fuse", default="auto", help="price the grid at the measured rate of fused "
                   "groups of G runs (as sweep --fuse; auto = %d on CUDA, 1 on CPU)" % FUSE_DEFAULT_CUDA)
    p.add_argument("--device", default="auto")
    p.add_argument("--gpus", type=int, default=1, help="GPUs available, for the wall-clock column")

    p = sub.add_parser("export", help="copy finished runs (no checkpoints) to a results folder")
    _common(p)
    p.add_argument("--out", required=True)
    p.add_argument("--prune", action="store_true",
                   help="also remove runs in --out that none of these params files names")

    p = sub.add_parser("import", help="copy exported runs into the store")
    p.add_argument("src")
    p.add_argument("--store", default=None)

    p = sub.add_parser("verdicts", help="the verdicts of figures folders side by side (a profile and "
                                        "its replicas: make replica)")
    p.add_argument("folders", nargs="+", help="figures/<profile> folders (their *.verdict.json)")

    p = sub.add_parser("worker", help=argparse.SUPPRESS)  # reads its configs (JSON) on stdin
    p.add_argument("--store", required=True)
    p.add_argument("--fuse", type=int, default=1)
    p.add_argument("--data-dir", default=None)
    return ap


def _sweeps(args, overrides=None, bind=True):
    """Read and validate every params file, then bind them to the data: all before anything
    is written."""
    from .params import load_params
    from .sweep import bind_to_data
    if not args.params:
        raise ConfigError("name at least one params file, e.g. params/example.yaml")
    sweeps = [load_params(p, args.profile, overrides) for p in args.params]
    if bind:
        bind_to_data(sweeps, args.data_dir)
    return sweeps


def check_execution_flags(args) -> None:
    """--workers, --runs-per-gpu and --device, checked before anything is read or written: a
    count below 1, or a CUDA device this machine does not have, is one line naming the flag."""
    from .train import pick_device
    if args.workers < 1:
        raise ConfigError(f"--workers: an integer >= 1, got {args.workers}")
    if args.runs_per_gpu is not None and args.runs_per_gpu < 1:
        raise ConfigError(f"--runs-per-gpu: an integer >= 1, got {args.runs_per_gpu}")
    if args.device is not None:
        from .config import validate
        validate({"device": args.device}, "--device")
        pick_device(args.device)


def cmd_sweep(args):
    from .plan import order_longest_first
    from .sweep import run_sweep
    from .worker import count_done
    check_execution_flags(args)
    if args.download:
        os.environ["INITLIB_DOWNLOAD"] = "1"
    overrides = {k: v for k, v in (("device", args.device), ("compile", args.compile)) if v is not None}
    sweeps = _sweeps(args, overrides)
    from .train import pick_device
    for device in sorted({c["device"] for sw in sweeps for c in sw.all_configs()}):
        pick_device(device)  # a params file's cuda on a machine without one: named now, not per run
    slurm = {"partition": args.partition, "time_min": args.time_min, "gpus": args.gpus,
             "cpus": args.cpus, "array_parallelism": args.array_parallelism}
    # One sweep over the runs of all files: deduplicated (a run shared by two findings trains
    # once) and longest first, so that parallel workers finish together.
    configs = order_longest_first([c for sw in sweeps for c in sw.all_configs()])
    desc = sweeps[0].path.stem if len(sweeps) == 1 else f"{len(sweeps)} params files"
    try:
        run_sweep(configs, args.store, args.data_dir, workers=args.workers,
                  runs_per_gpu=args.runs_per_gpu, executor=args.executor, slurm=slurm,
                  runs_per_task=args.runs_per_task, desc=desc, fuse=fuse_setting(args.fuse, args.device))
    except KeyboardInterrupt:
        done = count_done(configs, args.store)
        print(f"\nstopped: {done}/{len(configs)} runs done in {args.store}; "
              f"the same command resumes (at most the epoch in progress was lost)", file=sys.stderr)
        return 130
    for sw in sweeps:
        cs = sw.all_configs()
        print(f"{sw.path}: {count_done(cs, args.store)}/{len(cs)} runs done in {args.store}")


def cmd_status(args):
    from collections import Counter
    for sw in _sweeps(args):
        states, damaged = Counter(), []
        for c in sw.all_configs():
            rdir = store.run_dir(args.store, c)
            state = store.run_state(rdir)
            states[state] += 1
            if state == "damaged":
                damaged.append(store.damage(rdir))
        total = sum(states.values())
        parts = ", ".join(f"{states[s]} {s}" for s in ("done", "damaged", "running", "partial", "missing")
                          if states[s])
        print(f"{sw.path} [{args.profile}]: {total} runs: {parts or 'none'}")
        for d in damaged:
            print(f"  damaged: {d} (sweep trains it again)")


def cmd_plan(args):
    from .plan import format_plan, measure_images_per_s, plan
    sweeps = _sweeps(args, bind=False)
    measured = None
    if args.measure:
        measured = {}
        for sw in sweeps:
            for c in sw.configs:
                key = (c["arch"], c["width"])
                if key not in measured:
                    g = fuse_setting(args.fuse, args.device)
                    measured[key] = measure_images_per_s(c["arch"], c["width"], c["batch_size"], args.device,
                                                         fuse=g)
                    print(f"measured {key[0]} width {key[1]}" + (f", fused groups of {g}" if g > 1 else "")
                          + f": {measured[key]:,.0f} train img/s", file=sys.stderr)
    df = plan(sweeps, gpu=args.gpu, images_per_s=args.images_per_s, gpus=args.gpus, measured=measured)
    how = ("measured on this machine" if measured else f"{args.images_per_s:,.0f} img/s as given"
           if args.images_per_s else f"assumed {args.gpu.upper()} throughput (not measured)")
    print(f"plan for profile '{args.profile}' ({how}):")
    print(format_plan(df))


def cmd_export(args):
    from .params import unique_by_hash
    unique = unique_by_hash(c for sw in _sweeps(args) for c in sw.all_configs())
    n = store.export_runs(args.store, unique, args.out, warn=lambda m: print(m, file=sys.stderr))
    print(f"exported {n} of {len(unique)} runs to {args.out}")
    if args.prune:
        removed = store.prune_results(args.out, unique)
        print(f"removed {len(removed)} runs no params file names" + (f": {', '.join(removed)}" if removed else ""))


def cmd_import(args):
    n = store.import_runs(args.src, args.store, warn=lambda m: print(m, file=sys.stderr))
    print(f"imported {n} runs into {args.store}")


def cmd_verdicts(args):
    from .notebook import verdicts_side_by_side
    try:
        print(verdicts_side_by_side(args.folders))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def cmd_worker(args):
    import torch
    from pathlib import Path
    from .worker import work_through
    if os.environ.get("INITLIB_THREADS"):
        torch.set_num_threads(int(os.environ["INITLIB_THREADS"]))
    configs = json.loads(sys.stdin.read())
    try:
        failed = work_through(configs, Path(args.store), args.data_dir, fuse=args.fuse)
    except KeyboardInterrupt:
        return 130  # the sweep that started us says what happened, once
    return 1 if failed else 0


def main(argv=None) -> int:
    from .executors import stop_on_sigterm
    args = build_parser().parse_args(argv)
    if "store" in args:
        args.store = store.resolve_store(args.store)  # once: $INITLIB_STORE or runs/ when not given
    stop_on_sigterm(once=args.cmd == "worker")
    try:
        return globals()[f"cmd_{args.cmd}"](args) or 0
    except (ConfigError, DataNotFoundError, DataError, store.StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nstopped", file=sys.stderr)
        return 130
