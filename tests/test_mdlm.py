"""The masked diffusion baseline (mdlm.py): the NELBO against a hand computation, the masking
and the antithetic times, SUBS, the sampler (every position revealed, revealed tokens kept,
one position a step with K = L, float64 draws, NFE counting only real calls), a model
overfitting one batch, the CLI end to end as a subprocess, exact resume and bad input.

    python -m pytest -q tests/test_mdlm.py
"""

import json
import math
import subprocess
import sys

import pytest
import torch

import evaluate
from baselines import mdlm, mdlm_model
from encoder import Tokenizer
from lib import checkpoint
from tests.conftest import ROOT

V, MASK = 11, 3  # a small vocabulary and its [MASK]


def tiny_model(L=8, seed=0, hidden=16):
    torch.manual_seed(seed)
    return mdlm_model.MDLM(
        mdlm_model.MDLMModelConfig(
            vocab_size=V, mask_id=MASK, hidden=hidden, depth=1, heads=2, max_seq_len=L
        )
    )


class FixedLogits:
    """A stand-in network whose logits are a given (B, L, V) table, [MASK] at -inf."""

    def __init__(self, table):
        self.table, self.cfg = (
            table,
            mdlm_model.MDLMModelConfig(vocab_size=table.shape[-1], mask_id=MASK),
        )

    def __call__(self, z, where):
        return self.table[where]


def test_nelbo_matches_a_hand_computation():
    torch.manual_seed(0)
    table = torch.randn(2, 3, V)
    table[..., MASK] = float("-inf")
    tokens = torch.tensor([[1, 2, 4], [5, 6, 7]])
    masked = torch.tensor([[True, False, True], [False, True, False]])
    # row 1's last: padding outside the loss
    loss_pos = torch.tensor([[True, True, True], [True, True, False]])
    t = torch.tensor([0.5, 0.25])
    z = tokens.masked_fill(masked, MASK)
    got = mdlm_model.nelbo(FixedLogits(table), z, tokens, masked, t, loss_pos)
    want = 0.0
    for b, l in ((0, 0), (0, 2), (1, 1)):  # the masked positions, each CE / t_b
        row = table[b, l].tolist()
        logz = math.log(sum(math.exp(x) for x in row if x != float("-inf")))
        want += (logz - row[tokens[b, l]]) / t[b].item()
    assert got.item() == pytest.approx(want / 5, rel=1e-5)  # over the 5 loss positions
    # uniform logits over the V - 1 tokens that are not [MASK]: CE = log(V - 1) at each masked
    # position
    flat = torch.zeros(2, 3, V)
    flat[..., MASK] = float("-inf")
    got = mdlm_model.nelbo(FixedLogits(flat), z, tokens, masked, t, loss_pos)
    assert got.item() == pytest.approx(math.log(V - 1) * (2 / 0.5 + 1 / 0.25) / 5, rel=1e-6)


def test_times_are_antithetic_and_masks_stay_in_the_loss():
    gen = torch.Generator().manual_seed(0)
    t = mdlm_model.sample_times(8, gen, 1e-3)
    gaps = t.sort().values.diff()
    assert (
        t.min() >= 1e-3
        and t.max() <= 1
        and torch.allclose(gaps, torch.full_like(gaps, (1 - 1e-3) / 8))
    )
    tokens = torch.randint(4, V, (4000, 6))
    loss_pos = torch.ones_like(tokens, dtype=torch.bool)
    loss_pos[:, 0] = False  # e.g. a held [CLS]
    rate = torch.full((4000,), 0.3)
    z, masked = mdlm_model.corrupt(tokens, rate, loss_pos, MASK, gen)
    assert (
        not masked[:, 0].any()
        and (z[masked] == MASK).all()
        and (z[~masked] == tokens[~masked]).all()
    )
    assert masked[:, 1:].float().mean().item() == pytest.approx(0.3, abs=0.01)


def test_subs_never_predicts_mask_and_the_head_runs_where_asked():
    model = tiny_model()
    ids = torch.randint(0, V, (2, 8))
    where = torch.zeros(2, 8, dtype=torch.bool)
    where[0, 1], where[1, 5] = True, True
    logits = model(ids, where)
    assert (
        logits.shape == (2, V)
        and (logits[:, MASK] == float("-inf")).all()
        and logits[:, :MASK].isfinite().all()
    )
    assert model.num_params() == sum(p.numel() for p in model.parameters())
    assert (model.head.bias == 0).all() and model.embed.weight.std().item() == pytest.approx(
        0.02, rel=0.3
    )


