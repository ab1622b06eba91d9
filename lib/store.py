"""The token store: a corpus tokenized once into one flat, memory-mapped file of ids, so that
training reads its rows batch by batch and a process's memory does not grow with the corpus.

    out/.../tokens-<hash>/
      tokens.bin     every document's ids one after another, each followed by EOS (uint16 when
                     the vocabulary fits, uint32 otherwise), memory-mapped read-only
      offsets.npy    where each document starts (n_docs + 1 entries), memory-mapped
      meta.json      tokenizer, source, settings, token and document counts, the key hash

The folder is built under a temporary name and renamed into place last, so a crashed build
is never read; its name is a hash of everything the ids depend on (the tokenizer, the data
set's fingerprint, the column, the framing), so a stale store is never read either. Under
torchrun rank 0 builds while the others wait (train.py), then every rank maps the same file:
the operating system's page cache holds one copy per machine.

Opening a store checks its files against meta.json (sizes, counts, the last offset), and
every batch's ids are checked against the vocabulary as they are read. The store is a cache
of the data, so `build_or_open` rebuilds a damaged one, with a warning that names it.

Rows are views: packed, row i is `tokens[i L : (i + 1) L]` (documents joined by their EOS,
the remainder dropped); unpacked, row j is document j cut or padded to L. `StoreRows.select`
reads the rows of one batch into memory as `Rows`; `train_vocab` lists the ids a set of rows
holds (the decoder's cut vocabulary, token_vocab='train').

    store = TokenStore.build_or_open(cache_dir, ds, "text", tokenize, eos_id, vocab_size, key)
    rows = StoreRows(store, max_length=1024, packed=True)
    batch = rows.select(idx)                  # Rows: ids (B, L), valid lengths
"""

import hashlib
import json
import os
import shutil
import sys

import numpy as np
import torch

from conditional import Rows

VERSION = 1


