"""train.py end to end: a subprocess run, exact resume, the latent cache, bad input."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

import train
from model import load_checkpoint
from tests.conftest import ROOT

TINY = ["--model=tiny", "--max_length=16", "--max_seq_len=16", "--batch_size=4", "--eval_batches=1",
        "--n_samples=0", "--warmup_steps=2", "--ema_decay=0.9", "--encoder=minilm"]


def run_cli(*args):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=600)


def test_train_end_to_end_subprocess(tmp_path, jsonl_file):
    out = tmp_path / "run"
    r = run_cli("configs/tiny.py", *TINY, f"--dataset={jsonl_file}", f"--out_dir={out}", "--max_steps=3",
                "--eval_interval=2", "--latent_cache=false", "--n_samples=2", "--sample_steps=2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "val denoise mse:" in r.stdout and "val decode  ce:" in r.stdout
    assert r.stdout.count("--- sample") == 2
    assert "parameters" in r.stdout
    meta = json.loads((out / "config.json").read_text())
    assert meta["step"] == 3 and meta["train"]["max_steps"] == 3 and meta["model"]["depth"] == 4
    model, meta2 = load_checkpoint(str(out))
    assert meta2 == meta and model.cfg.latent_dim == 384
    assert not [p for p in os.listdir(out) if ".tmp" in p]


def test_resume_matches_an_uninterrupted_run(tmp_path, jsonl_file):
    common = TINY + [f"--dataset={jsonl_file}", "--latent_cache=false", "--eval_interval=100"]
    full = train.main(["configs/tiny.py", *common, f"--out_dir={tmp_path / 'a'}", "--max_steps=4"])
    train.main(["configs/tiny.py", *common, f"--out_dir={tmp_path / 'b'}", "--max_steps=2"])
    resumed = train.main(["configs/tiny.py", *common, f"--out_dir={tmp_path / 'b'}", "--max_steps=4",
                          "--init_from=resume"])
    assert sorted(resumed["train_loss"]) == [2, 3]
    for s in (2, 3):                                              # the next steps' losses
        assert resumed["train_loss"][s] == pytest.approx(full["train_loss"][s], rel=1e-5, abs=1e-6)
    a, b = load_file(str(tmp_path / "a" / "model.safetensors")), load_file(str(tmp_path / "b" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:                                                  # weights and EMA
        assert torch.allclose(a[k], b[k], atol=1e-5), k


def test_latent_cache_is_built_once_and_reused(tmp_path, jsonl_file, capsys):
    args = ["configs/tiny.py", *TINY, f"--dataset={jsonl_file}", f"--cache_dir={tmp_path / 'cache'}",
            "--latent_cache=true", "--max_steps=1", "--eval_interval=100"]
    first = train.main(args + [f"--out_dir={tmp_path / 'a'}"])
    files = sorted(os.listdir(tmp_path / "cache"))
    assert len(files) == 2                                       # train and val latents
    mtimes = [os.path.getmtime(tmp_path / "cache" / f) for f in files]
    second = train.main(args + [f"--out_dir={tmp_path / 'b'}"])
    assert [os.path.getmtime(tmp_path / "cache" / f) for f in files] == mtimes
    assert second["train_loss"][0] == pytest.approx(first["train_loss"][0], rel=1e-6)
    # and the cached latents train like freshly encoded ones (fp16 storage aside)
    fresh = train.main(["configs/tiny.py", *TINY, f"--dataset={jsonl_file}", "--latent_cache=false",
                        "--max_steps=1", "--eval_interval=100", f"--out_dir={tmp_path / 'c'}"])
    assert fresh["train_loss"][0] == pytest.approx(first["train_loss"][0], rel=1e-2)


def test_bad_input_gives_one_line_errors(tmp_path, jsonl_file):
    r = run_cli("configs/tiny.py", "--bogus_key=1")
    assert r.returncode != 0 and r.stderr.strip() == "error: unknown config key 'bogus_key'"
    r = run_cli("configs/tiny.py", "--max_steps=ten")
    assert r.stderr.strip() == "error: config key 'max_steps' expects int, got 'ten'"
    r = run_cli("configs/tiny.py", "--dataset=/no/such/file.jsonl")
    assert r.stderr.strip().splitlines()[-1] == "error: data path not found: /no/such/file.jsonl"
    r = run_cli("configs/tiny.py", "--max_length=128")
    assert r.stderr.strip().splitlines()[-1] == "error: max_length 128 exceeds the model's RoPE table (max_seq_len=64)"


def test_incompatible_checkpoint_is_refused_and_left_intact(tmp_path, jsonl_file):
    out = tmp_path / "run"
    common = TINY + [f"--dataset={jsonl_file}", "--latent_cache=false", "--eval_interval=100", f"--out_dir={out}"]
    train.main(["configs/tiny.py", *common, "--max_steps=1"])
    digest = lambda: {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in sorted(os.listdir(out))}
    before = digest()
    with pytest.raises(ValueError, match="incompatible checkpoint .*bottleneck"):
        train.main(["configs/tiny.py", *common, "--max_steps=2", "--init_from=resume", "--bottleneck=64"])
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train.main(["configs/tiny.py", *common, "--max_steps=2", "--init_from=resume", f"--out_dir={tmp_path / 'x'}"])
    assert digest() == before


def test_time_limit_stops_early_and_still_saves(tmp_path, jsonl_file):
    out = tmp_path / "run"
    res = train.main(["configs/tiny.py", *TINY, f"--dataset={jsonl_file}", "--latent_cache=false",
                      "--eval_interval=100", f"--out_dir={out}", "--max_steps=50", "--time_limit_min=0.0001"])
    assert sorted(res["train_loss"]) == [0] and res["val"][-1][0] == 1           # one step, then evaluated
    assert json.loads((out / "config.json").read_text())["step"] == 1
