"""A second judge of another family: an interpolated Kneser-Ney n-gram LM over the encoder
tokenizer's pieces, fitted on the training split of a checkpoint's data in seconds (METHOD.md,
"Evaluation"). Where the GPT-2 judge needs a fit of 30-60 minutes, this one is always at hand,
so `python evaluate.py --ckpt DIR` reports a judge's perplexity with no --judge.

Interpolated Kneser-Ney (Chen & Goodman 1998), one absolute discount per order,
D_k = n1 / (n1 + 2 n2) from the order's count-of-counts:

    P_k(w | h) = max(N_k(h w) - D_k, 0) / N_k(h .) + D_k T_k(h) / N_k(h .) * P_{k-1}(w | h')
    P_0(w)     = 1 / V                                  (V: the tokenizer's vocabulary)

N_n is the raw count of the highest order, N_k (k < n) the continuation count (the number of
distinct tokens seen before the k-gram), T_k(h) the number of distinct w after h, h' the
context without its first token; a context never seen passes its whole mass down. Each text is
read after n - 1 BOS pads and scored up to and including one EOS. Every level sums to 1 over
the vocabulary (tests/test_instrument.py checks it).

    lm = fit_cached(train_docs, vocab_size, eos_id, cache_dir)   # fitted once, then read
    lm.ppl(token_lists)
"""

import hashlib
import json
import math
import os
from collections import Counter, defaultdict

import numpy as np

from lib.outputs import atomic_write

BOS = -1  # the pad before a text: never predicted, not in the vocabulary


class KneserNey:
    """An interpolated Kneser-Ney LM of `order` over ids 0..vocab_size-1 (eos_id ends a text)."""

    def __init__(self, counts, order: int, vocab_size: int, eos_id: int):
        # counts[k-1]: {k-gram tuple: N_k}, raw counts for k = order, continuation counts below
        self.order, self.vocab_size, self.eos_id = order, vocab_size, eos_id
        self.counts = counts
        self.total, self.types, self.discount = [], [], []
        for table in counts:
            total, types = defaultdict(int), defaultdict(int)  # N_k(h .) and T_k(h)
            for gram, c in table.items():
                total[gram[:-1]] += c
                types[gram[:-1]] += 1
            cc = Counter(v for v in table.values() if v <= 2)
            n1, n2 = cc[1], cc[2]
            self.total.append(dict(total))
            self.types.append(dict(types))
            self.discount.append(n1 / (n1 + 2 * n2) if n1 else 0.5)

    @classmethod
    def fit(cls, docs, vocab_size: int, eos_id: int, order: int = 3):
        """Count the training token lists: raw counts of order-grams, continuation counts of
        the lower orders (their distinct left neighbours)."""
        raw, left = Counter(), [defaultdict(set) for _ in range(order - 1)]
        for doc in docs:
            seq = [BOS] * (order - 1) + list(doc) + [eos_id]
            for i in range(order - 1, len(seq)):  # every predicted position
                raw[tuple(seq[i - order + 1 : i + 1])] += 1
                for k in range(1, order):  # k-gram ending at i
                    left[k - 1][tuple(seq[i - k + 1 : i + 1])].add(seq[i - k])
        counts = [{g: len(v) for g, v in table.items()} for table in left] + [dict(raw)]
        return cls(counts, order, vocab_size, eos_id)

    def prob(self, context, w) -> float:
        """P(w | the last order-1 ids of context), interpolated down to the uniform."""
        p = 1.0 / self.vocab_size
        context = tuple(context)[len(context) - self.order + 1 :] if self.order > 1 else ()
        for k in range(1, self.order + 1):  # lowest order first
            h = context[len(context) - k + 1 :] if k > 1 else ()
            total = self.total[k - 1].get(h)
            if not total:  # unseen context: all mass down
                continue
            d = self.discount[k - 1]
            c = self.counts[k - 1].get(h + (w,), 0)
            p = max(c - d, 0) / total + d * self.types[k - 1][h] / total * p
        return p

    def nll(self, token_lists):
        """(summed NLL in nats, tokens scored): every token and one EOS per text."""
        nll, n = 0.0, 0
        for ids in token_lists:
            seq = [BOS] * (self.order - 1) + list(ids) + [self.eos_id]
            for i in range(self.order - 1, len(seq)):
                nll -= math.log(self.prob(seq[i - self.order + 1 : i], seq[i]))
                n += 1
        return nll, n

    def ppl(self, token_lists) -> float:
        """Token-weighted perplexity, exp(sum NLL / sum tokens), as Gen. PPL aggregates."""
        nll, n = self.nll(token_lists)
        return math.exp(nll / max(n, 1))

    def save(self, path):
        """One .npz of int64 arrays (no pickle): each order's grams (K, k) and counts (K,)."""
        arrays = {"meta": np.array([self.order, self.vocab_size, self.eos_id])}
        for k, table in enumerate(self.counts, 1):
            arrays[f"grams{k}"] = np.array(list(table), dtype=np.int64).reshape(-1, k)
            arrays[f"counts{k}"] = np.array(list(table.values()), dtype=np.int64)

        def write(tmp):
            with open(tmp, "wb") as f:  # a file object: savez adds no suffix
                np.savez(f, **arrays)

        atomic_write(path, write)

    @classmethod
    def load(cls, path):
        with np.load(path, allow_pickle=False) as z:
            order, vocab_size, eos_id = (int(v) for v in z["meta"])
            counts = [
                dict(zip(map(tuple, z[f"grams{k}"].tolist()), z[f"counts{k}"].tolist()))
                for k in range(1, order + 1)
            ]
        return cls(counts, order, vocab_size, eos_id)


def fit_cached(docs, vocab_size: int, eos_id: int, cache_dir: str, order: int = 3):
    """The LM of these training token lists: read from cache_dir/ngram-<hash>.npz when fitted
    before (the hash is of the documents, the order and the vocabulary), else fitted and kept."""
    key = hashlib.sha256(json.dumps([order, vocab_size, eos_id]).encode())
    for doc in docs:
        key.update(np.asarray(doc, dtype=np.int64).tobytes() + b"|")
    path = os.path.join(os.path.expanduser(cache_dir), f"ngram{order}-{key.hexdigest()[:16]}.npz")
    if os.path.isfile(path):
        lm = KneserNey.load(path)
    else:
        lm = KneserNey.fit(docs, vocab_size, eos_id, order)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lm.save(path)
    lm.name = f"kneser-ney-{order}:{key.hexdigest()[:16]}"  # the judge, in a report
    return lm
