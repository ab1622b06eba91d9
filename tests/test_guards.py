"""Every command that writes a folder goes through one guard (lib/guard.Writer), and these
cases run against each of them, so that a writer added later cannot skip them
(tests/test_layout.py checks that every command is in COMMANDS):

- a second writer into a live folder is refused;
- an output folder inside a run's step folder is refused (a prune would delete it);
- a folder of another kind is refused, with --overwrite too (a judge is not a run);
- output of its own kind is not replaced without --overwrite.

Each case is refused before any work, with one line and nothing written. Then the trainers'
faults: a non-finite loss stops MDLM before it saves; Ctrl-C during a save leaves no temporary
folder and one line that says what is kept."""

import copy
import json
import os
import re
import shutil
from dataclasses import asdict

import pytest
import torch

import distill
import evaluate
import sample
import train
from baselines import ar, mdlm
from baselines.mdlm_model import MDLM, MDLMModelConfig
from flow import FlowConfig
from lib import checkpoint, guard, outputs
from model import ELF, ELFConfig
from tests.conftest import COMMANDS
from tests.test_outputs import holder
from tools import ablate, convert_release

# the commands that write a folder, and the folder key each writes
WRITERS = {
    "train": train.main,
    "distill": distill.main,
    "sample": sample.main,
    "evaluate": evaluate.main,
    "ar": ar.main,
    "mdlm": mdlm.main,
    "convert": convert_release.main,
    "ablate": ablate.main,
}
KIND = {
    "train": "elf",
    "distill": "distill",
    "sample": "samples",
    "evaluate": "eval",
    "ar": "gpt2",
    "mdlm": "mdlm",
    "convert": "elf",
    "ablate": "ablation",
}


def tiny_elf_checkpoint(path):
    """A tiny ELF checkpoint folder on the bundled encoder's dimensions (samples, loads)."""
    cfg = ELFConfig(
        latent_dim=384, vocab_size=30522, hidden=32, depth=1, heads=2, max_seq_len=16, n_prefix=1
    )
    torch.manual_seed(0)
    net = ELF(cfg)
    meta = {
        "train": {"encoder": "minilm", "encoder_dtype": "float32", "max_length": 16},
        "model": asdict(cfg),
        "flow": asdict(FlowConfig()),
        "latent_stats": {"mean": 0.0, "std": 0.3},
    }
    checkpoint.save(str(path), net, copy.deepcopy(net), None, 0, meta)
    return str(path)


@pytest.fixture(scope="module")
def elf_ckpt(tmp_path_factory):
    return tiny_elf_checkpoint(tmp_path_factory.mktemp("guards") / "elf")


def argv(name, out, elf_ckpt, tmp):
    """A command line of `name` that writes into `out`: refused there, or it would run."""
    release = tmp / "release.pt"
    release.write_bytes(b"x")
    return {
        "train": ["configs/tiny.py", f"--out_dir={out}", "--max_steps=1"],
        "distill": ["configs/distill_tiny.py", "--teacher", elf_ckpt, f"--out_dir={out}"],
        "sample": ["--ckpt", elf_ckpt, "--n", "2", "--steps", "1", "--out", str(out)],
        "evaluate": ["--ckpt", elf_ckpt, "--decompose", "only", f"--out_dir={out}"],
        "ar": ["--data", "wiki_descriptions", "--out", str(out), "--steps", "1"],
        "mdlm": ["configs/mdlm_tiny.py", f"--out_dir={out}", "--max_steps=1"],
        "convert": ["--convert", str(release), f"--out_dir={out}"],
        "ablate": ["--name", os.path.basename(out), "--arms", "a:", "--out", os.path.dirname(out)],
    }[name]


def refused(name, args, match):
    """main(args) stops with a one-line ValueError matching `match`."""
    with pytest.raises(ValueError, match=match) as e:
        WRITERS[name](args)
    assert "\n" not in str(e.value)


def files(folder):
    return {p: open(p, "rb").read() for p in map(str, folder.rglob("*")) if os.path.isfile(p)}


