"""Conditional generation in one place (METHOD.md, "Conditional generation"): where the
condition is laid out, dropped, masked and held clean.

A conditional row is `[source + EOS ; target + EOS]` padded with EOS: the source is the
condition, the target what the model learns to generate. Its path through the code:

1. laid out: `Rows` (token rows, `cond_len` each source's length), `arrange` (id lists ->
   Rows) and `layout` (texts or ids); `lib.pairs.PairRows` reads each batch through `arrange`.
2. dropped: `label_drop` draws the rows that train without their source, so that sampling
   can use classifier-free guidance (train.py, from the step's noise seed).
3. masked: `batch_masks` builds a batch's masks once (`Masks`): the condition's positions,
   the loss mask (never the condition) and, from them, the encoder's attention mask
   (`Masks.attention`: the source attends only the source, the target every valid token,
   only the target when dropped). `encoder.Latents.batch` encodes under them (a dropped
   row again, as the latent cache holds it undropped), zeroes a dropped source's latents
   (`Masks.dropped`) and hands the masks on to `flow.elf_loss`.
4. held clean: `flow.hold` puts the source's clean latents back into the denoise rows'
   inputs in the loss (flow.py imports no project file, so it lives there) and after every
   sampler step (`sample.Denoiser`, whose CFG pass zeroes the source as label drop does).

Unconditional rows take the same `batch_masks` (padding is never a key), with `cond` None.

    rows = layout([("Wir haben zwei Kinder.", "We have two children.")], encoder, 40, 24)
    m = batch_masks(rows, "cpu", drop=label_drop(len(rows), 0.1, seed=0))
    h = encoder.encode(rows.ids, m.attention())      # (B, L, D): the source blind to the target
"""

import hashlib
import typing
from dataclasses import dataclass

import numpy as np
import torch

# ----------------------------------------------------------------------------------------
# 1. the layout


@dataclass
class Rows:
    """Fixed-length token rows and what the encoder and the loss need to know about them: the
    one row type of the project (lib/store.py reads batches of a data set into it)."""

    ids: torch.Tensor  # (N, L) token ids
    length: torch.Tensor  # (N,) valid positions: the text and its EOS
    # (N,) the condition prefix (conditional generation), or None
    cond_len: typing.Optional[torch.Tensor] = None
    # padding is EOS the model learns to emit (pad_token='eos', conditional rows)
    pad_in_loss: bool = False

    def __len__(self):
        return len(self.ids)

    @property
    def max_length(self) -> int:
        return self.ids.shape[1]

    def select(self, idx) -> "Rows":
        """The rows idx (a slice, an index array or a bool mask) as Rows."""
        return Rows(
            self.ids[idx],
            self.length[idx],
            None if self.cond_len is None else self.cond_len[idx],
            self.pad_in_loss,
        )

    def fingerprint(self) -> str:
        """A hash of the ids, the valid lengths and the condition lengths (the latent cache's
        key)."""
        h = hashlib.sha256(self.ids.numpy().astype(np.int64).tobytes())
        h.update(b"length" + self.length.numpy().astype(np.int64).tobytes())
        if self.cond_len is not None:
            h.update(b"cond" + self.cond_len.numpy().astype(np.int64).tobytes())
        return h.hexdigest()


def arrange(sources, targets, eos: int, max_length: int, max_input_length: int) -> Rows:
    """Id lists -> Rows of `[source + EOS ; target + EOS]`, padded with EOS (in the loss: the
    model learns where the target ends). The source is cut to max_input_length tokens (its
    EOS kept), the target to what is left (0 < max_input_length < max_length: the one check is
    config.parse_train's, and sample.py's for a --length of its own)."""
    end = lambda x: x if x and x[-1] == eos else x + [eos]
    ids = np.full((len(sources), max_length), eos, dtype=np.int64)
    cond_len = np.zeros(len(sources), dtype=np.int64)
    length = np.zeros(len(sources), dtype=np.int64)
    for i, (source, target) in enumerate(zip(sources, targets)):
        source, target = list(source), list(target)
        if source and source[-1] == eos:  # its own EOS, put back after the cut
            source = source[:-1]
        source = end(source[: max_input_length - 1])
        row = (source + end(target))[:max_length]
        ids[i, : len(row)], cond_len[i], length[i] = row, len(source), len(row)
    return Rows(
        torch.from_numpy(ids),
        torch.from_numpy(length),
        torch.from_numpy(cond_len),
        pad_in_loss=True,
    )


