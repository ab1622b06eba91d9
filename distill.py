"""Progressive distillation of an ELF teacher into few-step students (METHOD.md, "Distillation").

    python distill.py configs/distill_tiny.py --teacher out/tiny \
        --round 1         # one round (span 1/16)
    python distill.py configs/distill_tiny.py --teacher out/tiny \
        --curriculum      # rounds 1..5: 16 -> 1 steps
    python evaluate.py --distill out/distill_tiny --ckpt out/tiny \
        --judge J         # their trajectory error, Gen. PPL
    python sample.py --ckpt out/distill_tiny/round3 --preset fewstep4
    python distill.py configs/distill_tiny.py --teacher out/tiny --curriculum \
        --objective flow --out_dir out/distill_control   # the control: no distillation

A round teaches a student to cross a span d of time in one Euler step. Per example:
t_s = u (1 - d) with u drawn like a training time, t_t = t_s + d, z_s = t_s x + (1 - t_s) s eps.
The frozen teacher walks from (z_s, t_s) to t_t in K Euler sub-steps (times: K - 1 sorted
training-time draws rescaled into the span), each prediction the next one's self-conditioning
input; the target is the x whose one Euler step lands where the teacher did:

    x_target = z_s + (1 - t_s) / (t_t - t_s) * (z_teacher - z_s)      (1 - t_s clamped at t_eps)

The student regresses x_target in x-space (per-token MSE); a decoder_prob share of the
batch keeps training the decode head with CE, as in training. Self-conditioning (on half the
rows: the teacher's own prediction at z_s) and the SC-CFG scale sc_cfg (drawn as in training)
are fed to teacher and student alike. Rounds shrink d through 1/16, 1/8, 1/4, 1/2, 1; round
1 starts from the teacher's EMA weights, round k from round k - 1's, and each round's
checkpoint is kept in <out_dir>/round<k> (with its span in config.json). The teacher is the
original model in every round (a trained ELF, frozen). One process, one device.

The control (--objective flow) runs the same rounds, from the same weights, on the same
batches with the same lr and EMA, but on the teacher's own flow-matching loss: a student that
beats its teacher at few steps only by more than this control does owes the gain to
distillation, not to the extra training steps.

Config as in train.py (lib/config.py: strict keys and types, `--help` lists them).
"""

import copy
import dataclasses
import json
import os
import time
import types
import typing
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Optional

import torch

from encoder import Latents
from flow import (
    FlowConfig,
    decode_inputs,
    elf_loss,
    interpolate,
    mixed_loss,
    rand,
    randn,
    sample_sc_cfg,
    sample_t,
    to_x,
    v_to_x,
    x_to_v,
)
from lib import checkpoint
from lib.config import parse, resolve_device
from lib.data import batch_indices, load_token_rows, noise_seed
from lib.guard import Writer, cli
from lib.optim import (
    Finite,
    autocast,
    ema_decay,
    ema_update,
    flush_denormals,
    keep_freed_memory,
    make_optimizer,
    scaled_lr,
    set_lr,
    warmup_lr,
)
from lib.outputs import check_folder
from sample import load_sampler


@dataclass
class DistillConfig:
    # I/O
    teacher: str = ""  # a train.py out_dir: the frozen teacher (its EMA weights)
    out_dir: str = "out/distill"  # round k goes to <out_dir>/round<k>
    round: int = 1  # the round to run (1-based); with curriculum, the first one
    curriculum: bool = False  # run rounds round..last, each from the previous one's EMA
    spans: str = "1/16,1/8,1/4,1/2,1"  # the step span d of each round
    # data: None = the teacher's own setting (its train config)
    dataset: typing.Optional[str] = None
    text_column: typing.Optional[str] = None
    val_size: typing.Optional[int] = None
    packing: typing.Optional[bool] = None
    latent_cache: typing.Optional[bool] = None
    cache_dir: typing.Optional[str] = None
    # what a round trains on: 'distill' (the inversion target), or 'flow': the control, the
    # teacher's own loss (flow.elf_loss) with the same rounds, lr, EMA, batches and noise:
    # what the students owe to more training of an undertrained teacher, not to distillation
    objective: Annotated[str, ("distill", "flow")] = "distill"
    # objective: the teacher's (its flow.FlowConfig), with these overrides (None: the teacher's)
    teacher_substeps: Annotated[int, "at_least_1"] = 4  # K Euler sub-steps of the teacher per span
    # share of rows that train the decode head (CE)
    decoder_prob: Annotated[Optional[float], "probability"] = None
    # share of denoise rows self-conditioned
    self_cond_prob: Annotated[Optional[float], "probability"] = None
    # optimisation (released: Muon blr 1e-3, warmup 0.1 epoch, ~1 epoch per round)
    optimizer: Annotated[str, ("muon", "adamw")] = "muon"
    muon_params: Annotated[str, ("all", "blocks")] = "all"
    batch_size: Annotated[int, "at_least_1"] = 512
    blr: Annotated[float, "positive"] = 1e-3  # lr = blr * batch_size / 256
    warmup_steps: Annotated[int, "non_negative"] = 1724
    steps_per_round: Annotated[int, "at_least_1"] = 17240
    grad_clip: Annotated[float, "positive"] = 1.0
    ema_decay: Annotated[float, "fraction"] = 0.9999
    ema_warmup: bool = False  # decay_k = min(decay, (1 + k) / (10 + k)) for short rounds
    seed: int = 0
    device: str = "auto"  # 'auto', 'cpu', 'cuda', 'cuda:1', ...
    # autocast: 'auto' (bfloat16 on CUDA), 'float32', 'bfloat16'
    dtype: Annotated[str, ("auto", "float32", "bfloat16")] = "auto"
    log_interval: Annotated[int, "at_least_1"] = 10
    overwrite: bool = False  # replace round folders that already hold a checkpoint


