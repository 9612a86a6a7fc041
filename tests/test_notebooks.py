"""The six notebooks in notebooks/, executed by papermill exactly as `make` executes them.

- cpu, analysis regression: each notebook re-analyses the shipped runs (results/cpu, imported
  into this session's store by conftest) with ``train=False``; every checked output (the
  cells tagged ``check``: tables and verdicts) must equal the committed executed notebook in
  reports/cpu/, and the verdict file it writes must equal figures/cpu/<name>.verdict.json.
  No training, so this is exact on every machine.
- smoke, pipeline: each notebook trains its smoke runs in a fresh store and must run end to
  end, printing a table with the columns of the cpu table, the rows its grid implies, and a
  well-formed verdict. Its numbers come from training on this machine's kernels, so they are
  not compared (test_trajectories.py pins the training numerics, with a tolerance).

An exception in any cell fails the test (papermill raises PapermillExecutionError).
"""
import json
from pathlib import Path

import papermill as pm
import pytest

from initlib.notebook import checked_outputs, read_notebook
from initlib.params import load_params

ROOT = Path(__file__).resolve().parent.parent
NAMES = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
WORDS = ("HOLDS", "DOES NOT HOLD at this scale", "UNDECIDED")


def execute(name: str, profile: str, out: Path, **parameters):
    """Run notebooks/<name>.ipynb with papermill (cwd notebooks/, as the Makefile does);
    figures and the verdict file go to ``out``."""
    dst = out / f"{name}.ipynb"
    pm.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(dst),
                        parameters={"profile": profile, "out_dir": str(out), **parameters},
                        kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False)
    return read_notebook(dst), json.loads((out / f"{name}.verdict.json").read_text())


def test_six_findings_each_with_params_report_and_verdict():
    assert [n[:2] for n in NAMES] == ["01", "02", "03", "04", "05", "06"]
    for n in NAMES:
        assert (ROOT / "params" / f"{n}.yaml").is_file(), n
        assert (ROOT / "reports" / "cpu" / f"{n}.ipynb").is_file(), n
        assert (ROOT / "figures" / "cpu" / f"{n}.verdict.json").is_file(), n


@pytest.mark.parametrize("name", NAMES)
def test_cpu_notebook_rebuilds_its_committed_report_from_results(name, tmp_path):
    nb, verdict = execute(name, "cpu", tmp_path, train=False)
    report = read_notebook(ROOT / "reports" / "cpu" / f"{name}.ipynb")
    got, expected = checked_outputs(nb), checked_outputs(report)
    assert len(got) == len(expected) >= 2
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"{name}: checked cell {i} differs from reports/cpu/{name}.ipynb"
    assert verdict == json.loads((ROOT / "figures" / "cpu" / f"{name}.verdict.json").read_text())


def expected_rows(name: str, profile: str) -> int | None:
    """Rows of a finding's table implied by its params file (None: not pinned)."""
    sw = load_params(ROOT / "params" / f"{name}.yaml", profile)
    distinct = lambda keys: len({tuple(c[k] for k in keys) for c in sw.configs})  # noqa: E731
    return {"01": lambda: distinct(["optimizer", "lr"]),
            "02": lambda: len(sw.analysis["horizons"]),
            "03": lambda: distinct(["lr", "l2"]),
            "04": lambda: distinct(["batch_size"]),
            "05": lambda: len(sw.configs)}.get(name[:2], lambda: None)()


@pytest.mark.parametrize("name", NAMES)
def test_smoke_notebook_trains_and_reports_end_to_end(name, tmp_path):
    nb, verdict = execute(name, "smoke", tmp_path)
    cpu = json.loads((ROOT / "figures" / "cpu" / f"{name}.verdict.json").read_text())
    assert verdict["finding"] == name and verdict["profile"] == "smoke"
    assert verdict["word"] in WORDS and verdict["holds"] in (True, False, None)
    assert verdict["rule"] == cpu["rule"] and verdict["ours"]
    assert verdict["table"]["columns"] == cpu["table"]["columns"]
    rows = expected_rows(name, "smoke")
    if rows is not None:
        assert verdict["table"]["rows"] == rows
    assert verdict["table"]["rows"] >= 1
    printed = checked_outputs(nb)
    assert any(f"{verdict['word']}: " in p for p in printed)
    for line in verdict["table"]["text"].splitlines()[:1]:
        assert line in printed[0] or any(line in p for p in printed)


def test_a_replica_trains_its_own_runs_and_reports_as_its_profile(tmp_path):
    """`make replica` executes the notebooks with profile '<profile>-replica<N>': 02's smoke
    replica trains its own runs (split_seed 1, seeds 1000+; none of smoke's) end to end and
    reports as that profile, with smoke's table shape."""
    import os
    from initlib import store
    from initlib.sweep import bind_to_data
    nb, verdict = execute("02_long_training", "smoke-replica1", tmp_path)
    assert verdict["profile"] == "smoke-replica1" and verdict["word"] in WORDS
    assert verdict["table"]["rows"] == expected_rows("02_long_training", "smoke")
    sw = load_params(ROOT / "params" / "02_long_training.yaml", "smoke-replica1")
    bind_to_data([sw], None)
    assert {(c["split_seed"], c["seed"] >= 1000) for c in sw.configs} == {(1, True)}
    store_dir = Path(os.environ["INITLIB_STORE"])
    assert all(store.is_done(store.run_dir(store_dir, c)) for c in sw.configs)


def test_no_notebook_picks_runs_by_a_seed_number():
    """A replica's seeds are 1000 N + the profile's: a notebook that names seed 0 (a figure
    of "seed 0") finds no runs there. Seeds are taken from the runs (their smallest), never
    written as a number."""
    import re
    for name in NAMES:
        for cell in read_notebook(ROOT / "notebooks" / f"{name}.ipynb").cells:
            if cell.cell_type == "code":
                assert not re.search(r"seed\"?\]?\s*(==|=)\s*\d", cell.source), (name, cell.source)
