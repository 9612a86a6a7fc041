"""Where one cpu epoch goes, and what makes it cheaper: measured side by side in one run.

    OMP_NUM_THREADS=1 python bench/epoch_cost.py [--repeats 3] [--out bench/epoch_cost.md]

On the cpu profile's run (ResNet-9, width 0.125, b 128, 5,000 training / 1,000 val / 1,000 test
images of CIFAR-10, 01's SGD) and one thread (each cpu worker is single-threaded), this times,
in alternating repeats (medians reported):

- the parts of one epoch as the trainer runs them: ``train_epoch`` (40 steps), the precise
  BatchNorm recompute (``prepare_eval_``: 2,000 images in train mode), and the eval-mode
  passes over train, val and test (``evaluate``);
- the same with the model's weights in channels-last memory format too (the inputs already are:
  ``CIFAR10Data.normalize``);
- ``train_epoch`` and the eval passes with ``torch.compile`` (compile time reported apart);
- ``batches_1000_500``: the eval and precise-BN batch sizes used before this bench (1,000 and
  500 images; now 250 and 250);
- ``bf16``: training and evaluation under bf16 autocast (``precision: bf16``; weights and
  optimizer in fp32). Not the default variants: it changes the numbers, so it is measured, not
  adopted (``--variants default,bf16``).

The numbers of a variant are compared with the default's in the same process, so the ratios do
not depend on the machine's drift between runs; the absolute seconds do.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from initlib.config import resolve  # noqa: E402
from initlib.data import load_cifar10  # noqa: E402
from initlib.fused import FusedConv2d  # noqa: E402
from initlib.train import assemble_group, evaluate, prepare_eval_, train_epoch  # noqa: E402


OLD_BATCHES = (1000, 500)  # eval and precise-BN batch sizes before this bench


def _conv_forward(self, x):
    w = self.weight.reshape(-1, *self.weight.shape[2:])
    if getattr(self, "channels_last", False):
        w = w.contiguous(memory_format=torch.channels_last)
    return F.conv2d(x, w, stride=self.stride, padding=self.padding, groups=self.g)


FusedConv2d.forward = _conv_forward  # the trainer's forward, plus the channels-last variant's weights


def make_group(channels_last=False, compile=False, precision="fp32"):
    cfg = resolve(dict(arch="resnet9", width=0.125, batch_size=128, n_train=5000, n_val=1000, n_test=1000,
                       optimizer="sgd", lr=0.015, sigma_w=1.0, epochs=128, seed=0, compile=compile,
                       precision=precision))
    data = load_cifar10(n_train=5000, n_val=1000, n_test=1000, device=torch.device("cpu"))
    grp = assemble_group([cfg], data, torch.device("cpu"))
    if channels_last:
        for m in grp.model.modules():  # inputs are channels-last already (data.normalize)
            if isinstance(m, FusedConv2d):
                m.channels_last = True
    return grp


def time_parts(grp, epoch, batches=None):
    """The parts of one epoch; ``batches``: (eval batch, precise-BN batch) instead of the library's."""
    import initlib.train as trainer
    saved = trainer.EVAL_BATCH, trainer.PRECISE_BN_BATCH
    if batches:
        trainer.EVAL_BATCH, trainer.PRECISE_BN_BATCH = batches
    try:
        return _time_parts(grp, epoch)
    finally:
        trainer.EVAL_BATCH, trainer.PRECISE_BN_BATCH = saved


def _time_parts(grp, epoch):
    t = {}
    t0 = time.perf_counter()
    train_epoch(grp, epoch)
    t["train_epoch"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    prepare_eval_(grp)
    t["precise_bn"] = time.perf_counter() - t0
    for split in ("train", "val", "test"):
        t0 = time.perf_counter()
        evaluate(grp.net, getattr(grp.data, split), grp.data, 1, grp.dtype, grp.autocast)
        t[f"eval_{split}"] = time.perf_counter() - t0
    t["epoch_total"] = sum(t.values())
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default="default,batches_1000_500,channels_last,compile")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    variants = args.variants.split(",")
    groups, compile_s = {}, {}
    for v in variants:
        t0 = time.perf_counter()
        groups[v] = make_group(channels_last=(v == "channels_last"), compile=(v == "compile"),
                               precision="bf16" if v == "bf16" else "fp32")
        time_parts(groups[v], 1)  # warm-up (and, compiled, the first traces)
        compile_s[v] = time.perf_counter() - t0
    times = {v: [] for v in variants}
    for rep in range(args.repeats):
        for v in variants:
            times[v].append(time_parts(groups[v], 2 + rep, OLD_BATCHES if v == "batches_1000_500" else None))
            print(v, {k: round(x, 2) for k, x in times[v][-1].items()}, flush=True)
    parts = list(times[variants[0]][0])
    med = {v: {p: statistics.median(t[p] for t in times[v]) for p in parts} for v in variants}
    lines = [f"threads: {torch.get_num_threads()} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}), "
             f"torch {torch.__version__}, repeats {args.repeats} alternating, medians in seconds", "",
             "| part | " + " | ".join(variants) + " | " + " | ".join(f"{v} / default" for v in variants[1:]) + " |",
             "|---" * (1 + 2 * len(variants) - 1) + "|"]
    for p in parts:
        lines.append(f"| {p} | " + " | ".join(f"{med[v][p]:.2f}" for v in variants) + " | "
                     + " | ".join(f"{med[v][p] / med[variants[0]][p]:.3f}" for v in variants[1:]) + " |")
    d = med[variants[0]]
    lines += ["", f"setup + first epoch (incl. compile): " + ", ".join(f"{v} {compile_s[v]:.1f} s" for v in variants),
              f"default: evaluation (precise BN + three eval passes) = "
              f"{(d['epoch_total'] - d['train_epoch']) / d['train_epoch']:.2f} of a training epoch"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
