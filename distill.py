"""Progressive distillation of an ELF teacher into few-step students (ELF_SPEC §10).

    python distill.py configs/distill_tiny.py --teacher out/tiny --round 1      # one round (span 1/16)
    python distill.py configs/distill_tiny.py --teacher out/tiny --curriculum   # rounds 1..5: 16 -> 1 steps
    python distill.py configs/distill_tiny.py --teacher out/tiny --report       # the table of results/
    python sample.py --ckpt out/distill_tiny/round3 --preset fewstep4

A round teaches a student to cross a span d of time in one Euler step. Per example:
t_s = u (1 - d) with u drawn like a training time, t_t = t_s + d, z_s = t_s x + (1 - t_s) s eps.
The frozen teacher walks from (z_s, t_s) to t_t in K Euler sub-steps (times: K - 1 sorted
training-time draws rescaled into the span), each prediction the next one's self-conditioning
input; the target is the x whose one Euler step lands where the teacher did:

    x_target = z_s + (1 - t_s) / (t_t - t_s) * (z_teacher - z_s)      (1 - t_s clamped at t_eps)

The student regresses x_target in x-space (per-token MSE); a decoder_prob share of the
batch keeps training the decode head with CE, as in §5. Self-conditioning (on half the
rows: the teacher's own prediction at z_s) and the SC-CFG scale w (drawn as in training)
are fed to teacher and student alike. Rounds shrink d through 1/16, 1/8, 1/4, 1/2, 1; round
1 starts from the teacher's EMA weights, round k from round k - 1's, and each round's
checkpoint is kept in <out_dir>/round<k> (with its span in config.json). The teacher is the
original model in every round (§10: "a trained ELF, frozen"). One process, one device.

Config as in train.py (config.py: strict keys and types); `--key value` and a bare
`--flag` are accepted beside `--key=value`.
"""

import copy
import dataclasses
import json
import os
import sys
import time
import types
import typing
from dataclasses import dataclass
from fractions import Fraction

import torch
import torch.nn.functional as F

from config import parse
from data import batch_indices, load_token_rows
from encoder import Latents
from flow import FlowConfig, interpolate, rand, randn, sample_sc_cfg, sample_t, v_to_x, x_to_v
from model import load_checkpoint, save_checkpoint
from muon import Muon, muon_param_groups
from sample import PRESETS, Denoiser, load_sampler, sample_latents, time_grid


@dataclass
class DistillConfig:
    # I/O
    teacher: str = ""                  # a train.py out_dir: the frozen teacher (its EMA weights)
    out_dir: str = "out/distill"       # round k goes to <out_dir>/round<k>
    round: int = 1                     # the round to run (1-based); with curriculum, the first one
    curriculum: bool = False           # run rounds round..last, each from the previous one's EMA
    spans: str = "1/16,1/8,1/4,1/2,1"  # the step span d of each round (§10)
    # data: None = the teacher's own setting (its train config)
    dataset: typing.Optional[str] = None
    text_column: typing.Optional[str] = None
    val_size: typing.Optional[int] = None
    packing: typing.Optional[bool] = None
    latent_cache: typing.Optional[bool] = None
    cache_dir: typing.Optional[str] = None
    # objective (§10)
    teacher_substeps: int = 4          # K Euler sub-steps of the teacher per span
    decoder_prob: float = 0.2          # share of rows that train the decode head (CE)
    self_cond_prob: float = 0.5
    # optimisation (§7, §10: Muon blr 1e-3, warmup 0.1 epoch, ~1 epoch per round)
    optimizer: str = "muon"            # 'muon' or 'adamw'
    muon_params: str = "all"
    batch_size: int = 512
    blr: float = 1e-3                  # lr = blr * batch_size / 256
    warmup_steps: int = 1724
    steps_per_round: int = 17240
    grad_clip: float = 1.0
    ema_decay: float = 0.9999
    ema_warmup: bool = False           # decay_k = min(decay, (1 + k) / (10 + k)) for short rounds
    seed: int = 0
    device: str = "auto"               # 'auto', 'cpu', 'cuda', 'cuda:1', ...
    dtype: str = "auto"                # autocast: 'auto' (bfloat16 on CUDA), 'float32', 'bfloat16'
    log_interval: int = 10
    # evaluation: trajectory error (ODE, uniform grid, against the teacher's traj_ref_steps
    # ODE end point from the same noise) and, with --report, Gen. PPL / entropy per step count
    traj_n: int = 64                   # noise draws for the trajectory error
    traj_ref_steps: int = 64
    traj_sc_cfg: float = 2.5           # SC-CFG scale of those ODE runs (the fewstep presets' w)
    report: bool = False               # no training: evaluate the teacher and every saved round
    report_dir: str = "results/distill"
    report_steps: str = "1,2,4,8"      # sampled with sample.PRESETS['fewstep<n>'], uniform grid
    report_n: int = 64                 # samples per Gen. PPL / entropy cell
    judge: str = "judge"               # evaluate.py's judge (a local folder or hub name)


