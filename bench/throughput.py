"""Training throughput (images/s): initlib's loop beside a plain PyTorch loop, in one run.

    python bench/throughput.py                      # CPU: a few ResNet-9 widths and batch sizes
    python bench/throughput.py --device cuda --concurrent 4 --precision bf16

For each (arch, width, batch size), measured side by side on the same model and data:

- ``plain``: the straightforward loop: a torchvision-transforms Dataset (ToTensor,
  Normalize, RandomCrop(32, 4), RandomHorizontalFlip), a DataLoader (shuffle, 2 workers,
  pinned memory on CUDA), fp32, ``.item()`` of the loss every step;
- ``initlib``: :func:`initlib.train.train_epoch`, the trainer's own step loop (data and
  augmentation on the device, no per-step host sync, bf16 if asked) for one run (a group of
  one);
- ``old loop`` (``--old-loop``): the single-run loop of commit 5e3c91b, before the trainer
  became one loop for any G (``bench_old_single_run_loop``); ratio ``initlib / old loop``;
- ``initlib xK`` (``--concurrent K``): K initlib runs at once in K processes on the same
  device (1 CPU thread each); aggregate images/s.
- ``fused G`` (``--fused 8,32,64``): G runs as one fused model (:mod:`initlib.fused`: grouped
  convs, per-run BatchNorm, batched head, per-run SGD) in the same loop
  (:func:`initlib.train.train_epoch`: each run its own order and augmentation of the
  device-resident images); aggregate images/s (G x b per step). ``--compile`` compiles
  the fused model too.

The ratio column is initlib / plain. MFU (model FLOPs utilization) uses 6 x forward MACs per
training image against the dense peak of the GPU for the precision used (``--peak-tflops``).
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from initlib.config import resolve  # noqa: E402
from initlib.data import CIFAR10_MEAN, CIFAR10_STD, load_cifar10, load_raw  # noqa: E402
from initlib.models import build_model, count_macs  # noqa: E402
from initlib.train import pick_device, train_epoch  # noqa: E402

PEAK_TFLOPS = {"bf16": 989.0, "fp32": 494.0}  # H100/H200 SXM dense: bf16, and TF32 for fp32


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench_plain(arch, width, b, n_images, steps, device, warmup=3):
    import torchvision.transforms as T
    from torch.utils.data import DataLoader, Dataset
    x, y, _, _ = load_raw()
    x, y = x[:n_images], y[:n_images]
    tf = T.Compose([T.ToTensor(), T.Normalize(CIFAR10_MEAN, CIFAR10_STD),
                    T.RandomCrop(32, padding=4), T.RandomHorizontalFlip()])

    class DS(Dataset):
        def __len__(self):
            return len(y)

        def __getitem__(self, i):
            return tf(x[i]), int(y[i])

    loader = DataLoader(DS(), batch_size=b, shuffle=True, num_workers=2, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=True)
    model = build_model(arch, width=width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    it, done, t0 = iter(loader), 0, None
    while done < warmup + steps:
        try:
            xb, yb = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        if done == warmup:
            sync(device)
            t0 = time.perf_counter()
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        done += 1
    sync(device)
    return steps * b / (time.perf_counter() - t0)


def _group(g, arch, width, b, n_images, device, precision="fp32", compile=False):
    from initlib.train import assemble_group
    cfgs = [resolve(dict(arch=arch, width=width, batch_size=b, n_train=n_images, n_val=10, n_test=10,
                         augment=True, precision=precision, compile=compile, epochs=1000, seed=i))
            for i in range(g)]
    data = load_cifar10(n_train=n_images, n_val=10, n_test=10, device=device)
    return assemble_group(cfgs, data, device)


def _timed_epochs(grp, steps, device, barrier=None):
    """Warm up (one epoch), then time whole epochs of the trainer's own loop until ``steps``
    steps have run; returns (t0, t1, steps timed)."""
    train_epoch(grp, 1)
    sync(device)
    if barrier is not None:
        barrier.wait()
    t0, done, epoch = time.perf_counter(), 0, 2
    while done < steps:
        train_epoch(grp, epoch)
        done, epoch = done + grp.steps_per_epoch, epoch + 1
    sync(device)
    return t0, time.perf_counter(), done


def bench_initlib(arch, width, b, n_images, steps, device, precision="fp32", compile=False,
                  barrier=None, result=None):
    """One run (a group of one) in the trainer's loop, initlib.train.train_epoch."""
    grp = _group(1, arch, width, b, n_images, device, precision, compile)
    t0, t1, done = _timed_epochs(grp, steps, device, barrier)
    if result is not None:
        result.put((t0, t1, done))
    return done * b / (t1 - t0)


