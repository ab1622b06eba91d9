"""Train ELF on text encoded by a frozen encoder (METHOD.md: "The objective", "Optimiser and
schedule").

    python train.py configs/tiny.py                    # the offline CPU default (~10 min)
    python train.py configs/tiny.py --max_steps 50 --batch_size 16
    python train.py                                    # the paper's ELF-B (= configs/owt_elf_b.py)
    torchrun --nproc_per_node=8 train.py configs/owt_elf_b.py   # the same on 8 GPUs (DDP)
    python train.py --help                             # every key, its default and what it does

Config the nanoGPT way, strictly: defaults in `TrainConfig` (lib/config.py, with the checks that
need several keys), which are the paper's ELF-B run, then the config file, then `--key value`
overrides. Unknown keys and wrong types are errors that name the key.

The run: documents -> encoder tokens -> rows -> frozen-encoder latents (cached on disk once)
-> the mixed-batch flow loss of flow.py -> Muon or AdamW with warmup, grad clip, EMA ->
validation losses, metrics.jsonl and atomic checkpoints with exact resume -> samples.

Read it top down: `loop` (one optimisation step after another), `train_step` (one step's
gradients, where `elf_loss` of flow.py is called), `validate`, then `run` (the setup that
builds the `TrainState` the loop advances) and the helpers below it.

One code path for one device and many: launched by torchrun, each rank trains on its
slice of the global batch (DDP: NCCL on CUDA, Gloo on CPU) and only rank 0 logs, evaluates
and saves. On CUDA the model runs under torch.compile and bf16 autocast by default.
"""

import contextlib
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from conditional import label_drop
from encoder import FrozenEncoder, Latents
from flow import elf_loss, sampler_settings
from lib import checkpoint
from lib.config import TrainConfig, flow_config, free_on_resume, parse_train, snapshot_minutes
from lib.data import batch_indices, load_token_rows, noise_seed
from lib.dist import ddp, distributed
from lib.guard import Writer, cli, interrupted
from lib.optim import (
    Finite,
    autocast,
    ema_decay,
    ema_update,
    flush_denormals,
    keep_freed_memory,
    make_optimizer,
    peak_memory,
    scaled_lr,
    set_lr,
    warmup_lr,
)
from lib.outputs import Log, Progress, check_folder
from lib.pairs import load_pair_rows
from lib.store import train_vocab
from model import ELF, SIZES, ELFConfig, ModelKnobs
from sample import generate, generate_conditional


@dataclass
class TrainState:
    """What the loop advances and a checkpoint keeps."""

    model: ELF  # the plain module: trained, EMA'd, saved (never wrapped)
    ema: ELF  # the moving average of its weights: validated and sampled
    opt: torch.optim.Optimizer
    net: torch.nn.Module  # what the loop calls: `model`, under DDP and torch.compile (wrap)
    step: int = 0  # optimisation steps done
    minutes: float = 0.0  # training minutes so far, across resumes (time limit, snapshots)
    meta: dict = field(default_factory=dict)  # saved beside the weights: configs, latent statistics


@dataclass
class Proc:
    """This process: rank `rank` of `world` (1 without torchrun), on `device`, under `amp`."""

    rank: int
    world: int
    device: str
    amp: torch.autocast  # bf16 autocast where asked (optim.autocast), else disabled


