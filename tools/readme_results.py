"""Write the README's results table from the verdict files of the cpu profile.

    python tools/readme_results.py          # rewrite the block between the results markers
    python tools/readme_results.py --check  # exit 1 if the README is not what it would write

The chain that keeps the README honest: results/cpu (the shipped runs) -> the notebooks,
executed on them, write figures/cpu/<name>.verdict.json (tests/test_notebooks.py re-executes
them and compares) -> this script copies the verdicts into the README -> tests/test_repo.py
checks the README against this script.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from initlib.notebook import results_rows  # noqa: E402

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def block() -> str:
    rows = ["| Finding (paper) | Paper's number | Ours, `cpu` profile [95% interval] | Noise floor (95% quantile) "
            "| Verdict | Notebook · figure |",
            "|---|---|---|---|---|---|"]
    for r in results_rows(ROOT / "figures" / "cpu"):
        ours = r["headline"].replace("|", "\\|")
        rows.append(f"| {r['title']} | {r['paper']} | {ours} | {r['floor']} | **{r['verdict']}** | "
                    f"[notebook](reports/cpu/{r['name']}.ipynb) · [png](figures/cpu/{r['name']}.png) |")
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
