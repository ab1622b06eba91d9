"""The ELF network: a DiT-style transformer with in-context conditioning (METHOD.md, "The network").

One network, two jobs. In *denoise* mode it reads a noisy latent sequence z_t (plus a
self-conditioning guess x_sc) and predicts the clean latent x_hat (x-prediction). In
*decode* mode (learned mode tokens switched on) it reads a nearly clean latent and
predicts token logits. The conditioning (time t, SC-CFG scale sc_cfg, mode) enters as
3 x n_prefix prefix tokens (n_prefix = 4 as released: 12) that the transformer attends to
like any other position:

    [time x n, sc_cfg x n, mode x n, sequence x L]  ->  blocks  ->  drop prefix  ->  heads

Usage:
    cfg = ELFConfig(latent_dim=384, vocab_size=30522, **SIZES["tiny"])
    model = ELF(cfg)
    x_hat, logits = model(z, t, sc_cfg, x_sc, decode, decode_idx)

The knobs a run sets are `ModelKnobs`, declared once here with their checks (the range or
the choices in the annotation, enforced by every command's parser); train.py's TrainConfig
inherits them as its keys, and builds the ELFConfig from them by name. Checkpoints (saving,
loading) are lib/checkpoint.py's job; the authors' released weights, tools/convert_release.py's.
"""

import math
from dataclasses import dataclass, fields, replace
from typing import Annotated

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

N_PREFIX = 4  # tokens per conditioning signal (time, SC-CFG scale, mode): 12 in all [release]
# model config keys of older checkpoints -> today's
RENAMED = {"decode_vocab": "cut_vocab"}


@dataclass
class ModelKnobs:
    """The network's knobs a run chooses (train.py's keys). An annotation's second part is the
    key's check: a range ("non_negative", "at_least_1", ...) or a tuple of choices."""

    bottleneck: Annotated[int, "non_negative"] = 128  # text projection D -> b -> H; 0: none
    # a learned absolute position embedding on the sequence (not released)
    pos_embed: bool = False
    n_prefix: Annotated[int, "at_least_1"] = N_PREFIX  # prefix tokens per signal (released: 4)
    rope_theta: Annotated[float, "positive"] = 10000.0  # RoPE's base
    # decode mode on a second trunk of its own, trained on the decode rows alone (the paper's
    # two-stage ablation; not released): `decoder_net`
    separate_decoder: bool = False
    # the latents: the frozen 'encoder' or a 'learned' token table trained with the flow (the
    # paper's learnable-embeddings ablation; not released): `embed_table`
    embeddings: Annotated[str, ("encoder", "learned")] = "encoder"


@dataclass
class ELFConfig(ModelKnobs):
    """The knobs and what a run derives: D and V from the encoder, the size, the RoPE length,
    the cut vocabulary's size."""

    latent_dim: int = 512  # D: width of the frozen encoder's hidden states
    vocab_size: int = 32128  # V: the encoder tokenizer's vocabulary (len(tokenizer))
    hidden: int = 768  # H: transformer width
    depth: int = 12
    heads: int = 12
    max_seq_len: int = 1024  # length of the RoPE table: the longest sequence accepted
    cut_vocab: int = 0  # V' > 0: a decoder over V' of the V ids (`vocab_ids`); not released

    @classmethod
    def from_dict(cls, d: dict) -> "ELFConfig":
        d = {RENAMED.get(k, k): v for k, v in d.items()}  # checkpoints saved under older names
        if "learned_embeddings" in d:  # a bool before `embeddings` named the choice
            d["embeddings"] = "learned" if d.pop("learned_embeddings") else "encoder"
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown model config key(s): {', '.join(unknown)}")
        return cls(**d)


def mlp_width(cfg: ELFConfig) -> int:
    """SwiGLU's inner width h (the release's 8H/3); tools/timing.py counts FLOPs with it too."""
    return int(4 * cfg.hidden * 2 / 3)