def parse_config(argv):
    """[config.py] [--key=value | --key value | --flag ...] -> DistillConfig, checked."""
    hints, args = typing.get_type_hints(DistillConfig), []
    for a in argv:                     # '--teacher out/tiny' -> '--teacher=out/tiny'; '--flag' -> '--flag=true'
        if args and args[-1].startswith("--") and "=" not in args[-1] and not a.startswith("--"):
            args[-1] += "=" + a
        else:
            args.append(a)
    args = [f"{a}=true" if a.startswith("--") and "=" not in a and hints.get(a[2:]) is bool else a for a in args]
    cfg = parse(args, DistillConfig)
    if not cfg.teacher:
        raise ValueError("distill.py needs --teacher (a train.py out_dir)")
    if not 1 <= cfg.round <= len(spans(cfg)):
        raise ValueError(f"round {cfg.round} out of range: the curriculum has {len(spans(cfg))} rounds ({cfg.spans})")
    for key, allowed in (("optimizer", ("muon", "adamw")), ("muon_params", ("all", "blocks")),
                         ("dtype", ("auto", "float32", "bfloat16"))):
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"unknown {key} '{getattr(cfg, key)}' (choose from {', '.join(allowed)})")
    if cfg.teacher_substeps < 1:
        raise ValueError(f"teacher_substeps must be >= 1, got {cfg.teacher_substeps}")
    return cfg


def spans(cfg: DistillConfig):
    """'1/16,1/8,...' -> [Fraction], each in (0, 1]."""
    try:
        out = [Fraction(s.strip()) for s in cfg.spans.split(",")]
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"spans must be fractions like '1/16,1/8,1/4,1/2,1', got '{cfg.spans}'") from None
    if not all(0 < d <= 1 for d in out):
        raise ValueError(f"every span must lie in (0, 1], got '{cfg.spans}'")
    return out


# ----------------------------------------------------------------------------------------
# the round's objective (§10) as small functions; tests/test_distill.py checks their math

def substep_times(t_s, t_t, k: int, flow: FlowConfig, generator=None):
    """(B, k + 1) sub-step times from t_s to t_t: k - 1 sorted draws of the training time
    distribution, rescaled into [t_s, t_t] (as the logit-normal sampling grid of §8)."""
    B = t_s.shape[0]
    inner = sample_t(B * (k - 1), t_s, flow, generator).view(B, k - 1).sort(dim=1).values
    r = torch.cat((torch.zeros_like(t_s)[:, None], inner, torch.ones_like(t_s)[:, None]), dim=1)
    return t_s[:, None] + (t_t - t_s)[:, None] * r


@torch.no_grad()
def teacher_path(teacher, z, times, w, x_sc, t_eps: float):
    """Euler from z at times[:, 0] to times[:, -1] (times: (B, k + 1)), each step's x_hat
    becoming the next step's self-conditioning input; returns the end point (B, L, D)."""
    for j in range(times.shape[1] - 1):
        t, t_next = times[:, j], times[:, j + 1]
        x_hat = teacher(z, t, w, x_sc=x_sc)[0].to(z.dtype)             # (B, L, D)
        z = z + (t_next - t).view(-1, 1, 1) * x_to_v(x_hat, z, t, t_eps)
        x_sc = x_hat
    return z


def inversion_target(z_s, z_end, t_s, t_t, t_eps: float):
    """The x whose one Euler step from (z_s, t_s) lands on z_end at t_t: the needed velocity
    (z_end - z_s) / (t_t - t_s) mapped back to x with the sampler's own clamp, i.e.
    z_s + max(1 - t_s, t_eps) / (t_t - t_s) * (z_end - z_s) (§10's formula for 1 - t_s >= t_eps)."""
    return v_to_x((z_end - z_s) / (t_t - t_s).view(-1, 1, 1), z_s, t_s, t_eps)


