"""train.py end to end: a subprocess run, metrics.jsonl and its plot, exact resume (also after
a crash inside a save), the latent cache, overwrite protection, resume checks, bad input."""

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

import sample
import train
from lib import checkpoint
from model import ModelKnobs
from tests.conftest import ROOT

TINY = [
    "--model=tiny",
    "--max_length=16",
    "--batch_size=4",
    "--eval_batches=1",
    "--n_samples=0",
    "--warmup_steps=2",
    "--ema_decay=0.9",
    "--encoder=minilm",
    "--latent_mean=none",
    "--latent_std=none",
    "--packing=true",
    "--log_interval=1",
    "--optimizer=adamw",
]


def run_cli(*args):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def records(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def losses(out):
    return {r["step"]: r["loss"] for r in records(out) if "loss" in r}


def digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_train_end_to_end_subprocess(tmp_path, jsonl_file):
    out = tmp_path / "run"
    r = run_cli(
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        f"--out_dir={out}",
        "--max_steps=3",
        "--eval_interval=2",
        "--latent_cache=false",
        "--n_samples=2",
        "--sample_steps=2",
        "--rope_theta=500",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "val denoise mse:" in r.stdout and "val decode  ce:" in r.stdout
    assert r.stdout.count("--- sample") == 2
    assert "parameters" in r.stdout
    meta = json.loads((out / "config.json").read_text())
    assert meta["step"] == 3 and meta["train"]["max_steps"] == 3 and meta["model"]["depth"] == 4
    model, meta2 = checkpoint.load(str(out))
    assert meta2 == meta and model.cfg.latent_dim == 384
    # every model knob reaches the network's config by name, a non-default one included
    knobs = [f.name for f in dataclasses.fields(ModelKnobs)]
    assert {k: meta["model"][k] for k in knobs} == {k: meta["train"][k] for k in knobs}
    assert model.cfg.rope_theta == 500 and model.cfg.bottleneck == 32
    recs = records(out)
    assert [r["step"] for r in recs if "loss" in r] == [1, 2, 3]  # every step (log_interval=1)
    assert [r["step"] for r in recs if "val_mse" in r] == [0, 2, 3]  # start, interval, end
    assert all(r["minutes"] >= 0 for r in recs) and recs[1]["tokens"] == 4 * 16
    assert (out / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in os.listdir(out) if ".tmp" in p]


def test_the_cpu_is_set_up_before_the_encoder_runs(tmp_path, jsonl_file, monkeypatch):
    """Denormals are flushed before the encoder or the data touch a tensor: OpenMP's workers
    copy the float mode once, when the first parallel kernel starts them (optim.py)."""
    events = []
    for name in ("flush_denormals", "keep_freed_memory", "FrozenEncoder", "load_data"):
        real = getattr(train, name)
        monkeypatch.setattr(
            train, name, lambda *a, _n=name, _f=real, **k: events.append(_n) or _f(*a, **k)
        )
    train.main(
        [
            "configs/tiny.py",
            *TINY,
            f"--dataset={jsonl_file}",
            f"--out_dir={tmp_path / 'a'}",
            "--max_steps=1",
            "--latent_cache=false",
        ]
    )
    assert sorted(events[:2]) == ["flush_denormals", "keep_freed_memory"]
    assert events[2:] == ["FrozenEncoder", "load_data"]


def test_resume_matches_an_uninterrupted_run(tmp_path, jsonl_file):
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
    ]
    train.main([*common, f"--out_dir={tmp_path / 'a'}", "--max_steps=4"])
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--max_steps=2"])
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--max_steps=4", "--init_from=resume"])
    full, resumed = losses(tmp_path / "a"), losses(tmp_path / "b")
    assert sorted(resumed) == [1, 2, 3, 4]  # the resumed run appends to metrics.jsonl
    for s in (3, 4):  # the steps after the resume
        assert resumed[s] == pytest.approx(full[s], rel=1e-5, abs=1e-6)
    a = checkpoint.load_state(checkpoint.find(str(tmp_path / "a")), "model")
    b = checkpoint.load_state(checkpoint.find(str(tmp_path / "b")), "model")
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


# model+optim written / folder renamed / pointer switched
@pytest.mark.parametrize("crash_at", [3, 5, 6])
def test_a_crash_inside_a_save_resumes_to_the_same_weights(
    tmp_path, jsonl_file, monkeypatch, crash_at
):
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        "--ckpt_interval=2",
        "--max_steps=4",
    ]
    train.main([*common, f"--out_dir={tmp_path / 'a'}"])
    calls, real = {"n": 0, "saves": 0}, os.replace
    real_save = checkpoint.save

    def counting_save(*a, **k):  # crash inside the second save (step 4)
        calls["saves"] += 1
        return real_save(*a, **k)

    def crashing_replace(src, dst):
        if calls["saves"] == 2:
            calls["n"] += 1
            if calls["n"] == crash_at:
                raise KeyboardInterrupt("simulated crash")
        real(src, dst)

    monkeypatch.setattr(checkpoint, "save", counting_save)
    monkeypatch.setattr(checkpoint.os, "replace", crashing_replace)
    with pytest.raises(KeyboardInterrupt):
        train.main([*common, f"--out_dir={tmp_path / 'b'}"])
    monkeypatch.undo()
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])
    a = checkpoint.load_state(checkpoint.find(str(tmp_path / "a")), "model")
    b = checkpoint.load_state(checkpoint.find(str(tmp_path / "b")), "model")
    assert checkpoint.read_meta(checkpoint.find(str(tmp_path / "b")))["step"] == 4
    assert all(torch.equal(a[k], b[k]) for k in a)  # exactly the uninterrupted weights


