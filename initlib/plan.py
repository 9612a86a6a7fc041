"""Plans: what a sweep costs before it is spent (runs, epochs, FLOPs, GPU-hours), and the
order in which workers take runs (longest first, so that they end together)."""
from __future__ import annotations

import functools
import time

import pandas as pd

from .config import run_hash
from .params import Sweep, unique_by_hash

# Effective training throughput assumed when none is measured: achieved TFLOP/s for a single
# ResNet run per GPU (our assumption: about 15% of the dense bf16 peak for H100/H200,
# 20% for A100; small-batch convnets are launch-bound). Measure with `plan --measure` or
# bench/throughput.py and pass --images-per-s for real numbers.
ASSUMED_ACHIEVED_TFLOPS = {"h200": 150.0, "h100": 150.0, "a100": 60.0}


@functools.lru_cache(maxsize=None)
def model_size(arch: str, width: float) -> tuple[int, int]:
    """(MACs per image of one forward pass, number of conv layers) of a model."""
    import torch
    from .models import build_model, count_macs
    m = build_model(arch, width=width)
    return count_macs(m), sum(isinstance(x, torch.nn.Conv2d) for x in m.modules())


def run_cost(cfg: dict, macs_per_image: int) -> dict:
    """Images and FLOPs of one run: training (fwd+bwd = 3x forward) and the per-epoch
    eval passes over train, val and test (forward only), epoch 0 included."""
    train_images = cfg["epochs"] * cfg["n_train"]
    eval_images = (cfg["epochs"] + 1) * (cfg["n_train"] + cfg["n_val"] + cfg["n_test"])
    flops = 2 * macs_per_image * (3 * train_images + eval_images)
    return {"epochs": cfg["epochs"], "train_images": train_images, "eval_images": eval_images,
            "train_equivalent_images": train_images + eval_images / 3,  # eval ~ 1/3 of a train step
            "flops": flops}


def order_longest_first(configs: list[dict]) -> list[dict]:
    """Configs without duplicates (by run hash), longest expected run first.

    Workers take runs from the front of one list, so longest-first keeps them busy to the
    end instead of leaving one long run alone at the tail. The expected cost is a rough CPU
    model fitted to throughputs measured on 2 cores (ResNet-9 w0.125 ~2,000 img/s, ResNet-56
    w0.25 ~380 img/s): per image, ~1 unit per million MACs plus ~2 per conv layer (depth
    costs more than its MACs on a CPU). Used for ordering only.
    """
    def cost(cfg):
        macs, convs = model_size(cfg["arch"], cfg["width"])
        return (macs / 1e6 + 2 * convs) * run_cost(cfg, 1)["train_equivalent_images"]
    return sorted(unique_by_hash(configs), key=cost, reverse=True)


def plan(sweeps: list[Sweep], *, gpu: str = "h200", images_per_s: float | None = None,
         gpus: int = 1, measured: dict | None = None) -> pd.DataFrame:
    """Per params file: runs, epochs, FLOPs and GPU-hours; the last row is the total, where a
    run that two files share (same hash) counts once, as it trains once."""
    rows, seen = [], set()
    total = {"params": "TOTAL (unique runs)", "runs": 0, "epochs": 0, "flops": 0.0, "gpu_hours": 0.0}
    for sw in sweeps:
        r = {"params": sw.path.name, "runs": len(sw.configs), "epochs": 0, "flops": 0.0, "gpu_hours": 0.0}
        for cfg in sw.configs:
            key = (cfg["arch"], cfg["width"])
            macs = model_size(*key)[0]
            c = run_cost(cfg, macs)
            if measured and key in measured:
                ips = measured[key]
            elif images_per_s:
                ips = images_per_s
            else:
                ips = ASSUMED_ACHIEVED_TFLOPS[gpu] * 1e12 / (6 * macs)
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
                         steps: int = 10, fuse: int = 1) -> float:
    """Training images/s of one (arch, width, batch) on this machine: the aggregate rate of a
    group of ``fuse`` runs (1: a single run), by timing the trainer's own epoch
    (initlib.train.train_epoch: per-run data order, loss, backward, L2, step) on random images,
    after one warm-up epoch."""
    import torch
    from .config import resolve
    from .data import CIFAR10_MEAN, CIFAR10_STD, CIFAR10Data, Split
    from .train import assemble_group, pick_device, train_epoch
    dev = pick_device(device)
    n = batch_size * steps
    g = torch.Generator().manual_seed(0)
    split = Split(torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g).to(dev),
                  torch.randint(0, 10, (n,), generator=g).to(dev))
    data = CIFAR10Data(split, split, split, torch.tensor(CIFAR10_MEAN, device=dev).view(1, 3, 1, 1),
                       torch.tensor(CIFAR10_STD, device=dev).view(1, 3, 1, 1))
    cfgs = [resolve(dict(arch=arch, width=width, batch_size=batch_size, n_train=10 * -(-n // 10),
                         epochs=2, lr=1e-3, seed=i)) for i in range(fuse)]
    grp = assemble_group(cfgs, data, dev)
    train_epoch(grp, 1)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    train_epoch(grp, 2)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return fuse * n / (time.perf_counter() - t0)


def format_plan(df: pd.DataFrame) -> str:
    out = df.copy()
    out["flops"] = out["flops"].map(lambda v: f"{v:.3g}")
    out["gpu_hours"] = out["gpu_hours"].map(lambda v: f"{v:,.1f}")
    out["wall_hours"] = out["wall_hours"].map(lambda v: f"{v:,.1f}")
    return out.to_string(index=False)
