"""The search table of results/first_run/README.md: every run, both samplers and SC-CFG scales, and
real text's row under each.

    python results/first_run/table.py                # table.md from the kept table.json
    python results/first_run/table.py --collect \
        runs/first_run/eval runs/first_run/runs.txt  # from the runs' reports

Two steps: collect reads each run's report.json (run.sh writes them to runs/first_run/eval/NAME/)
and the overrides run.sh logged (runs.txt) into table.json; render writes table.md from
table.json alone, so the table is rebuilt byte for byte from what results/first_run keeps.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command

HERE = os.path.dirname(os.path.abspath(__file__))


def collect(root, runs_txt=None):
    runs_txt = runs_txt or os.path.join(os.path.dirname(root), "runs.txt")
    overrides = {}
    for line in open(runs_txt):
        name, _, args = line.strip().partition(" ")
        overrides[name] = args or "(base)"
    runs = []
    for name in sorted(
        d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "report.json"))
    ):
        rep = json.load(open(os.path.join(root, name, "report.json")))
        rows = []
        for r in rep["results"]:
            s = r["setting"]
            rows.append(
                {
                    "label": f"{s['sampler']} {s['steps']}, w {s['sc_cfg']:g}"
                    if "sampler" in s
                    else "samples",
                    "ppl": r["ppl"]["mean"],
                    "ppl_se": r["ppl"]["se"],
                    "ppl_ratio": r["ppl_ratio"],
                    "entropy": r["entropy"]["mean"],
                    "entropy_ratio": r["entropy_ratio"],
                    "repetition": r["repetition"]["mean"],
                    "copies": r["copies"]["mean"],
                }
            )
        real = rep["reference"]["real"]
        runs.append(
            {
                "run": name,
                "overrides": overrides.get(name, "?"),
                "rows": rows,
                "real": {k: real[k]["mean"] for k in ("ppl", "entropy", "repetition", "copies")},
            }
        )
    return {"runs": runs}


def render(table):
    lines = [
        "| run | overrides of configs/tiny.py | sampler | Gen. PPL (x real) | "
        "entropy (x real) | repetition | copies |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in table["runs"]:
        name = run["run"]
        for r in run["rows"]:
            lines.append(
                f"| {name} | `{run['overrides']}` | {r['label']} | "
                f"{r['ppl']:.0f} ± {r['ppl_se']:.0f} ({r['ppl_ratio']:.2f}) | "
                f"{r['entropy']:.2f} ({r['entropy_ratio']:.2f}) | "
                f"{r['repetition']:.2f} | {r['copies']:.2f} |"
            )
        real = run["real"]
        lines.append(
            f"| {name}: real text | | | {real['ppl']:.0f} | {real['entropy']:.2f} | "
            f"{real['repetition']:.2f} | {real['copies']:.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/first_run/eval")
