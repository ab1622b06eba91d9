"""The numbers that say how good a set of texts is: Gen. PPL under a judge LM, entropy,
distinct-n, repetition, novelty against the training data, BLEU and ROUGE.

Pure functions of texts (or token lists) and a judge; evaluate.py samples, calls them and
writes reports. Definitions (METHOD.md, "Evaluation"):

- Gen. PPL: each text is re-tokenized by the judge causal LM, truncated to 1024 tokens (or
  the judge's context, when shorter), cut
  after its first EOS, and ended with one EOS when it has none (as the authors score a
  sample's end); the NLL of every token but the first (nothing predicts it) is summed over
  all texts: PPL = exp(sum NLL / sum tokens) (token-weighted). The per-sequence mean,
  mean_i exp(NLL_i / n_i), is another aggregation in the literature: `ppl_seq_mean`.
- Entropy: the unigram entropy (nats) of each text's judge token ids, averaged over texts.
  Low PPL with low entropy means repetitive text, so the two are read together.
- distinct-n: unique / all n-grams of judge token ids over the whole set.
- Repetition: the share of texts in which one token makes up more than a third of the tokens.
- Novelty: the share of texts that are a training document verbatim, and the share of their
  n-grams that occur in the training data (n = 4 for short texts, 8 otherwise).
- BLEU: sacrebleu corpus BLEU, lowercased (as the authors) and cased. ROUGE-1/2/L:
  rouge-score F1 with stemming, x100, mean and standard error over examples.

    judge, tok = load_judge("judges/desc_wiki")
    scores = score_texts(texts, judge, tok)        # ppl, entropy, distinct-n, repetition
"""

import math
import os
from collections import Counter

import torch


def context(model, default: int) -> int:
    """A causal LM's context length (GPT-2 names it n_positions, most others
    max_position_embeddings)."""
    return (getattr(model.config, "n_positions", None)
            or getattr(model.config, "max_position_embeddings", None) or default)


