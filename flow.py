"""The flow-matching objective of ELF as a few pure functions (METHOD.md, "Conventions", "The objective").

Time convention (pinned by tests/test_flow.py): t = 0 is pure noise, t = 1 is data.

    z_t   = t * x + (1 - t) * s * eps                       (rectified-flow interpolation)
    v     = (x - z_t) / max(1 - t, t_eps)                   (velocity of the straight path)
    v_hat = (x_hat - z_t) / max(1 - t, t_eps)               (the net predicts x: x-prediction)

The loss is the v-space MSE, i.e. x-prediction weighted by 1 / (1 - t)^2. One training
batch mixes two branches per example: *denoise* (MSE on the velocity, with
self-conditioning and the SC-CFG guided target) and *decode* (cross-entropy of the
decoder head on a mildly corrupted clean latent). `elf_loss` computes both in one
forward pass of the shared trunk. For conditional generation the condition's positions
are held at their clean latents in the denoise rows' inputs (`hold`) and left out of the
loss mask (conditional.py has the condition's whole path).

Usage:
    loss, metrics = elf_loss(model, x, tokens, loss_mask, FlowConfig(), generator)
"""

import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class FlowConfig:
    noise_scale: float = 2.0          # s: denoiser_noise_scale [release]
    t_eps: float = 0.05               # clamp on 1 - t in x -> v
    p_mean: float = -1.5              # logit-normal time distribution [release]
    p_std: float = 0.8
    decoder_prob: float = 0.2         # share of decode-branch examples
    decoder_noise_scale: float = 5.0  # s_dec: 5.0 unconditional, 1.0 conditional
    dec_lam_mean: float = 0.8         # lam = sigmoid(N(0.8, 0.8)) per token
    dec_lam_std: float = 0.8
    self_cond_prob: float = 0.5
    sc_cfg_min: float = 0.5           # SC-CFG scale w in [min, max]: 1 + w log-uniform in [1.5, 6]
    sc_cfg_max: float = 5.0
    prediction: str = "x"             # what the network outputs: 'x' (the method), 'v' or 'eps' (ablations)


def randn(shape, like, generator=None):
    return torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)


def rand(shape, like, generator=None):
    return torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)


def sample_t(n, like, cfg: FlowConfig, generator=None):
    """Logit-normal times t = sigmoid(N(p_mean, p_std)), shape (n,): most mass near noise."""
    return torch.sigmoid(cfg.p_mean + cfg.p_std * randn((n,), like, generator))


def sample_sc_cfg(n, like, cfg: FlowConfig, generator=None):
    """SC-CFG scale w, log-uniform as released: a = 1 + min, b = 1 + max, w = a (b/a)^u - 1.
    So sc_cfg_min/max bound w itself (0.5 and 5); METHOD.md's 1.5 and 6 are the bounds of 1 + w."""
    a, b = 1.0 + cfg.sc_cfg_min, 1.0 + cfg.sc_cfg_max
    return a * (b / a) ** rand((n,), like, generator) - 1.0


