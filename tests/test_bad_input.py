"""Bad input, as a new user makes it, answered in one line: for each case the entry point
exits non-zero with exactly one line on stderr that names the offending key, file or value,
no traceback, and nothing in the output folder created or changed.

The table runs each entry point's main() in this process, wrapped exactly as its
`__main__` block wraps it (ValueError / FileNotFoundError -> "error: ..." on stderr, exit 1),
so a traceback of any other exception fails the test; a few cases also run as subprocesses."""

import dataclasses
import hashlib
import json
import subprocess
import sys

import pytest
import torch

import checkpoint
import distill
import evaluate
import sample
import train
from flow import FlowConfig
from model import ELF, ELFConfig
from tests.conftest import ROOT

MAINS = {"train": train.main, "sample": sample.main, "evaluate": evaluate.main, "distill": distill.main}


def run_main(name, argv, capsys):
    """(exit code, stderr) of `python NAME.py argv`, in this process."""
    capsys.readouterr()
    try:
        MAINS[name](argv)
        code = 0
    except (ValueError, FileNotFoundError) as e:          # what each __main__ block catches
        print(f"error: {e}", file=sys.stderr)
        code = 1
    return code, capsys.readouterr().err


def tree(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} if folder.exists() else None


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Files the cases point at: data files, a checkpoint, damaged checkpoints, config files."""
    d = tmp_path_factory.mktemp("bad")
    (d / "docs.jsonl").write_text("".join(json.dumps({"text": f"document {i} about rivers"}) + "\n" for i in range(40)))
    (d / "malformed.jsonl").write_text('{"text": "fine"}\n{"text": "broken\n{"text": "fine"}\n')
    (d / "nocol.jsonl").write_text("".join(json.dumps({"body": f"doc {i}"}) + "\n" for i in range(20)))
    (d / "empty.jsonl").write_text("")
    (d / "data.csv").write_text("a,b\n")
    (d / "syntax.py").write_text("batch_size = 8\nmax_steps = = 3\n")
    (d / "name.py").write_text("batch_size = 8\nmax_steps = undefined_name\n")
    (d / "unknown.py").write_text("batch_sise = 8\n")
    torch.manual_seed(0)
    cfg = ELFConfig(latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=12)
    meta = {"train": dataclasses.asdict(train.TrainConfig(dataset=str(d / "docs.jsonl"), encoder="minilm", max_length=12,
                                                          packing=False, latent_mean=0.0, latent_std=0.3)),
            "model": dataclasses.asdict(cfg), "flow": dataclasses.asdict(FlowConfig()),
            "latent_stats": {"mean": 0.0, "std": 0.3}}
    checkpoint.save(str(d / "ck"), ELF(cfg), ELF(cfg), None, 0, meta)
    weights = (d / "ck" / "step-00000000" / "model.safetensors").read_bytes()
    for name, content in (("truncated", weights[:len(weights) // 2]), ("zero", b""), ("garbage", b"\x00" * 64)):
        (d / name).mkdir()
        (d / name / "model.safetensors").write_bytes(content)
    from safetensors.torch import save_file
    (d / "foreign").mkdir()
    save_file({"w": torch.zeros(2)}, str(d / "foreign" / "model.safetensors"))
    (d / "noconfig").mkdir()
    (d / "noconfig" / "latest").write_text("step-00000001\n")
    (d / "samples_notext.jsonl").write_text('{"txt": "a"}\n')
    (d / "samples_bad.jsonl").write_text('{"text": "a"}\nnot json\n')
    return d


TRAIN = ["configs/tiny.py", "--max_steps=1", "--n_samples=0", "--latent_cache=false"]

# (entry point, arguments with {d} for the files above, what the one line must contain)
CASES = [
    ("train", ["--bogus_key=1"], "unknown config key 'bogus_key'"),
    ("train", ["--max_steps=ten"], "'max_steps' expects int, got 'ten'"),
    ("train", ["--batch_size=0"], "batch_size must be >= 1, got 0"),
    ("train", ["--batch_size=-4"], "batch_size must be >= 1, got -4"),
    ("train", ["--max_length=0"], "max_length must be >= 1"),
    ("train", ["--blr=0"], "blr must be > 0"),
    ("train", ["--blr=-1e-3"], "blr must be > 0"),
    ("train", ["--decoder_prob=1.5"], "decoder_prob must lie in [0, 1]"),
    ("train", ["--grad_clip=0"], "grad_clip must be > 0, got 0.0"),
    ("train", ["--grad_clip=-1"], "grad_clip must be > 0, got -1.0"),
    ("train", ["--warmup_steps=-5"], "warmup_steps must be >= 0, got -5"),
    ("train", ["--eval_batches=0"], "eval_batches must be >= 1, got 0"),
    ("train", ["--ema_decay=1.5"], "ema_decay must lie in (0, 1), got 1.5"),
    ("train", ["--self_cond_prob=-0.1"], "self_cond_prob must lie in [0, 1]"),
    ("train", ["--depth=0"], "depth must be >= 1, got 0"),
    ("train", ["--snapshot_minutes=10,x"], "snapshot_minutes must be minutes like '10,20,40', got '10,x'"),
    ("train", ["--device=gpu"], "unknown device 'gpu'"),
    ("train", ["--model=ELF-XXL"], "unknown model 'ELF-XXL'"),
    ("train", ["--optimizer=sgd"], "unknown optimizer 'sgd'"),
    ("train", ["--dtype=float16"], "unknown dtype 'float16'"),
    ("train", ["--pad_token=zero"], "unknown pad_token 'zero'"),
    ("train", ["--init_from=latest"], "unknown init_from 'latest'"),
    ("train", ["--sample_preset=best"], "unknown sample_preset 'best'"),
    ("train", ["--max_input_length=64"], "max_input_length 64 must be in (0, max_length=16)"),
    ("train", ["--batch_size=4", "--grad_accum=3"], "grad_accum 3 must be >= 1 and divide batch_size 4"),
    ("train", ["--max_length=32", "--max_seq_len=16"], "max_length 32 exceeds the model's RoPE table"),
    ("train", ["--device=cuda"], "device 'cuda' but CUDA is not available"),
    ("train", ["--dataset={d}/nope.jsonl"], "data path not found: {d}/nope.jsonl"),
    ("train", ["--dataset={d}/empty.jsonl"], "data set '{d}/empty.jsonl' is empty"),
    ("train", ["--dataset={d}/data.csv"], "unsupported data file '{d}/data.csv'"),
    ("train", ["--dataset={d}/malformed.jsonl"], "{d}/malformed.jsonl:2: not valid JSON"),
    ("train", ["--dataset={d}/nocol.jsonl"], "no 'text' or 'input_ids' column (columns: ['body'])"),
    ("train", ["--encoder={d}/no_such_encoder"], "could not load encoder '{d}/no_such_encoder'"),
    ("train", ["--encoder=no-such-org/no-such-model"], "could not load encoder 'no-such-org/no-such-model'"),
    ("train", ["--max_length=600", "--max_seq_len=600", "--dataset={d}/docs.jsonl"], "exceeds encoder 'minilm' positions (512)"),
    ("train", ["--out_dir={d}/docs.jsonl/run"], "out_dir {d}/docs.jsonl/run is not writable"),
    ("train", ["--init_from=resume", "--out_dir={d}/no_run"], "no checkpoint in {d}/no_run"),
    ("train", ["--out_dir={d}/ck", "--dataset={d}/docs.jsonl"], "{d}/ck already holds a checkpoint"),
    ("train:file", ["{d}/nope.py"], "config file not found: {d}/nope.py"),
    ("train:file", ["{d}/syntax.py"], "config file {d}/syntax.py:2:"),
    ("train:file", ["{d}/name.py"], "config file {d}/name.py:2: NameError: name 'undefined_name' is not defined"),
    ("train:file", ["{d}/unknown.py"], "unknown config key 'batch_sise' in {d}/unknown.py"),
    ("distill", ["configs/distill_tiny.py"], "distill.py needs --teacher"),
    ("distill", ["--teacher={d}/nowhere"], "no checkpoint at {d}/nowhere"),
    ("distill", ["--teacher={d}/ck", "--round=6"], "round 6 out of range"),
    ("distill", ["--teacher={d}/ck", "--spans=1/4,2"], "every span must lie in (0, 1]"),
    ("distill", ["--teacher={d}/ck", "--spans=a/b"], "spans must be fractions"),
    ("distill", ["--teacher={d}/ck", "--teacher_substeps=0"], "teacher_substeps must be >= 1"),
    ("distill", ["--teacher={d}/ck", "--batch_size=0"], "batch_size must be >= 1, got 0"),
    ("distill", ["--teacher={d}/ck", "--grad_clip=0"], "grad_clip must be > 0, got 0.0"),
    ("distill", ["--teacher={d}/ck", "--decoder_prob=2"], "decoder_prob must lie in [0, 1], got 2.0"),
    ("distill", ["--teacher={d}/ck", "--warmup_steps=-1"], "warmup_steps must be >= 0, got -1"),
    ("sample", ["--ckpt={d}/ck", "--steps=0"], "steps must be > 0, got 0"),
    ("sample", ["--ckpt={d}/ck", "--steps=-3"], "steps must be > 0, got -3"),
    ("sample", ["--ckpt={d}/ck", "--n=0"], "n must be > 0, got 0"),
    ("sample", ["--ckpt={d}/ck", "--length=0"], "length must be > 0, got 0"),
    ("sample", ["--ckpt={d}/ck", "--gamma=-1"], "gamma must be >= 0, got -1.0"),
    ("sample", ["--ckpt={d}/ck", "--device=cuda"], "device 'cuda' but CUDA is not available"),
    ("sample", ["--ckpt={d}/ck", "--preset=best"], "unknown preset 'best'"),
    ("sample", ["--ckpt={d}/ck", "--sampler=euler"], "unknown sampler 'euler'"),
    ("sample", ["--ckpt={d}/ck", "--source=Hallo"], "--source goes with a conditional checkpoint"),
    ("sample", ["--ckpt={d}/ck", "--span=abc"], "span expects POS:TEXT, got 'abc'"),
    ("sample", ["--ckpt={d}/nowhere"], "no checkpoint at {d}/nowhere"),
    ("sample", ["--ckpt={d}/truncated"], "{d}/truncated/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/zero"], "{d}/zero/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/garbage"], "{d}/garbage/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/foreign"], "{d}/foreign/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/noconfig"], "no checkpoint at {d}/noconfig"),
    ("sample", [], "give --ckpt"),
    ("evaluate", ["--ckpt={d}/ck", "--samples={d}/samples_notext.jsonl", "--judge=x"], "samples_notext.jsonl:1: a sample needs a 'text'"),
    ("evaluate", ["--ckpt={d}/ck", "--samples={d}/samples_bad.jsonl", "--judge=x"], "samples_bad.jsonl:2: not JSON"),
    ("evaluate", ["--ckpt={d}/ck", "--samples={d}/none.jsonl", "--judge=x"], "no samples file at {d}/none.jsonl"),
    ("evaluate", ["--ckpt={d}/ck", "--judge={d}/no_judge"], "could not load judge '{d}/no_judge'"),
    ("evaluate", ["--ckpt={d}/ck"], "give --judge"),
    ("evaluate", ["--ckpt={d}/ck", "--judge=x", "--steps=abc"], "'steps' expects a comma list of int, got 'abc'"),
    ("evaluate", ["--ckpt={d}/noconfig", "--judge=x"], "no checkpoint at {d}/noconfig"),
    ("evaluate", ["--judge=x"], "give --ckpt"),
    ("evaluate", ["--ckpt={d}/ck", "--judge=x", "--n=0"], "n must be > 0"),
]


@pytest.mark.parametrize("entry,args,message", CASES, ids=[f"{c[0]}:{' '.join(c[1])}"[:60] for c in CASES])
def test_bad_input_is_one_line_and_writes_nothing(env, tmp_path, capsys, entry, args, message):
    d = str(env)
    name, _, kind = entry.partition(":")
    args = [a.replace("{d}", d) for a in args]
    out = tmp_path / "out"
    if name == "train" and kind != "file":
        args = TRAIN + [f"--out_dir={out}"] + args
    elif name == "distill":
        args = args + [f"--out_dir={out}"]
    elif name == "evaluate":
        args = args + [f"--out_dir={out}"]
    before = {p: tree(env / p) for p in ("ck",)}
    code, err = run_main(name, args, capsys)
    lines = err.strip().splitlines()
    assert code != 0, f"accepted: {args}"
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("error: ")
    assert message.replace("{d}", d) in lines[0], lines[0]
    assert tree(out) is None                                     # nothing created in the output folder
    assert {p: tree(env / p) for p in ("ck",)} == before          # nor changed where the input lives


@pytest.mark.parametrize("script,args,message", [
    ("train.py", ["configs/tiny.py", "--max_steps", "ten"], "error: config key 'max_steps' expects int, got 'ten'"),
    ("sample.py", ["--ckpt", "/no/such/ckpt"], "error: no checkpoint at /no/such/ckpt"),
    ("evaluate.py", ["--judge", "x"], "error: give --ckpt"),
    ("distill.py", ["--teacher", "/no/such/dir"], "error: no checkpoint at /no/such/dir"),
])
def test_the_scripts_themselves_answer_in_one_line(script, args, message):
    r = subprocess.run([sys.executable, script, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(message), r.stderr


@pytest.mark.parametrize("script", ["train.py", "sample.py", "evaluate.py", "distill.py", "judge.py", "bench.py",
                                    "checkpoint.py"])
def test_help_lists_every_key_with_its_default(script):
    r = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("usage: python")
    keys = [line for line in r.stdout.splitlines() if line.startswith("  --")]
    assert len(keys) >= 5 and all("default" in k for k in keys)
