#!/bin/bash
# The paper's claims measured again on the shipped default (results/claims/README.md): each claim
# an ablation of tools.ablate on configs/tiny.py at a FIXED step count, the steps the default
# reaches in its 8.5 training minutes on the machine (917 on the 2-core AVX2 EPYC of the table;
# STEPS=... for yours), 2 training seeds per arm, 2 runs at a time on one thread each, every run
# scored with the yardstick (64 samples x evaluation seeds 0, 1, 2; the error decomposition
# beside it) by the judge judges/desc_wiki (README's quick start builds it). Runs that exist are
# not trained again, so the shared default arm is trained once; an interrupted run.sh continues.
# Checkpoints go to $RUNS (runs/ablations), each claim's report.json, report.md and ablation.png
# to $RUNS/reports/NAME/; nothing is written into results/. Every claim runs on the default of the
# round that measured them, bottleneck 128 (claim 3 then made 32 the default; BOTTLENECK=32 for it).
# Then the table:
#   bash results/claims/run.sh [NAME ...]          # all claims, or the ones named
#   SEEDS=0 bash results/claims/run.sh samplers     # one training seed (a report to go on with)
#   python results/claims/table.py --collect runs/ablations/reports
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-runs/ablations}
A=(python -m tools.ablate --judge "${JUDGE:-judges/desc_wiki}" --runs "$RUNS" --out "$RUNS/reports"
   --seeds 0,1 --parallel "${PARALLEL:-2}" --threads 1 --eval_seeds 0,1,2
   "--common=--max_steps ${STEPS:-917} --time_limit_min 0 --bottleneck ${BOTTLENECK:-128}")
ode="--decompose off --sampler ode --grid uniform"
sde="--decompose off --sampler sde --grid uniform"
heun="--decompose off --sampler heun --grid uniform"
encoder_arms="last: --encoder_layer -1 | tokens: --encoder_layer 0 | random: --encoder_weights random"
declare -A CLAIM=(
  [shared_decoder]='--arms "shared: | separate: --separate_decoder true"'
  [self_conditioning]='--arms "off: | on: --self_cond_prob 0.5"'
  [sc_cfg]='--arms "sc: --self_cond_prob 0.5" --eval_arms "w1: --sc_cfg 1 | w1.5: --sc_cfg 1.5 | w2: --sc_cfg 2 | w3: --sc_cfg 3 | w5: --sc_cfg 5"'
  [samplers]="--arms \"base:\" --eval_arms \"ode8: $ode --steps 8 | ode16: $ode --steps 16 | ode64: $ode --steps 64 | heun4: $heun --steps 4 | heun8: $heun --steps 8 | heun16: $heun --steps 16 | sde8: $sde --gamma 1.0 --steps 8 | sde32_g0.5: $sde --gamma 0.5 --steps 32 | sde32_g1: $sde --gamma 1.0 --steps 32 | sde32_g1.5: $sde --gamma 1.5 --steps 32\""
  [embeddings]="--arms \"block3: | learned: --embeddings learned | $encoder_arms\""
  [prediction]='--arms "x: | v: --prediction v | eps: --prediction eps"'
  [denoise_share]='--arms "dec0.5: | dec0.8: --decoder_prob 0.8 | dec0.2: --decoder_prob 0.2"'
  [bottleneck]='--arms "b128: | b32: --bottleneck 32 | b512: --bottleneck 512 | none: --bottleneck 0"'
  [embeddings_encoder]="--arms \"block3: | $encoder_arms\""   # the encoder's arms alone
  [bottleneck_3seeds]='--arms "b128: | b32: --bottleneck 32" --seeds 0,1,2'   # the leader, a third seed
  # the trunk's blocks at 1x, 2x and 4x the parameters (3.16M, 6.33M, 12.5M), depth and width grown
  # together as the paper's ELF-B -> M -> L
  [scale]='--arms "1x: | 2x: --depth 6 --hidden 296 | 4x: --depth 8 --hidden 360" --eval_arms "ode32: --decompose off" --seeds 0,1,2'
  # the same at equal wall time: 2x and 4x cost 1.44x and 2.38x the default's step (their 917-step
  # runs, two at a time on one thread each, on 2 AVX-512 cores), so they get 640 and 384 steps
  [scale_time]='--arms "1x: | 2x: --depth 6 --hidden 296 --max_steps 640 | 4x: --depth 8 --hidden 360 --max_steps 384" --eval_arms "ode32: --decompose off" --seeds 0,1,2'
  # a third training seed (2) for the arms within 2 s.e. of the default in claims 2, 4, 5 and 6,
  # beside the default's own seed 2 (their seeds 0 and 1 ran on the AVX2 machine of the README)
  [third_seed]='--arms "base: | separate: --separate_decoder true | share0.8: --decoder_prob 0.2 | sc: --self_cond_prob 0.5 | learned: --embeddings learned" --seeds 2'
  # self-conditioning at equal wall time: its step cost 1.18x the default's (seed 2 of third_seed)
  [sc_time]='--arms "off: | on: --self_cond_prob 0.5 --max_steps 775" --seeds 0,1,2'
)
ORDER=(shared_decoder self_conditioning sc_cfg samplers embeddings prediction denoise_share bottleneck
       bottleneck_3seeds embeddings_encoder scale scale_time third_seed sc_time)
for name in "${@:-${ORDER[@]}}"; do
  [[ -v CLAIM[$name] ]] || { echo "unknown claim '$name' (choose from ${ORDER[*]})" >&2; exit 2; }
  eval "${A[@]@Q}" --name "$name" "${CLAIM[$name]}" ${SEEDS:+--seeds $SEEDS}
done
