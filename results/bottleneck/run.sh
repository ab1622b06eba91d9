#!/bin/bash
# The default's bottleneck decided again with the instrument (results/bottleneck/README.md):
# configs/tiny.py at the steps the default reaches in its 8.5 training minutes on a quiet 2-core
# AVX-512 machine (2150; STEPS=... for yours), bottleneck 32 (the default) against 128 (the
# release's), 5 training seeds each, 2 runs at a time on one thread each (budgets are steps, so
# runs sharing the machine stay comparable). Every run is scored on the dev split along the SDE's
# gamma (0: the default's Euler ODE, 0.5, 1.5; 32 steps), 64 samples x 3 evaluation seeds, by the
# n-gram judge, MAUVE and distinct-2 at a matched size (no GPT-2 judge needed). Then the table:
#   bash results/bottleneck/run.sh                   # ~90 min on 2 cores
#   ARMS="b32: | b64: --bottleneck 64 | b16: --bottleneck 16" SEEDS=0,1,2 NAME=bottleneck_narrow \
#       bash results/bottleneck/run.sh                # the narrower and middle widths
#   python results/bottleneck/table.py --collect runs/ablations/reports/bottleneck_sweep
# Runs that exist are not trained or scored again: an interrupted run.sh continues.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-runs/ablations}
sde="--decompose off --sampler sde --grid uniform --steps 32"
python -m tools.ablate --name "${NAME:-bottleneck_sweep}" --judge "${JUDGE:-}" --split dev \
  --runs "$RUNS" --out "$RUNS/reports" --seeds "${SEEDS:-0,1,2,3,4}" --parallel 2 --threads 1 \
  --eval_seeds 0,1,2 --n 64 \
  "--common=--max_steps ${STEPS:-2150} --time_limit_min 0" \
  --arms "${ARMS:-b32: | b128: --bottleneck 128}" \
  --eval_arms "ode32: --decompose off | g0.5: $sde --gamma 0.5 | g1.5: $sde --gamma 1.5"
