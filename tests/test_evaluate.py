"""evaluate.py: the yardstick (samples beside real and shuffled held-out text, novelty, targets),
sweeps, scoring a samples file, bad input; judge.py: a judge and an AR baseline that samples."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

import evaluate
from baselines import ar
from flow import FlowConfig
from lib import checkpoint, metrics
from lib.config import TrainConfig
from lib.reference import documents
from model import ELF, ELFConfig, vocab_index
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def tiny_judge_dir(tmp_path_factory):
    """A 1-layer GPT-2 judge fitted for a few steps on the bundled descriptions (BPE, 300
    tokens)."""
    d = tmp_path_factory.mktemp("judge")
    ar.main(
        [
            "--data",
            "wiki_descriptions",
            "--out",
            str(d),
            "--steps",
            "3",
            "--batch_size",
            "4",
            "--length",
            "16",
            "--vocab",
            "300",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
        ]
    )
    return str(d)


WORDS = "river mountain city king queen ship star forest island bridge".split()


@pytest.fixture
def docs_file(tmp_path):
    """60 distinct short documents: no held-out text is a training text."""
    p = tmp_path / "docs.jsonl"
    p.write_text(
        "".join(
            json.dumps({"text": f"the {WORDS[i % 10]} of number {i} and the {WORDS[(i * 3) % 10]}"})
            + "\n"
            for i in range(60)
        )
    )
    return str(p)


@pytest.fixture
def tiny_ckpt(tmp_path, docs_file):
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=12
    )
    train = dataclasses.asdict(
        TrainConfig(
            dataset=docs_file,
            encoder="minilm",
            max_length=12,
            packing=False,
            pad_token="eos",
            latent_mean=0.0,
            latent_std=0.3,
        )
    )
    meta = {
        "train": train,
        "model": dataclasses.asdict(cfg),
        "flow": dataclasses.asdict(FlowConfig()),
        "latent_stats": {"mean": 0.0, "std": 0.3},
    }
    checkpoint.save(str(tmp_path / "ck"), ELF(cfg), ELF(cfg), None, 0, meta)
    return str(tmp_path / "ck")


def run_eval(*args):
    return subprocess.run(
        [sys.executable, "evaluate.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_judge_and_ar_baseline(tiny_judge_dir, tmp_path):
    log = json.loads(open(f"{tiny_judge_dir}/train_log.json").read())
    assert log["steps"] == 3 and log["heldout_ppl"] > 1
    out = tmp_path / "ar"
    ar.main(
        [
            "--data",
            "wiki_descriptions",
            "--tokenizer",
            "minilm",
            "--normalize",
            "",
            "--out",
            str(out),
            "--steps",
            "2",
            "--batch_size",
            "2",
            "--length",
            "16",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
            "--n_samples",
            "5",
            "--sample_length",
            "6",
        ]
    )
    recs = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    # <= 6 word pieces each
    assert len(recs) == 5 and all(len(r["text"].split()) <= 6 * 2 for r in recs)


def test_an_ar_baseline_over_the_rows_ids(tmp_path):
    """token_vocab=train: the GPT-2's rows are the training rows' ids, its samples decode to
    those ids only, its config.json maps them back, and the folder is refused as a judge."""
    data, out = tmp_path / "a.jsonl", tmp_path / "ar"
    data.write_text('{"text": "the cat sat on the mat"}\n' * 40)
    ar.main(
        [
            "--data",
            str(data),
            "--tokenizer",
            "minilm",
            "--normalize",
            "",
            "--out",
            str(out),
            "--steps",
            "2",
            "--batch_size",
            "2",
            "--length",
            "8",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
            "--n_samples",
            "8",
            "--sample_length",
            "6",
            "--token_vocab",
            "train",
        ]
    )
    config = json.loads((out / "config.json").read_text())
    ids, tok = config["vocab_ids"], ar.load_tokenizer("minilm")
    assert ids[0] == tok.unk_token_id and set(ids[1:]) == set(
        tok("the cat sat on the mat")["input_ids"][1:]
    )
    assert config["vocab_size"] == len(ids)
    words = {
        w
        for line in (out / "samples.jsonl").read_text().splitlines()
        for w in json.loads(line)["text"].split()
    }
    assert words and words <= {"the", "cat", "sat", "on", "mat", "[UNK]"}
    with pytest.raises(ValueError, match="cut vocabulary"):
        metrics.load_judge(str(out))


def test_an_ar_baseline_saves_its_model_and_samples_at_the_snapshot_minutes(tmp_path):
    """--snapshot_minutes: out/at-<m>min holds the model then (loadable), its samples and its
    steps; --overwrite removes the old run's snapshots."""
    from transformers import GPT2LMHeadModel

    out = tmp_path / "ar"
    (out / "at-9min").mkdir(parents=True)  # an older run's snapshot
    ar.main(
        [
            "--data",
            "wiki_descriptions",
            "--tokenizer",
            "minilm",
            "--normalize",
            "",
            "--out",
            str(out),
            "--steps",
            "3",
            "--batch_size",
            "2",
            "--length",
            "8",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
            "--n_samples",
            "4",
            "--sample_seeds",
            "0,1",
            "--sample_length",
            "5",
            "--snapshot_minutes",
            "0",
            "--overwrite",
        ]
    )
    snap = out / "at-0min"
    assert sorted(p.name for p in out.glob("at-*")) == ["at-0min"]
    assert json.loads((snap / "train_log.json").read_text())["steps"] == 1  # after step 1
    assert json.loads((out / "train_log.json").read_text())["steps"] == 3
    recs = [json.loads(line) for line in (snap / "samples.jsonl").read_text().splitlines()]
    assert len(recs) == 8 and {r["seed"] for r in recs} == {0, 1}
    first, last = (GPT2LMHeadModel.from_pretrained(d).transformer.wte.weight for d in (snap, out))
    assert not torch.equal(first, last)  # the weights of step 1, not 3
    with pytest.raises(ValueError, match="snapshot_minutes"):
        ar.main(["--out", str(tmp_path / "x"), "--snapshot_minutes", "ten"])


