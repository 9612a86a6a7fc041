"""Sweeps: a params file expands to run configs; what is missing from the store is trained.

A params file (``params/<name>.yaml``)::

    name: optimizer_dependence        # free text keys: name, notebook, claim, description
    base: {arch: resnet9, ...}        # run keys shared by all profiles
    sources: [other.yaml, ...]        # optional: sweeps whose runs this one analyses
    profiles:
      smoke:
        base: {width: 0.125, ...}     # run keys for this profile (override the top base)
        grid: {sigma_w: [...], seed: [0, 1]}        # cartesian product
        variants: [{optimizer: sgd, lr: 0.02}, ...] # alternatives, crossed with the grid
        analysis: {...}               # read by the notebook, never by the trainer

Every expanded config is validated before anything trains; errors name the file, the
profile and the key.

Executors: ``local`` trains in this process (``workers=1``) or in K worker processes that
share nothing but the store (``workers=K``, or ``runs_per_gpu=K`` per visible GPU, each
pinned with ``CUDA_VISIBLE_DEVICES``); ``slurm``, ``submitit-local`` and ``debug`` submit
the missing runs through submitit as a job array. Workers claim runs with lock files (see
:mod:`initlib.store`), so any mix of them over one store trains each run exactly once.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml
from tqdm import tqdm

from . import store
from .config import ConfigError, EXECUTION_KEYS, resolve, run_hash, validate_keys
from .data import check_data_available

TOP_KEYS = {"name", "notebook", "claim", "description", "base", "profiles", "sources"}
PROFILE_KEYS = {"base", "grid", "variants", "analysis", "description"}
PROFILES = ("smoke", "cpu", "paper")


@dataclass
class Sweep:
    path: Path
    profile: str
    configs: list[dict]
    analysis: dict = field(default_factory=dict)
    sources: list["Sweep"] = field(default_factory=list)

    def all_configs(self) -> list[dict]:
        """This sweep's configs and those of its sources, without duplicates."""
        seen, out = set(), []
        for c in self.configs + [c for s in self.sources for c in s.all_configs()]:
            h = run_hash(c)
            if h not in seen:
                seen.add(h)
                out.append(c)
        return out