def test_latent_cache_is_built_once_and_reused(tmp_path, jsonl_file):
    args = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        f"--cache_dir={tmp_path / 'cache'}",
        "--latent_cache=true",
        "--max_steps=1",
        "--eval_interval=100",
    ]
    train.main(args + [f"--out_dir={tmp_path / 'a'}"])
    files = sorted(f for f in os.listdir(tmp_path / "cache") if f.startswith("latents-"))
    assert len(files) == 2  # train and val latents
    mtimes = [os.path.getmtime(tmp_path / "cache" / f) for f in files]
    train.main(args + [f"--out_dir={tmp_path / 'b'}"])
    assert [os.path.getmtime(tmp_path / "cache" / f) for f in files] == mtimes
    assert losses(tmp_path / "b")[1] == pytest.approx(losses(tmp_path / "a")[1], rel=1e-6)
    # and the cached latents train like freshly encoded ones (fp16 storage aside)
    train.main(
        [
            "configs/tiny.py",
            *TINY,
            f"--dataset={jsonl_file}",
            "--latent_cache=false",
            "--max_steps=1",
            "--eval_interval=100",
            f"--out_dir={tmp_path / 'c'}",
        ]
    )
    assert losses(tmp_path / "c")[1] == pytest.approx(losses(tmp_path / "a")[1], rel=1e-2)


def test_a_run_on_an_earlier_encoder_layer_samples_from_it(tmp_path, jsonl_file):
    """--encoder_layer 3: trained on block 3's states, and the checkpoint gives evaluate.py and
    sample.py the encoder of that layer."""
    out = tmp_path / "run"
    train.main(
        [
            "configs/tiny.py",
            *TINY,
            f"--dataset={jsonl_file}",
            "--latent_cache=false",
            "--max_steps=1",
            "--eval_interval=100",
            "--encoder_layer=3",
            f"--out_dir={out}",
        ]
    )
    _, encoder, meta = sample.load_sampler(str(out))
    assert encoder.layer == 3 and meta["train"]["encoder_layer"] == 3
    encoder.dtype = "float32"  # the config's 'auto' is bf16 on some CPUs: compare exactly
    ids = torch.tensor(encoder.tokenize(["the cat sat on the mat"]))
    states = encoder.model(input_ids=ids, output_hidden_states=True).hidden_states
    assert torch.allclose(encoder.encode(ids), states[3], atol=1e-6)
    assert not torch.allclose(encoder.encode(ids), states[6], atol=1e-2)


