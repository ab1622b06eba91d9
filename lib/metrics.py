"""The numbers that say how good a set of texts is: Gen. PPL under a judge LM, entropy,
distinct-n, diversity at a matched set size, repetition, novelty against the training data,
BLEU and ROUGE, a frontier read at matched diversity, and the paired interval that compares two
arms seed by seed.

Pure functions of texts (or token lists) and a judge; evaluate.py samples, calls them and
writes reports. Definitions (METHOD.md, "Evaluation"):

- Gen. PPL: each text is re-tokenized by the judge causal LM, truncated to 1024 tokens (or
  the judge's context, when shorter), cut
  after its first EOS, and ended with one EOS when it has none (as the authors score a
  sample's end); the NLL of every token but the first (nothing predicts it) is summed over
  all texts: PPL = exp(sum NLL / sum tokens) (token-weighted). The per-sequence mean,
  mean_i exp(NLL_i / n_i), is another aggregation in the literature: `ppl_seq_mean`.
- Entropy: the unigram entropy (nats) of each text's judge token ids, averaged over texts.
  It tracks length, not diversity: a text of k distinct tokens scores log k, and on real
  held-out descriptions it correlates r = 0.993 with log(length). Kept (key `entropy`) so old
  tables read; diversity is read from the figures below, beside real text's.
- distinct-n: unique / all n-grams of judge token ids over the whole set. It falls as a set
  grows, so to compare sets `distinct_at` subsamples each to the same number of texts.
- Diversity at a matched size (`diversity`): mean length in tokens, distinct-1/2/3 at a fixed
  number of texts (averaged over seeded subsamples), the share of unique texts and self-BLEU
  (each text against all the others as references, sacrebleu sentence BLEU, 0-100: 100 is a
  set of one text repeated).
- Repetition: the share of texts in which one token makes up more than a third of the tokens.
- Novelty: the share of texts that are a training document verbatim, and the share of their
  n-grams that occur in the training data (n = 4 for short texts, 8 otherwise).
- A frontier read at matched diversity (`value_at`): a sampler's knob (the SDE's gamma, a
  temperature) trades quality for diversity; two models are compared at one diversity by
  interpolating each one's (distinct-2, PPL) points there, not at one setting of the knob.
- BLEU: sacrebleu corpus BLEU, lowercased (as the authors) and cased. ROUGE-1/2/L:
  rouge-score F1 with stemming, x100, mean and standard error over examples.

    judge, tok = load_judge("judges/desc_wiki")
    scores = score_texts(texts, judge, tok)        # ppl, entropy, distinct-n, repetition
"""

import math
import os
import random
from collections import Counter

import torch

from lib.guard import marked


def context(model, default: int) -> int:
    """A causal LM's context length (GPT-2 names it n_positions, most others
    max_position_embeddings)."""
    return (
        getattr(model.config, "n_positions", None)
        or getattr(model.config, "max_position_embeddings", None)
        or default
    )


