"""The flow-matching objective of ELF and its samplers, as small pure functions (METHOD.md,
"Conventions", "The objective", "Sampling").

Time convention (pinned by tests/test_flow.py): t = 0 is pure noise, t = 1 is data.

    z_t   = t * x + (1 - t) * s * eps                       (rectified-flow interpolation)
    v     = (x - z_t) / max(1 - t, t_eps)                   (velocity of the straight path)
    v_hat = (x_hat - z_t) / max(1 - t, t_eps)               (the net predicts x: x-prediction)

The objective (first half). The loss is the v-space MSE, i.e. x-prediction weighted by
1 / (1 - t)^2. One training batch mixes two branches per example: *denoise* (MSE on the
velocity, with self-conditioning and the SC-CFG guided target) and *decode* (cross-entropy
of the decoder head on a mildly corrupted clean latent, `decode_inputs`). `elf_loss`
computes both in one forward pass of the shared trunk. For conditional generation the
condition's positions are held at their clean latents in the denoise rows' inputs (`hold`)
and left out of the loss mask (conditional.py has the condition's whole path).

The samplers (second half): the released presets (`PRESETS`), one noise stream per sample,
time grids (uniform, or drawn from the training time distribution `logit_normal`), the guided
`Denoiser`, one step each for Euler (`ode_step`), the churned SDE (`sde_step`) and Heun
(`heun_step`), the loop `sample_latents`, and `decode_latents` (decode mode at t = 1).

Usage:
    loss, metrics = elf_loss(model, x, tokens, loss_mask, FlowConfig(), generator)
    z, _ = sample_latents(Denoiser(model), noise, time_grid(32), "ode")
    ids = decode_latents(model, z)
"""

import hashlib
import math
import sys
from dataclasses import dataclass
from typing import Annotated

import torch
import torch.nn.functional as F
from tqdm import tqdm


@dataclass
class FlowConfig:
    """The objective's settings; TrainConfig (lib/config.py) inherits them as its keys. An
    annotation's second part is the key's check: a range or a tuple of choices."""

    noise_scale: Annotated[float, "positive"] = 2.0  # s in z_t = t x + (1 - t) s eps [release]
    t_eps: Annotated[float, "positive"] = 0.05  # clamp on 1 - t in x -> v
    # t = sigmoid(N(p_mean, p_std)): p_mean < 0 puts most times near noise [release]
    p_mean: float = -1.5
    p_std: Annotated[float, "positive"] = 0.8
    decoder_prob: Annotated[float, "probability"] = 0.2  # share of decode-branch rows
    # decode rows' noise s_dec: 5.0 unconditional, 1.0 conditional
    decoder_noise_scale: Annotated[float, "positive"] = 5.0
    dec_lam_mean: float = 0.8  # decode rows: lam = sigmoid(N(mean, std)) per token
    dec_lam_std: Annotated[float, "positive"] = 0.8
    # share of denoise rows trained with self-conditioning
    self_cond_prob: Annotated[float, "probability"] = 0.5
    sc_cfg_min: float = 0.5  # SC-CFG scale w in [min, max]: 1 + w log-uniform in [1.5, 6]
    sc_cfg_max: float = 5.0
    # the net predicts 'x' (the method), 'v' or 'eps' (ablations)
    prediction: Annotated[str, ("x", "v", "eps")] = "x"


def randn(shape, like, generator=None):
    return torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)


def rand(shape, like, generator=None):
    return torch.rand(shape, generator=generator, device=like.device, dtype=like.dtype)


def logit_normal(u, cfg: FlowConfig):
    """The training time distribution, t = sigmoid(p_mean + p_std u) for standard normal u:
    written once, for the training times (`sample_t`) and the time grids (`time_grid`)."""
    return torch.sigmoid(cfg.p_mean + cfg.p_std * u)


def sample_t(n, like, cfg: FlowConfig, generator=None):
    """Training times drawn from `logit_normal`, shape (n,): most mass near noise."""
    return logit_normal(randn((n,), like, generator), cfg)


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


