"""A masked diffusion baseline (MDLM, Sahoo et al. 2024): the discrete-diffusion family that
the paper compares ELF with (arXiv 2605.10938, Table 1 and Figure 1), on ELF's data, tokenizer,
rows and trunk, trained and sampled at equal compute.

    python mdlm.py configs/mdlm_tiny.py                        # the equal-compute baseline of configs/tiny.py
    python mdlm.py --ckpt out/mdlm_tiny --sample_steps 32,64   # sample a trained one again, no training
    python evaluate.py --samples out/mdlm_tiny/samples-16steps.jsonl --ckpt out/tiny --judge judges/desc
    python mdlm.py --help                                      # every key, its default and what it does

Absorbing-state diffusion with the log-linear schedule alpha_t = 1 - t (t = 0 data, t = 1 all
[MASK]; the opposite of flow.py's convention). The forward process replaces each token by the
tokenizer's [MASK] with probability t. The model x_theta(z_t) is a categorical over the
vocabulary at every position in the SUBS parameterisation: [MASK] has logit -inf (it is never
predicted) and unmasked positions are copied through, so only masked positions have a loss.
The continuous-time NELBO is then

    L = E_t [ 1/t * sum over masked positions of -log x_theta(z_t)[x] ]      (-alpha'_t / (1 - alpha_t) = 1/t)

averaged here over the batch's loss positions (EOS padding is in the loss, as in ELF's rows),
with low-discrepancy times t_i = (u + i/B) mod 1 over the batch (MDLM's antithetic sampling).

The network is ELF-tiny's trunk (model.py's Block: RoPE, QK-norm, SwiGLU, RMSNorm) over a
token embedding, then RMSNorm and a Linear(hidden -> V) head. It has no time input: with the
log-linear schedule the share of [MASK] in the input tells the network how noisy it is, and
MDLM found the time conditioning unnecessary. That also makes MDLM's sampling cache exact: the
output depends on the tokens alone, so a step that revealed nothing would give the same logits.

Sampling is ancestral on the uniform grid t_k = 1 - k/K: from t to s a masked position is
revealed with probability (t - s)/t = 1/(K - k) (reveal='prob', MDLM's sampler) or exactly
round(#masked / (K - k)) uniformly chosen ones are (reveal='count'; with K = L, one a step, in
a random order), each drawn from the model's categorical in float64; revealed tokens never
change; the last step reveals the rest. A row calls the network only when it changed since its
last call; NFE counts those real calls. One process, one device (no DDP): a small baseline.

The vocabulary. By default the embedding and the head span the tokenizer's V ids. With
token_vocab='train' (configs/mdlm_tiny.py, as configs/tiny.py's decoder_vocab='train') they
span only the ids the training rows hold, the unknown token first (its row also stands for any
other id) and [MASK] last: the head is most of a step's cost at V = 30522, and an id training
never shows would only be given a small probability anyway. The model works in its rows
(`rows_of` on the way in, `token_ids` on the way out); the ids travel in the state dict.

Position 0. ELF's default rows (framing, one description a row) all start with [CLS]. MDLM
holds it there (`hold_first`): never masked in training, so out of the loss, and given in
sampling. Sampling a token the data fixes would only waste a reveal; more, RoPE tells the
blocks how far apart two positions are but not where they are, and a fully masked row looks
the same everywhere, so the held [CLS] is what anchors the positions (overfitting two texts,
tests/test_mdlm.py: 16 of 16 samples right with it; in a trial without it, 2 of 16, shifted).
Packed rows, or a tokenizer that frames only the end (T5), have no common first token: then
nothing is held. With pad_token='pad' the padding is outside the loss and never masked in
training, but sampling fills every position; the text is cut at its first EOS either way.
"""

import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import checkpoint
from config import check_ranges, comma_list, parse, snapshot_minutes
from encoder import FrozenEncoder, resolve_encoder
from model import Block, RMSNorm, rope_table, vocab_rows
from optim import autocast, ema_decay, ema_update, flush_denormals, make_optimizer, scaled_lr, set_lr, warmup_lr


