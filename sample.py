"""Sampling from ELF (METHOD.md, "Sampling"): noise -> latent -> one decode pass -> text.

Small step functions (Euler ODE, SDE with churn gamma, Heun), a loop over a time grid that
carries the self-conditioning state, the text interface `generate`, conditional generation
`generate_conditional` (a clean source held in place, with classifier-free guidance), and a CLI:

    python sample.py --ckpt out/tiny --n 8                      # the run's preset (uncond32 by default)
    python sample.py --ckpt out/tiny --n 4 --steps 16 --sampler sde --gamma 1.5 --sc_cfg 3 \\
        --prefix "the city of" --out samples/city                 # samples/city/samples.jsonl
    python sample.py --ckpt out/de_en_tiny --source "Wir haben zwei Kinder."     # conditional: cond64
    python sample.py --help

Every result reports its NFE: the number of network forward passes, the decode pass
included (CFG doubles the flow part, Heun adds a pass per step but the last).

`--out DIR` writes chunks a restarted run keeps; torchrun splits them over devices (shards.py):

    torchrun --standalone --nproc_per_node=8 -- sample.py --ckpt out/elf_b --n 5000 --out samples/elf_b --progress
"""

import hashlib
import math
import os
import sys
import typing
from dataclasses import dataclass

import torch

from checkpoint import load_sampler
from config import parse
from flow import FlowConfig, hold, to_x, x_to_v
from outputs import check_folder

# sampler settings: the authors' released ones (METHOD.md, "Sampling"), all on the logit-normal grid
PRESETS = {
    "uncond32": dict(sampler="sde", steps=32, gamma=1.5, sc_cfg=3.0, guidance=1.0, grid="logit_normal"),
    "uncond64": dict(sampler="sde", steps=64, gamma=1.0, sc_cfg=3.0, guidance=1.0, grid="logit_normal"),
    "cond64": dict(sampler="ode", steps=64, gamma=0.0, sc_cfg=1.0, guidance=2.0, grid="logit_normal"),
    # not released: the Euler ODE, which beats the released SDE for the CPU-scale default (results/first_run)
    "ode32": dict(sampler="ode", steps=32, gamma=0.0, sc_cfg=1.0, guidance=1.0, grid="logit_normal"),
    # the same on the uniform grid (the CPU default's): the logit-normal grid follows the training
    # times, mostly near noise (its last interior point near t = 0.5 for p_mean -1.5), and ends in
    # one long step from there (results/recipe: lower Gen. PPL on every run, a little less entropy)
    "ode32_uniform": dict(sampler="ode", steps=32, gamma=0.0, sc_cfg=1.0, guidance=1.0, grid="uniform"),
    # distilled few-step students (distill.py): fewstep1 ... fewstep32. A span-d student has
    # learned jumps of exactly d, so `grid=uniform` is the natural alternative; the release
    # samples them on the logit-normal grid like the rest (results/distill_tiny compares both)
    **{f"fewstep{n}": dict(sampler="sde", steps=n, gamma=1.5 if n <= 8 else 2.0, sc_cfg=2.5 if n <= 8 else 2.0,
                           guidance=1.0, grid="logit_normal") for n in (1, 2, 4, 8, 16, 32)},
}


# ----------------------------------------------------------------------------------------
# randomness: one stream per sample

def noise_stream(seed: int, key, device="cpu") -> torch.Generator:
    """A generator seeded by (seed, key) alone: key i is sample i's stream (its starting noise,
    then its SDE churn, step by step), key "grid" the run's time grid. Sample i then does not
    depend on the batch it is drawn in, nor on which device draws it (shards.py)."""
    h = hashlib.sha256(f"{seed}/{key}".encode()).digest()          # streams of nearby seeds stay unrelated
    return torch.Generator(device).manual_seed(int.from_bytes(h[:8], "little"))


