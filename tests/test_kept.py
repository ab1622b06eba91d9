"""Nothing lost (issue 56, round 5): what a command finds in its output folder and did not write
is kept; a kill inside a save keeps the last checkpoint; a kept table survives a wrong --collect;
a folder's .kind marker is checked against its files; bad input is one line, not a traceback."""

import json
import os
import re

import pytest

from lib import checkpoint


def users_files(folder):
    """Files a user keeps in a folder whose names look temporary to a careless cleaner."""
    (folder / ".tmp-mine").mkdir(parents=True)
    (folder / ".tmp-mine" / "x").write_text("mine")
    (folder / "notes.tmp").write_text("n")
    (folder / "page.tmpl").write_text("t")
    (folder / "at-work").mkdir()
    return {".tmp-mine", "notes.tmp", "page.tmpl", "at-work"}


def test_a_fresh_run_keeps_the_users_files_that_look_temporary(tmp_path):
    out = tmp_path / "u"
    mine = users_files(out)
    (out / ".tmp-step-00000004-12345").mkdir()  # what a crashed save left: removed
    (out / "latest.tmp12345").write_text("step-00000004\n")
    checkpoint.prepare(str(out), False, False, {}, set(), "")
    assert set(os.listdir(out)) == mine
    checkpoint.remove_all(str(out))  # --overwrite deletes checkpoints, not these
    assert set(os.listdir(out)) == mine


def test_a_fresh_run_keeps_a_metrics_jsonl_that_is_not_a_runs_log(tmp_path):
    out = tmp_path / "u"
    out.mkdir()
    (out / "metrics.jsonl").write_text("my own notes\n")
    with pytest.raises(ValueError, match="holds a metrics.jsonl that is not a run's log"):
        checkpoint.prepare(str(out), False, False, {}, set(), "")
    assert (out / "metrics.jsonl").read_text() == "my own notes\n"
    (out / "metrics.jsonl").write_text(json.dumps({"minutes": 0.1, "step": 3}) + "\n")
    checkpoint.prepare(str(out), False, False, {}, set(), "")  # a killed run's log: replaced
    assert not (out / "metrics.jsonl").exists()


# ----------------------------------------------------------------------------------------
# the conditional AR's checkpoint: saved as every checkpoint is


def pairs(folder, n=200):
    """n copy pairs 'w1 w2 w3' -> the same words."""
    import random

    words = "red blue green cat dog bird apple bread milk tree river house".split()
    rng = random.Random(0)
    rows = [" ".join(rng.choice(words) for _ in range(3)) for _ in range(n)]
    path = folder / "pairs.jsonl"
    path.write_text("".join(json.dumps({"source": s, "target": s}) + "\n" for s in rows))
    return path


def ar_args(tmp_path, out, *extra):
    return [
        "configs/ar_de_en_tiny.py",
        f"--dataset={pairs(tmp_path)}",
        "--val_size=20",
        "--max_length=12",
        "--max_input_length=6",
        f"--cache_dir={tmp_path / 'cache'}",
        "--time_limit_min=0",
        "--warmup_steps=2",
        "--batch_size=4",
        "--n_layer=1",
        "--n_embd=32",
        "--n_head=2",
        "--n_samples=0",
        "--ckpt_interval=2",
        f"--out_dir={out}",
        *extra,
    ]


# a kill inside the second save: Ctrl-C as the step folder is renamed into place or as
# `latest` is switched to it, or a SIGKILL at the rename (no cleanup: its temporary folder left)
KILLS = {"rename": ".tmp-step", "latest": "latest.tmp", "sigkill": ".tmp-step"}


def kill_second_save(at: str):
    """An os.replace that kills the process at the second rename of a name starting with `at`."""
    import signal

    real, seen = os.replace, []

    def replace(src, dst, *a, **k):
        if os.path.basename(src).startswith(KILLS[at]):
            seen.append(src)
            if len(seen) == 2 and at == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if len(seen) == 2:
                raise KeyboardInterrupt
        return real(src, dst, *a, **k)

    return replace


