"""encoder.py: bundled and T5 encoders, normalisation, encoding under the conditional mask (the
masks themselves: test_cond.py), the latent cache (and a damaged one rebuilt)."""

import os

import numpy as np
import pytest
import torch

from conditional import Rows, batch_masks
from encoder import FrozenEncoder, LatentCache


def test_bundled_encoder_is_frozen_and_encodes(minilm):
    assert minilm.dim == 384 and minilm.vocab_size == 30522
    assert minilm.eos_id == minilm.tokenizer.sep_token_id  # BERT: [SEP] ends a text
    assert not minilm.model.training and not any(p.requires_grad for p in minilm.model.parameters())
    ids = torch.tensor(minilm.tokenize(["The cat sat on the mat."]))
    assert minilm.tokenizer.cls_token_id not in ids  # no special tokens added
    h = minilm.encode(ids)
    assert h.shape == (1, ids.shape[1], 384) and h.dtype == torch.float32
    assert (
        minilm.detokenize(torch.cat([ids[0], torch.tensor([minilm.eos_id, 2000, 2001])]))
        == "the cat sat on the mat."
    )


def test_normalisation_round_trip_and_estimate(minilm):
    ids = torch.tensor(minilm.tokenize(["Paris is the capital of France and a large city."]))
    h = minilm.encode(ids)
    enc = FrozenEncoder.__new__(FrozenEncoder)  # statistics only: no need to load weights again
    enc.latent_mean = enc.latent_std = None
    with pytest.raises(RuntimeError, match="latent statistics"):
        enc.normalize(h)
    mean, std = enc.estimate_stats(h.numpy())
    x = enc.normalize(h)
    assert abs(x.mean().item()) < 1e-5 and abs(x.std().item() - 1) < 1e-4
    assert torch.allclose(enc.denormalize(x), h, atol=1e-5)


def test_t5_models_load_through_t5_encoder(tiny_t5_dir):
    from transformers import T5EncoderModel

    enc = FrozenEncoder(tiny_t5_dir)
    assert isinstance(enc.model, T5EncoderModel) and enc.dim == 32
    ids = torch.tensor(enc.tokenize(["a short text"]))
    assert enc.encode(ids).shape == (1, ids.shape[1], 32)


def test_masked_encoding_keeps_the_condition_independent_of_the_target(minilm):
    ids = torch.tensor(
        [
            minilm.tokenize(["paris is the capital of france"])[0]
            + minilm.tokenize(["hello world"])[0]
        ]
    )
    c = 6
    mask = batch_masks(Rows(ids, torch.tensor([ids.shape[1]]), torch.tensor([c]))).attention()
    h = minilm.encode(ids, mask)
    alone = minilm.encode(ids[:, :c])
    assert torch.allclose(h[:, :c], alone, atol=1e-5)
    other = ids.clone()
    other[0, c:] = 1000  # change the target
    h2 = minilm.encode(other, mask)
    assert torch.allclose(h2[:, :c], h[:, :c], atol=1e-5)
    assert not torch.allclose(h2[:, c:], h[:, c:])


def test_latent_cache_round_trip_and_keys(minilm, tmp_path):
    ids = torch.tensor(minilm.tokenize(["one two three four five six seven eight"] * 5))
    rows = lambda ids, n=None: Rows(ids, torch.full((len(ids),), n or ids.shape[1]))
    cache = LatentCache(str(tmp_path), minilm, rows(ids))
    assert not cache.exists()
    cache.build(batch_size=2, progress=False)
    assert cache.exists()
    got = torch.from_numpy(cache.load()[:].astype(np.float32))
    assert torch.allclose(got, minilm.encode(ids), atol=2e-3)  # fp16 storage
    # other data, another max_length or other masks give another file: a stale cache is never read
    assert LatentCache(str(tmp_path), minilm, rows(ids[:, :4])).path != cache.path
    other = ids.clone()
    other[0, 0] += 1
    assert LatentCache(str(tmp_path), minilm, rows(other)).path != cache.path
    assert LatentCache(str(tmp_path), minilm, rows(ids, 6)).path != cache.path  # padding masked
    assert LatentCache(str(tmp_path), minilm, rows(ids.clone())).path == cache.path
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically


