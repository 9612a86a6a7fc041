"""Where the training time of a profile went, from the run store (no training).

    python bench/walltime.py --profile cpu [--store runs]

Per params file: its runs, the worker time they took (sum of per-epoch wall times, each run
counted once: a run that two findings share is counted under the first file), and for the
whole profile the elapsed time from the first run's start to the last run's end (as recorded
in attempts.jsonl and metrics.csv). With W parallel workers the elapsed time is about the
worker time / W.
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
        worker_s, n, shared = 0.0, 0, 0
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
            n += 1
            attempts = [json.loads(line) for line in (rdir / "attempts.jsonl").read_text().splitlines()]
            starts.append(min(a["time"] for a in attempts))
            ends.append(os.path.getmtime(rdir / store.SUMMARY))
        rows.append({"params": p.stem, "runs": len(sw.configs), "trained_here": n,
                     "shared_with_earlier": shared, "worker_min": round(worker_s / 60, 1)})
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    print(f"total worker time {df['worker_min'].sum():.1f} min")
    if starts:
        print(f"elapsed, first run start to last run end: {(max(ends) - min(starts)) / 60:.1f} min")


if __name__ == "__main__":
    main()
