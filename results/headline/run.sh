#!/bin/bash
# The default's headline figures at n = 5 training seeds on the test split (results/headline/
# README.md): configs/tiny.py at the steps the default reaches in its 8.5 training minutes on a
# quiet 2-core AVX-512 machine (2150; STEPS=... for yours), seeds 0-4, PARALLEL runs at a time
# on one thread each (budgets are steps, so runs sharing the machine stay comparable); each run
# scored on the test split, which no choice was made on: the Euler ODE at 32 steps (the default's
# sampler), 64 samples x 3 evaluation seeds, by the n-gram judge, MAUVE and distinct-2 at a
# matched size (JUDGE=judges/desc_wiki adds Gen. PPL). These are the runs results/bottleneck's
# 32-wide arm trained (the same overrides and seeds): where they exist they are scored, not
# trained again. Then the table:
#   bash results/headline/run.sh                     # ~60 min on 2 cores, ~1 min with the runs
#   python results/headline/table.py --collect runs/ablations/reports/headline_test
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-runs/ablations}
python -m tools.ablate --name "${NAME:-headline_test}" --judge "${JUDGE:-}" --split test \
  --runs "$RUNS" --out "$RUNS/reports" --seeds "${SEEDS:-0,1,2,3,4}" \
  --parallel "${PARALLEL:-2}" --threads 1 --eval_seeds 0,1,2 --n 64 \
  "--common=--max_steps ${STEPS:-2150} --time_limit_min 0" \
  --arms "b32:" --eval_arms "ode32: --decompose off"
