"""Replication pilot: do the cpu verdicts that hold (03, 05) hold on another data subset and seed?

Issue 18: "Verdicts are measured, never tuned: the grids will be rerun on another data subset
and other seeds." Before that rerun, this pilot reruns the cells that each "holds" verdict is
decided on, at the two ends of sigma_w, on

- ``split_seed`` 1: another 40k/10k split of the 50k training images, so other class-balanced
  5,000 training and 1,000 validation images (the 10,000 test images are CIFAR-10's test set,
  the same for every run);
- ``seed`` 3: another initialization and batch order (the shipped grids use seeds 0-2);

everything else as the shipped cpu profile (the configs are taken from ``params/*.yaml`` and
only these two keys are changed, so a change of the params is a change here). The runs are
read by the function each notebook's verdict cell calls, on the same rule:

- 03 (``analysis.decide_l2_lr``): its two corner cells, lr 0.015 without L2 and lr 0.15 with
  L2 6.1e-3, width 0.25, sigma_w 0.1 and 2.5: 4 runs. The spread of two sigma_w is a max - min
  over fewer values than the shipped four, so the low-lr cell's spread (and the difference the
  rule asks to be above 0) can only be smaller than over the whole grid.
- 05 (``analysis.verdict_depth``): ResNet-56 width 0.5 at sigma_w 0.1 (the budget control: it
  must interpolate) and 2.5, and ResNet-9 width 0.125 at 2.5 (which the rule asks to
  interpolate): 3 runs.

Which cells, which ends and which seed were fixed before any of these runs trained; nothing is
chosen by its outcome.

- 03 with three seeds (``03-3seeds``, session 38, declared and committed before any of its runs
  trained): the same 4 cells at seeds 3, 4 and 5 (8 runs more). With one seed, 03's rule can
  only take its noise floor from test sampling, which leaves out the seed-to-seed noise that
  the shipped grid's floor (3 seeds) includes, and the rule's second condition (the L2 cell's
  spread within that floor) was the one that failed (1.6 pp against 1.3). Three seeds give the
  floor the shipped design's seed component, so the rule is read on the design it was written
  for (at two sigma_w, not four); its verdict is reported whichever way it comes out.

Finished runs are kept in bench/replication_runs/ (config, per-epoch metrics, summary; no
checkpoints), so the tables rebuild without training:

    python bench/replication_pilot.py --train     # train what is missing (2 workers), then read
    python bench/replication_pilot.py             # read the finished runs
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STORE = ROOT / "runs_pilot"
KEPT = ROOT / "bench" / "replication_runs"  # finished runs, committed (no checkpoints)
SPLIT_SEED = 1
SIGMA_ENDS = (0.1, 2.5)

# notebook -> (params file, which shipped cpu configs are its verdict's cells)
CELLS = {
    "03": ("03_l2_and_lr.yaml", lambda c: (c["lr"], c["l2"]) in {(0.015, 0.0), (0.15, 6.1e-3)}),
    "05": ("05_depth.yaml", lambda c: c["arch"] == "resnet56" or c["sigma_w"] == 2.5),
}
# settings a replication ran with that its notebook's grid has changed since: 05's and 03's
# replications trained while their notebooks kept the epoch's last batch (05 drops it since
# session 42, 03 since session 51)
AS_RUN = {"05": {"last_batch": "keep"}, "03": {"last_batch": "keep"}}
# replication -> (notebook, seeds): the shipped grids use seeds 0-2
REPLICATIONS = {"03": ("03", (3,)), "05": ("05", (3,)), "03-3seeds": ("03", (3, 4, 5))}


def replication_configs(name: str) -> list[dict]:
    """The shipped cpu configs of the replication's notebook's verdict cells at seed 0 and the
    sigma_w ends, moved to split_seed 1 and each of its seeds (with the settings it ran with,
    ``AS_RUN``), bound to the data in $INITLIB_DATA_DIR."""
    from initlib.config import resolve
    from initlib.params import Sweep, load_params
    from initlib.sweep import bind_to_data
    notebook, seeds = REPLICATIONS[name]
    params, is_cell = CELLS[notebook]
    shipped = load_params(ROOT / "params" / params, "cpu").configs
    picked = [c for c in shipped if is_cell(c) and c["seed"] == 0 and c["sigma_w"] in SIGMA_ENDS]
    sw = Sweep(Path(f"replication {name}"), "cpu",
               [resolve({**c, "split_seed": SPLIT_SEED, "seed": seed, **AS_RUN.get(notebook, {})})
                for seed in seeds for c in picked])
    bind_to_data([sw], os.environ.get("INITLIB_DATA_DIR"))
    return sw.configs


def verdict(notebook: str, summaries) -> str:
    """The notebook's verdict on these runs, by the function its verdict cell calls."""
    from initlib import analysis
    from initlib.params import load_params
    if notebook == "03":
        v = analysis.decide_l2_lr(summaries)
    else:
        large = load_params(ROOT / "params" / CELLS[notebook][0], "cpu").analysis["large_sigma_w"]
        v = analysis.verdict_depth(summaries, large)
    return f"**{v.word}**: {v.text}"


