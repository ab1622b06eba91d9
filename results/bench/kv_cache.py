"""What the KV cache buys the AR baseline's sampler (baselines/ar.py `sample`, kv_cache on and
off): seconds to draw 64 samples of 16 and of 64 new tokens from a random GPT-2 of
configs/ar_tiny.py's size (4 x 256, 4 heads, its 8730 training ids). A random model rarely
draws EOS, so every row runs its full length: the time is the sampler's, not the text's.

    OMP_NUM_THREADS=2 python results/bench/kv_cache.py > results/bench/kv_cache_cpu.log

Times are medians of `REPEATS` calls of each arm, alternated, after a warm-up call; compare
within one run (a shared machine's speed varies between runs). Both arms draw the same tokens
(tests/test_kv_cache.py). Without the cache a step also computes the vocabulary logits of every
position read, not only the last one's: that is part of what the cache saves here.
"""

import os
import platform
import statistics
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from baselines import ar  # noqa: E402  (the repository root, above)

N, LENGTHS, REPEATS, VOCAB = 64, (16, 64), 3, 8730


class Ids:
    """A stand-in tokenizer: EOS is id 0, a text is its ids (decoding costs nothing)."""

    eos_token_id = 0

    def decode(self, row, skip_special_tokens=True):
        return " ".join(map(str, row))


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=VOCAB,
            n_positions=128,
            n_embd=256,
            n_layer=4,
            n_head=4,
            bos_token_id=0,
            eos_token_id=0,
        )
    ).eval()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}; "
        f"GPT-2 {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params; "
        f"{N} samples in one batch, median of {REPEATS}; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print("new tokens | kv_cache=false (s) | kv_cache=true (s) | speed-up | same texts")
    for length in LENGTHS:
        draw = lambda on: ar.sample(model, Ids(), N, length, seed=0, batch_size=N, kv_cache=on)
        texts = {on: draw(on) for on in (False, True)}  # a warm-up call of each
        times = {False: [], True: []}
        for _ in range(REPEATS):  # alternated: a shared machine's load falls on both arms
            for on in (False, True):
                start = time.perf_counter()
                draw(on)
                times[on].append(time.perf_counter() - start)
        off, on = (statistics.median(times[k]) for k in (False, True))
        print(
            f"{length:10d} | {off:18.3f} | {on:17.3f} | {off / on:7.2f}x"
            f" | {texts[False] == texts[True]}"
        )


if __name__ == "__main__":
    main()
