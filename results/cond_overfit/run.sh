#!/bin/bash
# The overfit check of conditional ELF (results/cond_overfit/README.md): configs/de_en_tiny.py
# as shipped, trained on its first 64 German-English pairs only (--train_pairs 64: one batch
# holds them all) for STEPS steps (default 1500) with a checkpoint every 250; then each
# checkpoint scored by evaluate.py --diagnose on those 64 training pairs (has it fit them?), on
# the dev split's held-out pairs, with the sources shuffled and zeroed, and decomposed (the
# decoder on clean target latents; round trips with the source held). Then table.py:
#   bash results/cond_overfit/run.sh                  # ~40 min on 2 cores
#   python results/cond_overfit/table.py --collect runs/cond_overfit/eval
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-runs/cond_overfit}
steps=${STEPS:-1500}
mkdir -p "$out"
[ -f "$out/elf/latest" ] || python train.py configs/de_en_tiny.py --train_pairs 64 \
    --out_dir "$out/elf" --max_steps "$steps" --time_limit_min 0 --ckpt_interval 250 \
    --eval_interval 250 --keep_checkpoints 100 --n_samples 0 > "$out/train.log" 2>&1
for step in "$out"/elf/step-*; do
  name=$(basename "$step")
  [ -f "$out/eval/$name/report.json" ] || python evaluate.py --ckpt "$step" --diagnose \
      --n 64 --seeds 0 --split dev --steps 32 --out_dir "$out/eval/$name" \
      > "$out/eval-$name.log" 2>&1
done
python results/cond_overfit/table.py --collect "$out/eval"
