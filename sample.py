"""Sampling from ELF (ELF_SPEC §8, with §6 guidance): noise -> latent -> one decode pass -> text.

Small step functions (Euler ODE, SDE with churn gamma, Heun), a loop over a time grid that
carries the self-conditioning state, the text interface `generate`, conditional generation
`translate` (§6: a clean source held in place, CFG), and a CLI (which also fronts
model.convert_release, for the authors' released checkpoints):

    python sample.py --ckpt out/tiny --n 8 --preset uncond32
    python sample.py --ckpt out/tiny --n 4 --steps 16 --sampler sde --gamma 1.5 --sc_cfg 3 \\
        --prefix "The city of" --out samples.jsonl
    python sample.py --convert released.pt --out_dir out/elf_b_release --encoder t5-small
    python sample.py --ckpt out/tiny --bench
    python sample.py --ckpt out/de_en_tiny --source "Wir haben zwei Kinder."     # §6: cond64 preset

Every result reports its NFE: the number of network forward passes, the decode pass
included (CFG doubles the flow part, Heun adds a pass per step but the last).
"""

import argparse
import json
import math
import time

import torch

from flow import FlowConfig, x_to_v
from model import convert_release

# the authors' released sampler settings (§8)
PRESETS = {
    "uncond32": dict(sampler="sde", steps=32, gamma=1.5, sc_cfg=3.0, cfg=1.0),
    "uncond64": dict(sampler="sde", steps=64, gamma=1.0, sc_cfg=3.0, cfg=1.0),
    "cond64": dict(sampler="ode", steps=64, gamma=0.0, sc_cfg=1.0, cfg=2.0),
    # distilled few-step students (§10, distill.py): fewstep1 ... fewstep32, on the uniform grid
    # (a student of span d has learned jumps of exactly d)
    **{f"fewstep{n}": dict(sampler="sde", steps=n, gamma=1.5 if n <= 8 else 2.0, sc_cfg=2.5 if n <= 8 else 2.0,
                           cfg=1.0, grid="uniform") for n in (1, 2, 4, 8, 16, 32)},
}


# ----------------------------------------------------------------------------------------
# time grids: t_0 = 0 < t_1 < ... < t_n = 1

def time_grid(steps: int, kind: str = "uniform", flow: FlowConfig = FlowConfig(), generator=None, device="cpu"):
    """uniform: linspace. logit_normal: the n - 1 interior points drawn from the training
    time distribution and sorted (random per call, as released). logit_normal_quantile: the
    deterministic quantiles k/n of the same distribution."""
    if kind == "uniform":
        return torch.linspace(0, 1, steps + 1, device=device)
    if kind == "logit_normal":
        u = torch.randn(steps - 1, generator=generator, device=device)
    elif kind == "logit_normal_quantile":
        q = torch.arange(1, steps, device=device, dtype=torch.float64) / steps
        u = (math.sqrt(2) * torch.special.erfinv(2 * q - 1)).float()     # standard normal quantiles
    else:
        raise ValueError(f"unknown time grid '{kind}' (uniform, logit_normal, logit_normal_quantile)")
    inner = torch.sigmoid(flow.p_mean + flow.p_std * u).sort().values
    return torch.cat([torch.zeros(1, device=device), inner.to(device), torch.ones(1, device=device)])


# ----------------------------------------------------------------------------------------
# the guided denoiser: one call = x_hat at (z, t) with self-conditioning, SC-CFG, CFG, clamping

