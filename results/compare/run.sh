#!/bin/bash
# The paper's comparison at laptop scale (results/compare/README.md): ELF, masked diffusion
# (MDLM) and autoregression (AR) trained for the same 8.5 minutes on the same machine, data,
# tokenizer, rows and trunk width/depth, then scored by the same judge and yardstick, 64
# samples x 3 seeds per setting, against the number of sampling steps.
#   bash results/compare/run.sh desc                        # the descriptions, L = 16 (~50 min, 2 cores)
#   AR_ARGS="--data wiki --sample_length 64" bash results/compare/run.sh para --dataset wiki \
#       --max_length 64 --packing true --pad_token pad --batch_size 32 --blr 8e-3   # the paragraphs, L = 64
# The overrides go to train.py and baselines.mdlm alike, AR_ARGS to baselines.ar. ELF=out/tiny reuses a
# trained ELF run; AR=0 leaves out the AR point, SDE=0 the released SDE and HEUN=0 Heun
# (sampling at L = 64 on 2 cores takes about 1.4 s per network call for 64 samples).
# Runs go to $RUNS/NAME (default runs/compare), their reports and samples to $RUNS/NAME/eval/;
# then table.py --collect writes results/compare/NAME/table.json, table.md and the two plots.
# ELF_ARGS: train.py overrides for ELF, by default "--encoder_layer -1": the last layer's
# latents, as configs/tiny.py had when these results were measured (it now reads block 3).
set -euo pipefail
name=$1; shift
cd "$(dirname "$0")/../.."
runs=${RUNS:-runs/compare}/$name
judge=${JUDGE:-judges/desc_wiki}
res=$runs/eval
elf=${ELF:-$runs/elf}
steps=4,8,16,32,64
mkdir -p "$runs" "$res"
if [ ! -e "$elf/latest" ]; then
    python train.py configs/tiny.py --out_dir "$elf" --n_samples 0 ${ELF_ARGS:---encoder_layer -1} "$@" > "$runs/elf.log" 2>&1
fi
if [ ! -e "$runs/mdlm/samples-64steps.jsonl" ]; then        # 8.5 training minutes, then its samples
    python -m baselines.mdlm configs/mdlm_tiny.py --out_dir "$runs/mdlm" --sample_steps $steps --overwrite "$@" \
        > "$runs/mdlm.log" 2>&1
fi
if [ "${AR:-1}" = 1 ] && [ ! -e "$runs/ar/samples.jsonl" ]; then   # ELF's 8.5 training minutes
    python -m baselines.ar configs/ar_tiny.py --out "$runs/ar" --time_limit_min 8.5 ${AR_ARGS:-} > "$runs/ar.log" 2>&1
fi
ev() { python evaluate.py --ckpt "$elf" --judge "$judge" --n 64 --seeds 0,1,2 --decompose off "$@"; }
# ELF: the Euler ODE and Heun on the run's own preset's grid (ode32: logit-normal, the default's
# until r21 of results/recipe; ode32_uniform: uniform, the default's since), and the released
# SDE (gamma 1.5) without SC-CFG: the default trains no self-conditioning, so a guidance by it
# has nothing to read
ev --sampler "ode$([ "${HEUN:-1}" = 1 ] && echo ,heun)" --steps $steps --out_dir "$res/elf_ode_heun" > "$runs/eval_elf_ode.log" 2>&1
if [ "${SDE:-1}" = 1 ]; then
    ev --preset uncond32 --sc_cfg 1 --steps $steps --out_dir "$res/elf_sde" > "$runs/eval_elf_sde.log" 2>&1
fi
for k in ${steps//,/ }; do
    ev --samples "$runs/mdlm/samples-${k}steps.jsonl" --out_dir "$res/mdlm_$k" > "$runs/eval_mdlm_$k.log" 2>&1
done
if [ "${AR:-1}" = 1 ]; then
    ev --samples "$runs/ar/samples.jsonl" --out_dir "$res/ar" > "$runs/eval_ar.log" 2>&1
fi
python results/compare/table.py "$name" --collect "$res"
