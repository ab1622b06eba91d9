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

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import table_command
from tools.ablate import INSTRUMENT_SEED, kept_reports, render_entries

HERE = os.path.dirname(os.path.abspath(__file__))


def collect(*folders):
    """Each sweep's report.json (a tools.ablate report folder), in the order given."""
    return {"sweeps": kept_reports(folders, (*INSTRUMENT_SEED, "entropy_ratio"), HERE)}


def render(table):
    return render_entries(table["sweeps"])


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/ablations/reports/bottleneck_sweep")
