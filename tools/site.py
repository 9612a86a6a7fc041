"""A static HTML report of the executed notebooks of one profile.

    python tools/site.py cpu      # -> build/site/cpu/index.html (+ one page per notebook)

The index is the results table (from figures/<profile>/*.verdict.json: the paper's number,
ours, the verdict and the rule that decided it), each finding linked to its executed notebook
rendered by nbconvert, with its figures inline. Open index.html in a browser; no server needed.
"""
from __future__ import annotations

import html
import shutil
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from initlib.notebook import results_rows  # noqa: E402

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.4em 0.6em; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
td.holds { background: #e3f4e3; font-weight: bold; }
td.doesnothold { background: #fbe4e1; font-weight: bold; }
td.undecided { background: #f4f0d9; font-weight: bold; }
.rule { color: #555; font-size: 0.85em; }
img { max-width: 100%; }
"""


def build(profile: str) -> Path:
    reports = ROOT / "reports" / profile
    notebooks = sorted(reports.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        sys.exit(f"no executed notebooks in {reports}: run `make {profile}` or "
                 f"`make figures PROFILE={profile}` first")
    out = ROOT / "build" / "site" / profile
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    exporter = HTMLExporter(template_name="lab")
    for nb_path in notebooks:
        body, _ = exporter.from_notebook_node(nbformat.read(nb_path, as_version=4))
        (out / f"{nb_path.stem}.html").write_text(body)
    rows = []
    for r in results_rows(ROOT / "figures" / profile):
        cls = r["verdict"].replace(" at this scale", "").replace(" ", "")
        link = f'<a href="{r["name"]}.html">{html.escape(r["title"])}</a>'
        rows.append(f"<tr><td>{link}</td><td>{html.escape(r['paper'])}</td>"
                    f"<td>{html.escape(r['ours'])}<div class='rule'>Rule: {html.escape(r['rule'])}</div></td>"
                    f"<td class='{cls}'>{html.escape(r['verdict'])}</td></tr>")
    figure = ROOT / "figures" / profile / "01_optimizer_dependence.png"
    img = ""
    if figure.exists():
        shutil.copy(figure, out / figure.name)
        img = f'<p><img src="{figure.name}" alt="Finding 1, {profile} profile"></p>'
    index = f"""<!doctype html><html><head><meta charset="utf-8">
<title>initmem: results ({profile} profile)</title><style>{STYLE}</style></head><body>
<h1>Do Deep Networks Forget Initialization? Results, <code>{profile}</code> profile</h1>
<p>Each row is one finding of the paper: its number, ours (computed from the runs in
<code>results/{profile}</code>), and the verdict with the rule that decided it. Click a finding for
its executed notebook: the claim, the parameters, the table and the figures.</p>
<table><tr><th>Finding (paper)</th><th>Paper's number</th><th>Ours</th><th>Verdict</th></tr>
{''.join(rows)}</table>{img}
<p>Notebooks: {' · '.join(f'<a href="{p.stem}.html">{p.stem}</a>' for p in notebooks)}</p>
</body></html>"""
    (out / "index.html").write_text(index)
    return out / "index.html"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("wrote", build(sys.argv[1]).relative_to(ROOT))