def decode_inputs(x, eps, cfg: FlowConfig, generator=None):
    """The decode branch's inputs: each token's clean latent mildly corrupted,
    lam x + (1 - lam) s_dec eps with lam = sigmoid(N(dec_lam_mean, dec_lam_std)) per token,
    (B, L, D). The decoder learns to read tokens from nearly clean latents."""
    lam = torch.sigmoid(
        cfg.dec_lam_mean + cfg.dec_lam_std * randn(x.shape[:2] + (1,), x, generator)
    )
    return lam * x + (1 - lam) * cfg.decoder_noise_scale * eps


def elf_loss(model, x, tokens, loss_mask, cfg: FlowConfig, generator=None, cond=None):
    """The mixed-batch loss (METHOD.md, "The objective").

    x: (B, L, D) clean normalised latents; tokens: (B, L) ids the latents encode, as indices of
    the decoder's logits (`ELF.vocab_index`: the ids themselves unless its vocabulary is cut);
    loss_mask: (B, L) bool, the tokens that count (for conditional rows, never the condition:
    conditional.Masks.loss), or float, each token's weight (conditional.Masks.weights).
    cond: (B, L) bool, the condition positions of conditional generation (None:
    unconditional): on denoise rows clean in z and in the self-conditioning input (`hold`;
    decode rows corrupt them like any position, as released). Returns (loss, metrics) with
    loss = (sum CE over decode tokens + sum MSE over denoise tokens) / #masked tokens (sums
    and count weighted where loss_mask is)."""
    B = x.shape[0]
    eps = randn(x.shape, x, generator)
    decode = rand((B,), x, generator) < cfg.decoder_prob  # (B,) branch
    t = torch.where(decode, torch.ones_like(x[:, 0, 0]), sample_t(B, x, cfg, generator))
    sc_cfg = sample_sc_cfg(B, x, cfg, generator)  # (B,) scale w

    # inputs: z_t for denoise rows, a per-token mildly corrupted x for decode rows
    z_dec = decode_inputs(x, eps, cfg, generator)
    # the condition is held clean on denoise rows only: decode rows corrupt every position
    z_t = hold(interpolate(x, eps, t, cfg.noise_scale), x, cond)
    z = torch.where(decode.view(-1, 1, 1), z_dec, z_t)

    # self-conditioning with the SC-CFG target, on a share self_cond_prob of the denoise rows
    v_target = x_to_v(x, z, t, cfg.t_eps)
    x_sc = hold(torch.zeros_like(x), x, cond) * (~decode).view(-1, 1, 1)  # decode rows: x_sc = 0
    use_sc = ~decode & (rand((B,), x, generator) < cfg.self_cond_prob)
    sc_idx = use_sc.nonzero().squeeze(1)
    if sc_idx.numel() > 0:
        with torch.no_grad():  # 2 no-grad forwards
            zs, ts, ws, xs = z[sc_idx], t[sc_idx], sc_cfg[sc_idx], x_sc[sc_idx]
            mark_varying_rows(zs, ts, ws, xs)  # (S, L, D), (S,), (S,), (S, L, D)
            x_uncond = to_x(model(zs, ts, ws, x_sc=xs)[0].to(x.dtype), zs, ts, cfg)  # x_sc = 0
            if cond is not None:
                x_uncond = hold(x_uncond, x[sc_idx], cond[sc_idx])
            mark_varying_rows(x_uncond)
            x_cond = to_x(model(zs, ts, ws, x_sc=x_uncond)[0], zs, ts, cfg)  # x_sc = own guess
            v_u, v_c = x_to_v(x_uncond, zs, ts, cfg.t_eps), x_to_v(x_cond, zs, ts, cfg.t_eps)
            guided = sc_cfg_target(v_target[sc_idx], v_c.float(), v_u.float(), ws)
        x_sc = x_sc.index_copy(0, sc_idx, x_uncond.to(x_sc.dtype))
        v_target = v_target.index_copy(0, sc_idx, guided)

    # one forward of the shared trunk; logits only for decode rows (the vocab projection is
    # the most expensive layer, and denoise rows never use it)
    dec_idx = decode.nonzero().squeeze(1)  # (R,)
    mark_varying_rows(dec_idx, unbacked=True)
    out, logits = model(z, t, sc_cfg, x_sc=x_sc, decode=decode, decode_idx=dec_idx)
    x_hat = to_x(out.float(), z, t, cfg)  # (B, L, D)
    mse = (x_to_v(x_hat, z, t, cfg.t_eps) - v_target).pow(2).mean(-1)  # (B, L)
    return mixed_loss(mse, logits, tokens, loss_mask, decode)