class TokenStore:
    """A built store, memory-mapped, its files checked against meta.json."""

    def __init__(self, path: str):
        why = damage(path)
        if why:
            raise ValueError(
                f"token store {path} is damaged ({why}): delete the folder to rebuild it"
            )
        with open(os.path.join(path, "meta.json")) as f:
            self.meta = json.load(f)
        self.path = path
        self.tokens = (
            np.memmap(
                os.path.join(path, "tokens.bin"),
                dtype=self.meta["dtype"],
                mode="r",
                shape=(self.meta["n_tokens"],),
            )
            if self.meta["n_tokens"]
            else np.zeros(0, "uint16")
        )
        self.offsets = np.load(os.path.join(path, "offsets.npy"), mmap_mode="r")  # (n_docs + 1,)
        # older stores: the key's
        self.vocab_size = self.meta.get("vocab_size") or self.meta.get("vocab")

    def __len__(self):
        return self.meta["n_docs"]

    def checked(self, ids):
        """ids read from tokens.bin, refused when one lies outside the vocabulary: bytes damaged
        in place keep the file's size, so each batch's ids are checked as they are read."""
        if self.vocab_size and len(ids) and int(ids.max()) >= self.vocab_size:
            raise ValueError(
                f"token store {self.path}: id {int(ids.max())} is outside the "
                f"vocabulary (0..{self.vocab_size - 1}), so tokens.bin is damaged: "
                f"delete the folder to rebuild it"
            )
        return ids

    @staticmethod
    def build_or_open(
        cache_dir,
        ds,
        column: str,
        tokenize,
        eos_id: int,
        vocab_size: int,
        key: dict,
        append_eos: bool = True,
        num_proc: int = 0,
        progress: bool = False,
    ):
        """The store of ds[column] tokenized by tokenize(list of str) -> lists of ids (or the
        column's ids as they are when tokenize is None), built once under cache_dir."""
        key = {
            "version": VERSION,
            "fingerprint": getattr(ds, "_fingerprint", None),
            "column": column,
            "append_eos": append_eos,
            "eos": eos_id,
            **key,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[
            :20
        ]
        path = os.path.join(os.path.expanduser(cache_dir), f"tokens-{digest}")
        why = damage(path) if os.path.exists(path) else ""
        if why:  # a cache of the data: rebuilding it loses nothing
            print(f"warning: token store {path} is damaged ({why}): rebuilding it", file=sys.stderr)
            aside = f"{path}.damaged{os.getpid()}"
            try:
                os.replace(path, aside)  # processes that mapped it keep their pages
            except FileNotFoundError:  # another process moved it first
                pass
            shutil.rmtree(aside, ignore_errors=True)
        if not os.path.exists(path):
            build(
                path,
                ds,
                column,
                tokenize,
                eos_id,
                vocab_size,
                dict(key, hash=digest),
                append_eos,
                num_proc,
                progress,
            )
        return TokenStore(path)


def damage(path: str) -> str:
    """'' when a store folder's files agree with its meta.json (sizes, counts, the last offset),
    else what is wrong with them."""
    try:
        with open(os.path.join(path, "meta.json")) as f:
            meta = json.load(f)
        n_tokens, n_docs, itemsize = (
            int(meta["n_tokens"]),
            int(meta["n_docs"]),
            np.dtype(meta["dtype"]).itemsize,
        )
    except FileNotFoundError:
        return "meta.json is missing"
    except (ValueError, KeyError, TypeError) as e:  # JSON- and UnicodeDecodeError are ValueErrors
        return f"meta.json is unreadable: {type(e).__name__}"
    tokens = os.path.join(path, "tokens.bin")
    size = os.path.getsize(tokens) if os.path.isfile(tokens) else None
    if size != n_tokens * itemsize:
        return f"tokens.bin holds {size} bytes, meta.json says {n_tokens * itemsize}"
    try:
        offsets = np.load(os.path.join(path, "offsets.npy"), mmap_mode="r")
    except (OSError, ValueError, EOFError) as e:
        return (
            f"offsets.npy is unreadable: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        )
    if offsets.shape != (n_docs + 1,) or offsets[0] != 0 or offsets[-1] != n_tokens:
        return f"offsets.npy does not match meta.json ({n_docs} documents, {n_tokens} tokens)"
    return ""


def build(path, ds, column, tokenize, eos_id, vocab_size, meta, append_eos, num_proc, progress):
    """Tokenize with `datasets` (batched, num_proc workers, its Arrow cache), then stream the
    ids into tokens.bin chunk by chunk; the folder appears whole by one rename."""
    import datasets

    dtype = np.uint16 if vocab_size <= 2**16 else np.uint32
    tmp = f"{path}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    if tokenize is not None:
        if not progress:
            datasets.disable_progress_bars()
        ds = ds.map(
            lambda b: {"ids": tokenize(b[column])},
            batched=True,
            remove_columns=ds.column_names,
            num_proc=num_proc or None,
            desc="tokenizing",
        )
        datasets.enable_progress_bars()
        column = "ids"
    arrow = ds.with_format("arrow")  # slices honour a shuffled split's indices
    offsets = np.zeros(len(ds) + 1, dtype=np.int64)
    n_tokens, done = 0, 0
    with open(os.path.join(tmp, "tokens.bin"), "wb") as f:
        for start in range(0, len(ds), 10_000):  # Arrow slices: no Python loop per document
            docs = arrow[start : start + 10_000][column].combine_chunks()  # ListArray of ids
            flat, bounds = docs.flatten().to_numpy(), docs.offsets.to_numpy()
            # pre-tokenized ids of another vocabulary
            if len(flat) and (flat.min() < 0 or flat.max() >= vocab_size):
                shutil.rmtree(tmp)
                raise ValueError(
                    f"token id "
                    f"{int(flat.max() if flat.max() >= vocab_size else flat.min())} "
                    f"in column '{column}' is outside the encoder's vocabulary "
                    f"(0..{vocab_size - 1})"
                )
            bounds = bounds - bounds[0]
            k = len(bounds) - 1
            if append_eos:  # each document's ids, then its EOS
                out = np.empty(len(flat) + k, dtype=dtype)
                out[np.arange(len(flat)) + np.repeat(np.arange(k), np.diff(bounds))] = flat
                out[bounds[1:] + np.arange(k)] = eos_id
                ends = bounds[1:] + np.arange(1, k + 1)
            else:
                out, ends = flat.astype(dtype), bounds[1:]
            f.write(out.tobytes())
            offsets[done + 1 : done + k + 1] = n_tokens + ends
            n_tokens, done = n_tokens + len(out), done + k
    np.save(os.path.join(tmp, "offsets.npy"), offsets)
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(
            dict(
                meta,
                dtype=np.dtype(dtype).name,
                n_tokens=int(n_tokens),
                n_docs=len(ds),
                vocab_size=vocab_size,
            ),
            f,
            indent=2,
            default=str,
        )
    try:
        os.replace(tmp, path)
    except OSError:  # built meanwhile by another process
        shutil.rmtree(tmp)
        if not os.path.isfile(os.path.join(path, "meta.json")):
            raise


class StoreRows:
    """Fixed-length rows of a TokenStore, read per batch: packed, or one document per row
    padded with pad_id (the padding in the loss when pad_in_loss)."""

    cond_len = None

    def __init__(
        self,
        store: TokenStore,
        max_length: int,
        packed: bool,
        pad_id: int = 0,
        pad_in_loss: bool = False,
    ):
        self.store, self.max_length, self.packed, self.pad_id, self.pad_in_loss = (
            store,
            max_length,
            packed,
            pad_id,
            pad_in_loss,
        )
        self.n = store.meta["n_tokens"] // max_length if packed else len(store)

    def __len__(self):
        return self.n

    def select(self, idx):
        """The rows idx (a slice or an index array) as Rows, in memory."""
        idx = np.arange(self.n)[idx] if isinstance(idx, slice) else np.asarray(idx, dtype=np.int64)
        L, tokens = self.max_length, self.store.tokens
        if self.packed:
            ids = self.store.checked(
                tokens[(idx * L)[:, None] + np.arange(L)[None, :]].astype(np.int64)
            )
            return Rows(torch.from_numpy(ids), torch.full((len(idx),), L, dtype=torch.long))
        ids = np.full((len(idx), L), self.pad_id, dtype=np.int64)
        length = np.zeros(len(idx), dtype=np.int64)
        for r, j in enumerate(idx):  # a batch's documents, cut to L
            doc = tokens[
                self.store.offsets[j] : min(self.store.offsets[j + 1], self.store.offsets[j] + L)
            ]
            ids[r, : len(doc)], length[r] = doc, len(doc)
        self.store.checked(ids.ravel())
        return Rows(torch.from_numpy(ids), torch.from_numpy(length), None, self.pad_in_loss)

    def fingerprint(self) -> str:
        """What the rows' ids depend on: the store and the view (for the latent cache's key)."""
        return json.dumps(
            [self.store.meta["hash"], self.max_length, self.packed, self.pad_id, self.pad_in_loss]
        )


def train_vocab(rows, first: int, chunk: int = 4096) -> torch.Tensor:
    """The token ids the rows hold (padding included): `first` (the tokenizer's unknown token)
    first, the rest ascending. The decoder's cut vocabulary (token_vocab='train'), whose
    entry 0 also stands for every id outside it. One pass over the rows: for small data sets."""
    seen = torch.cat(
        [rows.select(slice(i, i + chunk)).ids.unique() for i in range(0, len(rows), chunk)]
    ).unique()
    return torch.cat((torch.tensor([first]), seen[seen != first]))