def load_judge(name_or_path: str, device="cpu"):
    """Any Hugging Face causal LM, by hub name (the paper: gpt2-large) or local folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    build = f"build one: python -m baselines.ar --data wiki_descriptions,wiki --out {name_or_path}"
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.json")
    if os.path.isdir(name_or_path) and not any(
        os.path.isfile(os.path.join(name_or_path, f)) for f in names
    ):
        raise FileNotFoundError(
            f"judge folder {name_or_path} holds no tokenizer files (a fit that "
            f"did not finish?): {build}"
        )
    if (
        os.path.isdir(name_or_path)
        and marked(name_or_path) == "gpt2"  # made by baselines/ar.py, not a hub download
        and not os.path.isfile(os.path.join(name_or_path, "train_log.json"))
    ):  # baselines/ar.py writes its train_log.json last, and removes the old one first
        raise FileNotFoundError(
            f"judge folder {name_or_path} holds no train_log.json: its save did not finish "
            f"(old and new files may be mixed); train it again with --overwrite"
        )
    try:
        tok = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path).to(device).eval()
    except (OSError, ValueError) as e:  # no such folder, no hub access, not a causal LM
        where = "" if os.path.isdir(name_or_path) else " (no such folder, nor a hub model)"
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FileNotFoundError(
            f"could not load judge '{name_or_path}'{where}: {why}; {build}"
        ) from None
    if getattr(model.config, "vocab_ids", None) is not None:
        raise ValueError(
            f"{name_or_path} is an AR baseline over a cut vocabulary "
            f"(baselines/ar.py token_vocab=train): it reads other indices than its "
            f"tokenizer's ids, so it cannot judge"
        )
    return model, tok


def judge_ids(texts, tok, max_len: int = 1024):
    """Re-tokenize with the judge's tokenizer, truncate, cut after the first EOS and end every
    text with one EOS (the end of a sample is scored too)."""
    eos = tok.eos_token_id
    out = []
    for ids in tok(list(texts), add_special_tokens=False)["input_ids"]:
        if eos is not None:
            ids = (ids[: ids.index(eos)] if eos in ids else ids)[: max_len - 1] + [eos]
        out.append(ids[:max_len])
    return out


@torch.no_grad()
def nll_sums(seqs, model, batch_size: int = 16, rank: int = 0, world: int = 1):
    """Judge NLL of token lists, batched by length: float64 (NLL sum, tokens scored, sum of the
    per-sequence PPLs, sequences) over every world-th batch from the rank-th, the share of one
    rank of `world`. The sums of all the shares are the one-process sums, to float round-off."""
    device = next(model.parameters()).device
    sums = torch.zeros(4, dtype=torch.float64)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))  # batch similar lengths
    for s in range(rank * batch_size, len(order), world * batch_size):
        batch = [seqs[i] for i in order[s : s + batch_size]]
        L = max(len(b) for b in batch)
        ids = torch.zeros(len(batch), L, dtype=torch.long)
        mask = torch.zeros(len(batch), L, dtype=torch.bool)
        for j, b in enumerate(batch):
            ids[j, : len(b)], mask[j, : len(b)] = torch.tensor(b, dtype=torch.long), True
        ids, mask = ids.to(device), mask.to(device)
        logits = model(input_ids=ids, attention_mask=mask.long()).logits.float()
        nll = torch.nn.functional.cross_entropy(
            logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
        )
        m = mask[:, 1:]  # token 0 is never scored
        nll, n = (nll * m).sum(1).cpu().double(), m.sum(1).cpu().double()
        scored = n > 0
        sums += torch.stack(
            [nll.sum(), n.sum(), (nll[scored] / n[scored]).exp().sum(), scored.sum().double()]
        )
    return sums


def gen_ppl(
    texts, model, tok, batch_size: int = 16, max_len: int = 1024, rank: int = 0, world: int = 1
):
    """Token-weighted Gen. PPL and the per-sequence mean PPL (see the module docstring). Under
    torchrun (world > 1) each rank scores its share of the batches and the sums are all-reduced:
    every rank gets the one-process figure (to float round-off)."""
    max_len = min(max_len, context(model, max_len))  # a small judge's context
    sums = nll_sums(judge_ids(texts, tok, max_len), model, batch_size, rank, world)
    if world > 1:
        import torch.distributed as dist

        device = next(model.parameters()).device  # NCCL reduces CUDA tensors
        sums = sums.to(device)
        dist.all_reduce(sums)
        sums = sums.cpu()
    nll_sum, n_tok, seq_sum, n_seq = sums.tolist()
    return {
        "ppl": math.exp(nll_sum / max(n_tok, 1)),
        "ppl_seq_mean": seq_sum / max(n_seq, 1),
        "n_tokens": int(n_tok),
    }


def entropy(token_lists):
    """Mean over samples of the unigram entropy (nats) of each sample's tokens: length-tracking
    (log k for k distinct tokens), not a measure of a set's diversity."""
    ents = []
    for ids in token_lists:
        if not ids:
            continue
        counts = torch.tensor(list(Counter(ids).values()), dtype=torch.float64)
        p = counts / counts.sum()
        ents.append(-(p * p.log()).sum().item())
    return sum(ents) / max(len(ents), 1)


def distinct_n(token_lists, n: int):
    """Unique n-grams / all n-grams over the whole set (0 when there is none)."""
    grams = [tuple(ids[i : i + n]) for ids in token_lists for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def repetition(token_lists, share: float = 1 / 3):
    """The share of texts in which one token makes up more than `share` of the tokens."""
    rep = [max(Counter(ids).values()) > share * len(ids) for ids in token_lists if ids]
    return sum(rep) / max(len(rep), 1)


def ngrams(ids, n: int):
    return {tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)}


def copied(token_lists, train_lists):
    """For each text, whether it equals a training document (the same tokenization)."""
    docs = {tuple(d) for d in train_lists}
    return [tuple(t) in docs for t in token_lists]


def novelty(token_lists, train_lists, n: int):
    """(share of texts equal to a training document, share of the texts' n-grams that occur in
    the training documents). Both in the same tokenization."""
    seen = set().union(*(ngrams(d, n) for d in train_lists)) if train_lists else set()
    copies = sum(copied(token_lists, train_lists)) / max(len(token_lists), 1)
    grams = [g for t in token_lists for g in (tuple(t[i : i + n]) for i in range(len(t) - n + 1))]
    return copies, (sum(g in seen for g in grams) / len(grams) if grams else 0.0)


