#!/usr/bin/env bash
# Rerun one notebook's cpu grid with the epoch's last batch dropped (`last_batch: drop` added to
# its cpu base, nothing else), across sessions that may each start on a fresh machine.
#
#   bench/rerun_drop.sh 01_optimizer_dependence [--workers 2]
#
# Why a script: a session lasts 3 hours and the next may start with an empty store, so a
# rerun that takes longer than one session would lose every finished run with the machine.
# This script (1) writes the declared grid (the params file with the one key added) to
# build/rerun_drop/, (2) imports the finished runs that earlier sessions committed to
# bench/rerun_drop_runs/, (3) sweeps what is missing, and (4) exports every finished run of the
# grid back to bench/rerun_drop_runs/ when the sweep ends, also when it is stopped with SIGTERM
# or Ctrl-C (the sweep stops cleanly; its in-flight runs lose at most their current run's
# progress, since checkpoints are not committed). Commit bench/rerun_drop_runs/ before the session
# ends. When all runs are done, the notebook ships: add `last_batch: drop` to its cpu base, then
# `make results PROFILE=cpu` (the runs are in runs/), re-execute its report, and remove its runs
# from bench/rerun_drop_runs/ (results/cpu now holds them).
#
# The runs in bench/rerun_drop_runs/ are exports (config, metrics, summary; no checkpoints), so
# `initlib import` checks each for damage before it is trusted, like any results folder.
set -uo pipefail
# The body is one function, read whole before it runs: bash reads a script as it goes, so an
# edit of this file during a sweep would otherwise run from a shifted offset (seen once).
main() {
name=${1:?usage: bench/rerun_drop.sh NOTEBOOK [sweep options]}; shift
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
src=params/$name.yaml
[ -f "$src" ] || { echo "error: no params file $src" >&2; exit 2; }
out=build/rerun_drop/$name.yaml
mkdir -p build/rerun_drop bench/rerun_drop_runs
"$PY" - "$src" "$out" <<'EOF' || exit 2
import sys, yaml
src, out = sys.argv[1:]
doc = yaml.safe_load(open(src))
base = doc.get("profiles", {}).get("cpu", {}).get("base")
if base is None:
    sys.exit(f"error: {src}: profiles.cpu.base is missing (nothing to rerun)")
if base.get("last_batch") == "drop":
    sys.exit(f"error: {src}: profiles.cpu.base already has last_batch: drop (the rerun has shipped)")
base["last_batch"] = "drop"
# only the notebook's own runs: its sources (06 reads 01-04) are rerun by their own notebooks,
# and their paths are relative to params/, not to the declared grid's folder
doc.pop("sources", None)
yaml.safe_dump(doc, open(out, "w"), sort_keys=False)
print(f"declared grid: {src} with profiles.cpu.base.last_batch = drop -> {out}")
EOF
"$PY" -m initlib import bench/rerun_drop_runs
stopped=0
trap 'stopped=1' TERM INT   # let the sweep stop cleanly, then export what finished
"$PY" -m initlib sweep "$out" --profile cpu "$@"
rc=$?
trap - TERM INT
"$PY" -m initlib export "$out" --profile cpu --out bench/rerun_drop_runs
"$PY" -m initlib status "$out" --profile cpu
[ $stopped = 1 ] && echo "stopped; finished runs exported to bench/rerun_drop_runs/ (commit them)"
return $rc
}
main "$@"; exit $?