@pytest.mark.parametrize("at", list(KILLS))
def test_ar_cond_killed_inside_a_save_resumes_to_the_uninterrupted_weights(
    tmp_path, monkeypatch, at
):
    import subprocess
    import sys

    import torch

    from baselines import ar_cond
    from tests.conftest import ROOT

    # the step saves alone: with keep_best its own save (out_dir/best) would be the second
    # os.replace the kill counts (a save_step too, so as atomic)
    ar_args_ = lambda *a, **k: ar_args(*a, **k) + ["--keep_best=false"]
    ar_cond.main(ar_args_(tmp_path, tmp_path / "a", "--max_steps=4"))
    b = tmp_path / "b"
    if at == "sigkill":  # a real kill: nothing of the process runs after it
        script = (
            "import os, sys; from baselines import ar_cond; from tests.test_kept import "
            "kill_second_save; os.replace = kill_second_save('sigkill'); "
            "ar_cond.main(sys.argv[1:])"
        )
        args = ar_args_(tmp_path, b, "--max_steps=4")
        r = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True)
        assert r.returncode == -9, r.stderr.decode()[-2000:]
        assert [p for p in os.listdir(b) if p.startswith(".tmp-step-00000004-")]
    else:
        monkeypatch.setattr(os, "replace", kill_second_save(at))
        # Ctrl-C's one line says where it stopped, what is kept and how to go on
        kept = (
            f"interrupted at step 4; the last checkpoint, {b}/step-00000002, is kept; "
            f"--init_from resume continues"
        )
        with pytest.raises(KeyboardInterrupt, match=kept):
            ar_cond.main(ar_args_(tmp_path, b, "--max_steps=4"))
        monkeypatch.undo()
        assert not [p for p in os.listdir(b) if p.startswith(".tmp")]
    assert ar_cond.read_meta(str(b))["step"] == 2  # the first save is the one read
    assert ar_cond.ckpt_folder(str(b)) == str(b / "step-00000002")
    ar_cond.main(ar_args_(tmp_path, b, "--max_steps=4", "--init_from=resume"))
    a, b_ = (ar_cond.load(str(tmp_path / r))[0].state_dict() for r in ("a", "b"))
    assert all(torch.equal(a[k], b_[k]) for k in a)
    assert sorted(p for p in os.listdir(b) if "step" in p or p == "latest") == [
        "latest",
        "step-00000002",
        "step-00000004",
    ]
    assert (b / "latest").read_text() == "step-00000004\n"
    assert not checkpoint.verify(str(b / "step-00000004"))
    assert not [p for p in os.listdir(b) if p.startswith(".tmp")]  # a SIGKILL's: cleaned
    manifest = json.loads((b / "step-00000004" / "manifest.json").read_text())
    assert {"model.safetensors", "optim.pt", "train.json", "config.json"} <= set(manifest["files"])


def judge_args(data, out):
    """baselines/ar.py's arguments for a 2-step judge of one small layer into out."""
    args = ["--data", data, "--out", str(out), "--steps", "2", "--length", "8"]
    return args + ["--n_layer", "1", "--n_embd", "16", "--n_head", "2", "--vocab", "300"]


def test_a_judge_killed_inside_its_save_leaves_no_half_judge(tmp_path, monkeypatch, jsonl_file):
    from baselines import ar

    out = tmp_path / "judge"
    args = judge_args(jsonl_file, out)
    real = ar.atomic_write_text

    def killed(path, text):
        if path.endswith("train_log.json"):
            raise KeyboardInterrupt
        real(path, text)

    monkeypatch.setattr(ar, "atomic_write_text", killed)
    with pytest.raises(KeyboardInterrupt):
        ar.main(args)
    monkeypatch.undo()
    assert not out.exists() or sorted(os.listdir(out)) == []
    ar.main(args)
    assert {"model.safetensors", "config.json", "train_log.json"} <= set(os.listdir(out))


