"""data.py and store.py: the bundled Wikipedia split, local files, saved and hub-style folders,
rows from the token store equal to packing and padding in memory, an interrupted build, a
damaged store named and rebuilt."""

import json
import os

import numpy as np
import pytest
import torch

from conditional import Rows
from lib import store
from lib.config import parse_train
from lib.data import batch_indices, load_documents, load_token_rows, noise_seed, wiki_records
from lib.store import train_vocab


def test_wiki_split_is_fixed_and_disjoint():
    recs = wiki_records()
    assert len(recs) > 9500
    val = [r for r in recs if r.held_out]
    assert 300 < len(val) < 800  # 1 title in 20
    assert recs == wiki_records()  # same split every time
    train, held = load_documents("wiki")
    assert len(train) + len(held) == len(recs) and len(held) == len(val)
    assert not set(train["text"]) & set(held["text"])


def test_noise_seed_is_the_formula_checkpoints_were_trained_with():
    """Pinned: a run resumed across code versions must draw the noise it drew before."""
    assert noise_seed(3, 7) == noise_seed(3, 7, shard=0) == 3 * 1_000_003 + 7
    assert noise_seed(3, 7, shard=2) == 3 * 1_000_003 + 7 + (2 << 32)
    seeds = {noise_seed(0, step, shard) for step in range(100) for shard in range(8)}
    assert len(seeds) == 800  # no two forwards share noise