class Denoiser:
    """Wraps the network for sampling. `fixed` (B, L) bool marks positions held at their clean
    latents `x_fixed` (a §6 condition, or given text to infill); with cfg != 1 and a
    conditional model, x_hat = x_u + cfg (x_c - x_u), the unconditional pass zeroing `fixed`."""

    def __init__(self, model, sc_cfg=1.0, cfg=1.0, fixed=None, x_fixed=None, flow: FlowConfig = FlowConfig()):
        self.model, self.cfg, self.flow, self.nfe = model, cfg, flow, 0
        self.sc_cfg, self.fixed, self.x_fixed = sc_cfg, fixed, x_fixed

    def clamp(self, z):
        """Hold fixed positions at their clean latents (velocity 0 there)."""
        if self.fixed is None:
            return z
        return torch.where(self.fixed[..., None], self.x_fixed, z)

    def __call__(self, z, t, x_sc):
        B = z.shape[0]
        t, w = t.expand(B), torch.full((B,), float(self.sc_cfg), device=z.device)
        z, x_sc = self.clamp(z), self.clamp(x_sc)
        x_hat, _ = self.model(z, t, w, x_sc=x_sc)
        self.nfe += 1
        if self.cfg != 1.0 and self.fixed is not None:
            drop = lambda a: a.masked_fill(self.fixed[..., None], 0.0)
            x_u, _ = self.model(drop(z), t, w, x_sc=drop(x_sc))
            self.nfe += 1
            x_hat = x_u + self.cfg * (x_hat - x_u)
        return self.clamp(x_hat.float())


# ----------------------------------------------------------------------------------------
# one step each: (z at t) -> (z at t_next, x_hat)

def ode_step(denoiser, z, t, t_next, x_sc):
    """Euler: z <- z + (t_next - t) v_hat(z, t)."""
    x_hat = denoiser(z, t, x_sc)
    return z + (t_next - t) * x_to_v(x_hat, z, t.expand(z.shape[0]), denoiser.flow.t_eps), x_hat


def sde_step(denoiser, z, t, t_next, x_sc, gamma: float, generator=None, churn="linear"):
    """Churn (§8): step back to t_back = alpha t by re-injecting noise, then an Euler step
    from t_back to t_next. alpha = clip(1 - gamma (t_next - t), 0, 1); gamma = 0 is the ODE.

    churn="linear" is the released rule, z_back = alpha z + (1 - alpha) s eps: the noise
    coefficients add linearly, so z_back carries less noise than a true sample at t_back
    and the sampler sharpens the distribution (tests/test_sample.py measures it).
    churn="marginal" adds the noise that makes z_back a true sample at t_back:
    std s * sqrt((1 - t_back)^2 - alpha^2 (1 - t)^2)."""
    alpha = (1 - gamma * (t_next - t)).clamp(0, 1)
    if gamma > 0:
        eps = torch.randn(z.shape, generator=generator, device=z.device)
        s, t_back = denoiser.flow.noise_scale, alpha * t
        if churn == "linear":
            z = alpha * z + (1 - alpha) * s * eps
        elif churn == "marginal":
            z = alpha * z + s * ((1 - t_back) ** 2 - (alpha * (1 - t)) ** 2).clamp(min=0).sqrt() * eps
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
def sample_latents(denoiser, z, grid, sampler="ode", gamma=0.0, generator=None, trajectory=False, progress=False,
                   churn="linear"):
    """Integrate from z (at grid[0] = 0) to t = 1. Each step's x_hat becomes the next
    self-conditioning input; the last interval is always an ODE step. Returns the final
    latent (B, L, D) and, if asked, the list of x_hat per step."""
    from tqdm import tqdm
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
    return denoiser.clamp(z), xs


@torch.no_grad()
def decode_latents(model, z, sc_cfg: float = 1.0):
    """Decode-mode forward at t = 1 with x_sc = 0 (§8); returns argmax ids (n, L)."""
    n = z.shape[0]
    ones = torch.ones(n, device=z.device)
    _, logits = model(z, ones, ones * sc_cfg, decode=torch.ones(n, dtype=torch.bool, device=z.device),
                      logits_rows=torch.arange(n, device=z.device))
    return logits.argmax(-1)


