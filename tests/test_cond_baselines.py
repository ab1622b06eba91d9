"""The conditional baselines (METHOD.md, "Baselines"): the GPT-2 of baselines/ar_cond.py and
MDLM's conditional mode (baselines/mdlm.py, max_input_length > 0) on conditional ELF's rows.
Each learns a tiny copy task and copies held-out sources far better than chance, scored by
lib/heldout.py as evaluate.py scores ELF; MDLM's source is never masked, never in the loss and
never changed by sampling; resume is exact; bad input is one line and a non-zero exit.

    python -m pytest -q tests/test_cond_baselines.py
"""

import json
import random
import subprocess
import sys

import pytest
import torch

from baselines import ar_cond, mdlm, mdlm_model
from conditional import arrange
from lib import checkpoint
from tests.conftest import ROOT, results_table

WORDS = (
    "red blue green black white cat dog bird fish horse apple bread milk water stone tree "
    "river house king queen road ship door book moon star rain snow fire wind"
).split()


@pytest.fixture(scope="module")
def copy_data(tmp_path_factory):
    """1000 pairs 'w1 w2 w3 w4' -> the same four words (30 words: chance is 1 in 30 a word)."""
    d = tmp_path_factory.mktemp("copy")
    rng = random.Random(0)
    sents = [" ".join(rng.choice(WORDS) for _ in range(4)) for _ in range(1000)]
    (d / "copy.jsonl").write_text(
        "".join(json.dumps({"source": s, "target": s}) + "\n" for s in sents)
    )
    return d


def common(d, run):
    return [
        f"--dataset={d / 'copy.jsonl'}",
        "--val_size=50",
        "--max_length=16",
        "--max_input_length=8",
        f"--out_dir={d / run}",
        f"--cache_dir={d / 'cache'}",
        "--time_limit_min=0",
        "--warmup_steps=20",
        "--batch_size=32",
    ]


MDLM = [
    "configs/mdlm_de_en_tiny.py",
    "--depth=2",
    "--hidden=64",
    "--heads=2",
    "--eval_interval=1000",
    "--log_interval=1",
]
AR = ["configs/ar_de_en_tiny.py", "--n_layer=2", "--n_embd=64", "--n_head=2"]


def report(d, run):
    return json.loads((d / run / "heldout" / "report.json").read_text())


# ----------------------------------------------------------------------------------------
# MDLM: the source is the condition, held


def test_mdlm_sampler_never_changes_the_source():
    torch.manual_seed(0)
    model = mdlm_model.MDLM(
        mdlm_model.MDLMModelConfig(
            vocab_size=11, mask_id=3, hidden=16, depth=1, heads=2, max_seq_len=8
        )
    )
    given = torch.randint(0, 11, (6, 8))
    given[:, 1] = 3  # a source may even hold [MASK]: kept
    held = torch.arange(8)[None, :] < torch.tensor([1, 2, 3, 4, 5, 7])[:, None]
    for reveal in ("prob", "count"):
        traj = []
        ids, nfe = mdlm_model.sample_ids(
            model,
            6,
            8,
            4,
            torch.Generator().manual_seed(0),
            reveal,
            trajectory=traj,
            given=given,
            held=held,
        )
        assert all(torch.equal(step[held], given[held]) for step in traj)
        assert (ids[~held] != 3).all() and (nfe <= 4).all() and (nfe >= 1).all()


def test_mdlm_loss_positions_exclude_the_source():
    rows = arrange([[101, 7, 8, 102], [101, 9, 102]], [[5, 6], [5]], 102, 10, 6)
    tokens, loss_pos = mdlm.batch(rows, [0, 1], False, "cpu")
    assert loss_pos.tolist() == [[False] * 4 + [True] * 6, [False] * 3 + [True] * 7]
    # t = 1: all masked
    z, masked = mdlm_model.corrupt(
        tokens, torch.ones(2), loss_pos, 3, torch.Generator().manual_seed(0)
    )
    assert torch.equal(z[~loss_pos], tokens[~loss_pos]) and (z[loss_pos] == 3).all()


