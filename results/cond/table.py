"""The offline conditional demos of results/cond/: per run, every setting's BLEU, ROUGE and output
entropy (mean ± s.e. over 3 sampling seeds) beside the two trivial systems, in the layout of the
table evaluate.py writes at the top of each run's report.md.

    python results/cond/table.py                 # table.md from the kept table.json
    python results/cond/table.py --collect \
        runs/cond/eval                           # table.json from the reports, then table.md

Two steps: collect reads each run's report.json (run.sh has evaluate.py write them to
runs/cond/eval/NAME/) into table.json and copies the guidance plots of PLOTS here; render
writes table.md from table.json alone, so the table is rebuilt byte for byte from what is kept.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTS = ("de_en_dec02", "summary_in24")  # guidance.png of these runs -> guidance_<run>.png
METRICS = ("bleu", "rouge1", "rouge2", "rougeL", "entropy")


def label(s) -> str:
    """evaluate.py's name of a sampler setting."""
    return (
        f"{s['sampler']} {s['steps']} steps, SC-CFG {s['sc_cfg']:g}"
        + (f", gamma {s['gamma']:g}" if s["sampler"] == "sde" else "")
        + f", {s['grid']}"
    )


def collect(root):
    runs = []
    for name in sorted(
        d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "report.json"))
    ):
        rep = json.load(open(os.path.join(root, name, "report.json")))
        runs.append(
            {
                "run": name,
                "n": rep["n"],
                "seeds": rep["seeds"],
                "rows": [
                    {
                        "setting": label(r["setting"]),
                        "guidance": r["setting"].get("guidance", 1.0),
                        "nfe": r["nfe"],
                        **{m: r[m] for m in METRICS},
                    }
                    for r in rep["results"]
                ],
                "baselines": {k: {m: b[m] for m in METRICS} for k, b in rep["baselines"].items()},
                "reference_entropy": rep["reference_entropy"],
            }
        )
        if name in PLOTS and os.path.exists(os.path.join(root, name, "guidance.png")):
            shutil.copyfile(
                os.path.join(root, name, "guidance.png"), os.path.join(HERE, f"guidance_{name}.png")
            )
    return {"runs": runs}


def render_one(run):
    f = lambda v: f"{v['mean']:.2f} ± {v['se']:.2f}" if isinstance(v, dict) else f"{v:.2f}"
    lines = [
        f"## `{run['run']}`",
        "",
        f"{run['n']} held-out pairs, seeds {run['seeds']}: mean ± standard error over seeds "
        "(the trivial systems: ROUGE ± its standard error over pairs). Entropy: unigram, "
        "the encoder's tokens.",
        "",
        "| setting | CFG | NFE | BLEU | ROUGE-1 | ROUGE-2 | ROUGE-L | entropy |",
        "|---" * 8 + "|",
    ]
    lines += [
        f"| {r['setting']} | {r['guidance']:g} | {r['nfe']} | "
        + " | ".join(f(r[m]) for m in METRICS)
        + " |"
        for r in run["rows"]
    ]
    lines += [
        f"| **{name}** | | | " + " | ".join(f(b[m]) for m in METRICS) + " |"
        for name, b in run["baselines"].items()
    ]
    lines += [f"| **references** | | | | | | | {run['reference_entropy']:.2f} |"]
    return "\n".join(lines) + "\n"


def render(table):
    return "\n".join(render_one(run) for run in table["runs"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/cond/eval")