def test_an_ar_baseline_keeps_its_best_model_by_the_dev_splits_loss(tmp_path, monkeypatch):
    """keep_best: every val_interval steps (and at the last) the loss of the dev split's held-out
    texts is logged; out/best holds the model of the lowest (not the last), its samples and that
    loss; a dev text is dev in its whole form and in the form ELF's rows cut it to, which
    evaluate.py's reference reads; the last model is the one a run without keep_best trains;
    at-<m>min-best is the best as it stood then (none before the first score)."""
    from transformers import GPT2LMHeadModel

    from encoder import Tokenizer
    from lib.reference import split_of

    args = ["--data", "wiki_descriptions", "--tokenizer", "minilm", "--normalize", ""]
    args += ["--steps", "5", "--batch_size", "2", "--length", "8", "--n_layer", "1"]
    args += ["--n_embd", "16", "--n_head", "2", "--n_samples", "2", "--sample_length", "15"]
    args += ["--token_vocab", "train", "--val_interval", "2"]
    ar.main([*args, "--out", str(tmp_path / "plain")])
    out, scored = tmp_path / "ar", []
    losses = iter([3.0, 1.0, 2.0])  # steps 2, 4, 5: the best is step 4's, not the last

    def loss_of(model, rows, batch_size=64):
        scored.append(len(rows))
        return next(losses, 5.0)  # then the held-out PPL of every held-out row

    monkeypatch.setattr(ar, "heldout_loss", loss_of)
    ar.main([*args, "--out", str(out), "--keep_best", "--snapshot_minutes", "0"])
    monkeypatch.undo()
    log = json.loads((out / "train_log.json").read_text())
    assert [(v["step"], v["val_loss"]) for v in log["val"]] == [(2, 3.0), (4, 1.0), (5, 2.0)]
    kept = json.loads((out / "best" / "train_log.json").read_text())
    assert (kept["steps"], kept["val_loss"]) == (4, 1.0)
    assert len((out / "best" / "samples.jsonl").read_text().splitlines()) == 2
    weights = lambda d: GPT2LMHeadModel.from_pretrained(d).transformer.wte.weight
    assert not torch.equal(weights(out / "best"), weights(out))
    assert torch.equal(weights(out), weights(tmp_path / "plain"))  # training unchanged
    # the dev rows: the dev split's texts alone, in both forms; the scored rows are those
    cfg = ar.ARConfig(tokenizer="minilm", normalize="", length=8, sample_length=15)
    _, val_texts = ar.corpus("wiki_descriptions")
    dev = ar.dev_texts(cfg, val_texts)
    tok = Tokenizer("minilm")  # evaluate.py's form: ELF's row of 16, [CLS] first
    row = lambda t: tok.detokenize(tok.tokenizer(t)["input_ids"][:-1][:16])  # [CLS] t, cut
    assert 0 < len(dev) < len(val_texts) and {split_of(row(t)) for t in dev} == {"dev"}
    assert any(split_of(row(t)) == "dev" and t not in dev for t in val_texts)  # long ones out
    assert ar.dev_texts(cfg, []) == []  # data with no held-out text
    vocab_ids = torch.tensor(json.loads((out / "config.json").read_text())["vocab_ids"])
    rows = vocab_index(vocab_ids, ar.packed_rows(dev, ar.load_tokenizer("minilm"), 8), 30522)
    assert scored[:3] == [len(rows)] * 3
    one = [*args, "--out", str(out), "--overwrite", "--steps", "1", "--snapshot_minutes", "0"]
    ar.main([*one, "--keep_best", "--val_interval", "1"])  # scored at step 1, then the snapshot
    assert json.loads((out / "at-0min-best" / "train_log.json").read_text())["steps"] == 1
    ar.main(one)  # keep_best off: --overwrite leaves no best of the old run
    assert not (out / "best").exists() and not (out / "at-0min-best").exists()