def test_every_writer_is_guarded_here():
    assert set(WRITERS) <= set(COMMANDS) and set(KIND) == set(WRITERS)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_second_writer_into_a_live_folder_is_refused(name, elf_ckpt, tmp_path):
    out = tmp_path / "out" / "live"
    p = holder(out)
    try:
        before = files(out)
        refused(name, argv(name, out, elf_ckpt, tmp_path), "is in use by process")
        assert files(out) == before
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_folder_inside_a_step_folder_is_refused(name, elf_ckpt, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(elf_ckpt, run)
    step = checkpoint.find(str(run))
    out = os.path.join(step, "sub")
    refused(name, argv(name, out, elf_ckpt, tmp_path), "is inside the step folder")
    assert not os.path.exists(out) and checkpoint.verify(step) == ""


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_a_folder_of_another_kind_is_refused_even_with_overwrite(name, elf_ckpt, tmp_path):
    out = tmp_path / "other"
    out.mkdir()
    other = "gpt2" if KIND[name] != "gpt2" else "elf"
    (out / guard.KIND).write_text(other + "\n")
    (out / "precious.txt").write_text("someone's work")
    before = files(out)
    for extra in ([], ["--overwrite"] if name not in ("sample", "ablate") else []):
        refused(
            name,
            argv(name, out, elf_ckpt, tmp_path) + extra,
            re.escape(f"holds {guard.KINDS[other]}, not {guard.KINDS[KIND[name]]}"),
        )
    assert files(out) == before


def test_the_kind_of_folders_written_before_the_marker(elf_ckpt, tmp_path):
    """A folder without a marker is read by its files: a run, a judge, a report, samples."""
    assert guard.kind_of(elf_ckpt) == "elf"
    for name, kind in (
        ("train_log.json", "gpt2"),
        ("report.json", "eval"),
        ("run.json", "samples"),
    ):
        d = tmp_path / kind
        d.mkdir()
        (d / name).write_text("{}")
        assert guard.kind_of(str(d)) == kind
    assert guard.kind_of(str(tmp_path / "none")) is None


def tiny_mdlm_checkpoint(path):
    cfg = MDLMModelConfig(vocab_size=40, mask_id=39, hidden=16, depth=1, heads=2, max_seq_len=16)
    net = MDLM(cfg)
    checkpoint.save(
        str(path),
        net,
        copy.deepcopy(net),
        None,
        0,
        {
            "kind": "mdlm",
            "train": {"encoder": "minilm", "max_length": 16},
            "model": asdict(cfg),
            "hold_first": None,
        },
    )
    return str(path)


def test_output_of_its_own_kind_is_not_replaced_without_overwrite(elf_ckpt, tmp_path):
    """Each writer's own rule, before any work: a run's checkpoint, a judge, a report of other
    weights, another sampling run, MDLM samples of other weights, a converted checkpoint."""
    run = tmp_path / "run"
    shutil.copytree(elf_ckpt, run)
    for name in ("train", "convert"):
        refused(name, argv(name, run, elf_ckpt, tmp_path), "already holds a checkpoint")
    rounds = tmp_path / "rounds"
    shutil.copytree(elf_ckpt, rounds / "round1")
    refused(
        "distill",
        argv("distill", rounds, elf_ckpt, tmp_path) + ["--round", "1"],
        "already holds a checkpoint",
    )
    judge = tmp_path / "judge"
    judge.mkdir()
    (judge / "train_log.json").write_text("{}")
    refused("ar", argv("ar", judge, elf_ckpt, tmp_path), "already holds train_log.json")
    report = tmp_path / "eval"
    report.mkdir()
    (report / "report.json").write_text(json.dumps({"ckpt_sha256": "0" * 64}))
    refused(
        "evaluate",
        argv("evaluate", report, elf_ckpt, tmp_path),
        "holds the report of another evaluation .other ckpt.",
    )
    runs = tmp_path / "samples"
    runs.mkdir()
    (runs / "run.json").write_text(
        json.dumps({"settings": {"seed": 7}, "provenance": {}, "runs": []})
    )
    refused("sample", argv("sample", runs, elf_ckpt, tmp_path), "holds another run")
    m = tiny_mdlm_checkpoint(tmp_path / "mdlm_run")
    refused("mdlm", argv("mdlm", m, elf_ckpt, tmp_path), "already holds a checkpoint")
    other = tmp_path / "mdlm_other"
    other.mkdir()
    (other / "samples-4steps.jsonl").write_text('{"text": "b"}\n')
    refused(
        "mdlm",
        ["--ckpt", m, "--out_dir", str(other), "--sample_steps", "4"],
        "holds samples-4steps.jsonl of other weights",
    )
    assert (other / "samples-4steps.jsonl").read_text() == '{"text": "b"}\n'


def test_a_writer_that_wrote_nothing_leaves_nothing(elf_ckpt, tmp_path):
    out = tmp_path / "new" / "folder"
    with guard.Writer(str(out), "out_dir", "eval") as w:
        assert not w.holds and (out / guard.KIND).read_text() == "eval\n"
    assert not (tmp_path / "new").exists()
    with guard.Writer(str(out), "out_dir", "eval"):
        (out / "report.json").write_text("{}")
    with guard.Writer(str(out), "out_dir", "eval") as w:
        assert w.holds


def test_a_dangling_link_is_named(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(ValueError, match="is a link to .*gone, which does not exist"):
        guard.Writer(str(link), "out_dir", "elf").check()


def trainer_argv(name, out, data, tmp, elf_ckpt):
    """A few steps of each trainer on tiny shapes, its learning rate absurd."""
    cache = f"--cache_dir={tmp / 'cache'}"
    return {
        "train": [
            "configs/tiny.py",
            f"--dataset={data}",
            f"--out_dir={out}",
            cache,
            "--depth=1",
            "--hidden=32",
            "--heads=2",
            "--batch_size=8",
            "--max_steps=20",
            "--blr=1e30",
            "--warmup_steps=0",
            "--log_interval=100",
            "--ckpt_interval=2",
            "--eval_interval=100",
            "--time_limit_min=0",
            "--n_samples=0",
            "--val_size=4",
            "--latent_cache=false",
        ],
        "mdlm": [
            "configs/mdlm_tiny.py",
            f"--dataset={data}",
            f"--out_dir={out}",
            cache,
            "--max_steps=20",
            "--blr=1e30",
            "--warmup_steps=0",
            "--depth=1",
            "--hidden=32",
            "--heads=2",
            "--batch_size=8",
            "--log_interval=100",
            "--eval_interval=100",
            "--ckpt_interval=2",
            "--time_limit_min=0",
            "--n_samples=0",
            "--val_size=4",
        ],
        "distill": [
            "configs/distill_tiny.py",
            "--teacher",
            elf_ckpt,
            f"--out_dir={out}",
            cache,
            f"--dataset={data}",
            "--text_column=text",
            "--val_size=4",
            "--packing=false",
            "--latent_cache=false",
            "--steps_per_round=6",
            "--batch_size=4",
            "--blr=1e30",
            "--warmup_steps=0",
            "--log_interval=2",
        ],
        "ar": [
            "--data",
            data,
            "--out",
            str(out),
            "--steps",
            "20",
            "--lr",
            "1e30",
            "--warmup_steps",
            "0",
            "--length",
            "8",
            "--n_layer",
            "1",
            "--n_embd",
            "16",
            "--n_head",
            "2",
            "--vocab",
            "300",
            "--batch_size",
            "4",
        ],
    }[name]


@pytest.mark.parametrize("name", ["train", "mdlm", "distill", "ar"])
def test_a_non_finite_loss_stops_every_trainer_before_it_saves(
    name, jsonl_file, elf_ckpt, tmp_path
):
    out = tmp_path / "out"
    refused(
        name,
        trainer_argv(name, out, jsonl_file, tmp_path, elf_ckpt),
        r"step \d+: the loss (or the gradient norm )?is not finite",
    )
    saved = [p for p in out.rglob("model.safetensors")] + [
        p for p in out.rglob("*.jsonl") if p.name.startswith("samples")
    ]
    assert saved == []


def test_mdlm_killed_inside_a_save_resumes_to_the_uninterrupted_weights(
    jsonl_file, tmp_path, monkeypatch
):
    common = [
        "configs/mdlm_tiny.py",
        f"--dataset={jsonl_file}",
        f"--cache_dir={tmp_path / 'c'}",
        "--max_steps=4",
        "--depth=1",
        "--hidden=32",
        "--heads=2",
        "--batch_size=8",
        "--eval_interval=100",
        "--ckpt_interval=2",
        "--time_limit_min=0",
        "--n_samples=0",
        "--val_size=4",
    ]
    mdlm.main(common + [f"--out_dir={tmp_path / 'a'}"])
    real, saves = checkpoint.write_step, []

    def killed_in_second_save(tmp, *args):
        saves.append(tmp)
        real(tmp, *args)
        if len(saves) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "write_step", killed_in_second_save)
    with pytest.raises(KeyboardInterrupt, match="interrupted at step 4; the last good checkpoint"):
        mdlm.main(common + [f"--out_dir={tmp_path / 'b'}"])
    monkeypatch.undo()
    assert not [p for p in (tmp_path / "b").iterdir() if p.name.startswith(".tmp")]
    mdlm.main(common + [f"--out_dir={tmp_path / 'b'}", "--init_from=resume"])
    a = checkpoint.load_state(checkpoint.find(str(tmp_path / "a")), "model")
    b = checkpoint.load_state(checkpoint.find(str(tmp_path / "b")), "model")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_ctrl_c_during_a_save_leaves_no_temporary_folder_and_one_line(
    jsonl_file, tmp_path, monkeypatch
):
    out = tmp_path / "run"
    real, calls = checkpoint.write_step, []

    def interrupted_second_save(tmp, *args):
        calls.append(tmp)
        real(tmp, *args)
        if len(calls) == 2:  # the files written, the rename not yet
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "write_step", interrupted_second_save)
    with pytest.raises(KeyboardInterrupt) as e:
        train.main(
            [
                "configs/tiny.py",
                f"--dataset={jsonl_file}",
                f"--out_dir={out}",
                f"--cache_dir={tmp_path / 'cache'}",
                "--model=tiny",
                "--depth=1",
                "--hidden=32",
                "--heads=2",
                "--batch_size=8",
                "--max_steps=4",
                "--ckpt_interval=2",
                "--eval_interval=100",
                "--time_limit_min=0",
                "--n_samples=0",
                "--val_size=4",
                "--latent_cache=false",
            ]
        )
    assert str(e.value) == (
        f"interrupted at step 4; the last good checkpoint, "
        f"{out}/step-00000002, is kept; --init_from resume continues it"
    )
    assert sorted(os.listdir(out)) == [
        ".kind",
        "config.json",
        "latest",
        "metrics.jsonl",
        "step-00000002",
    ]