# Published sizes and a CPU size. D and V come from the encoder.
SIZES = {
    "tiny": dict(depth=4, hidden=256, heads=4),
    "ELF-B": dict(depth=12, hidden=768, heads=12),
    "ELF-M": dict(depth=24, hidden=1056, heads=16),
    "ELF-L": dict(depth=32, hidden=1280, heads=16),
}


class RMSNorm(nn.Module):
    """RMSNorm with a learned scale (eps 1e-6); statistics in float32 even under bf16 autocast."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        if x.dtype == torch.float32:  # one fused kernel
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).type_as(x)


def rope_table(max_len: int, head_dim: int, theta: float, n_prefix: int = 3 * N_PREFIX):
    """RoPE for interleaved pairs (x[2k], x[2k+1]) turned by angle p * theta^(-2k / head_dim)
    at sequence position p, laid out for `apply_rope`: cos and signed sin, each
    (n_prefix + max_len, head_dim), every angle written twice (once per member of its pair).
    The prefix rows are the identity (cos 1, sin 0): the prefix carries no order."""
    freqs = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (hd/2,)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * freqs[None, :]  # (L, hd/2)
    cos, sin = angles.cos(), angles.sin()
    cos = torch.cat((torch.ones(n_prefix, head_dim // 2, dtype=torch.float64), cos))
    sin = torch.cat((torch.zeros(n_prefix, head_dim // 2, dtype=torch.float64), sin))
    sign = torch.tensor([-1.0, 1.0], dtype=torch.float64)  # (-sin, +sin)
    return cos.repeat_interleave(2, -1).float(), (sin[..., None] * sign).flatten(-2).float()


def apply_rope(x, cos, sin):
    """Turn interleaved pairs of x (B, n, T, hd) by per-position angles: with the pair
    swapped, x_rot[2k] = x[2k] cos - x[2k+1] sin and x_rot[2k+1] = x[2k+1] cos + x[2k] sin."""
    swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (x1, x0, x3, x2, ...)
    return (x.float() * cos + swapped.float() * sin).type_as(x)


class Attention(nn.Module):
    """Bidirectional self-attention with QK-norm and RoPE on the sequence part only."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)  # q, k, v stacked; heads contiguous
        self.q_norm = RMSNorm(self.head_dim)
        self.k_norm = RMSNorm(self.head_dim)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x, cos, sin):
        """x: (B, T, H), the prefix first; cos, sin: (T, hd) from rope_table (identity on the
        prefix)."""
        B, T, H = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        # q, k: (B, n, T, hd)
        q, k = apply_rope(self.q_norm(q), cos, sin), apply_rope(self.k_norm(k), cos, sin)
        y = F.scaled_dot_product_attention(q, k, v)  # full bidirectional attention, no mask
        return self.proj(y.transpose(1, 2).reshape(B, T, H))


class SwiGLU(nn.Module):
    """Linear(H -> 2h) split into gate a and value b, silu(a) * b, Linear(h -> H)."""

    def __init__(self, hidden: int, h: int):
        super().__init__()
        self.w12 = nn.Linear(hidden, 2 * h)
        self.w3 = nn.Linear(h, hidden)

    def forward(self, x):
        a, b = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(a) * b)


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, mlp: int):
        super().__init__()
        self.norm1, self.attn = RMSNorm(hidden), Attention(hidden, heads)
        self.norm2, self.mlp = RMSNorm(hidden), SwiGLU(hidden, mlp)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class TimeEmbed(nn.Module):
    """Scalar -> 256 sinusoidal features (cos half, then sin half) -> MLP."""

    def __init__(self, hidden: int, n_freq: int = 256, max_period: float = 10000.0):
        super().__init__()
        half = n_freq // 2
        self.register_buffer(
            "freqs", torch.exp(-math.log(max_period) * torch.arange(half) / half), persistent=False
        )
        self.mlp_0, self.mlp_2 = nn.Linear(n_freq, hidden), nn.Linear(hidden, hidden)

    def forward(self, s):  # s: (B,) in [0, 1] used as is
        args = s.float()[:, None] * self.freqs[None]  # (B, 128)
        feats = torch.cat((args.cos(), args.sin()), dim=-1)
        return self.mlp_2(F.silu(self.mlp_0(feats)))  # (B, H)