def parse_config(argv):
    """[config.py] [--key=value | --key value | --flag ...] -> DistillConfig, checked."""
    cfg = parse(argv, DistillConfig, "distill.py")
    if not cfg.teacher:
        raise ValueError("distill.py needs --teacher (a train.py out_dir)")
    if not 1 <= cfg.round <= len(spans(cfg)):
        raise ValueError(
            f"round {cfg.round} out of range: the curriculum has "
            f"{len(spans(cfg))} rounds ({cfg.spans})"
        )
    if cfg.cache_dir is not None:
        check_folder(os.path.expanduser(cfg.cache_dir), "cache_dir")
    return cfg


def spans(cfg: DistillConfig):
    """'1/16,1/8,...' -> [Fraction], each in (0, 1]."""
    try:
        out = [Fraction(s.strip()) for s in cfg.spans.split(",")]
    except (ValueError, ZeroDivisionError):
        raise ValueError(
            f"spans must be fractions like '1/16,1/8,1/4,1/2,1', got '{cfg.spans}'"
        ) from None
    if not all(0 < d <= 1 for d in out):
        raise ValueError(f"every span must lie in (0, 1], got '{cfg.spans}'")
    return out


# ----------------------------------------------------------------------------------------
# the round's objective as small functions; tests/test_distill.py checks their math


def substep_times(t_s, t_t, k: int, flow: FlowConfig, generator=None):
    """(B, k + 1) sub-step times from t_s to t_t: k - 1 sorted draws of the training time
    distribution, rescaled into [t_s, t_t] (as the logit-normal sampling grid)."""
    B = t_s.shape[0]
    inner = sample_t(B * (k - 1), t_s, flow, generator).view(B, k - 1).sort(dim=1).values
    r = torch.cat((torch.zeros_like(t_s)[:, None], inner, torch.ones_like(t_s)[:, None]), dim=1)
    return t_s[:, None] + (t_t - t_s)[:, None] * r


@torch.no_grad()
def teacher_path(teacher, z, times, sc_cfg, x_sc, flow: FlowConfig):
    """Euler from z at times[:, 0] to times[:, -1] (times: (B, k + 1)), each step's x_hat
    becoming the next step's self-conditioning input; returns the end point (B, L, D)."""
    for j in range(times.shape[1] - 1):
        t, t_next = times[:, j], times[:, j + 1]
        x_hat = to_x(teacher(z, t, sc_cfg, x_sc=x_sc)[0].to(z.dtype), z, t, flow)  # (B, L, D)
        z = z + (t_next - t).view(-1, 1, 1) * x_to_v(x_hat, z, t, flow.t_eps)
        x_sc = x_hat
    return z


def inversion_target(z_s, z_end, t_s, t_t, t_eps: float):
    """The x whose one Euler step from (z_s, t_s) lands on z_end at t_t: the needed velocity
    (z_end - z_s) / (t_t - t_s) mapped back to x with the sampler's own clamp, i.e.
    z_s + max(1 - t_s, t_eps) / (t_t - t_s) * (z_end - z_s) (the released formula for
    1 - t_s >= t_eps)."""
    return v_to_x((z_end - z_s) / (t_t - t_s).view(-1, 1, 1), z_s, t_s, t_eps)


