#!/bin/bash
# Issue 57's comparison at equal minutes (results/cond_minutes/README.md): conditional ELF
# (configs/${TASK}_tiny.py as it ships), the conditional GPT-2 (configs/ar_${TASK}_tiny.py: its
# last weights and its early-stopped best, by the dev split's text loss) and conditional MDLM
# (configs/mdlm_${TASK}_tiny.py) train AT ONCE, one thread each, so that each has the same
# share of the machine, for MINUTES training minutes, with snapshots at SNAPS minutes (the
# learning rates are constant after warmup, so a snapshot at 26 minutes is a 26-minute run).
# ELF_ARMS adds ELF arms: elf_recipe, the config with the unconditional default's recipe
# (encoder block 3, the cut vocabulary, bottleneck 32, no self-conditioning). Then every
# snapshot and the end are scored alike (lib/heldout.py) on the de-duplicated dev and test
# splits: ELF Euler ODE 32 at CFG 1 and 2, MDLM at 32 and 128 steps, AR greedy and sampled at
# temperature 1; 3 sampling seeds each (N pairs at most); the floors beside them.
#   bash results/cond_minutes/run.sh                      # de->en: 60 min of training, ~20 scoring
#   TASK=wiki_summary MINUTES=22 SNAPS=8,16 ELF_ARMS="elf elf_recipe" N=117 \
#       bash results/cond_minutes/run.sh                  # the summaries: 22 min, four at once
#   python results/cond_minutes/table.py de_en --collect runs/cond_minutes/de_en   # table, plot
#   SEED=1 bash results/cond_minutes/run.sh              # a second training seed of all three
#   MINUTES=0 STEPS=4 SNAPS=0 N=4 RUNS=/tmp/cm bash results/cond_minutes/run.sh   # a smoke test
# SEED (0) is every system's training seed; a seed other than 0 trains into RUNS_s<SEED>.
# A trained run is not trained again, a scored point not scored again.
set -euo pipefail
cd "$(dirname "$0")/../.."
task=${TASK:-de_en}
seed=${SEED:-0}
runs=${RUNS:-runs/cond_minutes/$task}; [ "$seed" = 0 ] || runs=${runs}_s$seed
minutes=${MINUTES:-60}; snaps=${SNAPS:-8,16,26,40}; n=${N:-117}; arms=${ELF_ARMS:-elf}
limit=(--time_limit_min "$minutes" --snapshot_minutes "$snaps" --seed "$seed")
[ -n "${STEPS:-}" ] && limit+=(--max_steps "$STEPS")
recipe=(--encoder_layer 3 --token_vocab train --bottleneck 32 --self_cond_prob 0)
for arm in $arms; do
    case $arm in elf|elf_recipe) ;; *) echo "unknown ELF arm '$arm' (elf elf_recipe)" >&2; exit 1;; esac
done
mkdir -p "$runs"
one() { OMP_NUM_THREADS=1 "$@"; }
pids=()
for arm in $arms; do
    extra=(); [ "$arm" = elf_recipe ] && extra=("${recipe[@]}")
    [ -e "$runs/$arm/latest" ] || { one python train.py "configs/${task}_tiny.py" "${extra[@]}" \
        --out_dir "$runs/$arm" --n_samples 0 --overwrite "${limit[@]}" > "$runs/$arm.log" 2>&1 &
        pids+=($!); }
done
[ -e "$runs/ar/latest" ] || { one python -m baselines.ar_cond "configs/ar_${task}_tiny.py" \
    --out_dir "$runs/ar" --n_samples 0 --overwrite "${limit[@]}" > "$runs/ar.log" 2>&1 & pids+=($!); }
[ -e "$runs/mdlm/latest" ] || { one python -m baselines.mdlm "configs/mdlm_${task}_tiny.py" \
    --out_dir "$runs/mdlm" --n_samples 0 --overwrite "${limit[@]}" > "$runs/mdlm.log" 2>&1 & pids+=($!); }
for p in "${pids[@]}"; do wait "$p"; done

score() {  # system, checkpoint folder, point name, split
    local out=$runs/eval/$1-$3-$4
    [ -e "$out/report.json" ] || [ -e "$out/heldout/report.json" ] || [ ! -e "$2" ] && return 0
    case $1 in
        elf*) one python evaluate.py --ckpt "$2" --split "$4" --n "$n" --seeds 0,1,2 --sampler ode \
                --steps 32 --guidance 1,2 --decompose off --out_dir "$out" --overwrite ;;
        ar|ar_best) one python -m baselines.ar_cond --ckpt "$2" --split "$4" --n_samples "$n" \
                --out_dir "$out" --overwrite ;;
        mdlm) one python -m baselines.mdlm --ckpt "$2" --split "$4" --n_samples "$n" \
                --sample_steps 32,128 --out_dir "$out" --overwrite ;;
    esac > "$out.log" 2>&1
}
mkdir -p "$runs/eval"
for split in dev test; do
    for m in ${snaps//,/ } end; do
        at=at-${m}min; [ "$m" = end ] && at=.
        best=$runs/ar/at-${m}min-best; [ "$m" = end ] && best=$runs/ar/best
        jobs=("mdlm $runs/mdlm/$at" "ar $runs/ar/$at" "ar_best $best")
        for arm in $arms; do jobs=("$arm $runs/$arm/$at" "${jobs[@]}"); done
        for ((i = 0; i < ${#jobs[@]}; i += 2)); do  # two at a time
            # shellcheck disable=SC2086
            score ${jobs[i]} "$m" "$split" &
            [ -n "${jobs[i + 1]:-}" ] && score ${jobs[i + 1]} "$m" "$split"
            wait
        done
    done
done