@dataclass
class MDLMConfig:
    """Train (or, with --ckpt, sample) the masked diffusion baseline. Defaults: configs/tiny.py's data and trunk."""
    # I/O
    out_dir: str = "out/mdlm_tiny"     # checkpoints, metrics.jsonl and samples-<K>steps.jsonl
    ckpt: str = ""                     # a trained MDLM checkpoint: sample it into out_dir, no training
    init_from: str = "scratch"         # 'scratch' (out_dir must hold no checkpoint) or 'resume' (from out_dir)
    overwrite: bool = False            # with init_from=scratch: delete the checkpoints already in out_dir
    allow_changes: str = ""            # resume: comma-separated keys that may differ from the saved run
    log_interval: int = 10             # steps between train-loss lines in metrics.jsonl
    eval_interval: int = 100           # steps between validation NELBOs (EMA weights, fixed noise)
    eval_batches: int = 4              # validation rows = eval_batches * batch_size
    ckpt_interval: int = 100
    keep_checkpoints: int = 2
    snapshot_minutes: str = ""         # e.g. '10,20,40': also save <out_dir>/at-<m>min at these training minutes
    n_samples: int = 64                # samples per seed and step count, written at the end (EMA weights)
    sample_seeds: str = "0,1,2"        # one set of n_samples per seed (evaluate.py: mean and s.e. over seeds)
    sample_steps: str = "4,8,16"       # K, a comma list: one samples-<K>steps.jsonl each
    reveal: str = "prob"               # 'prob': each masked position w.p. (t-s)/t (MDLM); 'count': round(#masked (t-s)/t) of them
    hold_first: bool = True            # hold position 0 at the rows' first token when every row starts with the same one ([CLS])
    sample_batch: int = 64             # rows sampled at once
    # data (data.py): the same rows as configs/tiny.py
    dataset: str = "wiki_descriptions"
    text_column: str = "text"
    val_size: int = 500
    max_length: int = 16
    packing: bool = False
    pad_token: str = "eos"             # 'eos': EOS padding in the loss (the model learns where a text ends)
    framing: bool = True               # [CLS] ... [SEP] around each document
    cache_dir: str = "~/.cache/elf-torch"
    encoder: str = "minilm"            # whose tokenizer (only the tokenizer is loaded)
    token_vocab: str = "full"          # 'full': the tokenizer's V; 'train': the rows' ids and [MASK]
    # network: ELF-tiny's trunk
    depth: int = 4
    hidden: int = 256
    heads: int = 4
    rope_theta: float = 10000.0
    # objective and optimisation (optim.py)
    t_min: float = 1e-3                # training times in [t_min, 1]: the 1/t weight stays finite
    optimizer: str = "adamw"           # 'adamw' or 'muon' (muon.py)
    muon_params: str = "all"
    batch_size: int = 128
    blr: float = 2e-3                  # lr = blr * batch_size / 256
    warmup_steps: int = 30
    lr_schedule: str = "constant"      # after warmup: 'constant' or 'cosine' (to lr/10 at max_steps)
    max_steps: int = 1_000_000
    time_limit_min: float = 10.0       # > 0: stop after this many minutes of training
    grad_clip: float = 1.0
    ema_decay: float = 0.999
    ema_warmup: bool = True            # decay_k = min(decay, (1 + k) / (10 + k))
    seed: int = 0
    device: str = "auto"               # 'auto', 'cpu', 'cuda', 'cuda:1', ...


# keys a resumed run may change: they do not touch what the next steps compute
FREE_ON_RESUME = {"out_dir", "ckpt", "init_from", "overwrite", "allow_changes", "log_interval", "eval_interval",
                  "eval_batches", "ckpt_interval", "keep_checkpoints", "snapshot_minutes", "n_samples",
                  "sample_seeds", "sample_steps", "reveal", "sample_batch", "max_steps", "time_limit_min",
                  "device", "cache_dir"}


# ----------------------------------------------------------------------------------------
# the network

@dataclass
class MDLMModelConfig:
    vocab_size: int = 30522            # V = len(tokenizer), [MASK] included
    mask_id: int = 103                 # the tokenizer's [MASK] (its row under a cut vocabulary)
    cut_vocab: int = 0                 # V' > 0: rows for V' of the V ids (`vocab_ids`)
    hidden: int = 256
    depth: int = 4
    heads: int = 4
    max_seq_len: int = 16              # length of the RoPE table
    rope_theta: float = 10000.0