@pytest.mark.parametrize("reveal", ["prob", "count"])
@pytest.mark.parametrize("steps", [1, 3, 6, 10])
def test_sampler_reveals_everything_and_never_changes_a_revealed_token(reveal, steps):
    model, traj = tiny_model(), []
    ids, nfe = mdlm_model.sample_ids(
        model, 5, 6, steps, torch.Generator().manual_seed(1), reveal, first=1, trajectory=traj
    )
    assert len(traj) == steps and torch.equal(traj[-1], ids)
    assert (ids != MASK).all() and (ids[:, 0] == 1).all()
    before = torch.full_like(ids, MASK)
    for now in traj:
        kept = before != MASK
        assert torch.equal(now[kept], before[kept])  # revealed tokens stay
        before = now
    assert (nfe >= 1).all() and (nfe <= steps).all()


def test_count_with_k_equal_to_l_reveals_one_position_a_step():
    L, traj = 8, []
    mdlm_model.sample_ids(
        tiny_model(L), 4, L, L, torch.Generator().manual_seed(2), "count", trajectory=traj
    )
    masked = torch.stack([torch.full((4,), L)] + [(s == MASK).sum(1) for s in traj])  # (L + 1, n)
    assert (masked.diff(dim=0) == -1).all()
    traj = []  # position 0 held: K = L - 1 generated positions
    mdlm_model.sample_ids(
        tiny_model(L),
        4,
        L,
        L - 1,
        torch.Generator().manual_seed(2),
        "count",
        first=1,
        trajectory=traj,
    )
    masked = torch.stack([torch.full((4,), L - 1)] + [(s == MASK).sum(1) for s in traj])
    assert (masked.diff(dim=0) == -1).all()


def test_draws_are_float64_and_at_the_right_rates(monkeypatch):
    seen, real = [], mdlm_model.categorical
    monkeypatch.setattr(mdlm_model, "categorical", lambda p, g: seen.append(p.dtype) or real(p, g))
    mdlm_model.sample_ids(tiny_model(), 3, 6, 4, torch.Generator().manual_seed(0))
    assert seen and set(seen) == {torch.float64}
    with pytest.raises(TypeError):  # a float32 draw truncates the tail (Zheng et al. 2024)
        real(torch.tensor([[0.5, 0.5]]), torch.Generator())
    probs = torch.tensor([0.7, 0.2, 0.1, 0.0], dtype=torch.float64).expand(40000, 4)
    draws = real(probs, torch.Generator().manual_seed(3))
    freq = torch.bincount(draws, minlength=4).double() / len(draws)
    assert torch.allclose(freq, probs[0], atol=0.01) and freq[3] == 0


def test_nfe_counts_only_real_calls(monkeypatch):
    model, calls, traj = tiny_model(), [], []
    real = model.trunk
    monkeypatch.setattr(model, "trunk", lambda ids: calls.append(len(ids)) or real(ids))
    L, K = 4, 12  # 3 steps a position: most steps reveal nothing
    ids, nfe = mdlm_model.sample_ids(
        model, 6, L, K, torch.Generator().manual_seed(4), "count", trajectory=traj
    )
    assert sum(calls) == nfe.sum().item() and len(calls) < K and (nfe == L).all()
    ids, nfe = mdlm_model.sample_ids(
        model, 6, L, K, torch.Generator().manual_seed(5), "prob", trajectory=traj
    )
    states = [torch.full_like(ids, MASK)] + traj[K:]
    # a row calls at step 0, then at step k only if step k - 1 changed it and it still has a [MASK]
    want = 1 + sum(
        ((states[k + 1] != states[k]).any(1) & (states[k + 1] == MASK).any(1)).long()
        for k in range(K - 1)
    )
    assert torch.equal(nfe, want) and (nfe < K).all()