def loop(cfg: TrainConfig, s: TrainState, train: Latents, val: Latents, p: Proc, log: Log):
    """The training loop: warmup, gradients, clip, step, EMA; logs, validation, checkpoints."""
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    micro = cfg.batch_size // (p.world * cfg.grad_accum)  # rows per forward
    snapshots = [m for m in snapshot_minutes(cfg) if m > s.minutes]
    if p.rank == 0:
        with p.amp:
            log.record(step=s.step, **validate(s.ema, val, cfg, p.device, micro))
    # the bar counts to the time limit
    bar = Progress(cfg.max_steps, s.step, cfg.time_limit_min, on=p.rank == 0)
    t_start, done = time.time() - 60 * s.minutes, s.step >= cfg.max_steps
    finite = Finite(p.device)  # nan / inf in the loss or the gradients
    while not done:
        set_lr(s.opt, warmup_lr(lr, s.step, cfg.warmup_steps, cfg.lr_schedule, cfg.max_steps))
        s.opt.zero_grad(set_to_none=True)
        loss = train_step(s.net, s.model, train, cfg, s.step, p)  # (3,): loss, mse, ce
        grad_norm = torch.nn.utils.clip_grad_norm_(s.model.parameters(), cfg.grad_clip)
        s.opt.step()
        s.step += 1
        finite.update(s.step, loss, grad_norm)
        ema_update(s.ema, s.model, ema_decay(cfg.ema_decay, s.step, cfg.ema_warmup))
        s.minutes = (time.time() - t_start) / 60
        done = s.step >= cfg.max_steps or out_of_time(cfg, s.minutes, p.device)
        bar.update(s.step, s.minutes)
        log_now = s.step % cfg.log_interval == 0 or done
        eval_now = p.rank == 0 and (s.step % cfg.eval_interval == 0 or done)
        save_now = p.rank == 0 and (s.step % cfg.ckpt_interval == 0 or done)
        snap_now = p.rank == 0 and bool(snapshots) and s.minutes >= snapshots[0]
        if log_now or eval_now or save_now or snap_now:
            # before anything is logged, validated or saved (the host waits for the device anyway)
            finite.check(
                lambda: divergence_cause(cfg, p.device), lambda: checkpoint.kept(cfg.out_dir)
            )
        if log_now:
            values = dict(zip(("loss", "mse", "ce"), loss.tolist()))
            log.record(
                step=s.step,
                tokens=s.step * cfg.batch_size * cfg.max_length,
                lr=s.opt.param_groups[0]["lr"],
                **values,
            )
            bar.set_postfix({k: f"{v:.3f}" for k, v in values.items()})
        if eval_now:
            with p.amp:
                scores = validate(s.ema, val, cfg, p.device, micro)
            if p.device.startswith("cuda"):
                scores["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
            log.record(step=s.step, **scores)
            bar.write(f"step {s.step}: val mse {scores['val_mse']:.4f} ce {scores['val_ce']:.4f}")
        meta = dict(s.meta, train_minutes=s.minutes)
        # a snapshot before the checkpoint: one interrupted is taken again by the resumed run
        while p.rank == 0 and snapshots and s.minutes >= snapshots[0]:  # weights only, kept apart
            folder = os.path.join(cfg.out_dir, f"at-{snapshots[0]:g}min")
            checkpoint.save(folder, s.model, s.ema, None, s.step, meta, keep=1)
            snapshots.pop(0)
        if save_now:
            checkpoint.save(cfg.out_dir, s.model, s.ema, s.opt, s.step, meta, cfg.keep_checkpoints)
    bar.close()


def train_step(net, model: ELF, train: Latents, cfg: TrainConfig, step: int, p: Proc):
    """One optimisation step's gradients: this rank's slices of the global batch, grad_accum
    micro-batches, gradients all-reduced once. Returns (loss, mse, ce), means over the batch."""
    idx = batch_indices(step, cfg.batch_size, len(train), cfg.seed)  # the global batch (B,)
    micro = cfg.batch_size // (p.world * cfg.grad_accum)
    logged = torch.zeros(3, device=p.device)
    for j in range(cfg.grad_accum):
        shard = p.rank * cfg.grad_accum + j  # this forward's slice of the global batch
        # noise is a function of (seed, step, shard): resume is exact, and N ranks x A
        # accumulation steps draw exactly what 1 rank x N*A accumulation steps draws
        seed = noise_seed(cfg.seed, step, shard)
        drop = label_drop(micro, cfg.label_drop_prob, seed)  # rows without source (CFG)
        x, tokens, masks = train.batch(idx[shard * micro : (shard + 1) * micro], p.device, drop)
        tokens = model.vocab_index(tokens)  # the ids as indices of the decoder's logits
        x = model.latents(x, tokens)  # the encoder's, or a learned table's
        gen = torch.Generator(p.device).manual_seed(seed)
        # the loss tokens' weights: the padding at pad_weight (the logged mse and ce too;
        # validate's are unweighted, comparable across pad_weight)
        weights = masks.weights(cfg.pad_weight)
        sync = not ddp() or j == cfg.grad_accum - 1  # DDP: all-reduce on the last micro-batch
        with contextlib.nullcontext() if sync else net.no_sync():
            with p.amp:
                loss, m = elf_loss(net, x, tokens, weights, cfg, gen, masks.cond)
            (loss / cfg.grad_accum).backward()
        logged += torch.stack((loss.detach().float(), m["mse"], m["ce"])) / cfg.grad_accum
    if ddp():
        dist.all_reduce(logged)  # for logging only: the mean over ranks
        logged /= p.world
    return logged


@torch.no_grad()
def validate(model, latents: Latents, cfg: TrainConfig, device, chunk: int):
    """Validation MSE (all rows denoised) and CE (all rows decoded) with fixed noise;
    `chunk` rows per forward (a training micro-batch: what fits in memory)."""
    model.eval()
    n = min(len(latents), cfg.eval_batches * cfg.batch_size)
    sums = {"mse": 0.0, "ce": 0.0}
    gen = torch.Generator(device).manual_seed(1234)
    for i in range(0, n, chunk):
        x, tokens, masks = latents.batch(np.arange(i, min(n, i + chunk)), device)
        tokens = model.vocab_index(tokens)
        x = model.latents(x, tokens)
        for key, prob in (("mse", 0.0), ("ce", 1.0)):  # all rows denoised, then all decoded
            flow = dataclasses.replace(flow_config(cfg), decoder_prob=prob)
            _, m = elf_loss(model, x, tokens, masks.loss, flow, gen, masks.cond)
            sums[key] += m[key].item() * len(x)
    model.train()
    return {f"val_{k}": v / n for k, v in sums.items()}


def run(cfg: TrainConfig, rank: int, world: int, device: str):
    """Set up (run folder, data, model, optimiser, resume, wrappers), train, then report."""
    # the CPU's settings before any parallel operation: OpenMP's worker threads copy the
    # float mode of the thread that starts them (optim.flush_denormals)
    if not device.startswith("cuda"):
        keep_freed_memory()  # freed buffers reused, not page-faulted in
        flush_denormals()  # denormals as zero (lib/optim.py: why)
    log = Log(cfg, rank, kept=checkpoint.kept)
    if rank == 0:  # before any data is read
        checkpoint.prepare(
            cfg.out_dir,
            cfg.init_from == "resume",
            cfg.overwrite,
            dataclasses.asdict(cfg),
            free_on_resume(cfg),
            cfg.allow_changes,
            log,
        )
    torch.manual_seed(cfg.seed)  # same init on every rank
    log(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    log(f"devices: {world} x {device}" + (f" (DDP, {dist.get_backend()})" if ddp() else ""))
    encoder = FrozenEncoder(
        cfg.encoder,
        cfg.latent_mean,
        cfg.latent_std,
        cfg.encoder_dtype,
        cfg.encoder_weights,
        cfg.encoder_layer,
    ).to(device)
    train, val = load_data(cfg, encoder, rank, world, log)
    s = init_state(cfg, encoder, train, device, log)
    s.net = for_speed(cfg, s.model, device)  # `s.model` itself stays plain
    try:
        loop(cfg, s, train, val, Proc(rank, world, device, autocast(device, cfg.dtype)), log)
    except KeyboardInterrupt:  # Ctrl-C: one line, the checkpoint intact
        raise interrupted(s.step, checkpoint.kept(cfg.out_dir)) from None
    rss, files = peak_memory()
    memory = f"peak resident memory {rss:.2f} GB ({files:.2f} GB of it mapped files, shared)"
    if world > 1:
        print(f"rank {rank}: {memory}", flush=True)
    else:
        log(f"{memory}, {(time.time() - log.t0) / 60:.1f} min since start")
    log.record(step=s.step, peak_rss_gb=rss, mapped_files_gb=files)
    if rank == 0:
        closing_samples(cfg, s.ema, encoder, val, device)
    log.close()
    return s.model


def init_state(cfg: TrainConfig, encoder, train: Latents, device: str, log: Log) -> TrainState:
    """Model, EMA and optimiser, fresh or resumed from out_dir, and the latent statistics."""
    size = dict(SIZES[cfg.model])  # depth, hidden, heads: the size's or set
    size.update({k: getattr(cfg, k) for k in ("depth", "hidden", "heads") if getattr(cfg, k)})
    vocab_ids = None  # token_vocab='train': the ids training shows,
    if cfg.token_vocab == "train":  # the unknown token (else EOS) first, for the rest
        unk = encoder.tokenizer.unk_token_id
        vocab_ids = train_vocab(train.rows, unk if unk is not None else encoder.eos_id)
    knobs = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(ModelKnobs)}  # by name
    model_cfg = ELFConfig(
        **knobs,
        latent_dim=encoder.dim,
        vocab_size=encoder.vocab_size,
        max_seq_len=cfg.max_seq_len,
        cut_vocab=0 if vocab_ids is None else len(vocab_ids),
        **size,
    )
    model = ELF(model_cfg).to(device)
    if vocab_ids is not None:
        for net in {model, model.decoding}:  # the decoder's network holds them too
            net.vocab_ids.copy_(vocab_ids)
    if cfg.decoder_init == "encoder":  # start from the encoder's token embeddings
        init_unembedding(model, encoder)
    ema = ELF(model_cfg).to(device).requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    log(f"model {cfg.model}: {model.num_params() / 1e6:.2f}M parameters")
    opt = make_optimizer(model, cfg.optimizer, cfg.muon_params, scaled_lr(cfg.blr, cfg.batch_size))
    s = TrainState(model, ema, opt, net=model)
    if cfg.init_from == "resume":
        saved = checkpoint.resume(cfg.out_dir, model, ema, opt, dataclasses.asdict(model_cfg), log)
        if vocab_ids is not None and not torch.equal(model.vocab_ids.cpu(), vocab_ids):
            raise ValueError(
                f"the training rows hold other token ids than the run in "
                f"{cfg.out_dir} was started with (token_vocab=train): resume it on "
                f"the same data"
            )
        s.step, s.minutes = saved["step"], saved.get("train_minutes", 0.0)  # the clocks go on
        log.t0 -= 60 * s.minutes
        stats = saved["latent_stats"]  # the statistics the run was trained with
        encoder.latent_mean, encoder.latent_std = stats["mean"], stats["std"]
        log(f"resumed from {cfg.out_dir} at step {s.step}")
    elif encoder.latent_mean is None:
        encoder.estimate_stats(train.raw(np.arange(min(len(train), 256))).cpu())
    log(f"latent statistics: mean {encoder.latent_mean:.4f} std {encoder.latent_std:.4f}")
    s.meta = {
        "train": dataclasses.asdict(cfg),
        "model": dataclasses.asdict(model_cfg),
        "flow": dataclasses.asdict(flow_config(cfg)),
        "latent_stats": {"mean": encoder.latent_mean, "std": encoder.latent_std},
    }
    return s


@torch.no_grad()
def init_unembedding(model, encoder):
    """The decoder's unembedding (V x D, or V' x D under a cut vocabulary) set to the frozen
    encoder's token-embedding table (its rows of those ids), rescaled to the initialisation's
    RMS: the decoder starts from how the encoder itself tells tokens apart, not from random rows."""
    table = encoder.model.get_input_embeddings().weight
    if model.vocab_ids is not None:  # a cut vocabulary: its rows of the table
        table = table[model.vocab_ids.to(table.device)]
    w = model.decoding.decoder_head.unembed.weight
    if table.shape != w.shape:
        raise ValueError(
            f"decoder_init=encoder needs a token-embedding table of shape "
            f"{tuple(w.shape)}, encoder '{encoder.name}' has {tuple(table.shape)}"
        )
    table = table.to(w)
    w.copy_(table * (w.pow(2).mean().sqrt() / table.pow(2).mean().sqrt()))


def load_data(cfg: TrainConfig, encoder, rank: int, world: int, log):
    """(train, val) Latents of the rows of lib/data.py (conditional: lib/pairs.py). Rank 0
    builds the token store and the latent cache while the other ranks wait; then every rank
    maps the same files."""
    if world > 1 and rank != 0:
        dist.barrier()
    t0 = time.time()
    load_rows = load_pair_rows if cfg.max_input_length else load_token_rows  # conditional or not
    train_rows, val_rows = load_rows(cfg, encoder)
    log(
        f"data: {len(train_rows)} train rows, {len(val_rows)} val rows of {cfg.max_length} tokens "
        f"({time.time() - t0:.1f}s)"
    )
    t0 = time.time()
    latents = [
        Latents(encoder, rows, cfg.cache_dir, cfg.latent_cache) for rows in (train_rows, val_rows)
    ]
    if cfg.latent_cache:
        log(f"latent cache ready in {time.time() - t0:.1f}s")
    if world > 1 and rank == 0:
        dist.barrier()
    return latents


def for_speed(cfg: TrainConfig, model, device: str):
    """The module the loop calls, and the GPU's settings for speed (the CPU's come first in
    `run`); `model` stays plain, so checkpoints never see the wrappers."""
    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True  # float32 matmuls outside autocast
        torch.backends.cudnn.allow_tf32 = True
    model.grad_checkpointing = model.decoding.grad_checkpointing = cfg.grad_ckpt
    net = wrap(model, cfg.compile if cfg.compile is not None else cuda, cuda)
    if cuda:  # the loop's peak, not the setup's
        torch.cuda.reset_peak_memory_stats()
    return net


def wrap(model, compile: bool, cuda: bool):
    """The module the loop calls: DDP when distributed, then torch.compile. In this order
    dynamo sees DDP and splits the graph at its gradient buckets (DDPOptimizer), so each
    bucket's all-reduce starts while the backward goes on; a compiled module inside DDP
    would hand DDP all its gradients at once, at the end of the backward."""
    net = model
    if ddp():
        devices = [torch.cuda.current_device()] if cuda else None
        # separate_decoder: each network sits out the steps (and heads) that are not its own
        net = DDP(
            net,
            device_ids=devices,
            broadcast_buffers=False,
            find_unused_parameters=model.decoder_net is not None,
        )
    return torch.compile(net) if compile else net


def divergence_cause(cfg: TrainConfig, device: str) -> str:
    """What most often makes a run's loss nan or inf, in this run's numbers."""
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    cause = (
        f"a learning rate too high for this run (lr {lr:g} = blr {cfg.blr:g} x batch_size "
        f"{cfg.batch_size} / 256): lower --blr or raise --warmup_steps "
        f"(now {cfg.warmup_steps})"
    )
    if cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and device.startswith("cuda")):
        cause += "; or a bfloat16 overflow (--dtype float32)"
    return cause


