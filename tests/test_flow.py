"""flow.py: the time convention, x <-> v, the decode-branch CE, the SC-CFG target, overfitting."""

import math

import pytest
import torch

from flow import (
    FlowConfig,
    elf_loss,
    interpolate,
    sample_sc_cfg,
    sample_t,
    sc_cfg_target,
    v_to_x,
    x_to_v,
)
from model import ELF, ELFConfig


def tiny_model(D=8, V=11, seed=0):
    torch.manual_seed(seed)
    return ELF(
        ELFConfig(
            latent_dim=D, vocab_size=V, hidden=32, depth=2, heads=2, bottleneck=8, max_seq_len=16
        )
    )


def test_time_convention_t0_is_noise_t1_is_data():
    x, eps = torch.randn(3, 5, 4), torch.randn(3, 5, 4)
    s = 2.0
    assert torch.equal(interpolate(x, eps, torch.zeros(3), s), s * eps)
    assert torch.equal(interpolate(x, eps, torch.ones(3), s), x)
    mid = interpolate(x, eps, torch.full((3,), 0.25), s)
    assert torch.allclose(mid, 0.25 * x + 0.75 * s * eps)


def test_x_v_round_trip_and_clamp():
    x_hat, z = torch.randn(4, 6, 3), torch.randn(4, 6, 3)
    t = torch.tensor([0.0, 0.5, 0.97, 1.0])
    v = x_to_v(x_hat, z, t, t_eps=0.05)
    assert torch.allclose(v_to_x(v, z, t, t_eps=0.05), x_hat, atol=1e-6)
    # near data the divisor is clamped at t_eps, not 1 - t
    assert torch.allclose(v[3], (x_hat[3] - z[3]) / 0.05)
    assert torch.allclose(v[1], (x_hat[1] - z[1]) / 0.5)
    # the exact target velocity carries z_t to x in the remaining time (1 - t)
    x, eps = torch.randn(4, 6, 3), torch.randn(4, 6, 3)
    t = torch.tensor([0.1, 0.3, 0.6, 0.9])
    zt = interpolate(x, eps, t, 2.0)
    assert torch.allclose(zt + (1 - t).view(-1, 1, 1) * x_to_v(x, zt, t, 0.05), x, atol=1e-5)


def test_time_and_scale_distributions():
    like = torch.zeros(1)
    g = torch.Generator().manual_seed(0)
    cfg = FlowConfig()
    t = sample_t(200_000, like, cfg, g)
    logit = torch.log(t / (1 - t))
    assert (
        abs(logit.mean().item() - cfg.p_mean) < 0.01 and abs(logit.std().item() - cfg.p_std) < 0.01
    )
    w = sample_sc_cfg(200_000, like, cfg, g)
    assert w.min() >= cfg.sc_cfg_min - 1e-6 and w.max() <= cfg.sc_cfg_max + 1e-6
    # log-uniform in 1 + w: the median of log(1 + w) is the midpoint of the log range
    mid = 0.5 * (math.log(1 + cfg.sc_cfg_min) + math.log(1 + cfg.sc_cfg_max))
    assert abs(torch.log1p(w).median().item() - mid) < 0.01


def test_sc_cfg_target_reduces_to_plain_at_w1():
    v, vc, vu = torch.randn(3, 4, 2), torch.randn(3, 4, 2), torch.randn(3, 4, 2)
    assert torch.equal(sc_cfg_target(v, vc, vu, torch.ones(3)), v)
    w = torch.tensor([1.0, 2.0, 4.0])
    out = sc_cfg_target(v, vc, vu, w)
    assert torch.allclose(out[1], v[1] + 0.5 * (vc[1] - vu[1]))
    assert torch.allclose(out[2], v[2] + 0.75 * (vc[2] - vu[2]))


@pytest.mark.parametrize("w", [1.0, 2.0, 4.0])
def test_sc_cfg_loss_equals_a_hand_computation(w):
    """The self-conditioned loss with the SC-CFG target at a fixed scale w, by hand with the
    same draws: v_hat(z | x_sc = x_u) against v + (1 - 1/w) (v_cond - v_uncond), where x_u is
    the prediction without self-conditioning and v_cond the one with x_sc = x_u."""
    model = tiny_model()
    with torch.no_grad():  # a non-zero flow head: predictions that differ
        model.final_layer.linear.weight.normal_(0, 0.3)
    x, tokens = torch.randn(4, 6, 8), torch.randint(0, 11, (4, 6))
    mask = torch.ones(4, 6, dtype=torch.bool)
    cfg = FlowConfig(decoder_prob=0.0, self_cond_prob=1.0, sc_cfg_min=w, sc_cfg_max=w)
    with torch.no_grad():
        loss, m = elf_loss(model, x, tokens, mask, cfg, torch.Generator().manual_seed(3))
        # replay the draws of elf_loss: eps, branch, t, w, lam, self-cond
        g = torch.Generator().manual_seed(3)
        eps = torch.randn(x.shape, generator=g)
        torch.rand((4,), generator=g)
        t = torch.sigmoid(-1.5 + 0.8 * torch.randn(4, generator=g))
        ws = sample_sc_cfg(4, x, cfg, g)
        assert torch.allclose(ws, torch.full((4,), w))
        tt = t.view(-1, 1, 1)
        z = tt * x + (1 - tt) * 2.0 * eps
        v = lambda a: (a - z) / (1 - tt).clamp(min=0.05)
        x_u, _ = model(z, t, ws)
        x_c, _ = model(z, t, ws, x_sc=x_u)  # the trained forward sees the same input
        target = v(x) + (1 - 1 / w) * (v(x_c) - v(x_u))
        want = (v(x_c) - target).pow(2).mean()
        swapped = (v(x_c) - (v(x) + (1 - 1 / w) * (v(x_u) - v(x_c)))).pow(2).mean()
    assert torch.allclose(loss, want, rtol=1e-5), (loss, want)
    if w != 1.0:  # the guidance term is really there, with its sign
        assert not torch.allclose(loss, swapped, rtol=1e-3)
        assert not torch.allclose(loss, (v(x_c) - v(x)).pow(2).mean(), rtol=1e-3)


