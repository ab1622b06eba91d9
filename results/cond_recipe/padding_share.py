"""How much of a conditional checkpoint's denoising loss is EOS padding (results/cond_recipe,
"The padding")? The v-space MSE of the flow (METHOD.md, "The objective") on the run's held-out
rows, at fixed noise levels, split into the target's text (its words and its own EOS) and the
padding after it; the padding's share of the positions and of the loss at each t.

    python results/cond_recipe/padding_share.py runs/cond_recipe/recipe-s0
    python results/cond_recipe/padding_share.py CKPT --t 0.1,0.5,0.9 --rows 64

Self-conditioning input zero and SC-CFG scale 1 (the recipe trains neither), one fixed noise
draw (seed 0); the numbers are the checkpoint's, printed, not kept.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from encoder import Latents
from flow import FlowConfig, hold, interpolate, to_x, x_to_v
from lib.guard import cli
from lib.pairs import load_pair_rows
from lib.reference import data_config
from sample import load_sampler


@torch.no_grad()
def padding_share(ckpt: str, ts, rows: int):
    """[(t, text MSE, padding MSE, padding's share of the summed loss)] and the padding's share
    of the loss positions, on the first `rows` held-out rows of a conditional checkpoint."""
    model, encoder, meta = load_sampler(ckpt)
    cfg = data_config(meta)
    if not cfg.max_input_length:
        raise ValueError(f"{ckpt} is not a conditional checkpoint (no max_input_length)")
    _, val = (Latents(encoder, r, cfg.cache_dir, True) for r in load_pair_rows(cfg, encoder))
    x, tokens, m = val.batch(list(range(min(rows, len(val)))), "cpu")
    x = model.latents(x, model.vocab_index(tokens))
    text, pad = m.valid & ~m.cond, m.loss & ~m.valid
    flow, gen, out = FlowConfig(**meta["flow"]), torch.Generator().manual_seed(0), []
    ones = torch.ones(len(x))
    for t0 in ts:
        t = torch.full((len(x),), t0)
        eps = torch.randn(x.shape, generator=gen)
        z = hold(interpolate(x, eps, t, flow.noise_scale), x, m.cond)
        x_hat = to_x(
            model(z, t, ones, x_sc=hold(torch.zeros_like(x), x, m.cond))[0].float(), z, t, flow
        )
        mse = (x_to_v(x_hat, z, t, flow.t_eps) - x_to_v(x, z, t, flow.t_eps)).pow(2).mean(-1)
        a, b = mse[text].sum().item(), mse[pad].sum().item()
        out.append((t0, mse[text].mean().item(), mse[pad].mean().item(), b / (a + b)))
    return out, pad.sum().item() / m.loss.sum().item(), len(x)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ckpt")
    p.add_argument("--t", default="0.05,0.1,0.2,0.3,0.5,0.7,0.9", help="noise levels (1 = data)")
    p.add_argument("--rows", type=int, default=256, help="held-out rows read (at most)")
    a = p.parse_args(argv)
    rows, share, n = padding_share(a.ckpt, [float(v) for v in a.t.split(",")], a.rows)
    print(f"{n} held-out rows: padding is {share:.0%} of the target's loss positions")
    for t0, text, pad, loss in rows:
        print(f"t {t0:.2f}: v-MSE text {text:.3f}, padding {pad:.3f}; padding's share {loss:.2f}")


if __name__ == "__main__":
    cli(main)