def test_mdlm_copy_task(copy_data):
    mdlm.main(
        [
            *MDLM,
            *common(copy_data, "mdlm"),
            "--max_steps=300",
            "--ckpt_interval=1000",
            "--n_samples=50",
            "--sample_steps=4,10",
            "--sample_seeds=0",
        ]
    )
    rep = report(copy_data, "mdlm")
    print("mdlm copy:", [(r["setting"]["name"], r["bleu"]["mean"]) for r in rep["results"]])
    assert rep["baselines"]["copy_source"]["bleu"] == pytest.approx(100.0)
    assert [r["setting"]["steps"] for r in rep["results"]] == [4, 10]
    for r in rep["results"]:  # a random word is right 1 time in 30: BLEU near 0
        assert r["bleu"]["mean"] >= 60 and r["rouge1"]["mean"] >= 70 and r["nfe"] <= 10
    hyps = [
        json.loads(x)
        for x in (copy_data / "mdlm" / "heldout" / "hypotheses.jsonl").read_text().splitlines()
    ]
    assert len(hyps) == 2 * 50 and set(hyps[0]) == {
        "setting",
        "seed",
        "source",
        "reference",
        "text",
    }
    assert "| MDLM 4 steps (prob) |" in (copy_data / "mdlm" / "heldout" / "report.md").read_text()


def test_mdlm_conditional_resume_is_exact(copy_data):
    args = [*MDLM, *common(copy_data, "x"), "--n_samples=0", "--ckpt_interval=2", "--batch_size=4"]
    mdlm.main([*args, f"--out_dir={copy_data / 'ma'}", "--max_steps=4"])
    mdlm.main([*args, f"--out_dir={copy_data / 'mb'}", "--max_steps=2"])
    mdlm.main([*args, f"--out_dir={copy_data / 'mb'}", "--max_steps=4", "--init_from=resume"])
    for which in ("model", "ema"):
        a, b = (
            checkpoint.load_state(checkpoint.find(str(copy_data / r)), which) for r in ("ma", "mb")
        )
        assert all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------------------
# the conditional GPT-2


def test_ar_copy_task(copy_data):
    ar_cond.main(
        [*AR, *common(copy_data, "ar"), "--max_steps=300", "--n_samples=50", "--sample_seeds=0,1"]
    )
    rep = report(copy_data, "ar")
    print("ar copy:", [(r["setting"]["name"], r["bleu"]["mean"]) for r in rep["results"]])
    greedy, sampled = rep["results"]
    assert greedy["setting"]["name"] == "AR greedy" and len(greedy["per_seed"]) == 1
    assert [p["seed"] for p in sampled["per_seed"]] == [0, 1]
    assert greedy["bleu"]["mean"] >= 80 and sampled["bleu"]["mean"] >= 40
    assert greedy["rouge1"]["mean"] >= sampled["rouge1"]["mean"] >= 60
    # decoding the saved run again gives the same greedy outputs; a source is copied
    res = ar_cond.main(["--ckpt", str(copy_data / "ar"), "--source", "red cat moon fire"])
    assert res[0]["text"] == "red cat moon fire"
    # and without the KV cache, re-reading each prefix
    args = ["--ckpt", str(copy_data / "ar"), "--source", "red cat moon fire", "--kv_cache=false"]
    assert ar_cond.main(args) == res