def test_a_cut_vocabulary_decodes_only_the_ids_training_shows(tmp_path, jsonl_file):
    """token_vocab=train: one logit row per id of the training rows ([UNK] first), each
    starting from the encoder's embedding of its id; the checkpoint keeps the ids, and decoding
    gives token ids of that set."""
    from flow import decode_latents
    from lib.data import load_token_rows
    from lib.store import train_vocab
    from model import ELF, ELFConfig

    args = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--token_vocab=train",
        "--decoder_init=encoder",
    ]
    out = tmp_path / "run"
    train.main([*args, "--max_steps=1", "--eval_interval=100", f"--out_dir={out}"])
    model, encoder, meta = sample.load_sampler(str(out))
    rows, _ = load_token_rows(
        train.parse_train([*args, f"--cache_dir={tmp_path / 'cache'}"]), encoder
    )
    want = train_vocab(rows, encoder.tokenizer.unk_token_id)
    assert want[0] == encoder.tokenizer.unk_token_id and len(want) < 200 < encoder.vocab_size
    assert torch.equal(model.vocab_ids, want) and meta["model"]["cut_vocab"] == len(want)
    assert set(decode_latents(model, torch.randn(3, 16, 384)).flatten().tolist()) <= set(
        want.tolist()
    )
    fresh = ELF(ELFConfig.from_dict(meta["model"]))
    fresh.vocab_ids.copy_(want)
    train.init_unembedding(fresh, encoder)
    rows_now, table = (
        fresh.decoder_head.unembed.weight,
        encoder.model.get_input_embeddings().weight[want],
    )
    assert torch.allclose(
        torch.cosine_similarity(rows_now, table.float(), dim=1), torch.ones(len(want)), atol=1e-5
    )


def test_a_fresh_run_never_overwrites_a_checkpoint(tmp_path, jsonl_file):
    out = tmp_path / "run"
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        f"--out_dir={out}",
        "--max_steps=1",
    ]
    train.main(common)
    before = digest(out)
    r = run_cli(*common)
    assert r.returncode != 0 and r.stderr.strip().splitlines()[-1].startswith(
        f"error: {out} already holds a checkpoint"
    )
    assert "--init_from resume" in r.stderr and "--overwrite" in r.stderr
    assert digest(out) == before
    train.main([*common, "--overwrite", "--seed=3"])  # asked for: the old run is replaced
    assert checkpoint.read_meta(checkpoint.find(str(out)))["train"]["seed"] == 3


def test_resume_refuses_a_changed_run_unless_allowed(tmp_path, jsonl_file, capsys):
    out = tmp_path / "run"
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        f"--out_dir={out}",
    ]
    train.main([*common, "--max_steps=1"])
    before = digest(out)
    for change in ("--batch_size=2", "--seed=1", "--max_length=8", "--bottleneck=64", "--blr=1e-2"):
        key = change[2:].split("=")[0]
        with pytest.raises(ValueError, match=f"resume changes {key} "):
            train.main([*common, "--max_steps=2", "--init_from=resume", change])
    assert digest(out) == before
    train.main(
        [*common, "--max_steps=2", "--init_from=resume", "--blr=1e-2", "--allow_changes=blr"]
    )
    out_text = capsys.readouterr().out
    assert "resume: blr changed from" in out_text and "to 0.01 (allowed)" in out_text
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train.main([*common, "--max_steps=2", "--init_from=resume", f"--out_dir={tmp_path / 'x'}"])


def test_a_cut_vocabulary_resumes_only_on_the_ids_it_started_with(tmp_path):
    """Other training rows with as many distinct ids (cat -> dog) would pass the model config's
    check: the saved ids are compared, and the run is refused before a step is taken."""
    out, a, b = tmp_path / "run", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"text": "the cat sat on the mat"}\n' * 40)
    b.write_text('{"text": "the dog sat on the mat"}\n' * 40)
    common = [
        "configs/tiny.py",
        *TINY,
        "--latent_cache=false",
        "--eval_interval=100",
        "--token_vocab=train",
        f"--out_dir={out}",
    ]
    train.main([*common, f"--dataset={a}", "--max_steps=1"])
    before = digest(out)
    with pytest.raises(ValueError, match="other token ids than the run"):
        train.main(
            [
                *common,
                f"--dataset={b}",
                "--max_steps=2",
                "--init_from=resume",
                "--allow_changes=dataset",
            ]
        )
    assert digest(out) == before
    # the same data: resumes
    train.main([*common, f"--dataset={a}", "--max_steps=2", "--init_from=resume"])
    assert checkpoint.read_meta(checkpoint.find(str(out)))["step"] == 2


