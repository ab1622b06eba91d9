"""data.py: the bundled Wikipedia split, local files, saved and hub-style folders, packing."""

import json

import pytest
import torch

from data import load_documents, load_token_rows, pack, pad, wiki_records
from train import parse_config


def test_wiki_split_is_fixed_and_disjoint():
    recs = wiki_records()
    assert len(recs) > 9500
    val = [r for r in recs if r[3]]
    assert 300 < len(val) < 800                                    # 1 title in 20
    assert recs == wiki_records()                                  # same split every time
    train, held = load_documents("wiki")
    assert len(train) + len(held) == len(recs) and len(held) == len(val)
    assert not set(train["text"]) & set(held["text"])


def test_pack_and_pad():
    docs = [[5, 6, 7], [8], [9, 10, 11, 12]]
    assert pack(docs, 1, 4).tolist() == [[5, 6, 7, 1], [8, 1, 9, 10]]          # remainder dropped
    ids, length = pad(docs, 0, 1, 4)
    assert ids.tolist() == [[5, 6, 7, 1], [8, 1, 0, 0], [9, 10, 11, 12]] and length.tolist() == [4, 2, 4]


def test_local_text_and_json_files(tmp_path):
    txt = tmp_path / "a.txt"
    txt.write_text("\n".join(f"line number {i}" for i in range(40)) + "\n")
    train, val = load_documents(str(txt), val_size=5)
    assert len(train) == 36 and len(val) == 4                       # at most a tenth held out
    js = tmp_path / "a.json"
    js.write_text(json.dumps([{"body": f"doc {i}"} for i in range(30)]))
    train, val = load_documents(str(js), text_column="body", val_size=3)
    assert len(train) + len(val) == 30 and "body" in train.column_names


def test_saved_folder_and_hub_style_folder(tmp_path):
    import datasets
    saved = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": [f"doc {i}" for i in range(50)]}).save_to_disk(str(saved))
    train, val = load_documents(str(saved), val_size=5)
    assert len(train) == 45 and len(val) == 5
    # a folder of data files is what a hub data set is: it goes through load_dataset(name),
    # and its own validation split is used as is
    hub = tmp_path / "my-org" / "my-data"
    hub.mkdir(parents=True)
    (hub / "train.jsonl").write_text("".join(json.dumps({"text": f"train {i}"}) + "\n" for i in range(20)))
    (hub / "validation.jsonl").write_text("".join(json.dumps({"text": f"val {i}"}) + "\n" for i in range(3)))
    train, val = load_documents(str(hub))
    assert len(train) == 20 and val["text"] == ["val 0", "val 1", "val 2"]


def test_pretokenized_rows_are_used_as_is(tmp_path, minilm):
    import datasets
    rows = torch.randint(1000, 2000, (30, 8))
    datasets.Dataset.from_dict({"input_ids": rows.tolist()}).save_to_disk(str(tmp_path / "tok"))
    cfg = parse_config([f"--dataset={tmp_path / 'tok'}", "--max_length=8", "--val_size=3", "--encoder=minilm"])
    train, val = load_token_rows(cfg, minilm)
    assert len(train) == 27 and len(val) == 3 and (train.length == 8).all()
    assert {tuple(r) for r in torch.cat([train.ids, val.ids]).tolist()} == {tuple(r) for r in rows.tolist()}


def test_bad_data_gives_named_errors(tmp_path, minilm):
    with pytest.raises(FileNotFoundError, match="data path not found: ./nope.jsonl"):
        load_documents("./nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        load_documents(str(empty))
    js = tmp_path / "x.jsonl"
    js.write_text(json.dumps({"body": "hi"}) + "\n")
    with pytest.raises(ValueError, match="no 'text' or 'input_ids' column"):
        load_documents(str(js))
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"text": "hi"}) + "\n")
    cfg = parse_config([f"--dataset={short}", "--max_length=64", "--encoder=minilm"])
    with pytest.raises(ValueError, match="no training row of max_length 64"):
        load_token_rows(cfg, minilm)
    cfg = parse_config([f"--dataset={short}", "--max_length=600", "--max_seq_len=600", "--encoder=minilm"])
    with pytest.raises(ValueError, match="exceeds encoder"):
        load_token_rows(cfg, minilm)