def test_a_model_overfits_one_batch_and_samples_no_mask():
    torch.manual_seed(0)
    # two "texts": [CLS]=1, EOS=2
    tokens = torch.tensor([[1, 4, 5, 6, 2, 2], [1, 7, 8, 9, 10, 2]]).repeat(8, 1)
    loss_pos = torch.ones_like(tokens, dtype=torch.bool)
    loss_pos[:, 0] = False  # position 0 held, as mdlm.py holds [CLS]
    model = tiny_model(6, hidden=32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(100):
        loss = mdlm_model.mdlm_loss(
            model, tokens, loss_pos, torch.Generator().manual_seed(step), 1e-3
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-10:]) / 10 < 0.25 * sum(losses[:10]) / 10
    ids, _ = mdlm_model.sample_ids(
        model.eval(), 16, 6, 5, torch.Generator().manual_seed(0), "count", first=1
    )
    assert (ids != MASK).all()
    # the two texts, nearly always
    assert sum(row in tokens[:2].tolist() for row in ids.tolist()) >= 14


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "baselines.mdlm", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


TINY = [
    "--depth=1",
    "--hidden=32",
    "--heads=2",
    "--batch_size=4",
    "--eval_batches=1",
    "--warmup_steps=1",
    "--log_interval=1",
    "--time_limit_min=0",
    "--n_samples=2",
    "--sample_seeds=0,1",
]


def test_cli_end_to_end_and_sample_only(tmp_path, jsonl_file):
    out = tmp_path / "run"
    r = run_cli(
        "configs/mdlm_tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        f"--out_dir={out}",
        f"--cache_dir={tmp_path / 'cache'}",
        "--max_steps=3",
        "--eval_interval=2",
        "--sample_steps=2,4",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "parameters" in r.stdout and "position 0 held at id 101" in r.stdout
    recs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in recs if "loss" in x] == [1, 2, 3]
    assert [x["step"] for x in recs if "val_nelbo" in x] == [0, 2, 3]
    meta = json.loads((out / "config.json").read_text())
    assert meta["kind"] == "mdlm" and meta["step"] == 3 and meta["hold_first"] == 101
    for k in (2, 4):
        rows = [
            json.loads(line) for line in (out / f"samples-{k}steps.jsonl").read_text().splitlines()
        ]
        assert len(rows) == 4 and all(
            set(x) == {"text", "seed", "index", "nfe", "steps"} for x in rows
        )
        assert all(
            x["steps"] == k and 1 <= x["nfe"] <= k and "[MASK]" not in x["text"] for x in rows
        )
        assert {
            s: len(t)
            for s, t in evaluate.read_samples(str(out / f"samples-{k}steps.jsonl")).items()
        } == {0: 2, 1: 2}
    model, meta = mdlm.load(str(out))  # a model trained for a few steps: no [MASK] left
    # the config's cut vocabulary: rows
    first = int(model.vocab_index(torch.tensor([meta["hold_first"]])))
    ids, _ = mdlm_model.sample_ids(model, 8, 16, 4, torch.Generator().manual_seed(0), first=first)
    assert (ids != model.cfg.mask_id).all() and (model.token_ids(ids)[:, 0] == 101).all()
    mdlm.main(
        [
            "--ckpt",
            str(out),
            "--out_dir",
            str(tmp_path / "again"),
            "--sample_steps",
            "3",
            "--reveal",
            "count",
            "--n_samples",
            "2",
            "--sample_seeds",
            "5",
        ]
    )
    again = [
        json.loads(line)
        for line in (tmp_path / "again" / "samples-3steps-count.jsonl").read_text().splitlines()
    ]
    assert [x["seed"] for x in again] == [5, 5] and all(x["nfe"] <= 3 for x in again)


def test_resume_continues_exactly(tmp_path, jsonl_file):
    """On the full vocabulary (the default; configs/mdlm_tiny.py cuts it, the test above)."""
    common = [
        "configs/mdlm_tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        f"--cache_dir={tmp_path / 'cache'}",
        "--n_samples=0",
        "--eval_interval=100",
        "--ckpt_interval=2",
        "--token_vocab=full",
    ]
    mdlm.main([*common, f"--out_dir={tmp_path / 'a'}", "--max_steps=4"])
    mdlm.main([*common, f"--out_dir={tmp_path / 'b'}", "--max_steps=2"])
    mdlm.main([*common, f"--out_dir={tmp_path / 'b'}", "--max_steps=4", "--init_from=resume"])
    loss = lambda d: {
        x["step"]: x["loss"]
        for x in map(json.loads, (tmp_path / d / "metrics.jsonl").read_text().splitlines())
        if "loss" in x
    }
    assert sorted(loss("b")) == [1, 2, 3, 4] and all(
        loss("b")[s] == pytest.approx(loss("a")[s], rel=1e-5) for s in (3, 4)
    )
    a = checkpoint.load_state(checkpoint.find(str(tmp_path / "a")), "ema")
    b = checkpoint.load_state(checkpoint.find(str(tmp_path / "b")), "ema")
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


