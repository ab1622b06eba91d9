#!/bin/bash
# The cost benchmark (results/cost/README.md): ELF, its distilled students, MDLM and AR, each
# trained for the same minutes on the same machine, data, tokenizer and trunk (results/compare's
# setup), then measured by results/cost/measure.py: seconds a sample at batch 1, samples/s at
# batch 64, peak memory, and the quality of those samples on the dev split. What is already
# trained is not trained again; then table.py --collect writes table.json, table.md, the plots.
#   bash results/cost/run.sh desc   # the one-line descriptions, 16 tokens (configs/tiny.py and
#                                   # its baselines configs/mdlm_tiny.py, configs/ar_tiny.py)
#   bash results/cost/run.sh para   # the paragraphs, 64 tokens (no config file holds them:
#                                   # results/compare/run.sh's overrides of the same configs)
# ELF=DIR, MDLM=DIR, AR=DIR, DISTILL=DIR measure folders trained elsewhere (DISTILL=0: no
# students); JUDGE=judges/desc_wiki adds Gen. PPL (the n-gram judge, MAUVE and the rest need
# none); MEASURE_ARGS go to measure.py. Runs go to $RUNS/train/NAME (default runs/cost), the
# measurement to $RUNS/NAME/measure.json. Time on 2 quiet cores, estimated (not measured): each
# training ~10 min (ELF, MDLM, AR; the students ~5), then the measurement ~15 min at 16 tokens
# and ~35 at 64. Run it alone: every other process on the machine is noise in its seconds.
set -euo pipefail
name=${1:-desc}
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/cost}
train=$runs/train/$name
case $name in
    desc) L=16; DATA=(); AR_DATA=() ;;
    para) L=64; DATA=(--dataset wiki --max_length 64 --packing true --pad_token pad --batch_size 32 --blr 8e-3)
          AR_DATA=(--data wiki --sample_length 63) ;;
    *) echo "run.sh: NAME is desc (16 tokens) or para (64 tokens), got '$name'" >&2; exit 1 ;;
esac
mkdir -p "$train"
elf=${ELF:-$train/elf}; mdlm=${MDLM:-$train/mdlm}; ar=${AR:-$train/ar}; distill=${DISTILL:-$train/distill}
export OMP_NUM_THREADS=2                                  # one job at a time on both cores
if [ ! -e "$elf/latest" ]; then                           # 8.5 training minutes
    python train.py configs/tiny.py --out_dir "$elf" --n_samples 0 "${DATA[@]}" > "$train/elf.log" 2>&1
fi
if [ ! -e "$mdlm/latest" ]; then                          # the same 8.5 minutes, no samples
    python -m baselines.mdlm configs/mdlm_tiny.py --out_dir "$mdlm" --n_samples 0 --overwrite \
        "${DATA[@]}" > "$train/mdlm.log" 2>&1
fi
if [ ! -e "$ar/config.json" ]; then                       # ELF's 8.5 training minutes
    python -m baselines.ar configs/ar_tiny.py --out "$ar" --time_limit_min 8.5 --n_samples 0 \
        "${AR_DATA[@]}" > "$train/ar.log" 2>&1
fi
students=()
if [ "$distill" != 0 ]; then                              # the five rounds of configs/distill_tiny.py
    [ -e "$distill/round5" ] || python distill.py configs/distill_tiny.py --teacher "$elf" \
        --curriculum --out_dir "$distill" > "$train/distill.log" 2>&1
    students=(--distill "$distill")
fi
python results/cost/measure.py --elf "$elf" --mdlm "$mdlm" --ar "$ar" "${students[@]}" \
    --length $L --out "$runs/$name" --split dev ${JUDGE:+--judge "$JUDGE"} ${MEASURE_ARGS:-} \
    2>&1 | tee "$runs/$name.log"
python results/cost/table.py --collect "$runs"