def test_a_judge_killed_between_its_renames_is_refused_not_read(tmp_path, monkeypatch, jsonl_file):
    """--overwrite of a judge, killed after its new weights are renamed in and before the rest:
    old and new files are mixed, so lib.metrics.load_judge refuses the folder in one line."""
    from baselines import ar
    from lib.metrics import load_judge

    out = tmp_path / "judge"
    args = judge_args(jsonl_file, out)
    ar.main(args)
    load_judge(str(out))  # a whole judge loads
    real, renamed = os.replace, []

    def killed(src, dst):  # the renames of the save's files into the judge's folder
        if os.path.dirname(dst) == str(out) and not os.path.basename(dst).startswith("."):
            if renamed:
                raise KeyboardInterrupt
            renamed.append(dst)
        real(src, dst)

    monkeypatch.setattr(ar.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        ar.main([*args, "--overwrite", "--seed", "1"])
    monkeypatch.undo()
    assert len(renamed) == 1 and not (out / "train_log.json").exists()
    with pytest.raises(FileNotFoundError, match="its save did not finish"):
        load_judge(str(out))
    ar.main([*args, "--overwrite"])
    load_judge(str(out))


def test_a_judge_on_a_full_disk_is_one_line_keeping_the_old(tmp_path, monkeypatch, jsonl_file):
    """The AR baseline's save on a full disk: one line that says what is kept, no temporary
    folder left; under --overwrite the judge there before still loads."""
    import errno

    import transformers

    from baselines import ar
    from lib.metrics import load_judge

    out = tmp_path / "judge"
    args = judge_args(jsonl_file, out)

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(transformers.PreTrainedModel, "save_pretrained", full)
        with pytest.raises(ValueError, match="^no space left on the disk .*no whole judge"):
            ar.main(args)
    assert not [p for p in os.listdir(out) if p.startswith(".tmp")] if out.exists() else True
    ar.main([*args, "--overwrite"])
    with monkeypatch.context() as m:
        m.setattr(transformers.PreTrainedModel, "save_pretrained", full)
        with pytest.raises(ValueError, match="the judge there before is kept"):
            ar.main([*args, "--overwrite"])
    assert not [p for p in os.listdir(out) if p.startswith(".tmp")]
    load_judge(str(out))


@pytest.fixture(scope="module")
def ar_run(tmp_path_factory):
    """A conditional AR run of 2 steps (its folder, and the folder of its data)."""
    from baselines import ar_cond

    d = tmp_path_factory.mktemp("ar_cond")
    ar_cond.main(ar_args(d, d / "a", "--max_steps=2"))
    return d


def test_ar_cond_scoring_into_another_folder_keeps_its_report(ar_run, tmp_path):
    """--ckpt A --out_dir B: B's report of other weights is kept (--overwrite replaces it), and
    another run's folder is refused; A's report into a fresh B names A's weights."""
    from baselines import ar_cond

    a = str(ar_run / "a")
    score = ["--ckpt", a, "--n_samples=2", "--decode=greedy", "--sample_seeds=0"]
    other = tmp_path / "other"
    (other / "heldout").mkdir(parents=True)
    (other / "heldout" / "report.json").write_text(json.dumps({"ckpt_sha256": "0" * 64}))
    with pytest.raises(ValueError, match="holds the held-out report of other weights"):
        ar_cond.main([*score, f"--out_dir={other}"])
    assert json.loads((other / "heldout" / "report.json").read_text()) == {"ckpt_sha256": "0" * 64}
    run_b = ar_run / "b"
    ar_cond.main(ar_args(ar_run, run_b, "--max_steps=1"))
    with pytest.raises(ValueError, match="is another run's folder"):
        ar_cond.main([*score, f"--out_dir={run_b}"])
    fresh = tmp_path / "fresh"
    ar_cond.main([*score, f"--out_dir={fresh}"])
    ar_cond.main([*score, f"--out_dir={fresh}"])  # the same weights again: replaced
    rep = json.loads((fresh / "heldout" / "report.json").read_text())
    assert rep["ckpt"] == a and rep["ckpt_sha256"] == ar_cond.weights_sha256(a)


@pytest.mark.parametrize(
    "source,message",
    [
        ("", "--source '' names no text"),
        ("|||", "--source '|||' names no text"),
        ("Wir \udcff", "--source is not UTF-8 text"),
    ],
)
def test_ar_cond_refuses_a_source_that_names_no_text(ar_run, tmp_path, source, message):
    from baselines import ar_cond

    with pytest.raises(ValueError, match=message):
        ar_cond.main(["--ckpt", str(ar_run / "a"), f"--source={source}", f"--out_dir={tmp_path}"])
    assert not (tmp_path / "heldout").exists()


@pytest.mark.parametrize("source", ["", "|||", "Wir \udcff"])
def test_conditional_mdlm_refuses_a_source_that_names_no_text(tmp_path, source):
    import copy
    from dataclasses import asdict

    from baselines import mdlm
    from baselines.mdlm_model import MDLM, MDLMModelConfig

    cfg = MDLMModelConfig(vocab_size=40, mask_id=39, hidden=16, depth=1, heads=2, max_seq_len=16)
    net = MDLM(cfg)
    train = {"encoder": "minilm", "max_length": 16, "max_input_length": 8}
    meta = {"kind": "mdlm", "train": train, "model": asdict(cfg), "hold_first": None}
    checkpoint.save(str(tmp_path / "m"), net, copy.deepcopy(net), None, 0, meta)
    with pytest.raises(ValueError, match="names no text|is not UTF-8"):
        mdlm.main(["--ckpt", str(tmp_path / "m"), f"--source={source}", f"--out_dir={tmp_path}/o"])


def test_pairs_whose_sources_are_all_empty_are_refused(tmp_path):
    from baselines import ar_cond

    data = tmp_path / "empty_sources.jsonl"
    row = json.dumps({"source": "", "target": "a cat"}) + "\n"
    data.write_text(row * 40)
    args = ar_args(tmp_path, tmp_path / "run", "--max_steps=1")
    args[1] = f"--dataset={data}"
    with pytest.raises(ValueError, match="every training source is empty"):
        ar_cond.main(args)


def forget_in_manifest(step_folder, name):
    """Drop a file from its step folder's manifest: the file's damage, not a mismatch, is read."""
    path = os.path.join(step_folder, "manifest.json")
    manifest = json.loads(open(path).read())
    del manifest["files"][name]
    open(path, "w").write(json.dumps(manifest))


def test_ar_cond_damaged_resume_files_are_one_line(ar_run, tmp_path):
    import shutil

    from baselines import ar_cond

    run = tmp_path / "run"
    shutil.copytree(ar_run / "a", run, symlinks=True)
    ckpt = ar_cond.ckpt_folder(str(run))
    resume = ar_args(ar_run, run, "--max_steps=4", "--init_from=resume")
    optim = os.path.join(ckpt, "optim.pt")
    with open(optim, "r+b") as f:
        f.truncate(100)
    mismatch = "that verifies .step-00000002: optim.pt does not match its manifest."
    with pytest.raises(FileNotFoundError, match="no conditional GPT-2 checkpoint at .*" + mismatch):
        ar_cond.main(resume)
    forget_in_manifest(ckpt, "optim.pt")
    with pytest.raises(ValueError, match="optim.pt is not a readable torch file"):
        ar_cond.main(resume)
    with open(os.path.join(ckpt, "train.json"), "w") as f:
        f.write("{not json")
    forget_in_manifest(ckpt, "train.json")
    with pytest.raises(ValueError, match="train.json is not a conditional GPT-2 checkpoint's"):
        ar_cond.main(resume)


def as_older_layout(run, layout):
    """Turn a 2-step run saved in step folders into the layout saved before them: a plain ckpt/
    folder, a `ckpt` link to ckpt-00000002/, or ckpt-00000002/ alone (its link lost)."""
    step = run / "step-00000002"
    os.remove(step / "manifest.json")
    os.rename(step, run / ("ckpt" if layout == "folder" else "ckpt-00000002"))
    if layout == "link":
        os.symlink("ckpt-00000002", run / "ckpt")
    for f in ("latest", "config.json"):
        os.remove(run / f)
    (run / ".tmp-ckpt-00000004-123").mkdir()  # what a killed save of that layout left
    assert not [p for p in os.listdir(run) if "step" in p]


@pytest.mark.parametrize("layout", ["folder", "link", "numbered"])
def test_an_ar_cond_run_of_the_older_layout_loads_resumes_and_is_overwritten(
    ar_run, tmp_path, layout
):
    """A run saved before step folders (ckpt/ with train.json) loads, is scored, resumes into
    step folders (which replace the older layout) and is deleted by --overwrite."""
    import shutil

    import torch

    from baselines import ar_cond

    run = tmp_path / "run"
    shutil.copytree(ar_run / "a", run, symlinks=True)
    as_older_layout(run, layout)
    want = ar_cond.load(str(ar_run / "a"))[0].state_dict()
    got, meta = ar_cond.load(str(run))
    assert meta["step"] == 2 and all(torch.equal(want[k], got.state_dict()[k]) for k in want)
    assert ar_cond.kept(str(run)).startswith(f"the last checkpoint, {run}/ckpt")
    with pytest.raises(ValueError, match="already holds a run"):
        ar_cond.main(ar_args(ar_run, run, "--max_steps=3"))
    ar_cond.main(ar_args(ar_run, run, "--max_steps=3", "--init_from=resume"))
    assert ar_cond.read_meta(str(run))["step"] == 3
    assert not [p for p in os.listdir(run) if "ckpt" in p]  # replaced by the step folders
    assert sorted(p for p in os.listdir(run) if p.startswith("step-")) == ["step-00000003"]
    # --overwrite of an older-layout run deletes its checkpoint folders
    shutil.rmtree(run)
    shutil.copytree(ar_run / "a", run, symlinks=True)
    as_older_layout(run, layout)
    ar_cond.main(ar_args(ar_run, run, "--max_steps=1", "--overwrite"))
    assert not [p for p in os.listdir(run) if "ckpt" in p]
    assert ar_cond.read_meta(str(run))["step"] == 1


def test_an_ar_cond_run_is_read_by_what_it_holds(ar_run, tmp_path):
    """Its step folders under its gpt2_cond marker are its own; ELF's readers name it and its
    reader; a marker that contradicts the step folders' files is refused, either way."""
    import shutil

    from baselines import ar_cond
    from lib import guard
    from tests.test_guards import tiny_elf_checkpoint

    run = str(ar_run / "a")
    assert guard.kind_of(run) == "gpt2_cond" and os.path.isfile(os.path.join(run, "latest"))
    named = (
        "(it holds a conditional GPT-2 (the conditional AR baseline): python -m baselines.ar_cond"
    )
    assert guard.what_is(run).startswith(" " + named)
    with pytest.raises(FileNotFoundError, match=f"no checkpoint at {run} " + re.escape(named)):
        checkpoint.load(run)
    elf = tiny_elf_checkpoint(tmp_path / "elf")
    with pytest.raises(
        FileNotFoundError, match="no conditional GPT-2 checkpoint at .*: it holds an ELF"
    ):
        ar_cond.load(elf)
    (tmp_path / "elf" / ".kind").write_text("gpt2_cond\n")  # an ELF run under ar_cond's marker
    with pytest.raises(ValueError, match="but it holds an ELF or MDLM run's checkpoints"):
        guard.kind_of(elf)
    mislabelled = tmp_path / "ar"
    shutil.copytree(run, mislabelled, symlinks=True)
    (mislabelled / ".kind").write_text("elf\n")
    with pytest.raises(ValueError, match="but it holds a conditional GPT-2 run's checkpoints"):
        guard.kind_of(str(mislabelled))
    (mislabelled / ".kind").unlink()  # its marker lost: still read by its step folders
    assert guard.kind_of(str(mislabelled)) == "gpt2_cond"


# ----------------------------------------------------------------------------------------
# the kept tables of results/


def kept_tables():
    """(question, table.py's arguments) for every kept table of results/: a question's own
    table.json, or one per named subfolder (compare's settings, cond_compare's tasks)."""
    from tests.conftest import ROOT

    out = []
    for q in sorted(os.listdir(os.path.join(ROOT, "results"))):
        here = os.path.join(ROOT, "results", q)
        if not os.path.isfile(os.path.join(here, "table.py")):
            continue
        if os.path.isfile(os.path.join(here, "table.json")):
            out.append((q, []))
        for sub in sorted(os.listdir(here)):
            if os.path.isfile(os.path.join(here, sub, "table.json")) and sub != "curve":
                out.append((q, [sub]))  # compare's curve/ is curve.py's
    return out


@pytest.mark.parametrize("question,args", kept_tables())
def test_every_kept_table_rebuilds_byte_for_byte(question, args, tmp_path):
    """What results/README.md promises: table.py renders each table.md from its kept table.json
    alone, byte for byte (rendered in a copy: results/ is never written by the tests)."""
    import shutil
    import subprocess
    import sys

    from tests.conftest import ROOT

    here = os.path.join(ROOT, "results", question)
    copy = tmp_path / question
    shutil.copytree(here, copy, ignore=shutil.ignore_patterns("*.png"))
    md = os.path.join(*args, "table.md")
    (copy / md).unlink()
    r = subprocess.run(
        [sys.executable, str(copy / "table.py"), *args],
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert (copy / md).read_bytes() == open(os.path.join(here, md), "rb").read()


@pytest.mark.parametrize("question", ["recipe", "first_run", "compare", "cond_overfit"])
def test_a_wrong_collect_keeps_the_table(question, tmp_path):
    """--collect of a folder that is missing, holds no runs, or holds a report collect cannot
    read: one line, a non-zero exit, table.json and table.md as they were."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    here = os.path.join(ROOT, "results", question, *(["desc"] if question == "compare" else []))
    kept = {f: open(os.path.join(here, f), "rb").read() for f in ("table.json", "table.md")}
    garbage = tmp_path / "garbage"
    (garbage / "run").mkdir(parents=True)
    (garbage / "run" / "report.json").write_text("[1, 2]")
    (tmp_path / "empty").mkdir()
    name = ["desc"] if question == "compare" else []
    for runs in (tmp_path / "missing", tmp_path / "empty", garbage):
        r = subprocess.run(
            [sys.executable, f"results/{question}/table.py", *name, "--collect", str(runs)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        assert "table.json is kept" in lines[0]
        assert {f: open(os.path.join(here, f), "rb").read() for f in kept} == kept
    r = subprocess.run(
        [sys.executable, "results/compare/table.py", "nosuch"], cwd=ROOT, capture_output=True
    )
    assert r.returncode == 1 and b"table.json is missing" in r.stderr
    assert not os.path.exists(os.path.join(ROOT, "results", "compare", "nosuch"))


# ----------------------------------------------------------------------------------------
# a folder's .kind marker, checked


@pytest.mark.parametrize("marker", ["empty", "folder", "garbage", "other kind", "ar_cond"])
def test_a_marker_that_does_not_say_what_the_folder_holds_is_refused(tmp_path, marker):
    """An empty, unreadable, unknown or contradicted .kind is never read as "holds nothing":
    --overwrite of another kind would delete the run it marks."""
    import shutil

    from lib import guard
    from tests.test_guards import tiny_elf_checkpoint

    run = tmp_path / "run"
    tiny_elf_checkpoint(run)
    if marker == "folder":
        (run / ".kind").mkdir()
    else:
        text = {
            "empty": "",
            "garbage": "\xff\xfe",
            "other kind": "samples\n",
            "ar_cond": "gpt2_cond\n",
        }[marker]
        (run / ".kind").write_bytes(text.encode("latin-1"))
    before = sorted(os.listdir(run))
    for kind in ("samples", "eval", "mdlm"):
        with pytest.raises(ValueError, match=r"\.kind (does not name|says)") as e:
            with guard.Writer(str(run), "out", kind):
                shutil.rmtree(run / "step-00000000")  # what a writer of that kind might do
        assert "\n" not in str(e.value)
    assert sorted(os.listdir(run)) == before
    assert not [p for p in os.listdir(run) if ".tmp" in p]


def test_a_judge_killed_before_its_tokenizer_reads_as_a_judge(tmp_path):
    from lib import guard

    (tmp_path / "model.safetensors").write_bytes(b"x")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    assert guard.kind_of(str(tmp_path)) == "gpt2"


def test_a_report_whose_evaluation_is_not_a_record_is_kept(tmp_path):
    import types

    from lib.report import keep_other_reports

    (tmp_path / "report.json").write_text(json.dumps({"evaluation": 5}))
    cfg = types.SimpleNamespace(
        out_dir=str(tmp_path), overwrite=False, ckpt="", distill="", samples=""
    )
    with pytest.raises(ValueError, match="'evaluation' is not this repository's"):
        keep_other_reports(cfg)


def test_mdlm_refuses_more_samples_than_memory_holds():
    from baselines import mdlm

    with pytest.raises(ValueError, match="n_samples must be at most 10,000,000"):
        mdlm.parse_config(["configs/mdlm_tiny.py", "--n_samples=1000000000000"])
