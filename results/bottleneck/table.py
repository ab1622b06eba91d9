"""The default's bottleneck decided again (results/bottleneck/README.md): the sweep's table,
from table.json.

    python results/bottleneck/table.py                 # table.md from the kept table.json
    python results/bottleneck/table.py --collect \
        runs/ablations/reports/bottleneck_sweep        # table.json from the sweep's report

collect reads the report.json that run.sh has tools.ablate write (one folder per sweep: the
5-seed sweep, and any narrower one) into table.json, each training seed's figures kept beside
the means, with the arms at matched diversity and every row's provenance, and copies the
sweep's frontier plot here as <name>.png; render writes table.md from table.json alone, so the
table rebuilds byte for byte from what is kept.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command
from tools.ablate import kept_entry, render_entries

HERE = os.path.dirname(os.path.abspath(__file__))
PER_SEED = (
    "seed",
    "kn_ppl_ratio",
    "distinct_2_matched",
    "mauve",
    "length",
    "copies",
    "ngrams_seen",
    "entropy_ratio",
)


def collect(*folders):
    """Each sweep's report.json (a tools.ablate report folder), in the order given."""
    sweeps = []
    for folder in folders:
        with open(os.path.join(folder, "report.json")) as f:
            entry = kept_entry(json.load(f), PER_SEED)
        if os.path.exists(os.path.join(folder, "ablation.png")):
            name = entry["config"]["name"]
            shutil.copyfile(os.path.join(folder, "ablation.png"), os.path.join(HERE, f"{name}.png"))
        sweeps.append(entry)
    return {"sweeps": sweeps}


def render(table):
    return render_entries(table["sweeps"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/bottleneck_sweep")