def distill_loss(student, teacher, x, tokens, loss_mask, span: float, flow: FlowConfig, k: int = 4, generator=None):
    """One mixed batch of §10. x: (B, L, D) clean latents, tokens: (B, L), loss_mask: (B, L)
    bool. Returns (loss, metrics), loss = (sum MSE_x + sum CE) / #masked tokens as in §5."""
    B, mask = x.shape[0], loss_mask.float()
    eps = randn(x.shape, x, generator)
    decode = rand((B,), x, generator) < flow.decoder_prob                       # (B,) branch
    t_s = sample_t(B, x, flow, generator) * (1 - span)                          # (B,) student time
    t_t = t_s + span
    w = sample_sc_cfg(B, x, flow, generator)                                    # fed to both nets
    use_sc = ~decode & (rand((B,), x, generator) < flow.self_cond_prob)
    lam = torch.sigmoid(flow.dec_lam_mean + flow.dec_lam_std * randn(x.shape[:2] + (1,), x, generator))
    z_dec = lam * x + (1 - lam) * flow.decoder_noise_scale * eps                # (B, L, D) decode input
    z_s = interpolate(x, eps, t_s, flow.noise_scale)                            # (B, L, D)

    # the teacher, frozen and without gradients, on the denoise rows only
    x_sc, x_target = torch.zeros_like(x), torch.zeros_like(x)
    with torch.no_grad():
        sc = use_sc.nonzero().squeeze(1)
        if sc.numel() > 0:             # self-conditioning input: the teacher's guess at (z_s, t_s)
            x_sc = x_sc.index_copy(0, sc, teacher(z_s[sc], t_s[sc], w[sc])[0].float())
        den = (~decode).nonzero().squeeze(1)
        if den.numel() > 0:
            times = substep_times(t_s[den], t_t[den], k, flow, generator)       # (R, k + 1)
            z_end = teacher_path(teacher, z_s[den], times, w[den], x_sc[den], flow.t_eps)
            x_target = x_target.index_copy(0, den, inversion_target(z_s[den], z_end, t_s[den], t_t[den], flow.t_eps))

    # the student: one forward over the mixed batch, logits for the decode rows only
    z = torch.where(decode.view(-1, 1, 1), z_dec, z_s)
    t = torch.where(decode, torch.ones_like(t_s), t_s)
    dec = decode.nonzero().squeeze(1)
    x_hat, logits = student(z, t, w, x_sc=x_sc, decode=decode, logits_rows=dec)
    mse = (x_hat.float() - x_target).pow(2).mean(-1)                             # (B, L) x-space
    ce = F.cross_entropy(logits.float().flatten(0, 1), tokens[dec].flatten(),
                         reduction="none").view(len(dec), tokens.shape[1])       # (R, L)
    den_mask, dec_mask = mask * (~decode).float()[:, None], mask[dec]
    loss = ((mse * den_mask).sum() + (ce * dec_mask).sum()) / mask.sum().clamp(min=1)
    return loss, {"mse": ((mse * den_mask).sum() / den_mask.sum().clamp(min=1)).detach(),
                  "ce": ((ce * dec_mask).sum() / dec_mask.sum().clamp(min=1)).detach()}


@torch.no_grad()
def ode_end(model, z, steps: int, sc_cfg: float, flow: FlowConfig):
    """End point of the Euler ODE on the uniform grid (a span-1/n student's own grid)."""
    return sample_latents(Denoiser(model, sc_cfg, flow=flow), z, time_grid(steps, device=z.device))[0]


def rms(a, b) -> float:
    """Trajectory error: root mean square over every latent entry (B, L, D) of a - b."""
    return (a.float() - b.float()).pow(2).mean().sqrt().item()


# ----------------------------------------------------------------------------------------
# data, rounds, the curriculum

def round_dir(cfg, k: int) -> str:
    return os.path.join(cfg.out_dir, f"round{k}")