class Bottleneck(nn.Module):
    """Text projection D -> b -> H, the first without bias (b = 128 was the paper's best);
    b = 0: none, one Linear D -> H (the ablation's "no bottleneck" arm)."""

    def __init__(self, latent_dim: int, bottleneck: int, hidden: int):
        super().__init__()
        self.proj1 = nn.Linear(latent_dim, bottleneck, bias=False) if bottleneck else nn.Identity()
        self.proj2 = nn.Linear(bottleneck or latent_dim, hidden)

    def forward(self, h):
        return self.proj2(self.proj1(h))


class FlowHead(nn.Module):
    """x-prediction from the final hidden states: RMSNorm -> Linear(H -> D), zero-initialised."""

    def __init__(self, hidden: int, latent_dim: int):
        super().__init__()
        self.norm_final = RMSNorm(hidden)
        self.linear = nn.Linear(hidden, latent_dim)

    def forward(self, h):
        return self.linear(self.norm_final(h))


class DecoderHead(nn.Module):
    """Token logits from the final hidden states: Linear(H->D) -> GELU(tanh) -> Linear(D->V), or
    D->V' under a cut vocabulary (ELFConfig.cut_vocab)."""

    def __init__(self, hidden: int, latent_dim: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden, latent_dim)
        self.unembed = nn.Linear(latent_dim, vocab_size)

    def forward(self, h):
        return self.unembed(F.gelu(self.proj(h), approximate="tanh"))


def vocab_index(vocab_ids, tokens, vocab_size: int):
    """Token ids (any shape, each < vocab_size) -> their index in a cut vocabulary, whose entry i
    stands for id vocab_ids[i] and entry 0 for every id outside it as well; the ids themselves when
    vocab_ids is None (no cut). ELF's decoder and the baselines (MDLM, the AR GPT-2) read it."""
    if vocab_ids is None:
        return tokens
    index = torch.zeros(vocab_size, dtype=torch.long, device=tokens.device)
    index[vocab_ids] = torch.arange(len(vocab_ids), device=tokens.device)
    return index[tokens]


