#!/bin/bash
# The paper's conditional table at laptop scale (results/cond_compare/README.md): conditional
# ELF, the conditional AR GPT-2 and conditional MDLM trained one after another for the same
# training minutes on one task (TASK=de_en: configs/${task}_tiny.py, ar_de_en_tiny.py,
# mdlm_de_en_tiny.py, 26 minutes each; TASK=wiki_summary: the *_wiki_summary_tiny.py, 22), then
# scored alike by lib/heldout.py (evaluate.py's held-out scoring): the first N held-out pairs
# x SEEDS, BLEU, ROUGE-1/2/L, entropy. Then table.py: TASK/table.json, table.md, the plot, and
# the floors (retrieval, a blind constant, copy, lead-k) on the 'all', 'test' and 'near' splits.
#   TASK=de_en bash results/cond_compare/run.sh               # ~1.5 h of training on 2 cores
#   TASK=wiki_summary bash results/cond_compare/run.sh
#   BUDGET=60 TASK=de_en bash results/cond_compare/run.sh     # the longer point: 60 minutes each,
#                                                             # runs and table under de_en-60min
#   TASK=de_en N=8 SEEDS=0 ELF_STEPS=8 MDLM_STEPS=8 RUNS=/tmp/cc TABLES=/tmp/cc \
#       bash results/cond_compare/run.sh --time_limit_min 0 --max_steps 10   # a smoke test
# Overrides go to all three trainers (keys they share: time_limit_min, max_steps, seed, ...).
# ELF: ODE at ELF_STEPS (8,16,32,64), CFG off and 2 (GUIDANCE); MDLM: MDLM_STEPS (8-128);
# AR: greedy and sampled (temperature 1). Raw output under $RUNS/$TASK (runs/cond_compare);
# a run already there is not trained again.
set -euo pipefail
cd "$(dirname "$0")/../.."
task=${TASK:-de_en}
name=$task${BUDGET:+-${BUDGET}min}                  # the table's folder: de_en, de_en-60min, ...
runs=${RUNS:-runs/cond_compare}/$name
[ -n "${BUDGET:-}" ] && set -- --time_limit_min "$BUDGET" "$@"
n=${N:-117}; seeds=${SEEDS:-0,1,2}
mkdir -p "$runs"
if [ ! -e "$runs/elf/latest" ]; then
    python train.py configs/${task}_tiny.py --out_dir "$runs/elf" --n_samples 0 "$@" \
        > "$runs/elf.log" 2>&1
fi
if [ ! -e "$runs/ar/heldout/report.json" ]; then
    python -m baselines.ar_cond configs/ar_${task}_tiny.py --out_dir "$runs/ar" --n_samples "$n" \
        --sample_seeds "$seeds" --overwrite "$@" > "$runs/ar.log" 2>&1
fi
if [ ! -e "$runs/mdlm/heldout/report.json" ]; then
    python -m baselines.mdlm configs/mdlm_${task}_tiny.py --out_dir "$runs/mdlm" --n_samples "$n" \
        --sample_seeds "$seeds" --sample_steps "${MDLM_STEPS:-8,16,32,64,128}" --overwrite "$@" \
        > "$runs/mdlm.log" 2>&1
fi
python evaluate.py --ckpt "$runs/elf" --n "$n" --seeds "$seeds" --sampler ode \
    --steps "${ELF_STEPS:-8,16,32,64}" --guidance "${GUIDANCE:-1,2}" --decompose off \
    --out_dir "$runs/eval_elf" --overwrite > "$runs/eval_elf.log" 2>&1
python results/cond_compare/table.py "$name" --collect "$runs"
python results/cond_compare/table.py "$name" --floors     # the floors of lib/floors.py, seconds