def test_a_checkpoint_saved_before_a_model_key_existed_still_resumes(
    tmp_path, jsonl_file, monkeypatch
):
    """The model config of an older run lacks keys added to ELFConfig since (cut_vocab,
    rope_theta) and names embeddings as the bool it was (learned_embeddings): their defaults
    and today's name stand in, and the run resumes."""
    out = tmp_path / "run"
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        "--token_vocab=full",
        f"--out_dir={out}",
    ]
    train.main([*common, "--max_steps=1"])
    read = checkpoint.read_meta

    def older(folder):  # the meta as a run before cut_vocab, rope_theta, embeddings saved it
        meta = read(folder)
        del meta["model"]["cut_vocab"], meta["model"]["rope_theta"], meta["model"]["embeddings"]
        meta["model"]["learned_embeddings"] = False
        return meta

    monkeypatch.setattr(checkpoint, "read_meta", older)
    train.main([*common, "--max_steps=2", "--init_from=resume"])
    monkeypatch.undo()
    assert checkpoint.read_meta(checkpoint.find(str(out)))["step"] == 2


def test_bad_input_gives_one_line_errors(tmp_path):
    r = run_cli("configs/tiny.py", "--bogus_key=1")
    assert r.returncode != 0 and r.stderr.strip() == "error: unknown config key 'bogus_key'"
    r = run_cli("configs/tiny.py", "--max_steps=ten")
    assert r.stderr.strip() == "error: config key 'max_steps' expects int, got 'ten'"
    r = run_cli("configs/tiny.py", "--dataset=/no/such/file.jsonl", f"--out_dir={tmp_path / 'o'}")
    assert r.stderr.strip().splitlines()[-1] == "error: data path not found: /no/such/file.jsonl"
    r = run_cli("configs/tiny.py", "--max_length=128", "--max_seq_len=64")
    assert (
        r.stderr.strip().splitlines()[-1]
        == "error: max_length 128 exceeds the model's RoPE table (max_seq_len=64)"
    )


def test_time_limit_stops_early_and_still_saves(tmp_path, jsonl_file):
    out = tmp_path / "run"
    train.main(
        [
            "configs/tiny.py",
            *TINY,
            f"--dataset={jsonl_file}",
            "--latent_cache=false",
            "--eval_interval=100",
            f"--out_dir={out}",
            "--max_steps=50",
            "--time_limit_min=0.0001",
        ]
    )
    assert sorted(losses(out)) == [1] and [r["step"] for r in records(out) if "val_mse" in r] == [
        0,
        1,
    ]
    assert json.loads((out / "config.json").read_text())["step"] == 1


