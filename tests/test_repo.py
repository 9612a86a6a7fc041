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