def test_mixed_batch_loss_is_one_sum_over_both_branches_by_hand():
    """loss = (sum CE over decode tokens + sum MSE over denoise tokens) / all loss tokens,
    with a loss mask that differs per row, not a mean of the two branch means."""
    model = tiny_model()
    with torch.no_grad():
        model.final_layer.linear.weight.normal_(0, 0.3)
        model.decoder_head.unembed.weight.normal_(0, 0.5)
    B, L = 6, 5
    x, tokens = torch.randn(B, L, 8), torch.randint(0, 11, (B, L))
    mask = torch.arange(L)[None] < torch.tensor([5, 2, 4, 3, 5, 1])[:, None]
    cfg = FlowConfig(decoder_prob=0.5, self_cond_prob=0.0)
    with torch.no_grad():
        loss, m = elf_loss(model, x, tokens, mask, cfg, torch.Generator().manual_seed(11))
        g = torch.Generator().manual_seed(11)
        eps = torch.randn(x.shape, generator=g)
        decode = torch.rand(B, generator=g) < 0.5
        t = torch.where(
            decode, torch.ones(B), torch.sigmoid(-1.5 + 0.8 * torch.randn(B, generator=g))
        )
        w = sample_sc_cfg(B, x, cfg, g)
        lam = torch.sigmoid(0.8 + 0.8 * torch.randn(B, L, 1, generator=g))
        tt = t.view(-1, 1, 1)
        z = torch.where(
            decode.view(-1, 1, 1), lam * x + (1 - lam) * 5.0 * eps, tt * x + (1 - tt) * 2.0 * eps
        )
        x_hat, logits = model(z, t, w, decode=decode, decode_idx=torch.arange(B))
        v = lambda a: (a - z) / (1 - tt).clamp(min=0.05)
        mse = (v(x_hat) - v(x)).pow(2).mean(-1)
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")
        per_token = torch.where(decode[:, None], ce, mse)
        want = per_token[mask].sum() / mask.sum()
    assert 0 < decode.sum() < B and torch.allclose(loss, want, rtol=1e-5), (loss, want)
    branch_means = 0.5 * (
        per_token[mask & decode[:, None]].mean() + per_token[mask & ~decode[:, None]].mean()
    )
    assert not torch.allclose(loss, branch_means, rtol=1e-3)


def test_a_weighted_loss_mask_weighs_each_tokens_term_and_its_count():
    """elf_loss with float weights: {0, 1} weights are the bool mask; weight w on a set P of
    positions gives (S_A + w S_P) / (n_A + w n_P), S and n each set's sum and count."""
    model = tiny_model()
    B, L = 6, 5
    x, tokens = torch.randn(B, L, 8), torch.randint(0, 11, (B, L))
    a = torch.arange(L)[None].expand(B, L) < 3  # 'text'
    cfg = FlowConfig(decoder_prob=0.5, self_cond_prob=0.0)

    def loss(mask):
        with torch.no_grad():
            return elf_loss(model, x, tokens, mask, cfg, torch.Generator().manual_seed(5))[0]

    assert torch.equal(loss(a), loss(a.float()))
    s_a, s_p = loss(a) * a.sum(), loss(~a) * (~a).sum()
    w = 0.3
    want = (s_a + w * s_p) / (a.sum() + w * (~a).sum())
    got = loss(torch.where(a, 1.0, w))
    assert torch.allclose(got, want, rtol=1e-5) and not torch.allclose(got, loss(torch.ones(B, L)))