def test_the_training_clock_goes_on_across_a_resume(tmp_path, jsonl_file):
    """A run stopped by its time limit, resumed with the same limit, has no time left: it
    takes one step (the loop checks after a step), not another limit's worth."""
    out, args = (
        tmp_path / "run",
        [
            "configs/tiny.py",
            *TINY,
            f"--dataset={jsonl_file}",
            "--latent_cache=false",
            "--eval_interval=1000",
            "--max_steps=1000",
            "--time_limit_min=0.03",
        ],
    )
    train.main([*args, f"--out_dir={out}"])
    first = json.loads((out / "config.json").read_text())
    # 1.8 s hold several steps, so a clock that restarted on resume would take more than one
    assert first["step"] >= 3 and first["train_minutes"] >= 0.03
    train.main([*args, f"--out_dir={out}", "--init_from=resume"])
    assert json.loads((out / "config.json").read_text())["step"] == first["step"] + 1


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(
    tmp_path, jsonl_file, monkeypatch
):
    """The loss of step 3 made nan (as a too-high learning rate or damaged latents would): the
    run stops at once with one line naming step 3, step 2's checkpoint stays the newest, and
    nothing of the bad state is logged, validated or saved."""
    out = tmp_path / "run"
    calls, real = {"n": 0}, train.elf_loss

    def poisoned(model, *a, **k):
        loss, m = real(model, *a, **k)
        if model.training:  # training forwards only, not validation
            calls["n"] += 1
            if calls["n"] == 3:
                loss = loss * float("nan")
        return loss, m

    monkeypatch.setattr(train, "elf_loss", poisoned)
    args = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        f"--out_dir={out}",
        "--max_steps=4",
        "--ckpt_interval=2",
    ]
    with pytest.raises(
        ValueError,
        match=r"^step 3: the loss or the gradient norm is not "
        r"finite, so training stopped and saved nothing "
        r"from that state \(the last good checkpoint, "
        r".*step-00000002, is kept\); likely cause: a "
        r"learning rate too high",
    ):
        train.main(args)
    assert sorted(
        p.name for p in out.iterdir() if p.name.startswith(("step-", ".tmp", ".lock"))
    ) == ["step-00000002"]
    assert checkpoint.read_meta(checkpoint.find(str(out)))["step"] == 2
    assert max(r["step"] for r in records(out)) == 2  # no record of step 3 or later


def test_a_full_disk_during_a_save_keeps_the_previous_checkpoint(tmp_path, jsonl_file, monkeypatch):
    """torch.save fails half-way through step 4's optim.pt, as on a full disk: one line, the
    temporary step folder removed, step 2 intact; the next run resumes from it."""
    import errno

    out = tmp_path / "run"
    args = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        f"--out_dir={out}",
        "--max_steps=4",
        "--ckpt_interval=2",
    ]
    calls, real = {"n": 0}, torch.save

    def full_disk(obj, path, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # the second save: write part of the file, then fail
            with open(path, "wb") as f:
                f.write(b"\0" * 1000)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, path, *a, **k)

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(
        ValueError,
        match=f"^no space left on the disk of {out} while saving "
        f"step 4; the previous checkpoint \\(step-00000002\\) "
        f"is intact$",
    ):
        train.main(args)
    monkeypatch.undo()
    assert sorted(
        p.name for p in out.iterdir() if p.name.startswith(("step-", ".tmp", ".lock"))
    ) == ["step-00000002"]
    train.main([*args, "--init_from=resume"])
    assert checkpoint.read_meta(checkpoint.find(str(out)))["step"] == 4


def test_what_crashed_saves_left_is_removed_at_start_up(tmp_path):
    """A save killed mid-way leaves a temporary step folder (the size of a checkpoint) and
    temporary files; the next run's start removes them, before it could fill the disk again."""
    out = tmp_path / "run"
    (out / ".tmp-step-00000004-12345").mkdir(parents=True)
    (out / ".tmp-step-00000004-12345" / "model.safetensors").write_bytes(b"\0" * 10_000)
    (out / "latest.tmp12345").write_text("step-00000004\n")
    checkpoint.prepare(str(out), False, False, {}, set(), "")
    assert list(out.iterdir()) == []


def test_a_separate_decoder_run_trains_resumes_and_samples(tmp_path, jsonl_file):
    """--separate_decoder: the checkpoint holds the second network (decoder_net.*), a resumed
    run continues it exactly, and sample.py decodes with it."""
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        "--ckpt_interval=2",
        "--max_steps=4",
        "--separate_decoder",
        "--depth=1",
        "--token_vocab=train",
        "--decoder_init=encoder",
    ]
    train.main([*common, f"--out_dir={tmp_path / 'a'}"])
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--max_steps=2"])
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])
    a = checkpoint.load_state(checkpoint.find(str(tmp_path / "a")), "model")
    b = checkpoint.load_state(checkpoint.find(str(tmp_path / "b")), "model")
    assert any(k.startswith("decoder_net.") for k in a) and "decoder_head.unembed.weight" not in a
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(a["decoder_net.vocab_ids"], a["vocab_ids"])
    res = sample.main(["--ckpt", str(tmp_path / "a"), "--n", "2", "--steps", "2"])
    assert len(res) == 2 and all(isinstance(r["text"], str) for r in res)


