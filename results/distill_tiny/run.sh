#!/bin/bash
# Progressive distillation of the tiny default teacher (results/distill_tiny/README.md): the
# five-round curriculum of configs/distill_tiny.py from the teacher TEACHER (default out/tiny,
# `python train.py configs/tiny.py`; the table's: the default's 917 steps, seed 0, of
# results/claims), then every round and the teacher scored at 1, 2, 4, 8 and 32 steps
# (trajectory error, Gen. PPL, entropy; 64 samples x seeds 0, 1, 2) with the default's sampler,
# the Euler ODE without SC-CFG (the default trains without self-conditioning), on the uniform
# grid and on the presets' logit-normal grid. Students go to $STUDENTS (out/distill_tiny), the
# log and the two reports to $RUNS (runs/distill_tiny); then table.py writes table.json, table.md.
#   bash results/distill_tiny/run.sh    # the five rounds: about 4 min on one thread beside another run
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/distill_tiny}
teacher=${TEACHER:-out/tiny}
judge=${JUDGE:-judges/desc_wiki}
mkdir -p "$runs/eval"
students=${STUDENTS:-out/distill_tiny}
python distill.py configs/distill_tiny.py --teacher "$teacher" --curriculum --out_dir "$students" \
    > "$runs/curriculum.log" 2>&1
ev() { python evaluate.py --distill "$students" --ckpt "$teacher" --judge "$judge" --seeds 0,1,2 \
    --distill_steps 1,2,4,8,32 --sampler ode --sc_cfg 1 --traj_sc_cfg 1 "$@"; }
ev --grid logit_normal --out_dir "$runs/eval/logit_normal" > "$runs/eval_logit_normal.log" 2>&1
ev --grid uniform --out_dir "$runs/eval/uniform" > "$runs/eval_uniform.log" 2>&1
python results/distill_tiny/table.py --collect "$runs/eval"
