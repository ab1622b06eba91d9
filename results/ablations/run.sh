#!/bin/bash
# The ablations of results/ablations/README.md, each through ablate.py on the offline default
# (configs/tiny.py: ELF-tiny on the bundled descriptions), with the default's training budget
# (460 steps at batch 128), 2 training seeds per arm, 2 runs at a time on one thread each,
# every run scored with the yardstick (64 samples x 3 seeds, judges/desc).
#   bash results/ablations/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
judge=${JUDGE:-judges/desc}
runs=${RUNS:-runs/ablations}
A="python ablate.py --judge $judge --runs $runs --seeds 0,1 --parallel 2 --threads 1"
# the base arm (the default, no overrides) is trained once and shared by every ablation that lists it
base="base:"
$A --name prediction --arms "x: | v: --prediction v | eps: --prediction eps"
$A --name encoder --arms "pretrained: | random: --encoder_weights random"
$A --name bottleneck --arms "b32: --bottleneck 32 | b128: | b512: --bottleneck 512"
$A --name denoise_share --arms "dec0.2: | dec0.5: --decoder_prob 0.5 | dec0.8: --decoder_prob 0.8"
$A --name self_conditioning --arms "on: | off: --self_cond_prob 0"
$A --name sampler --arms "$base" --eval_arms "ode8: --sampler ode --steps 8 | ode16: --sampler ode --steps 16 | ode32: --sampler ode --steps 32 | sde8: --preset uncond32 --steps 8 | sde16: --preset uncond32 --steps 16 | sde32: --preset uncond32 | heun4: --sampler heun --steps 4 | heun8: --sampler heun --steps 8 | heun16: --sampler heun --steps 16"
$A --name sc_cfg --arms "$base" --eval_arms "w1: --sc_cfg 1 | w1.5: --sc_cfg 1.5 | w2: --sc_cfg 2 | w3: --sc_cfg 3 | w5: --sc_cfg 5"