class MDLM(nn.Module):
    """Token embedding -> ELF's blocks -> RMSNorm -> Linear(H -> V); [MASK]'s logit is -inf (SUBS)."""

    def __init__(self, cfg: MDLMModelConfig):
        super().__init__()
        self.cfg = cfg
        H = cfg.hidden
        if H % cfg.heads or (H // cfg.heads) % 2:
            raise ValueError(f"hidden {H} must split into {cfg.heads} heads of even size")
        V = cfg.cut_vocab or cfg.vocab_size                            # the model's rows
        self.embed = nn.Embedding(V, H)
        self.blocks = nn.ModuleList(Block(H, cfg.heads) for _ in range(cfg.depth))
        self.norm = RMSNorm(H)
        self.head = nn.Linear(H, V)
        # a cut vocabulary (token_vocab='train'): embedding and logit row i stand for token id
        # vocab_ids[i], and row 0 (the unknown token) for every id outside the cut as well
        self.register_buffer("vocab_ids", torch.arange(cfg.cut_vocab) if cfg.cut_vocab else None)
        cos, sin = rope_table(cfg.max_seq_len, H // cfg.heads, cfg.rope_theta, n_prefix=0)   # no prefix tokens
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """As ELF's: Xavier-uniform weights, zero biases, N(0, 0.02) token embeddings."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.embed.weight, std=0.02)

    def trunk(self, ids):
        """(B, L) rows (token ids, unless cut) -> (B, L, H) final hidden states (normalised): all a sampling step caches."""
        L = ids.shape[1]
        if L > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {L} exceeds the RoPE table (max_seq_len={self.cfg.max_seq_len})")
        h = self.embed(ids)                                            # (B, L, H)
        for block in self.blocks:
            h = block(h, self.rope_cos[:L], self.rope_sin[:L])
        return self.norm(h)

    def logits(self, h):
        """(N, H) hidden states -> (N, V) float32 logits, [MASK] at -inf: the model never predicts it."""
        with torch.autocast(h.device.type, enabled=False):             # the head in float32, as ELF's heads
            out = self.head(h.float())
        out[:, self.cfg.mask_id] = float("-inf")
        return out

    def forward(self, ids, where):
        """Logits (N, V) at the positions where (B, L) bool is True: the head, the costliest layer,
        runs only where a loss or a draw needs it."""
        return self.logits(self.trunk(ids)[where])

    def rows_of(self, tokens):
        """Token ids -> the model's rows (model.vocab_rows: the ids themselves unless cut)."""
        return vocab_rows(self.vocab_ids, tokens, self.cfg.vocab_size)

    def token_ids(self, rows):
        """The model's rows -> token ids: rows_of undone."""
        return rows if self.vocab_ids is None else self.vocab_ids[rows]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ----------------------------------------------------------------------------------------
# the objective

def sample_times(n: int, gen, t_min: float, device="cpu"):
    """(n,) low-discrepancy times t_i = (u + i/n) mod 1, mapped onto [t_min, 1]: one draw u per
    batch, so the batch covers [0, 1] evenly and the 1/t-weighted loss varies less (MDLM)."""
    u = torch.rand((), generator=gen, device=device)
    t = (u + torch.arange(n, device=device) / n) % 1
    return t_min + (1 - t_min) * t


def corrupt(tokens, t, loss_pos, mask_id: int, gen):
    """Each loss position of row i replaced by [MASK] with probability t_i -> (z_t, masked (B, L) bool)."""
    masked = loss_pos & (torch.rand(tokens.shape, generator=gen, device=tokens.device) < t[:, None])
    return tokens.masked_fill(masked, mask_id), masked


def nelbo(model, z, tokens, masked, t, loss_pos):
    """sum over masked positions of CE(x_theta(z), x) / t, over the number of loss positions:
    the continuous-time NELBO per token (nats). Unmasked positions are copied (SUBS): no loss."""
    logits = model(z, masked)                                          # (N, V), N = masked.sum()
    ce = F.cross_entropy(logits, tokens[masked], reduction="none")     # (N,)
    weight = (1 / t)[:, None].expand_as(tokens)[masked]                # (N,) -alpha'_t / (1 - alpha_t)
    return (ce * weight).sum() / loss_pos.sum().clamp_min(1)


def mdlm_loss(model, tokens, loss_pos, gen, t_min: float):
    """The training loss of a batch: times, masks, NELBO."""
    t = sample_times(len(tokens), gen, t_min, tokens.device)
    z, masked = corrupt(tokens, t, loss_pos, model.cfg.mask_id, gen)
    return nelbo(model, z, tokens, masked, t, loss_pos)


# ----------------------------------------------------------------------------------------
# the sampler

def categorical(probs, gen):
    """One draw per row of probs (N, V) by the exponential race argmax_v p_v / E_v, E ~ Exp(1)
    (Gumbel-max: -log E is Gumbel). In float64 only: float32 noise cannot produce the tiny E a
    tail token needs to win, which truncates the tail and lowers both Gen. PPL and entropy,
    making a masked model look better than it is (Zheng et al. 2024)."""
    if probs.dtype != torch.float64:
        raise TypeError(f"categorical draws in float64, got {probs.dtype}")
    e = -torch.rand(probs.shape, dtype=torch.float64, generator=gen, device=probs.device).log()   # (N, V)
    return (probs / e).argmax(-1)


def reveal_positions(masked, remaining: int, mode: str, gen):
    """(B, L) bool: the masked positions revealed by a step from t to s with `remaining` = K - k
    steps left, so (t - s)/t = 1/remaining ('prob': each independently; 'count': exactly
    round(#masked / remaining) of them, chosen uniformly). The last step reveals them all."""
    u = torch.rand(masked.shape, generator=gen, device=masked.device)  # (B, L)
    if mode == "prob":
        return masked & (u < 1 / remaining)
    count = torch.floor(masked.sum(1) / remaining + 0.5)               # (B,) round half up
    rank = torch.where(masked, u, 2.0).argsort(1).argsort(1)           # masked positions first, in random order
    return masked & (rank < count[:, None])


@torch.no_grad()
def sample_ids(model, n: int, length: int, steps: int, gen, reveal: str = "prob", first=None, trajectory=None):
    """n rows of `length` ids from all-[MASK] (position 0 held at `first` unless None) in
    `steps` ancestral steps. Returns (ids (n, L), nfe (n,): the network calls each row made);
    a list given as `trajectory` receives each step's ids. The ids are the model's rows, `first`
    one of them: token ids under the full vocabulary, else model.token_ids gives them."""
    device, mask_id = next(model.parameters()).device, model.cfg.mask_id
    ids = torch.full((n, length), mask_id, dtype=torch.long, device=device)
    if first is not None:
        ids[:, 0] = first
    h = torch.zeros(n, length, model.cfg.hidden, device=device)        # the cache: each row's last trunk output
    stale = torch.ones(n, dtype=torch.bool, device=device)              # rows changed since their last call
    nfe = torch.zeros(n, dtype=torch.long, device=device)
    for k in range(steps):
        masked = ids == mask_id                                         # (n, L)
        if stale.any():                                                 # MDLM's cache: unchanged rows reuse h
            h[stale] = model.trunk(ids[stale]).float()
            nfe += stale
        new = reveal_positions(masked, steps - k, reveal, gen)          # (n, L)
        if new.any():                                                   # draw only the revealed positions
            ids[new] = categorical(torch.softmax(model.logits(h[new]).double(), -1), gen)
        stale = new.any(1) & (ids == mask_id).any(1)                   # a finished row needs no call
        if trajectory is not None:
            trajectory.append(ids.clone())
    return ids, nfe


def generate(model, encoder, n: int, length: int, steps: int, seed: int = 0, reveal: str = "prob", first=None,
             batch_size: int = 64):
    """n samples as sample.generate returns them: {text (cut at the first EOS, special tokens
    skipped), seed, index, nfe, steps}; `encoder` decodes (anything with .detokenize(ids));
    `first` is a token id (the model's row of it is held)."""
    device = next(model.parameters()).device
    gen = torch.Generator(device).manual_seed(seed)
    first = None if first is None else int(model.rows_of(torch.tensor([first], device=device)))
    out = []
    for start in range(0, n, batch_size):
        ids, nfe = sample_ids(model, min(batch_size, n - start), length, steps, gen, reveal, first)
        ids = model.token_ids(ids).cpu()
        out += [{"text": encoder.detokenize(row), "seed": seed, "index": start + j, "nfe": int(c), "steps": steps}
                for j, (row, c) in enumerate(zip(ids, nfe.tolist()))]
    return out


# ----------------------------------------------------------------------------------------
# data, checkpoints

class Tokenizer:
    """The encoder's tokenizer alone (MDLM reads tokens, not latents): what data.load_token_rows
    and decoding ask of a FrozenEncoder, without loading its network."""

    detokenize = FrozenEncoder.detokenize   # the same text: cut at the first EOS, special tokens skipped

    def __init__(self, name: str):
        from transformers import AutoConfig, AutoTokenizer
        try:
            path = resolve_encoder(name)
            self.tokenizer, config = AutoTokenizer.from_pretrained(path), AutoConfig.from_pretrained(path)
        except (OSError, ValueError) as e:
            raise FileNotFoundError(f"could not load the tokenizer of encoder '{name}' ({checkpoint.first_line(e)})") from None
        tok = self.tokenizer
        self.eos_id = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.eos_id
        self.max_positions = getattr(config, "max_position_embeddings", None)
        if tok.mask_token_id is None or self.eos_id is None:
            raise ValueError(f"encoder '{name}': MDLM needs a tokenizer with a [MASK] and an EOS (or SEP) token")


def batch(rows, idx, hold: bool, device):
    """-> (tokens (B, L), loss positions (B, L) bool): the data's loss mask (EOS padding in it),
    without a held position 0."""
    r = rows.select(idx)
    tokens = r.ids.to(device)
    pos = torch.arange(tokens.shape[1], device=device)[None, :]
    loss_pos = torch.ones_like(tokens, dtype=torch.bool) if r.pad_in_loss else pos < r.length.to(device)[:, None]
    return tokens, (loss_pos & (pos > 0) if hold else loss_pos)


def common_first(rows, enabled: bool):
    """The token all training rows start with ([CLS] under framing, unpacked), or None (the first
    4096 rows checked: the store's documents all pass through the same tokenizer)."""
    first = set(rows.select(slice(0, 4096)).ids[:, 0].tolist())
    return first.pop() if enabled and len(first) == 1 else None


def load(ckpt: str, device="cpu"):
    """(EMA model in eval mode, meta) from an MDLM checkpoint folder."""
    folder = checkpoint.find(ckpt, warn=lambda m: print(m, file=sys.stderr))
    if folder is None:
        raise FileNotFoundError(f"no checkpoint at {ckpt}")
    meta = checkpoint.read_meta(folder)
    if meta.get("kind") != "mdlm":
        raise ValueError(f"{ckpt} is not an MDLM checkpoint (an ELF one? sample it with sample.py)")
    model = MDLM(MDLMModelConfig(**meta["model"])).to(device)
    model.load_state_dict(checkpoint.load_state(folder, "ema", device))
    return model.eval(), meta


def write_samples(cfg: MDLMConfig, model, tokenizer, length: int, first):
    """samples-<K>steps[-count].jsonl in out_dir for each K of sample_steps, n_samples per seed."""
    for steps in comma_list("sample_steps", cfg.sample_steps):
        t0 = time.time()
        recs = [r for seed in comma_list("sample_seeds", cfg.sample_seeds)
                for r in generate(model, tokenizer, cfg.n_samples, length, steps, seed, cfg.reveal, first,
                                  cfg.sample_batch)]
        path = os.path.join(cfg.out_dir, f"samples-{steps}steps{'-count' if cfg.reveal == 'count' else ''}.jsonl")
        os.makedirs(cfg.out_dir, exist_ok=True)
        checkpoint.atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in recs))
        print(f"--- {steps} steps ({cfg.reveal}): mean NFE {np.mean([r['nfe'] for r in recs]):.1f}, "
              f"{time.time() - t0:.1f}s -> {path}")
        for r in recs[:4]:
            print(r["text"])


