"""MDLM (Sahoo et al. 2024), the masked-diffusion baseline: its network, its objective and its
sampler (METHOD.md, "Baselines"); baselines/mdlm.py trains and samples it.

Absorbing-state diffusion with the log-linear schedule alpha_t = 1 - t (t = 0 data, t = 1 all
[MASK]: the opposite of flow.py's convention). The network (`MDLM`) is ELF-tiny's blocks over a
token embedding with a SUBS head ([MASK] never predicted); `mdlm_loss` is the continuous-time
NELBO; `sample_ids` reveals positions ancestrally, drawing in float64, calling the network only
for rows that changed.
"""

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from model import Block, RMSNorm, mlp_width, rope_table, vocab_index

# ----------------------------------------------------------------------------------------
# the network


@dataclass
class MDLMModelConfig:
    vocab_size: int = 30522  # V = len(tokenizer), [MASK] included
    mask_id: int = 103  # the tokenizer's [MASK] (its index under a cut vocabulary)
    cut_vocab: int = 0  # V' > 0: entries for V' of the V ids (`vocab_ids`)
    hidden: int = 256
    depth: int = 4
    heads: int = 4
    max_seq_len: int = 16  # length of the RoPE table
    rope_theta: float = 10000.0


class MDLM(nn.Module):
    """Token embedding -> ELF's blocks -> RMSNorm -> Linear(H -> V); [MASK]'s logit is -inf
    (SUBS)."""

    def __init__(self, cfg: MDLMModelConfig):
        super().__init__()
        self.cfg = cfg
        H = cfg.hidden
        if H % cfg.heads or (H // cfg.heads) % 2:
            raise ValueError(f"hidden {H} must split into {cfg.heads} heads of even size")
        V = cfg.cut_vocab or cfg.vocab_size  # the model's vocabulary
        self.embed = nn.Embedding(V, H)
        self.blocks = nn.ModuleList(Block(H, cfg.heads, mlp_width(cfg)) for _ in range(cfg.depth))
        self.norm = RMSNorm(H)
        self.head = nn.Linear(H, V)
        # a cut vocabulary (token_vocab='train'): embedding and logit i stand for token id
        # vocab_ids[i], and entry 0 (the unknown token) for every id outside the cut as well
        self.register_buffer("vocab_ids", torch.arange(cfg.cut_vocab) if cfg.cut_vocab else None)
        # no prefix tokens
        cos, sin = rope_table(cfg.max_seq_len, H // cfg.heads, cfg.rope_theta, n_prefix=0)
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
        """(B, L) vocabulary indices (token ids, unless cut) -> (B, L, H) final hidden states
        (normalised): all a sampling step caches."""
        L = ids.shape[1]
        if L > self.cfg.max_seq_len:
            raise ValueError(
                f"sequence length {L} exceeds the RoPE table (max_seq_len={self.cfg.max_seq_len})"
            )
        h = self.embed(ids)  # (B, L, H)
        for block in self.blocks:
            h = block(h, self.rope_cos[:L], self.rope_sin[:L])
        return self.norm(h)

    def logits(self, h):
        """(N, H) hidden states -> (N, V) float32 logits, [MASK] at -inf: the model never
        predicts it."""
        with torch.autocast(h.device.type, enabled=False):  # the head in float32, as ELF's heads
            out = self.head(h.float())
        out[:, self.cfg.mask_id] = float("-inf")
        return out

    def forward(self, ids, where):
        """Logits (N, V) at the positions where (B, L) bool is True: the head, the costliest layer,
        runs only where a loss or a draw needs it."""
        return self.logits(self.trunk(ids)[where])

    def vocab_index(self, tokens):
        """Token ids -> the model's vocabulary indices (model.vocab_index: the ids unless cut)."""
        return vocab_index(self.vocab_ids, tokens, self.cfg.vocab_size)

    def token_ids(self, index):
        """The model's vocabulary indices -> token ids: vocab_index undone."""
        return index if self.vocab_ids is None else self.vocab_ids[index]

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
    """Each loss position of row i replaced by [MASK] with probability t_i
    -> (z_t, masked (B, L) bool)."""
    masked = loss_pos & (torch.rand(tokens.shape, generator=gen, device=tokens.device) < t[:, None])
    return tokens.masked_fill(masked, mask_id), masked


def nelbo(model, z, tokens, masked, t, loss_pos):
    """sum over masked positions of CE(x_theta(z), x) / t, over the number of loss positions:
    the continuous-time NELBO per token (nats). Unmasked positions are copied (SUBS): no loss."""
    logits = model(z, masked)  # (N, V), N = masked.sum()
    ce = F.cross_entropy(logits, tokens[masked], reduction="none")  # (N,)
    weight = (1 / t)[:, None].expand_as(tokens)[masked]  # (N,) -alpha'_t/(1-alpha_t)
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
    # (N, V)
    e = -torch.rand(probs.shape, dtype=torch.float64, generator=gen, device=probs.device).log()
    return (probs / e).argmax(-1)


def reveal_positions(masked, remaining: int, mode: str, gen):
    """(B, L) bool: the masked positions revealed by a step from t to s with `remaining` = K - k
    steps left, so (t - s)/t = 1/remaining ('prob': each independently; 'count': exactly
    round(#masked / remaining) of them, chosen uniformly). The last step reveals them all."""
    u = torch.rand(masked.shape, generator=gen, device=masked.device)  # (B, L)
    if mode == "prob":
        return masked & (u < 1 / remaining)
    count = torch.floor(masked.sum(1) / remaining + 0.5)  # (B,) round half up
    # masked positions first, in random order
    rank = torch.where(masked, u, 2.0).argsort(1).argsort(1)
    return masked & (rank < count[:, None])


@torch.no_grad()
def sample_ids(
    model,
    n: int,
    length: int,
    steps: int,
    gen,
    reveal: str = "prob",
    first=None,
    trajectory=None,
    given=None,
    held=None,
):
    """n rows of `length` ids from all-[MASK] (position 0 held at `first` unless None) in
    `steps` ancestral steps. Returns (ids (n, L), nfe (n,): the network calls each row made);
    a list given as `trajectory` receives each step's ids. The ids are the model's vocabulary
    indices, `first` one of them: token ids under the full vocabulary, else model.token_ids
    gives them. Conditional: `held` (n, L) bool, the positions fixed to `given` (n, L) (the
    source); they are never revealed nor drawn, whatever they hold."""
    device, mask_id = next(model.parameters()).device, model.cfg.mask_id
    ids = torch.full((n, length), mask_id, dtype=torch.long, device=device)
    if first is not None:
        ids[:, 0] = first
    if held is not None:
        ids = torch.where(held, given, ids)
    # the cache: each row's last trunk output
    h = torch.zeros(n, length, model.cfg.hidden, device=device)
    # rows changed since their last call
    stale = torch.ones(n, dtype=torch.bool, device=device)
    nfe = torch.zeros(n, dtype=torch.long, device=device)
    for k in range(steps):
        masked = ids == mask_id  # (n, L)
        if held is not None:  # the source: never drawn
            masked &= ~held
        # MDLM's cache: unchanged rows reuse h
        if stale.any():
            h[stale] = model.trunk(ids[stale]).float()
            nfe += stale
        new = reveal_positions(masked, steps - k, reveal, gen)  # (n, L)
        # draw only the revealed positions
        if new.any():
            ids[new] = categorical(torch.softmax(model.logits(h[new]).double(), -1), gen)
        # finished rows need no call
        stale = new.any(1) & (masked & ~new).any(1)
        if trajectory is not None:
            trajectory.append(ids.clone())
    return ids, nfe


def generate(
    model,
    encoder,
    n: int,
    length: int,
    steps: int,
    seed: int = 0,
    reveal: str = "prob",
    first=None,
    batch_size: int = 64,
):
    """n samples as sample.generate returns them: {text (cut at the first EOS, special tokens
    skipped), seed, index, nfe, steps}; `encoder` decodes (anything with .detokenize(ids));
    `first` is a token id (the model's index of it is held)."""
    device = next(model.parameters()).device
    gen = torch.Generator(device).manual_seed(seed)
    first = None if first is None else int(model.vocab_index(torch.tensor([first], device=device)))
    out = []
    for start in range(0, n, batch_size):
        ids, nfe = sample_ids(model, min(batch_size, n - start), length, steps, gen, reveal, first)
        ids = model.token_ids(ids).cpu()
        out += [
            {
                "text": encoder.detokenize(row),
                "seed": seed,
                "index": start + j,
                "nfe": int(c),
                "steps": steps,
            }
            for j, (row, c) in enumerate(zip(ids, nfe.tolist()))
        ]
    return out


def generate_conditional(
    model,
    encoder,
    rows,
    steps: int,
    cap: int,
    seed: int = 0,
    reveal: str = "prob",
    batch_size: int = 64,
):
    """Conditional rows (conditional.layout of (source, []) pairs: the source, then EOS) ->
    one dict per row {text: the target, at most `cap` tokens after the source cut at its first
    EOS, nfe, steps}. The source is held (never masked, never drawn); every position after it
    starts as [MASK]."""
    device = next(model.parameters()).device
    gen = torch.Generator(device).manual_seed(seed)
    out = []
    for start in range(0, len(rows), batch_size):
        r = rows.select(slice(start, start + batch_size))
        pos = torch.arange(r.ids.shape[1])[None, :]
        held = (pos < r.cond_len[:, None]).to(device)  # (B, L) the source
        given = model.vocab_index(r.ids.to(device))
        ids, nfe = sample_ids(
            model, len(given), given.shape[1], steps, gen, reveal, given=given, held=held
        )
        ids = model.token_ids(ids).cpu()
        out += [
            {"text": encoder.detokenize(row[c : c + cap]), "nfe": int(k), "steps": steps}
            for row, c, k in zip(ids, r.cond_len.tolist(), nfe.tolist())
        ]
    return out