def load_judge(name_or_path: str, device="cpu"):
    """Any Hugging Face causal LM, by hub name (the paper: gpt2-large) or local folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    build = f"build one: python -m baselines.ar --data wiki_descriptions,wiki --out {name_or_path}"
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.json")
    if os.path.isdir(name_or_path) and not any(os.path.isfile(os.path.join(name_or_path, f))
                                               for f in names):
        raise FileNotFoundError(f"judge folder {name_or_path} holds no tokenizer files (a fit that "
                                f"did not finish?): {build}")
    try:
        tok = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path).to(device).eval()
    except (OSError, ValueError) as e:   # no such folder, no hub access, not a causal LM
        where = "" if os.path.isdir(name_or_path) else " (no such folder, nor a hub model)"
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FileNotFoundError(f"could not load judge '{name_or_path}'{where}: {why}; "
                                f"{build}") from None
    if getattr(model.config, "vocab_ids", None) is not None:
        raise ValueError(f"{name_or_path} is an AR baseline over a cut vocabulary "
                         f"(baselines/ar.py token_vocab=train): it reads other indices than its "
                         f"tokenizer's ids, so it cannot judge")
    return model, tok


def judge_ids(texts, tok, max_len: int = 1024):
    """Re-tokenize with the judge's tokenizer, truncate, cut after the first EOS and end every
    text with one EOS (the end of a sample is scored too)."""
    eos = tok.eos_token_id
    out = []
    for ids in tok(list(texts), add_special_tokens=False)["input_ids"]:
        if eos is not None:
            ids = (ids[:ids.index(eos)] if eos in ids else ids)[:max_len - 1] + [eos]
        out.append(ids[:max_len])
    return out


@torch.no_grad()
def nll_sums(seqs, model, batch_size: int = 16, rank: int = 0, world: int = 1):
    """Judge NLL of token lists, batched by length: float64 (NLL sum, tokens scored, sum of the
    per-sequence PPLs, sequences) over every world-th batch from the rank-th, the share of one
    rank of `world`. The sums of all the shares are the one-process sums, to float round-off."""
    device = next(model.parameters()).device
    sums = torch.zeros(4, dtype=torch.float64)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))     # batch similar lengths
    for s in range(rank * batch_size, len(order), world * batch_size):
        batch = [seqs[i] for i in order[s:s + batch_size]]
        L = max(len(b) for b in batch)
        ids = torch.zeros(len(batch), L, dtype=torch.long)
        mask = torch.zeros(len(batch), L, dtype=torch.bool)
        for j, b in enumerate(batch):
            ids[j, :len(b)], mask[j, :len(b)] = torch.tensor(b, dtype=torch.long), True
        ids, mask = ids.to(device), mask.to(device)
        logits = model(input_ids=ids, attention_mask=mask.long()).logits.float()
        nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:],
                                                reduction="none")
        m = mask[:, 1:]                                                # token 0 is never scored
        nll, n = (nll * m).sum(1).cpu().double(), m.sum(1).cpu().double()
        scored = n > 0
        sums += torch.stack([nll.sum(), n.sum(), (nll[scored] / n[scored]).exp().sum(),
                             scored.sum().double()])
    return sums


def gen_ppl(texts, model, tok, batch_size: int = 16, max_len: int = 1024, rank: int = 0,
            world: int = 1):
    """Token-weighted Gen. PPL and the per-sequence mean PPL (see the module docstring). Under
    torchrun (world > 1) each rank scores its share of the batches and the sums are all-reduced:
    every rank gets the one-process figure (to float round-off)."""
    max_len = min(max_len, context(model, max_len))                # a small judge's context
    sums = nll_sums(judge_ids(texts, tok, max_len), model, batch_size, rank, world)
    if world > 1:
        import torch.distributed as dist
        device = next(model.parameters()).device                       # NCCL reduces CUDA tensors
        sums = sums.to(device)
        dist.all_reduce(sums)
        sums = sums.cpu()
    nll_sum, n_tok, seq_sum, n_seq = sums.tolist()
    return {"ppl": math.exp(nll_sum / max(n_tok, 1)), "ppl_seq_mean": seq_sum / max(n_seq, 1),
            "n_tokens": int(n_tok)}


def entropy(token_lists):
    """Mean over samples of the unigram entropy (nats) of each sample's tokens."""
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
    grams = [tuple(ids[i:i + n]) for ids in token_lists for i in range(len(ids) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def repetition(token_lists, share: float = 1 / 3):
    """The share of texts in which one token makes up more than `share` of the tokens."""
    rep = [max(Counter(ids).values()) > share * len(ids) for ids in token_lists if ids]
    return sum(rep) / max(len(rep), 1)


def ngrams(ids, n: int):
    return {tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)}


def copied(token_lists, train_lists):
    """For each text, whether it equals a training document (the same tokenization)."""
    docs = {tuple(d) for d in train_lists}
    return [tuple(t) in docs for t in token_lists]


def novelty(token_lists, train_lists, n: int):
    """(share of texts equal to a training document, share of the texts' n-grams that occur in
    the training documents). Both in the same tokenization."""
    seen = set().union(*(ngrams(d, n) for d in train_lists)) if train_lists else set()
    copies = sum(copied(token_lists, train_lists)) / max(len(token_lists), 1)
    grams = [g for t in token_lists for g in (tuple(t[i:i + n]) for i in range(len(t) - n + 1))]
    return copies, (sum(g in seen for g in grams) / len(grams) if grams else 0.0)


def mean_se(values):
    """(mean, standard error of the mean: sample standard deviation / sqrt(n))."""
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def bleu(hyps, refs):
    """sacrebleu corpus BLEU, lowercased (as the authors) and cased."""
    import sacrebleu
    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs], lowercase=True).score,
            "bleu_cased": sacrebleu.corpus_bleu(hyps, [refs]).score}


def rouge(hyps, refs):
    """ROUGE-1/2/L F1 x100 with stemming: {name: (mean, standard error)} over examples."""
    from rouge_score import rouge_scorer
    sc = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = [sc.score(r, h) for h, r in zip(hyps, refs)]
    return {k: mean_se([100 * s[k].fmeasure for s in scores])
            for k in ("rouge1", "rouge2", "rougeL")}


def score_texts(texts, judge, tok, refs=None, batch_size=16, rank=0, world=1):
    """Judge metrics of one set of texts (+ BLEU and ROUGE against refs, when given); the judge's
    passes split over `world` ranks (gen_ppl)."""
    ids = judge_ids(texts, tok, min(1024, context(judge, 1024)))
    eos = tok.eos_token_id
    bare = [i[:-1] if i and i[-1] == eos else i for i in ids]          # the text's own tokens
    out = {**gen_ppl(texts, judge, tok, batch_size, rank=rank, world=world),
           "entropy": entropy(bare), "repetition": repetition(bare),
           "mean_tokens": sum(map(len, bare)) / max(len(bare), 1)}
    out.update({f"distinct_{n}": distinct_n(bare, n) for n in (1, 2, 3, 4)})
    if refs is not None:
        out.update(bleu(texts, refs))
        for k, (m, se) in rouge(texts, refs).items():
            out[k], out[f"{k}_se"] = m, se
    return out
