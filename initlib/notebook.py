"""What every finding notebook does around its analysis: find its params file, train what is
missing (cached runs are only re-read), save figures, and record its verdict as data.

A notebook ends with ``f.report(verdict, table)``: it prints the verdict and its rule, and
writes ``<figures>/<name>.verdict.json`` (the verdict, the rule, the paper's number and the
table as the notebook printed it). The README's results table, ``make site`` and the tests
read those files; nothing parses notebook output.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd

from . import analysis, plots, store
from .data import PROJECT_ROOT
from .params import Sweep, load_params
from .sweep import bind_to_data, run_sweep

CHECK_TAG = "check"  # cells whose printed output is the notebook's result (tables, verdicts)


def _show(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


@dataclass
class Finding:
    name: str
    profile: str
    sweep: Sweep
    summaries: pd.DataFrame
    store_dir: Path
    figures_dir: Path

    @property
    def analysis(self) -> dict:
        return self.sweep.analysis

    def epochs(self, configs=None) -> pd.DataFrame:
        return store.load_epochs(self.store_dir, configs if configs is not None else self.sweep.configs)

    def source(self, stem: str) -> Sweep | None:
        """The source sweep of this finding whose params file is ``<stem>.yaml``, if any."""
        return next((s for s in self.sweep.sources if s.path.stem == stem), None)

    def source_summaries(self) -> pd.DataFrame:
        """Summaries of the runs of this finding's source sweeps (notebook 06)."""
        return store.load_summaries(self.store_dir, self.sweep.all_configs())

    def save(self, fig, stem: str | None = None) -> None:
        paths = plots.save(fig, self.figures_dir, stem or self.name)
        print("saved", ", ".join(_show(p) for p in paths))

    @property
    def verdict_path(self) -> Path:
        return self.figures_dir / f"{self.name}.verdict.json"

    def report(self, verdict: analysis.Verdict, table: pd.DataFrame | None = None,
               digits: int = 1) -> None:
        """Print the verdict with its rule and write it, with the table, as data."""
        label = self.name[:2] + " " + self.name[3:].replace("_", " ")
        verdict.paper = self.sweep.spec.get("paper", verdict.paper)
        print(f"{label}: {verdict}")
        print(f"Rule: {verdict.rule}")
        record = {"finding": self.name, "profile": self.profile,
                  "title": self.sweep.spec.get("title", self.name),
                  "claim": " ".join(str(self.sweep.spec.get("claim", "")).split()),
                  **verdict.to_dict()}
        if table is not None:
            record["table"] = {"columns": [str(c) for c in table.columns], "rows": len(table),
                               "text": analysis.format_table(table, digits)}
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        store.write_json(self.verdict_path, record)


def sweep_for_notebook(params, profile, *, store_dir=None, data_dir=None, device="auto",
                       workers: int = 1, progress: bool = True, train: bool = True):
    """Expand and bind the params file, train what is missing (sources too; with train=False a
    missing run is an error), and return (sweep, summaries DataFrame of its own configs)."""
    sw = load_params(params, profile, {"device": device})
    bind_to_data([sw], data_dir)
    for src in sw.sources:
        run_sweep(src.all_configs(), store_dir, data_dir, workers=workers,
                  desc=src.path.stem, progress=progress, train=train)
    summaries = run_sweep(sw.configs, store_dir, data_dir, workers=workers, desc=sw.path.stem,
                          progress=progress, train=train) if sw.configs else pd.DataFrame()
    return sw, summaries


def run_finding(name: str, profile: str, *, data_dir=None, store_dir=None, out_dir=None,
                device: str = "auto", workers: int = 1, progress: bool = True,
                train: bool = True) -> Finding:
    params = PROJECT_ROOT / "params" / f"{name}.yaml"
    sd = store.resolve_store(store_dir)
    sw, summaries = sweep_for_notebook(params, profile, store_dir=sd, data_dir=data_dir,
                                       device=device, workers=workers, progress=progress,
                                       train=train)
    figures = Path(out_dir) if out_dir else PROJECT_ROOT / "figures" / profile
    n_src = sum(len(s.all_configs()) for s in sw.sources)
    print(f"{name} [{profile}]: {len(sw.configs)} runs" + (f" + {n_src} from sources" if n_src else "")
          + f", all done, store {_show(sd)}")
    return Finding(name, profile, sw, summaries, sd, figures)


