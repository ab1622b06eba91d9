#!/bin/bash
# Quality against training tokens (the paper's "a tenth of the tokens"): ELF and MDLM of run.sh's
# descriptions, trained again for 8.5 minutes with weights-only snapshots at 1, 2 and 4 training
# minutes; each snapshot and the end sampled (ELF: the default's ODE 32; MDLM: 16 steps, one
# token a step) and scored like run.sh's rows into $RUNS/curve/eval/ (default runs/compare). Then
# curve.py writes results/compare/curve/ (table.json, table.md, tokens.png).
#   bash results/compare/curve.sh                     # ~30 min on 2 cores
# ELF_ARGS: train.py overrides for ELF, by default "--encoder_layer -1": the last layer's
# latents, as configs/tiny.py had when these results were measured (it now reads block 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/compare}/curve
judge=${JUDGE:-judges/desc_wiki}
res=$runs/eval
mkdir -p "$runs" "$res"
if [ ! -e "$runs/elf/latest" ]; then
    python train.py configs/tiny.py --out_dir "$runs/elf" --n_samples 0 --snapshot_minutes 1,2,4 ${ELF_ARGS:---encoder_layer -1} \
        > "$runs/elf.log" 2>&1
fi
if [ ! -e "$runs/mdlm/samples-16steps.jsonl" ]; then
    python -m baselines.mdlm configs/mdlm_tiny.py --out_dir "$runs/mdlm" --snapshot_minutes 1,2,4 --sample_steps 16 \
        --overwrite > "$runs/mdlm.log" 2>&1
fi
ev() { python evaluate.py --judge "$judge" --n 64 --seeds 0,1,2 --decompose off "$@"; }
for m in 1 2 4 end; do
    at=$([ $m = end ] && echo "" || echo "/at-${m}min")
    ev --ckpt "$runs/elf$at" --out_dir "$res/elf_$m" > "$runs/eval_elf_$m.log" 2>&1
    if [ $m != end ]; then
        python -m baselines.mdlm --ckpt "$runs/mdlm$at" --out_dir "$runs/mdlm_$m" --sample_steps 16 > "$runs/mdlm_$m.log" 2>&1
    fi
    samples=$([ $m = end ] && echo "$runs/mdlm" || echo "$runs/mdlm_$m")/samples-16steps.jsonl
    ev --ckpt "$runs/elf" --samples "$samples" --out_dir "$res/mdlm_$m" > "$runs/eval_mdlm_$m.log" 2>&1
done
python results/compare/curve.py curve --collect "$res"
