#!/bin/bash
# The comparison at the 60-minute budget (results/compare/README.md, "An hour"): ELF (the
# default's recipe, configs/tiny.py), MDLM and AR trained side by side for 60 training minutes, one thread
# each on the same 2 cores, so that the three share the machine equally (each has about two
# thirds of a core: a run alone on 2 cores takes more steps in the same hour); ELF and MDLM save
# weights-only snapshots at 10, 20 and 40 minutes. Then, on both cores, one at a time:
#   - the curve: each snapshot and the end sampled with the model's usual sampler (ELF: its
#     run's preset, with the error decomposition; MDLM: 16 steps) -> $RUNS/NAME/curve/, then
#     curve.py writes results/compare/NAME/curve/ (table.json, table.md, tokens.png);
#   - at 60 minutes, quality against sampling steps by run.sh's scoring: ELF ODE, Heun and the
#     released SDE at 4-64 steps, MDLM at 4-64, the AR point -> $RUNS/NAME/eval/, then table.py
#     writes results/compare/NAME/ (table.json, table.md, the two plots).
#   bash results/compare/hour.sh          # ~65 min of training, then ~20 min of scoring
# ELF_ARGS: train.py overrides, by default "--encoder_layer -1" (the last layer's latents, as the
# default had when this ran; configs/tiny.py now reads block 3). The release's settings of
# configs/tiny_60min.py: ELF_ARGS="--encoder_layer -1 --decoder_init random --decoder_prob 0.2
# --dec_lam_mean 0.8 --pos_embed false --p_mean -1.5 --p_std 0.8 --n_prefix 4 --self_cond_prob
# 0.5". The current default's hour, the baselines' configs on the cut vocabulary as well
# (results/compare/hour_r27; hour_r21 ran the same command before the cut):
#   NAME=hour_r27 ELF_ARGS="--encoder_layer 3" bash results/compare/hour.sh
# NAME=hour names the results folder, RUNS the runs' folder (default runs/compare: checkpoints,
# logs, reports and samples; only the summaries are written into results/compare/NAME).
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${NAME:-hour}
runs=${RUNS:-runs/compare}/$name
judge=${JUDGE:-judges/desc_wiki}
steps=4,8,16,32,64
mkdir -p "$runs/curve"
export OMP_NUM_THREADS=1                                  # the training: one thread a run
[ -e "$runs/elf/latest" ] || python train.py configs/tiny.py --out_dir "$runs/elf" --n_samples 0 \
    --time_limit_min 60 --snapshot_minutes 10,20,40 --eval_interval 250 --ckpt_interval 500 ${ELF_ARGS:---encoder_layer -1} \
    > "$runs/elf.log" 2>&1 &
[ -e "$runs/mdlm/samples-64steps.jsonl" ] || python -m baselines.mdlm configs/mdlm_tiny.py --out_dir "$runs/mdlm" \
    --time_limit_min 60 --snapshot_minutes 10,20,40 --sample_steps $steps --overwrite > "$runs/mdlm.log" 2>&1 &
[ -e "$runs/ar/samples.jsonl" ] || python -m baselines.ar configs/ar_tiny.py --out "$runs/ar" --time_limit_min 60 \
    > "$runs/ar.log" 2>&1 &
wait
for f in elf/latest mdlm/samples-64steps.jsonl ar/samples.jsonl; do   # a failed run is not trained again by run.sh
    [ -e "$runs/$f" ] || { echo "hour.sh: $runs/$f is missing: a training run failed (see $runs/*.log)" >&2; exit 1; }
done
export OMP_NUM_THREADS=2                                  # the scoring: both cores, one job at a time
ev() { python evaluate.py --judge "$judge" --n 64 --seeds 0,1,2 "$@"; }
for m in 10 20 40 60; do
    at=$([ $m = 60 ] && echo "" || echo "/at-${m}min")
    ev --ckpt "$runs/elf$at" --out_dir "$runs/curve/elf_$m" > "$runs/eval_elf_$m.log" 2>&1
    samples=$runs/mdlm/samples-16steps.jsonl
    if [ $m != 60 ]; then
        python -m baselines.mdlm --ckpt "$runs/mdlm$at" --out_dir "$runs/mdlm_$m" --sample_steps 16 > "$runs/mdlm_$m.log" 2>&1
        samples=$runs/mdlm_$m/samples-16steps.jsonl
    fi
    ev --ckpt "$runs/elf" --samples "$samples" --decompose off --out_dir "$runs/curve/mdlm_$m" \
        > "$runs/eval_mdlm_$m.log" 2>&1
done
# quality against steps at the end: run.sh's scoring (it trains nothing: the three runs are there)
RUNS=${RUNS:-runs/compare} ELF="$runs/elf" bash results/compare/run.sh "$name"
python results/compare/curve.py "$name/curve" --collect "$runs/curve"
