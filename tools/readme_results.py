"""Write the README's results table from the executed cpu notebooks' verdict cells.

    python tools/readme_results.py          # rewrite the block between the results markers
    python tools/readme_results.py --check  # exit 1 if the README is not what it would write

The chain that keeps the README honest: results/cpu (the shipped runs) -> nbval re-executes
tests/golden_cpu/*.ipynb on them and compares each table and verdict -> this script copies the
verdicts into the README -> tests/test_repo.py checks the README against this script.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden_cpu"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
FINDINGS = [  # notebook, what the paper claims (its words, see ../shared/PAPER.md)
    ("01_optimizer_dependence", "1. Low-LR SGD remembers sigma_w; Adam, AdamW, Muon forget"),
    ("02_long_training", "2. Long training is not enough"),
    ("03_l2_and_lr", "3. Larger LR with explicit L2 makes SGD forget"),
    ("04_batch_size", "4. The spread grows with the batch size"),
    ("05_depth", "5. Deep ResNets fail to interpolate at large sigma_w"),
    ("06_clocks", "6. Clocks, not epochs, govern forgetting"),
]
VERDICT = re.compile(r"^0\d [^:]+: (HOLDS|DOES NOT HOLD at this scale|UNDECIDED): (.*?)(?: \(paper: (.*)\))?$")


def verdict_line(nb_path: Path) -> tuple[str, str, str]:
    nb = nbformat.read(nb_path, as_version=4)
    for cell in reversed(nb.cells):
        for out in cell.get("outputs", []):
            for line in out.get("text", "").splitlines():
                m = VERDICT.match(line)
                if m:
                    return m.group(1), m.group(2), m.group(3) or ""
    raise SystemExit(f"{nb_path}: no verdict line")


def block() -> str:
    rows = ["| Finding (paper) | Paper's number | Ours: `cpu` profile (mean and min..max over seeds) "
            "| Verdict | Figure |", "|---|---|---|---|---|"]
    for name, claim in FINDINGS:
        word, ours, paper = verdict_line(GOLDEN / f"{name}.ipynb")
        word = "**holds**" if word == "HOLDS" else f"**{word.lower()}**"
        ours = ours.replace("|", "\\|")
        rows.append(f"| {claim} | {paper} | {ours} | {word} | [png](figures/cpu/{name}.png) · "
                    f"[pdf](figures/cpu/{name}.pdf) |")
    return "\n".join([BEGIN, *rows, END])


def main(check: bool) -> int:
    readme = ROOT / "README.md"
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        print(f"README.md has no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    new = text[:text.index(BEGIN)] + block() + text[text.index(END) + len(END):]
    if check:
        if new != text:
            print("README.md results table is out of date: run python tools/readme_results.py",
                  file=sys.stderr)
            return 1
        return 0
    readme.write_text(new)
    print("README.md results table written")
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
