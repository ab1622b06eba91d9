"""The evaluation instrument on made-up text whose answers are known: diversity at a matched size,
self-BLEU, MAUVE, the Kneser-Ney judge, the dev/test split, the paired interval, provenance."""

import math
import random

import numpy as np
import pytest

from lib import ngram
from lib.data import wiki_records
from lib.mauve_score import features, mauve_of
from lib.metrics import (
    distinct_at,
    diversity,
    paired_interval,
    self_bleu,
    t975,
    unique_share,
    value_at,
)
from lib.reference import split_of, split_texts
from lib.report import machine

SENTENCES = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "paris is the capital of france",
    "rivers flow to the sea",
    "bread is made from flour",
    "the sun is a star",
    "music is an art form",
    "trees grow from seeds",
]


@pytest.fixture(scope="module")
def descriptions():
    """Real one-line descriptions of the bundled data, in a fixed order."""
    texts = sorted({r.description for r in wiki_records() if r.description})
    random.Random(0).shuffle(texts)
    return texts


def test_a_set_of_one_repeated_text_is_not_diverse():
    ids = [[1, 2, 3, 4, 5]] * 16
    texts = ["the cat sat on the mat"] * 16
    # 5 distinct unigrams among 8 x 5 tokens at a matched size of 8 texts: 1/8
    assert distinct_at(ids, 1, 8) == pytest.approx(5 / 40)
    assert distinct_at(ids, 2, 8) == pytest.approx(4 / 32)
    assert unique_share(texts) == pytest.approx(1 / 16)
    assert self_bleu(texts) == pytest.approx(100.0)
    d = diversity(texts, ids, size=8)
    assert d["length"] == 5 and d["unique"] == pytest.approx(1 / 16)
    assert d["self_bleu"] == pytest.approx(100.0)
    assert d["distinct_3_matched"] == pytest.approx(1 / 8)


def test_distinct_n_is_compared_at_one_size():
    """Texts that never repeat an n-gram score 1 at every size; a set's distinct-n at its own
    size is plain distinct-n, and a subsample is drawn from a fixed seed."""
    ids = [[100 + 10 * i + j for j in range(4)] for i in range(20)]
    assert distinct_at(ids, 2, 5) == distinct_at(ids, 2, 20) == 1.0
    mixed = ids[:10] + [[1, 2, 3, 4]] * 10
    assert distinct_at(mixed, 1, 5, seed=3) == distinct_at(mixed, 1, 5, seed=3)
    assert 0.5 < distinct_at(mixed, 1, 20) < 0.6  # (40 + 4) / 80
    varied = diversity(SENTENCES, [s.split() for s in SENTENCES], size=8)
    assert varied["unique"] == 1.0 and varied["self_bleu"] < 30