def euler_sample(model, n, length, steps, sc_cfg=1.0, flow: FlowConfig = FlowConfig(), generator=None, device="cpu"):
    """The plain Euler ODE on a uniform grid (used by train.py for its closing samples)."""
    z = flow.noise_scale * torch.randn(n, length, model.cfg.latent_dim, generator=generator, device=device)
    return sample_latents(Denoiser(model, sc_cfg, flow=flow), z, time_grid(steps, device=device))[0]


# ----------------------------------------------------------------------------------------
# text in, text out

def load_sampler(ckpt_dir: str, device="cpu"):
    """(EMA model, frozen encoder with the run's latent statistics, meta) from a checkpoint."""
    from encoder import FrozenEncoder
    from model import load_checkpoint
    model, meta = load_checkpoint(ckpt_dir, device)
    stats, tcfg = meta["latent_stats"], meta["train"]
    encoder = FrozenEncoder(tcfg["encoder"], stats["mean"], stats["std"], tcfg.get("encoder_dtype", "float32"))
    return model, encoder.to(device), meta


def place_text(encoder, length: int, prefix="", suffix="", spans=()):
    """Given text -> (ids (L,), fixed (L,) bool, x (L, D) clean latents). Each piece is encoded
    alone, like a §6 condition, and placed: the prefix at 0, the suffix at the end, each
    (position, text) span at its position."""
    pieces = ([(0, prefix)] if prefix else []) + list(spans)
    if suffix:
        pieces.append((length - len(encoder.tokenize([suffix])[0]), suffix))
    ids = torch.full((length,), encoder.pad_id, dtype=torch.long)
    fixed = torch.zeros(length, dtype=torch.bool)
    x = torch.zeros(length, encoder.dim)
    for pos, text in pieces:
        tok = torch.tensor(encoder.tokenize([text])[0], dtype=torch.long)
        if pos < 0 or pos + len(tok) > length:
            raise ValueError(f"given text '{text}' ({len(tok)} tokens at {pos}) does not fit in length {length}")
        if fixed[pos:pos + len(tok)].any():
            raise ValueError(f"given text '{text}' overlaps another piece at position {pos}")
        ids[pos:pos + len(tok)], fixed[pos:pos + len(tok)] = tok, True
        x[pos:pos + len(tok)] = encoder.normalize(encoder.encode(tok[None].to(encoder.model.device)))[0].cpu()
    return ids, fixed, x


def assemble(ids, given_ids, fixed, eos_id):
    """Token list of one sample: given positions verbatim; in free positions an EOS skips
    everything up to the next given piece (after the last one, it ends the text)."""
    out, skipping = [], False
    for i, f, g in zip(ids.tolist(), fixed.tolist(), given_ids.tolist()):
        if f:
            out.append(g)
            skipping = False
        elif i == eos_id:
            skipping = True
        elif not skipping:
            out.append(i)
    return out


