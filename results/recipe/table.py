"""The search table of results/recipe/: one row per run, the error decomposition beside the
yardstick.

    python results/recipe/table.py             # table.md from the kept table.json
    python results/recipe/table.py --collect \
        runs/recipe/eval                       # table.json from the runs' reports, then table.md

Two steps: collect reads each run's report.json and metrics.jsonl (run.sh writes them to
runs/recipe/eval/NAME/) into table.json, the numbers the table shows; render writes table.md
from table.json alone, so the table is rebuilt byte for byte from what results/recipe keeps.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.outputs import run_summary
from lib.report import table_command

HERE = os.path.dirname(os.path.abspath(__file__))
GRID = {"logit_normal": "LN", "uniform": "uniform"}


def collect_run(folder, name):
    """One run's row: the figures of its first scoring, its last validation losses, the
    decomposition."""
    rep = json.load(open(os.path.join(folder, "report.json")))
    r = rep["results"][0]
    d = rep.get("decomposition")
    last = run_summary(folder)
    row = {
        "run": name,
        "steps": last["steps"],
        "grid": r["setting"]["grid"],
        "val_mse": last["val_mse"],
        "val_ce": last["val_ce"],
        "real_ppl": rep["reference"]["real"]["ppl"]["mean"],
        "ppl_ratio": r["ppl_ratio"],
        "ppl_se": r["ppl"]["se"],
        "entropy_ratio": r["entropy_ratio"],
        "repetition": r["repetition"]["mean"],
        "copies": r["copies"]["mean"],
        "example": r["examples"][0],
    }
    if d:
        rt = {x["t0"]: x for x in d["round_trip"]}
        row["decomposition"] = {
            "acc_text": d["decoder"]["acc_text"],
            "nn_acc_text": d["decoder"]["nn_acc_text"],
            "acc_text_seen": d["decoder"].get("acc_text_seen"),
            "round_trip_0.9": [rt[0.9]["acc_text"], rt[0.9]["repetition"]],
            "round_trip_0.5": [rt[0.5]["acc_text"], rt[0.5]["repetition"]],
            "adjacent_cosine_first_step_text": d["adjacent_cosine"]["first_step_text"],
            "adjacent_cosine_real_text": d["adjacent_cosine"]["real_text"],
        }
    # the same checkpoint on the other time grid, where the evaluation swept it
    o = next(
        (
            x
            for x in rep["results"][1:]
            if x["setting"]["grid"] != r["setting"]["grid"]
            and x["setting"]["steps"] == r["setting"]["steps"]
            and x["setting"]["sampler"] == r["setting"]["sampler"]
        ),
        None,
    )
    if o:
        row["other_grid"] = {
            "grid": o["setting"]["grid"],
            "ppl_ratio": o["ppl_ratio"],
            "ppl_se": o["ppl"]["se"],
            "entropy_ratio": o["entropy_ratio"],
            "repetition": o["repetition"]["mean"],
        }
    return row


def collect(root):
    names = sorted(
        d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "report.json"))
    )
    return {"rows": [collect_run(os.path.join(root, n), n) for n in names]}


def render_row(x):
    d, o, real = x.get("decomposition"), x.get("other_grid"), x["real_ppl"]
    cells = [
        x["run"],
        str(x["steps"]),
        GRID[x["grid"]],
        f"{x['val_mse']:.3f}",
        f"{x['val_ce']:.2f}",
    ]
    if d:
        cells += [
            f"{d['acc_text']:.3f}",
            f"{d['nn_acc_text']:.3f}",
            f"{d['round_trip_0.9'][0]:.2f} / {d['round_trip_0.9'][1]:.2f}",
            f"{d['round_trip_0.5'][0]:.2f} / {d['round_trip_0.5'][1]:.2f}",
            f"{d['adjacent_cosine_first_step_text']:.2f} ({d['adjacent_cosine_real_text']:.2f})",
        ]
    else:
        cells += [""] * 5
    cells += [
        f"{x['ppl_ratio']:.2f} ± {x['ppl_se'] / real:.2f}",
        f"{x['entropy_ratio']:.2f}",
        f"{x['repetition']:.2f}",
        f"{x['copies']:.2f}",
    ]
    cells += [
        f"{GRID[o['grid']]}: {o['ppl_ratio']:.2f} ± {o['ppl_se'] / real:.2f} / "
        f"{o['entropy_ratio']:.2f} / {o['repetition']:.2f}"
        if o
        else ""
    ]
    cells += [
        f"{d['acc_text_seen']:.3f}" if d and d["acc_text_seen"] is not None else "",
        x["example"],
    ]
    return "| " + " | ".join(cells) + " |"


def render(table):
    lines = [
        "| run | steps | grid | val MSE | val CE | decoder (clean) | nearest latent | "
        "round trip 0.9 acc / rep | round trip 0.5 acc / rep | "
        "neighbours' cos, 1st step (real) | Gen. PPL / real | entropy / real | "
        "repetition | copies | the other grid: PPL / entropy / repetition | "
        "decoder on tokens training shows | first sample |",
        "|---" * 17 + "|",
    ]
    return "\n".join(lines + [render_row(x) for x in table["rows"]]) + "\n"


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/recipe/eval")
