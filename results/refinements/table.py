"""Claims 4, 5 and 6 re-issued with the instrument (results/refinements/README.md): the table,
from table.json.

    python results/refinements/table.py                 # table.md from the kept table.json
    python results/refinements/table.py --collect \
        runs/ablations/reports/refinements \
        runs/ablations/reports/refinements_share         # table.json from run.sh's reports

collect keeps each report.json that run.sh has tools.ablate write (each arm along the SDE's
gamma, each training seed's figures beside the means, every arm minus the default paired by
seed, every row's provenance) in table.json, in the order given, and copies each one's
frontier plot here as <name>.png; render writes table.md from table.json alone, so the table
rebuilds byte for byte from what is kept.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command
from tools.ablation import INSTRUMENT_SEED, kept_reports
from tools.ablation_report import render_entries

HERE = os.path.dirname(os.path.abspath(__file__))


def collect(*folders):
    return {"runs": kept_reports(folders, (*INSTRUMENT_SEED, "entropy_ratio"), HERE)}


def render(table):
    return render_entries(table["runs"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/refinements")