def run_round(cfg, k: int, teacher, encoder, meta, latents, device, z_ref=None):
    """Train round k's student and save it (EMA included) to <out_dir>/round<k>."""
    span = spans(cfg)[k - 1]
    init = cfg.teacher if k == 1 else round_dir(cfg, k - 1)
    if not os.path.isfile(os.path.join(init, "model.safetensors")):
        raise FileNotFoundError(f"round {k} starts from round {k - 1}: no checkpoint at {init} (run it first)")
    student, init_meta = load_checkpoint(init, device)                  # EMA weights of the start point
    if init_meta["model"] != meta["model"]:
        raise ValueError(f"{init} holds another model config than the teacher {cfg.teacher}")
    student.train().requires_grad_(True)
    ema = copy.deepcopy(student).eval().requires_grad_(False)
    lr = cfg.blr * cfg.batch_size / 256
    opt = (Muon(muon_param_groups(student, cfg.muon_params), lr=lr) if cfg.optimizer == "muon" else
           torch.optim.AdamW(student.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0))
    flow = FlowConfig(**{**meta["flow"], "decoder_prob": cfg.decoder_prob, "self_cond_prob": cfg.self_cond_prob})
    cuda = device.startswith("cuda")
    autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                              enabled=cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and cuda))
    print(f"round {k}: span {span} ({1 / span} steps), from {init}, {cfg.steps_per_round} steps at batch "
          f"{cfg.batch_size}, K = {cfg.teacher_substeps} teacher sub-steps")
    t0 = time.time()
    for step in range(cfg.steps_per_round):
        for g in opt.param_groups:                                      # linear warmup, then constant
            g["lr"] = lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
        idx = batch_indices(step, cfg.batch_size, len(latents.ids), cfg.seed + 7919 * k)
        x, tokens, mask = latents.batch(idx, device)[:3]
        gen = torch.Generator(device).manual_seed(cfg.seed * 1_000_003 + step + (k << 32))
        with autocast:
            loss, m = distill_loss(student, teacher, x, tokens, mask, float(span), flow,
                                   cfg.teacher_substeps, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), cfg.grad_clip)
        opt.step()
        decay = min(cfg.ema_decay, (2 + step) / (11 + step)) if cfg.ema_warmup else cfg.ema_decay
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), student.parameters()):
                pe.lerp_(pm, 1 - decay)
        if (step + 1) % cfg.log_interval == 0 or step + 1 == cfg.steps_per_round:
            print(f"round {k} step {step + 1}: loss {loss.item():.4f} mse_x {m['mse'].item():.4f} "
                  f"ce {m['ce'].item():.4f} lr {opt.param_groups[0]['lr']:.2e} ({time.time() - t0:.0f}s)", flush=True)
    info = {**dataclasses.asdict(cfg), "round": k, "span": float(span), "span_fraction": str(span),
            "sampling_steps": round(1 / span), "init": init, "teacher_step": meta["step"]}
    save_checkpoint(round_dir(cfg, k), student, ema, opt, cfg.steps_per_round, {**meta, "distill": info})
    if z_ref is not None:                                               # (noise, teacher reference)
        n, (z, ref) = round(1 / span), z_ref
        err = [rms(ode_end(net, z, n, cfg.traj_sc_cfg, flow), ref) for net in (ema, teacher)]
        print(f"round {k}: {n}-step trajectory error: student {err[0]:.4f}, teacher {err[1]:.4f}")
    print(f"round {k}: saved {round_dir(cfg, k)}")
    return ema


def reference(cfg, teacher, meta, device):
    """(noise z (traj_n, L, D), the teacher's traj_ref_steps-step ODE end point from it)."""
    g = torch.Generator(device).manual_seed(cfg.seed)
    flow = FlowConfig(**meta["flow"])
    z = flow.noise_scale * torch.randn(cfg.traj_n, meta["train"]["max_length"], meta["model"]["latent_dim"],
                                       generator=g, device=device)
    return z, ode_end(teacher, z, cfg.traj_ref_steps, cfg.traj_sc_cfg, flow)


