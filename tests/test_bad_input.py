"""Bad input, as a new user makes it, answered in one line: for each case the entry point
exits non-zero with exactly one line on stderr that names the offending key, file or value,
no traceback, and nothing in the output folder created or changed.

The table runs each entry point's main() in this process, wrapped exactly as its
`__main__` block wraps it (ValueError / FileNotFoundError -> "error: ..." on stderr, exit 1),
so a traceback of any other exception fails the test; a few cases also run as subprocesses."""

import copy
import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

import distill
import evaluate
import sample
import train
from baselines import ar
from flow import FlowConfig
from lib import checkpoint
from model import ELF, ELFConfig
from tests.conftest import COMMANDS, ROOT
from tools import ablate, bench, convert_release

MAINS = {
    "train": train.main,
    "sample": sample.main,
    "evaluate": evaluate.main,
    "distill": distill.main,
    "judge": ar.main,
    "bench": bench.main,
    "ablate": ablate.main,
    "convert": convert_release.main,
}


def run_main(name, argv, capsys):
    """(exit code, stderr) of `python NAME.py argv`, in this process."""
    capsys.readouterr()
    try:
        MAINS[name](argv)
        code = 0
    except (ValueError, FileNotFoundError) as e:  # what each __main__ block catches
        print(f"error: {e}", file=sys.stderr)
        code = 1
    return code, capsys.readouterr().err


