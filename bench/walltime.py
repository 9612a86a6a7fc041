"""Where the training time of a profile went, from the run store (no training).

    python bench/walltime.py --profile cpu [--store runs]

Per params file: its runs, the worker time they took (sum of per-epoch wall times, each run
counted once: a run that two findings share is counted under the first file), and for the
whole profile the elapsed time from the first run's start to the last run's end (as recorded
in attempts.jsonl and metrics.csv). With W parallel workers the elapsed time is about the
worker time / W. ``worker_min_no_stalls`` counts an epoch that took more than 3x its run's
median (a process stopped with SIGSTOP for a clean timing elsewhere, or a machine suspended)
as a median epoch: what the training itself cost.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pandas as pd

from initlib import store
from initlib.config import run_hash
from initlib.params import load_params

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--store", default=None)
    args = ap.parse_args()
    sd = store.resolve_store(args.store)
    seen, rows, starts, ends = set(), [], [], []
    for p in sorted((ROOT / "params").glob("0*.yaml")):
        sw = load_params(p, args.profile)
        worker_s, steady_s, n, shared = 0.0, 0.0, 0, 0
        for cfg in sw.configs:
            h = run_hash(cfg)
            if h in seen:
                shared += 1
                continue
            seen.add(h)
            rdir = sd / h
            if not store.is_done(rdir):
                continue
            m = pd.read_csv(rdir / store.METRICS)
            worker_s += float(m["wall_s"].sum())
            med = float(m["wall_s"].median())
            steady_s += float(m["wall_s"].where(m["wall_s"] <= 3 * med, med).sum())
            n += 1
            log = rdir / "attempts.jsonl"
            if log.exists():  # runs imported from results/ (make figures) have no attempt log
                starts.append(min(json.loads(line)["time"] for line in log.read_text().splitlines()))
                ends.append(os.path.getmtime(rdir / store.SUMMARY))
        rows.append({"params": p.stem, "runs": len(sw.configs), "trained_here": n,
                     "shared_with_earlier": shared, "worker_min": round(worker_s / 60, 1),
                     "worker_min_no_stalls": round(steady_s / 60, 1)})
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    print(f"total worker time {df['worker_min'].sum():.1f} min "
          f"({df['worker_min_no_stalls'].sum():.1f} without stalls)")
    if starts:
        print(f"elapsed, first run start to last run end: {(max(ends) - min(starts)) / 60:.1f} min")


if __name__ == "__main__":
    main()