def bench_old_single_run_loop(arch, width, b, n_images, steps, device):
    """The single-run loop the trainer had before it became one loop for any G (commit
    5e3c91b, initlib/train.py train_epoch), verbatim but for its imports: a plain
    channels_last model, torch.optim.SGD, foreach L2, F.cross_entropy. The baseline of issue
    17's "G = 1 costs no more than the single-run loop"."""
    from initlib.data import augment_params, epoch_order, random_crop_flip
    data = load_cifar10(n_train=n_images, n_val=10, n_test=10, device=device)
    model = build_model(arch, width=width).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    params = [p for p in model.parameters() if p.requires_grad]

    def epoch_of(epoch):
        n = len(data.train)
        model.train()
        order = epoch_order(n, 0, epoch, device)
        offsets, flips = augment_params(n, 0, epoch, device)
        loss_sum = torch.zeros((), device=device)
        for s in range(math.ceil(n / b)):
            idx = order[s * b:(s + 1) * b]
            x = random_crop_flip(data.train.x[idx], offsets[idx], flips[idx])
            loss = F.cross_entropy(model(data.normalize(x)), data.train.y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch._foreach_add_([p.grad for p in params], params, alpha=0.0)  # add_l2_ with l2 = 0
            opt.step()
            loss_sum += loss.detach() * len(idx)
        return loss_sum
    epoch_of(1)
    sync(device)
    t0, done, epoch = time.perf_counter(), 0, 2
    while done < steps:
        epoch_of(epoch)
        done, epoch = done + math.ceil(n_images / b), epoch + 1
    sync(device)
    return done * b / (time.perf_counter() - t0)


def old_loop_pairs(arch, width, b, n_images, steps, device, pairs):
    """The one loop at G = 1 against the old single-run loop: ``pairs`` pairs, which runs first
    alternating (this machine's speed drifts by ~10% between runs); returns (median old
    images/s, median new / median old, per-pair ratios)."""
    import statistics
    new, old = [], []
    for i in range(pairs):
        order = [("old", bench_old_single_run_loop), ("new", bench_initlib)]
        for name, fn in (order if i % 2 == 0 else order[::-1]):
            (old if name == "old" else new).append(fn(arch, width, b, n_images, steps, device))
    return (statistics.median(old), statistics.median(new) / statistics.median(old),
            [n / o for n, o in zip(new, old)])


def _worker(args, barrier, result):
    torch.set_num_threads(1)
    bench_initlib(*args, barrier=barrier, result=result)


def bench_fused(g, arch, width, b, n_images, steps, device, precision="fp32", compile=False):
    """Aggregate training images/s of ``g`` runs fused into one model, timed in the trainer's
    own loop (initlib.train.train_epoch: each run its own data order and augmentation, per-run
    SGD), so the number is what ``sweep --fuse G`` runs."""
    grp = _group(g, arch, width, b, n_images, device, precision, compile)
    t0, t1, done = _timed_epochs(grp, steps, device)
    return g * b * done / (t1 - t0)


def bench_concurrent(k, arch, width, b, n_images, steps, device, precision, compile):
    ctx = mp.get_context("spawn")
    barrier, result = ctx.Barrier(k), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=((arch, width, b, n_images, steps, device, precision, compile),
                                               barrier, result)) for _ in range(k)]
    for p in procs:
        p.start()
    spans = [result.get() for _ in procs]
    for p in procs:
        p.join()
    start, end = min(s for s, _, _ in spans), max(e for _, e, _ in spans)
    return sum(d for _, _, d in spans) * b / (end - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--archs", default="resnet9")
    ap.add_argument("--widths", default=None, help="comma list (default: cpu 0.125,0.25,0.5; cuda 1.0)")
    ap.add_argument("--batch-sizes", default="64,256")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default: cpu 8, cuda 200)")
    ap.add_argument("--images", type=int, default=5000, help="training images held (initlib on device)")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--concurrent", type=int, default=0, help="also K concurrent initlib runs")
    ap.add_argument("--fused", default="", help="comma list of G: also G runs fused into one model")
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument("--old-loop", action="store_true", help="also the single-run loop of 5e3c91b")
    ap.add_argument("--pairs", type=int, default=6, help="--old-loop: alternating pairs timed")
    ap.add_argument("--no-plain", action="store_true", help="skip the DataLoader baseline")
    args = ap.parse_args()
    device = pick_device(args.device)
    cuda = device.type == "cuda"
    widths = [float(w) for w in (args.widths or ("1.0" if cuda else "0.125,0.25,0.5")).split(",")]
    steps = args.steps or (200 if cuda else 8)
    peak = args.peak_tflops or PEAK_TFLOPS[args.precision]
    name = torch.cuda.get_device_name(device) if cuda else f"CPU, {os.cpu_count()} cores, {torch.get_num_threads()} threads"
    print(f"device: {name}; torch {torch.__version__}; precision {args.precision}; "
          f"compile {args.compile}; {steps} timed steps\n")
    cols = ["arch", "width", "batch", "plain img/s", "initlib img/s", "ratio"]
    if args.old_loop:
        cols += ["old loop img/s", "initlib / old loop"]
    if args.concurrent:
        cols += [f"initlib x{args.concurrent} img/s", "ratio x{}".format(args.concurrent)]
    fused_gs = [int(v) for v in args.fused.split(",") if v]
    for g in fused_gs:
        cols += [f"fused {g} img/s", f"ratio fused {g}"]
    if cuda:
        cols += ["MFU initlib", "MFU best"]
    rows = []
    for arch in args.archs.split(","):
        for w in widths:
            macs = count_macs(build_model(arch, width=w))
            for b in (int(v) for v in args.batch_sizes.split(",")):
                plain = math.nan if args.no_plain else bench_plain(arch, w, b, args.images, steps, device)
                mine = bench_initlib(arch, w, b, args.images, steps, device, args.precision, args.compile)
                row = [arch, f"{w:g}", str(b), f"{plain:,.0f}", f"{mine:,.0f}", f"{mine / plain:.2f}x"]
                if args.old_loop:
                    old, ratio, pairs = old_loop_pairs(arch, w, b, args.images, steps, device, args.pairs)
                    row += [f"{old:,.0f}", f"{ratio:.3f}x (median of {args.pairs} pairs, order alternated; "
                                           f"per pair {min(pairs):.2f}-{max(pairs):.2f})"]
                best = mine
                if args.concurrent:
                    conc = bench_concurrent(args.concurrent, arch, w, b, args.images, steps, device,
                                            args.precision, args.compile)
                    best = max(best, conc)
                    row += [f"{conc:,.0f}", f"{conc / plain:.2f}x"]
                for g in fused_gs:
                    fused = bench_fused(g, arch, w, b, args.images, steps, device, args.precision, args.compile)
                    best = max(best, fused)
                    row += [f"{fused:,.0f}", f"{fused / plain:.2f}x"]
                if cuda:
                    mfu = lambda ips: 6 * macs * ips / (peak * 1e12)  # noqa: E731
                    row += [f"{100 * mfu(mine):.1f}%", f"{100 * mfu(best):.1f}%"]
                rows.append(row)
                print(" | ".join(row), flush=True)
    print()
    widths_col = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    print("| " + " | ".join(c.ljust(wc) for c, wc in zip(cols, widths_col)) + " |")
    print("|" + "|".join("-" * (wc + 2) for wc in widths_col) + "|")
    for r in rows:
        print("| " + " | ".join(v.ljust(wc) for v, wc in zip(r, widths_col)) + " |")


if __name__ == "__main__":
    main()