def out_of_time(cfg: TrainConfig, minutes: float, device) -> bool:
    """Whether time_limit_min has passed; every rank stops at the same step."""
    if cfg.time_limit_min <= 0:
        return False
    late = torch.tensor(float(minutes > cfg.time_limit_min), device=device)
    if ddp():
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
    return bool(late)


def closing_samples(cfg: TrainConfig, ema, encoder, val: Latents, device):
    """The validation losses at the start and the end, and a few samples of the EMA model."""
    with open(os.path.join(cfg.out_dir, "metrics.jsonl")) as f:
        evals = [r for r in map(json.loads, f) if "val_mse" in r]
    first, last = evals[0], evals[-1]
    for key, name in (("val_mse", "denoise mse:"), ("val_ce", "decode  ce: ")):
        print(
            f"val {name} {first[key]:.4f} (step {first['step']}) -> "
            f"{last[key]:.4f} (step {last['step']})"
        )
    if cfg.n_samples <= 0:
        return
    steps = {"steps": cfg.sample_steps} if cfg.sample_steps else {}  # 0: the preset's
    s = sampler_settings(cfg.sample_preset, **steps)
    name = f"{cfg.sample_preset}: {s['sampler']}, {s['steps']} steps, SC-CFG {s['sc_cfg']:g}"
    if cfg.max_input_length:  # conditional: a few held-out sources
        rows = val.rows.select(slice(0, cfg.n_samples))
        srcs = [ids[:c].tolist() for ids, c in zip(rows.ids, rows.cond_len)]
        hyps = generate_conditional(
            ema,
            encoder,
            srcs,
            cfg.max_length,
            cfg.max_input_length,
            seed=cfg.seed,
            flow=flow_config(cfg),
            preset=cfg.sample_preset,
            **s,
        )
        for i, (src, ids, c, h) in enumerate(zip(srcs, rows.ids, rows.cond_len, hyps)):
            print(
                f"--- sample {i} ({name}, CFG {s['guidance']:g})\n"
                f"source:    {encoder.detokenize(src)}\n"
                f"reference: {encoder.detokenize(ids[c:])}\noutput:    {h['text']}"
            )
        return
    for r in generate(
        ema,
        encoder,
        n=cfg.n_samples,
        length=cfg.max_length,
        seed=cfg.seed,
        flow=flow_config(cfg),
        preset=cfg.sample_preset,
        **s,
    ):
        print(f"--- sample {r['index']} ({name})\n{r['text']}")


def main(argv):
    cfg = parse_train(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.batch_size % (world * cfg.grad_accum):
        raise ValueError(
            f"batch_size {cfg.batch_size} does not split into {world} rank(s) "
            f"x grad_accum {cfg.grad_accum}"
        )
    Writer(cfg.out_dir, "out_dir", "elf").check()  # before the process group starts
    check_folder(os.path.expanduser(cfg.cache_dir), "cache_dir")
    with distributed(cfg.device) as (rank, world, device):
        # one writer per run folder: rank 0 alone writes it, so rank 0 alone holds its lock
        with Writer(cfg.out_dir, "out_dir", "elf") if rank == 0 else contextlib.nullcontext():
            return run(cfg, rank, world, device)


if __name__ == "__main__":
    cli(main)
