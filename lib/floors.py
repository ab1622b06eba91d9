"""Floors for conditional generation (METHOD.md, "Evaluation"; results/cond_compare): what a
system that looks up instead of translating or summarising scores, and a held-out split in which
looking up does not pay.

Four floors, each a list of outputs for the held-out sources, computed from the training pairs
alone (never from the references) and scored by lib/heldout.py's Scorer like any system:
- `retrieval`: the target of the training pair whose source is nearest by TF-IDF cosine
  (`similar`: character 3-grams for translation; word TF-IDF over the source's first 20 words
  for summaries, whose sources are paragraphs);
- `constant_K_words`: the K most frequent words of the training targets, the same for every
  source, K the training targets' mean length in words (rounded): blind to the source;
- `copy_source`: the source itself;
- `lead_K_words`: the source's first K words, K the training targets' median length in words.

The near-duplicate split (`split_pairs`). A held-out pair whose source has a training source
at TF-IDF cosine >= NEAR (the same similarity) goes to 'near': there a system can score by
recalling the training pair. The rest is cut into 'dev' and 'test' by lib/reference.py's
`split_of` on the source text (a fixed hash: deterministic, disjoint). 'all' is every held-out
pair (the tables before the split). lib/heldout.heldout_pairs takes the split by name.

    kind = task_kind(train_srcs, train_tgts)                  # 'translation' or 'summary'
    hyps = floors(train_srcs, train_tgts, srcs)               # {name: outputs}
    keep = split_pairs(train_srcs, srcs, "test", kind)        # indices of held-out pairs
"""

import collections
import re

import numpy as np

from lib.reference import split_of

# held-out sources this close to a training source are 'near': chosen on the de->en pairs, where
# 0.7-0.8 holds the same sentence with one word changed ("Ich fahre mit dem Bus zur Schule." ~
# "... zur Arbeit.") and below 0.7 mostly a phrase inside a longer sentence (results/cond_compare)
NEAR = 0.7
PAIR_SPLITS = ("dev", "test", "near", "all")
LEAD_WORDS = 20  # summaries are retrieved by their source's first 20 words
WORD = re.compile(r"[\w']+")


def task_kind(train_srcs, train_tgts) -> str:
    """'summary' when the sources are more than twice as long as the targets (in words),
    else 'translation': which similarity retrieves."""
    words = lambda texts: sum(len(t.split()) for t in texts) / max(1, len(texts))
    return "summary" if words(train_srcs) > 2 * words(train_tgts) else "translation"


def vectorizer(kind: str):
    """The TF-IDF of a task kind: character 3-grams (translation: shared word pieces across
    inflections), or words of the first LEAD_WORDS words (summary: a paragraph's opening names
    its subject)."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # deferred: heavy

    if kind == "translation":
        return TfidfVectorizer(analyzer="char", ngram_range=(3, 3), lowercase=True)
    if kind == "summary":
        # a preprocessor replaces the vectorizer's own lowercasing, so it lowercases
        lead = lambda t: " ".join(t.lower().split()[:LEAD_WORDS])
        return TfidfVectorizer(analyzer="word", preprocessor=lead)
    raise ValueError(f"unknown task kind '{kind}' (choose from translation, summary)")


def similar(train_srcs, srcs, kind: str, chunk: int = 256):
    """For each source, the index of the nearest training source and its cosine, (n,) each;
    the vectorizer is fitted on the training sources, ties go to the first. `chunk` sources at
    a time: a dense (chunk, N) block, never (n, N) (XSum's 11k x 200k would be 18 GB)."""
    vec = vectorizer(kind)
    train = vec.fit_transform(train_srcs).T.tocsr()  # (F, N), columns L2-normalised
    best, top = np.zeros(len(srcs), dtype=np.int64), np.zeros(len(srcs))
    for i in range(0, len(srcs), chunk):
        cos = (vec.transform(srcs[i : i + chunk]) @ train).toarray()  # (chunk, N): cosines
        best[i : i + chunk] = cos.argmax(axis=1)
        top[i : i + chunk] = cos[np.arange(len(cos)), best[i : i + chunk]]
    return best, top


def most_frequent_words(texts, k: int):
    """The k most frequent lowercased words of texts, most frequent first (ties: first seen)."""
    counts = collections.Counter(w for t in texts for w in WORD.findall(t.lower()))
    return [w for w, _ in counts.most_common(k)]


def floors(train_srcs, train_tgts, srcs, kind: str = "") -> dict:
    """{name: outputs for srcs} of the four floors (module docstring), from the training pairs."""
    kind = kind or task_kind(train_srcs, train_tgts)
    lengths = sorted(len(t.split()) for t in train_tgts)
    mean_k = max(1, round(sum(lengths) / len(lengths)))
    lead_k = lengths[len(lengths) // 2]
    best, _ = similar(train_srcs, srcs, kind)
    constant = " ".join(most_frequent_words(train_tgts, mean_k))
    return {
        "retrieval": [train_tgts[i] for i in best],
        f"constant_{mean_k}_words": [constant] * len(srcs),
        "copy_source": list(srcs),
        f"lead_{lead_k}_words": [" ".join(s.split()[:lead_k]) for s in srcs],
    }


def split_pairs(train_srcs, srcs, split: str, kind: str, near: float = NEAR):
    """Indices (in order) of the held-out sources in a split: 'near' (a training source at
    cosine >= near), 'dev' or 'test' (the rest, by the hash of the source), 'all'."""
    if split not in PAIR_SPLITS:
        raise ValueError(f"unknown split '{split}' (choose from {', '.join(PAIR_SPLITS)})")
    if split == "all":
        return list(range(len(srcs)))
    _, cos = similar(train_srcs, srcs, kind)
    if split == "near":
        return [i for i, c in enumerate(cos) if c >= near]
    return [i for i, (s, c) in enumerate(zip(srcs, cos)) if c < near and split_of(s) == split]
