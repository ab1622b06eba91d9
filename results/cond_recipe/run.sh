#!/bin/bash
# Issue 57's recipe question (results/cond_recipe/README.md): does the unconditional default's
# recipe carry over to conditional ELF? configs/${TASK}_tiny.py with the release's settings
# ('base': the last layer, all 30,522 ids, bottleneck 128, self-conditioning 0.5, as it shipped
# until this question) against the default's changes ('recipe': encoder block 3, the cut
# vocabulary, bottleneck 32, no self-conditioning; the de->en config as it ships now), each change
# alone, and the recipe with its EOS padding at a tenth in the loss ('pad', beside 'recipe_ctl',
# the recipe again), at equal training minutes: the two runs of a seed train at once, one
# thread each, so they share the machine alike. Every run is scored by evaluate.py on the
# held-out pairs of one split (dev: where the choice is made; the 'near'
# duplicates of training pairs are not in it), Euler ODE 32, CFG 1 and 2, 3 sampling seeds.
#   bash results/cond_recipe/run.sh                       # base and recipe, seeds 0 1 2
#   ARMS="block3 vocab nosc b32" SEEDS=0 bash results/cond_recipe/run.sh   # each change alone
#   SPLIT=test ARMS="base recipe" bash results/cond_recipe/run.sh   # the test split, once chosen
#   TASK=wiki_summary bash results/cond_recipe/run.sh      # the summaries, base and recipe
#   python results/cond_recipe/table.py wiki_summary --collect runs/cond_recipe_wiki_summary
#   ARMS=pad SEEDS=0 bash results/cond_recipe/run.sh & ARMS=pad SEEDS=1 bash ...   # padding 0.1
#   ARMS=recipe_ctl SEEDS=0 bash ... & ARMS=recipe_ctl SEEDS=1 bash ...   # its control, that day
#   ARMS="pad recipe_ctl" SEEDS=2 bash results/cond_recipe/run.sh
#   python results/cond_recipe/table.py --collect runs/cond_recipe   # table.json, .md, plot
#   DIAGNOSE=1 SEEDS=0 bash results/cond_recipe/run.sh   # has it fit, does it read its source?
#   MINUTES=0 STEPS=3 N=4 RUNS=/tmp/cr bash results/cond_recipe/run.sh      # a smoke test
# MINUTES (16) is each run's training budget; SPLIT (dev) and N (all of the split) the scoring:
# dev reports go to <run>/eval, test reports to <run>/eval-test. A trained run is not trained
# again, a scored one not scored again. DIAGNOSE=1 trains nothing: it runs evaluate.py
# --diagnose (training pairs, sources shuffled and zeroed) and the error decomposition (decoder
# on clean latents, round trips) on the trained runs, CFG 2, one sampling seed, the 39 dev
# pairs and the first 39 training pairs, into <run>/diag.
set -euo pipefail
cd "$(dirname "$0")/../.."
task=${TASK:-de_en}  # or wiki_summary: configs/${task}_tiny.py, into runs/cond_recipe_<task>
runs=${RUNS:-runs/cond_recipe}; [ "$task" = de_en ] || runs=${RUNS:-runs/cond_recipe_$task}
minutes=${MINUTES:-16}; split=${SPLIT:-dev}; n=${N:-117}
arms=${ARMS:-base recipe}
limit=(--time_limit_min "$minutes"); [ -n "${STEPS:-}" ] && limit+=(--max_steps "$STEPS")
overrides() {  # an arm's train.py overrides on top of configs/${task}_tiny.py, all four named
    local layer=(--encoder_layer -1) vocab=(--token_vocab full) sc=(--self_cond_prob 0.5)
    local b=(--bottleneck 128) extra=()  # base: the release's four; an arm changes one of them
    case $1 in
        base) ;;
        block3) layer=(--encoder_layer 3) ;;
        vocab) vocab=(--token_vocab train) ;;
        nosc) sc=(--self_cond_prob 0) ;;
        b32) b=(--bottleneck 32) ;;
        recipe|recipe_ctl|pad)  # all four; recipe_ctl: the recipe again, when and where pad was
            layer=(--encoder_layer 3) vocab=(--token_vocab train) sc=(--self_cond_prob 0)
            b=(--bottleneck 32)
            [ "$1" = pad ] && extra=(--pad_weight 0.1) ;;  # the padding at a tenth in the loss
        *) echo "unknown arm '$1' (base block3 vocab nosc b32 recipe pad recipe_ctl)" >&2
           return 1 ;;
    esac
    echo "${layer[@]}" "${vocab[@]}" "${sc[@]}" "${b[@]}" "${extra[@]}"
}
[ -f "configs/${task}_tiny.py" ] || { echo "unknown TASK '$task' (de_en wiki_summary)" >&2; exit 1; }
for arm in $arms; do overrides "$arm" > /dev/null; done   # a typo stops here, before training
mkdir -p "$runs"
ev=eval; [ "$split" = dev ] || ev=eval-$split
diagnose() {  # arm seed, on one thread
    local out=$runs/$1-s$2
    [ -e "$out/latest" ] && [ ! -e "$out/diag/report.json" ] || return 0
    OMP_NUM_THREADS=1 python evaluate.py --ckpt "$out" --split dev --n "${N:-39}" --seeds 0 \
        --sampler ode --steps 32 --guidance 2 --diagnose --decompose only --out_dir "$out/diag" \
        --overwrite > "$out-diag.log" 2>&1
}
train_and_score() {  # arm seed, on one thread
    local out=$runs/$1-s$2
    if [ -n "${DIAGNOSE:-}" ]; then diagnose "$1" "$2"; return; fi
    [ -e "$out/$ev/report.json" ] && return 0
    if [ ! -e "$out/latest" ]; then
        # shellcheck disable=SC2046
        OMP_NUM_THREADS=1 python train.py "configs/${task}_tiny.py" $(overrides "$1") \
            --out_dir "$out" --seed "$2" --n_samples 0 --overwrite "${limit[@]}" > "$out.log" 2>&1
    fi
    OMP_NUM_THREADS=1 python evaluate.py --ckpt "$out" --split "$split" --n "$n" --seeds 0,1,2 \
        --sampler ode --steps 32 --guidance 1,2 --decompose off --out_dir "$out/$ev" \
        --overwrite >> "$out.log" 2>&1
}
for seed in ${SEEDS:-0 1 2}; do
    pids=()
    for arm in $arms; do train_and_score "$arm" "$seed" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p"; done
done
