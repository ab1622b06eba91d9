"""Nothing lost (issue 56, round 5): what a command finds in its output folder and did not write
is kept; a kill inside a save keeps the last checkpoint; a kept table survives a wrong --collect;
a folder's .kind marker is checked against its files; bad input is one line, not a traceback."""

import json
import os

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


def test_ar_cond_killed_inside_a_save_resumes_to_the_uninterrupted_weights(tmp_path, monkeypatch):
    import torch

    from baselines import ar_cond

    ar_cond.main(ar_args(tmp_path, tmp_path / "a", "--max_steps=4"))
    real, saves = os.replace, []

    def killed_in_second_save(src, dst, *a, **k):  # the new folder written, then the kill
        if os.path.basename(src).startswith(".tmp-ckpt"):
            saves.append(src)
            if len(saves) == 2:
                raise KeyboardInterrupt
        return real(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", killed_in_second_save)
    with pytest.raises(KeyboardInterrupt):
        ar_cond.main(ar_args(tmp_path, tmp_path / "b", "--max_steps=4"))
    monkeypatch.undo()
    assert ar_cond.read_meta(str(tmp_path / "b"))["step"] == 2  # the first save is kept
    assert not [p for p in os.listdir(tmp_path / "b") if p.startswith(".tmp")]
    ar_cond.main(ar_args(tmp_path, tmp_path / "b", "--max_steps=4", "--init_from=resume"))
    a, b = (ar_cond.load(str(tmp_path / r))[0].state_dict() for r in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(p for p in os.listdir(tmp_path / "b") if p.startswith("ckpt")) == [
        "ckpt",
        "ckpt-00000004",
    ]


def test_a_judge_killed_inside_its_save_leaves_no_half_judge(tmp_path, monkeypatch, jsonl_file):
    from baselines import ar

    out = tmp_path / "judge"
    args = ["--data", jsonl_file, "--out", str(out), "--steps", "2", "--length", "8"]
    args += ["--n_layer", "1", "--n_embd", "16", "--n_head", "2", "--vocab", "300"]
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
