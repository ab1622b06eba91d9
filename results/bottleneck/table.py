"""The default's bottleneck decided again (results/bottleneck/README.md): the sweep's table,
from table.json.

    python results/bottleneck/table.py                 # table.md from the kept table.json
    python results/bottleneck/table.py --collect \
        runs/ablations/reports/bottleneck_sweep        # table.json from the sweep's report
    python results/bottleneck/table.py --collect \
        runs/ablations/reports/bottleneck_narrow       # adds a sweep; the others are kept

collect reads the report.json that run.sh has tools.ablate write (one folder per sweep: the
5-seed sweep, and any narrower one) into table.json, each training seed's figures kept beside
the means, with the arms at matched diversity and every row's provenance, and copies the
sweep's frontier plot here as <name>.png. A sweep already in table.json and not given keeps
its entry (sweeps are measured one at a time, on the machines at hand). A sweep given with the
arms and settings of a kept one joins it seed by seed (tools.ablation.join_seeds: a sweep
continued on other seeds adds them, a seed given again takes the new figures; means, paired
intervals and plot over every seed, each row's provenance naming both machines); a sweep of
the same name with other settings replaces it (tools.ablation_report.kept_and_new). render
writes table.md from table.json alone, so the table rebuilds byte for byte from what is kept.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import read_table, table_command
from tools.ablation import INSTRUMENT_SEED, LOSSES
from tools.ablation_report import kept_and_new, render_entries

HERE = os.path.dirname(os.path.abspath(__file__))
# the figures each training seed keeps: the instrument's, the judges' ratios, the losses
PER_SEED = (*INSTRUMENT_SEED, "entropy_ratio", "repetition", "entropy", "ppl_ratio", *LOSSES)


def collect(*folders, kept=os.path.join(HERE, "table.json"), plots_to=HERE):
    """Each sweep's report.json (a tools.ablate report folder), after the kept sweeps of other
    names, in the order given; a continuation of a kept sweep joined to it."""
    sweeps = read_table(kept)["sweeps"] if os.path.exists(kept) else []
    return {"sweeps": kept_and_new(sweeps, folders, PER_SEED, plots_to)}


def render(table):
    return render_entries(table["sweeps"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/bottleneck_sweep")