def table(summaries) -> str:
    """One row per run: where it trained to, and where its selected predictor lies."""
    cols = {"arch": "arch", "width": "width", "lr": "lr", "l2": "L2", "sigma_w": "sigma_w", "seed": "seed",
            "max_train_acc": "best train acc", "tau_interp": "tau_interp", "best_val_epoch": "selected epoch",
            "train_acc_at_best_val": "selected: train acc", "selected_test_acc": "selected: test acc",
            "selected_test_n": "test images"}
    df = summaries[list(cols)].rename(columns=cols)
    for c in ("best train acc", "selected: train acc", "selected: test acc"):
        df[c] = (100 * df[c]).map(lambda v: f"{v:.1f}%")
    return "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n" + "\n".join(
        "| " + " | ".join("never" if v is None or v != v else f"{v:g}" if isinstance(v, float) else str(v)
                          for v in r) + " |" for r in df.itertuples(index=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", action="store_true", help="train the runs that are missing (2 workers)")
    ap.add_argument("--replications", default=",".join(REPLICATIONS),
                    help=f"comma-separated, of {', '.join(REPLICATIONS)} (default all)")
    a = ap.parse_args()
    from initlib import store
    from initlib.config import run_hash
    from initlib.sweep import run_sweep
    names = a.replications.split(",")
    unknown = [n for n in names if n not in REPLICATIONS]
    if unknown:
        ap.error(f"--replications: unknown {unknown} (known: {', '.join(REPLICATIONS)})")
    STORE.mkdir(exist_ok=True)
    if KEPT.is_dir():
        store.import_runs(KEPT, STORE, warn=lambda m: print(m, file=sys.stderr))
    # the long runs (ResNet-56, ~60 worker-minutes) first, so that the two workers end together
    everything = sorted({run_hash(c): c for n in names for c in replication_configs(n)}.values(),
                        key=lambda c: c["arch"] != "resnet56")
    if a.train:
        run_sweep(everything, STORE, os.environ.get("INITLIB_DATA_DIR"), workers=2, desc="replication")
    n = store.export_runs(STORE, everything, KEPT, warn=lambda m: print(m, file=sys.stderr))
    print(f"{n} finished replication runs kept in {KEPT.relative_to(ROOT)}/", file=sys.stderr)
    print(report(names, STORE))


def heading(name: str, done: int, total: int) -> str:
    notebook, seeds = REPLICATIONS[name]
    return (f"## {notebook} on split_seed {SPLIT_SEED}, seed{'s' if len(seeds) > 1 else ''} "
            f"{', '.join(map(str, seeds))}: {done} of {total} runs done")


def report(names=tuple(REPLICATIONS), store_dir: Path = KEPT) -> str:
    """Per replication: its runs that are done, and its notebook's verdict on them once all are
    (what bench/replication_pilot.md quotes; read from the committed runs by default)."""
    from initlib import store
    out = []
    for name in names:
        cfgs = replication_configs(name)
        s = store.load_summaries(store_dir, cfgs)
        out.append(heading(name, len(s), len(cfgs)))
        if len(s):
            out.append(table(s))
        if len(s) == len(cfgs):
            out.append(verdict(REPLICATIONS[name][0], s))
    return "\n\n".join(out)


if __name__ == "__main__":
    main()
