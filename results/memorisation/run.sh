#!/bin/bash
# Who copies at equal compute (results/memorisation/README.md): ELF (configs/tiny.py as shipped),
# MDLM (configs/mdlm_tiny.py) and AR (configs/ar_tiny.py), each ALONE on the machine's cores
# (nothing else running), for 20 training minutes with snapshots at 1, 2, 4 and 8.5 minutes; each
# snapshot's samples (64 x seeds 0, 1, 2; ELF its run's sampler, MDLM 64 steps, AR temperature 1)
# scored by the yardstick and the judge judges/desc_wiki: copies of training descriptions,
# n-grams seen in training, Gen. PPL of all samples and of the non-copied ones.
#   bash results/memorisation/run.sh        # ~70 min of training, ~15 min of scoring
#   python results/memorisation/table.py --collect runs/memorisation/eval   # table.json, table.md, plot
# ELF trains as from a fresh clone (its 8.5 minutes; the snapshot at 8.5 is its last step), then
# is resumed to 20 minutes (the clock goes on; the learning rate is constant). Checkpoints, logs and
# reports go to $RUNS (runs/memorisation); only the summary is written into results/memorisation.
# A step that has its output is not redone, so an interrupted run.sh continues.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/memorisation}
judge=${JUDGE:-judges/desc_wiki}
mkdir -p "$runs/eval"
ev() {  # ev NAME [evaluate.py args]: a snapshot's yardstick into $runs/eval/NAME
    [ -e "$runs/eval/$1/report.json" ] || python evaluate.py --ckpt "$runs/elf" --judge "$judge" \
        --n 64 --seeds 0,1,2 --decompose off --out_dir "$runs/eval/$1" "${@:2}" > "$runs/eval_$1.log" 2>&1
}
# ELF: the default's run, then the same run resumed to 20 minutes
[ -e "$runs/elf/latest" ] || python train.py configs/tiny.py --out_dir "$runs/elf" \
    --snapshot_minutes 1,2,4,8.5 > "$runs/elf.log" 2>&1
for m in 1 2 4 8.5; do ev "elf_$m" --ckpt "$runs/elf/at-${m}min"; done
trained() {  # trained RUN MINUTES: whether the run's checkpoint has trained that long
    python -c "import sys; from lib import checkpoint as c
sys.exit(c.read_meta(c.find(sys.argv[1]))['train_minutes'] < float(sys.argv[2]))" "$@"
}
trained "$runs/elf" 20 || python train.py configs/tiny.py --out_dir "$runs/elf" --init_from resume \
    --time_limit_min 20 --n_samples 0 >> "$runs/elf.log" 2>&1
ev elf_20
# MDLM: 20 minutes with snapshots; each snapshot sampled at 64 steps
[ -e "$runs/mdlm/samples-64steps.jsonl" ] || python -m baselines.mdlm configs/mdlm_tiny.py \
    --out_dir "$runs/mdlm" --time_limit_min 20 --snapshot_minutes 1,2,4,8.5 --sample_steps 64 \
    --overwrite > "$runs/mdlm.log" 2>&1
for m in 1 2 4 8.5; do
    [ -e "$runs/mdlm_$m/samples-64steps.jsonl" ] || python -m baselines.mdlm --ckpt "$runs/mdlm/at-${m}min" \
        --out_dir "$runs/mdlm_$m" --sample_steps 64 > "$runs/mdlm_$m.log" 2>&1
    ev "mdlm_$m" --samples "$runs/mdlm_$m/samples-64steps.jsonl"
done
ev mdlm_20 --samples "$runs/mdlm/samples-64steps.jsonl"
# AR: 20 minutes; each snapshot holds its model and its samples
[ -e "$runs/ar/samples.jsonl" ] || python -m baselines.ar configs/ar_tiny.py --out "$runs/ar" \
    --time_limit_min 20 --snapshot_minutes 1,2,4,8.5 --overwrite > "$runs/ar.log" 2>&1
for m in 1 2 4 8.5; do ev "ar_$m" --samples "$runs/ar/at-${m}min/samples.jsonl"; done
ev ar_20 --samples "$runs/ar/samples.jsonl"
python results/memorisation/table.py --collect "$runs/eval"
