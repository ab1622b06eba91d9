"""lib/shards.py in one process: chunks written whole and never redone, a run stopped at any
chunk resumed to the same bytes, a finished run kept once (samples.jsonl, the settings in
run.json, no chunks), another run's folder refused, a damaged chunk named. (The same
with torchrun's ranks and SIGKILL: tests/test_sample.py; Gen. PPL over ranks: test_evaluate.py.)"""

import json

import pytest

from lib import shards

PROV = {"git_commit": "abc", "git_dirty": False, "ckpt_sha256": "0" * 64}


def drawer(calls, stop_at=None):
    """A stand-in for sample.generate: record i is a function of i alone; raises at chunk
    `stop_at`."""

    def draw(indices):
        if stop_at is not None and indices[0] == stop_at:
            raise KeyboardInterrupt  # a run stopped before this chunk was written
        calls.append(indices)
        return [{"index": i, "text": f"sample {i}", "seed": 0} for i in indices]

    return draw


def test_a_stopped_run_resumes_to_the_same_bytes_drawing_only_the_missing_chunks(tmp_path, capsys):
    settings = {"seed": 0, "steps": 4}
    calls = []
    # 4 chunks, the last of 2
    whole = shards.run(str(tmp_path / "a"), settings, PROV, 11, 3, drawer(calls))
    assert calls == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10]]
    assert [r["index"] for r in whole] == list(range(11))
    assert not (tmp_path / "a" / "chunks").exists()  # a finished run: kept once
    # run again: nothing drawn
    assert shards.run(str(tmp_path / "a"), settings, PROV, 11, 3, drawer(calls)) == whole
    assert len(calls) == 4
    calls = []
    with pytest.raises(KeyboardInterrupt):
        shards.run(str(tmp_path / "b"), settings, PROV, 11, 3, drawer(calls, stop_at=6))
    # a writer killed mid-write
    (tmp_path / "b" / "chunks" / "000002.jsonl.tmp123").write_text("half a chu")
    assert not (tmp_path / "b" / "samples.jsonl").exists()
    calls = []
    again = shards.run(str(tmp_path / "b"), settings, PROV, 11, 3, drawer(calls))
    assert calls == [[6, 7, 8], [9, 10]] and again == whole  # the first two kept
    assert (tmp_path / "b" / "samples.jsonl").read_bytes() == (
        tmp_path / "a" / "samples.jsonl"
    ).read_bytes()
    assert not (tmp_path / "b" / "chunks").exists()
    line = json.loads((tmp_path / "a" / "samples.jsonl").read_text().splitlines()[0])
    assert line == {"index": 0, "text": "sample 0", "seed": 0}  # the sample alone
    assert json.loads((tmp_path / "a" / "run.json").read_text())["settings"] == {
        **settings,
        "n": 11,
        "chunk": 3,
    }
    runs = json.loads((tmp_path / "b" / "run.json").read_text())["runs"]
    assert [(r["drawn"], r["resumed"]) for r in runs] == [(5, 6)]
    assert "drew 5 on 1 rank(s)" in capsys.readouterr().out


def test_another_run_a_file_or_a_damaged_chunk_is_refused(tmp_path):
    out = str(tmp_path / "a")
    shards.run(out, {"seed": 0}, PROV, 4, 2, drawer([]))
    before = {p: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    with pytest.raises(
        ValueError, match=r"holds another run: seed 0 there, 1 here \(use another folder"
    ):
        shards.run(out, {"seed": 1}, PROV, 4, 2, drawer([]))
    with pytest.raises(ValueError, match="holds another run: chunk 2 there, 4 here"):
        shards.run(out, {"seed": 0}, PROV, 4, 4, drawer([]))
    with pytest.raises(
        ValueError, match="other checkpoint weights .sha256 000000000000 there, 111111111111 here"
    ):
        shards.run(out, {"seed": 0}, {**PROV, "ckpt_sha256": "1" * 64}, 4, 2, drawer([]))
    assert {p: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()} == before
    with pytest.raises(KeyboardInterrupt):  # an unfinished run
        shards.run(str(tmp_path / "u"), {"seed": 0}, PROV, 6, 2, drawer([], stop_at=4))
    (tmp_path / "u" / "chunks" / "000001.jsonl").write_text('{"index": 7}\n')
    with pytest.raises(
        ValueError, match="000001.jsonl does not hold samples 2-3: delete it and rerun"
    ):
        shards.run(str(tmp_path / "u"), {"seed": 0}, PROV, 6, 2, drawer([]))
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        shards.run(str(tmp_path / "f"), {"seed": 0}, PROV, 4, 2, drawer([]))
