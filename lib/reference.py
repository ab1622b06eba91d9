"""The yardstick's reference (METHOD.md, "Evaluation"): a sample set means little alone, so
it is scored beside real held-out text of the checkpoint's own data, in the same form (rows
of the same length, decoded by the same tokenizer, cut at the first EOS), and beside that text
with its words shuffled within each text (what a bag of the right words scores). Novelty
compares samples with the training documents: verbatim copies, the share of their
n-grams seen in training, and the judge's Gen. PPL of the texts that are not copies
(`ppl_novel`: a model that writes its training texts back scores low on them). Each seed's
set is scored with lib/metrics.py; the spread reported is the standard error over seeds
(between sample sets).

The held-out text is split in two by a fixed hash of each text (`split_of`): choices (an
ablation's arms, a sampler's settings) are made on 'dev', headline figures read on 'test'.
Beside the judge, every set gets the judge-free figures of `Instrument`: diversity at a
matched number of texts (lib/metrics.diversity), the Kneser-Ney judge's perplexity
(lib/ngram.py) and MAUVE (lib/mauve_score.py) against the held-out texts of the split that are
not the seed's own real set.

Targets for the default run (`TARGETS`): entropy at least 90% of the real text's, Gen. PPL at
most 2x the real text's, at most 1 sample in 10 repetitive, at most 1 in 4 a verbatim copy of
a training text. evaluate.py runs it; tools/ablate.py reads its reports.
"""

import hashlib
import random
import types

import numpy as np

from lib.data import load_token_rows
from lib.mauve_score import mauve_of
from lib.metrics import copied, diversity, gen_ppl, mean_se, novelty, score_texts, token_scores

NOVELTY_ROWS = 50_000


TARGETS = {
    "entropy_ratio": (">=", 0.9),
    "ppl_ratio": ("<=", 2.0),
    "repetition": ("<=", 0.1),
    "copies": ("<=", 0.25),
}


def data_config(meta):
    """The checkpoint's data settings (older checkpoints: the defaults of keys they lack)."""
    if "dataset" not in meta["train"]:
        raise ValueError(
            "this checkpoint names no training data (a converted release?): "
            "the yardstick needs the data's held-out text; "
            "score its samples with --samples FILE instead"
        )
    return types.SimpleNamespace(**{"pad_token": "pad", "framing": False, **meta["train"]})


def novelty_gram(encoder, texts) -> int:
    """Novelty's n-gram: 8 words would never repeat by chance in long texts, but in a 9-token
    description an 8-gram is most of the text, so short texts (median < 16 tokens) use 4-grams."""
    lengths = sorted(len(t) for t in encoder.tokenize(texts))
    if not lengths:
        raise ValueError(
            "no held-out text to compare with (the data set's validation split is empty)"
        )
    return 4 if lengths[len(lengths) // 2] < 16 else 8


SPLITS = ("dev", "test", "all")


def split_of(text: str) -> str:
    """'dev' or 'test': the parity of the first byte of the text's sha256 (fixed forever, the
    same on every machine, independent of the order the texts come in)."""
    return "dev" if hashlib.sha256(text.encode("utf-8")).digest()[0] % 2 == 0 else "test"


def split_texts(texts, split: str):
    """The texts of one split ('all': every text), in their order."""
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})")
    return [t for t in texts if split == "all" or split_of(t) == split]


def documents(rows, eos_id: int, special=()):
    """conditional.Rows -> token lists: each row's valid part split at EOS (packed rows hold
    several), without the tokenizer's special tokens (framing's [CLS]): a text as a sample's
    reads."""
    docs = []
    for ids, n in zip(rows.ids.tolist(), rows.length.tolist()):
        doc = []
        for i in ids[:n] + [None]:
            if i is None or i == eos_id:
                if doc:
                    docs.append(doc)
                doc = []
            elif i not in special:
                doc.append(i)
    return docs