def test_a_judge_replaces_a_folder_only_when_asked(tmp_path):
    """A non-empty --out is refused before training (the bad-input table); with --overwrite the
    new judge replaces it, and the old one's samples and train log do not outlive it."""
    out = tmp_path / "judge"
    out.mkdir()
    (out / "samples.jsonl").write_text('{"text": "an old sample"}\n')
    (out / "train_log.json").write_text("{}")
    ar.main(
        [
            "--data",
            "wiki_descriptions",
            "--out",
            str(out),
            "--steps",
            "1",
            "--batch_size",
            "2",
            "--length",
            "8",
            "--vocab",
            "300",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
            "--overwrite",
        ]
    )
    assert (
        not (out / "samples.jsonl").exists()
        and json.loads((out / "train_log.json").read_text())["steps"] == 1
    )
    assert not (out / ".lock").exists()


def test_yardstick_reports_samples_beside_real_and_shuffled_text(
    tiny_ckpt, tiny_judge_dir, tmp_path
):
    out = tmp_path / "eval"
    rep = evaluate.main(
        [
            "--ckpt",
            tiny_ckpt,
            "--judge",
            tiny_judge_dir,
            "--n",
            "3",
            "--seeds",
            "0,1",
            "--steps",
            "2",
            "--out_dir",
            str(out),
        ]
    )
    assert json.loads((out / "report.json").read_text())["results"] == json.loads(
        json.dumps(rep["results"])
    )
    real, shuffled = rep["reference"]["real"], rep["reference"]["shuffled"]
    (row,) = rep["results"]
    assert (
        row["setting"]["preset"] == "uncond32" and row["setting"]["steps"] == 2 and row["nfe"] == 3
    )
    assert len(row["per_seed"]) == 2 and row["ppl"]["mean"] == pytest.approx(
        (row["per_seed"][0]["ppl"] + row["per_seed"][1]["ppl"]) / 2
    )
    assert row["ppl_ratio"] == pytest.approx(row["ppl"]["mean"] / real["ppl"]["mean"])
    assert set(row["targets"]) == {"entropy_ratio", "ppl_ratio", "repetition", "copies"}
    # the real held-out text: never a copy of a training text here; shuffling keeps its words
    assert real["copies"]["mean"] == 0.0
    assert sorted(" ".join(rep["real_examples"][:1]).split()) == sorted(
        rep["shuffled_examples"][0].split()
    )
    assert shuffled["entropy"]["mean"] == pytest.approx(real["entropy"]["mean"], rel=0.2)
    for f in ("report.md", "ppl_vs_entropy.png"):
        assert (out / f).stat().st_size > 0
    # a sweep: one row per setting
    rep = evaluate.main(
        [
            "--ckpt",
            tiny_ckpt,
            "--judge",
            tiny_judge_dir,
            "--n",
            "2",
            "--seeds",
            "0",
            "--sampler",
            "ode,sde",
            "--steps",
            "1,2",
            "--out_dir",
            str(out),
        ]
    )
    assert [(r["setting"]["sampler"], r["setting"]["steps"]) for r in rep["results"]] == [
        ("ode", 1),
        ("ode", 2),
        ("sde", 1),
        ("sde", 2),
    ]


