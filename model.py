"""The ELF network: a DiT-style transformer with in-context conditioning (ELF_SPEC §4).

One network, two jobs. In *denoise* mode it reads a noisy latent sequence z_t (plus a
self-conditioning guess x_sc) and predicts the clean latent x_hat (x-prediction). In
*decode* mode (learned mode tokens switched on) it reads a nearly clean latent and
predicts token logits. The conditioning (time t, SC-CFG scale w, mode) enters as 12
prefix tokens that the transformer attends to like any other position:

    [time x4, sccfg x4, mode x4, sequence x L]  ->  blocks  ->  drop prefix  ->  heads

Usage:
    cfg = ELFConfig(latent_dim=384, vocab_size=30522, **PRESETS["tiny"])
    model = ELF(cfg)
    x_hat, logits = model(z, t, w, x_sc, decode, logits_rows)
    model, meta = load_checkpoint("out/tiny")          # rebuild from a train.py folder
    convert_release("released.pt", "out/elf_b")         # the authors' layout (Appendix A) -> ours
"""

import json
import math
import os
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

N_PREFIX = 4  # tokens per conditioning signal (time, SC-CFG scale, mode): 12 in all


@dataclass
class ELFConfig:
    latent_dim: int = 512      # D: width of the frozen encoder's hidden states
    vocab_size: int = 32128    # V: the encoder tokenizer's vocabulary (len(tokenizer))
    hidden: int = 768          # H: transformer width
    depth: int = 12
    heads: int = 12
    bottleneck: int = 128      # b: text projection D -> b -> H (§4.2; 128 was best)
    max_seq_len: int = 1024    # length of the RoPE table: the longest sequence accepted
    rope_theta: float = 10000.0

    @classmethod
    def from_dict(cls, d: dict) -> "ELFConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown model config key(s): {', '.join(unknown)}")
        return cls(**d)


# Published sizes (§4 table) and a CPU preset. D and V come from the encoder.
PRESETS = {
    "tiny": dict(depth=4, hidden=256, heads=4),
    "ELF-B": dict(depth=12, hidden=768, heads=12),
    "ELF-M": dict(depth=24, hidden=1056, heads=16),
    "ELF-L": dict(depth=32, hidden=1280, heads=16),
}


class RMSNorm(nn.Module):
    """RMSNorm with a learned scale (eps 1e-6)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()  # statistics in float32 even under bf16 autocast
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).type_as(x)


def rope_table(max_len: int, head_dim: int, theta: float):
    """cos/sin of shape (max_len, head_dim/2) for interleaved pairs (x[2k], x[2k+1])."""
    freqs = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (hd/2,)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * freqs[None, :]
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin):
    """Rotate interleaved pairs of x (B, n, L, hd) by per-position angles (L, hd/2)."""
    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]              # (B, n, L, hd/2)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2).type_as(x)                                # re-interleave


class Attention(nn.Module):
    """Bidirectional self-attention with QK-norm and RoPE on the sequence part only."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)      # q, k, v stacked; heads contiguous
        self.q_norm = RMSNorm(self.head_dim)
        self.k_norm = RMSNorm(self.head_dim)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x, cos, sin, n_prefix: int):
        B, T, H = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self.q_norm(q), self.k_norm(k)          # (B, n, T, hd) each
        # the 12 prefix positions carry no order: only the sequence is rotated (§4.4)
        q = torch.cat((q[:, :, :n_prefix], apply_rope(q[:, :, n_prefix:], cos, sin)), dim=2)
        k = torch.cat((k[:, :, :n_prefix], apply_rope(k[:, :, n_prefix:], cos, sin)), dim=2)
        y = F.scaled_dot_product_attention(q, k, v)     # full attention, no mask (§4.4)
        return self.proj(y.transpose(1, 2).reshape(B, T, H))


class SwiGLU(nn.Module):
    """Linear(H -> 2h) split into gate a and value b, silu(a) * b, Linear(h -> H)."""

    def __init__(self, hidden: int):
        super().__init__()
        h = int(4 * hidden * 2 / 3)
        self.w12 = nn.Linear(hidden, 2 * h)
        self.w3 = nn.Linear(h, hidden)

    def forward(self, x):
        a, b = self.w12(x).chunk(2, dim=-1)
        return self.w3(F.silu(a) * b)


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.norm1, self.attn = RMSNorm(hidden), Attention(hidden, heads)
        self.norm2, self.mlp = RMSNorm(hidden), SwiGLU(hidden)

    def forward(self, x, cos, sin, n_prefix: int):
        x = x + self.attn(self.norm1(x), cos, sin, n_prefix)
        return x + self.mlp(self.norm2(x))


