#!/bin/bash
# The ablations of results/ablations/README.md, cheapest first (sampler and SC-CFG reuse the base runs), each through ablate.py on the offline default
# (configs/tiny.py: ELF-tiny on the bundled descriptions), 2 training seeds per arm, 2 runs at
# a time on one thread each, every run scored with the yardstick (64 samples x EVAL_SEEDS).
# The training budget is the default's 460 steps at batch 128 unless COMMON changes it; the
# measured report used COMMON="--max_steps 200" and EVAL_SEEDS=0,1 (results/ablations/README.md).
#   bash results/ablations/run.sh
#   COMMON="--max_steps 200" EVAL_SEEDS=0,1 JUDGE=judges/desc bash results/ablations/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
judge=${JUDGE:-judges/desc}
runs=${RUNS:-runs/ablations}
A=(python ablate.py --judge "$judge" --runs "$runs" --seeds 0,1 --parallel 2 --threads 1
   --common="${COMMON:-}" --eval_seeds "${EVAL_SEEDS:-0,1,2}")
# the base arm (the default, no overrides) is trained once and shared by every ablation that lists it
base="base:"
"${A[@]}" --name prediction --arms "x: | v: --prediction v | eps: --prediction eps"
"${A[@]}" --name sampler --arms "$base" \
    --eval_arms "ode8: --sampler ode --steps 8 --sc_cfg 1 | ode16: --sampler ode --steps 16 --sc_cfg 1 | ode32: --sampler ode --steps 32 --sc_cfg 1 | sde8: --sampler sde --gamma 1.5 --steps 8 --sc_cfg 1 | sde16: --sampler sde --gamma 1.5 --steps 16 --sc_cfg 1 | sde32: --sampler sde --gamma 1.5 --steps 32 --sc_cfg 1 | heun4: --sampler heun --steps 4 --sc_cfg 1 | heun8: --sampler heun --steps 8 --sc_cfg 1 | heun16: --sampler heun --steps 16 --sc_cfg 1"
"${A[@]}" --name sc_cfg --arms "$base" --eval_arms "w1: --sc_cfg 1 | w1.5: --sc_cfg 1.5 | w2: --sc_cfg 2 | w3: --sc_cfg 3 | w5: --sc_cfg 5"
"${A[@]}" --name encoder --arms "pretrained: | random: --encoder_weights random"
"${A[@]}" --name self_conditioning --arms "on: | off: --self_cond_prob 0"
"${A[@]}" --name denoise_share --arms "dec0.2: | dec0.5: --decoder_prob 0.5 | dec0.8: --decoder_prob 0.8"
"${A[@]}" --name bottleneck --arms "b32: --bottleneck 32 | b128: | b512: --bottleneck 512"
