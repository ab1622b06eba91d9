"""The KV cache of the autoregressive baselines (baselines/ar.py's `sample`, baselines/ar_cond.py's
`decode`): reading only the newest token beside the cached keys and values gives the tokens of
re-reading the whole prefix at every step (kv_cache=false), greedy and sampled from a fixed seed,
and the same logits at every step to round-off. A tiny random GPT-2 (no download, no training),
rows in batches, conditional sources of different lengths.

    OMP_NUM_THREADS=1 python -m pytest -q tests/test_kv_cache.py
"""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from baselines import ar, ar_cond
from conditional import arrange
from lib.config import parse

V, EOS = 24, 1  # a small vocabulary: a random model draws EOS now and then


def tiny_gpt2():
    """A random GPT-2, 2 layers of width 32, over V ids; its output layer untied (tied, the
    argmax of a random model is the token it reads: greedy would only repeat the source's EOS)."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=V,
            n_positions=40,
            n_embd=32,
            n_layer=2,
            n_head=2,
            bos_token_id=EOS,
            eos_token_id=EOS,
            tie_word_embeddings=False,
        )
    )
    model.config.vocab_ids = None  # as ar_cond.build: the full vocabulary
    return model.eval()


class Ids:
    """A tokenizer whose text is the ids themselves, so equal texts are equal tokens."""

    eos_token_id = eos_id = EOS
    tokenizer = range(V)  # ar_cond reads its len()

    def decode(self, row, skip_special_tokens=True):
        return " ".join(map(str, row))

    def detokenize(self, row):  # the whole row, EOS and what follows it too
        return self.decode(row.tolist())


def recorded(fn, model, *args, **kw):
    """fn(model, ...), and the (input length, last-position logits (B, V)) of each model call."""
    calls = []
    hook = model.register_forward_hook(
        lambda m, args, kwargs, out: calls.append((args[0].shape[1], out.logits[:, -1].clone())),
        with_kwargs=True,
    )
    try:
        return fn(model, *args, **kw), calls
    finally:
        hook.remove()


def assert_same(cached, uncached):
    """The same outputs, the same number of steps, the same logits to float round-off."""
    (a, calls_a), (b, calls_b) = cached, uncached
    assert a == b and len(calls_a) == len(calls_b)
    for (_, la), (_, lb) in zip(calls_a, calls_b):
        torch.testing.assert_close(la, lb, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1])
def test_ar_sample_cached_is_uncached(seed):
    model = tiny_gpt2()
    # 10 texts, <= 16 tokens
    run = lambda kv_cache: recorded(
        ar.sample, model, Ids(), 10, 16, seed, batch_size=4, kv_cache=kv_cache
    )
    cached, uncached = run(True), run(False)
    assert_same(cached, uncached)
    texts = cached[0]
    assert len(texts) == 10 and len(set(texts)) == 10  # drawn, not all one text
    assert min(len(t.split()) for t in texts) < 16 == max(len(t.split()) for t in texts)
    assert {n for n, _ in cached[1]} == {1}  # the cache read one token
    assert max(n for n, _ in uncached[1]) == 16  # the prefix re-read


@pytest.mark.parametrize("greedy,seed", [(True, 0), (False, 0), (False, 3)])
def test_ar_cond_decode_cached_is_uncached(greedy, seed):
    model, gen = tiny_gpt2(), torch.Generator().manual_seed(7)
    lens = [3, 1, 3, 5, 3, 6, 5, 1, 3]  # source lengths: groups of 1 to 4 rows
    sources = [(torch.randint(2, V, (n,), generator=gen)).tolist() for n in lens]
    rows = arrange(sources, [[] for _ in lens], EOS, 20, 8)  # [source + EOS ; EOS ...]
    # <= 12 target tokens
    run = lambda kv_cache: recorded(
        ar_cond.decode, model, Ids(), rows, 12, greedy, seed, batch_size=2, kv_cache=kv_cache
    )
    cached, uncached = run(True), run(False)
    assert_same(cached, uncached)
    out = cached[0]
    assert len(out) == len(lens) and min(r["nfe"] for r in out) < 12 == max(r["nfe"] for r in out)
    # a batch's first call reads its sources (+ EOS), every later one a single token: batches of
    # <= 2 rows of one source length, shortest first (2 rows of 1 + 1, 4 of 3 + 1, 2 of 5 + 1, ...)
    assert [n for n, _ in cached[1] if n > 1] == [2, 4, 4, 6, 7]


def test_kv_cache_is_on_by_default_and_a_flag():
    for cls in (ar.ARConfig, ar_cond.ARCondConfig):
        assert cls().kv_cache is True
        assert parse(["--kv_cache=false"], cls).kv_cache is False
    assert "kv_cache" in ar_cond.FREE_ON_RESUME  # decoding, not training


def test_ar_temperature_one_changes_nothing_and_a_lower_one_sharpens():
    """baselines/ar.py's `temperature`: 1 (the default) draws the same texts as before the key
    existed (logits / 1.0 is the same bits); a low temperature draws the argmax, with or without
    the cache; it is a key of the config, refused when not positive."""
    model = tiny_gpt2()
    draw = lambda **kw: ar.sample(model, Ids(), 8, 12, 0, batch_size=4, **kw)
    assert draw(temperature=1.0) == draw()
    cold = draw(temperature=1e-4)
    assert cold == draw(temperature=1e-4, kv_cache=False)
    # the argmax of a random model is one fixed path from EOS: every cold text the same
    assert len(set(cold)) == 1 and len(set(draw())) > 1
    assert ar.ARConfig().temperature == 1.0
    assert parse(["--temperature=0.7"], ar.ARConfig).temperature == 0.7
    with pytest.raises(ValueError, match="temperature"):
        ar.main(["--temperature=0", "--out=/nonexistent/never"])