# ---------------------------------------------------------------- executed notebooks
def checked_outputs(nb) -> list[str]:
    """The printed text of each cell tagged ``check``, in order: what a notebook reports (a
    displayed object by its text form, e.g. :class:`initlib.analysis.Table`'s fixed rounding)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code" and CHECK_TAG in cell.metadata.get("tags", []):
            text = []
            for o in cell.get("outputs", []):
                if o.get("output_type") == "stream" and o.get("name") == "stdout":
                    text.append(o["text"])
                elif o.get("output_type") in ("execute_result", "display_data"):
                    shown = o.get("data", {}).get("text/plain", "")
                    text.append(shown if shown.endswith("\n") else shown + "\n")
            out.append("".join(text))
    return out


def read_notebook(path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=4)


def read_verdicts(folder) -> dict[str, dict]:
    """Every ``<name>.verdict.json`` in a figures folder, by finding name."""
    return {p.name[:-len(".verdict.json")]: json.loads(p.read_text())
            for p in sorted(Path(folder).glob("*.verdict.json"))}


def results_rows(figures_dir) -> list[dict]:
    """One row per finding for the results tables (README, site), from the verdict files."""
    rows = []
    for name, v in read_verdicts(figures_dir).items():
        word = {True: "holds", False: "does not hold at this scale", None: "undecided"}[v["holds"]]
        headline, floors = format_measured(v.get("measured") or [])
        rows.append({"name": name, "title": v.get("title") or name, "paper": v["paper"],
                     "ours": v["ours"], "verdict": word, "rule": v["rule"],
                     "headline": headline or v["ours"], "floor": floors or "n/a"})
    return rows


def format_measured(items: list[dict]) -> tuple[str, str]:
    """A verdict's headline numbers as 'what value [lo, hi] unit; ...' and their noise floors
    (95% quantiles) as 'what floor unit; ...' (empty where there is none)."""
    def num(v, unit, digits):
        return "n/a" if v is None else (f"{v:+.2f}" if unit == "" else f"{v:.{digits}f}")
    parts, floors = [], []
    for m in items:
        unit, d = (f" {m['unit']}" if m["unit"] else ""), m.get("digits", 1)
        ci = f" [{num(m['lo'], m['unit'], d)}, {num(m['hi'], m['unit'], d)}]" if m["lo"] is not None else ""
        parts.append(f"{m['what']} {num(m['value'], m['unit'], d)}{ci}{unit}")
        if m["floor"] is not None:
            floors.append(f"{m['what']} {m['floor']:.{d}f}{unit}")
    return "; ".join(parts), "; ".join(floors)


def verdicts_side_by_side(folders) -> str:
    """A Markdown table of the verdicts in several figures folders, one row per finding and
    one column per folder (its verdict word, then its headline numbers): a profile beside its
    replicas (``make replica``), so that a verdict that changes with the data split and the
    seeds shows at a glance. A finding a folder has no verdict for reads "-"."""
    labels = [Path(f).name for f in folders]
    if len(set(labels)) < len(labels):  # two folders of one name (a/cpu, b/cpu): say which is which
        labels = [str(f) for f in folders]
    rows = {label: {r["name"]: r for r in results_rows(f)} for label, f in zip(labels, folders)}
    if not any(rows.values()):
        raise ValueError(f"no *.verdict.json in {', '.join(map(str, folders))}: execute the "
                         f"notebooks first (make <profile>, make figures, make replica)")
    names = sorted({n for by_name in rows.values() for n in by_name})
    head = ["finding", *(f"{folder}: verdict" for folder in rows), *(f"{folder}: numbers" for folder in rows)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in names:
        got = [by_name.get(n) for by_name in rows.values()]
        lines.append("| " + " | ".join([n, *(r["verdict"] if r else "-" for r in got),
                                         *(r["headline"] if r else "-" for r in got)]) + " |")
    return "\n".join(lines)
