#!/bin/bash
# One run of the search for the CPU default's recipe (results/recipe/README.md):
#   bash results/recipe/run.sh NAME [train.py overrides...]
# trains configs/tiny.py with the overrides into $RUNS/NAME on $THREADS threads (default 1, so
# that two runs share the 2 cores; each run's budget is its own --time_limit_min or max_steps),
# then scores it with evaluate.py: the error decomposition and the yardstick (64 samples x 3
# seeds, the run's sample preset, or $EVAL_ARGS) into results/recipe/NAME/.
set -euo pipefail
name=$1; shift
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/recipe}
judge=${JUDGE:-judges/desc_wiki}
export OMP_NUM_THREADS=${THREADS:-1}
mkdir -p "$runs" "results/recipe/$name"
/usr/bin/time -v python train.py configs/tiny.py --out_dir "$runs/$name" --overwrite --n_samples 0 "$@" \
    > "$runs/$name.log" 2>&1
python evaluate.py --ckpt "$runs/$name" --judge "$judge" --n 64 --seeds 0,1,2 --out_dir "results/recipe/$name" \
    ${EVAL_ARGS:-} >> "$runs/$name.log" 2>&1
cp "$runs/$name/metrics.jsonl" "results/recipe/$name/"
grep -E "Elapsed|Maximum resident" "$runs/$name.log" > "results/recipe/$name/time.txt" || true
echo "$name ${THREADS:-1} $* ${EVAL_ARGS:+| eval: $EVAL_ARGS}" >> results/recipe/runs.txt
