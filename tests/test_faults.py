"""No traceback reaches a user: each input that once ended in one (a damaged file, a file of the
wrong kind, a malicious pickle, bytes that are not UTF-8) now ends with one line that names the
file or the key, and given text is never dropped without a word. Each test is one such case."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import evaluate
import sample
import train
from lib import checkpoint, shards
from lib.metrics import load_judge
from tests.conftest import ROOT
from tests.test_guards import tiny_elf_checkpoint, tiny_mdlm_checkpoint
from tools import convert_release


class Evil:
    def __reduce__(self):  # what torch.load would run without weights_only
        return os.system, ("touch pwned",)


@pytest.fixture(scope="module")
def elf_ckpt(tmp_path_factory):
    return tiny_elf_checkpoint(tmp_path_factory.mktemp("faults") / "elf")


def one_line(fn, *args, match, kind=ValueError):
    with pytest.raises(kind, match=match) as e:
        fn(*args)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_judge_folder_without_tokenizer_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    one_line(
        load_judge,
        str(tmp_path),
        match="holds no tokenizer files .* python -m baselines.ar",
        kind=FileNotFoundError,
    )
    one_line(
        load_judge,
        str(tmp_path / "nowhere"),
        match="no such folder, nor a hub model.*build one",
        kind=FileNotFoundError,
    )


def test_a_samples_file_whose_seed_is_not_an_integer(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"text": "a b", "seed": [1]}\n')
    one_line(evaluate.read_samples, str(path), match=r"s.jsonl:1: a sample's 'seed' is an integer")
    path.write_bytes(b'{"text": "caf\xe9 au lait"}\n')  # well-formed JSON, Latin-1 bytes
    one_line(evaluate.read_samples, str(path), match=r"s.jsonl:1: not UTF-8 text .byte 0xe9")
    path.write_bytes(b'{"text": "a"\n')
    one_line(evaluate.read_samples, str(path), match=r"s.jsonl:1: not JSON")


def test_a_release_that_is_text_or_code(tmp_path):
    text, evil = tmp_path / "notes.pt", tmp_path / "evil.pt"
    text.write_text("hello\n")
    torch.save({"params": Evil()}, evil)
    for path, match in (
        (text, "is not a readable torch file"),
        (evil, "is refused: it asks to run code"),
    ):
        one_line(
            convert_release.main,
            ["--convert", str(path), "--out_dir", str(tmp_path / "o")],
            match=match,
        )
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


@pytest.mark.parametrize(
    "damage,match",
    [(b"\x80\x02}q", "is not a readable torch file"), ("evil", "is refused: it asks to run code")],
)
def test_resuming_from_a_damaged_or_malicious_optimiser_state(jsonl_file, tmp_path, damage, match):
    out = tmp_path / "run"
    args = [
        "configs/tiny.py",
        f"--dataset={jsonl_file}",
        f"--out_dir={out}",
        f"--cache_dir={tmp_path / 'cache'}",
        "--depth=1",
        "--hidden=32",
        "--heads=2",
        "--batch_size=8",
        "--eval_interval=100",
        "--time_limit_min=0",
        "--n_samples=0",
        "--val_size=4",
        "--latent_cache=false",
    ]
    train.main(args + ["--max_steps=2"])
    folder = checkpoint.find(str(out))
    if damage == "evil":
        torch.save({"opt": Evil(), "step": 2}, os.path.join(folder, "optim.pt"))
    else:
        open(os.path.join(folder, "optim.pt"), "wb").write(damage)
    manifest = json.load(open(os.path.join(folder, "manifest.json")))  # the damage, not a mismatch
    del manifest["files"]["optim.pt"]
    open(os.path.join(folder, "manifest.json"), "w").write(json.dumps(manifest))
    one_line(
        train.main,
        args + ["--max_steps=4", "--init_from=resume"],
        match=f"optim.pt {match}.*resume from an earlier checkpoint",
    )
    assert not os.path.exists("pwned")


@pytest.mark.parametrize(
    "files",
    ['["model.safetensors"]', '{"model.safetensors": {"sha256": "0"}}', '{"model.safetensors": 3}'],
)
def test_a_manifest_of_another_shape_is_unreadable(elf_ckpt, tmp_path, files):
    run = tmp_path / "run"
    shutil.copytree(elf_ckpt, run)
    step = checkpoint.find(str(run))
    open(os.path.join(step, "manifest.json"), "w").write('{"step": 0, "files": ' + files + "}")
    assert checkpoint.verify(step) == "manifest.json is unreadable"
    one_line(checkpoint.load, step, match="is damaged: manifest.json is unreadable")


def test_a_cache_dir_that_is_a_file(tmp_path):
    f = tmp_path / "cache"
    f.write_text("")
    one_line(
        train.main,
        ["configs/tiny.py", f"--cache_dir={f}", f"--out_dir={tmp_path / 'o'}"],
        match="cache_dir .* is a file: give a folder",
    )


@pytest.mark.parametrize("damage", ["list", "folder", "chunks", "json"])
def test_a_sampling_folder_of_another_shape(elf_ckpt, tmp_path, damage):
    out = tmp_path / "s"
    out.mkdir()
    if damage == "list":
        (out / "run.json").write_text("[]")
    elif damage == "folder":
        (out / "run.json").mkdir()
    elif damage == "chunks":
        (out / "chunks").write_text("")
    else:
        (out / "run.json").write_text("{not json")
    match = {
        "list": "is not a sampling run's record",
        "folder": "run.json is a folder",
        "chunks": "chunks is a file",
        "json": "run.json is damaged .not JSON",
    }[damage]
    one_line(
        sample.main,
        ["--ckpt", elf_ckpt, "--n", "2", "--steps", "1", "--out", str(out)],
        match=match,
    )


def test_a_damaged_chunk_is_named(tmp_path):
    draw = lambda idx: [{"index": i, "text": "t"} for i in idx]
    with pytest.raises(KeyboardInterrupt, match=r"interrupted: 1 of 2 chunks are in"):
        shards.run(
            str(tmp_path / "s"),
            {},
            {},
            4,
            2,
            lambda idx: draw(idx) if idx[0] == 0 else (_ for _ in ()).throw(KeyboardInterrupt),
        )
    (tmp_path / "s" / "chunks" / "000000.jsonl").write_text('{"index": 0, "text"\n')
    one_line(
        shards.run,
        str(tmp_path / "s"),
        {},
        {},
        4,
        2,
        draw,
        match="000000.jsonl is damaged .not JSON lines",
    )


def test_text_that_is_not_utf8_and_given_text_that_encodes_to_nothing(elf_ckpt):
    one_line(
        sample.main, ["--ckpt", elf_ckpt, "--prefix", "caf\udce9"], match="--prefix is not UTF-8"
    )
    one_line(
        sample.main,
        ["--ckpt", elf_ckpt, "--n", "1", "--steps", "1", "--prefix", "[CLS] [SEP]"],
        match="holds only special tokens",
    )


def test_an_mdlm_checkpoint_given_to_sample_py(tmp_path):
    m = tiny_mdlm_checkpoint(tmp_path / "m")
    one_line(
        sample.main, ["--ckpt", m], match="is an MDLM checkpoint.*python -m baselines.mdlm --ckpt"
    )


def test_a_source_longer_than_its_budget_and_an_empty_one_are_refused(minilm):
    sample.check_sources(minilm, ["ein " * 22], cap=24)  # 22 words + framing: fits
    one_line(
        sample.check_sources,
        minilm,
        ["ein " * 23],
        24,
        match="--source 1 is 25 tokens with its framing, more than the run's max_input_length 24",
    )
    one_line(sample.check_sources, minilm, ["  [SEP] "], 24, match="--source 1 .* holds no tokens")


def test_ctrl_c_and_a_closed_pipe_end_in_one_line(tmp_path):
    """What cli() does with an interrupt and with `| head`: one line, no traceback."""
    code = (
        "import sys; from lib.guard import cli\n"
        "def main(argv):\n"
        "    if argv[0] == 'int': raise KeyboardInterrupt('interrupted at step 3; kept')\n"
        "    for i in range(100000): print(i)\n"
        "cli(main)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "int"], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 130 and r.stderr == "interrupted at step 3; kept\n"
    r = subprocess.run(
        f'{sys.executable} -c "{code}" pipe | head -1',
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.stdout == "0\n" and r.stderr == ""


def test_a_sampling_folder_given_as_samples_is_read(elf_ckpt, tmp_path):
    """evaluate.py --samples DIR reads DIR/samples.jsonl (a sample.py --out run's folder)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "samples.jsonl").write_text('{"txt": "a"}\n')
    one_line(
        evaluate.main,
        [
            "--samples",
            str(run),
            "--ckpt",
            elf_ckpt,
            "--judge",
            "j",
            "--out_dir",
            str(tmp_path / "e"),
        ],
        match=r"run/samples.jsonl:1: a sample needs a 'text' string",
    )