def pack(docs, eos, L):
    """The in-memory packing the store replaces: documents + EOS, concatenated, cut into rows."""
    flat = [i for d in docs for i in list(d) + [eos]]
    return torch.tensor(flat[: len(flat) // L * L]).view(-1, L)


def pad(docs, pad_id, eos, L):
    rows = [(list(d) + [eos])[:L] for d in docs]
    return (
        torch.tensor([r + [pad_id] * (L - len(r)) for r in rows]),
        torch.tensor([len(r) for r in rows]),
    )


@pytest.mark.parametrize("packing,pad_token", [(True, "pad"), (False, "pad"), (False, "eos")])
def test_store_rows_equal_packing_and_padding_in_memory(minilm, tmp_path, packing, pad_token):
    """The bundled paragraphs through the token store give exactly the rows that tokenizing and
    packing (or padding) in memory gives, EOS after every document, in the same batch order."""
    cfg = parse_train(
        [
            "--dataset=wiki",
            "--encoder=minilm",
            "--max_length=32",
            f"--packing={packing}",
            f"--pad_token={pad_token}",
            f"--cache_dir={tmp_path}",
        ]
    )
    train, _ = load_token_rows(cfg, minilm)
    docs = minilm.tokenize(load_documents("wiki")[0]["text"])
    eos = minilm.eos_id
    if packing:
        want, length = pack(docs, eos, 32), torch.full((len(pack(docs, eos, 32)),), 32)
    else:
        want, length = pad(docs, eos if pad_token == "eos" else minilm.pad_id, eos, 32)
    assert len(train) == len(want)
    for step in (0, 7):  # two batches in training order
        idx = batch_indices(step, 64, len(train), seed=0)
        got = train.select(idx)
        assert torch.equal(got.ids, want[idx]) and torch.equal(got.length, length[idx])
        assert got.pad_in_loss == (pad_token == "eos")
    s = train.store
    ends = s.offsets[1:] - 1  # every document ends with its EOS
    assert (s.tokens[ends] == eos).all() and s.tokens.dtype == np.uint16
    meta = json.loads((tmp_path / os.path.basename(s.path) / "meta.json").read_text())
    assert meta["n_docs"] == len(docs) and meta["n_tokens"] == sum(len(d) + 1 for d in docs)


def test_an_interrupted_build_is_never_read(minilm, tmp_path, monkeypatch):
    cfg = parse_train(
        [
            "--dataset=wiki_descriptions",
            "--encoder=minilm",
            "--max_length=16",
            f"--cache_dir={tmp_path}",
        ]
    )
    real_save = np.save
    monkeypatch.setattr(
        store.np, "save", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt("crash"))
    )
    with pytest.raises(KeyboardInterrupt):
        load_token_rows(cfg, minilm)
    assert not [p for p in tmp_path.iterdir() if ".tmp" not in p.name]  # only the temporary folder
    monkeypatch.setattr(store.np, "save", real_save)
    train, val = load_token_rows(cfg, minilm)  # built afresh, whole
    assert len(train) > 4000 and all(
        p.name.startswith("tokens-") and ".tmp" not in p.name for p in tmp_path.iterdir()
    )


def test_local_text_and_json_files(tmp_path):
    txt = tmp_path / "a.txt"
    txt.write_text("\n".join(f"line number {i}" for i in range(40)) + "\n")
    train, val = load_documents(str(txt), val_size=5)
    assert len(train) == 36 and len(val) == 4  # at most a tenth held out
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
    (hub / "train.jsonl").write_text(
        "".join(json.dumps({"text": f"train {i}"}) + "\n" for i in range(20))
    )
    (hub / "validation.jsonl").write_text(
        "".join(json.dumps({"text": f"val {i}"}) + "\n" for i in range(3))
    )
    train, val = load_documents(str(hub))
    assert len(train) == 20 and val["text"] == ["val 0", "val 1", "val 2"]


def test_pretokenized_rows_are_used_as_is(tmp_path, minilm):
    import datasets

    rows = torch.randint(1000, 2000, (30, 8))
    datasets.Dataset.from_dict({"input_ids": rows.tolist()}).save_to_disk(str(tmp_path / "tok"))
    cfg = parse_train(
        [f"--dataset={tmp_path / 'tok'}", "--max_length=8", "--val_size=3", "--encoder=minilm"]
    )
    train, val = load_token_rows(cfg, minilm)
    train, val = train.select(slice(None)), val.select(slice(None))
    assert len(train) == 27 and len(val) == 3 and (train.length == 8).all()
    assert {tuple(r) for r in torch.cat([train.ids, val.ids]).tolist()} == {
        tuple(r) for r in rows.tolist()
    }


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
    cfg = parse_train([f"--dataset={short}", "--max_length=64", "--encoder=minilm"])
    with pytest.raises(ValueError, match="no training row of max_length 64"):
        load_token_rows(cfg, minilm)
    cfg = parse_train(
        [f"--dataset={short}", "--max_length=600", "--max_seq_len=600", "--encoder=minilm"]
    )
    with pytest.raises(ValueError, match="exceeds encoder"):
        load_token_rows(cfg, minilm)


def test_reading_a_store_holds_a_batch_and_the_row_order_not_the_corpus(tmp_path):
    """Constant memory: opening a 4 MB store and reading batches from it allocates the epoch's
    row order (4 bytes a row) and a batch, never a copy of the tokens."""
    import tracemalloc

    import datasets

    ids = np.random.default_rng(0).integers(2, 1000, (20_000, 100))
    ds = datasets.Dataset.from_dict({"input_ids": ids.tolist()})
    built = store.TokenStore.build_or_open(
        str(tmp_path), ds, "input_ids", None, eos_id=1, vocab_size=1000, key={}
    )
    tracemalloc.start()
    rows = store.StoreRows(store.TokenStore(built.path), 64, packed=True)
    batches = [rows.select(batch_indices(step, 32, len(rows), 0)) for step in range(3)]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert built.tokens.nbytes == 2 * 20_000 * 101 and len(rows) == 20_000 * 101 // 64
    assert peak < built.tokens.nbytes / 8, f"{peak} bytes allocated to read 3 batches"
    first = batches[0].ids[0].numpy()  # and the rows are the store's tokens
    start = int(batch_indices(0, 32, len(rows), 0)[0]) * 64
    assert (first == np.asarray(built.tokens[start : start + 64])).all()


def test_a_damaged_token_store_is_named_and_rebuilt(tmp_path, capsys):
    """A truncated tokens.bin or a corrupted meta.json: opening names the file and the fix, and
    build_or_open rebuilds the store (a cache of the data) with a warning. Bytes damaged in
    place keep the sizes; an id outside the vocabulary stops the batch that reads it."""
    import datasets

    ds = datasets.Dataset.from_dict(
        {"input_ids": np.random.default_rng(0).integers(2, 1000, (200, 10)).tolist()}
    )
    build = lambda: store.TokenStore.build_or_open(
        str(tmp_path), ds, "input_ids", None, eos_id=1, vocab_size=1000, key={}
    )
    path = build().path
    good = np.array(store.TokenStore(path).tokens)
    tokens, meta = os.path.join(path, "tokens.bin"), os.path.join(path, "meta.json")
    for damage, why in (
        (
            lambda: open(tokens, "r+b").truncate(1000),
            "tokens.bin holds 1000 bytes, meta.json says 4400",
        ),
        (
            lambda: open(meta, "w").write('{"n_tokens": 22'),
            "meta.json is unreadable: JSONDecodeError",
        ),
    ):
        damage()
        with pytest.raises(
            ValueError,
            match=f"token store {path} is damaged \\({why}\\): delete the folder to rebuild it",
        ):
            store.TokenStore(path)
        capsys.readouterr()
        assert np.array_equal(build().tokens, good)
        assert (
            f"warning: token store {path} is damaged ({why}): rebuilding it"
            in capsys.readouterr().err
        )
    with open(tokens, "r+b") as f:  # two bytes overwritten: id 65535
        f.seek(20)
        f.write(b"\xff\xff")
    rows = store.StoreRows(store.TokenStore(path), 8, packed=True)
    with pytest.raises(
        ValueError,
        match=f"token store {path}: id 65535 is outside the "
        f"vocabulary \\(0..999\\), so tokens.bin is damaged",
    ):
        rows.select(np.arange(len(rows)))


def test_row_vocab_holds_every_id_of_the_rows_once_with_the_unknown_first():
    """token_vocab='train': the ids of all rows (padding too, across read chunks), the
    unknown token first whether or not the rows hold it, the rest ascending."""
    rows = Rows(torch.tensor([[5, 9, 2, 2], [9, 4, 100, 2], [7, 7, 7, 2]]), torch.tensor([3, 4, 3]))
    assert train_vocab(rows, first=100, chunk=2).tolist() == [100, 2, 4, 5, 7, 9]
    assert train_vocab(rows, first=1).tolist() == [1, 2, 4, 5, 7, 9, 100]
