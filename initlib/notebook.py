"""What every finding notebook does before its analysis: find its params file, train what
is missing (cached runs are only re-read), and know where its figures go."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import plots, store
from .data import PROJECT_ROOT
from .sweep import Sweep, sweep_for_notebook


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

    def source_summaries(self) -> pd.DataFrame:
        """Summaries of the runs of this finding's source sweeps (notebook 06)."""
        return store.load_summaries(self.store_dir, [c for s in self.sweep.sources for c in s.all_configs()])

    def save(self, fig, stem: str | None = None) -> None:
        paths = plots.save(fig, self.figures_dir, stem or self.name)
        print("saved", ", ".join(str(p.relative_to(PROJECT_ROOT)) if p.is_relative_to(PROJECT_ROOT)
                                  else str(p) for p in paths))


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
          + f", all done, store {sd}")
    return Finding(name, profile, sw, summaries, sd, figures)
