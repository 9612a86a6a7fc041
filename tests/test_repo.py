"""Repository hygiene: notebooks stored clean, packaging files that agree."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_notebooks_are_the_only_source_stored_without_outputs():
    """notebooks/*.ipynb are the sources (edited in JupyterLab); executed copies live in
    reports/<profile>/."""
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]
    for p in NOTEBOOKS:
        nb = json.loads(p.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(not c["outputs"] and c["execution_count"] is None for c in code), \
            f"{p.name} has outputs: `make strip` clears them"
        assert sum("parameters" in c["metadata"].get("tags", []) for c in code) == 1, p.name
        assert any("check" in c["metadata"].get("tags", []) and "f.report(" in "".join(c["source"])
                   for c in code), p.name


def test_committed_reports_are_executed_copies_of_the_sources():
    """Each reports/cpu notebook has the source's cells (code and text) with outputs."""
    for p in NOTEBOOKS:
        src = json.loads(p.read_text())["cells"]
        rep = [c for c in json.loads((ROOT / "reports" / "cpu" / p.name).read_text())["cells"]
               if "injected-parameters" not in c["metadata"].get("tags", [])]
        assert ["".join(c["source"]) for c in rep] == ["".join(c["source"]) for c in src], \
            f"reports/cpu/{p.name} is stale: make figures PROFILE=cpu"
        assert any(o.get("output_type") == "display_data" for c in rep for o in c.get("outputs", [])), p.name


def _pins(lines):
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*([=<>!~].*)?$", line)
        if m:
            out[m.group(1).lower()] = (m.group(2) or "").replace(" ", "")
    return out


def test_environment_yml_agrees_with_pyproject():
    import tomllib
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    assert _pins(deps) == _pins(pip)
    assert _pins(deps)["torch"] == "==2.14.1" and _pins(deps)["torchvision"] == "==0.29.1"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _cpu_configs():
    from initlib.config import run_hash
    from initlib.params import load_params
    from initlib.sweep import bind_to_data
    sweeps = [load_params(p, "cpu") for p in sorted((ROOT / "params").glob("0*.yaml"))]
    bind_to_data(sweeps)
    return {run_hash(c): c for sw in sweeps for c in sw.all_configs()}


def test_shipped_cpu_results_are_exactly_the_cpu_profile_runs():
    """results/cpu holds every run of the cpu profile, intact (config, metrics, summary with
    checksums; no checkpoints), and nothing else: so its tables can be rebuilt without
    training (tests/test_notebooks.py does) and no stale run hides in it."""
    from initlib import store
    shipped = {p.name for p in (ROOT / "results" / "cpu").iterdir() if p.is_dir()}
    expected = _cpu_configs()
    assert shipped == set(expected)
    for h in shipped:
        files = {p.name for p in (ROOT / "results" / "cpu" / h).iterdir()}
        assert files == set(store.RUN_FILES), h
        assert store.damage(ROOT / "results" / "cpu" / h) is None, h
        assert store.is_done(ROOT / "results" / "cpu" / h)


def test_shipped_cpu_results_are_in_the_papers_regime():
    """Issue 12's regime, checked on what we ship: every low-LR SGD run of notebook 01
    interpolates (train accuracy >= 99.5% at some epoch) with T_SGD <= 1e-2 at its horizon, and
    every run's selected predictor is scored on all 10,000 test images."""
    from initlib.config import run_hash
    from initlib.params import load_params
    from initlib.sweep import bind_to_data
    sw = load_params(ROOT / "params" / "01_optimizer_dependence.yaml", "cpu")
    bind_to_data([sw])
    sgd = [c for c in sw.all_configs() if c["optimizer"] == "sgd"]
    assert len(sgd) >= 12
    for c in sgd:
        summary = json.loads((ROOT / "results" / "cpu" / run_hash(c) / "summary.json").read_text())
        assert summary["max_train_acc"] >= 0.995, (c["sigma_w"], c["seed"], summary["max_train_acc"])
        assert summary["T_SGD"] <= 1e-2, (c["sigma_w"], c["seed"], summary["T_SGD"])
    for h in _cpu_configs():
        summary = json.loads((ROOT / "results" / "cpu" / h / "summary.json").read_text())
        assert summary["selected_test_n"] == 10000, h


def test_readme_results_table_is_the_cpu_verdicts():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_results.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for p in NOTEBOOKS:
        assert (ROOT / "figures" / "cpu" / f"{p.stem}.png").exists()
        assert (ROOT / "figures" / "cpu" / f"{p.stem}.verdict.json").exists()


def _bench_script(name: str):
    """bench/<name>.py as a module (a script, not part of the package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _claims_pilot():
    return _bench_script("claims_pilot")


def assert_notes_quote(notes: str, out: str) -> None:
    """Every blank-line-separated part (table, verdict) of what a bench script printed appears,
    as printed, in its notes file ``bench/<notes>``."""
    text = (ROOT / "bench" / notes).read_text()
    for part in out.split("\n\n"):
        assert part in text, part


def test_the_claims_pilot_reads_a_grid_as_notebook_03_does():
    """bench/claims_pilot.py --verdict03 decides a pilot's two arms with notebook 03's rule; on
    03's shipped runs it must print the committed report's verdict, word and text."""
    pilot = _claims_pilot()
    shipped = json.loads((ROOT / "figures" / "cpu" / "03_l2_and_lr.verdict.json").read_text())
    out = pilot.verdict_03("shipped", (0,), (0.1,), (0.1,))
    assert f"**{shipped['word']}**: {shipped['ours']}" in out, out
    assert pilot.verdict_03("width0.25", (9,), (0.1,), (0.1,)).endswith("no verdict yet")  # seed 9: never run


def test_the_claims_pilot_reads_runs_as_notebook_05_does():
    """bench/claims_pilot.py --verdict05 decides depth runs with notebook 05's rule; on 05's
    shipped runs it must print the committed report's verdict, word and text."""
    shipped = json.loads((ROOT / "figures" / "cpu" / "05_depth.verdict.json").read_text())
    out = _claims_pilot().verdict_05("shipped")
    assert out.endswith(f"**{shipped['word']}**: {shipped['ours']}"), out


def test_the_resnet110_notes_are_what_the_pilot_prints():
    """bench/claims_pilot.md quotes `--verdict05 resnet110_w0.5` (05's rule on its ResNet-9 runs
    with the ResNet-110 pilot in place of ResNet-56): every run committed and done, the table and
    the verdict as printed from bench/claims_pilot_runs/."""
    pilot = _claims_pilot()
    out = pilot.verdict_05("resnet110_w0.5", pilot.PILOT_RUNS)
    assert "no verdict yet" not in out, out
    assert_notes_quote("claims_pilot.md", out)


def test_the_width05_notes_are_what_the_pilot_prints():
    """bench/claims_pilot.md quotes `--claims 01 --only width0.5` (01's SGD cell at 4x the width,
    seed 0, the sigma_w ends): both runs committed and done, its tables as printed from
    bench/claims_pilot_runs/."""
    pilot = _claims_pilot()
    out = pilot.printed_tables(pilot.keyed_pilot_configs(pilot.configs(["01"], ["width0.5"])), pilot.PILOT_RUNS)
    assert "(not run)" not in out and out.count("\n\n") == 1, out
    assert_notes_quote("claims_pilot.md", out)


def test_the_adaptive_width025_notes_are_what_the_pilot_prints():
    """bench/claims_pilot.md quotes `--claims 01 --only muon_width0.25,adam_width0.25,
    adamw_width0.25 --beside-shipped` (01's adaptive cells at 2x the width, seed 0, the sigma_w
    ends, and the same cells at width 0.125 from results/cpu): every run committed and done."""
    pilot = _claims_pilot()
    cfgs = pilot.keyed_pilot_configs(pilot.configs(["01"], ["muon_width0.25", "adam_width0.25", "adamw_width0.25"]))
    out = pilot.printed_tables(cfgs, pilot.PILOT_RUNS, beside_shipped=True)
    assert "(not run)" not in out and out.count("\n\n") == 3, out
    assert_notes_quote("claims_pilot.md", out)


def test_the_same_clock_tables_in_the_pilot_notes_are_what_the_pilot_prints():
    """bench/claims_pilot.md quotes `claims_pilot.py --same-clock03` (03's L2 doses as a 3 x 3
    design: lr 0.05, 0.1 and 0.15 at each eta lambda); its three committed tables must be what it
    prints from 03's runs with the last batch kept, wherever they are (results/cpu, or
    bench/claims_pilot_runs/ once 03's rerun with it dropped ships)."""
    pilot = _claims_pilot()
    out = pilot.same_clock_03()
    tables = out.split("\n\n")
    assert len(tables) == 3 and all(t.startswith("| ") for t in tables), out
    assert_notes_quote("claims_pilot.md", out)
    # every cell of the design is shipped: no pair or trend is left unread
    assert "none yet" not in out and "not all done" not in out, out


def test_the_replication_pilot_changes_only_the_data_split_and_the_seed():
    """bench/replication_pilot.py reruns verdict cells of the cpu profile on another split and
    seed: each of its runs is a shipped run (same data files, every other key the same, as the
    grid was when it ran: ``AS_RUN``) with only split_seed and seed changed."""
    from initlib.config import identity
    from initlib.params import load_params
    from initlib.sweep import bind_to_data
    pilot = _bench_script("replication_pilot")
    for name, (notebook, seeds) in pilot.REPLICATIONS.items():
        sw = load_params(ROOT / "params" / pilot.CELLS[notebook][0], "cpu")
        bind_to_data([sw], os.environ.get("INITLIB_DATA_DIR"))
        shipped = [identity({**c, **pilot.AS_RUN.get(notebook, {})}) for c in sw.configs]
        assert not set(seeds) & {c["seed"] for c in shipped} and pilot.SPLIT_SEED != 0, name
        runs = pilot.replication_configs(name)
        assert runs and len(runs) % len(seeds) == 0, name
        for c in runs:
            i = identity(c)
            assert i["split_seed"] == pilot.SPLIT_SEED and i["seed"] in seeds, i
            assert {**i, "split_seed": 0, "seed": 0} in shipped, i


def test_the_replication_notes_are_what_the_pilot_prints():
    """bench/replication_pilot.md quotes what `replication_pilot.py` prints from its committed
    runs (bench/replication_runs/): every run done, each table and verdict as printed."""
    pilot = _bench_script("replication_pilot")
    out = pilot.report()
    for name in pilot.REPLICATIONS:
        n = len(pilot.replication_configs(name))
        assert pilot.heading(name, n, n) in out, out
    assert_notes_quote("replication_pilot.md", out)


def test_the_batch_size_notes_are_what_the_pilot_prints():
    """bench/claims_pilot.md's table of 04's five b on both measures (session 39's, printed again
    in session 46 from the runs with the last batch dropped) is what `claims_pilot.py
    --batch-sizes04` prints from results/cpu, one row per b of 04's grid."""
    from initlib.params import load_params
    out = _claims_pilot().batch_sizes_04()
    grid = sorted({c["batch_size"] for c in load_params(ROOT / "params" / "04_batch_size.yaml", "cpu").configs})
    assert [line.split(" | ")[0] for line in out.splitlines()[2:]] == [f"| {b}" for b in grid], out
    assert_notes_quote("claims_pilot.md", out)


def test_the_last_batch_notes_are_what_claims_pilot_prints():
    """bench/claims_pilot.md's session-41 tables are what `claims_pilot.py --last-batch` prints:
    01/04's SGD runs by b with the last batch kept (one row per b of 04's grid; in
    bench/claims_pilot_runs/ since their reruns), and each committed pilot run with the last
    batch dropped beside its kept twin."""
    from initlib import store
    from initlib.params import load_params
    pilot = _claims_pilot()
    by_b = pilot.last_batch_by_b()
    grid = sorted({c["batch_size"] for c in load_params(ROOT / "params" / "04_batch_size.yaml", "cpu").configs})
    assert [line.split(" | ")[0] for line in by_b.split("\n\n")[0].splitlines()[2:]] == [f"| {b}" for b in grid]
    assert_notes_quote("claims_pilot.md", by_b)
    quoted = 0
    for claim, names in pilot.CANDIDATES.items():  # each candidate as `--claims C --only NAME` prints it
        for name in (n for n in names if n.endswith("drop_last")):
            cfgs = pilot.keyed_pilot_configs(pilot.configs([claim], [name]))
            if all(store.is_done(store.run_dir(pilot.PILOT_RUNS, c)) for c in cfgs.values()):
                assert_notes_quote("claims_pilot.md", pilot.last_batch_pairs(cfgs, pilot.PILOT_RUNS))
                quoted += 1
    assert quoted >= 2


def test_the_t_adapt_notes_are_what_notebook_06_reports():
    """bench/claims_pilot.md's latest table of 06's T_adapt family (the last block after "Notebook
    06's T_adapt rows": session 40's, Muon at three lr, as it then was; session 44's, after 01's
    rerun) quotes the T_adapt rows of notebook 06's committed cpu report, every one of them and
    nothing else."""
    from initlib.notebook import checked_outputs, read_notebook
    table = checked_outputs(read_notebook(ROOT / "reports" / "cpu" / "06_clocks.ipynb"))[0]
    reported = [line for line in table.splitlines() if line.split()[1:2] == ["T_adapt"]]
    notes = (ROOT / "bench" / "claims_pilot.md").read_text().rsplit("Notebook 06's T_adapt rows", 1)[1]
    block = notes.split("```", 2)[1].strip("\n").splitlines()
    quoted = [line for line in block if line.split()[1:2] == ["T_adapt"]]
    assert len(reported) >= 5 and quoted == reported, (quoted, reported)
    assert block[0] == table.splitlines()[0]  # the report's header


def test_verdicts_side_by_side_shows_a_verdict_that_changes(tmp_path):
    """`python -m initlib verdicts A B` (what `make replica` ends with): one row per finding,
    each folder's verdict word and numbers; a verdict that differs shows both words, a finding
    a folder lacks reads '-'."""
    import shutil
    shipped = ROOT / "figures" / "cpu"
    a, b = tmp_path / "cpu", tmp_path / "cpu-replica1"
    shutil.copytree(shipped, a, ignore=shutil.ignore_patterns("*.png", "*.pdf"))
    b.mkdir()
    v = json.loads((shipped / "02_long_training.verdict.json").read_text())  # one that holds
    (b / "02_long_training.verdict.json").write_text(json.dumps({**v, "holds": False, "measured": []}))
    from initlib.notebook import verdicts_side_by_side
    out = verdicts_side_by_side([a, b]).splitlines()
    assert out[0] == "| finding | cpu: verdict | cpu-replica1: verdict | cpu: numbers | cpu-replica1: numbers |"
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in out[2:]}
    assert len(rows) == len(list(shipped.glob("*.verdict.json")))
    assert rows["02_long_training"][1:3] == ["holds", "does not hold at this scale"]
    assert rows["01_optimizer_dependence"][2] == "-"
    other = tmp_path / "other" / "cpu"  # a second folder named cpu: columns by path
    shutil.copytree(b, other)
    assert verdicts_side_by_side([a, other]).splitlines()[0].startswith(f"| finding | {a}: verdict | {other}: verdict |")
    empty = subprocess.run([sys.executable, "-m", "initlib", "verdicts", str(tmp_path / "none")], cwd=ROOT,
                           capture_output=True, text=True)
    assert empty.returncode == 2 and "no *.verdict.json" in empty.stderr


def test_the_corner_notes_of_03_are_what_claims_pilot_prints():
    """bench/claims_pilot.md's session-48 table is what `claims_pilot.py --corners03` prints:
    notebook 03's rule on its two corner cells (the only cells it decides on), last batch kept
    beside dropped, every corner run of both done (the dropped ones in bench/rerun_drop_runs/ until
    03 ships, in results/cpu after), one row per measure and side; the kept selected row is the
    word 03's shipped report reads until then."""
    out = _claims_pilot().corners_03()
    assert "incomplete" not in out, out
    assert out.count("| kept |") == out.count("| dropped |") == 2, out
    assert "| selected | kept |" in out and out.split("| selected | kept |")[1].splitlines()[0].endswith("| holds |")
    assert_notes_quote("claims_pilot.md", out)


@pytest.mark.parametrize("notebook, rows", [("01_optimizer_dependence", 4 * 2 + 4), ("04_batch_size", 5 * 2 + 5),
                                            ("06_clocks", 2 * 2 + 2), ("03_l2_and_lr", 13 * 2 + 13)])
def test_the_rerun_notes_are_what_claims_pilot_prints(notebook, rows):
    """bench/claims_pilot.md's tables of a shipped rerun (session 44: 01's; 45: 06's; 46: 04's;
    51: 03's) are what `claims_pilot.py --rerun NOTEBOOK` prints: its cpu grid with the last batch
    kept (bench/claims_pilot_runs/) beside its rerun with it dropped (results/cpu), every run of
    both done, one row per value of the grid's factor (01: optimizer, 04: b, 06: lr, 03: its
    (lr, L2) cell), measure and last batch. Each side is read wherever its runs are (results/cpu,
    bench/claims_pilot_runs/)."""
    out = _claims_pilot().rerun(notebook)
    assert "incomplete" not in out, out
    assert out.count("| kept |") == out.count("| dropped |") == rows, out
    assert_notes_quote("claims_pilot.md", out)