class TimeEmbed(nn.Module):
    """Scalar -> 256 sinusoidal features (cos half, then sin half) -> MLP (§4.3)."""

    def __init__(self, hidden: int, n_freq: int = 256, max_period: float = 10000.0):
        super().__init__()
        half = n_freq // 2
        self.register_buffer("freqs", torch.exp(-math.log(max_period) * torch.arange(half) / half),
                             persistent=False)
        self.mlp_0, self.mlp_2 = nn.Linear(n_freq, hidden), nn.Linear(hidden, hidden)

    def forward(self, s):                                # s: (B,) in [0, 1] used as is
        args = s.float()[:, None] * self.freqs[None]     # (B, 128)
        feats = torch.cat((args.cos(), args.sin()), dim=-1)
        return self.mlp_2(F.silu(self.mlp_0(feats)))     # (B, H)


class DecoderHead(nn.Module):
    """Token logits from the final hidden states: Linear(H->D) -> GELU(tanh) -> Linear(D->V)."""

    def __init__(self, hidden: int, latent_dim: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden, latent_dim)
        self.unembed = nn.Linear(latent_dim, vocab_size)

    def forward(self, h):
        return self.unembed(F.gelu(self.proj(h), approximate="tanh"))


class ELF(nn.Module):
    def __init__(self, cfg: ELFConfig):
        super().__init__()
        self.cfg = cfg
        D, H, b = cfg.latent_dim, cfg.hidden, cfg.bottleneck
        if H % cfg.heads or (H // cfg.heads) % 2:
            raise ValueError(f"hidden {H} must split into {cfg.heads} heads of even size")
        self.self_cond_proj = nn.Linear(2 * D, D)                     # [z ; x_sc] -> D
        self.text_proj = nn.Module()                                  # bottleneck (§4.2)
        self.text_proj.proj1 = nn.Linear(D, b, bias=False)
        self.text_proj.proj2 = nn.Linear(b, H)
        self.t_embedder, self.self_cond_cfg_embedder = TimeEmbed(H), TimeEmbed(H)
        self.t_emb_tokens = nn.Parameter(torch.zeros(1, N_PREFIX, H))
        self.self_cond_cfg_tokens = nn.Parameter(torch.zeros(1, N_PREFIX, H))
        self.mode_tokens = nn.Parameter(torch.zeros(1, N_PREFIX, H))
        self.blocks = nn.ModuleList(Block(H, cfg.heads) for _ in range(cfg.depth))
        self.final_layer = nn.Module()                                # flow head: x-prediction
        self.final_layer.norm_final = RMSNorm(H)
        self.final_layer.linear = nn.Linear(H, D)
        self.decoder_head = DecoderHead(H, D, cfg.vocab_size)         # decode mode only
        cos, sin = rope_table(cfg.max_seq_len, H // cfg.heads, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.grad_checkpointing = False  # recompute each block in backward: memory for compute (ELF-L)
        self.init_weights()

    @torch.no_grad()
    def init_weights(self):
        """§4.6: Xavier-uniform weights, zero biases, N(0, 0.02) for learned tokens and the
        TimeEmbed MLPs, and a zero flow head so that x_hat = 0 at initialisation."""
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        for emb in (self.t_embedder, self.self_cond_cfg_embedder):
            for lin in (emb.mlp_0, emb.mlp_2):
                nn.init.normal_(lin.weight, std=0.02)
        for tok in (self.t_emb_tokens, self.self_cond_cfg_tokens, self.mode_tokens):
            nn.init.normal_(tok, std=0.02)
        nn.init.zeros_(self.final_layer.linear.weight)
        nn.init.zeros_(self.final_layer.linear.bias)

    def forward(self, z, t, w, x_sc=None, decode=None, logits_rows=None):
        """z, x_sc: (B, L, D) latents; t, w: (B,) time and SC-CFG scale; decode: (B,) bool
        mode gate (None = all denoise). Returns x_hat (B, L, D) and, when logits_rows (a 1-D
        index tensor) is given, the decoder logits of those rows (len(rows), L, V), else None."""
        B, L, _ = z.shape
        if L > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {L} exceeds the RoPE table (max_seq_len={self.cfg.max_seq_len})")
        if x_sc is None:
            x_sc = torch.zeros_like(z)
        gate = torch.zeros(B, device=z.device) if decode is None else decode.float()
        h = self.self_cond_proj(torch.cat((z, x_sc), dim=-1))         # (B, L, D)
        h = self.text_proj.proj2(self.text_proj.proj1(h))              # (B, L, H)
        prefix = torch.cat((
            self.t_emb_tokens + self.t_embedder(t)[:, None],           # (B, 4, H)
            self.self_cond_cfg_tokens + self.self_cond_cfg_embedder(w)[:, None],  # (B, 4, H)
            self.mode_tokens * gate[:, None, None].to(h.dtype),        # (B, 4, H): zeros when denoising
        ), dim=1)
        n_prefix = prefix.shape[1]
        h = torch.cat((prefix.to(h.dtype), h), dim=1)                  # (B, 12 + L, H)
        cos, sin = self.rope_cos[:L], self.rope_sin[:L]
        for block in self.blocks:
            if self.grad_checkpointing and torch.is_grad_enabled():
                h = checkpoint(block, h, cos, sin, n_prefix, use_reentrant=False)
            else:
                h = block(h, cos, sin, n_prefix)
        # both heads in float32 even under bf16 autocast: x_hat feeds a 1/(1-t) velocity and
        # the logits a softmax over the vocabulary, both sensitive to bf16 rounding
        with torch.autocast(h.device.type, enabled=False):
            h = h[:, n_prefix:].float()                                # (B, L, H)
            x_hat = self.final_layer.linear(self.final_layer.norm_final(h))  # (B, L, D)
            logits = None if logits_rows is None else self.decoder_head(h[logits_rows])  # (R, L, V)
        return x_hat, logits

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ----------------------------------------------------------------------------------------
# checkpoints (STYLE §10, §15): one folder holds everything needed to rebuild the model.
#   model.safetensors  raw weights ("model.*") + EMA ("ema.*"), the config JSON as metadata
#   optim.pt           optimiser state and step (tensors only: loads with weights_only=True)
#   config.json        the same config, for people to read
# Each file is written to a temp name and renamed: a crash never leaves a half-written file.


def atomic_write(path, write_fn):
    """write_fn(tmp_path), then rename over path."""
    tmp = f"{path}.tmp{os.getpid()}"
    write_fn(tmp)
    os.replace(tmp, path)  # atomic on POSIX: a reader sees the old file or the new one


def atomic_write_text(path, text: str):
    """Write a text file atomically (config.json, sample and report files)."""
    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    atomic_write(path, write)


def save_checkpoint(out_dir, model, ema, opt, step, meta):
    """Save unwrapped weights, EMA, optimiser (unless None) and step; meta is a JSON-able dict."""
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    meta = dict(meta, step=step)
    tensors = {**{f"model.{k}": v.contiguous() for k, v in model.state_dict().items()},
               **{f"ema.{k}": v.contiguous() for k, v in ema.state_dict().items()}}
    if opt is not None:  # None: a weights-only checkpoint (a converted release)
        atomic_write(os.path.join(out_dir, "optim.pt"), lambda p: torch.save({"opt": opt.state_dict(), "step": step}, p))
    atomic_write(os.path.join(out_dir, "model.safetensors"),
                 lambda p: save_file(tensors, p, metadata={"meta": json.dumps(meta)}))
    atomic_write_text(os.path.join(out_dir, "config.json"), json.dumps(meta, indent=2))


def load_for_resume(out_dir, model, ema, opt, model_cfg: dict):
    """Restore model, EMA and optimiser in place from out_dir; refuses another model config."""
    from safetensors import safe_open
    path = os.path.join(out_dir, "model.safetensors")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"init_from=resume but there is no checkpoint at {path}")
    with safe_open(path, framework="pt") as f:
        meta = json.loads(f.metadata()["meta"])
        if meta["model"] != model_cfg:
            diff = {k: (meta["model"].get(k), v) for k, v in model_cfg.items() if meta["model"].get(k) != v}
            raise ValueError(f"incompatible checkpoint in {out_dir}: model config differs (saved, now): {diff}")
        for name, module in (("model", model), ("ema", ema)):
            module.load_state_dict({k[len(name) + 1:]: f.get_tensor(k) for k in f.keys() if k.startswith(name + ".")})
    state = torch.load(os.path.join(out_dir, "optim.pt"), map_location="cpu", weights_only=True)
    if state["step"] != meta["step"]:
        raise ValueError(f"incompatible checkpoint in {out_dir}: optimiser at step {state['step']}, weights at {meta['step']}")
    opt.load_state_dict(state["opt"])
    return meta


def load_checkpoint(ckpt_dir: str, device="cpu", which: str = "ema"):
    """Rebuild the network from a train.py output folder. Returns (model, meta) where
    meta is the saved JSON config (train config, model config, latent statistics, step)."""
    from safetensors import safe_open
    path = os.path.join(ckpt_dir, "model.safetensors")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    with safe_open(path, framework="pt", device=str(device)) as f:
        meta = json.loads(f.metadata()["meta"])
        prefix = which + "."
        state = {k[len(prefix):]: f.get_tensor(k) for k in f.keys() if k.startswith(prefix)}
    model = ELF(ELFConfig.from_dict(meta["model"])).to(device)
    model.load_state_dict(state)
    return model.eval(), meta


# ----------------------------------------------------------------------------------------
# the authors' released checkpoints (ELF_SPEC Appendix A): same names but the decoder head,
# stored there as (in, out) kernels

HEAD = {"decoder_head.proj.weight": "proj_kernel", "decoder_head.proj.bias": "proj_bias",
        "decoder_head.unembed.weight": "unembed_kernel", "decoder_head.unembed.bias": "unembed_bias"}


def to_release(state: dict) -> dict:
    """This project's state dict -> the Appendix A layout."""
    out = {HEAD.get(k, k): v for k, v in state.items()}
    for k in ("proj_kernel", "unembed_kernel"):
        out[k] = out[k].t().contiguous()
    return out


def from_release(state: dict):
    """The Appendix A layout -> (ELFConfig keyword arguments, this project's state dict)."""
    state = {k.removeprefix("module.").removeprefix("_orig_mod."): v for k, v in state.items()}
    missing = [k for k in ("self_cond_proj.weight", "text_proj.proj2.weight", "unembed_kernel", "proj_kernel",
                           "blocks.0.attn.q_norm.weight") if k not in state]
    if missing:
        raise ValueError(f"incompatible checkpoint: not the ELF release layout (missing {', '.join(missing)})")
    inv = {v: k for k, v in HEAD.items()}
    ours = {inv.get(k, k): v for k, v in state.items()}
    for k in ("decoder_head.proj.weight", "decoder_head.unembed.weight"):
        ours[k] = ours[k].t().contiguous()
    hidden = state["text_proj.proj2.weight"].shape[0]
    cfg = dict(latent_dim=state["self_cond_proj.weight"].shape[0], vocab_size=state["unembed_kernel"].shape[1],
               hidden=hidden, bottleneck=state["text_proj.proj1.weight"].shape[0],
               depth=1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks.")),
               heads=hidden // state["blocks.0.attn.q_norm.weight"].shape[0])
    return cfg, ours


def convert_release(path, out_dir, encoder="t5-small", latent_mean=0.0, latent_std=0.2, max_seq_len=1024):
    """A released `torch.save` dict with `params` and `ema_params1` -> a checkpoint folder
    that load_checkpoint / load_sampler / this CLI read. Loaded with weights_only=True."""
    from flow import FlowConfig
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no released checkpoint at {path}")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or "params" not in ckpt:
        raise ValueError(f"incompatible checkpoint {path}: expected a dict with 'params' and 'ema_params1'")
    cfg, params = from_release(ckpt["params"])
    _, ema = from_release(ckpt.get("ema_params1", ckpt["params"]))
    mcfg = ELFConfig(max_seq_len=max_seq_len, **cfg)
    model, ema_model = ELF(mcfg), ELF(mcfg)
    model.load_state_dict(params)          # strict: a wrong layout fails here, naming the keys
    ema_model.load_state_dict(ema)
    meta = {"train": {"encoder": encoder, "encoder_dtype": "float32", "max_length": max_seq_len},
            "model": asdict(mcfg), "flow": asdict(FlowConfig()), "source": os.path.abspath(path),
            "latent_stats": {"mean": latent_mean, "std": latent_std}}
    save_checkpoint(out_dir, model, ema_model, None, 0, meta)
    return out_dir
