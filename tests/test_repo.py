"""Repository hygiene: notebooks stored clean, packaging files that agree."""
import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_six_notebooks_stored_without_outputs_with_a_parameters_cell():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06"]
    for p in NOTEBOOKS:
        nb = json.loads(p.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(not c["outputs"] and c["execution_count"] is None for c in code), p.name
        assert sum("parameters" in c["metadata"].get("tags", []) for c in code) == 1, p.name
        assert (ROOT / "params" / f"{p.stem}.yaml").exists()
        assert any("# NBVAL_CHECK_OUTPUT" in "".join(c["source"]) and "verdict" in "".join(c["source"])
                   for c in code), p.name


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
    from initlib.sweep import load_params
    return {run_hash(c): c for p in sorted((ROOT / "params").glob("0*.yaml"))
            for c in load_params(p, "cpu").all_configs()}


def test_shipped_cpu_results_are_exactly_the_cpu_profile_runs():
    """results/cpu holds every run of the cpu profile (config, metrics, summary; no
    checkpoints), and nothing else: so its tables can be rebuilt without training (the cpu
    goldens in tests/golden_cpu do that, under nbval) and no stale run hides in it."""
    from initlib import store
    shipped = {p.name for p in (ROOT / "results" / "cpu").iterdir() if p.is_dir()}
    expected = _cpu_configs()
    assert shipped == set(expected)
    for h in shipped:
        files = {p.name for p in (ROOT / "results" / "cpu" / h).iterdir()}
        assert files == set(store.RUN_FILES), h
        assert json.loads((ROOT / "results" / "cpu" / h / "config.json").read_text())["hash"] == h


def test_cpu_goldens_analyse_the_shipped_results_without_training():
    for p in sorted((ROOT / "tests" / "golden_cpu").glob("*.ipynb")):
        nb = json.loads(p.read_text())
        injected = "".join(next(c["source"] for c in nb["cells"]
                                if "injected-parameters" in c["metadata"].get("tags", [])))
        assert 'profile = "cpu"' in injected and "train = False" in injected, p.name
    assert len(list((ROOT / "tests" / "golden_cpu").glob("*.ipynb"))) == 6


def test_readme_results_table_is_the_cpu_verdicts():
    import subprocess
    import sys
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_results.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in ("01_optimizer_dependence", "06_clocks"):
        assert (ROOT / "figures" / "cpu" / f"{name}.png").exists()
        assert (ROOT / "figures" / "cpu" / f"{name}.pdf").exists()