def mixed_loss(mse, logits, tokens, loss_mask, decode):
    """The combination of one mixed batch: mse (B, L) per-token error of every row (used on
    denoise rows), logits (R, L, V) of the R decode rows. One sum over both branches' loss
    tokens divided by their number; with float weights (loss_mask), weighted sums divided by
    the weights' sum, and the metrics (mse, ce, n_mse, n_ce) weighted alike. Returns
    (loss, metrics)."""
    dec_idx = decode.nonzero().squeeze(1)
    ce = F.cross_entropy(
        logits.float().flatten(0, 1), tokens[dec_idx].flatten(), reduction="none"
    ).view(len(dec_idx), tokens.shape[1])  # (R, L)
    mask = loss_mask.float()
    den_mask = mask * (~decode).float()[:, None]
    dec_mask = mask[dec_idx]
    n_tok = mask.sum().clamp(min=1)
    loss = ((mse * den_mask).sum() + (ce * dec_mask).sum()) / n_tok
    metrics = {
        "mse": ((mse * den_mask).sum() / den_mask.sum().clamp(min=1)).detach(),
        "ce": ((ce * dec_mask).sum() / dec_mask.sum().clamp(min=1)).detach(),
        "n_mse": den_mask.sum().detach(),
        "n_ce": dec_mask.sum().detach(),
    }
    return loss, metrics


# ========================================================================================
# sampling: noise -> latent (METHOD.md, "Sampling")

# sampler settings: the authors' released ones (METHOD.md, "Sampling"), all on the logit-normal grid
PRESETS = {
    "uncond32": dict(
        sampler="sde", steps=32, gamma=1.5, sc_cfg=3.0, guidance=1.0, grid="logit_normal"
    ),
    "uncond64": dict(
        sampler="sde", steps=64, gamma=1.0, sc_cfg=3.0, guidance=1.0, grid="logit_normal"
    ),
    "cond64": dict(
        sampler="ode", steps=64, gamma=0.0, sc_cfg=1.0, guidance=2.0, grid="logit_normal"
    ),
    # not released: the Euler ODE (results/first_run compares it with the released SDE)
    "ode32": dict(
        sampler="ode", steps=32, gamma=0.0, sc_cfg=1.0, guidance=1.0, grid="logit_normal"
    ),
    # the same on the uniform grid (the CPU default's; results/recipe compares the two): the
    # logit-normal grid follows the training times, mostly near noise, and ends in one long step
    "ode32_uniform": dict(
        sampler="ode", steps=32, gamma=0.0, sc_cfg=1.0, guidance=1.0, grid="uniform"
    ),
    # distilled few-step students (distill.py): fewstep1 ... fewstep32. A span-d student has
    # learned jumps of exactly d, so `grid=uniform` is the natural alternative; the release
    # samples them on the logit-normal grid like the rest (results/distill_tiny compares both)
    **{
        f"fewstep{n}": dict(
            sampler="sde",
            steps=n,
            gamma=1.5 if n <= 8 else 2.0,
            sc_cfg=2.5 if n <= 8 else 2.0,
            guidance=1.0,
            grid="logit_normal",
        )
        for n in (1, 2, 4, 8, 16, 32)
    },
}


# ----------------------------------------------------------------------------------------
# randomness: one stream per sample


def noise_stream(seed: int, key, device="cpu") -> torch.Generator:
    """A generator seeded by (seed, key) alone: key i is sample i's stream (its starting noise,
    then its SDE churn, step by step), key "grid" the run's time grid. Sample i then does not
    depend on the batch it is drawn in, nor on which device draws it (lib/shards.py)."""
    # streams of nearby seeds stay unrelated
    h = hashlib.sha256(f"{seed}/{key}".encode()).digest()
    return torch.Generator(device).manual_seed(int.from_bytes(h[:8], "little"))


