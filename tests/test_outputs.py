"""outputs.py: one writer per folder (a second one refused while the first lives, a lock left by
a killed process taken over and reported, nothing left behind) and output paths checked first.

    python -m pytest -q tests/test_outputs.py
"""

import os
import re
import subprocess
import sys

import pytest

import train
from lib import outputs
from tests.conftest import ROOT
from tests.test_train import TINY

HOLD = (
    "import sys, time; from lib.outputs import RunLock; RunLock(sys.argv[1]).__enter__(); "
    "print('held', flush=True); time.sleep(300)"
)


def holder(folder):
    """A process that takes folder's lock and keeps it until it is killed."""
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert p.stdout.readline().strip() == "held"
    return p


def test_one_writer_per_folder_in_one_process(tmp_path):
    run = tmp_path / "new" / "run"
    with outputs.RunLock(str(run)):
        assert (run / ".lock").is_file()
        with pytest.raises(
            ValueError,
            match=f"{re.escape(str(run))} is in use by process {os.getpid()} on .*one writer",
        ):
            outputs.RunLock(str(run)).__enter__()
    assert not (tmp_path / "new").exists()  # the lock removed, and the folders it made while empty
    with outputs.RunLock(str(run)):
        (run / "work").write_text("kept")
    assert sorted(p.name for p in run.iterdir()) == ["work"]


def test_a_second_training_run_is_refused_and_a_killed_writers_lock_is_taken_over(
    tmp_path, jsonl_file, capsys
):
    """Another process writing the run folder: train.py refuses it in one line and touches
    nothing; once that process is killed (its lock file left behind), training takes the lock
    over, says so, and runs."""
    out = tmp_path / "run"
    args = [
        "configs/tiny.py",
        *TINY,
        f"--dataset={jsonl_file}",
        "--latent_cache=false",
        "--eval_interval=100",
        f"--out_dir={out}",
        "--max_steps=1",
    ]
    p = holder(out)
    try:
        with pytest.raises(
            ValueError, match=f"{re.escape(str(out))} is in use by process {p.pid} on .*: -c "
        ):
            train.main(args)
        assert sorted(f.name for f in out.iterdir()) == [".lock"]  # nothing of the refused run
    finally:
        p.kill()  # SIGKILL: no chance to remove the lock file
        p.wait()
    assert (out / ".lock").is_file()
    capsys.readouterr()
    train.main(args)
    printed = capsys.readouterr().out
    assert (
        f"was left by process {p.pid}" in printed
        and "which is no longer running: taken over" in printed
    )
    assert (out / "latest").is_file() and not (out / ".lock").exists()


def test_output_paths_are_checked_as_files_or_folders(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="out_dir .*/file is a file: give a folder"):
        outputs.check_folder(str(tmp_path / "file"), "out_dir")
    with pytest.raises(ValueError, match="out .* is a folder: give a file path"):
        outputs.check_file(str(tmp_path), "out")
    with pytest.raises(
        ValueError,
        match=r"out .*/file/x/s.jsonl is not writable "
        r"\(.*/file is a file, not a folder\)",
    ):
        outputs.check_file(str(tmp_path / "file" / "x" / "s.jsonl"), "out")
    outputs.check_folder(str(tmp_path / "a" / "b"), "out_dir")  # to be created: fine
    outputs.check_file(str(tmp_path / "a" / "s.jsonl"), "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # checking creates nothing
