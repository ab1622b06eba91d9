#!/bin/bash
# Progressive distillation of the tiny default teacher (results/distill_tiny/README.md): the
# five-round curriculum of configs/distill_tiny.py from the teacher TEACHER (default out/tiny,
# `python train.py configs/tiny.py`), then every round and the teacher scored at 1, 2, 4 and 8
# steps (trajectory error, Gen. PPL, entropy) on the presets' logit-normal grid and on the
# uniform grid. Students go to out/distill_tiny, the log and the two reports to $RUNS (default
# runs/distill_tiny); then table.py writes table.json and table.md here.
#   bash results/distill_tiny/run.sh          # the five rounds took 3 min 27 s on 2 cores (the scoring was not timed)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/distill_tiny}
teacher=${TEACHER:-out/tiny}
judge=${JUDGE:-judges/desc_wiki}
mkdir -p "$runs/eval"
/usr/bin/time -v python distill.py configs/distill_tiny.py --teacher "$teacher" --curriculum > "$runs/curriculum.log" 2>&1
ev() { python evaluate.py --distill out/distill_tiny --ckpt "$teacher" --judge "$judge" --seeds 0,1 "$@"; }
ev --out_dir "$runs/eval/logit_normal" > "$runs/eval_logit_normal.log" 2>&1
ev --grid uniform --out_dir "$runs/eval/uniform" > "$runs/eval_uniform.log" 2>&1
python results/distill_tiny/table.py --collect "$runs/eval"