def test_paired_interval_against_a_hand_computation():
    # differences 1, 2, 3: mean 2, sd 1, s.e. 1/sqrt(3), t(2) = 4.303
    mean, lo, hi, n = paired_interval([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert (mean, n) == (2.0, 3)
    assert (lo, hi) == pytest.approx((2 - 4.303 / math.sqrt(3), 2 + 4.303 / math.sqrt(3)))
    # differences 0.5, 1.5: mean 1, s.e. 0.5, t(1) = 12.706
    assert paired_interval([1.5, 2.5], [1.0, 1.0])[1:3] == pytest.approx((1 - 6.353, 1 + 6.353))
    mean, lo, hi, n = paired_interval([2.0], [1.5])
    assert mean == 0.5 and n == 1 and math.isnan(lo) and math.isnan(hi)
    assert t975(30) == 2.042 and t975(60) == pytest.approx(2.0, abs=0.002)
    with pytest.raises(ValueError, match="pairs"):
        paired_interval([1.0], [1.0, 2.0])


def test_a_frontier_is_read_between_its_points_and_never_beyond():
    # two settings of a knob: (distinct-2 0.8, PPL 4) and (0.9, 2), given in either order
    assert value_at([(0.9, 2.0), (0.8, 4.0)], 0.85) == pytest.approx(3.0)
    assert value_at([(0.8, 4.0), (0.9, 2.0)], 0.8) == 4.0
    assert value_at([(0.8, 4.0), (0.9, 2.0), (1.0, 0.0)], 0.95) == pytest.approx(1.0)
    assert value_at([(0.8, 4.0), (0.9, 2.0)], 0.95) is None  # beyond the frontier
    assert value_at([(0.8, 4.0), (0.9, 2.0)], 0.7) is None
    assert value_at([(0.8, 4.0)], 0.8) == 4.0 and value_at([], 0.8) is None


def test_kneser_ney_is_a_distribution_over_the_vocabulary():
    docs = [[1, 2, 3, 4], [1, 2, 3, 5], [2, 3, 4, 1], [6, 7]]
    for order in (1, 2, 3, 4):
        lm = ngram.KneserNey.fit(docs, vocab_size=12, eos_id=11, order=order)
        for context in ([ngram.BOS] * 3, [1, 2, 3], [9, 9, 9], [3, 4, 7], [0, 2, 3]):
            total = sum(lm.prob(context, w) for w in range(12))
            assert total == pytest.approx(1.0, abs=1e-12), (order, context)
            assert all(lm.prob(context, w) > 0 for w in range(12))  # unseen ids too


def test_kneser_ney_prefers_training_text_to_the_same_words_shuffled():
    rng = random.Random(0)
    words = {w: i for i, w in enumerate(sorted({w for s in SENTENCES for w in s.split()}))}
    docs = [[words[w] for w in s.split()] for s in SENTENCES] * 5
    lm = ngram.KneserNey.fit(docs, vocab_size=len(words) + 1, eos_id=len(words), order=3)
    shuffled = [rng.sample(d, len(d)) for d in docs[:8]]
    assert lm.ppl(docs[:8]) < lm.ppl(shuffled) / 2


def test_the_kneser_ney_cache_round_trips(tmp_path, monkeypatch):
    docs = [[1, 2, 3, 4], [4, 3, 2, 1, 2]]
    lm = ngram.fit_cached(docs, 10, 9, str(tmp_path))
    assert len(list(tmp_path.glob("ngram3-*.npz"))) == 1  # one cache file
    monkeypatch.setattr(ngram.KneserNey, "fit", None)  # a second call must not refit
    again = ngram.fit_cached(docs, 10, 9, str(tmp_path))
    assert again.counts == lm.counts and again.name == lm.name
    assert again.ppl([[1, 2, 5]]) == lm.ppl([[1, 2, 5]])
    monkeypatch.undo()
    other = ngram.fit_cached(docs + [[7]], 10, 9, str(tmp_path))  # other data: another file
    assert other.name != lm.name and len(list(tmp_path.glob("ngram3-*.npz"))) == 2


def test_the_held_out_split_is_fixed_disjoint_and_whole(descriptions):
    texts = descriptions[:400]
    dev, test = split_texts(texts, "dev"), split_texts(texts, "test")
    assert not set(dev) & set(test) and sorted(dev + test) == sorted(texts)
    assert split_texts(texts, "all") == texts
    assert 150 < len(dev) < 250  # about half
    assert split_texts(list(reversed(texts)), "dev") == list(reversed(dev))  # order-free
    assert split_of("the cat sat on the mat") == split_of("the cat sat on the mat")
    with pytest.raises(ValueError, match="unknown split 'val'"):
        split_texts(texts, "val")


def test_mauve_tells_one_distribution_from_another():
    rng = np.random.default_rng(0)
    p, q = (rng.normal(size=(128, 16)).astype(np.float32) for _ in range(2))
    assert mauve_of(p, q) > 0.9
    assert mauve_of(p + 3, q) < 0.1  # shifted
    assert mauve_of(np.repeat(p[:1], 128, 0), q) < 0.1  # one point repeated


def test_mauve_of_real_text(minilm, descriptions):
    """Real descriptions against other real descriptions score near 1; one description
    repeated, far lower."""
    f = features(minilm, descriptions[:192])
    assert f.shape == (192, minilm.dim) and np.allclose(np.linalg.norm(f, axis=1), 1, atol=1e-5)
    real = mauve_of(f[:64], f[64:])
    repeated = mauve_of(np.repeat(f[:1], 64, 0), f[64:])
    assert real > 0.8 and repeated < 0.2


def test_machine_names_the_cpu_and_torch():
    m = machine()
    assert (
        m["cpu"]
        and m["torch"]
        and set(m["cpu_flags"]) <= {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    )