def report(cfg, teacher, encoder, meta, device):
    """Trajectory error and Gen. PPL / entropy at report_steps for the teacher and each saved
    round; writes report.json and report.md to report_dir."""
    from evaluate import load_judge, provenance, score_texts, write_json
    from model import atomic_write_text
    from sample import generate
    judge, tok = load_judge(cfg.judge, device)
    flow, length = FlowConfig(**meta["flow"]), meta["train"]["max_length"]
    z, ref = reference(cfg, teacher, meta, device)
    rounds = [(f"round{k}", round_dir(cfg, k)) for k in range(1, len(spans(cfg)) + 1) if os.path.isdir(round_dir(cfg, k))]
    rows, setup = [], {"judge": cfg.judge, "length": length, **{k: getattr(cfg, k) for k in (
        "teacher", "report_n", "traj_n", "traj_ref_steps", "traj_sc_cfg", "seed")}, "rounds": {}}
    for name, path in [("teacher", cfg.teacher)] + rounds:
        model, m = (teacher, meta) if name == "teacher" else load_checkpoint(path, device)
        span = m["distill"]["span_fraction"] if "distill" in m else "-"
        if "distill" in m:
            setup["rounds"][name] = m["distill"]
        for n in (int(s) for s in cfg.report_steps.split(",")):
            preset = dict(PRESETS.get(f"fewstep{n}", dict(PRESETS["fewstep8"], steps=n)))   # uniform grid
            texts = [r["text"] for r in generate(model, encoder, n=cfg.report_n, length=length,
                                                 seed=cfg.seed, noise_scale=flow.noise_scale, **preset)]
            s = score_texts(texts, judge, tok)
            rows.append({"model": name, "ckpt": path, "span": span, "steps": n,
                         "traj_err": rms(ode_end(model, z, n, cfg.traj_sc_cfg, flow), ref), "gen_ppl": s["ppl"],
                         "entropy": s["entropy"], "distinct_2": s["distinct_2"], "preset": preset,
                         "example": texts[0], **provenance(path)})
            print(f"{name:>8} {n} steps: trajectory error {rows[-1]['traj_err']:.4f}  Gen. PPL {s['ppl']:.1f}  "
                  f"entropy {s['entropy']:.3f}", flush=True)
    write_json(os.path.join(cfg.report_dir, "report.json"), {"setup": setup, "rows": rows})
    lines = [f"Teacher {cfg.teacher} and the students of {cfg.out_dir} (distill.py --report). Trajectory error: RMS "
             f"over all latent entries of (n-step Euler ODE end point - the teacher's {cfg.traj_ref_steps}-step one), "
             f"uniform grid, SC-CFG {cfg.traj_sc_cfg:g}, the same {cfg.traj_n} noise draws (seed {cfg.seed}). Gen. PPL / "
             f"entropy: {cfg.report_n} samples of length {length} with sample.PRESETS['fewstep<n>'] on the uniform "
             f"grid, judged by {cfg.judge}.", "",
             "| model | span | steps | trajectory error | Gen. PPL | entropy |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['model']} | {r['span']} | {r['steps']} | {r['traj_err']:.4f} | {r['gen_ppl']:.1f} | "
              f"{r['entropy']:.3f} |" for r in rows]
    atomic_write_text(os.path.join(cfg.report_dir, "report.md"), "\n".join(lines) + "\n")
    return rows


def main(argv):
    cfg = parse_config(argv)
    print(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    torch.manual_seed(cfg.seed)
    teacher, encoder, meta = load_sampler(cfg.teacher, device)          # EMA weights, eval mode
    teacher.requires_grad_(False)
    meta = {k: v for k, v in meta.items() if k != "distill"}           # a student as teacher: its own meta
    print(f"teacher {cfg.teacher}: step {meta['step']}, {teacher.num_params() / 1e6:.2f}M parameters")
    if cfg.report:
        return report(cfg, teacher, encoder, meta, device)
    keys = ("dataset", "text_column", "val_size", "packing", "latent_cache", "cache_dir")
    data_cfg = types.SimpleNamespace(**meta["train"])               # the teacher's data, unless overridden
    data_cfg.__dict__.update({k: getattr(cfg, k) for k in keys if getattr(cfg, k) is not None})
    ids = load_token_rows(data_cfg, encoder)[0]                         # (N, L) training rows
    latents = Latents(encoder, ids, data_cfg.cache_dir, data_cfg.latent_cache)
    print(f"data: {len(ids)} rows of {ids.shape[1]} tokens from {data_cfg.dataset}")
    z_ref = reference(cfg, teacher, meta, device) if cfg.traj_n > 0 else None
    last = len(spans(cfg)) if cfg.curriculum else cfg.round
    return [run_round(cfg, k, teacher, encoder, meta, latents, device, z_ref) for k in range(cfg.round, last + 1)]


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
