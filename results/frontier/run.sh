#!/bin/bash
# ELF against the AR GPT-2 at equal compute along each one's quality-diversity knob, the AR's
# early-stopped model beside its last (results/frontier/README.md): the two trained AT ONCE, one
# thread each (an equal share of the machine, as results/cond_minutes), for the default's 8.5
# training minutes (the AR's clock stops while it scores its dev loss; ELF's runs through its
# validation), then measured by results/cost/measure.py, the two measurements at once, one
# thread each (3 x 64 samples a setting, dev split: the n-gram judge's PPL over real text's,
# MAUVE, distinct-2 at a matched size, length, copies and seen n-grams; seconds a sample):
#   ELF   configs/tiny.py; Euler ODE at 4-64 steps (its frontier), Heun 16, the SDE 32
#   AR    configs/ar_tiny.py (keep_best: its lowest dev-loss model in ar/best); temperatures
#         0.7, 0.85, 1.0 with the KV cache, the last model and the early-stopped one
#   bash results/frontier/run.sh                  # ~10 min of training, ~10 of measuring
#   RUNS=runs/frontier_gpt2 JUDGE=judges/desc_wiki bash results/frontier/run.sh   # + Gen. PPL
#   python results/frontier/table.py --collect runs/frontier   # table.json, table.md, the plot
# Checkpoints and measure.json files go to $RUNS (runs/frontier); a step whose output exists is
# not redone (an ELF run cut short goes on with --init_from resume).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/frontier}
mkdir -p "$runs"
one() { OMP_NUM_THREADS=1 "$@"; }
trained() {  # trained RUN MINUTES: whether the run's checkpoint has trained that long
    python -c "import sys; from lib import checkpoint as c
sys.exit(c.read_meta(c.find(sys.argv[1]))['train_minutes'] < float(sys.argv[2]))" "$@"
}
elf() {
    if [ ! -e "$runs/elf/latest" ]; then
        one python train.py configs/tiny.py --out_dir "$runs/elf" > "$runs/elf.log" 2>&1
    elif ! trained "$runs/elf" 8.5; then
        one python train.py configs/tiny.py --out_dir "$runs/elf" --init_from resume \
            >> "$runs/elf.log" 2>&1
    fi
}
ar() {
    [ -e "$runs/ar/train_log.json" ] || one python -m baselines.ar configs/ar_tiny.py \
        --out "$runs/ar" --time_limit_min 8.5 --n_samples 0 --overwrite > "$runs/ar.log" 2>&1
}
both() { "$1" & local a=$!; "$2" & local b=$!; wait $a; wait $b; }  # fails if either does
both elf ar
m=(one python results/cost/measure.py --elf "$runs/elf" --length 16 --elf_ode 4,8,16,32,64
   --elf_heun 16 --elf_sde 32 --ar_temperatures 0.7,0.85,1.0 --ar_no_cache ""
   ${JUDGE:+--judge "$JUDGE"})
last() { [ -e "$runs/last/measure.json" ] || "${m[@]}" --ar "$runs/ar" --systems elf,ar \
    --out "$runs/last" > "$runs/last.log" 2>&1; }
best() { [ -e "$runs/best/measure.json" ] || "${m[@]}" --ar "$runs/ar/best" --systems ar \
    --out "$runs/best" > "$runs/best.log" 2>&1; }
both last best
python results/frontier/table.py --collect "$runs"