def tree(folder):
    """{file: sha256} of a folder (hidden files too: a lock left behind counts), a file's sha256,
    or None."""
    if folder.is_file():
        return hashlib.sha256(folder.read_bytes()).hexdigest()
    return (
        {
            str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        if folder.exists()
        else None
    )


def stamps(folder):
    """{file: (size, mtime)} of a folder or a file: any write changes it, and it costs no
    reading."""
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Files the cases point at: data files, a checkpoint, damaged checkpoints, config files."""
    d = tmp_path_factory.mktemp("bad")
    (d / "docs.jsonl").write_text(
        "".join(json.dumps({"text": f"document {i} about rivers"}) + "\n" for i in range(40))
    )
    (d / "malformed.jsonl").write_text('{"text": "fine"}\n{"text": "broken\n{"text": "fine"}\n')
    (d / "latin1.txt").write_bytes("fine\nPr\u00fcfung der Stra\u00dfe\n".encode("latin-1"))
    (d / "arcond").mkdir()  # a conditional AR baseline's folder, given to the wrong command
    (d / "arcond" / ".kind").write_text("gpt2_cond")
    (d / "nocol.jsonl").write_text(
        "".join(json.dumps({"body": f"doc {i}"}) + "\n" for i in range(20))
    )
    (d / "empty.jsonl").write_text("")
    (d / "data.csv").write_text("a,b\n")
    (d / "syntax.py").write_text("batch_size = 8\nmax_steps = = 3\n")
    (d / "name.py").write_text("batch_size = 8\nmax_steps = undefined_name\n")
    (d / "exits.py").write_text("import sys\nbatch_size = 8\nsys.exit(3)\n")
    (d / "unknown.py").write_text("batch_sise = 8\n")
    torch.manual_seed(0)
    cfg = ELFConfig(
        latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=12
    )
    meta = {
        "train": dataclasses.asdict(
            train.TrainConfig(
                dataset=str(d / "docs.jsonl"),
                encoder="minilm",
                max_length=12,
                packing=False,
                latent_mean=0.0,
                latent_std=0.3,
            )
        ),
        "model": dataclasses.asdict(cfg),
        "flow": dataclasses.asdict(FlowConfig()),
        "latent_stats": {"mean": 0.0, "std": 0.3},
    }
    checkpoint.save(str(d / "ck"), ELF(cfg), ELF(cfg), None, 0, meta)
    conditional = dict(meta, train=dict(meta["train"], max_input_length=8))
    checkpoint.save(str(d / "condck"), ELF(cfg), ELF(cfg), None, 0, conditional)
    weights = (d / "ck" / "step-00000000" / "model.safetensors").read_bytes()
    # small ones (V = 11), refused before any encoder is needed
    small = ELFConfig(
        latent_dim=8, vocab_size=11, hidden=32, depth=1, heads=2, bottleneck=8, max_seq_len=12
    )
    meta_small, net = dict(meta, model=dataclasses.asdict(small)), ELF(small)
    opt = torch.optim.AdamW(net.parameters())
    checkpoint.save(str(d / "run3"), net, ELF(small), opt, 3, meta_small)  # resumable, at step 3
    # its only checkpoint, damaged: optim.pt truncated, weights intact
    checkpoint.save(str(d / "damaged_run"), net, ELF(small), opt, 0, meta_small)
    optim = d / "damaged_run" / "step-00000000" / "optim.pt"
    optim.write_bytes(optim.read_bytes()[:100])
    # weights overwritten in place
    checkpoint.save(str(d / "garbled"), net, ELF(small), None, 0, meta_small)
    garbled = d / "garbled" / "step-00000000" / "model.safetensors"
    garbled.write_bytes(garbled.read_bytes()[:1000] + b"\x07" * (garbled.stat().st_size - 1000))
    with torch.no_grad():
        nan = ELF(small)
        nan.blocks[0].attn.proj.weight.fill_(float("nan"))
    # saved from a diverged state
    checkpoint.save(str(d / "nanweights"), nan, copy.deepcopy(nan), None, 0, meta_small)
    checkpoint.save(str(d / "distilled" / "round1"), net, ELF(small), None, 5, meta_small)
    checkpoint.save(str(d / "badconfig"), net, ELF(small), None, 0, meta_small)
    (d / "badconfig" / "config.json").write_text('{"train": ')  # the run folder's copy, cut short
    (d / "blank.txt").write_text("\n" * 30)  # no text at all
    (d / "one_line.txt").write_text(" ".join(f"word{i}" for i in range(3000)) + "\n")
    (d / "nan.py").write_text('blr = float("nan")\n')
    for name, content in (
        ("truncated", weights[: len(weights) // 2]),
        ("zero", b""),
        ("garbage", b"\x00" * 64),
    ):
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
    (
        "train",
        ["--snapshot_minutes=10,x"],
        "snapshot_minutes must be minutes >= 0 like '10,20,40', got '10,x'",
    ),
    ("train", ["--snapshot_minutes=nan"], "snapshot_minutes must be minutes >= 0"),
    ("train", ["--snapshot_minutes=inf"], "snapshot_minutes must be minutes >= 0"),
    ("train", ["--snapshot_minutes=-1"], "snapshot_minutes must be minutes >= 0"),
    ("train", ["--rope_theta=0"], "rope_theta must be > 0, got 0.0"),
    ("train", ["--embeddings=table"], "unknown embeddings 'table'"),
    ("train", ["--device=gpu"], "unknown device 'gpu'"),
    ("train", ["--model=ELF-XXL"], "unknown model 'ELF-XXL'"),
    ("train", ["--optimizer=sgd"], "unknown optimizer 'sgd'"),
    ("train", ["--dtype=float16"], "unknown dtype 'float16'"),
    ("train", ["--pad_token=zero"], "unknown pad_token 'zero'"),
    ("train", ["--init_from=latest"], "unknown init_from 'latest'"),
    ("train", ["--sample_preset=best"], "unknown sample_preset 'best'"),
    ("train", ["--max_input_length=64"], "max_input_length 64 must be in (0, max_length=16)"),
    (
        "train",
        ["--batch_size=4", "--grad_accum=3"],
        "grad_accum 3 must be >= 1 and divide batch_size 4",
    ),
    (
        "train",
        ["--max_length=32", "--max_seq_len=16"],
        "max_length 32 exceeds the model's RoPE table",
    ),
    ("train", ["--device=cuda"], "device 'cuda' but CUDA is not available"),
    ("train", ["--dataset={d}/nope.jsonl"], "data path not found: {d}/nope.jsonl"),
    ("train", ["--dataset={d}/empty.jsonl"], "data set '{d}/empty.jsonl' is empty"),
    ("train", ["--dataset={d}/data.csv"], "unsupported data file '{d}/data.csv'"),
    ("train", ["--dataset={d}/malformed.jsonl"], "{d}/malformed.jsonl:2: not valid JSON"),
    ("train", ["--dataset={d}/latin1.txt"], "{d}/latin1.txt:2: not UTF-8 text"),
    ("train", ["--dataset={d}/nocol.jsonl"], "no 'text' or 'input_ids' column (columns: ['body'])"),
    ("train", ["--encoder={d}/no_such_encoder"], "could not load encoder '{d}/no_such_encoder'"),
    (
        "train",
        ["--encoder=no-such-org/no-such-model"],
        "could not load encoder 'no-such-org/no-such-model'",
    ),
    (
        "train",
        ["--max_length=600", "--max_seq_len=600", "--dataset={d}/docs.jsonl"],
        "exceeds encoder 'minilm' positions (512)",
    ),
    ("train", ["--out_dir={d}/docs.jsonl/run"], "out_dir {d}/docs.jsonl/run is not writable"),
    ("train", ["--init_from=resume", "--out_dir={d}/no_run"], "no checkpoint in {d}/no_run"),
    (
        "train",
        ["--out_dir={d}/ck", "--dataset={d}/docs.jsonl"],
        "{d}/ck already holds a checkpoint",
    ),
    ("train:file", ["{d}/nope.py"], "config file not found: {d}/nope.py"),
    ("train:file", ["{d}/syntax.py"], "config file {d}/syntax.py:2:"),
    (
        "train:file",
        ["{d}/name.py"],
        "config file {d}/name.py:2: NameError: name 'undefined_name' is not defined",
    ),
    ("train:file", ["{d}/unknown.py"], "unknown config key 'batch_sise' in {d}/unknown.py"),
    ("train:file", ["{d}/exits.py"], "config file {d}/exits.py:3: it calls sys.exit(3)"),
    ("distill", ["configs/distill_tiny.py"], "distill.py needs --teacher"),
    ("distill", ["--teacher={d}/nowhere"], "no checkpoint at {d}/nowhere"),
    ("distill", ["--teacher={d}/ck", "--round=6"], "round 6 out of range"),
    (
        "distill",
        ["--teacher={d}/ck", "--objective=copy"],
        "unknown objective 'copy' (choose from distill, flow)",
    ),
    ("distill", ["--teacher={d}/ck", "--spans=1/4,2"], "every span must lie in (0, 1]"),
    ("distill", ["--teacher={d}/ck", "--spans=a/b"], "spans must be fractions"),
    ("distill", ["--teacher={d}/ck", "--teacher_substeps=0"], "teacher_substeps must be >= 1"),
    ("distill", ["--teacher={d}/ck", "--batch_size=0"], "batch_size must be >= 1, got 0"),
    ("distill", ["--teacher={d}/ck", "--grad_clip=0"], "grad_clip must be > 0, got 0.0"),
    (
        "distill",
        ["--teacher={d}/ck", "--decoder_prob=2"],
        "decoder_prob must lie in [0, 1], got 2.0",
    ),
    ("distill", ["--teacher={d}/ck", "--warmup_steps=-1"], "warmup_steps must be >= 0, got -1"),
    ("sample", ["--ckpt={d}/ck", "--steps=0"], "steps must be > 0, got 0"),
    (
        "sample",
        ["--ckpt={d}/arcond"],
        "(it holds a conditional GPT-2 (the conditional AR "
        "baseline): python -m baselines.ar_cond --ckpt reads it)",
    ),
    ("evaluate", ["--ckpt={d}/arcond"], "baselines.ar_cond --ckpt reads it"),
    ("sample", ["--ckpt={d}/ck", "--steps=-3"], "steps must be > 0, got -3"),
    ("sample", ["--ckpt={d}/ck", "--n=0"], "n must be > 0, got 0"),
    ("sample", ["--ckpt={d}/ck", "--length=0"], "length must be > 0, got 0"),
    ("sample", ["--ckpt={d}/ck", "--gamma=-1"], "gamma must be >= 0, got -1.0"),
    ("sample", ["--ckpt={d}/ck", "--device=cuda"], "device 'cuda' but CUDA is not available"),
    ("sample", ["--ckpt={d}/ck", "--preset=best"], "unknown preset 'best'"),
    ("sample", ["--ckpt={d}/ck", "--sampler=euler"], "unknown sampler 'euler'"),
    ("sample", ["--ckpt={d}/ck", "--source=Hallo"], "--source goes with a conditional checkpoint"),
    (
        "sample",
        ["--ckpt={d}/condck", "--source=Hallo", "--length=8"],
        "length 8 leaves no room for a target after the source's max_input_length 8",
    ),
    ("sample", ["--ckpt={d}/ck", "--span=abc"], "span expects POS:TEXT, got 'abc'"),
    ("sample", ["--ckpt={d}/nowhere"], "no checkpoint at {d}/nowhere"),
    (
        "sample",
        ["--ckpt={d}/truncated"],
        "{d}/truncated/model.safetensors is not an ELF checkpoint",
    ),
    ("sample", ["--ckpt={d}/zero"], "{d}/zero/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/garbage"], "{d}/garbage/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/foreign"], "{d}/foreign/model.safetensors is not an ELF checkpoint"),
    ("sample", ["--ckpt={d}/noconfig"], "no checkpoint at {d}/noconfig"),
    ("sample", [], "give --ckpt"),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--samples={d}/samples_notext.jsonl", "--judge=x"],
        "samples_notext.jsonl:1: a sample needs a 'text'",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--samples={d}/samples_bad.jsonl", "--judge=x"],
        "samples_bad.jsonl:2: not JSON",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--samples={d}/none.jsonl", "--judge=x"],
        "no samples file at {d}/none.jsonl",
    ),
    ("evaluate", ["--ckpt={d}/ck", "--judge={d}/no_judge"], "could not load judge '{d}/no_judge'"),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--control={d}/distilled"],
        "--control is scored beside the students of --distill: give --distill",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--distill={d}/distilled", "--control={d}/nowhere"],
        "no distillation rounds (round1, round2, ...) in {d}/nowhere",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--split=val"],
        "unknown split 'val' (choose from dev, test, all)",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--steps=abc"],
        "'steps' expects a comma list of int, got 'abc'",
    ),
    ("evaluate", ["--ckpt={d}/noconfig", "--judge=x"], "no checkpoint at {d}/noconfig"),
    ("evaluate", ["--judge=x"], "give --ckpt"),
    ("evaluate", ["--ckpt={d}/ck", "--judge=x", "--n=0"], "n must be > 0"),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--distill={d}/distilled", "--sc_cfg=1,2"],
        "--distill scores at --distill_steps, each with its fewstep preset: --sampler, --sc_cfg, "
        "--gamma, --grid override it with one value each",
    ),
    # one writer per run folder, no silent replacement (damaged checkpoints count; step folders are
    # not run folders)
    (
        "train",
        ["--out_dir={d}/damaged_run", "--dataset={d}/docs.jsonl"],
        "{d}/damaged_run holds a damaged checkpoint "
        "(step-00000000: optim.pt does not match its manifest)",
    ),
    (
        "train",
        ["--init_from=resume", "--out_dir={d}/damaged_run"],
        "no checkpoint in {d}/damaged_run that verifies "
        "(step-00000000: optim.pt does not match its manifest)",
    ),
    (
        "train",
        ["--init_from=resume", "--out_dir={d}/run3/step-00000003"],
        "out_dir {d}/run3/step-00000003 is a step folder of a run, not a run folder: "
        "give the run's folder ({d}/run3)",
    ),
    (
        "train",
        ["--overwrite", "--out_dir={d}/ck/step-00000000"],
        "out_dir {d}/ck/step-00000000 is a step folder",
    ),
    (
        "convert",
        ["--convert={d}/docs.jsonl", "--out_dir={d}/ck"],
        "out_dir {d}/ck already holds a checkpoint: --overwrite",
    ),
    (
        "convert",
        ["--convert={d}/docs.jsonl", "--out_dir={d}/ck/step-00000000", "--overwrite"],
        "is a step folder of a run",
    ),
    (
        "judge",
        ["--out={d}/ck"],
        "out {d}/ck holds an ELF run, not a GPT-2 (the AR baseline or a judge): give another --out",
    ),
    (
        "distill",
        ["--teacher={d}/ck", "--out_dir={d}/distilled"],
        "out_dir {d}/distilled/round1 already holds a checkpoint",
    ),
    # never train, save or sample from non-finite numbers
    ("train", ["--blr=inf"], "config key 'blr' must be a finite number, got inf"),
    ("train", ["--p_std=nan"], "config key 'p_std' must be a finite number, got nan"),
    ("train", ["--noise_scale=-inf"], "config key 'noise_scale' must be a finite number, got -inf"),
    ("train", ["--latent_std=0"], "latent_std must be > 0, got 0.0"),
    ("train:file", ["{d}/nan.py"], "config key 'blr' must be a finite number, got nan"),
    (
        "sample",
        ["--ckpt={d}/ck", "--sc_cfg=nan"],
        "config key 'sc_cfg' must be a finite number, got nan",
    ),
    (
        "distill",
        ["--teacher={d}/ck", "--blr=inf"],
        "config key 'blr' must be a finite number, got inf",
    ),
    ("judge", ["--lr=nan"], "config key 'lr' must be a finite number, got nan"),
    (
        "convert",
        ["--convert={d}/docs.jsonl", "--out_dir={d}/new", "--latent_std=0"],
        "latent_std must be > 0, got 0.0",
    ),
    (
        "convert",
        [
            "--convert={d}/docs.jsonl",
            "--out_dir={d}/new",
            "--max_length=16",
            "--max_input_length=16",
        ],
        "max_input_length 16 must be in (0, max_length=16)",
    ),
    (
        "sample",
        ["--ckpt={d}/garbled/step-00000000"],
        "checkpoint {d}/garbled/step-00000000 is damaged: "
        "model.safetensors does not match its manifest",
    ),
    (
        "sample",
        ["--ckpt={d}/garbled"],
        "no checkpoint at {d}/garbled that verifies "
        "(step-00000000: model.safetensors does not match its manifest)",
    ),
    (
        "evaluate",
        ["--ckpt={d}/garbled/step-00000000", "--judge=x"],
        "checkpoint {d}/garbled/step-00000000 is damaged",
    ),
    (
        "evaluate",
        ["--ckpt={d}/badconfig", "--judge=x"],
        "{d}/badconfig/config.json is not a checkpoint's config (JSONDecodeError): "
        "the checkpoint is damaged",
    ),
    (
        "sample",
        ["--ckpt={d}/nanweights"],
        "{d}/nanweights/step-00000000/model.safetensors holds non-finite weights "
        "(ema.blocks.0.attn.proj.weight)",
    ),
    # the output path checked before the work
    (
        "sample",
        ["--ckpt={d}/ck", "--out={d}/docs.jsonl"],
        "out {d}/docs.jsonl is a file: give a folder",
    ),
    (
        "sample",
        ["--ckpt={d}/ck", "--out={d}/docs.jsonl/s"],
        "out {d}/docs.jsonl/s is not writable ({d}/docs.jsonl is a file, not a folder)",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--out_dir={d}/docs.jsonl"],
        "out_dir {d}/docs.jsonl is a file: give a folder",
    ),
    ("judge", ["--out={d}/docs.jsonl"], "out {d}/docs.jsonl is a file: give a folder"),
    (
        "distill",
        ["--teacher={d}/ck", "--out_dir={d}/docs.jsonl"],
        "out_dir {d}/docs.jsonl is a file: give a folder",
    ),
    (
        "convert",
        ["--convert={d}/docs.jsonl", "--out_dir={d}/docs.jsonl"],
        "out_dir {d}/docs.jsonl is a file: give a folder",
    ),
    # degenerate data and requests
    (
        "train",
        ["--dataset={d}/blank.txt"],
        "data set '{d}/blank.txt' holds no text: its 27 documents are blank",
    ),
    (
        "train",
        ["--dataset={d}/one_line.txt"],
        "gives a single training row, so its validation split would be that same row",
    ),
    (
        "train",
        ["--init_from=resume", "--out_dir={d}/run3", "--max_steps=2"],
        "the checkpoint in {d}/run3 is at step 3 and max_steps is 2: nothing to train",
    ),
    # issue 56: nothing sampled for nothing, nor more than memory holds
    ("evaluate", ["--ckpt={d}/ck", "--steps=0"], "steps must be >= 1, got 0 in '0'"),
    ("evaluate", ["--ckpt={d}/ck", "--steps=8,-3"], "steps must be >= 1, got -3 in '8,-3'"),
    ("evaluate", ["--ckpt={d}/ck", "--n=100000000"], "n must be at most 10,000,000"),
    ("sample", ["--ckpt={d}/ck", "--n=1000000000000"], "n must be at most 10,000,000"),
    # values parsed where their key is known
    ("train:file", ["{d}"], "config file {d} is a folder: give a Python file"),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--seeds=0,x"],
        "'seeds' expects a comma list of int, got '0,x'",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--seeds="],
        "'seeds' expects a comma list of int, got ''",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--distill_steps=1,,2"],
        "'distill_steps' expects a comma list of int",
    ),
    (
        "evaluate",
        ["--ckpt={d}/ck", "--judge=x", "--device=cuda"],
        "device 'cuda' but CUDA is not available",
    ),
    (
        "sample",
        ["--ckpt={d}/ck", "--device=tpu"],
        "unknown device 'tpu' (choose from auto, cpu, cuda, cuda:N)",
    ),
    ("distill", ["--teacher={d}/ck", "--device=cuda"], "device 'cuda' but CUDA is not available"),
    ("judge", ["--sample_seeds=0,x"], "'sample_seeds' expects a comma list of int, got '0,x'"),
    (
        "judge",
        ["--normalize={d}/no_tokenizer"],
        "could not load the tokenizer of '{d}/no_tokenizer'",
    ),
    ("judge", ["--steps=0"], "steps must be >= 1, got 0"),
    ("judge", ["--data=wiki,"], "'data' expects comma-separated data set names, got 'wiki,'"),
    ("train", ["--dataset="], "no data set named (an empty name)"),
    ("sample", ["--ckpt={d}/ck", "--prefix= "], "given text ' ' holds no tokens"),
    ("sample", ["--ckpt={d}/ck", "--span=3: "], "given text ' ' holds no tokens"),
    ("ablate", ["--name=x", "--arms=|"], "give --arms 'label: overrides | ...', got '|'"),
    ("bench", ["--device=cuda"], "device 'cuda' but CUDA is not available"),
    ("bench", ["--sample_steps=8,x"], "'sample_steps' expects a comma list of int, got '8,x'"),
    ("bench", ["--iters=0"], "iters must be >= 1, got 0"),
    ("bench", ["--models=tiny,ELF-XXL"], "unknown models 'ELF-XXL' in 'tiny,ELF-XXL' (choose from"),
    ("bench", ["--parts=train,gpu"], "unknown parts 'gpu' in 'train,gpu' (choose from train,"),
    ("ablate", ["--name=x", "--arms=a: --blr '1"], "'arms': no closing quotation in ' --blr '1'"),
    ("ablate", ["--name=x", "--arms=a:", '--common=--blr "1'], "'common': no closing quotation"),
    (
        "ablate",
        ["--name=x", "--arms=a:", "--seeds=0,x"],
        "'seeds' expects a comma list of int, got '0,x'",
    ),
]

# inputs no case may change
KEPT = (
    "ck",
    "condck",
    "run3",
    "damaged_run",
    "garbled",
    "nanweights",
    "distilled",
    "badconfig",
    "docs.jsonl",
)


@pytest.mark.parametrize(
    "entry,args,message", CASES, ids=[f"{c[0]}:{' '.join(c[1])}"[:60] for c in CASES]
)
def test_bad_input_is_one_line_and_writes_nothing(env, tmp_path, capsys, entry, args, message):
    d = str(env)
    name, _, kind = entry.partition(":")
    args = [a.replace("{d}", d) for a in args]
    out = tmp_path / "out"
    if name == "train" and kind != "file":
        args = TRAIN + [f"--out_dir={out}"] + args  # a case's own --out_dir comes later and wins
    elif name in ("distill", "evaluate") and not any(a.startswith("--out_dir=") for a in args):
        args = args + [f"--out_dir={out}"]
    elif name == "judge" and not any(a.startswith("--out=") for a in args):
        args = args + [f"--out={out}"]
    before = {p: stamps(env / p) for p in KEPT}
    code, err = run_main(name, args, capsys)
    lines = err.strip().splitlines()
    assert code != 0, f"accepted: {args}"
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("error: ")
    assert message.replace("{d}", d) in lines[0], lines[0]
    assert tree(out) is None  # nothing created in the output folder
    assert {p: stamps(env / p) for p in KEPT} == before  # nor changed where the input lives


@pytest.mark.parametrize(
    "entry,args",
    [
        ("train", TRAIN + ["--out_dir={ro}/run"]),
        ("sample", ["--ckpt={d}/ck", "--out={ro}/s.jsonl"]),
        ("evaluate", ["--ckpt={d}/ck", "--judge=x", "--out_dir={ro}/eval"]),
        ("judge", ["--out={ro}/judge"]),
        ("distill", ["--teacher={d}/ck", "--out_dir={ro}/students"]),
        ("convert", ["--convert={d}/docs.jsonl", "--out_dir={ro}/converted"]),
    ],
)
def test_a_read_only_output_folder_is_refused_before_the_work(
    env, tmp_path, capsys, monkeypatch, entry, args
):
    """Each entry point checks where its output goes before it trains, samples or reads a
    checkpoint. (Read-only by os.access: the tests may run as root, whom chmod does not stop.)"""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode, **k: (
            not (mode & os.W_OK and os.path.abspath(p) == str(ro)) and real(p, mode, **k)
        ),
    )
    code, err = run_main(
        entry, [a.replace("{d}", str(env)).replace("{ro}", str(ro)) for a in args], capsys
    )
    assert code == 1 and err.strip().count("\n") == 0, err
    assert f"is not writable ({ro} is a read-only folder)" in err and not any(ro.iterdir())


@pytest.mark.parametrize(
    "script,args,message",
    [
        (
            "train.py",
            ["configs/tiny.py", "--max_steps", "ten"],
            "error: config key 'max_steps' expects int, got 'ten'",
        ),
        ("sample.py", ["--ckpt", "/no/such/ckpt"], "error: no checkpoint at /no/such/ckpt"),
        ("evaluate.py", ["--judge", "x"], "error: give --ckpt"),
        ("distill.py", ["--teacher", "/no/such/dir"], "error: no checkpoint at /no/such/dir"),
        (
            "gpu_check",
            ["--stages", "step,bogus"],
            "error: unknown stages 'bogus' in 'step,bogus' (choose from step, numerics, optim,",
        ),
    ],
)
def test_the_scripts_themselves_answer_in_one_line(script, args, message):
    command = COMMANDS[script.removesuffix(".py")]
    r = subprocess.run(
        [sys.executable, *command, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith(message), r.stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_lists_every_key_with_its_default(name):
    r = subprocess.run(
        [sys.executable, *COMMANDS[name], "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.startswith(f"usage: python {' '.join(COMMANDS[name])} ")
    keys = [line for line in r.stdout.splitlines() if line.startswith("  --")]
    assert len(keys) >= 5 and all("default" in k for k in keys)
