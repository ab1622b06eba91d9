"""evaluate.py: Gen. PPL against a hand computation, entropy, distinct-n, BLEU, ROUGE, the sweep."""

import json
import math
import subprocess
import sys
from dataclasses import asdict

import pytest
import torch

from evaluate import (bleu, distinct_n, entropy, gen_ppl, judge_ids, load_judge, mean_se, rouge,
                      sweep, train_judge)
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory, minilm):
    """A random 1-layer GPT-2 with the bundled tokenizer ([SEP] as its EOS), saved to a folder."""
    from transformers import GPT2Config, GPT2LMHeadModel
    d = tmp_path_factory.mktemp("judge")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(minilm.tokenizer), n_positions=64, n_embd=16, n_layer=1,
                               n_head=2, bos_token_id=102, eos_token_id=102)).save_pretrained(d)
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
        if tok.eos_token_id in ids:                                   # keep up to the first EOS
            ids = ids[:ids.index(tok.eos_token_id) + 1]
        x = torch.tensor([ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=x).logits[0].double(), -1)
        nll = -sum(logp[i - 1, ids[i]].item() for i in range(1, len(ids)))   # token 0 not scored
        nlls.append(nll)
        counts.append(len(ids) - 1)
    assert counts[1] == 3                                             # "paris is big [SEP]": 4 tokens, 3 scored
    assert got["n_tokens"] == sum(counts)
    assert got["ppl"] == pytest.approx(math.exp(sum(nlls) / sum(counts)), rel=1e-4)
    assert got["ppl_seq_mean"] == pytest.approx(sum(math.exp(a / b) for a, b in zip(nlls, counts)) / 2, rel=1e-4)
    assert got["ppl_seq_mean"] != pytest.approx(got["ppl"], rel=1e-3)  # two different aggregations


def test_truncation_to_1024(tiny_judge_dir):
    _, tok = load_judge(tiny_judge_dir)
    assert len(judge_ids(["word " * 2000], tok)[0]) == 1024


def test_entropy_and_distinct_n_on_hand_made_lists():
    assert entropy([[1, 1, 2, 2]]) == pytest.approx(math.log(2))
    assert entropy([[1, 2, 3], [5, 5, 5, 5]]) == pytest.approx(math.log(3) / 2)
    lists = [[1, 1, 2], [2, 3]]
    assert distinct_n(lists, 1) == pytest.approx(3 / 5)
    assert distinct_n(lists, 2) == pytest.approx(3 / 3)
    assert distinct_n([[7, 7, 7, 7]], 2) == pytest.approx(1 / 3)
    assert distinct_n([[1, 2]], 4) == 0.0
    assert mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1 / math.sqrt(3)))


def test_bleu_and_rouge_identical_and_worked_example():
    refs = ["the cat sat on the mat today", "a dog ran in the park"]
    assert bleu(refs, refs)["bleu"] == pytest.approx(100.0)
    assert all(m == pytest.approx(100.0) for m, _ in rouge(refs, refs).values())
    # brevity penalty only: every n-gram precision is 1, BP = exp(1 - 7/6)
    assert bleu(["the cat sat on the mat"], ["the cat sat on the mat today"])["bleu"] == \
        pytest.approx(100 * math.exp(1 - 7 / 6), abs=0.01)
    assert bleu(["The Cat sat on the mat"], ["the cat sat on the mat today"])["bleu_cased"] < 50   # case counts
    r = rouge(["the cat sat"], ["the cat sat on the mat"])
    assert r["rouge1"][0] == pytest.approx(100 * 2 * 0.5 / 1.5)        # P = 1, R = 3/6
    assert r["rouge2"][0] == pytest.approx(100 * 2 * 0.4 / 1.4)        # P = 1, R = 2/5
    assert r["rougeL"][0] == pytest.approx(100 * 2 * 0.5 / 1.5)
    assert rouge(["running fast"], ["runs fast"])["rouge1"][0] == pytest.approx(100.0)  # stemming


@pytest.fixture
def tiny_ckpt(tmp_path, minilm):
    from flow import FlowConfig
    from model import ELF, ELFConfig, save_checkpoint
    torch.manual_seed(0)
    cfg = ELFConfig(latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=8)
    meta = {"train": {"encoder": "minilm", "encoder_dtype": "float32", "max_length": 8},
            "model": asdict(cfg), "flow": asdict(FlowConfig()), "latent_stats": {"mean": 0.0, "std": 0.3}}
    save_checkpoint(str(tmp_path / "ck"), ELF(cfg), ELF(cfg), None, 0, meta)
    return str(tmp_path / "ck")


def test_sweep_writes_a_report_and_plots(tiny_ckpt, tiny_judge_dir, tmp_path):
    out = tmp_path / "eval"
    rep = sweep(tiny_ckpt, tiny_judge_dir, steps=(2, 4), sc_cfg=(1.0, 3.0), samplers=("ode", "sde"), seeds=(0, 1),
                n=3, out_dir=str(out))
    saved = json.loads((out / "report.json").read_text())
    assert saved["results"] == json.loads(json.dumps(rep["results"]))
    assert len(saved["results"]) == 8 and len(saved["ckpt_sha256"]) == 64
    assert len(saved["git_commit"]) in (40, len("unknown"))
    r = saved["results"][0]
    assert {"mean", "se"} <= set(r["ppl"]) and r["nfe"] == 3 and len(r["per_seed"]) == 2
    assert r["ppl"]["mean"] == pytest.approx((r["per_seed"][0]["ppl"] + r["per_seed"][1]["ppl"]) / 2)
    for png in ("ppl_vs_entropy.png", "ppl_vs_steps.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_score_file_cli_with_references(tiny_judge_dir, tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps({"text": t, "reference": t}) + "\n" for t in ["a b c d", "the cat sat"]))
    r = subprocess.run([sys.executable, "evaluate.py", "--samples", str(f), "--judge", tiny_judge_dir],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    scores = json.loads((tmp_path / "s.scores.json").read_text())
    assert scores["bleu"] == pytest.approx(100.0) and scores["rouge1"] == pytest.approx(100.0)
    assert scores["n"] == 2 and scores["ppl"] > 1
    r = subprocess.run([sys.executable, "evaluate.py", "--samples", str(tmp_path / "none.jsonl"), "--judge", "x"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1] == f"error: no samples file at {tmp_path / 'none.jsonl'}"


def test_train_judge_saves_a_loadable_judge(tmp_path, jsonl_file):
    ppl = train_judge(jsonl_file, str(tmp_path / "j"), steps=3, batch_size=4, length=16, vocab=300)
    assert ppl > 1
    model, tok = load_judge(str(tmp_path / "j"))
    assert tok.eos_token == "<|endoftext|>"
    assert gen_ppl(["The cat sat on the mat."], model, tok)["ppl"] > 1
