"""Regenerate the nbval goldens: the six notebooks executed by papermill, images stripped.

    python tools/make_goldens.py smoke   # tests/golden/: trains the smoke runs in a fresh store
    python tools/make_goldens.py cpu     # tests/golden_cpu/: analyses results/cpu, never trains

Run this only when a checked output is meant to change (a new table column, a new verdict
rule, new shipped results), and say why in the commit. The smoke goldens must come from a
fresh store, so that CI (which retrains from nothing) is compared with the same thing.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
import papermill as pm

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("0*.ipynb"))
OUT = {"smoke": ROOT / "tests" / "golden", "cpu": ROOT / "tests" / "golden_cpu"}


def strip_images(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if o.get("output_type") != "display_data"]
    return nb


def main(profile: str) -> None:
    from initlib import store
    out = OUT[profile]
    out.mkdir(parents=True, exist_ok=True)
    store_dir = tempfile.mkdtemp(prefix="initlib-golden-store-")
    os.environ["INITLIB_STORE"] = store_dir
    params = {"profile": profile}
    if profile == "cpu":
        n = store.import_runs(ROOT / "results" / "cpu", store_dir)
        print(f"imported {n} runs from results/cpu")
        params["train"] = False
    # Figures of golden runs (and of nbval's reruns of them) go to an ignored folder, never
    # over the committed figures/ (a PDF carries its creation date).
    params["out_dir"] = "../build/golden-figures"  # relative to notebooks/, papermill's cwd
    for name in NOTEBOOKS:
        dst = out / f"{name}.ipynb"
        pm.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(dst),
                            parameters=params, kernel_name="python3", cwd=str(ROOT / "notebooks"),
                            progress_bar=False)
        nbformat.write(strip_images(nbformat.read(dst, as_version=4)), dst)
        print("wrote", dst.relative_to(ROOT))


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in OUT:
        sys.exit(__doc__)
    main(sys.argv[1])