def load_params(path, profile: str, overrides: dict | None = None) -> Sweep:
    """Read, expand and validate a params file. Raises ConfigError before any training."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such params file")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    src = str(path)
    if not isinstance(spec, dict):
        raise ConfigError(f"{src}: top level must be a mapping")
    for k in spec:
        if k not in TOP_KEYS:
            raise ConfigError(f"{src}: unknown top-level key '{k}' (known: {sorted(TOP_KEYS)})")
    profiles = spec.get("profiles") or {}
    if profile not in profiles:
        raise ConfigError(f"{src}: no profile '{profile}' (has: {', '.join(profiles) or 'none'})")
    prof = profiles[profile] or {}
    where = f"{src}: profile '{profile}'"
    for k in prof:
        if k not in PROFILE_KEYS:
            raise ConfigError(f"{where}: unknown key '{k}' (known: {sorted(PROFILE_KEYS)})")
    base = {**(spec.get("base") or {}), **(prof.get("base") or {}), **(overrides or {})}
    validate_keys(base, where)
    grid = prof.get("grid") or {}
    validate_keys(grid, f"{where}: grid")
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ConfigError(f"{where}: grid: key '{k}' must be a non-empty list, got {v!r}")
    variants = prof.get("variants") or [{}]
    for i, v in enumerate(variants):
        if not isinstance(v, dict):
            raise ConfigError(f"{where}: variants[{i}] must be a mapping, got {v!r}")
        validate_keys(v, f"{where}: variants[{i}]")
    configs, seen = [], set()
    has_runs = bool(prof.get("grid") or prof.get("variants"))
    if has_runs:
        keys = list(grid)
        for variant in variants:
            for values in itertools.product(*(grid[k] for k in keys)):
                cfg = resolve({**base, **variant, **dict(zip(keys, values))}, where)
                h = run_hash(cfg)
                if h not in seen:
                    seen.add(h)
                    configs.append(cfg)
    sources = [load_params(path.parent / s, profile, overrides) for s in spec.get("sources") or []]
    return Sweep(path, profile, configs, dict(prof.get("analysis") or {}), sources)


# ---------------------------------------------------------------- training one run
def run_one(cfg: dict, store_dir=None, data_dir=None) -> str:
    """Train ``cfg`` unless it is done or claimed: 'cached', 'trained' or 'busy'."""
    rdir = store.run_dir(store_dir, cfg)
    if store.is_done(rdir):
        return "cached"
    if not store.try_lock(rdir):
        return "busy"
    try:
        if store.is_done(rdir):
            return "cached"
        from .train import train
        store.write_config(rdir, cfg)
        store.log_attempt(rdir)
        train(cfg, data_dir=data_dir, run_dir=rdir, on_epoch=lambda e, r: store.touch_lock(rdir))
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


def work_through(configs, store_dir=None, data_dir=None, poll_s: float = 2.0, log=_print_now) -> list[str]:
    """Train every config not yet done, waiting on runs claimed by live workers and taking
    over stale ones, until all are done. Returns the hashes of runs that raised."""
    pending, failed = [resolve(c) for c in configs], []
    while pending:
        progressed, busy = False, []
        for cfg in pending:
            try:
                r = run_one(cfg, store_dir, data_dir)
            except Exception:  # noqa: BLE001 - log, record, go on with the rest
                rdir = store.run_dir(store_dir, cfg)
                (rdir / "error.txt").write_text(traceback.format_exc())
                log(f"{rdir.name} FAILED:\n{traceback.format_exc()}")
                failed.append(rdir.name)
                continue
            if r == "busy":
                busy.append(cfg)
            else:
                progressed = True
                if r == "trained":
                    rdir = store.run_dir(store_dir, cfg)
                    log(one_line(cfg, store.read_summary(rdir)))
        pending = busy
        if pending and not progressed:
            time.sleep(poll_s)
    return failed


def _progress_bar(total, desc):
    return tqdm(total=total, desc=desc, unit="run", dynamic_ncols=True, file=sys.stderr)


def count_done(configs, store_dir) -> int:
    """How many of ``configs`` are finished runs in the store."""
    return sum(store.is_done(store.run_dir(store_dir, c)) for c in configs)


def run_sweep(configs, store_dir=None, data_dir=None, *, workers: int = 1,
              runs_per_gpu: int | None = None, executor: str = "local", slurm: dict | None = None,
              runs_per_task: int = 1, desc: str = "runs", progress: bool = True,
              train: bool = True) -> pd.DataFrame:
    """Train what is missing and return the summaries of all ``configs`` as a DataFrame.

    With ``train=False`` (or ``INITLIB_NO_TRAIN`` set) a missing run is an error instead."""
    store_dir = store.resolve_store(store_dir)
    configs = [resolve(c) for c in configs]
    missing = [c for c in configs if not store.is_done(store.run_dir(store_dir, c))]
    if missing and (not train or os.environ.get("INITLIB_NO_TRAIN")):
        raise RuntimeError(
            f"{len(missing)} of {len(configs)} runs are not in the store {store_dir} and training "
            f"is off (train=False, or INITLIB_NO_TRAIN as `make figures` sets): import shipped results first "
            f"(python -m initlib import results/<profile> --store {store_dir}) or train them "
            f"(make <profile>). First missing: {run_hash(missing[0])}")
    if missing:
        check_data_available(data_dir)  # a clear error before anything starts
        if executor == "local":
            _run_local(missing, store_dir, data_dir, workers, runs_per_gpu, desc, progress)
        elif executor in ("slurm", "submitit-local", "debug"):
            _run_submitit(missing, store_dir, data_dir, executor, slurm or {}, runs_per_task,
                          runs_per_gpu or 1, desc, progress)
        else:
            raise ConfigError(f"unknown executor {executor!r} (local, slurm, submitit-local, debug)")
    still = [run_hash(c) for c in configs if not store.is_done(store.run_dir(store_dir, c))]
    if still:
        raise RuntimeError(f"{len(still)} runs did not finish (see error.txt in their run dirs "
                           f"under {store_dir}): {', '.join(still[:8])}")
    return store.load_summaries(store_dir, configs)


def _visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    try:
        import torch
        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001
        return []


def _run_local(missing, store_dir, data_dir, workers, runs_per_gpu, desc, progress):
    gpus = _visible_gpus() if runs_per_gpu else []
    if runs_per_gpu and not gpus:
        print(f"no GPU visible: --runs-per-gpu ignored, {max(1, workers)} CPU worker(s)", file=sys.stderr)
    slots = [g for g in gpus for _ in range(runs_per_gpu)] if gpus else [None] * max(1, workers)
    bar = _progress_bar(len(missing), desc) if progress else None
    if len(slots) > 1:
        run_workers(missing, store_dir, data_dir, slots, bar=bar)
        return

    def log_and_tick(msg):
        if bar is None:
            return print(msg)
        bar.write(msg)
        _set_bar(bar, count_done(missing, store_dir))
    work_through(missing, store_dir, data_dir, log=log_and_tick)
    if bar is not None:
        bar.close()


def _set_bar(bar, n: int) -> None:
    bar.n = n
    bar.refresh()


def run_workers(configs, store_dir, data_dir, slots, bar=None, poll_s: float = 1.0,
                threads: int | None = None) -> list[int]:
    """Start one ``python -m initlib worker`` process per slot (a GPU id, or None for CPU),
    each working through the same list; wait for all and return their exit codes.

    Each worker uses ``threads`` CPU threads (default: cores // workers). On a CPU the
    numbers are bitwise reproducible for a given thread count; another thread count changes
    the reduction order inside oneDNN's convolutions, and training amplifies those last bits.
    """
    store_dir = Path(store_dir)
    qdir = store_dir / "_queue"
    qdir.mkdir(parents=True, exist_ok=True)
    fd, qfile = tempfile.mkstemp(suffix=".json", dir=qdir)
    with os.fdopen(fd, "w") as f:
        json.dump(configs, f)
    threads = threads or max(1, (os.cpu_count() or 1) // len(slots))
    procs = []
    for i, gpu in enumerate(slots):
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "INITLIB_THREADS": str(threads)}
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        cmd = [sys.executable, "-m", "initlib", "worker", "--queue", qfile, "--store", str(store_dir)]
        if data_dir is not None:
            cmd += ["--data-dir", str(data_dir)]
        procs.append(subprocess.Popen(cmd, env=env))
    while any(p.poll() is None for p in procs):
        time.sleep(poll_s)
        if bar is not None:
            _set_bar(bar, count_done(configs, store_dir))
    if bar is not None:
        _set_bar(bar, count_done(configs, store_dir))
        bar.close()
    os.unlink(qfile)
    return [p.returncode for p in procs]


def submitit_task(configs, store_dir, data_dir, runs_per_gpu: int = 1) -> list[str]:
    """One array task: train its share of runs (with K local workers if asked)."""
    if runs_per_gpu > 1:
        run_workers(configs, store_dir, data_dir, [None] * runs_per_gpu)
        return []
    return work_through(configs, store_dir, data_dir)


def _run_submitit(missing, store_dir, data_dir, executor_kind, slurm, runs_per_task,
                  runs_per_gpu, desc, progress):
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
                        [runs_per_gpu] * len(chunks))
    print(f"submitted {len(jobs)} {executor_kind} tasks for {len(missing)} runs; "
          f"logs in {folder.parent}", file=sys.stderr)
    bar = _progress_bar(len(jobs), desc + " (tasks)") if progress else None
    for job in jobs:
        try:
            job.result()
        except Exception as e:  # noqa: BLE001 - reported as unfinished runs below
            print(f"task {job.job_id} failed: {e}", file=sys.stderr)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()


# ---------------------------------------------------------------- planning
# Effective training throughput assumed when none is measured: achieved TFLOP/s for a single
# ResNet run per GPU (our assumption: about 15% of the dense bf16 peak for H100/H200,
# 20% for A100; small-batch convnets are launch-bound). Measure with `plan --measure` or
# bench/throughput.py and pass --images-per-s for real numbers.
ASSUMED_ACHIEVED_TFLOPS = {"h200": 150.0, "h100": 150.0, "a100": 60.0}


def run_cost(cfg: dict, macs_per_image: int) -> dict:
    """Images and FLOPs of one run: training (fwd+bwd = 3x forward) and the per-epoch
    eval passes over train, val and test (forward only), epoch 0 included."""
    train_images = cfg["epochs"] * cfg["n_train"]
    eval_images = (cfg["epochs"] + 1) * (cfg["n_train"] + cfg["n_val"] + cfg["n_test"])
    flops = 2 * macs_per_image * (3 * train_images + eval_images)
    return {"epochs": cfg["epochs"], "train_images": train_images, "eval_images": eval_images,
            "train_equivalent_images": train_images + eval_images / 3,  # eval ~ 1/3 of a train step
            "flops": flops}


def unique_configs(configs) -> list[dict]:
    """Resolved configs, each run (by hash) once, in first-seen order: a run that two
    findings share trains, exports and counts once."""
    return list({run_hash(c): resolve(c) for c in configs}.values())


def order_longest_first(configs: list[dict]) -> list[dict]:
    """Resolved configs without duplicates (by run hash), longest expected run first.

    Workers take runs from the front of one list, so longest-first keeps them busy to the
    end instead of leaving one long run alone at the tail. The expected cost is a rough CPU
    model fitted to throughputs measured on 2 cores (ResNet-9 w0.125 ~2,000 img/s, ResNet-56
    w0.25 ~380 img/s): per image, ~1 unit per million MACs plus ~2 per conv layer (depth
    costs more than its MACs on a CPU). Used for ordering only.
    """
    import torch
    from .models import build_model, count_macs
    per_image: dict = {}

    def cost(cfg):
        key = (cfg["arch"], cfg["width"])
        if key not in per_image:
            m = build_model(cfg["arch"], width=cfg["width"])
            convs = sum(isinstance(x, torch.nn.Conv2d) for x in m.modules())
            per_image[key] = count_macs(m) / 1e6 + 2 * convs
        return per_image[key] * run_cost(cfg, 1)["train_equivalent_images"]
    return sorted(unique_configs(configs), key=cost, reverse=True)


def plan(sweeps: list[Sweep], *, gpu: str = "h200", images_per_s: float | None = None,
         runs_per_gpu: int = 1, gpus: int = 1, measured: dict | None = None) -> pd.DataFrame:
    """Per params file: runs, epochs, FLOPs and GPU-hours; the last row is the total, where a
    run that two files share (same hash) counts once, as it trains once."""
    from .models import build_model, count_macs
    macs_cache: dict = {}
    rows, seen = [], set()
    total = {"params": "TOTAL (unique runs)", "runs": 0, "epochs": 0, "flops": 0.0, "gpu_hours": 0.0}
    for sw in sweeps:
        r = {"params": sw.path.name, "runs": len(sw.configs), "epochs": 0, "flops": 0.0, "gpu_hours": 0.0}
        for cfg in sw.configs:
            key = (cfg["arch"], cfg["width"])
            if key not in macs_cache:
                macs_cache[key] = count_macs(build_model(cfg["arch"], width=cfg["width"]))
            c = run_cost(cfg, macs_cache[key])
            if measured and key in measured:
                ips = measured[key]
            elif images_per_s:
                ips = images_per_s
            else:
                ips = ASSUMED_ACHIEVED_TFLOPS[gpu] * 1e12 / (6 * macs_cache[key])
            seconds = c["train_equivalent_images"] / ips
            add = {"runs": 1, "epochs": c["epochs"], "flops": c["flops"], "gpu_hours": seconds / 3600}
            for k in ("epochs", "flops", "gpu_hours"):
                r[k] += add[k]
            h = run_hash(cfg)
            if h not in seen:
                seen.add(h)
                for k, v in add.items():
                    total[k] += v
        rows.append(r)
    df = pd.concat([pd.DataFrame(rows), pd.DataFrame([total])], ignore_index=True)
    df["wall_hours"] = df["gpu_hours"] / max(1, gpus)
    return df


def measure_images_per_s(arch: str, width: float, batch_size: int, device: str = "auto",
                         steps: int = 10) -> float:
    """Training images/s of one (arch, width, batch) on this machine, by timing real steps."""
    import torch
    import torch.nn.functional as F
    from .models import build_model
    from .train import pick_device
    dev = pick_device(device)
    model = build_model(arch, width=width).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch_size, 3, 32, 32, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch_size,), device=dev)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    for _ in range(3):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return steps * batch_size / (time.perf_counter() - t0)


def format_plan(df: pd.DataFrame) -> str:
    out = df.copy()
    out["flops"] = out["flops"].map(lambda v: f"{v:.3g}")
    out["gpu_hours"] = out["gpu_hours"].map(lambda v: f"{v:,.1f}")
    out["wall_hours"] = out["wall_hours"].map(lambda v: f"{v:,.1f}")
    return out.to_string(index=False)


def execution_overrides(device=None, compile=None) -> dict:
    o = {}
    if device is not None:
        o["device"] = device
    if compile is not None:
        o["compile"] = compile
    assert set(o) <= set(EXECUTION_KEYS)
    return o


def sweep_for_notebook(params, profile, *, store_dir=None, data_dir=None, device="auto",
                       workers: int = 1, progress: bool = True, train: bool = True):
    """What a notebook calls: expand, train what is missing (sources too; with train=False a
    missing run is an error), and return (sweep, summaries DataFrame of its own configs)."""
    sw = load_params(params, profile, execution_overrides(device=device))
    for src in sw.sources:
        run_sweep(src.all_configs(), store_dir, data_dir, workers=workers,
                  desc=src.path.stem, progress=progress, train=train)
    summaries = run_sweep(sw.configs, store_dir, data_dir, workers=workers, desc=sw.path.stem,
                          progress=progress, train=train) if sw.configs else pd.DataFrame()
    return sw, summaries
