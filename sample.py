"""Sampling from a trained ELF (ELF_SPEC §8): integrate noise -> latent, then decode to tokens.

This file holds the plain Euler ODE sampler used to print samples at the end of training
and the decode-mode forward (§8: one forward at t = 1 with the mode tokens on and the
self-conditioning input zeroed, argmax, cut at the first EOS).

Usage (library):
    z = euler_sample(model, n=4, length=64, steps=32, sc_cfg=3.0, generator=g)
    ids = decode_latents(model, z, sc_cfg=3.0)                    # (n, length) token ids
"""

import torch

from flow import FlowConfig, x_to_v


@torch.no_grad()
def euler_sample(model, n: int, length: int, steps: int, sc_cfg: float = 1.0,
                 flow: FlowConfig = FlowConfig(), generator=None, device="cpu"):
    """Euler ODE from z_0 = s * eps at t = 0 to t = 1 on a uniform grid, feeding each step's
    x_hat back as the self-conditioning input. Returns the final latent (n, length, D)."""
    D = model.cfg.latent_dim
    z = flow.noise_scale * torch.randn(n, length, D, generator=generator, device=device)
    x_sc = torch.zeros_like(z)
    w = torch.full((n,), float(sc_cfg), device=device)
    grid = torch.linspace(0, 1, steps + 1, device=device)
    for t, t_next in zip(grid[:-1], grid[1:]):
        tt = t.expand(n)
        x_hat, _ = model(z, tt, w, x_sc=x_sc)
        z = z + (t_next - t) * x_to_v(x_hat.float(), z, tt, flow.t_eps)
        x_sc = x_hat
    return z


@torch.no_grad()
def decode_latents(model, z, sc_cfg: float = 1.0):
    """Decode-mode forward at t = 1 with x_sc = 0; returns argmax ids (n, L)."""
    n = z.shape[0]
    ones = torch.ones(n, device=z.device)
    decode = torch.ones(n, dtype=torch.bool, device=z.device)
    _, logits = model(z, ones, ones * sc_cfg, decode=decode,
                      logits_rows=torch.arange(n, device=z.device))
    return logits.argmax(-1)
