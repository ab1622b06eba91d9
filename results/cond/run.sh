#!/bin/bash
# The offline conditional demos on the current recipe (results/cond/README.md): train one demo,
# then score it on its held-out pairs beside the copy baselines, at CFG 1, 1.5, 2, 3 and
# SC-CFG 1 and 3, 3 sampling seeds each (ODE, $STEPS steps).
#   bash results/cond/run.sh de_en configs/de_en_tiny.py                     # 117 held-out pairs
#   N=128 bash results/cond/run.sh summary configs/wiki_summary_tiny.py      # the first 128 of 488
# Extra arguments go to train.py. RUN=out/de_en_tiny scores a trained run instead of training;
# runs go to $RUNS/NAME (default runs/cond), the report, outputs (hypotheses.jsonl), guidance.png
# and the evaluation's log to $RUNS/eval/NAME/. Nothing is written into results/: after the
# runs, `python results/cond/table.py --collect runs/cond/eval` writes table.json and table.md here.
set -euo pipefail
name=$1; config=$2; shift 2
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/cond}
run=${RUN:-$runs/$name}
res=$runs/eval/$name
mkdir -p "$res"
if [ ! -e "$run/latest" ]; then
    mkdir -p "$(dirname "$run")"
    python train.py "$config" --out_dir "$run" "$@" > "$run.log" 2>&1
fi
python evaluate.py --ckpt "$run" --n "${N:-117}" --seeds 0,1,2 --steps "${STEPS:-32}" \
    --guidance 1,1.5,2,3 --sc_cfg 1,3 --out_dir "$res" > "$res/eval.log" 2>&1
cp "$run/metrics.jsonl" "$res/metrics.jsonl"
