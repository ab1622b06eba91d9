#!/bin/bash
# Claim 9 with its control (results/distill_control/README.md): progressive distillation's five
# rounds of configs/distill_tiny.py from the teacher TEACHER (default out/tiny: the default at
# the 2150 steps of results/headline), and the same five rounds on the teacher's own loss
# (distill.py --objective flow: the same weights, lr, EMA, batches and noise, no distillation
# target); then the teacher, every student and every control round scored at 1, 2, 4 and 8 Euler
# steps on the uniform grid (the students' own spans) with the instrument: the n-gram judge,
# MAUVE and distinct-2 at a matched size, on the dev split (64 samples x seeds 0, 1, 2), and the
# trajectory error against the teacher's 64-step ODE. No GPT-2 judge is needed (JUDGE=... adds
# Gen. PPL). Students and controls go to $OUT (runs/distill_control), then table.py, which joins
# this teacher to the kept table's others (pairs are made by teacher: its training seed):
#   bash results/distill_control/run.sh     # ~25 min on one thread beside another run
#   TEACHER=runs/ablations/base-da84dd28-s2 OUT=runs/distill_control/s2 JUDGE=judges/desc_wiki \
#       bash results/distill_control/run.sh  # another teacher: results/headline/run.sh's seed 2
#   python results/distill_control/table.py --collect runs/distill_control/eval
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-runs/distill_control}
teacher=${TEACHER:-out/tiny}
mkdir -p "$out"
for objective in distill flow; do
  [ -f "$out/$objective/round5/latest" ] || python distill.py configs/distill_tiny.py \
      --teacher "$teacher" --curriculum --objective "$objective" --out_dir "$out/$objective" \
      --overwrite > "$out/$objective.log" 2>&1
done
python evaluate.py --ckpt "$teacher" --distill "$out/distill" --control "$out/flow" \
    ${JUDGE:+--judge "$JUDGE"} --split dev --seeds 0,1,2 --distill_steps 1,2,4,8 \
    --sampler ode --grid uniform --sc_cfg 1 --traj_sc_cfg 1 --out_dir "$out/eval" \
    > "$out/eval.log" 2>&1
python results/distill_control/table.py --collect "$out/eval"