def randn_streams(shape, generator, device):
    """Standard normal noise; `generator` one torch.Generator for the whole tensor, or a list of
    them, one per row (row j's noise then comes from its own stream alone)."""
    if isinstance(generator, (list, tuple)):
        return torch.stack([torch.randn(shape[1:], generator=g, device=device) for g in generator])
    return torch.randn(shape, generator=generator, device=device)


# ----------------------------------------------------------------------------------------
# time grids: t_0 = 0 < t_1 < ... < t_n = 1


def time_grid(
    steps: int, kind: str = "uniform", flow: FlowConfig = FlowConfig(), generator=None, device="cpu"
):
    """uniform: linspace. logit_normal: the n - 1 interior points drawn from the training
    time distribution and sorted (random per call, as released). logit_normal_quantile: the
    deterministic quantiles k/n of the same distribution."""
    if kind == "uniform":
        return torch.linspace(0, 1, steps + 1, device=device)
    if kind == "logit_normal":
        u = torch.randn(steps - 1, generator=generator, device=device)
    elif kind == "logit_normal_quantile":
        q = torch.arange(1, steps, device=device, dtype=torch.float64) / steps
        u = (math.sqrt(2) * torch.special.erfinv(2 * q - 1)).float()  # standard normal quantiles
    else:
        raise ValueError(
            f"unknown time grid '{kind}' (uniform, logit_normal, logit_normal_quantile)"
        )
    inner = logit_normal(u, flow).sort().values
    return torch.cat(
        [torch.zeros(1, device=device), inner.to(device), torch.ones(1, device=device)]
    )


# ----------------------------------------------------------------------------------------
# the guided denoiser: one call = x_hat at (z, t) with self-conditioning, SC-CFG, CFG, clamping


class Denoiser:
    """Wraps the network for sampling. `cond` (B, L) bool marks the condition's positions, held
    at their clean latents `x_cond` (a source of conditional generation, or given text to
    infill); with a CFG scale `guidance` != 1 and a condition, x_hat = x_u + guidance (x_c -
    x_u), the unconditional pass zeroing `cond`. `sc_cfg` is the SC-CFG scale (METHOD.md's w)
    fed to the network's SC-CFG tokens."""

    def __init__(
        self,
        model,
        sc_cfg=1.0,
        guidance=1.0,
        cond=None,
        x_cond=None,
        flow: FlowConfig = FlowConfig(),
    ):
        self.model, self.guidance, self.flow, self.nfe = model, guidance, flow, 0
        self.sc_cfg, self.cond, self.x_cond = sc_cfg, cond, x_cond

    def hold(self, z):
        """The condition's positions held at their clean latents (velocity 0 there)."""
        return hold(z, self.x_cond, self.cond)

    def __call__(self, z, t, x_sc):
        B = z.shape[0]
        t, sc_cfg = t.expand(B), torch.full((B,), float(self.sc_cfg), device=z.device)
        if self.flow.self_cond_prob == 0:  # trained without self-conditioning: none here either
            x_sc = torch.zeros_like(x_sc)
        z, x_sc = self.hold(z), self.hold(x_sc)
        x_hat = to_x(self.model(z, t, sc_cfg, x_sc=x_sc)[0], z, t, self.flow)
        self.nfe += 1
        if self.guidance != 1.0 and self.cond is not None:
            drop = lambda a: a.masked_fill(self.cond[..., None], 0.0)
            x_u = to_x(self.model(drop(z), t, sc_cfg, x_sc=drop(x_sc))[0], drop(z), t, self.flow)
            self.nfe += 1
            x_hat = x_u + self.guidance * (x_hat - x_u)
        return self.hold(x_hat.float())


# ----------------------------------------------------------------------------------------
# one step each: (z at t) -> (z at t_next, x_hat)


def ode_step(denoiser, z, t, t_next, x_sc):
    """Euler: z <- z + (t_next - t) v_hat(z, t)."""
    x_hat = denoiser(z, t, x_sc)
    return z + (t_next - t) * x_to_v(x_hat, z, t.expand(z.shape[0]), denoiser.flow.t_eps), x_hat


