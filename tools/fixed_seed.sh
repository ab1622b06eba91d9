#!/usr/bin/env bash
# Fixed-seed outputs of every trainer and sampler, to show that a refactor changed no number:
# record them before the change and after it, then compare (bitwise weights, every loss, every
# sample's text, every figure of evaluate.py's reports; timings and paths aside).
#
#   git stash; bash tools/fixed_seed.sh record runs/fixed/before; git stash pop
#   bash tools/fixed_seed.sh record runs/fixed/after
#   bash tools/fixed_seed.sh compare runs/fixed/before runs/fixed/after     # "ALL SAME" or the diffs
#
# About 5 minutes on 2 CPU cores (a 60-step tiny run, sampling, a distillation round, MDLM, the AR
# baseline, a small judge, three evaluations, and a de->en run when auf-deutsch is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = compare ]; then
    python - "$2" "$3" <<'PY'
"""Compare two recordings: every number and text, timings and paths aside."""
import json, os, re, sys
import torch
from safetensors.torch import load_file
A, B = sys.argv[1], sys.argv[2]
ra, rb, bad = A + "/run", B + "/run", []
TIMING = {"minutes", "peak_rss_gb", "mapped_files_gb", "seconds", "samples_per_s",
          "per_rank_samples_per_s", "train_minutes"}
# paths and provenance; ckpt_sha256 too: the weights file's header holds the run's config,
# whose keys a refactor may rename or reorder (the tensors themselves are compared bitwise)
OTHER = {"ckpt_sha256", "ckpt", "ckpt_folder", "git_commit", "git_dirty", "teacher", "distill",
         "judge", "source", "samples", "out_dir", "cache_dir", "init", "config", "evaluation",
         "provenance"}


def clean(o):
    if isinstance(o, dict):
        return {k: clean(v) for k, v in o.items() if k not in TIMING | OTHER}
    return [clean(v) for v in o] if isinstance(o, list) else o


def same(name, a, b):
    print(("same " if a == b else "DIFF ") + name)
    if a != b:
        bad.append(name)


def jsonl(p):
    return [clean(json.loads(line)) for line in open(p) if line.strip()]


def weights(name, pa, pb):
    a, b = load_file(pa), load_file(pb)
    same(name, a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), True)


def latest(run):
    return os.path.join(run, open(os.path.join(run, "latest")).read().strip(), "model.safetensors")


runs = ["tiny", "mdlm"] + (["cond"] if os.path.isdir(f"{ra}/cond") and os.path.isdir(f"{rb}/cond") else [])
for run in runs:
    same(f"{run} metrics", jsonl(f"{ra}/{run}/metrics.jsonl"), jsonl(f"{rb}/{run}/metrics.jsonl"))
    weights(f"{run} weights", latest(f"{ra}/{run}"), latest(f"{rb}/{run}"))
weights("distill round1 weights", latest(f"{ra}/dist/round1"), latest(f"{rb}/dist/round1"))
for d in ("ar", "judge"):
    weights(f"{d} weights", f"{ra}/{d}/model.safetensors", f"{rb}/{d}/model.safetensors")
same("ar samples", jsonl(f"{ra}/ar/samples.jsonl"), jsonl(f"{rb}/ar/samples.jsonl"))
logs = [clean(json.load(open(f"{r}/ar/train_log.json"))) for r in (ra, rb)]
same("ar train log", *logs)
same("mdlm samples", jsonl(f"{ra}/mdlm/samples-4steps.jsonl"), jsonl(f"{rb}/mdlm/samples-4steps.jsonl"))
key = lambda rs: [(r["index"], r["seed"], r["nfe"], r["text"]) for r in rs]
same("sample --out texts", key(jsonl(f"{ra}/samp/samples.jsonl")), key(jsonl(f"{rb}/samp/samples.jsonl")))
same("sample --out settings", *[json.load(open(f"{r}/samp/run.json"))["settings"] for r in (ra, rb)])
noise = re.compile(r"(\d+\.\d+ ?s\b|s/it|it/s|samples/s|\bmin\b|config:|latent cache|peak resident|%\||^data: )")
printed = lambda p: [line for line in open(p).read().splitlines() if not noise.search(line)]
for f in ("sample_plain.out", "train.out"):
    same(f, printed(f"{A}/{f}"), printed(f"{B}/{f}"))
for d in ("eval", "evald") + (("evalc",) if "cond" in runs else ()):
    same(f"{d} report", *[clean(json.load(open(f"{r}/{d}/report.json"))) for r in (ra, rb)])
print("ALL SAME" if not bad else f"{len(bad)} DIFFER: {bad}")
PY
    exit
fi
[ "${1:-}" = record ] && [ -n "${2:-}" ] || { echo "usage: bash tools/fixed_seed.sh record DIR | compare DIR_A DIR_B" >&2; exit 2; }
O=$2; C=${3:-$O/cache}
mkdir -p "$O"; rm -rf "$O/run"; mkdir -p "$O/run"; R=$O/run
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
python train.py configs/tiny.py --max_steps 60 --time_limit_min 0 --seed 0 --out_dir $R/tiny --cache_dir $C --n_samples 4 > $O/train.out 2>$O/train.err
python sample.py --ckpt $R/tiny --n 6 --steps 8 --batch_size 4 --out $R/samp > $O/sample_out.out 2>&1
python sample.py --ckpt $R/tiny --n 3 --steps 4 --sampler sde --gamma 1.0 --prefix "species of" > $O/sample_plain.out 2>&1
python distill.py configs/distill_tiny.py --teacher $R/tiny --round 1 --steps_per_round 6 --batch_size 16 --out_dir $R/dist > $O/distill.out 2>&1
python -m baselines.mdlm configs/mdlm_tiny.py --max_steps 20 --time_limit_min 0 --out_dir $R/mdlm --cache_dir $C --sample_steps 4 --n_samples 4 --sample_seeds 0 --eval_interval 10 > $O/mdlm.out 2>&1
python -m baselines.ar configs/ar_tiny.py --steps 20 --time_limit_min 0 --out $R/ar --n_samples 4 --sample_seeds 0 > $O/ar.out 2>&1
python -m baselines.ar --data wiki_descriptions --out $R/judge --steps 20 --length 32 --vocab 512 --seed 3 > $O/judge.out 2>&1
python evaluate.py --ckpt $R/tiny --judge $R/judge --n 8 --seeds 0,1 --steps 4 --out_dir $R/eval --decompose_n 8 > $O/eval.out 2>&1
python evaluate.py --distill $R/dist --ckpt $R/tiny --judge $R/judge --n 4 --seeds 0 --distill_steps 1,2 --traj_n 4 --traj_ref_steps 8 --out_dir $R/evald > $O/evald.out 2>&1
if python -c "import auf_deutsch" 2>/dev/null; then
python train.py configs/de_en_tiny.py --max_steps 8 --time_limit_min 0 --out_dir $R/cond --cache_dir $C --n_samples 2 --sample_steps 4 --batch_size 16 --eval_interval 4 > $O/cond.out 2>&1
python evaluate.py --ckpt $R/cond --n 6 --seeds 0 --steps 4 --guidance 1,2 --out_dir $R/evalc --decompose_n 4 > $O/evalc.out 2>&1
fi
echo "recorded in $O"