def test_a_cut_vocabulary_maps_ids_to_rows_and_back():
    """token_vocab=train: row i stands for vocab_ids[i], any id outside the cut reads as row 0;
    the ids travel in the state dict."""
    cfg = mdlm_model.MDLMModelConfig(
        vocab_size=30522, mask_id=3, cut_vocab=4, hidden=16, depth=1, heads=2, max_seq_len=4
    )
    model = mdlm_model.MDLM(cfg)
    model.vocab_ids.copy_(torch.tensor([100, 7, 2000, 103]))  # [UNK], two ids, [MASK]
    tokens = torch.tensor([[7, 2000, 103, 5], [100, 9, 30000, 7]])
    rows = model.vocab_index(tokens)
    assert rows.tolist() == [[1, 2, 3, 0], [0, 0, 0, 1]]
    assert model.token_ids(rows).tolist() == [[7, 2000, 103, 100], [100, 100, 100, 7]]
    assert model.embed.weight.shape[0] == model.head.weight.shape[0] == 4
    again = mdlm_model.MDLM(cfg)
    again.load_state_dict(model.state_dict())
    assert again.vocab_ids.tolist() == [100, 7, 2000, 103]
    full = tiny_model()  # the default: ids are rows
    assert full.vocab_ids is None and torch.equal(full.vocab_index(tokens), tokens)


def test_a_cut_run_trains_on_the_rows_ids_and_resumes_only_on_them(tmp_path):
    """A run with token_vocab=train keeps exactly the training rows' ids ([UNK] first, [MASK]
    last), samples only those, and refuses to resume on rows with other ids of the same count."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"text": "the cat sat on the mat"}\n' * 40)
    b.write_text('{"text": "the dog sat on the mat"}\n' * 40)
    common = [
        "configs/mdlm_tiny.py",
        *TINY,
        f"--cache_dir={tmp_path / 'cache'}",
        "--eval_interval=100",
        "--token_vocab=train",
        f"--out_dir={tmp_path / 'run'}",
    ]
    mdlm.main([*common, f"--dataset={a}", "--max_steps=2", "--n_samples=4", "--sample_steps=4"])
    model, _ = mdlm.load(str(tmp_path / "run"))
    tok = Tokenizer("minilm").tokenizer
    # [CLS] ... [SEP], [SEP] padding
    data = set(tok("the cat sat on the mat")["input_ids"]) | {tok.sep_token_id}
    assert model.vocab_ids[0] == tok.unk_token_id and model.vocab_ids[-1] == tok.mask_token_id
    assert set(model.vocab_ids.tolist()) == data | {tok.unk_token_id, tok.mask_token_id}
    words = {
        w
        for line in (tmp_path / "run" / "samples-4steps.jsonl").read_text().splitlines()
        for w in json.loads(line)["text"].split()
    }
    assert words and words <= {"the", "cat", "sat", "on", "mat", "[UNK]"}
    before = (tmp_path / "run" / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match="other token ids than the ones"):
        mdlm.main(
            [
                *common,
                f"--dataset={b}",
                "--max_steps=3",
                "--init_from=resume",
                "--allow_changes=dataset",
                "--n_samples=0",
            ]
        )
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == before


def test_bad_input_is_one_line(tmp_path):
    r = run_cli("--ckpt", str(tmp_path / "nothing"))
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [
        f"error: no checkpoint at {tmp_path / 'nothing'}"
    ]
    for argv, words in (
        (["--reveal", "sideways"], "unknown reveal 'sideways'"),
        (["--sample_steps", "4,x"], "'sample_steps' expects a comma list of int"),
        (["--sample_steps", "4,0"], "sample_steps must be >= 1, got '4,0'"),
        (["--snapshot_minutes", "10,x"], "snapshot_minutes must be minutes >= 0 like"),
        (["--t_min", "0"], "t_min must lie in (0, 1)"),
    ):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            mdlm.main(argv)
