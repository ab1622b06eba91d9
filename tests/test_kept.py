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