def test_the_yardstick_runs_without_a_judge(tiny_ckpt, tmp_path):
    """No --judge: no Gen. PPL, but the n-gram judge's PPL beside real text's, MAUVE, diversity
    at a matched size, novelty, the split and each row's provenance."""
    out = tmp_path / "eval"
    rep = evaluate.main(
        [
            "--ckpt",
            tiny_ckpt,
            "--n",
            "3",
            "--seeds",
            "0,1",
            "--steps",
            "2",
            "--decompose",
            "off",
            "--split",
            "all",
            "--out_dir",
            str(out),
        ]
    )
    (row,) = rep["results"]
    real = rep["reference"]["real"]
    assert "ppl" not in row and "ppl_ratio" not in row and rep["split"] == "all"
    assert rep["matched_size"] == 3 and rep["second_judge"].startswith("kneser-ney-3:")
    assert row["kn_ppl_ratio"] == pytest.approx(row["kn_ppl"]["mean"] / real["kn_ppl"]["mean"])
    for k in (
        "mauve",
        "distinct_2_matched",
        "unique",
        "self_bleu",
        "length",
        "copies",
        "ngrams_seen",
        "entropy",
    ):
        assert k in row and k in real, k
    assert 0 <= row["mauve"]["mean"] <= 1 and real["unique"]["mean"] == 1.0
    prov = row["provenance"]
    assert prov["split"] == "all" and prov["judge"] == "" and prov["torch"] == torch.__version__
    assert {"commit", "cpu", "cpu_flags", "judge_sha256", "date"} <= set(prov)
    assert "n-gram PPL" in (out / "report.md").read_text()


def test_students_and_their_control_are_scored_without_a_judge(tiny_ckpt, tmp_path, monkeypatch):
    """distill.py --objective flow trains a round on the teacher's own loss (the control: no
    distillation target is ever computed); evaluate.py --distill --control scores the teacher,
    each student round and each control round at each step count with no GPT-2 judge: the
    n-gram judge's PPL over real text's, MAUVE and diversity at a matched size."""
    import distill

    common = [
        "configs/distill_tiny.py",
        f"--teacher={tiny_ckpt}",
        "--spans=1/2",
        "--steps_per_round=2",
        "--batch_size=4",
        "--warmup_steps=0",
        "--teacher_substeps=1",
        f"--cache_dir={tmp_path / 'cache'}",
    ]
    distill.main([*common, f"--out_dir={tmp_path / 'students'}"])
    targets = []
    monkeypatch.setattr(distill, "distill_loss", lambda *a, **k: targets.append(1))
    distill.main([*common, "--objective=flow", f"--out_dir={tmp_path / 'control'}"])
    monkeypatch.undo()
    meta = json.loads((tmp_path / "control" / "round1" / "config.json").read_text())
    assert targets == [] and meta["distill"]["objective"] == "flow"
    rep = evaluate.main(
        [
            f"--ckpt={tiny_ckpt}",
            f"--distill={tmp_path / 'students'}",
            f"--control={tmp_path / 'control'}",
            "--distill_steps=1,2",
            "--n=3",
            "--seeds=0",
            "--traj_n=2",
            "--traj_ref_steps=4",
            "--sc_cfg=1",
            "--split=all",
            f"--out_dir={tmp_path / 'eval'}",
        ]
    )
    assert [(r["model"], r["steps"]) for r in rep["rows"]] == [
        (m, n) for m in ("teacher", "round1", "control/round1") for n in (1, 2)
    ]
    for r in rep["rows"]:
        assert "ppl" not in r and r["kn_ppl_ratio"] > 0 and 0 <= r["mauve"]["mean"] <= 1
        assert "traj_err" in r and "distinct_2_matched" in r
    assert rep["split"] == "all" and rep["second_judge"].startswith("kneser-ney")
    assert rep["provenance"]["split"] == "all" and "cpu_flags" in rep["provenance"]
    with open(os.path.join(tiny_ckpt, "config.json")) as f:
        teacher = json.load(f)
    assert rep["teacher_seed"] == teacher["train"]["seed"]  # the claim 9 table pairs by it
    assert "| control/round1 | 2 |" in (tmp_path / "eval" / "report.md").read_text()


