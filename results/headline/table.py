"""The default's headline figures at n = 5 training seeds on the test split (results/headline/
README.md): the table, from table.json.

    python results/headline/table.py                   # table.md from the kept table.json
    python results/headline/table.py --collect \
        runs/ablations/reports/headline_test           # table.json from run.sh's report

collect reads the report.json that run.sh has tools.ablate write into table.json, each training
seed's figures kept beside the mean and its standard error over the seeds, with every row's
provenance; render writes table.md from table.json alone, so the table rebuilds byte for byte.
report.json and report.md beside them are the earlier one-seed evaluation (`evaluate.py`'s own).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command
from tools.ablation import INSTRUMENT_SEED, kept_reports
from tools.ablation_report import render_entries

HERE = os.path.dirname(os.path.abspath(__file__))


def collect(folder):
    return {"runs": kept_reports([folder], INSTRUMENT_SEED)}


def render(table):
    return render_entries(table["runs"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/headline_test")