def sde_step(denoiser, z, t, t_next, x_sc, gamma: float, generator=None, churn="linear"):
    """Churn: step back to t_back = alpha t by re-injecting noise, then an Euler step
    from t_back to t_next. alpha = clip(1 - gamma (t_next - t), 0, 1); gamma = 0 is the ODE.

    churn="linear" is the released rule, z_back = alpha z + (1 - alpha) s eps: the noise
    coefficients add linearly, so z_back carries less noise than a true sample at t_back
    and the sampler sharpens the distribution (tests/test_sample.py measures it).
    churn="marginal" adds the noise that makes z_back a true sample at t_back:
    std s * sqrt((1 - t_back)^2 - alpha^2 (1 - t)^2)."""
    alpha = (1 - gamma * (t_next - t)).clamp(0, 1)
    if gamma > 0:
        eps = randn_streams(z.shape, generator, z.device)  # generator: one, or one per row
        s, t_back = denoiser.flow.noise_scale, alpha * t
        if churn == "linear":
            z = alpha * z + (1 - alpha) * s * eps
        elif churn == "marginal":
            z = (
                alpha * z
                + s * ((1 - t_back) ** 2 - (alpha * (1 - t)) ** 2).clamp(min=0).sqrt() * eps
            )
        else:
            raise ValueError(f"unknown churn '{churn}' (linear, marginal)")
    return ode_step(denoiser, z, alpha * t, t_next, x_sc)


def heun_step(denoiser, z, t, t_next, x_sc):
    """Heun (2nd order): average the slopes at both ends; Euler on the last interval, where
    the slope at t = 1 is degenerate (1 - t is clamped)."""
    z_euler, x_hat = ode_step(denoiser, z, t, t_next, x_sc)
    if t_next >= 1:
        return z_euler, x_hat
    B, eps = z.shape[0], denoiser.flow.t_eps
    x_next = denoiser(z_euler, t_next, x_hat)
    v = 0.5 * (x_to_v(x_hat, z, t.expand(B), eps) + x_to_v(x_next, z_euler, t_next.expand(B), eps))
    return z + (t_next - t) * v, x_next


@torch.no_grad()
def sample_latents(
    denoiser,
    z,
    grid,
    sampler="ode",
    gamma=0.0,
    generator=None,
    trajectory=False,
    progress=False,
    churn="linear",
):
    """Integrate from z (at grid[0] = 0) to t = 1. Each step's x_hat becomes the next
    self-conditioning input; the last interval is always an ODE step. Returns the final
    latent (B, L, D) and, if asked, the list of x_hat per step."""
    if sampler not in ("ode", "sde", "heun"):
        raise ValueError(f"unknown sampler '{sampler}' (ode, sde, heun)")
    x_sc, xs = torch.zeros_like(z), []
    n = len(grid) - 1
    for i in tqdm(range(n), desc=f"{sampler} x{n}", disable=not progress, leave=False):
        t, t_next = grid[i], grid[i + 1]
        if sampler == "heun":
            z, x_sc = heun_step(denoiser, z, t, t_next, x_sc)
        elif sampler == "sde" and i < n - 1:
            z, x_sc = sde_step(denoiser, z, t, t_next, x_sc, gamma, generator, churn)
        else:
            z, x_sc = ode_step(denoiser, z, t, t_next, x_sc)
        if trajectory:
            xs.append(x_sc)
    return denoiser.hold(z), xs


@torch.no_grad()
def decode_latents(model, z, sc_cfg: float = 1.0):
    """Decode-mode forward at t = 1 with x_sc = 0; returns argmax token ids (n, L)."""
    n = z.shape[0]
    ones = torch.ones(n, device=z.device)
    _, logits = model(
        z,
        ones,
        ones * sc_cfg,
        decode=torch.ones(n, dtype=torch.bool, device=z.device),
        decode_idx=torch.arange(n, device=z.device),
    )
    return model.token_ids(logits.argmax(-1))


def sampler_settings(preset: str, **overrides) -> dict:
    """The sampler settings of PRESETS[preset] (sampler, steps, gamma, sc_cfg, guidance, grid),
    some replaced by `overrides`: the presets are the one place their defaults are written."""
    s = dict(PRESETS[preset])
    unknown = sorted(set(overrides) - set(s))
    if unknown:
        raise TypeError(f"unknown sampler setting '{unknown[0]}' (a preset sets {', '.join(s)})")
    return {**s, **overrides}