@pytest.mark.slow
def test_two_ranks_sample_and_score_like_one_process(tiny_ckpt, tiny_judge_dir, tmp_path):
    """The yardstick on 2 Gloo ranks under torchrun against one process: the same samples, bit
    for bit (each chunk of 8 is the same batch on either), and the same Gen. PPL to float
    round-off (the judge's batches of 16 split over the ranks, the sums all-reduced)."""
    args = [
        "evaluate.py",
        "--ckpt",
        tiny_ckpt,
        "--judge",
        tiny_judge_dir,
        "--n",
        "40",
        "--seeds",
        "0",
        "--steps",
        "2",
        "--batch_size",
        "8",
        "--decompose",
        "off",
        "--out_dir",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "--",
    ]
    runs = {}
    for name, launcher in (("one", [sys.executable]), ("two", torchrun)):
        r = subprocess.run(
            [*launcher, *args, str(tmp_path / name)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = (r.stdout, json.loads((tmp_path / name / "report.json").read_text()))
    out, two = runs["two"]
    # rank 0 alone speaks
    assert "drew 40 on 2 rank(s)" in out and out.count("held-out split") == 1
    one = runs["one"][1]
    (folder,) = (tmp_path / "one" / "samples").iterdir()
    assert (folder / "samples.jsonl").read_bytes() == (
        tmp_path / "two" / "samples" / folder.name / "samples.jsonl"
    ).read_bytes()
    for a, b in (
        (one["results"][0], two["results"][0]),
        (one["reference"]["real"], two["reference"]["real"]),
    ):
        assert a["per_seed"][0]["n_tokens"] == b["per_seed"][0]["n_tokens"]
        for k in ("ppl", "ppl_seq_mean"):
            assert b["per_seed"][0][k] == pytest.approx(a["per_seed"][0][k], rel=1e-9, abs=0)
        for k in ("entropy", "repetition", "distinct_2", "copies"):
            assert a[k] == b[k]
    assert one["results"][0]["examples"] == two["results"][0]["examples"]


def test_a_samples_file_is_scored_against_the_checkpoints_data(
    tiny_ckpt, tiny_judge_dir, tmp_path, docs_file
):
    f = tmp_path / "s.jsonl"
    texts = [json.loads(line)["text"] for line in open(docs_file)]
    f.write_text(
        "".join(json.dumps({"text": t, "seed": i % 2}) + "\n" for i, t in enumerate(texts[:6]))
    )
    rep = evaluate.main(
        [
            "--samples",
            str(f),
            "--ckpt",
            tiny_ckpt,
            "--judge",
            tiny_judge_dir,
            "--n",
            "3",
            "--out_dir",
            str(tmp_path / "e"),
        ]
    )
    (row,) = rep["results"]
    assert len(row["per_seed"]) == 2  # grouped by their seed field
    assert row["copies"]["mean"] > 0.5  # the training texts themselves


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"text": "a"}\nnot json\n', "s.jsonl:2: not JSON"),
        ('{"txt": "a"}\n', "s.jsonl:1: a sample needs a 'text' string"),
        ("", "is empty"),
    ],
)
def test_bad_samples_files_are_one_line_errors(tiny_ckpt, tmp_path, content, message):
    f = tmp_path / "s.jsonl"
    f.write_text(content)
    r = run_eval(
        "--samples",
        str(f),
        "--ckpt",
        tiny_ckpt,
        "--judge",
        "gpt2",
        "--out_dir",
        str(tmp_path / "e"),
    )
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and message in r.stderr
    assert not (tmp_path / "e").exists()


def test_training_documents_read_like_samples(minilm):
    """Novelty compares samples with training documents token for token: a framed row
    ([CLS] text [SEP], padded) gives back the text's own tokens."""
    from conditional import Rows

    ids = minilm.tokenize(["genus of plants"], special=True)[0]  # [CLS] ... [SEP]
    row = torch.tensor([ids + [minilm.eos_id] * 3])
    docs = documents(
        Rows(row, torch.tensor([len(ids)])), minilm.eos_id, set(minilm.tokenizer.all_special_ids)
    )
    assert docs == [minilm.tokenize(["genus of plants"])[0]]


def test_a_report_of_another_split_is_neither_replaced_nor_shared(tmp_path, monkeypatch):
    """--split test writes to <run>/eval-test by default (dev, the default, to <run>/eval), and
    a report of another split in the same --out_dir is refused, not replaced."""
    from types import SimpleNamespace

    from lib import report as report_module
    from lib.report import default_out_dir, evaluation_of, keep_other_reports

    monkeypatch.setattr(report_module, "provenance", lambda ckpt: {"ckpt_sha256": "w"})

    cfg = lambda split, out="": SimpleNamespace(
        ckpt=str(tmp_path / "run"), split=split, distill="", samples="", out_dir=out,
        overwrite=False,
    )  # fmt: skip
    assert default_out_dir(cfg("")) == str(tmp_path / "run" / "eval")
    assert default_out_dir(cfg("dev")) == str(tmp_path / "run" / "eval")
    assert default_out_dir(cfg("test")) == str(tmp_path / "run" / "eval-test")
    out = tmp_path / "ev"
    out.mkdir()
    report = {"evaluation": evaluation_of(cfg("test"), "w")}
    (out / "report.json").write_text(json.dumps(report))
    keep_other_reports(cfg("test", str(out)))  # the same evaluation again: replaced
    with pytest.raises(ValueError, match="other split"):
        keep_other_reports(cfg("dev", str(out)))