def randn(shape, generator, device):
    """Standard normal noise; `generator` one torch.Generator for the whole tensor, or a list of
    them, one per row (row j's noise then comes from its own stream alone)."""
    if isinstance(generator, (list, tuple)):
        return torch.stack([torch.randn(shape[1:], generator=g, device=device) for g in generator])
    return torch.randn(shape, generator=generator, device=device)


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
    latents `x_fixed` (a source of conditional generation, or given text to infill); with a CFG scale `guidance`
    != 1 and fixed positions, x_hat = x_u + guidance (x_c - x_u), the unconditional pass
    zeroing `fixed`. `sc_cfg` is the SC-CFG scale (METHOD.md's w) fed to the network's SC-CFG tokens."""

    def __init__(self, model, sc_cfg=1.0, guidance=1.0, fixed=None, x_fixed=None, flow: FlowConfig = FlowConfig()):
        self.model, self.guidance, self.flow, self.nfe = model, guidance, flow, 0
        self.sc_cfg, self.fixed, self.x_fixed = sc_cfg, fixed, x_fixed

    def clamp(self, z):
        """Hold fixed positions at their clean latents (velocity 0 there)."""
        return hold(z, self.x_fixed, self.fixed)

    def __call__(self, z, t, x_sc):
        B = z.shape[0]
        t, sc_cfg = t.expand(B), torch.full((B,), float(self.sc_cfg), device=z.device)
        if self.flow.self_cond_prob == 0:              # trained without self-conditioning: none here either
            x_sc = torch.zeros_like(x_sc)
        z, x_sc = self.clamp(z), self.clamp(x_sc)
        x_hat = to_x(self.model(z, t, sc_cfg, x_sc=x_sc)[0], z, t, self.flow)
        self.nfe += 1
        if self.guidance != 1.0 and self.fixed is not None:
            drop = lambda a: a.masked_fill(self.fixed[..., None], 0.0)
            x_u = to_x(self.model(drop(z), t, sc_cfg, x_sc=drop(x_sc))[0], drop(z), t, self.flow)
            self.nfe += 1
            x_hat = x_u + self.guidance * (x_hat - x_u)
        return self.clamp(x_hat.float())


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
        eps = randn(z.shape, generator, z.device)                 # generator: one, or one per row
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
    """Decode-mode forward at t = 1 with x_sc = 0; returns argmax token ids (n, L)."""
    n = z.shape[0]
    ones = torch.ones(n, device=z.device)
    _, logits = model(z, ones, ones * sc_cfg, decode=torch.ones(n, dtype=torch.bool, device=z.device),
                      logits_rows=torch.arange(n, device=z.device))
    return model.token_ids(logits.argmax(-1))


# ----------------------------------------------------------------------------------------
# text in, text out

def place_text(encoder, length: int, prefix="", suffix="", spans=()):
    """Given text -> (ids (L,), fixed (L,) bool, x (L, D) clean latents). Each piece is encoded
    alone, like the source of conditional generation, and placed: the prefix at 0, the suffix at the end, each
    (position, text) span at its position."""
    pieces = ([(0, prefix)] if prefix else []) + list(spans)
    if suffix:
        pieces.append((length - len(encoder.tokenize([suffix])[0]), suffix))
    ids = torch.full((length,), encoder.pad_id, dtype=torch.long)
    fixed = torch.zeros(length, dtype=torch.bool)
    x = torch.zeros(length, encoder.dim)
    for pos, text in pieces:
        tok = torch.tensor(encoder.tokenize([text])[0], dtype=torch.long)
        if len(tok) == 0:                            # blank: nothing to hold, and the encoder takes no empty row
            raise ValueError(f"given text '{text}' holds no tokens")
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


def sampler_settings(preset: str, **overrides) -> dict:
    """The sampler settings of PRESETS[preset] (sampler, steps, gamma, sc_cfg, guidance, grid),
    some replaced by `overrides`: the presets are the one place their defaults are written."""
    s = dict(PRESETS[preset])
    unknown = sorted(set(overrides) - set(s))
    if unknown:
        raise TypeError(f"unknown sampler setting '{unknown[0]}' (a preset sets {', '.join(s)})")
    return {**s, **overrides}


@torch.no_grad()
def generate(model, encoder, n=4, length=64, seed=0, prefix="", suffix="", spans=(),
             trajectory=False, flow: FlowConfig = FlowConfig(), batch_size=64, progress=False,
             churn="linear", indices=None, preset="uncond32", **overrides):
    """Sample n texts (or the samples `indices`, a list of sample numbers: a shard of a larger
    run) with the sampler settings of `preset`, any of them replaced by `overrides` (e.g.
    steps=16, sampler="ode"). Returns a list of dicts: text, nfe, seed, index and (if asked)
    the decoded trajectory of x_hat, one string per step."""
    s = sampler_settings(preset, **overrides)
    device = next(model.parameters()).device
    given, fixed, x_fixed = place_text(encoder, length, prefix, suffix, spans)
    have_fixed = bool(fixed.any())
    indices = list(range(n)) if indices is None else list(indices)
    # One time grid per seed, shared by every sample of it. The release draws a logit-normal
    # grid per batch, which would make a sample depend on its batch; a grid per sample would
    # split every batch into single rows. Per seed keeps batches whole and the samples
    # independent of batch size and device count (METHOD.md, "Sampling").
    g = time_grid(s["steps"], s["grid"], flow, noise_stream(seed, "grid", device), device)
    results = []
    for start in range(0, len(indices), batch_size):
        idx = indices[start:start + batch_size]
        b, streams = len(idx), [noise_stream(seed, i, device) for i in idx]
        den = Denoiser(model, s["sc_cfg"], s["guidance"], fixed.to(device).expand(b, -1) if have_fixed else None,
                       x_fixed.to(device).expand(b, -1, -1), flow)
        z = flow.noise_scale * randn((b, length, model.cfg.latent_dim), streams, device)    # (B, L, D)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, xs = sample_latents(den, z, g, s["sampler"], s["gamma"], streams, trajectory, progress, churn)
            ids = decode_latents(model, z, s["sc_cfg"]).cpu()
            steps_ids = [decode_latents(model, x, s["sc_cfg"]).cpu() for x in xs]
        for j in range(b):
            text = encoder.tokenizer.decode(assemble(ids[j], given, fixed, encoder.eos_id), skip_special_tokens=True)
            r = {"text": text, "nfe": den.nfe + 1, "seed": seed, "index": idx[j]}
            if trajectory:
                r["trajectory"] = [encoder.detokenize(step[j]) for step in steps_ids]
            results.append(r)
    return results


@torch.no_grad()
def generate_conditional(model, encoder, sources, length, max_input_length, seed=0,
                         flow: FlowConfig = FlowConfig(), batch_size=64, progress=False,
                         preset="cond64", **overrides):
    """Conditional generation (METHOD.md, "Conditional generation"): each source (text or
    token ids) is placed clean at the start of its row, encoded under the condition mask and
    held there; the target is sampled after it with CFG, with the settings of `preset` (any
    replaced by `overrides`). Returns dicts {text: the target (at most length -
    max_input_length tokens) cut at its first EOS, nfe}."""
    from conditional import batch_masks, layout
    s = sampler_settings(preset, **overrides)
    device = next(model.parameters()).device
    rows = layout([(src, []) for src in sources], encoder, length, max_input_length)
    g = time_grid(s["steps"], s["grid"], flow, noise_stream(seed, "grid", device), device)   # as in generate
    results = []
    for start in range(0, len(sources), batch_size):
        batch = rows.select(slice(start, start + batch_size))
        m = batch_masks(batch, device)                    # m.cond (B, L): the source, held clean
        x_fixed = encoder.normalize(encoder.encode_rows(batch, m)).to(device)        # (B, L, D)
        den = Denoiser(model, s["sc_cfg"], s["guidance"], m.cond, x_fixed, flow)
        # source i's own noise
        streams = [noise_stream(seed, i, device) for i in range(start, start + len(batch))]
        z = flow.noise_scale * randn(x_fixed.shape, streams, device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, _ = sample_latents(den, z, g, s["sampler"], s["gamma"], streams, progress=progress)
            out = decode_latents(model, z, s["sc_cfg"]).cpu()
        # the target: after the source, at most length - max_input_length tokens (as released)
        cap = length - max_input_length
        results += [{"text": encoder.detokenize(out[j, c:c + cap]), "nfe": den.nfe + 1}
                    for j, c in enumerate(batch.cond_len.tolist())]
    return results


# ----------------------------------------------------------------------------------------
# CLI

@dataclass
class SampleConfig:
    """Sample text from an ELF checkpoint."""
    ckpt: str = ""                     # a train.py out_dir, one of its step folders, or a converted release
    n: int = 8                         # samples
    preset: str = ""                   # a preset of PRESETS; '' = the run's sample_preset (uncond32 / cond64)
    sampler: str = ""                  # ode, sde or heun ('' = the preset's; so for the keys below)
    steps: typing.Optional[int] = None
    gamma: typing.Optional[float] = None   # SDE churn
    sc_cfg: typing.Optional[float] = None  # SC-CFG scale (METHOD.md's w)
    guidance: typing.Optional[float] = None  # CFG scale (conditional checkpoints)
    grid: str = ""                     # uniform, logit_normal or logit_normal_quantile
    churn: str = "linear"              # SDE noise rule: linear = released (sharpens), marginal = variance-matched
    seed: int = 0
    length: typing.Optional[int] = None  # tokens per sample (None = the run's max_length)
    prefix: str = ""                   # given text at the start, held clean through sampling
    suffix: str = ""                   # given text at the end
    span: str = ""                     # given text inside: 'POS:TEXT', several separated by '|'
    source: str = ""                   # conditional checkpoint: the text to translate / summarise; '|' separates several
    trajectory: bool = False           # also decode x_hat at every step
    out: str = ""                      # a folder: samples.jsonl, run.json, chunks (resumable; needed under torchrun)
    batch_size: int = 64               # samples per forward; with --out also the chunk a restart never redoes
    progress: bool = False             # a progress bar per rank, in samples/s
    device: str = "auto"               # 'auto', 'cpu', 'cuda' (torchrun: rank r takes cuda:LOCAL_RANK)


def check(a: SampleConfig):
    """One-line errors for settings that cannot be sampled."""
    for key in ("n", "batch_size", "steps", "length"):
        if getattr(a, key) is not None and getattr(a, key) <= 0:
            raise ValueError(f"{key} must be > 0, got {getattr(a, key)}")
    if a.gamma is not None and a.gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {a.gamma}")
    for key, allowed in (("preset", ("", *PRESETS)), ("sampler", ("", "ode", "sde", "heun")),
                         ("grid", ("", "uniform", "logit_normal", "logit_normal_quantile")),
                         ("churn", ("linear", "marginal"))):
        if getattr(a, key) not in allowed:
            raise ValueError(f"unknown {key} '{getattr(a, key)}' (choose from {', '.join(x for x in allowed if x)})")
    if a.out:                                       # before sampling, not after: the samples must land
        check_folder(a.out, "out")


def main(argv):
    from shards import distributed
    a = parse(argv, SampleConfig, "sample.py")
    check(a)
    if not a.ckpt:
        raise ValueError("give --ckpt: a checkpoint folder (train.py out_dir)")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not (a.out and not a.source):
        raise ValueError("under torchrun give --out DIR, where the ranks write their chunks (unconditional "
                         "sampling; --source runs in one process)")
    with distributed(a.device) as (rank, world, device):
        return run(a, rank, world, device)


def run(a: SampleConfig, rank: int, world: int, device: str):
    """Sample as `a` says: this rank's share of the chunks when a.out is given, else all n here."""
    model, encoder, meta = load_sampler(a.ckpt, device)
    length = a.length or meta["train"]["max_length"]
    conditional = bool(meta["train"].get("max_input_length"))
    preset = a.preset or meta["train"].get("sample_preset") or ("cond64" if conditional else "uncond32")
    keys = ("steps", "sampler", "gamma", "sc_cfg", "guidance", "grid")  # the flags that override
    s = sampler_settings(preset, **{k: getattr(a, k) for k in keys if getattr(a, k) not in (None, "")})
    sources = [x for x in a.source.split("|") if x]
    if conditional != bool(sources):
        raise ValueError("--source goes with a conditional checkpoint" if sources else
                         "this checkpoint is conditional: give --source TEXT")
    cap = meta["train"].get("max_input_length", 0)         # the run's own max_length is past it
    if conditional and length <= cap:
        raise ValueError(f"length {length} leaves no room for a target after the source's "
                         f"max_input_length {cap}: give --length > {cap}")
    if conditional:
        res = generate_conditional(model, encoder, sources, length, meta["train"]["max_input_length"],
                                   seed=a.seed, flow=FlowConfig(**meta["flow"]), batch_size=a.batch_size,
                                   preset=preset, **s)
        for src, r in zip(sources, res):
            print(f"--- source (NFE {r['nfe']}): {src}\n{r['text']}")
        return res
    spans = []
    for sp in (x for x in a.span.split("|") if x):
        pos, _, text = sp.partition(":")
        if not pos.isdigit() or not text:
            raise ValueError(f"span expects POS:TEXT, got '{sp}'")
        spans.append((int(pos), text))
    kw = dict(length=length, seed=a.seed, prefix=a.prefix, suffix=a.suffix, spans=spans, trajectory=a.trajectory,
              churn=a.churn, **s)
    draw = lambda indices: generate(model, encoder, indices=indices, batch_size=a.batch_size,
                                    flow=FlowConfig(**meta["flow"]), preset=preset, **kw)
    import shards
    # every setting that changes a sample (CPU and CUDA round differently; the weights are named
    # by their hash, in the provenance, which rank 0 alone needs: it alone checks a run folder)
    settings = dict(preset=preset, device=torch.device(device).type, batch_size=a.batch_size, **kw)
    prov = shards.provenance(a.ckpt) if a.out and rank == 0 else {}
    res = shards.run(a.out or None, settings, prov, a.n, a.batch_size, draw, rank, world, a.progress)
    if rank == 0:
        for r in res[:8] if a.out else res:          # a run folder may hold thousands: the first few
            print(f"--- sample {r['index']} (seed {r['seed']}, NFE {r['nfe']})")
            for i, step_text in enumerate(r.get("trajectory", [])):
                print(f"  step {i + 1}: {step_text}")
            print(r["text"])
    return res


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