def test_a_ctrl_c_that_lands_in_a_finaliser_during_a_save_is_not_lost(tmp_path, monkeypatch):
    """Issue 56's finding 9 (1 Ctrl-C in 20 lost during a save): Python raises the interrupt
    wherever the interpreter is; inside an object's __del__ it is printed and dropped. During a
    save the interrupt is held until the checkpoint is whole, then raised, so it is never lost,
    and the checkpoint being written is kept."""
    import signal

    class Freed:
        def __del__(self):  # a finaliser run mid-save: Ctrl-C arrives while it runs
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(10_000))  # bytecode, where Python's own handler would raise (and drop)

    real = checkpoint.write_step

    def write_step(*args):
        Freed()  # freed at once: its __del__ runs here
        return real(*args)

    run = tmp_path / "run"
    tiny_elf_checkpoint(run)  # step 0, an ordinary save
    # Python's own handler, as in a terminal (a shell's `&` starts the tests with SIGINT ignored)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        net, _ = checkpoint.load(str(run))
        meta = checkpoint.read_meta(checkpoint.find(str(run)))
        monkeypatch.setattr(checkpoint, "write_step", write_step)
        with pytest.raises(KeyboardInterrupt):
            checkpoint.save(str(run), net, copy.deepcopy(net), None, 5, meta)
        assert checkpoint.read_latest(str(run)) == "step-00000005"  # the save ended first
        assert checkpoint.verify(str(run / "step-00000005")) == ""
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_writer_holds_the_lock_while_it_works(jsonl_file, tmp_path, monkeypatch):
    """Not only the early probe: while train.py works, its folder is locked."""
    out, seen = tmp_path / "run", []
    monkeypatch.setattr(
        train,
        "run",
        lambda cfg, *a: seen.append(guard.busy_holder(os.path.join(cfg.out_dir, outputs.LOCK))),
    )
    train.main(["configs/tiny.py", f"--out_dir={out}"])
    assert seen and seen[0] is not None and "process" in seen[0]