def reference(meta, encoder, n: int, seeds, split: str = "all"):
    """Real held-out texts of a split (n per seed), the same with words shuffled, the training
    documents as encoder token lists, and every held-out text of the split, for a checkpoint's
    data."""
    # the same rows training read (the token store of the checkpoint's own data settings), so
    # the real text has the samples' form: the same length, the same tokenizer, the same EOS
    train, val = load_token_rows(data_config(meta), encoder)
    val = val.select(slice(None))
    # a real row read as a sample is read: its valid part, cut at the first EOS
    held = [encoder.detokenize(ids[:n]) for ids, n in zip(val.ids.tolist(), val.length.tolist())]
    held = split_texts([t for t in held if t.strip()], split)
    real, shuffled = {}, {}
    for s in seeds:  # n held-out texts per seed, like the samples
        rng = random.Random(s)
        real[s] = rng.sample(held, min(n, len(held)))
        # the words of each text in a random order: right vocabulary, no syntax (a word list)
        shuffled[s] = [" ".join(rng.sample(t.split(), len(t.split()))) for t in real[s]]
    # novelty against (at most) the first NOVELTY_ROWS training rows: all of the small data sets
    special = set(encoder.tokenizer.all_special_ids)
    train_docs = documents(train.select(slice(0, NOVELTY_ROWS)), encoder.eos_id, special)
    return real, shuffled, train_docs, held


class Instrument:
    """The judge-free figures of a set, beside real text's: diversity at `size` texts, the
    n-gram judge's PPL, and MAUVE against the held-out `pool` less the seed's real set."""

    def __init__(self, size: int, lm, feats, pool, real):
        self.size, self.lm, self.feats, self.real = size, lm, feats, real
        self.pool = dict(zip(pool, feats(pool)))  # text -> its features, encoded once

    def scores(self, seed, texts, ids):
        out = diversity(texts, ids, self.size, seed)
        out["kn_ppl"] = self.lm.ppl(ids)
        # Q never holds the seed's real texts: real text against Q is near 1, not 1 by identity
        own = set(self.real.get(seed, ()))
        # (a pool no larger than the seed's set, as in tests' tiny data: all of it)
        q = [f for t, f in self.pool.items() if t not in own] or list(self.pool.values())
        q = np.stack(q)
        out["mauve"] = mauve_of(self.feats(texts), q)
        return out


def score_sets(
    sets, judge, tok, encoder, train_docs, gram: int, rank: int = 0, world: int = 1, instrument=None
):
    """{seed: texts} -> {metric: {mean, se}} over seeds, each seed's set scored with lib/metrics.py
    (judge metrics, the judge's passes split over the ranks; no judge: the token figures in the
    encoder's tokens), novelty (encoder tokens, against the training documents) and the
    instrument's figures when one is given."""
    per_seed = []
    for seed, texts in sets.items():
        # novelty in the encoder's tokens, where the training documents live
        ids = encoder.tokenize(texts)
        # Gen. PPL, entropy, distinct-n, repetition
        s = score_texts(texts, judge, tok, rank=rank, world=world) if judge else token_scores(ids)
        s["copies"], s["ngrams_seen"] = novelty(ids, train_docs, gram)
        # the judge on the texts that are not training documents: a copy is easy to score
        fresh = [t for t, c in zip(texts, copied(ids, train_docs)) if not c]
        if judge:
            s["ppl_novel"] = (
                gen_ppl(fresh, judge, tok, rank=rank, world=world)["ppl"] if fresh else float("nan")
            )
        if instrument:
            s.update(instrument.scores(seed, texts, ids))
        per_seed.append({"seed": seed, **s})
    # the spread that matters is between sample sets: mean and standard error over the seeds
    keys = [k for k in per_seed[0] if k != "seed"]
    agg = {k: dict(zip(("mean", "se"), mean_se([p[k] for p in per_seed]))) for k in keys}
    return {**agg, "per_seed": per_seed}


def with_ratios(row, real):
    """Add the headline ratios to the real text's figures, and the targets' verdicts."""
    # ratios of means: 1.0 is real text; a Gen. PPL ratio below 1 with a low entropy ratio is
    # repetitive text the judge finds easy, which is why both are reported
    for k in ("ppl", "kn_ppl", "entropy"):  # no judge: no Gen. PPL
        if k in row:
            row[f"{k}_ratio"] = row[k]["mean"] / real[k]["mean"]
    value = lambda k: row[k] if isinstance(row[k], float) else row[k]["mean"]
    row["targets"] = {
        k: (value(k) >= v if op == ">=" else value(k) <= v)
        for k, (op, v) in TARGETS.items()
        if k in row
    }
    return row