def distinct_at(token_lists, n: int, size: int, draws: int = 5, seed: int = 0):
    """distinct-n of `size` texts drawn without replacement, averaged over `draws` seeded draws
    (one draw when size is the whole set: every draw is the same set)."""
    if size >= len(token_lists):
        return distinct_n(token_lists, n)
    rng = random.Random(seed)
    return sum(distinct_n(rng.sample(token_lists, size), n) for _ in range(draws)) / draws


def unique_share(texts):
    """The share of distinct texts in a set: 1/n for n copies of one text, 1 when none repeats."""
    return len(set(texts)) / max(len(texts), 1)


def self_bleu(texts):
    """Mean sentence BLEU (sacrebleu, exponential smoothing, effective order: texts shorter than
    4 words still score) of each text against all the others: 100 for n copies of one text."""
    import sacrebleu

    if len(texts) < 2:
        return float("nan")
    return sum(
        sacrebleu.sentence_bleu(t, texts[:i] + texts[i + 1 :]).score for i, t in enumerate(texts)
    ) / len(texts)


def diversity(texts, token_lists, size: int, seed: int = 0):
    """Diversity that is not length, of a set of texts at `size` texts (see the docstring):
    length, distinct-1/2/3 and self-BLEU at that size, unique share of the whole set."""
    rng = random.Random(seed)  # the one subsample self-BLEU reads
    pick = sorted(rng.sample(range(len(texts)), min(size, len(texts))))
    out = {
        "length": sum(map(len, token_lists)) / max(len(token_lists), 1),
        "unique": unique_share(texts),
        "self_bleu": self_bleu([texts[i] for i in pick]),
    }
    out.update(
        {f"distinct_{n}_matched": distinct_at(token_lists, n, size, seed=seed) for n in (1, 2, 3)}
    )
    return out


def mean_se(values):
    """(mean, standard error of the mean: sample standard deviation / sqrt(n))."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


# t quantiles at 0.975 for 1..30 degrees of freedom (a paired 95% interval over a few seeds)
T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t (beyond the table: 1.96 + 2.4/df, within 0.002)."""
    return T975[df - 1] if df <= len(T975) else 1.96 + 2.4 / df


def paired_interval(a, b):
    """Per-seed paired values -> (mean of a - b, 95% t-interval lo, hi, n). One pair has no
    spread to read: its interval is (nan, nan)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired_interval needs pairs, got {len(a)} and {len(b)} values")
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    if n == 1:
        return mean, float("nan"), float("nan"), 1
    half = t975(n - 1) * math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1) / n)
    return mean, mean - half, mean + half, n


def value_at(points, x: float):
    """A frontier read at one x: the y of (x, y) points (one per setting of a sampler's knob)
    interpolated linearly between the two points whose x are nearest either side of x, the
    points taken in the order of x; None where x lies outside them (no extrapolation)."""
    pts = sorted(points)
    if not pts or not pts[0][0] <= x <= pts[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[0][1]  # one point, at x


def bleu(hyps, refs):
    """sacrebleu corpus BLEU, lowercased (as the authors) and cased."""
    import sacrebleu

    return {
        "bleu": sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score,
        "bleu_cased": sacrebleu.corpus_bleu(hyps, [refs]).score,
    }


def rouge(hyps, refs):
    """ROUGE-1/2/L F1 x100 with stemming: {name: (mean, standard error)} over examples."""
    from rouge_score import rouge_scorer

    sc = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = [sc.score(r, h) for h, r in zip(hyps, refs)]
    return {
        k: mean_se([100 * s[k].fmeasure for s in scores]) for k in ("rouge1", "rouge2", "rougeL")
    }


def token_scores(token_lists):
    """The judge-free figures of one set's token lists: entropy, repetition, mean length,
    distinct-1..4 over the whole set."""
    out = {
        "entropy": entropy(token_lists),
        "repetition": repetition(token_lists),
        "mean_tokens": sum(map(len, token_lists)) / max(len(token_lists), 1),
    }
    out.update({f"distinct_{n}": distinct_n(token_lists, n) for n in (1, 2, 3, 4)})
    return out


def score_texts(texts, judge, tok, refs=None, batch_size=16, rank=0, world=1):
    """Judge metrics of one set of texts (+ BLEU and ROUGE against refs, when given); the judge's
    passes split over `world` ranks (gen_ppl)."""
    ids = judge_ids(texts, tok, min(1024, context(judge, 1024)))
    eos = tok.eos_token_id
    bare = [i[:-1] if i and i[-1] == eos else i for i in ids]  # the text's own tokens
    out = {**gen_ppl(texts, judge, tok, batch_size, rank=rank, world=world), **token_scores(bare)}
    if refs is not None:
        out.update(bleu(texts, refs))
        for k, (m, se) in rouge(texts, refs).items():
            out[k], out[f"{k}_se"] = m, se
    return out