# ----------------------------------------------------------------------------------------
# training

@torch.no_grad()
def validate(model, val, cfg: MDLMConfig, hold: bool, device):
    """The NELBO per token of held-out rows, with fixed times and masks (seed 1234)."""
    model.eval()
    gen = torch.Generator(device).manual_seed(1234)
    n, total, count = min(len(val), cfg.eval_batches * cfg.batch_size), 0.0, 0
    for i in range(0, n, cfg.batch_size):
        tokens, loss_pos = batch(val, np.arange(i, min(n, i + cfg.batch_size)), hold, device)
        tokens = model.rows_of(tokens)
        total += mdlm_loss(model, tokens, loss_pos, gen, cfg.t_min).item() * loss_pos.sum().item()
        count += loss_pos.sum().item()
    model.train()
    return {"val_nelbo": total / max(1, count)}


def train(cfg: MDLMConfig, device: str):
    """Train from scratch or resume; checkpoints, snapshots, metrics.jsonl; samples at the end."""
    from tqdm import tqdm
    from data import batch_indices, load_token_rows, noise_seed
    from store import row_vocab
    checkpoint.prepare(cfg.out_dir, cfg.init_from == "resume", cfg.overwrite, dataclasses.asdict(cfg),
                       FREE_ON_RESUME, cfg.allow_changes)
    print(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    flush_denormals()                                    # on a CPU, as train.py (optim.py)
    torch.manual_seed(cfg.seed)
    tokenizer = Tokenizer(cfg.encoder)
    train_rows, val_rows = load_token_rows(cfg, tokenizer)       # ELF's rows: same store, same layout
    first = common_first(train_rows, cfg.hold_first)
    print(f"data: {len(train_rows)} train rows, {len(val_rows)} val rows of {cfg.max_length} tokens; "
          f"position 0 {'held at id %d' % first if first is not None else 'sampled'}")
    tok, vocab_ids = tokenizer.tokenizer, None
    if cfg.token_vocab == "train":                           # the ids training shows, [MASK] last
        unk = tok.unk_token_id if tok.unk_token_id is not None else tokenizer.eos_id
        kept = row_vocab(train_rows, unk)
        vocab_ids = torch.cat((kept[kept != tok.mask_token_id], torch.tensor([tok.mask_token_id])))
    cut = 0 if vocab_ids is None else len(vocab_ids)
    mcfg = MDLMModelConfig(vocab_size=len(tok), cut_vocab=cut, mask_id=cut - 1 if cut else tok.mask_token_id,
                           hidden=cfg.hidden, depth=cfg.depth, heads=cfg.heads, max_seq_len=cfg.max_length,
                           rope_theta=cfg.rope_theta)
    model = MDLM(mcfg).to(device)
    if vocab_ids is not None:
        model.vocab_ids.copy_(vocab_ids)
    ema = MDLM(mcfg).to(device).requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    head = model.embed.weight.numel() + model.head.weight.numel()
    over = "" if vocab_ids is None else f", over {len(vocab_ids)} of the {len(tok)} token ids"
    print(f"mdlm: {model.num_params() / 1e6:.2f}M parameters ({head / 1e6:.2f}M of them the embedding and "
          f"the head{over})")
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    opt = make_optimizer(model, cfg.optimizer, cfg.muon_params, lr)
    step, minutes = 0, 0.0
    if cfg.init_from == "resume":
        saved = checkpoint.resume(cfg.out_dir, model, ema, opt, dataclasses.asdict(mcfg))
        if vocab_ids is not None and not torch.equal(model.vocab_ids.cpu(), vocab_ids):
            raise ValueError(f"the training rows hold other token ids than the ones {cfg.out_dir} was "
                             f"started with (token_vocab=train): resume it on the same data")
        step, minutes = saved["step"], saved.get("train_minutes", 0.0)
        print(f"resumed from {cfg.out_dir} at step {step}")
    meta = {"kind": "mdlm", "train": dataclasses.asdict(cfg), "model": dataclasses.asdict(mcfg), "hold_first": first}
    metrics = os.path.join(cfg.out_dir, "metrics.jsonl")
    t_start = time.time() - 60 * minutes                         # a resumed run's clock goes on

    def record(**values):
        os.makedirs(cfg.out_dir, exist_ok=True)
        with open(metrics, "a") as f:
            f.write(json.dumps({"minutes": round((time.time() - t_start) / 60, 4), **values}) + "\n")

    amp = autocast(device, "auto")                               # bf16 on CUDA, float32 on a CPU
    snapshots = [m for m in snapshot_minutes(cfg) if m > minutes]
    hold = first is not None
    with amp:
        record(step=step, **validate(ema, val_rows, cfg, hold, device))
    bar = tqdm(total=cfg.max_steps, initial=step, dynamic_ncols=True, mininterval=0.1 if sys.stderr.isatty() else 30)
    done = step >= cfg.max_steps
    while not done:
        set_lr(opt, warmup_lr(lr, step, cfg.warmup_steps, cfg.lr_schedule, cfg.max_steps))
        tokens, loss_pos = batch(train_rows, batch_indices(step, cfg.batch_size, len(train_rows), cfg.seed), hold, device)
        tokens = model.rows_of(tokens)
        # times and masks are a function of (seed, step), as train.py's noise: resume is exact
        gen = torch.Generator(device).manual_seed(noise_seed(cfg.seed, step))
        with amp:
            loss = mdlm_loss(model, tokens, loss_pos, gen, cfg.t_min)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        step += 1
        ema_update(ema, model, ema_decay(cfg.ema_decay, step, cfg.ema_warmup))
        minutes = (time.time() - t_start) / 60
        done = step >= cfg.max_steps or 0 < cfg.time_limit_min < minutes
        bar.update(1)
        if step % cfg.log_interval == 0 or done:
            record(step=step, tokens=step * cfg.batch_size * cfg.max_length, lr=opt.param_groups[0]["lr"],
                   loss=loss.item())
            bar.set_postfix(loss=f"{loss.item():.3f}")
        if step % cfg.eval_interval == 0 or done:
            with amp:
                scores = validate(ema, val_rows, cfg, hold, device)
            record(step=step, **scores)
            bar.write(f"step {step}: val nelbo {scores['val_nelbo']:.4f}")
        if step % cfg.ckpt_interval == 0 or done:
            checkpoint.save(cfg.out_dir, model, ema, opt, step, dict(meta, train_minutes=minutes), cfg.keep_checkpoints)
        while snapshots and minutes >= snapshots[0]:             # weights only: a quality-vs-tokens curve
            m = snapshots.pop(0)
            checkpoint.save(os.path.join(cfg.out_dir, f"at-{m:g}min"), model, ema, None, step,
                            dict(meta, train_minutes=minutes), keep=1)
    bar.close()
    print(f"trained {step} steps in {(time.time() - t_start) / 60:.1f} min")
    if cfg.n_samples > 0:
        write_samples(cfg, ema.eval(), tokenizer, cfg.max_length, first)
    return model


def parse_config(argv) -> MDLMConfig:
    """[config.py] [--key value ...] -> MDLMConfig, with the checks that need several keys."""
    cfg = parse(argv, MDLMConfig, "mdlm.py")
    for key, allowed in (("init_from", ("scratch", "resume")), ("reveal", ("prob", "count")),
                         ("optimizer", ("adamw", "muon")), ("muon_params", ("all", "blocks")),
                         ("pad_token", ("pad", "eos")), ("lr_schedule", ("constant", "cosine")),
                         ("token_vocab", ("full", "train"))):
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"unknown {key} '{getattr(cfg, key)}' (choose from {', '.join(allowed)})")
    check_ranges(cfg, at_least_1=("batch_size", "max_length", "max_steps", "eval_interval", "ckpt_interval",
                                  "log_interval", "eval_batches", "keep_checkpoints", "depth", "hidden", "heads",
                                  "sample_batch"),
                 positive=("blr", "grad_clip", "rope_theta"), fraction=("ema_decay", "t_min"),
                 non_negative=("warmup_steps", "time_limit_min", "val_size", "n_samples"))
    comma_list("sample_seeds", cfg.sample_seeds)
    if min(comma_list("sample_steps", cfg.sample_steps)) < 1:
        raise ValueError(f"sample_steps must be >= 1, got '{cfg.sample_steps}'")
    snapshot_minutes(cfg)                                # '10,20,40', as train.py's
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ValueError(f"unknown device '{cfg.device}' (choose from auto, cpu, cuda, cuda:N)")
    return cfg


def main(argv):
    cfg = parse_config(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device '{device}' but CUDA is not available here (use --device cpu)")
    if not cfg.ckpt:
        return train(cfg, device)
    model, meta = load(cfg.ckpt, device)                         # sample only: the run's length and framing
    write_samples(cfg, model, Tokenizer(meta["train"]["encoder"]), meta["train"]["max_length"], meta["hold_first"])
    return model


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
