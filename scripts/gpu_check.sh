#!/usr/bin/env bash
# One-shot check of the CUDA paths (bench.py, train.py's loop, the samplers) on one GPU, in
# at most ~8 minutes, printing a short report; any CUDA-only error (a compile graph break,
# a dtype mismatch, pinned memory) stops it loudly. Run it whenever a GPU is at hand and put
# its figures in the README's performance table with the date and the GPU's name:
#   bash scripts/gpu_check.sh            # on a CUDA machine
#   bash scripts/gpu_check.sh --cpu      # reduced mode on a CPU (tiny shapes): what the tests run
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--cpu" ]; then
    MODEL=tiny; B=8; L=32; STEPS=12; DEVICE=cpu; COMPILE=false; DTYPE=float32; SAMPLE_STEPS=4; T5_LAYERS=1; BLR=0.2; ITERS=1
else
    MODEL=ELF-B; B=32; L=1024; STEPS=50; DEVICE=cuda; COMPILE=true; DTYPE=bfloat16; SAMPLE_STEPS=32; T5_LAYERS=6; BLR=4e-2; ITERS=3
    python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'error: no CUDA device (use --cpu)')"
fi
export TORCHDYNAMO_VERBOSE=1 PYTHONUNBUFFERED=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== $(date -u +%F) $(python -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu', torch.__version__)")"

echo "== 1. bench.py: $MODEL at batch $B x $L, compiled=$COMPILE, $DTYPE"
python bench.py --models "$MODEL" --batch_size "$B" --length "$L" --compile "$COMPILE" --parts train,sample \
    --sample_steps "$SAMPLE_STEPS" --sample_batch "$B" --iters "$ITERS" --peak_reps "$ITERS" --device "$DEVICE"

echo "== 2. train.py: $STEPS steps of $MODEL, a random T5-sized encoder (d 512), the bundled paragraphs"
python - "$tmp/t5" "$T5_LAYERS" <<'PY'
import sys
from transformers import T5Config, T5EncoderModel
from encoder import FrozenEncoder
tok = FrozenEncoder("minilm").tokenizer          # any tokenizer: the dims are what matter here
cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=int(sys.argv[2]), num_heads=8,
               pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id)
T5EncoderModel(cfg).save_pretrained(sys.argv[1])
tok.save_pretrained(sys.argv[1])
PY
python train.py --dataset wiki --encoder "$tmp/t5" --latent_mean none --latent_std none --model "$MODEL" \
    --max_length "$L" --batch_size "$B" --blr "$BLR" --warmup_steps 5 --max_steps "$STEPS" --eval_interval "$STEPS" \
    --ckpt_interval "$STEPS" --n_samples 2 --sample_steps "$SAMPLE_STEPS" --device "$DEVICE" --compile "$COMPILE" \
    --dtype "$DTYPE" --log_interval 1 --out_dir "$tmp/run" --optimizer muon
python - "$tmp/run/metrics.jsonl" "$DEVICE" <<'PY'
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if "loss" in r]
assert all(math.isfinite(r[k]) for r in steps for k in ("loss", "mse", "ce")), f"non-finite loss: {steps}"
third = max(1, len(steps) // 3)                      # the denoise MSE: every step has denoise rows
first, last = (sum(r["mse"] for r in part) / len(part) for part in (steps[:third], steps[-third:]))
print(f"train denoise MSE: first {third} steps {first:.3f} -> last {third} {last:.3f} ({len(steps)} steps)")
assert last < first, "the training loss did not decrease"
mem = [r["peak_memory_gb"] for r in recs if "peak_memory_gb" in r]
print(f"peak GPU memory of the training run: {mem[-1]:.1f} GB" if mem else "peak GPU memory: (CPU run)")
PY
echo "== gpu_check: all passed"
