"""metrics.py: Gen. PPL against a hand computation, entropy, distinct-n, repetition, novelty,
BLEU, ROUGE."""

import math
import types

import pytest
import torch

from lib.metrics import (
    bleu,
    distinct_n,
    entropy,
    gen_ppl,
    judge_ids,
    load_judge,
    mean_se,
    nll_sums,
    novelty,
    repetition,
    rouge,
)
from lib.reference import score_sets


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory, minilm):
    """A random 1-layer GPT-2 with the bundled tokenizer ([SEP] as its EOS), saved to a folder."""
    from transformers import GPT2Config, GPT2LMHeadModel

    d = tmp_path_factory.mktemp("judge")
    torch.manual_seed(0)
    GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(minilm.tokenizer),
            n_positions=64,
            n_embd=16,
            n_layer=1,
            n_head=2,
            bos_token_id=102,
            eos_token_id=102,
        )
    ).save_pretrained(d)
    tok = minilm.tokenizer.__class__.from_pretrained(minilm.tokenizer.name_or_path)
    tok.eos_token = "[SEP]"
    tok.save_pretrained(d)
    return str(d)


def test_gen_ppl_equals_a_hand_computation(tiny_judge_dir):
    model, tok = load_judge(tiny_judge_dir)
    texts = ["the cat sat on the mat", "paris is big [SEP] this part is not scored at all"]
    got = gen_ppl(texts, model, tok, batch_size=2)
    nlls, counts = [], []
    for t in texts:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        eos = tok.eos_token_id
        # cut at the first EOS; one EOS scored
        ids = (ids[: ids.index(eos)] if eos in ids else ids) + [eos]
        x = torch.tensor([ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=x).logits[0].double(), -1)
        nll = -sum(logp[i - 1, ids[i]].item() for i in range(1, len(ids)))  # token 0 not scored
        nlls.append(nll)
        counts.append(len(ids) - 1)
    assert counts[1] == 3  # "paris is big [SEP]": 4 tokens, 3 scored
    assert got["n_tokens"] == sum(counts)
    assert got["ppl"] == pytest.approx(math.exp(sum(nlls) / sum(counts)), rel=1e-4)
    assert got["ppl_seq_mean"] == pytest.approx(
        sum(math.exp(a / b) for a, b in zip(nlls, counts)) / 2, rel=1e-4
    )
    assert got["ppl_seq_mean"] != pytest.approx(got["ppl"], rel=1e-3)  # two different aggregations


def test_the_shares_of_ranks_sum_to_the_one_process_sums(tiny_judge_dir):
    """Under torchrun each rank scores every world-th batch and gen_ppl all-reduces the sums
    (tests/test_evaluate.py runs it on 2 Gloo ranks): the shares add up to the whole."""
    model, tok = load_judge(tiny_judge_dir)
    seqs = judge_ids(
        [" ".join(["the cat sat"] * (1 + i % 5)) + f" {i}" for i in range(11)], tok, 64
    )
    whole = nll_sums(seqs, model, batch_size=2)
    shares = [nll_sums(seqs, model, batch_size=2, rank=r, world=3) for r in range(3)]
    assert all(s[3] > 0 for s in shares) and sum(s[3] for s in shares) == whole[3] == 11
    assert torch.allclose(sum(shares), whole, rtol=1e-12)


def test_truncation_to_1024(tiny_judge_dir):
    _, tok = load_judge(tiny_judge_dir)
    ids = judge_ids(["word " * 2000], tok)[0]
    assert len(ids) == 1024 and ids[-1] == tok.eos_token_id


def test_entropy_and_distinct_n_on_hand_made_lists():
    assert entropy([[1, 1, 2, 2]]) == pytest.approx(math.log(2))
    assert entropy([[1, 2, 3], [5, 5, 5, 5]]) == pytest.approx(math.log(3) / 2)
    lists = [[1, 1, 2], [2, 3]]
    assert distinct_n(lists, 1) == pytest.approx(3 / 5)
    assert distinct_n(lists, 2) == pytest.approx(3 / 3)
    assert distinct_n([[7, 7, 7, 7]], 2) == pytest.approx(1 / 3)
    assert distinct_n([[1, 2]], 4) == 0.0
    assert mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1 / math.sqrt(3)))


def test_repetition_and_novelty_on_hand_made_lists():
    # one token more than a third of the tokens: only [6, 6, 6, 7, 8, 9]
    # (2 in 6 is not more than a third)
    assert repetition(
        [[1, 2, 3], [4, 4, 5, 6, 7, 8], [6, 6, 6, 7, 8, 9], [1, 2, 1, 3, 4, 5, 6]]
    ) == pytest.approx(1 / 4)
    train = [[1, 2, 3, 4, 5], [6, 7, 8, 9]]
    copies, seen = novelty([[1, 2, 3, 4, 5], [2, 3, 4, 5, 9], [9, 9, 9]], train, n=4)
    assert copies == pytest.approx(1 / 3)  # only the first is a training text
    assert seen == pytest.approx(3 / 4)  # 4-grams: 2 + 2 (1 seen) + 0


def test_the_judge_of_the_non_copies_reads_only_them(tiny_judge_dir):
    """ppl_novel: Gen. PPL of the texts that are not training documents (NaN when all are)."""
    model, tok = load_judge(tiny_judge_dir)
    words = {}
    enc = types.SimpleNamespace(
        tokenize=lambda texts: [[words.setdefault(w, len(words)) for w in t.split()] for t in texts]
    )
    train = enc.tokenize(["the cat sat on the mat", "a dog ran"])
    sets = {0: ["the cat sat on the mat", "paris is a big city"], 1: ["a dog ran", "a dog ran"]}
    s0, s1 = score_sets(sets, model, tok, enc, train, gram=2)["per_seed"]
    assert s0["copies"] == 0.5 and s1["copies"] == 1.0
    assert s0["ppl_novel"] == pytest.approx(gen_ppl(["paris is a big city"], model, tok)["ppl"])
    assert s0["ppl_novel"] != pytest.approx(s0["ppl"], rel=1e-3)  # the copy is left out
    assert math.isnan(s1["ppl_novel"])


def test_bleu_and_rouge_identical_and_worked_example():
    refs = ["the cat sat on the mat today", "a dog ran in the park"]
    assert bleu(refs, refs)["bleu"] == pytest.approx(100.0)
    assert all(m == pytest.approx(100.0) for m, _ in rouge(refs, refs).values())
    # brevity penalty only: every n-gram precision is 1, BP = exp(1 - 7/6)
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat today"])[
        "bleu"
    ] == pytest.approx(100 * math.exp(1 - 7 / 6), abs=0.01)
    # case counts
    assert bleu(["The Cat sat on the mat"], ["the cat sat on the mat today"])["bleu_cased"] < 50
    r = rouge(["the cat sat"], ["the cat sat on the mat"])
    assert r["rouge1"][0] == pytest.approx(100 * 2 * 0.5 / 1.5)  # P = 1, R = 3/6
    assert r["rouge2"][0] == pytest.approx(100 * 2 * 0.4 / 1.4)  # P = 1, R = 2/5
    assert r["rougeL"][0] == pytest.approx(100 * 2 * 0.5 / 1.5)
    assert rouge(["running fast"], ["runs fast"])["rouge1"][0] == pytest.approx(100.0)  # stemming