def distill_loss(
    student,
    teacher,
    x,
    tokens,
    loss_mask,
    span: float,
    flow: FlowConfig,
    k: int = 4,
    generator=None,
):
    """One mixed batch of distillation. x: (B, L, D) clean latents, tokens: (B, L) as rows of the
    decoder's logits (`ELF.vocab_index`), loss_mask: (B, L) bool. Returns (loss, metrics),
    loss = (sum MSE_x + sum CE) / #masked tokens as in training."""
    B = x.shape[0]
    eps = randn(x.shape, x, generator)
    decode = rand((B,), x, generator) < flow.decoder_prob  # (B,) branch
    t_s = sample_t(B, x, flow, generator) * (1 - span)  # (B,) student time
    t_t = t_s + span
    sc_cfg = sample_sc_cfg(B, x, flow, generator)  # fed to both nets
    use_sc = ~decode & (rand((B,), x, generator) < flow.self_cond_prob)
    z_dec = decode_inputs(x, eps, flow, generator)  # (B, L, D)
    z_s = interpolate(x, eps, t_s, flow.noise_scale)  # (B, L, D)

    # the teacher, frozen and without gradients, on the denoise rows only
    x_sc, x_target = torch.zeros_like(x), torch.zeros_like(x)
    with torch.no_grad():
        sc = use_sc.nonzero().squeeze(1)
        if sc.numel() > 0:  # self-conditioning input: the teacher's guess at (z_s, t_s)
            x_sc = x_sc.index_copy(
                0,
                sc,
                to_x(teacher(z_s[sc], t_s[sc], sc_cfg[sc])[0].float(), z_s[sc], t_s[sc], flow),
            )
        den = (~decode).nonzero().squeeze(1)
        if den.numel() > 0:
            times = substep_times(t_s[den], t_t[den], k, flow, generator)  # (R, k + 1)
            z_end = teacher_path(teacher, z_s[den], times, sc_cfg[den], x_sc[den], flow)
            x_target = x_target.index_copy(
                0, den, inversion_target(z_s[den], z_end, t_s[den], t_t[den], flow.t_eps)
            )

    # the student: one forward over the mixed batch, logits for the decode rows only
    z = torch.where(decode.view(-1, 1, 1), z_dec, z_s)
    t = torch.where(decode, torch.ones_like(t_s), t_s)
    out, logits = student(
        z, t, sc_cfg, x_sc=x_sc, decode=decode, decode_idx=decode.nonzero().squeeze(1)
    )
    mse = (to_x(out.float(), z, t, flow) - x_target).pow(2).mean(-1)  # (B, L) x-space
    return mixed_loss(mse, logits, tokens, loss_mask, decode)


# ----------------------------------------------------------------------------------------
# data, rounds, the curriculum


def round_dir(cfg, k: int) -> str:
    return os.path.join(cfg.out_dir, f"round{k}")


