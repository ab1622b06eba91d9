"""The default's headline figures on the test split (results/headline/README.md): the
table, from table.json.

    python results/headline/table.py                   # table.md from the kept table.json
    python results/headline/table.py --collect \
        runs/ablations/reports/headline_test           # the five seeds' entry from run.sh's report
    python results/headline/table.py --collect \
        runs/ablations/reports/headline_test_gpt2      # adds the GPT-2 judge's reading

collect keeps each report.json that run.sh has tools.ablate write in table.json, after the
kept entries of other names (measured on other machines: their runs need not be here), each
training seed's figures beside the mean and its standard error over the seeds, with every row's
provenance; a report of a kept entry's name and settings joins it seed by seed, one of other
settings replaces it (tools.ablation_report.kept_and_new). render writes table.md from
table.json alone, so the table rebuilds byte for byte. report.json and report.md beside them
are the earlier one-seed evaluation (`evaluate.py`'s own).
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import read_table, table_command
from tools.ablation import INSTRUMENT_SEED
from tools.ablation_report import kept_and_new, render_entries

HERE = os.path.dirname(os.path.abspath(__file__))
# the figures each training seed keeps: the instrument's, the GPT-2 judge's ratio where it scored
PER_SEED = (*INSTRUMENT_SEED, "ppl_ratio")


def collect(*folders, kept=os.path.join(HERE, "table.json")):
    """Each report.json (a tools.ablate report folder), after the kept entries of other names,
    in the order given; a continuation of a kept entry joined to it seed by seed."""
    runs = read_table(kept)["runs"] if os.path.exists(kept) else []
    return {"runs": kept_and_new(runs, folders, PER_SEED, plots_to="")}  # one point: no plot


def render(table):
    return render_entries(table["runs"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/headline_test")
