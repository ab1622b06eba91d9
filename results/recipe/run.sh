#!/bin/bash
# One run of the search for the CPU default's recipe (results/recipe/README.md):
#   bash results/recipe/run.sh NAME [train.py overrides...]
# trains configs/tiny.py with the overrides into $RUNS/NAME (default runs/recipe) on $THREADS
# threads (default 1, so that two runs share the 2 cores; each run's budget is its own
# --time_limit_min or max_steps), then scores it with evaluate.py: the error decomposition and
# the yardstick (64 samples x 3 seeds, the run's sample preset, or $EVAL_ARGS) into
# $RUNS/eval/NAME/ with its metrics.jsonl and time.txt; its command line goes to $RUNS/runs.txt.
# Nothing is written into results/: after the runs, `python results/recipe/table.py --collect
# runs/recipe/eval` writes table.json and table.md here.
set -euo pipefail
name=$1; shift
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/recipe}
judge=${JUDGE:-judges/desc_wiki}
export OMP_NUM_THREADS=${THREADS:-1}
mkdir -p "$runs/eval/$name"
/usr/bin/time -v python train.py configs/tiny.py --out_dir "$runs/$name" --overwrite --n_samples 0 "$@" \
    > "$runs/$name.log" 2>&1
python evaluate.py --ckpt "$runs/$name" --judge "$judge" --n 64 --seeds 0,1,2 --out_dir "$runs/eval/$name" \
    ${EVAL_ARGS:-} >> "$runs/$name.log" 2>&1
cp "$runs/$name/metrics.jsonl" "$runs/eval/$name/"
grep -E "Elapsed|Maximum resident" "$runs/$name.log" > "$runs/eval/$name/time.txt" || true
echo "$name ${THREADS:-1} $* ${EVAL_ARGS:+| eval: $EVAL_ARGS}" >> "$runs/runs.txt"