def test_ar_resume_is_exact(copy_data):
    args = [*AR, *common(copy_data, "x"), "--n_samples=0", "--ckpt_interval=2", "--batch_size=4"]
    ar_cond.main([*args, f"--out_dir={copy_data / 'aa'}", "--max_steps=4"])
    ar_cond.main([*args, f"--out_dir={copy_data / 'ab'}", "--max_steps=2"])
    ar_cond.main([*args, f"--out_dir={copy_data / 'ab'}", "--max_steps=4", "--init_from=resume"])
    a, b = (ar_cond.load(str(copy_data / r))[0].state_dict() for r in ("aa", "ab"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    first = ar_cond.load(str(copy_data / "ab"))[0].state_dict()  # resume moved the weights:
    ar_cond.main([*args, f"--out_dir={copy_data / 'ac'}", "--max_steps=2"])
    c = ar_cond.load(str(copy_data / "ac"))[0].state_dict()  # 2 steps are not 4
    assert not all(torch.equal(first[k], c[k]) for k in c)
    log = json.loads((copy_data / "ab" / "train_log.json").read_text())
    assert [x["step"] for x in log["curve"]] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="already holds a run"):
        ar_cond.main([*args, f"--out_dir={copy_data / 'ab'}", "--max_steps=2"])


def test_ar_text_labels_leave_out_the_source_and_the_padding():
    """The early-stopping loss reads the target's text and its own EOS, not the source, not the
    EOS padding after it (training's loss keeps the padding, as ELF's)."""
    rows = arrange([[5, 6, 2]], [[7, 8]], 2, 10, 4)  # [5 6 2 ; 7 8 2] then EOS padding
    ids, train = ar_cond.target_labels(rows, None, 20)
    _, text = ar_cond.text_labels(rows, None, 20)
    assert ids[0].tolist() == [5, 6, 2, 7, 8, 2, 2, 2, 2, 2]
    assert train[0].tolist() == [-100] * 3 + [7, 8, 2, 2, 2, 2, 2]
    assert text[0].tolist() == [-100] * 3 + [7, 8, 2] + [-100] * 4


def test_ar_keeps_its_best_weights_by_dev_loss(copy_data):
    """keep_best: every ckpt_interval steps the dev split's text loss is logged and the lowest
    one's weights are out_dir/best (its train.json says step and loss, and scoring them again
    gives that loss); the training itself is the same with it off; a snapshot taken after a best
    exists keeps a copy of it; --overwrite removes best/ and the snapshots."""
    args = [*AR, *common(copy_data, "x"), "--n_samples=0", "--ckpt_interval=10"]
    ar_cond.main([*args, f"--out_dir={copy_data / 'eb'}", "--max_steps=40"])
    ar_cond.main([*args, f"--out_dir={copy_data / 'en'}", "--max_steps=40", "--keep_best=false"])
    log = json.loads((copy_data / "eb" / "train_log.json").read_text())
    assert [v["step"] for v in log["val"]] == [10, 20, 30, 40]
    low = min(log["val"], key=lambda v: v["val_loss"])
    best, meta = ar_cond.load(str(copy_data / "eb" / "best"))
    assert meta["step"] == low["step"] and meta["val_loss"] == low["val_loss"]
    tok = ar_cond.Tokenizer("minilm")
    cfg = ar_cond.parse_config([*args, f"--out_dir={copy_data / 'eb'}"])
    rows = ar_cond.Best(cfg, tok, ar_cond.load_pair_rows(cfg, tok)[1]).rows
    assert 0 < len(rows) < 50  # the dev split's pairs of the 50 held out
    again = ar_cond.val_loss(best, rows, ar_cond.vocab_of(best), len(tok.tokenizer), 32)
    assert again == pytest.approx(low["val_loss"], rel=1e-5)
    assert not (copy_data / "en" / "best").exists() and "val" not in log["curve"][0]
    a, b = (ar_cond.load(str(copy_data / r))[0].state_dict() for r in ("eb", "en"))
    assert all(torch.equal(a[k], b[k]) for k in a)  # scoring dev rows changed no step
    at = log["minutes"] + 1e-6  # the first resumed step takes it
    ar_cond.main(
        [*args, f"--out_dir={copy_data / 'eb'}", "--max_steps=41", "--init_from=resume"]
        + [f"--snapshot_minutes={at}"]
    )
    snap = copy_data / "eb" / f"at-{at:g}min"
    assert ar_cond.read_meta(str(snap))["step"] == 41
    kept = ar_cond.load(str(snap.parent / f"{snap.name}-best"))[0].state_dict()
    assert all(torch.equal(kept[k], best.state_dict()[k]) for k in kept)
    ar_cond.main([*args, f"--out_dir={copy_data / 'eb'}", "--max_steps=2", "--overwrite"])
    assert ar_cond.read_meta(str(copy_data / "eb" / "best"))["step"] == 2  # the new run's
    assert not snap.exists() and not (snap.parent / f"{snap.name}-best").exists()


# ----------------------------------------------------------------------------------------
# bad input: one line, a non-zero exit


def run(module, *args):
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "module,config",
    [
        ("baselines.ar_cond", "configs/ar_de_en_tiny.py"),
        ("baselines.mdlm", "configs/mdlm_de_en_tiny.py"),
    ],
)
def test_no_room_for_a_target_is_one_line(module, config):
    r = run(module, config, "--max_input_length=40")
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        "error: max_input_length 40 must be in (0, max_length=40)"
    ]


