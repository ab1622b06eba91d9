"""The few-step students of results/distill_tiny/: per time grid, the trajectory error, Gen. PPL and
entropy of the teacher and of every round at 1, 2, 4 and 8 steps, in the layout of the report.md
that `python evaluate.py --distill` writes.

    python results/distill_tiny/table.py             # table.md from the kept table.json
    python results/distill_tiny/table.py --collect \
        runs/distill_tiny/eval                       # table.json from the reports, then table.md

Two steps: collect reads the two reports run.sh writes (runs/distill_tiny/eval/logit_normal/ and
uniform/report.json) into table.json; render writes table.md from table.json alone, so the
table is rebuilt byte for byte from what is kept.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command

HERE = os.path.dirname(os.path.abspath(__file__))
GRIDS = (
    ("logit_normal", "The presets' logit-normal grid (the release's)"),
    ("uniform", "The uniform grid (`--grid uniform`)"),
)


def collect(root):
    out = []
    for grid, _ in GRIDS:
        rep = json.load(open(os.path.join(root, grid, "report.json")))
        out.append(
            {
                "grid": grid,
                "n": rep["n"],
                "seeds": rep["seeds"],
                "git_commit": rep["git_commit"],
                "rows": [
                    {
                        "model": r["model"],
                        "steps": r["steps"],
                        "traj_err": r["traj_err"],
                        "ppl": r["ppl"],
                        "entropy": r["entropy"]["mean"],
                    }
                    for r in rep["rows"]
                ],
            }
        )
    return {"grids": out}


def render(table):
    parts = []
    for g, (_grid, title) in zip(table["grids"], GRIDS):
        lines = [
            f"## {title}",
            "",
            "| model | steps | trajectory error | Gen. PPL | entropy |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['model']} | {r['steps']} | {r['traj_err']:.4f} | "
            f"{r['ppl']['mean']:.1f} ± {r['ppl']['se']:.1f} | "
            f"{r['entropy']:.3f} |"
            for r in g["rows"]
        ]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/distill_tiny/eval")