def test_too_long_for_the_encoder(minilm):
    with pytest.raises(ValueError, match="exceeds encoder"):
        minilm.encode(torch.zeros(1, 513, dtype=torch.long))


def test_a_random_encoder_of_the_same_architecture_is_fixed_and_different(minilm):
    """encoder_weights=random (the ablation of the pretrained encoder): the same random weights
    every time, so its latents can be cached and a run resumed."""
    a, b = (
        FrozenEncoder("minilm", 0.0, 1.0, weights="random"),
        FrozenEncoder("minilm", 0.0, 1.0, weights="random"),
    )
    ids = torch.tensor(minilm.tokenize(["the cat sat on the mat"]))
    assert torch.equal(a.encode(ids), b.encode(ids))
    assert (a.encode(ids) - minilm.encode(ids)).abs().mean() > 0.1
    assert a.dim == minilm.dim and a.vocab_size == minilm.vocab_size


def test_the_latents_can_be_an_earlier_layers_states(minilm, tmp_path):
    """encoder_layer k: block k's output (0: the token embeddings) instead of the last hidden
    states; -1, the default, is the last, and keeps the cache key of the runs before the option."""
    ids = torch.tensor(minilm.tokenize(["the cat sat on the mat"]))
    # 7: embeddings + 6 blocks
    states = minilm.model(input_ids=ids, output_hidden_states=True).hidden_states
    last, third = (
        FrozenEncoder("minilm", 0.0, 1.0, layer=-1),
        FrozenEncoder("minilm", 0.0, 1.0, layer=3),
    )
    assert torch.equal(last.encode(ids), minilm.encode(ids))
    assert torch.allclose(last.encode(ids), states[6], atol=1e-6)
    assert torch.allclose(third.encode(ids), states[3], atol=1e-6)
    assert (third.encode(ids) - last.encode(ids)).abs().mean() > 0.1
    rows = Rows(ids, torch.full((1,), ids.shape[1]))
    assert (
        LatentCache(str(tmp_path), last, rows).path == LatentCache(str(tmp_path), minilm, rows).path
    )
    assert (
        LatentCache(str(tmp_path), third, rows).path
        != LatentCache(str(tmp_path), minilm, rows).path
    )
    with pytest.raises(ValueError, match="encoder layer 7 out of range: 'minilm' has 6 layers"):
        FrozenEncoder("minilm", 0.0, 1.0, layer=7)


def test_a_damaged_latent_cache_is_named_and_rebuilt(minilm, tmp_path, capsys):
    """Truncated, or nan bytes in place: the cache is rebuilt (with a warning naming it) and
    reads as before; damaged after it was opened, the batch that reads it stops in one line."""
    from encoder import Latents

    ids = torch.tensor(minilm.tokenize(["one two three four five six"] * 4))
    rows = Rows(ids, torch.full((len(ids),), ids.shape[1]))
    path = Latents(minilm, rows, str(tmp_path), True).cache.path
    good = Latents(minilm, rows, str(tmp_path), True).raw(np.arange(4))
    size = os.path.getsize(path)

    def nan_at_end():
        with open(path, "r+b") as f:
            f.seek(size - 2)
            f.write(b"\x00\x7e")  # float16 nan, little-endian

    for damage, why in (
        (lambda: open(path, "r+b").truncate(size // 2), "unreadable: "),
        (nan_at_end, "rows 0..3 hold values that are not finite"),
    ):
        damage()
        capsys.readouterr()
        assert torch.equal(Latents(minilm, rows, str(tmp_path), True).raw(np.arange(4)), good)
        assert f"warning: latent cache {path} is damaged ({why}" in capsys.readouterr().err
    latents = Latents(minilm, rows, str(tmp_path), True)
    nan_at_end()  # the mapping sees the change
    with pytest.raises(
        ValueError, match=f"latent cache {path} holds values that are not finite .*delete it"
    ):
        latents.raw(np.arange(4))
