#!/bin/bash
# One run of the search for the offline default (results/first_run/README.md):
#   bash results/first_run/run.sh NAME [train.py overrides...]
# trains configs/tiny.py with the overrides on ONE thread into $RUNS/NAME (default
# runs/first_run; step budgets, so runs sharing the 2 cores stay comparable), then scores it
# with the yardstick (64 samples x 3 seeds; Euler ODE and the released SDE at 32 steps, SC-CFG
# 1 and 3) into $RUNS/eval/NAME/; its overrides go to $RUNS/runs.txt. Nothing is written into
# results/: `python results/first_run/table.py --collect runs/first_run/eval` writes the table.
set -euo pipefail
name=$1; shift
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/first_run}
judge=${JUDGE:-judges/desc_wiki}
export OMP_NUM_THREADS=1
mkdir -p "$runs/eval"
python train.py configs/tiny.py --out_dir "$runs/$name" --overwrite "$@" > "$runs/$name.log" 2>&1
python evaluate.py --ckpt "$runs/$name" --judge "$judge" --n 64 --seeds 0,1,2 \
    --sampler ode,sde --sc_cfg 1,3 --steps 32 --out_dir "$runs/eval/$name" >> "$runs/$name.log" 2>&1
cp "$runs/$name/metrics.jsonl" "$runs/eval/$name/"
echo "$name $*" >> "$runs/runs.txt"