@torch.no_grad()
def generate(model, encoder, n=4, length=64, steps=32, sampler="sde", gamma=1.5, sc_cfg=3.0, cfg=1.0,
             grid="logit_normal", seed=0, prefix="", suffix="", spans=(), trajectory=False,
             noise_scale=2.0, batch_size=64, progress=False, churn="linear"):
    """Sample n texts. Returns a list of dicts: text, nfe, seed and (if asked) the decoded
    trajectory of x_hat, one string per step."""
    device = next(model.parameters()).device
    flow = FlowConfig(noise_scale=noise_scale)
    given, fixed, x_fixed = place_text(encoder, length, prefix, suffix, spans)
    have_fixed = bool(fixed.any())
    gen = torch.Generator(device).manual_seed(seed)
    results = []
    for start in range(0, n, batch_size):
        b = min(batch_size, n - start)
        den = Denoiser(model, sc_cfg, cfg, fixed.to(device).expand(b, -1) if have_fixed else None,
                       x_fixed.to(device).expand(b, -1, -1), flow)
        z = noise_scale * torch.randn(b, length, model.cfg.latent_dim, generator=gen, device=device)
        g = time_grid(steps, grid, flow, gen, device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, xs = sample_latents(den, z, g, sampler, gamma, gen, trajectory, progress, churn)
            ids = decode_latents(model, z, sc_cfg).cpu()
            steps_ids = [decode_latents(model, x, sc_cfg).cpu() for x in xs]
        for j in range(b):
            text = encoder.tokenizer.decode(assemble(ids[j], given, fixed, encoder.eos_id), skip_special_tokens=True)
            r = {"text": text, "nfe": den.nfe + 1, "seed": seed, "index": start + j}
            if trajectory:
                r["trajectory"] = [encoder.decode(s[j]) for s in steps_ids]
            results.append(r)
    return results


@torch.no_grad()
def translate(model, encoder, sources, length, max_input_length, steps=64, sampler="ode", gamma=0.0, sc_cfg=1.0,
              cfg=2.0, grid="logit_normal", seed=0, noise_scale=2.0, batch_size=64, progress=False):
    """Conditional generation (§6): each source (text or token ids) is placed clean at the
    start of its row, encoded under the condition mask and held there; the target is sampled
    after it with CFG. Returns dicts {text: the target cut at its first EOS, nfe}."""
    from data import layout
    from encoder import cond_mask
    device = next(model.parameters()).device
    flow = FlowConfig(noise_scale=noise_scale)
    ids, cond_len = layout([(s, []) for s in sources], encoder, length, max_input_length)
    gen = torch.Generator(device).manual_seed(seed)
    results = []
    for start in range(0, len(sources), batch_size):
        b_ids, cl = ids[start:start + batch_size].to(device), cond_len[start:start + batch_size].to(device)
        fixed = torch.arange(length, device=device)[None, :] < cl[:, None]                  # (B, L)
        x_fixed = encoder.normalize(encoder.encode(b_ids, cond_mask(b_ids, cl)))             # (B, L, D)
        den = Denoiser(model, sc_cfg, cfg, fixed, x_fixed, flow)
        z = noise_scale * torch.randn(x_fixed.shape, generator=gen, device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, _ = sample_latents(den, z, time_grid(steps, grid, flow, gen, device), sampler, gamma, gen,
                                  progress=progress)
            out = decode_latents(model, z, sc_cfg).cpu()
        results += [{"text": encoder.decode(out[j, cl[j]:]), "nfe": den.nfe + 1} for j in range(len(b_ids))]
    return results


# ----------------------------------------------------------------------------------------
# CLI

def bench(model, encoder, length, n=16, device="cpu"):
    """samples/s and NFE for ODE / SDE / Heun at 8-64 steps (one batch of n each)."""
    print(f"{'sampler':>7} {'steps':>5} {'NFE':>4} {'samples/s':>10}")
    for steps in (8, 16, 32, 64):
        for sampler in ("ode", "sde", "heun"):
            t0 = time.time()
            r = generate(model, encoder, n=n, length=length, steps=steps, sampler=sampler, gamma=1.5,
                         sc_cfg=3.0, grid="logit_normal_quantile", batch_size=n)
            if device == "cuda":
                torch.cuda.synchronize()
            print(f"{sampler:>7} {steps:>5} {r[0]['nfe']:>4} {n / (time.time() - t0):>10.2f}")


def main(argv=None):
    p = argparse.ArgumentParser(description="Sample text from an ELF checkpoint (ELF_SPEC §8).")
    p.add_argument("--ckpt", help="a train.py out_dir (or a converted release)")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--preset", choices=list(PRESETS), help="default: uncond32, or cond64 for a conditional checkpoint")
    p.add_argument("--steps", type=int)
    p.add_argument("--sampler", choices=["ode", "sde", "heun"])
    p.add_argument("--gamma", type=float)
    p.add_argument("--sc_cfg", type=float)
    p.add_argument("--cfg", type=float)
    p.add_argument("--grid", choices=["uniform", "logit_normal", "logit_normal_quantile"],
                   help="time grid (default: the preset's, else logit_normal)")
    p.add_argument("--churn", default="linear", choices=["linear", "marginal"],
                   help="SDE noise rule: linear = released (sharpens), marginal = variance-matched")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--length", type=int, help="tokens per sample (default: the run's max_length)")
    p.add_argument("--prefix", default="")
    p.add_argument("--suffix", default="")
    p.add_argument("--span", action="append", default=[], metavar="POS:TEXT", help="fixed text at a position")
    p.add_argument("--source", action="append", default=[], help="conditional checkpoint (§6): a text to "
                   "translate or summarise; repeat for several")
    p.add_argument("--trajectory", action="store_true", help="also decode x_hat at every step")
    p.add_argument("--out", help="write the samples as JSONL")
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--bench", action="store_true", help="print samples/s and NFE for ODE/SDE/Heun at 8-64 steps")
    p.add_argument("--convert", metavar="RELEASED_PT", help="convert an authors' checkpoint into --out_dir")
    p.add_argument("--out_dir")
    p.add_argument("--encoder", default="t5-small", help="with --convert: the encoder the release used")
    p.add_argument("--latent_mean", type=float, default=0.0)
    p.add_argument("--latent_std", type=float, default=0.2)
    p.add_argument("--max_seq_len", type=int, default=1024)
    a = p.parse_args(argv)
    if a.convert:
        if not a.out_dir:
            p.error("--convert needs --out_dir")
        print(f"converted to {convert_release(a.convert, a.out_dir, a.encoder, a.latent_mean, a.latent_std, a.max_seq_len)}")
        return
    if not a.ckpt:
        p.error("--ckpt is required")
    model, encoder, meta = load_sampler(a.ckpt, a.device)
    length = a.length or meta["train"]["max_length"]
    if a.bench:
        return bench(model, encoder, length, device=a.device)
    conditional = bool(meta["train"].get("max_input_length"))
    a.preset = a.preset or ("cond64" if conditional else "uncond32")
    s = dict(PRESETS[a.preset])
    s.update({k: getattr(a, k) for k in ("steps", "sampler", "gamma", "sc_cfg", "cfg", "grid") if getattr(a, k) is not None})
    s.setdefault("grid", "logit_normal")
    if conditional or a.source:
        if not (conditional and a.source):
            p.error("--source goes with a conditional checkpoint" if a.source else "this checkpoint is conditional: give --source TEXT")
        res = translate(model, encoder, a.source, length, meta["train"]["max_input_length"], seed=a.seed,
                        noise_scale=meta["flow"]["noise_scale"], batch_size=a.batch_size, **s)
        for src, r in zip(a.source, res):
            print(f"--- source (NFE {r['nfe']}): {src}\n{r['text']}")
        return res
    spans = []
    for sp in a.span:
        pos, _, text = sp.partition(":")
        if not pos.isdigit() or not text:
            p.error(f"--span expects POS:TEXT, got '{sp}'")
        spans.append((int(pos), text))
    settings = dict(ckpt=a.ckpt, preset=a.preset, churn=a.churn, length=length, prefix=a.prefix,
                    suffix=a.suffix, spans=spans, **s)
    res = generate(model, encoder, n=a.n, length=length, seed=a.seed, prefix=a.prefix,
                   suffix=a.suffix, spans=spans, trajectory=a.trajectory, batch_size=a.batch_size,
                   noise_scale=meta["flow"]["noise_scale"], progress=True, churn=a.churn, **s)
    for r in res:
        print(f"--- sample {r['index']} (seed {r['seed']}, NFE {r['nfe']})")
        for i, step_text in enumerate(r.get("trajectory", [])):
            print(f"  step {i + 1}: {step_text}")
        print(r["text"])
    if a.out:
        from model import atomic_write_text
        atomic_write_text(a.out, "".join(json.dumps({**settings, **r}) + "\n" for r in res))
        print(f"wrote {len(res)} samples to {a.out}")


if __name__ == "__main__":
    import sys
    try:
        main()
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
