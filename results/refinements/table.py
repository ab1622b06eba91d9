"""Claims 4, 5 and 6 re-issued with the instrument (results/refinements/README.md): the table,
from table.json.

    python results/refinements/table.py                 # table.md from the kept table.json
    python results/refinements/table.py --collect \
        runs/ablations/reports/refinements \
        runs/ablations/reports/refinements_share         # table.json from run.sh's reports
    python results/refinements/table.py --collect \
        runs/ablations/reports/refinements_gpt2          # adds the GPT-2 judge's reading

collect keeps each report.json that run.sh has tools.ablate write (each arm along the SDE's
gamma, each training seed's figures beside the means, every arm minus the default paired by
seed, every row's provenance) in table.json, after the kept entries of other names (measured
on other machines: their runs need not be here), in the order given, and copies each one's
frontier plot here as <name>.png; a report of a kept entry's name and settings joins it seed
by seed, one of other settings replaces it (tools.ablation_report.kept_and_new). render writes
table.md from table.json alone, so the table rebuilds byte for byte from what is kept.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import read_table, table_command
from tools.ablation import INSTRUMENT_SEED
from tools.ablation_report import kept_and_new, render_entries

HERE = os.path.dirname(os.path.abspath(__file__))
# the figures each training seed keeps: the instrument's, entropy, the GPT-2 judge's ratio
PER_SEED = (*INSTRUMENT_SEED, "entropy_ratio", "ppl_ratio")


def collect(*folders, kept=os.path.join(HERE, "table.json"), plots_to=HERE):
    """Each report.json (a tools.ablate report folder), after the kept entries of other names,
    in the order given; a continuation of a kept entry joined to it seed by seed."""
    runs = read_table(kept)["runs"] if os.path.exists(kept) else []
    return {"runs": kept_and_new(runs, folders, PER_SEED, plots_to)}


def render(table):
    return render_entries(table["runs"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/refinements")
