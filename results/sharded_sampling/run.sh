#!/usr/bin/env bash
# samples/s of sample.py on 1 and 2 CPU ranks: ELF-tiny with random weights (MiniLM's D 384,
# V 30522), length 16 and 64, uncond32 (SDE, 32 steps, NFE 33), 64 samples in chunks of 16;
# then FLOPs per sample and the ELF-B estimate (measure.py). The checkpoints, samples, run.json
# files and the log (run.log) go to DIR (default runs/sharded_sampling); only the summary,
# measured.md, is written beside this script.
#   bash results/sharded_sampling/run.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/sharded_sampling}
rm -rf "$OUT" && mkdir -p "$OUT"
exec > >(tee "$OUT/run.log") 2>&1
python results/sharded_sampling/measure.py ckpt "$OUT"
common="--n 64 --batch_size 16 --seed 0"
for L in 16 64; do
    OMP_NUM_THREADS=1 python sample.py --ckpt "$OUT/tiny$L" $common --out "$OUT/L$L-1x1" | grep "samples:"
    OMP_NUM_THREADS=2 python sample.py --ckpt "$OUT/tiny$L" $common --out "$OUT/L$L-1x2" | grep "samples:"
    OMP_NUM_THREADS=1 python -m torch.distributed.run --standalone --nproc_per_node=2 -- \
        sample.py --ckpt "$OUT/tiny$L" $common --out "$OUT/L$L-2x1" | grep "samples:"
    cmp "$OUT/L$L-1x1/samples.jsonl" "$OUT/L$L-2x1/samples.jsonl" && echo "L$L: 2 ranks wrote the same bytes as 1"
done
{ echo "Measured $(date -u +%F) on the 2-core development machine, shared with other jobs (load: $(cut -d' ' -f1-3 /proc/loadavg))."
  echo
  OMP_NUM_THREADS=2 python results/sharded_sampling/measure.py report "$OUT"; } | tee results/sharded_sampling/measured.md