def mark_varying_rows(*tensors, unbacked: bool = False):
    """Tell torch.compile that dim 0 of these tensors is a row count drawn afresh every step
    (the self-conditioning rows, the decode rows), so that it builds one graph for all counts
    at once instead of a static graph on the first step and a dynamic one on the second.
    `unbacked`: no special graphs for 0 or 1 rows either (a decode-row count of 0 or 1 is
    common at small batches). Only attributes on the tensors: eager numbers are unchanged,
    and a process that compiled nothing (torch._dynamo not imported) skips it."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return
    for a in tensors:
        if unbacked:
            dynamo.decorators.mark_unbacked(a, 0)
        else:
            dynamo.maybe_mark_dynamic(a, 0)


def interpolate(x, eps, t, noise_scale: float):
    """z_t = t x + (1 - t) s eps, with t of shape (B,) broadcast over (B, L, D)."""
    t = t.view(-1, 1, 1)
    return t * x + (1 - t) * noise_scale * eps


def x_to_v(x_hat, z, t, t_eps: float):
    """Velocity implied by an x-prediction: (x_hat - z) / max(1 - t, t_eps)."""
    return (x_hat - z) / (1 - t).clamp(min=t_eps).view(-1, 1, 1)


def v_to_x(v, z, t, t_eps: float):
    """Inverse of x_to_v: x = z + max(1 - t, t_eps) v."""
    return z + (1 - t).clamp(min=t_eps).view(-1, 1, 1) * v


def to_x(out, z, t, cfg: FlowConfig):
    """The network's output as an x-prediction. 'x': as is. 'v': a velocity, x = z + max(1 - t,
    t_eps) v. 'eps': the noise, x = (z - (1 - t) s eps) / max(t, t_eps), which divides by t and
    so is ill-posed near noise (the paper's ablation: eps-prediction collapses). The loss stays
    the velocity MSE whatever the parameterisation, so only this conversion differs."""
    if cfg.prediction == "x":
        return out
    if cfg.prediction == "v":
        return v_to_x(out, z, t, cfg.t_eps)
    if cfg.prediction == "eps":
        t = t.view(-1, 1, 1)
        return (z - (1 - t) * cfg.noise_scale * out) / t.clamp(min=cfg.t_eps)
    raise ValueError(f"unknown prediction '{cfg.prediction}' (choose from x, v, eps)")


def sc_cfg_target(v, v_cond, v_uncond, sc_cfg):
    """The SC-CFG guided velocity target: v + (1 - 1/w) (v_cond - v_uncond), w = sc_cfg: (B,).
    Trained on this, one forward with x_sc = the previous prediction and scale w gives the
    guided velocity at sampling time, with no extra pass. w = 1 is the plain target."""
    return v + (1 - 1 / sc_cfg).view(-1, 1, 1) * (v_cond - v_uncond)


def hold(a, x, cond):
    """a (B, L, D) with the condition's positions cond (B, L) bool held at their clean latents
    x (conditional.py, step 4): in the denoise rows' inputs here and after every sampler step."""
    return a if cond is None else torch.where(cond[..., None], x, a)


def elf_loss(model, x, tokens, loss_mask, cfg: FlowConfig, generator=None, cond=None):
    """The mixed-batch loss (METHOD.md, "The objective").

    x: (B, L, D) clean normalised latents; tokens: (B, L) ids the latents encode, as rows of
    the decoder's logits (`ELF.logit_targets`: the ids themselves unless its vocabulary is cut);
    loss_mask: (B, L) bool, the tokens that count (for conditional rows, never the condition:
    conditional.Masks.loss). cond: (B, L) bool, the condition positions of conditional
    generation (None: unconditional): on denoise rows clean in z and in the self-conditioning
    input (`hold`; decode rows corrupt them like any position, as released). Returns
    (loss, metrics) with
    loss = (sum CE over decode tokens + sum MSE over denoise tokens) / #masked tokens."""
    B = x.shape[0]
    eps = randn(x.shape, x, generator)
    decode = rand((B,), x, generator) < cfg.decoder_prob                   # (B,) branch
    t = torch.where(decode, torch.ones_like(x[:, 0, 0]), sample_t(B, x, cfg, generator))
    sc_cfg = sample_sc_cfg(B, x, cfg, generator)                           # (B,) scale w

    # inputs: z_t for denoise rows, a per-token mildly corrupted x for decode rows
    lam = torch.sigmoid(cfg.dec_lam_mean + cfg.dec_lam_std * randn(x.shape[:2] + (1,), x, generator))
    z_dec = lam * x + (1 - lam) * cfg.decoder_noise_scale * eps
    # the condition is held clean on denoise rows only: decode rows corrupt every position
    z_t = hold(interpolate(x, eps, t, cfg.noise_scale), x, cond)
    z = torch.where(decode.view(-1, 1, 1), z_dec, z_t)

    # self-conditioning with the SC-CFG target, on a random half of the denoise rows
    v_target = x_to_v(x, z, t, cfg.t_eps)
    x_sc = hold(torch.zeros_like(x), x, cond) * (~decode).view(-1, 1, 1)   # decode rows: x_sc = 0
    use_sc = ~decode & (rand((B,), x, generator) < cfg.self_cond_prob)
    rows = use_sc.nonzero().squeeze(1)
    if rows.numel() > 0:
        with torch.no_grad():                                              # 2 no-grad forwards
            zs, ts, ws, xs = z[rows], t[rows], sc_cfg[rows], x_sc[rows]
            mark_varying_rows(zs, ts, ws, xs)                              # (S, L, D), (S,), (S,), (S, L, D)
            x_uncond = to_x(model(zs, ts, ws, x_sc=xs)[0].to(x.dtype), zs, ts, cfg)   # x_sc = 0
            if cond is not None:
                x_uncond = hold(x_uncond, x[rows], cond[rows])
            mark_varying_rows(x_uncond)
            x_cond = to_x(model(zs, ts, ws, x_sc=x_uncond)[0], zs, ts, cfg)                    # x_sc = own guess
            v_u, v_c = x_to_v(x_uncond, zs, ts, cfg.t_eps), x_to_v(x_cond, zs, ts, cfg.t_eps)
            guided = sc_cfg_target(v_target[rows], v_c.float(), v_u.float(), ws)
        x_sc = x_sc.index_copy(0, rows, x_uncond.to(x_sc.dtype))
        v_target = v_target.index_copy(0, rows, guided)

    # one forward of the shared trunk; logits only for decode rows (the vocab projection is
    # the most expensive layer, and denoise rows never use it)
    dec_rows = decode.nonzero().squeeze(1)                                 # (R,)
    mark_varying_rows(dec_rows, unbacked=True)
    out, logits = model(z, t, sc_cfg, x_sc=x_sc, decode=decode, logits_rows=dec_rows)
    x_hat = to_x(out.float(), z, t, cfg)                                   # (B, L, D)
    mse = (x_to_v(x_hat, z, t, cfg.t_eps) - v_target).pow(2).mean(-1)      # (B, L)
    return mixed_loss(mse, logits, tokens, loss_mask, decode)


def mixed_loss(mse, logits, tokens, loss_mask, decode):
    """The combination of one mixed batch: mse (B, L) per-token error of every row (used on
    denoise rows), logits (R, L, V) of the R decode rows. One sum over both branches' loss
    tokens divided by their number. Returns (loss, metrics)."""
    dec_rows = decode.nonzero().squeeze(1)
    ce = F.cross_entropy(logits.float().flatten(0, 1), tokens[dec_rows].flatten(),
                         reduction="none").view(len(dec_rows), tokens.shape[1])  # (R, L)
    mask = loss_mask.float()
    den_mask = mask * (~decode).float()[:, None]
    dec_mask = mask[dec_rows]
    n_tok = mask.sum().clamp(min=1)
    loss = ((mse * den_mask).sum() + (ce * dec_mask).sum()) / n_tok
    metrics = {
        "mse": ((mse * den_mask).sum() / den_mask.sum().clamp(min=1)).detach(),
        "ce": ((ce * dec_mask).sum() / dec_mask.sum().clamp(min=1)).detach(),
        "n_mse": den_mask.sum().detach(), "n_ce": dec_mask.sum().detach(),
    }
    return loss, metrics