class ELF(nn.Module):
    def __init__(self, cfg: ELFConfig):
        super().__init__()
        self.cfg = cfg
        D, H, b = cfg.latent_dim, cfg.hidden, cfg.bottleneck
        if H % cfg.heads or (H // cfg.heads) % 2:
            raise ValueError(f"hidden {H} must split into {cfg.heads} heads of even size")
        # attribute names follow the parameter names of the authors' released checkpoints
        self.self_cond_proj = nn.Linear(2 * D, D)  # [z ; x_sc] -> D
        self.text_proj = Bottleneck(D, b, H)  # D -> b -> H
        # the SC-CFG modules keep the release's names (self_cond_cfg_*): checkpoints convert 1:1
        self.t_embedder, self.self_cond_cfg_embedder = TimeEmbed(H), TimeEmbed(H)
        self.t_emb_tokens = nn.Parameter(torch.zeros(1, cfg.n_prefix, H))
        self.self_cond_cfg_tokens = nn.Parameter(torch.zeros(1, cfg.n_prefix, H))
        self.mode_tokens = nn.Parameter(torch.zeros(1, cfg.n_prefix, H))
        # RoPE tells the blocks only how far apart two positions are; at pure noise every position
        # looks alike, so short padded rows (where position 0 is always [CLS]) may want to know
        # where they are: an optional absolute embedding (tiny's default; not in the release)
        self.pos_embed = nn.Parameter(torch.zeros(1, cfg.max_seq_len, H)) if cfg.pos_embed else None
        self.blocks = nn.ModuleList(Block(H, cfg.heads, mlp_width(cfg)) for _ in range(cfg.depth))
        self.final_layer = FlowHead(H, D)  # x-prediction
        self.decoder_head = (
            None
            if cfg.separate_decoder  # decode mode: its own trunk's
            else DecoderHead(H, D, cfg.cut_vocab or cfg.vocab_size)
        )
        # a cut vocabulary (not released): logit i stands for token id vocab_ids[i], and logit 0
        # for every id outside the cut as well (the trainer puts the unknown token there, else EOS)
        ids = torch.arange(cfg.cut_vocab) if cfg.cut_vocab else None
        self.register_buffer("vocab_ids", ids)
        cos, sin = rope_table(cfg.max_seq_len, H // cfg.heads, cfg.rope_theta, 3 * cfg.n_prefix)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        # recompute each block in backward: memory for compute (ELF-L)
        self.grad_checkpointing = False
        # the learnable-embeddings ablation: a row per decoder logit, N(0, 1) like the continuous
        # diffusion LMs before ELF; `latents` reads it in place of the frozen encoder's states
        self.embed_table = (
            nn.Embedding(cfg.cut_vocab or cfg.vocab_size, D)
            if cfg.embeddings == "learned"
            else None
        )
        self.init_weights()
        # the separate-decoder ablation: a second network of the same size for decode mode
        self.decoder_net = (
            ELF(replace(cfg, separate_decoder=False, embeddings="encoder"))
            if cfg.separate_decoder
            else None
        )

    @torch.no_grad()
    def init_weights(self):
        """As released: Xavier-uniform weights, zero biases, N(0, 0.02) for learned tokens and the
        TimeEmbed MLPs, and a zero flow head so that x_hat = 0 at initialisation."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for emb in (self.t_embedder, self.self_cond_cfg_embedder):
            for lin in (emb.mlp_0, emb.mlp_2):
                nn.init.normal_(lin.weight, std=0.02)
        for tok in (self.t_emb_tokens, self.self_cond_cfg_tokens, self.mode_tokens, self.pos_embed):
            if tok is not None:
                nn.init.normal_(tok, std=0.02)
        nn.init.zeros_(self.final_layer.linear.weight)
        nn.init.zeros_(self.final_layer.linear.bias)

    def forward(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        """z, x_sc: (B, L, D) latents; t, sc_cfg: (B,) time and SC-CFG scale; decode: (B,) bool
        mode gate (None = all denoise). Returns x_hat (B, L, D) and, when decode_idx (a 1-D
        index tensor into the batch) is given, the decoder logits of those rows (R, L, V or V'),
        else None."""
        if self.decoder_net is not None:
            return self.two_networks(z, t, sc_cfg, x_sc, decode, decode_idx)
        return self.own_forward(z, t, sc_cfg, x_sc, decode, decode_idx)

    def own_forward(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        """forward, on this network's trunk alone."""
        B, L, _ = z.shape
        if L > self.cfg.max_seq_len:
            raise ValueError(
                f"sequence length {L} exceeds the RoPE table (max_seq_len={self.cfg.max_seq_len})"
            )
        if x_sc is None:
            x_sc = torch.zeros_like(z)
        gate = torch.zeros(B, device=z.device) if decode is None else decode.float()
        # the input projections and the conditioning embeddings stay in float32 under bf16
        # autocast (as released); the blocks then run in the autocast dtype
        with torch.autocast(z.device.type, enabled=False):
            h = self.self_cond_proj(torch.cat((z, x_sc), dim=-1).float())  # (B, L, D)
            h = self.text_proj(h)  # (B, L, H)
            if self.pos_embed is not None:
                h = h + self.pos_embed[:, :L]
            prefix = torch.cat(
                (  # each (B, n_prefix, H)
                    self.t_emb_tokens + self.t_embedder(t)[:, None],
                    self.self_cond_cfg_tokens + self.self_cond_cfg_embedder(sc_cfg)[:, None],
                    self.mode_tokens * gate[:, None, None],  # zeros when denoising
                ),
                dim=1,
            )
        P = prefix.shape[1]  # 3 x n_prefix
        h = torch.cat((prefix, h), dim=1)  # (B, P + L, H)
        cos, sin = self.rope_cos[: P + L], self.rope_sin[: P + L]  # (P + L, hd)
        for block in self.blocks:
            if self.grad_checkpointing and torch.is_grad_enabled():
                h = checkpoint(block, h, cos, sin, use_reentrant=False)
            else:
                h = block(h, cos, sin)
        # both heads in float32 even under bf16 autocast: x_hat feeds a 1/(1-t) velocity and
        # the logits a softmax over the vocabulary, both sensitive to bf16 rounding
        with torch.autocast(h.device.type, enabled=False):
            h = h[:, P:].float()  # (B, L, H)
            x_hat = self.final_layer(h)  # (B, L, D)
            logits = None if decode_idx is None else self.decoder_head(h[decode_idx])  # (R, L, V)
        return x_hat, logits

    def two_networks(self, z, t, sc_cfg, x_sc, decode, decode_idx):
        """The separate-decoder ablation: the denoise rows through this network, the decode rows
        (decode_idx) through decoder_net. Each sees only its own rows, so a step costs what one
        shared network's does; x_hat of the decode rows is zero (the loss never reads it)."""
        x_sc = torch.zeros_like(z) if x_sc is None else x_sc
        flow = (
            torch.arange(len(z), device=z.device)
            if decode is None
            else (~decode).nonzero().squeeze(1)
        )
        x_hat, logits = torch.zeros(z.shape, device=z.device), None
        if flow.numel():
            x_hat = x_hat.index_copy(
                0,
                flow,
                self.own_forward(
                    z[flow],
                    t[flow],
                    sc_cfg[flow],
                    x_sc[flow],
                    None if decode is None else decode[flow],
                )[0].float(),
            )
        if decode_idx is not None and not len(decode_idx):  # no decode rows: nothing to run
            L, V = z.shape[1], self.cfg.cut_vocab or self.cfg.vocab_size
            logits = torch.zeros(0, L, V, device=z.device)
        elif decode_idx is not None:
            d = decode_idx
            _, logits = self.decoder_net(
                z[d],
                t[d],
                sc_cfg[d],
                x_sc[d],
                torch.ones(len(d), dtype=torch.bool, device=z.device),
                torch.arange(len(d), device=z.device),
            )
        return x_hat, logits

    @property
    def decoding(self):
        """The network whose decoder head reads latents out: this one, or decoder_net."""
        return self if self.decoder_net is None else self.decoder_net

    def latents(self, x, index):
        """The clean latents of a batch: the frozen encoder's x (B, L, D) as given or, with
        learned embeddings, the table's rows of `index` (vocab_index of the ids) scaled to unit
        RMS each, the scale of the encoder's normalised states (unscaled, the flow loss would
        shrink the table towards zero: every point is easy to denoise when all lie together)."""
        if self.embed_table is None:
            return x
        e = self.embed_table(index)
        return e * torch.rsqrt(e.pow(2).mean(-1, keepdim=True) + 1e-6)

    def vocab_index(self, tokens):
        """Token ids (B, L) -> their index among the decoder's logits (the module's vocab_index)."""
        return vocab_index(self.vocab_ids, tokens, self.cfg.vocab_size)

    def token_ids(self, index):
        """Indices of the decoder's logits (an argmax) -> token ids: vocab_index undone."""
        return index if self.vocab_ids is None else self.vocab_ids[index]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