def test_folders_are_read_by_what_they_hold(elf_ckpt, tmp_path):
    """Before markers: a run with a report written into it is a run; an ablation's report is
    not an evaluation; a step-N name or a manifest.json outside a run is no step folder."""
    run = tmp_path / "run"
    shutil.copytree(elf_ckpt, run)
    (run / "report.json").write_text("{}")
    assert guard.kind_of(str(run)) == "elf"
    ablation = tmp_path / "ablation"
    ablation.mkdir()
    (ablation / "report.json").write_text(json.dumps({"arms": [], "rows": []}))
    assert guard.kind_of(str(ablation)) == "ablation"
    (tmp_path / "runs" / "step-2").mkdir(parents=True)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "manifest.json").write_text('{"name": "an app"}')
    for free in (tmp_path / "runs" / "step-2" / "elf", tmp_path / "project" / "out"):
        assert guard.in_step_folder(str(free)) is None
        guard.Writer(str(free), "out_dir", "elf").check()
    assert guard.in_step_folder(checkpoint.find(str(run)) + "/sub") == checkpoint.find(str(run))


def test_mdlm_samples_of_other_weights_are_kept(tmp_path):
    """Checkpoint B sampled into a folder that holds checkpoint A's samples (at other step
    counts too) is refused; a fresh run's samples would be as well."""
    a, b = tiny_mdlm_checkpoint(tmp_path / "a"), tiny_mdlm_checkpoint(tmp_path / "b")
    torch.manual_seed(1)
    out = tmp_path / "samples"
    out.mkdir()
    (out / "samples-4steps.jsonl").write_text('{"text": "x"}\n')
    (out / "samples.json").write_text(
        json.dumps({"provenance": checkpoint.provenance(a), "settings": {}})
    )
    refused(
        "mdlm",
        ["--ckpt", b, "--out_dir", str(out), "--sample_steps", "8"],
        "holds samples-4steps.jsonl of other weights",
    )
    refused(
        "mdlm",
        ["configs/mdlm_tiny.py", "--out_dir", str(out)],
        "holds samples-4steps.jsonl of other weights",
    )
    # a fresh run into a finished run's folder: the line names its checkpoint too, which
    # --overwrite would delete and --init_from resume continues
    for name in ("samples-4steps.jsonl", "samples.json"):
        shutil.copy(out / name, os.path.join(a, name))
    refused(
        "mdlm",
        ["configs/mdlm_tiny.py", "--out_dir", a],
        r"of other weights .* and a run's checkpoint \(step-00000000\), which --overwrite "
        r"deletes too \(--init_from resume continues that run\)",
    )


def test_an_interrupted_snapshot_leaves_no_folder(elf_ckpt, tmp_path, monkeypatch):
    net = checkpoint.load(elf_ckpt)[0]

    def interrupted(*a):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "write_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(str(tmp_path / "run" / "at-10min"), net, copy.deepcopy(net), None, 5, {})
    assert not (tmp_path / "run" / "at-10min").exists()