def test_an_empty_or_too_long_source_is_one_line(copy_data):
    if not (copy_data / "ar" / "latest").is_file():
        ar_cond.main([*AR, *common(copy_data, "ar"), "--max_steps=2", "--n_samples=0"])
    if not (copy_data / "mdlm" / "latest").is_file():
        mdlm.main([*MDLM, *common(copy_data, "mdlm"), "--max_steps=2", "--n_samples=0"])
    for module, run_dir in (("baselines.ar_cond", "ar"), ("baselines.mdlm", "mdlm")):
        r = run(
            module,
            "--ckpt",
            str(copy_data / run_dir),
            "--source",
            "  ",
            f"--out_dir={copy_data / 'unused'}",
        )
        assert r.returncode == 1 and r.stderr.strip().splitlines() == [
            "error: --source 1 ('  ') holds no tokens"
        ], r.stderr
        r = run(
            module,
            "--ckpt",
            str(copy_data / run_dir),
            "--source",
            "red " * 60,
            f"--out_dir={copy_data / 'unused'}",
        )
        lines = r.stderr.strip().splitlines()
        assert (
            r.returncode == 1
            and len(lines) == 1
            and lines[0].startswith(
                "error: --source 1 is 62 tokens with its framing, more than the run's "
                "max_input_length"
            )
        ), r.stderr
    with pytest.raises(ValueError, match="max_input_length must be > 0"):
        ar_cond.main(["configs/ar_de_en_tiny.py", "--max_input_length=0"])


def test_the_table_shows_each_system_at_its_best_setting_on_the_same_inputs(tmp_path):
    """results/cond_compare/table.py's examples: each system's output at the setting with its
    best headline score, sampling seed 0, on the first held-out inputs, the same for all."""
    table = results_table("cond_compare")
    score = lambda v: {"mean": v, "se": 0.0}
    rows = [
        {"system": "ELF", "setting": "ode 8 steps, CFG 1", "bleu": score(1.0)},
        {"system": "ELF", "setting": "ode 8 steps, CFG 2", "bleu": score(3.0)},
        {"system": "AR", "setting": "AR greedy", "bleu": score(2.0)},
        {"system": "AR", "setting": "AR sample", "bleu": score(5.0)},
        {"system": "MDLM", "setting": "MDLM 8 steps", "bleu": score(0.5)},
    ]
    hyp = {
        "eval_elf": [("ode 8 steps", {"guidance": 1.0}), ("ode 8 steps", {"guidance": 2.0})],
        "ar/heldout": [("AR greedy", {}), ("AR sample", {})],
        "mdlm/heldout": [("MDLM 8 steps", {})],
    }
    for path, settings in hyp.items():
        (tmp_path / path).mkdir(parents=True)
        with open(tmp_path / path / "hypotheses.jsonl", "w") as f:
            for name, extra in settings:
                for seed in (0, 1):
                    for i in range(7):
                        f.write(
                            json.dumps(
                                {
                                    "setting": name,
                                    **extra,
                                    "seed": seed,
                                    "source": f"src{i}",
                                    "reference": f"ref{i}",
                                    "text": f"{name} {extra} s{seed} #{i}",
                                }
                            )
                            + "\n"
                        )
    ex = {(e["system"], e["setting"]): e for e in table.examples(str(tmp_path), rows, "bleu", k=5)}
    assert set(ex) == {
        ("ELF", "ode 8 steps, CFG 2"),
        ("AR", "AR sample"),
        ("AR", "AR greedy"),
        ("MDLM", "MDLM 8 steps"),
    }
    for e in ex.values():
        assert e["sources"] == [f"src{i}" for i in range(5)]
        assert all(t.endswith(f"s0 #{i}") for i, t in enumerate(e["texts"]))
    assert ex[("ELF", "ode 8 steps, CFG 2")]["texts"][0] == "ode 8 steps {'guidance': 2.0} s0 #0"


@pytest.mark.parametrize("name", ["ar_cond", "mdlm"])
def test_a_baseline_scores_the_split_it_is_given(copy_data, monkeypatch, name):
    """--split reaches the held-out scoring (lib/heldout.score_baseline) of both conditional
    baselines, and a split that is not one is one line before anything loads."""
    module = {"ar_cond": ar_cond, "mdlm": mdlm}[name]
    trained = copy_data / ("ar" if name == "ar_cond" else "mdlm")
    if not (trained / "heldout").is_dir():
        pytest.skip("needs the copy task's trained run (test_ar_copy_task, test_mdlm_copy_task)")
    seen = {}
    monkeypatch.setattr(module, "score_baseline", lambda *a, **k: seen.update(k))
    out = copy_data / f"{name}-test-split"
    module.main(["--ckpt", str(trained), "--out_dir", str(out), "--split", "test"])
    assert seen["split"] == "test"
    with pytest.raises(ValueError, match="unknown split 'bogus' \\(choose from dev, test, near"):
        module.main(["--ckpt", str(trained), "--out_dir", str(out), "--split", "bogus"])