def run_round(cfg, k: int, teacher, meta, latents, device):
    """Train round k's student and save it (EMA included) to <out_dir>/round<k>."""
    span = spans(cfg)[k - 1]
    init = cfg.teacher if k == 1 else round_dir(cfg, k - 1)
    if checkpoint.find(init, warn=lambda m: None) is None:
        raise FileNotFoundError(
            f"round {k} starts from round {k - 1}: no checkpoint at {init} (run it first)"
        )
    student, init_meta = checkpoint.load(init, device)  # EMA weights of the start point
    if init_meta["model"] != meta["model"]:
        raise ValueError(f"{init} holds another model config than the teacher {cfg.teacher}")
    student.train().requires_grad_(True)
    ema = copy.deepcopy(student).eval().requires_grad_(False)
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    opt = make_optimizer(student, cfg.optimizer, cfg.muon_params, lr)
    overrides = {
        k: getattr(cfg, k)
        for k in ("decoder_prob", "self_cond_prob")
        if getattr(cfg, k) is not None
    }
    flow = FlowConfig(**{**meta["flow"], **overrides})
    amp = autocast(device, cfg.dtype)
    print(
        ("control: the teacher's own loss; " if cfg.objective == "flow" else "")
        + f"round {k}: span {span} ({1 / span} steps), from {init}, "
        f"{cfg.steps_per_round} steps at batch {cfg.batch_size}, "
        f"K = {cfg.teacher_substeps} teacher sub-steps"
    )
    t0, finite = time.time(), Finite(device)  # nan / inf in the loss or the gradients
    for step in range(cfg.steps_per_round):
        set_lr(opt, warmup_lr(lr, step, cfg.warmup_steps))
        idx = batch_indices(step, cfg.batch_size, len(latents), cfg.seed + 7919 * k)
        x, tokens, masks = latents.batch(idx, device)
        tokens = student.vocab_index(tokens)  # the ids as indices of the decoder's logits
        x = teacher.latents(x, tokens)  # the teacher's: encoder or learned table
        gen = torch.Generator(device).manual_seed(noise_seed(cfg.seed, step, shard=k))  # round k
        with amp:
            if cfg.objective == "flow":  # the control: the same batches on the teacher's loss
                loss, m = elf_loss(student, x, tokens, masks.loss, flow, gen)
            else:
                loss, m = distill_loss(
                    student,
                    teacher,
                    x,
                    tokens,
                    masks.loss,
                    float(span),
                    flow,
                    cfg.teacher_substeps,
                    gen,
                )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(student.parameters(), cfg.grad_clip)
        opt.step()
        finite.update(step + 1, loss.detach(), grad_norm)
        ema_update(ema, student, ema_decay(cfg.ema_decay, step + 1, cfg.ema_warmup))
        # every log_interval steps, and before the save
        if (step + 1) % cfg.log_interval == 0 or step + 1 == cfg.steps_per_round:
            finite.check(
                lambda: (
                    f"a learning rate too high (lr {lr:g} = blr {cfg.blr:g} "
                    f"x batch_size {cfg.batch_size} / 256): "
                    f"lower --blr or raise --warmup_steps"
                ),
                lambda: f"round {k} was not saved",
            )
            print(
                f"round {k} step {step + 1}: loss {loss.item():.4f} mse_x {m['mse'].item():.4f} "
                f"ce {m['ce'].item():.4f} lr {opt.param_groups[0]['lr']:.2e} "
                f"({time.time() - t0:.0f}s)",
                flush=True,
            )
    info = {
        **dataclasses.asdict(cfg),
        "round": k,
        "span": float(span),
        "span_fraction": str(span),
        "sampling_steps": round(1 / span),
        "init": init,
        "teacher_step": meta["step"],
    }
    checkpoint.save(
        round_dir(cfg, k), student, ema, opt, cfg.steps_per_round, {**meta, "distill": info}, keep=1
    )
    print(
        f"round {k}: saved {round_dir(cfg, k)} "
        f"(score the rounds: python evaluate.py --distill {cfg.out_dir} "
        f"--ckpt {cfg.teacher} --judge ...)"
    )
    return ema


def main(argv):
    cfg = parse_config(argv)
    device = resolve_device(cfg.device)
    with Writer(cfg.out_dir, "out_dir", "distill"):  # one writer of the rounds' folder
        last = len(spans(cfg)) if cfg.curriculum else cfg.round
        for k in range(cfg.round, last + 1):  # refused before the teacher loads, replaced if asked
            checkpoint.guard(round_dir(cfg, k), "out_dir", cfg.overwrite)
            checkpoint.remove_temporary(round_dir(cfg, k))
        return run_rounds(cfg, device, range(cfg.round, last + 1))


def run_rounds(cfg: DistillConfig, device: str, rounds):
    """Load the teacher and its data, then run the rounds, each from the previous one's EMA."""
    print(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    if device == "cpu":
        keep_freed_memory()  # freed buffers are reused, not page-faulted in each step
        flush_denormals()  # denormals as zero (lib/optim.py)
    torch.manual_seed(cfg.seed)
    teacher, encoder, meta = load_sampler(cfg.teacher, device)  # EMA weights, eval mode
    teacher.requires_grad_(False)
    # a student as teacher: its own meta
    meta = {k: v for k, v in meta.items() if k != "distill"}
    print(
        f"teacher {cfg.teacher}: step {meta['step']}, {teacher.num_params() / 1e6:.2f}M parameters"
    )
    keys = ("dataset", "text_column", "val_size", "packing", "latent_cache", "cache_dir")
    # the teacher's data, unless overridden (checkpoints older than pad_token/framing: their
    # defaults)
    data_cfg = types.SimpleNamespace(**{"pad_token": "pad", "framing": False, **meta["train"]})
    data_cfg.__dict__.update({k: getattr(cfg, k) for k in keys if getattr(cfg, k) is not None})
    rows = load_token_rows(data_cfg, encoder)[0]  # conditional.Rows: the training rows
    latents = Latents(encoder, rows, data_cfg.cache_dir, data_cfg.latent_cache)
    print(f"data: {len(rows)} rows of {rows.max_length} tokens from {data_cfg.dataset}")
    done = []
    for k in rounds:
        try:
            done.append(run_round(cfg, k, teacher, meta, latents, device))
        except KeyboardInterrupt:  # Ctrl-C: one line; finished rounds kept
            kept = f"rounds up to {k - 1} are kept in {cfg.out_dir}" if k > 1 else "none saved"
            raise KeyboardInterrupt(
                f"interrupted in round {k}; {kept}; --round {k} runs it again"
            ) from None
    return done


if __name__ == "__main__":
    cli(main)