def tokenize_pairs(xs, encoder, source: bool):
    """Texts -> ids (sources with the encoder's own framing, [CLS] ... [SEP] for BERT and
    ... </s> for T5: a BERT-style encoder gives a degenerate latent to a word at position 0
    without its [CLS]); id lists are kept as they are."""
    texts = [x for x in xs if isinstance(x, str)]
    done = iter(encoder.tokenizer(texts, add_special_tokens=source)["input_ids"] if texts else [])
    return [next(done) if isinstance(x, str) else list(x) for x in xs]


def layout(pairs, encoder, max_length: int, max_input_length: int) -> Rows:
    """(source, target) pairs, texts or id lists -> Rows (see arrange)."""
    sources = tokenize_pairs([source for source, _ in pairs], encoder, True)
    targets = tokenize_pairs([target for _, target in pairs], encoder, False)
    return arrange(sources, targets, encoder.eos_id, max_length, max_input_length)


# ----------------------------------------------------------------------------------------
# 2. the label drop


def label_drop(n: int, prob: float, seed: int) -> torch.Tensor:
    """(n,) bool, the rows trained without their source (for CFG): drawn on the CPU from
    `seed` (train.py: the step's noise seed), so a resumed run drops the same rows."""
    return torch.rand(n, generator=torch.Generator().manual_seed(seed)) < prob


# ----------------------------------------------------------------------------------------
# 3. the masks of a batch, built once


@dataclass
class Masks:
    """The masks of one batch of rows: (B, L) bool each unless said otherwise."""

    valid: torch.Tensor  # the text and its EOS; what follows is padding
    loss: torch.Tensor  # the tokens in the loss; never the condition
    cond: typing.Optional[torch.Tensor] = None  # the condition's positions (None: unconditional)
    drop: typing.Optional[torch.Tensor] = None  # (B,) rows trained without it (label drop)

    def attention(self):
        """The encoder's mask, (B, L, L) bool, True where a query may attend a key; None when
        every row is full and unconditional (nothing to mask). Padding is never a key;
        padding queries attend the valid keys, so their latents are defined (with EOS padding:
        what the model learns to emit after a text). The condition attends only the
        condition, so its latents never depend on the target; the target attends every
        valid token, only the target in a dropped row."""
        B, L = self.valid.shape
        if self.cond is None and bool(self.valid.all()):
            return None
        keys = self.valid[:, None, :].expand(B, L, L)
        if self.cond is None:
            return keys.clone()
        q_cond, k_cond = self.cond[:, :, None], self.cond[:, None, :]
        allowed = torch.where(q_cond, k_cond, torch.ones_like(keys))  # cond -> cond only
        if self.drop is not None:  # dropped: target -/-> cond
            allowed = allowed & ~(self.drop[:, None, None] & ~q_cond & k_cond)
        return allowed & keys

    def weights(self, pad_weight: float = 1.0):
        """(B, L) float, each position's weight in the loss: 1 on the loss tokens, pad_weight on
        the padding after a text's EOS (in the loss only with EOS padding), 0 elsewhere. 1 is
        the release's (padding counts as text); below 1 the text carries more of the loss
        (train.py, the `pad_weight` key). The text's own EOS, its length, keeps weight 1."""
        w = self.loss.float()
        return w if pad_weight == 1 else torch.where(self.loss & ~self.valid, pad_weight, w)

    @property
    def dropped(self):
        """The positions whose latents are zeroed: the condition of the dropped rows (or None)."""
        return None if self.drop is None else self.cond & self.drop[:, None]


def batch_masks(rows: Rows, device=None, drop=None) -> Masks:
    """The Masks of `rows` on `device`. The loss takes the valid tokens, or every token when
    the padding is EOS the model learns to emit (`rows.pad_in_loss`: conditional rows), less
    the condition. drop: (B,) bool, the label-dropped rows (ignored for unconditional rows)."""
    pos = torch.arange(rows.ids.shape[1], device=device)[None, :]
    valid = pos < rows.length.to(device)[:, None]
    loss = torch.ones_like(valid) if rows.pad_in_loss else valid
    if rows.cond_len is None:
        return Masks(valid, loss)
    cond = pos < rows.cond_len.to(device)[:, None]
    return Masks(valid, loss & ~cond, cond, None if drop is None else drop.to(device))