def test_a_separate_decoder_trains_under_ddp(one_rank_group):
    """Under DDP (a one-process torchrun starts it) each network sits out the other's rows,
    and a step may have no decode rows at all: DDP must expect unused parameters, or its
    second step fails."""
    from flow import FlowConfig, elf_loss
    from model import ELF, ELFConfig

    torch.manual_seed(0)
    model = ELF(
        ELFConfig(
            latent_dim=8,
            vocab_size=11,
            hidden=16,
            depth=1,
            heads=2,
            max_seq_len=8,
            separate_decoder=True,
        )
    )
    net = train.wrap(model, compile=False, cuda=False)
    opt = torch.optim.AdamW(model.parameters())
    for step, prob in enumerate((0.0, 0.5, 1.0, 0.5)):
        x, tok = torch.randn(6, 5, 8), torch.randint(0, 11, (6, 5))
        loss, _ = elf_loss(
            net,
            x,
            tok,
            torch.ones(6, 5, dtype=torch.bool),
            FlowConfig(decoder_prob=prob),
            torch.Generator().manual_seed(step),
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.isfinite(loss)


def test_a_learned_embeddings_run_trains_resumes_and_samples(tmp_path, jsonl_file):
    """--embeddings learned: the checkpoint holds the table (embed_table.weight), which training
    moves from step to step; a resumed run continues it exactly; sample.py decodes from it; and
    a conditional run asking for it is refused in one line."""
    common = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        "--ckpt_interval=2",
        "--max_steps=4",
        "--embeddings=learned",
        "--depth=1",
        "--token_vocab=train",
        "--decoder_init=encoder",
    ]
    train.main([*common, f"--out_dir={tmp_path / 'a'}"])
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--max_steps=2"])
    train.main([*common, f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])
    a = checkpoint.load_state(checkpoint.find(str(tmp_path / "a")), "model")
    b = checkpoint.load_state(checkpoint.find(str(tmp_path / "b")), "model")
    at_2 = checkpoint.load_state(os.path.join(tmp_path / "a", "step-00000002"), "model")
    assert not torch.allclose(a["embed_table.weight"], at_2["embed_table.weight"])
    assert all(torch.equal(a[k], b[k]) for k in a)
    res = sample.main(["--ckpt", str(tmp_path / "a"), "--n", "2", "--steps", "2"])
    assert len(res) == 2 and all(isinstance(r["text"], str) for r in res)
    with pytest.raises(ValueError, match="^embeddings 'learned' is an unconditional ablation"):
        train.main([*common, f"--out_dir={tmp_path / 'c'}", "--max_input_length=4"])


def test_a_learned_table_trains_under_ddp(one_rank_group):
    """The table is read outside the wrapped network's forward (train_step: model.latents); DDP
    must still reduce its gradient: two steps run and the table moves."""
    from flow import FlowConfig, elf_loss
    from model import ELF, ELFConfig

    torch.manual_seed(0)
    model = ELF(
        ELFConfig(
            latent_dim=8,
            vocab_size=11,
            hidden=16,
            depth=1,
            heads=2,
            max_seq_len=8,
            embeddings="learned",
        )
    )
    net = train.wrap(model, compile=False, cuda=False)
    opt = torch.optim.AdamW(model.parameters())
    start = model.embed_table.weight.detach().clone()
    for step in range(2):
        tok = torch.randint(0, 11, (6, 5))
        x = model.latents(torch.zeros(6, 5, 8), tok)
        loss, _ = elf_loss(
            net,
            x,
            tok,
            torch.ones(6, 5, dtype=torch.bool),
            FlowConfig(decoder_prob=0.5),
            torch.Generator().manual_seed(step),
        )
        opt.zero_grad()
        loss.backward()
        assert model.embed_table.weight.grad.abs().sum() > 0
        opt.step()
    assert not torch.allclose(model.embed_table.weight, start)