def test_decode_branch_ce_equals_hand_computation():
    model = tiny_model()
    with torch.no_grad():  # give the decoder head something non-trivial to say
        for p in model.decoder_head.parameters():
            p.normal_(0, 0.5)
    x, tokens = torch.randn(2, 5, 8), torch.randint(0, 11, (2, 5))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    cfg = FlowConfig(decoder_prob=1.0)
    with torch.no_grad():
        loss, m = elf_loss(model, x, tokens, mask, cfg, torch.Generator().manual_seed(0))
        g = torch.Generator().manual_seed(0)
        eps = torch.randn(x.shape, generator=g)
        torch.rand((2,), generator=g), sample_t(2, x, cfg, g)
        w = sample_sc_cfg(2, x, cfg, g)
        lam = torch.sigmoid(
            cfg.dec_lam_mean + cfg.dec_lam_std * torch.randn((2, 5, 1), generator=g)
        )
        z = lam * x + (1 - lam) * cfg.decoder_noise_scale * eps
        _, logits = model(
            z, torch.ones(2), w, decode=torch.ones(2, dtype=torch.bool), decode_idx=torch.arange(2)
        )
        logp = torch.log_softmax(logits, -1)
        nll = [-logp[b, i, tokens[b, i]] for b in range(2) for i in range(5) if mask[b, i]]
        want = sum(nll) / len(nll)
    assert torch.allclose(m["ce"], want, rtol=1e-5)
    assert torch.allclose(loss, want, rtol=1e-5)  # every masked token is a decode token
    assert m["n_ce"].item() == 8 and m["n_mse"].item() == 0


def test_mixed_batch_gradients_reach_both_heads():
    model = tiny_model()
    x, tokens = torch.randn(8, 6, 8), torch.randint(0, 11, (8, 6))
    loss, m = elf_loss(
        model,
        x,
        tokens,
        torch.ones(8, 6, dtype=torch.bool),
        FlowConfig(decoder_prob=0.5),
        torch.Generator().manual_seed(1),
    )
    loss.backward()
    assert m["n_ce"] > 0 and m["n_mse"] > 0
    assert model.decoder_head.unembed.weight.grad.abs().sum() > 0
    assert model.final_layer.linear.weight.grad.abs().sum() > 0
    # a batch without decode rows still gives the decoder head a (zero) gradient: DDP needs it
    model.zero_grad()
    loss, m = elf_loss(
        model, x, tokens, torch.ones(8, 6, dtype=torch.bool), FlowConfig(decoder_prob=0.0)
    )
    loss.backward()
    assert m["n_ce"] == 0 and model.decoder_head.unembed.weight.grad is not None


def test_overfit_one_batch_drives_both_losses_down():
    model = tiny_model(D=16, V=20)
    g = torch.Generator().manual_seed(0)
    x, tokens = torch.randn(8, 8, 16, generator=g), torch.randint(0, 20, (8, 8), generator=g)
    mask = torch.ones(8, 8, dtype=torch.bool)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def val():
        with torch.no_grad():
            mse = elf_loss(
                model,
                x,
                tokens,
                mask,
                FlowConfig(decoder_prob=0.3),
                torch.Generator().manual_seed(9),
            )[1]["mse"]
            ce = elf_loss(
                model,
                x,
                tokens,
                mask,
                FlowConfig(decoder_prob=0.3),
                torch.Generator().manual_seed(9),
            )[1]["ce"]
        return mse.item(), ce.item()

    mse0, ce0 = val()
    for _ in range(150):  # one fixed batch: same latents, same noise and times every step
        loss, _ = elf_loss(
            model, x, tokens, mask, FlowConfig(decoder_prob=0.3), torch.Generator().manual_seed(9)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    mse1, ce1 = val()
    assert mse1 < 0.5 * mse0, (mse0, mse1)
    assert ce1 < 0.25 * ce0, (ce0, ce1)


@pytest.mark.parametrize("prediction", ["x", "v", "eps"])
def test_each_parameterisation_maps_its_exact_output_back_to_x(prediction):
    """to_x inverts each parameterisation: the exact x, velocity or noise gives back x."""
    from flow import to_x

    g = torch.Generator().manual_seed(0)
    x, eps = torch.randn(3, 4, 5, generator=g), torch.randn(3, 4, 5, generator=g)
    t = torch.tensor([0.2, 0.5, 0.9])
    z = interpolate(x, eps, t, 2.0)
    exact = {"x": x, "v": x_to_v(x, z, t, 0.05), "eps": eps}[prediction]
    cfg = FlowConfig(prediction=prediction)
    assert torch.allclose(to_x(exact, z, t, cfg), x, atol=1e-5)
    # the sampler reads the network the same way
    from flow import Denoiser

    den = Denoiser(lambda z_, t_, w, x_sc=None: (exact, None), flow=cfg)
    assert torch.allclose(den(z, t, torch.zeros_like(z)), x, atol=1e-5)


@pytest.mark.parametrize("prediction", ["v", "eps"])
def test_other_parameterisations_train(prediction):
    model = tiny_model()
    x, tokens = torch.randn(4, 6, 8), torch.randint(0, 11, (4, 6))
    loss, m = elf_loss(
        model,
        x,
        tokens,
        torch.ones(4, 6, dtype=torch.bool),
        FlowConfig(prediction=prediction),
        torch.Generator().manual_seed(0),
    )
    loss.backward()
    assert torch.isfinite(loss) and model.final_layer.linear.weight.grad.abs().sum() > 0
