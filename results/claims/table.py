"""The claims of results/claims/ in one table.md: per claim the table that tools/ablate.py
wrote (its report.md, rendered by tools.ablation_report.markdown), from table.json.

    python results/claims/table.py                  # table.md from the kept table.json
    python results/claims/table.py --collect \
        runs/ablations/reports                      # table.json from the reports, then table.md

Two steps: collect reads each claim's report.json (run.sh has tools.ablate write them to
runs/ablations/reports/NAME/) into table.json, without the machine's paths (the judge's
absolute path), each training seed's headline figures kept beside the mean (a claim without a
report there keeps its entry), and copies the plots of PLOTS here; render writes table.md from
table.json alone, so the table rebuilds byte for byte from what is kept.
"""

import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command
from tools.ablation import kept_entry
from tools.ablation_report import render_entries

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = (
    "shared_decoder",
    "self_conditioning",
    "sc_cfg",
    "samplers",
    "embeddings",
    "prediction",
    "denoise_share",
    "bottleneck",
    "bottleneck_3seeds",
    "embeddings_encoder",
    "scale",
    "scale_time",
    "third_seed",
    "sc_time",
)
PLOTS = ("samplers", "embeddings", "bottleneck")  # their ablation.png -> <name>.png here
PER_SEED = ("seed", "ppl_ratio", "entropy_ratio", "copies", "dec_acc")


def portable(text):
    """A setting without this machine's paths: a judge under judges/ named from there."""
    return re.sub(r"\S*/(judges/\S+)", r"\1", text)


def collect(root, kept=os.path.join(HERE, "table.json")):
    """Each claim's report.json under root; a claim with none there keeps its entry in the kept
    table.json (claims are measured a few at a time, on the machines at hand)."""
    before = {}
    if os.path.exists(kept):
        with open(kept) as f:
            before = {c["config"]["name"]: c for c in json.load(f)["claims"]}
    out = []
    for name in ORDER:
        path = os.path.join(root, name, "report.json")
        if not os.path.exists(path):
            out += [before[name]] if name in before else []
            continue
        with open(path) as f:
            rep = json.load(f)
        if name in PLOTS and os.path.exists(os.path.join(root, name, "ablation.png")):
            shutil.copyfile(
                os.path.join(root, name, "ablation.png"), os.path.join(HERE, f"{name}.png")
            )
        out.append(kept_entry(rep, PER_SEED, portable))
    return {"claims": out}


def render(table):
    return render_entries(table["claims"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports")
