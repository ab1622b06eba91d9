"""Train ELF on text encoded by a frozen encoder (METHOD.md: "Objective", "Optimiser and schedule").

    python train.py configs/tiny.py                    # the offline CPU default (~10 min)
    python train.py configs/tiny.py --max_steps 50 --batch_size 16
    python train.py                                    # the paper's ELF-B on OpenWebText (= configs/owt_elf_b.py)
    torchrun --nproc_per_node=8 train.py configs/owt_elf_b.py   # the same on 8 GPUs (DDP)
    python train.py --help                             # every key, its default and what it does

Config the nanoGPT way, strictly (config.py): defaults in `TrainConfig`, which are the
paper's ELF-B run, then the config file, then `--key value` overrides. Unknown keys and
wrong types are errors that name the key.

The run: documents -> encoder tokens -> rows -> frozen-encoder latents (cached on disk once)
-> the mixed-batch flow loss of flow.py -> Muon or AdamW with warmup, grad clip, EMA ->
validation losses, metrics.jsonl and atomic checkpoints with exact resume -> samples.

One code path for one device and many: launched by torchrun, each rank trains on its
slice of the global batch (DDP: NCCL on CUDA, Gloo on CPU) and only rank 0 logs, evaluates
and saves. On CUDA the model runs under torch.compile and bf16 autocast by default.
"""

import contextlib
import dataclasses
import json
import os
import re
import resource
import sys
import time
import typing
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import checkpoint
from config import check_ranges, parse
from data import batch_indices, load_pair_rows, load_token_rows
from encoder import FrozenEncoder, Latents
from flow import FlowConfig, elf_loss
from model import ELF, ELFConfig, SIZES
from optim import (Finite, autocast, ema_decay, ema_update, keep_freed_memory, make_optimizer, scaled_lr, set_lr,
                   warmup_lr)
from outputs import RunLock
from shards import distributed

F = FlowConfig  # the objective's defaults, stated once in flow.py


@dataclass
class TrainConfig:
    """Train ELF. The defaults are the paper's ELF-B run on OpenWebText (configs/owt_elf_b.py)."""
    # I/O
    out_dir: str = "out/owt_elf_b"
    init_from: str = "scratch"         # 'scratch' (out_dir must hold no checkpoint) or 'resume' (from out_dir)
    overwrite: bool = False            # with init_from=scratch: delete the checkpoints already in out_dir
    allow_changes: str = ""            # resume: comma-separated keys that may differ from the saved run
    log_interval: int = 10             # steps between train-loss lines in out_dir/metrics.jsonl
    eval_interval: int = 2000          # steps between validation losses (EMA weights)
    eval_batches: int = 4              # validation rows = eval_batches * batch_size
    ckpt_interval: int = 2000
    keep_checkpoints: int = 2          # step folders kept in out_dir (a damaged newest one is skipped)
    snapshot_minutes: str = ""         # e.g. '10,20,40': also save <out_dir>/at-<m>min at these training minutes
    n_samples: int = 4                 # decoded at the end with the EMA weights
    sample_preset: str = "uncond32"    # sample.py preset of those samples (and sample.py's / evaluate.py's default)
    sample_steps: int = 0              # 0: the preset's step count
    wandb: bool = False                # also log to Weights & Biases (needs the wandb package)
    wandb_project: str = "elf-torch"
    # data (data.py)
    dataset: str = "Skylion007/openwebtext"  # 'wiki', 'wiki_descriptions' (bundled), a hub name, a file or a folder
    text_column: str = "text"
    val_size: int = 500                # documents held out when the source has no validation split
    max_length: int = 1024             # tokens per row
    packing: bool = True               # pack documents into full rows; False: one per row, padded
    pad_token: str = "pad"             # padded rows: 'pad' (padding outside the loss) or 'eos' (EOS padding, learnt)
    framing: bool = False              # keep the tokenizer's special tokens around each document ([CLS] .. [SEP])
    latent_cache: bool = False         # encode the data set once into cache_dir (small data only)
    cache_dir: str = "~/.cache/elf-torch"
    # conditional generation (METHOD.md, "Conditional generation"; data.py load_pairs): rows are [source ; target]
    max_input_length: int = 0          # > 0: conditional; the source's token budget
    label_drop_prob: float = 0.1       # examples trained without their source, for CFG
    source_column: str = ""            # '' = source/target, input/output or condition_input_ids/input_ids
    target_column: str = ""
    dataset_config: str = ""           # hub config name, e.g. 'de-en' for wmt/wmt14
    val_split: str = ""                # hub split held out and scored ('' = validation)
    # encoder and model
    encoder: str = "t5-small"          # 'minilm' (bundled), a hub name or a local folder
    encoder_dtype: str = "float32"     # 'auto': the frozen encoder in bfloat16 where the device computes it natively
    encoder_weights: str = "pretrained"  # 'random': the encoder's architecture, randomly initialised (an ablation)
    latent_mean: typing.Optional[float] = 0.0  # latent statistics (T5-small: 0.0 / 0.2); None: estimated from data
    latent_std: typing.Optional[float] = 0.2
    model: str = "ELF-B"               # a size of model.SIZES
    depth: typing.Optional[int] = None  # override the size's depth, width or heads (None: the size's)
    hidden: typing.Optional[int] = None
    heads: typing.Optional[int] = None
    bottleneck: int = 128
    max_seq_len: typing.Optional[int] = None  # RoPE table: the longest sequence the model takes (None: max_length)
    pos_embed: bool = False            # a learned absolute position embedding (not released; model.py)
    n_prefix: int = 4                  # prefix tokens per conditioning signal (released: 4; model.py)
    decoder_init: str = "random"       # the decoder's unembedding: 'random' (released) or 'encoder' (its token embeddings)
    # objective: every field of flow.FlowConfig, with its defaults (flow_config() copies them over)
    noise_scale: float = F.noise_scale  # s in z_t = t x + (1 - t) s eps
    t_eps: float = F.t_eps             # clamp on 1 - t in x -> v
    p_mean: float = F.p_mean           # training times t = sigmoid(N(p_mean, p_std)): negative weights noise
    p_std: float = F.p_std
    decoder_prob: float = F.decoder_prob  # share of decode-branch rows
    decoder_noise_scale: float = F.decoder_noise_scale  # s_dec of the decode rows' corruption
    dec_lam_mean: float = F.dec_lam_mean  # decode rows: z = lam x + (1 - lam) s_dec eps, lam = sigmoid(N(mean, std))
    dec_lam_std: float = F.dec_lam_std
    self_cond_prob: float = F.self_cond_prob
    sc_cfg_min: float = F.sc_cfg_min   # SC-CFG scale drawn log-uniformly in 1 + [min, max]
    sc_cfg_max: float = F.sc_cfg_max
    prediction: str = F.prediction     # the network predicts 'x' (the method), 'v' or 'eps' (ablations)
    # optimisation (optim.py)
    optimizer: str = "muon"            # 'muon' (Muon + NAdam-like Adam, muon.py) or 'adamw'
    muon_params: str = "all"           # 2-D weights on Muon: 'all' (the authors) or 'blocks' (Muon reference)
    batch_size: int = 512              # global: summed over ranks and accumulation steps
    grad_accum: int = 1                # micro-batches per rank per step (one all-reduce per step)
    blr: float = 1e-3                  # lr = blr * batch_size / 256
    warmup_steps: int = 8620           # linear warmup (0.5 epoch of OpenWebText), then constant
    lr_schedule: str = "constant"      # after warmup: 'constant' (released) or 'cosine' (down to lr/10 at max_steps)
    max_steps: int = 86200             # 5 epochs of OpenWebText
    time_limit_min: float = 0.0        # > 0: also stop after this many minutes of training
    grad_clip: float = 1.0
    ema_decay: float = 0.9999
    ema_warmup: bool = False           # decay_k = min(decay, (1 + k) / (10 + k)) for short runs
    seed: int = 0
    device: str = "auto"               # 'auto', 'cpu', 'cuda', 'cuda:1', ... (torchrun: auto/cuda/cpu)
    # speed
    compile: typing.Optional[bool] = None  # torch.compile the model; None: on for CUDA, off on CPU
    dtype: str = "auto"                # autocast: 'auto' (bfloat16 on CUDA, float32 on CPU), 'float32', 'bfloat16'
    grad_ckpt: bool = False            # recompute blocks in backward: ~1/3 more compute, far less memory


# keys a resumed run may change freely: they do not touch what the next steps compute
FREE_ON_RESUME = {"out_dir", "init_from", "overwrite", "allow_changes", "log_interval", "eval_interval", "eval_batches",
                  "ckpt_interval", "keep_checkpoints", "snapshot_minutes", "n_samples", "sample_preset",
                  "sample_steps", "wandb", "wandb_project", "max_steps", "time_limit_min", "device", "compile",
                  "cache_dir", "latent_cache"}


def parse_config(argv):
    """[config.py] [--key value ...] -> TrainConfig, with the checks that need several keys."""
    from sample import PRESETS
    cfg = parse(argv, TrainConfig, "train.py")
    cfg.max_seq_len = cfg.max_seq_len or cfg.max_length
    for key, allowed in (("init_from", ("scratch", "resume")), ("model", tuple(SIZES)),
                         ("optimizer", ("muon", "adamw")), ("muon_params", ("all", "blocks")),
                         ("dtype", ("auto", "float32", "bfloat16")), ("encoder_dtype", ("auto", "float32", "bfloat16")),
                         ("pad_token", ("pad", "eos")),
                         ("sample_preset", tuple(PRESETS)), ("prediction", ("x", "v", "eps")),
                         ("lr_schedule", ("constant", "cosine")), ("encoder_weights", ("pretrained", "random")),
                         ("decoder_init", ("random", "encoder"))):
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"unknown {key} '{getattr(cfg, key)}' (choose from {', '.join(allowed)})")
    if cfg.max_length > cfg.max_seq_len:
        raise ValueError(f"max_length {cfg.max_length} exceeds the model's RoPE table (max_seq_len={cfg.max_seq_len})")
    if cfg.max_input_length and not 0 < cfg.max_input_length < cfg.max_length:
        raise ValueError(f"max_input_length {cfg.max_input_length} must be in (0, max_length={cfg.max_length})")
    if cfg.grad_accum < 1 or cfg.batch_size % cfg.grad_accum:
        raise ValueError(f"grad_accum {cfg.grad_accum} must be >= 1 and divide batch_size {cfg.batch_size}")
    check_ranges(cfg, at_least_1=("batch_size", "max_length", "max_steps", "eval_interval", "ckpt_interval",
                                  "log_interval", "eval_batches", "keep_checkpoints", "depth", "hidden", "heads",
                                  "bottleneck", "n_prefix"),
                 probability=("decoder_prob", "self_cond_prob", "label_drop_prob"),
                 positive=("blr", "noise_scale", "decoder_noise_scale", "grad_clip", "t_eps", "p_std", "dec_lam_std",
                           "latent_std"),
                 non_negative=("warmup_steps", "time_limit_min", "val_size", "sample_steps", "n_samples"),
                 fraction=("ema_decay",))
    try:
        [float(m) for m in cfg.snapshot_minutes.split(",") if m.strip()]
    except ValueError:
        raise ValueError(f"snapshot_minutes must be minutes like '10,20,40', got '{cfg.snapshot_minutes}'") from None
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ValueError(f"unknown device '{cfg.device}' (choose from auto, cpu, cuda, cuda:N)")
    return cfg


def flow_config(cfg: TrainConfig) -> FlowConfig:
    """The objective's settings: the TrainConfig fields named as FlowConfig's."""
    return FlowConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(FlowConfig)})


@torch.no_grad()
def init_unembedding(model, encoder):
    """The decoder's unembedding (V x D) set to the frozen encoder's token-embedding table
    (V x D too when the encoder's width is D), rescaled to the initialisation's RMS: the
    decoder starts from how the encoder itself tells tokens apart, not from random rows."""
    table = encoder.model.get_input_embeddings().weight
    w = model.decoder_head.unembed.weight
    if table.shape != w.shape:
        raise ValueError(f"decoder_init=encoder needs a token-embedding table of shape {tuple(w.shape)}, "
                         f"encoder '{encoder.name}' has {tuple(table.shape)}")
    table = table.to(w)
    w.copy_(table * (w.pow(2).mean().sqrt() / table.pow(2).mean().sqrt()))


class Log:
    """Rank 0 alone speaks: prints, one JSON line per record in out_dir/metrics.jsonl, an
    optional wandb run, and a plot of the curves (metrics.png) at the end."""

    def __init__(self, cfg: TrainConfig, rank: int):
        self.on, self.path, self.t0, self.run = rank == 0, os.path.join(cfg.out_dir, "metrics.jsonl"), time.time(), None
        if self.on and cfg.wandb:
            import wandb                                  # imported only when asked for
            self.run = wandb.init(project=cfg.wandb_project, config=dataclasses.asdict(cfg))

    def __call__(self, *args):
        if self.on:
            print(*args, flush=True)

    def record(self, **values):
        """Append {minutes, **values} to metrics.jsonl (and wandb)."""
        if not self.on:
            return
        values = {"minutes": round((time.time() - self.t0) / 60, 4), **values}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        try:
            with open(self.path, "a") as f:
                f.write(json.dumps(values) + "\n")
        except OSError as e:                              # a full disk: one line; checkpoints are written apart
            raise ValueError(f"could not append step {values['step']} to {self.path} ({checkpoint.first_line(e)}); "
                             f"{kept(os.path.dirname(self.path))}") from None
        if self.run is not None:
            self.run.log(values, step=values["step"])

    def close(self):
        if self.on and os.path.isfile(self.path):
            plot_metrics(self.path)
        if self.run is not None:
            self.run.finish()


def plot_metrics(path):
    """metrics.png beside metrics.jsonl: train loss and validation MSE / CE against minutes."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, key, title in zip(axes, ("loss", "val_mse", "val_ce"), ("train loss", "val denoise MSE", "val decode CE")):
        pts = [(r["minutes"], r[key]) for r in recs if key in r]
        ax.plot(*zip(*pts), marker="." if key != "loss" else None) if pts else None
        ax.set(xlabel="minutes", title=title)
    fig.tight_layout()
    fig.savefig(os.path.splitext(path)[0] + ".png", dpi=100)
    plt.close(fig)


@torch.no_grad()
def validate(model, latents: Latents, cfg: TrainConfig, device, chunk: int):
    """Validation MSE (all rows denoised) and CE (all rows decoded) with fixed noise;
    `chunk` rows per forward (a training micro-batch: what fits in memory)."""
    model.eval()
    n = min(len(latents), cfg.eval_batches * cfg.batch_size)
    sums = {"mse": 0.0, "ce": 0.0}
    gen = torch.Generator(device).manual_seed(1234)
    for i in range(0, n, chunk):
        x, tokens, mask, cond = latents.batch(np.arange(i, min(n, i + chunk)), device)
        for key, p in (("mse", 0.0), ("ce", 1.0)):
            _, m = elf_loss(model, x, tokens, mask, dataclasses.replace(flow_config(cfg), decoder_prob=p), gen, cond)
            sums[key] += m[key].item() * len(x)
    model.train()
    return {f"val_{k}": v / n for k, v in sums.items()}


def load_data(cfg: TrainConfig, encoder, rank: int, world: int, log):
    """(train, val) Latents of the rows of data.py. Rank 0 builds the token store and the
    latent cache while the other ranks wait; then every rank maps the same files."""
    if world > 1 and rank != 0:
        dist.barrier()
    t0 = time.time()
    train_rows, val_rows = (load_pair_rows if cfg.max_input_length else load_token_rows)(cfg, encoder)
    log(f"data: {len(train_rows)} train rows, {len(val_rows)} val rows of {cfg.max_length} tokens "
        f"({time.time() - t0:.1f}s)")
    t0 = time.time()
    latents = [Latents(encoder, rows, cfg.cache_dir, cfg.latent_cache) for rows in (train_rows, val_rows)]
    if cfg.latent_cache:
        log(f"latent cache ready in {time.time() - t0:.1f}s")
    if world > 1 and rank == 0:
        dist.barrier()
    return latents


def train_step(net, train: Latents, cfg, step: int, rank: int, world: int, device, amp):
    """One optimisation step's gradients: this rank's slices of the global batch, grad_accum
    micro-batches, gradients all-reduced once. Returns (loss, mse, ce), means over the batch."""
    idx = batch_indices(step, cfg.batch_size, len(train), cfg.seed)  # the global batch (B,)
    micro = cfg.batch_size // (world * cfg.grad_accum)
    logged = torch.zeros(3, device=device)
    for j in range(cfg.grad_accum):
        shard = rank * cfg.grad_accum + j                # this forward's slice of the global batch
        # noise is a function of (seed, step, shard): resume is exact, and N ranks x A
        # accumulation steps draw exactly what 1 rank x N*A accumulation steps draws
        seed = cfg.seed * 1_000_003 + step + (shard << 32)
        drop = torch.rand(micro, generator=torch.Generator().manual_seed(seed)) < cfg.label_drop_prob
        x, tokens, mask, cond = train.batch(idx[shard * micro:(shard + 1) * micro], device, drop)
        gen = torch.Generator(device).manual_seed(seed)
        sync = not ddp() or j == cfg.grad_accum - 1      # DDP: all-reduce on the last micro-batch only
        with contextlib.nullcontext() if sync else net.no_sync():
            with amp:
                loss, m = elf_loss(net, x, tokens, mask, flow_config(cfg), gen, cond)
            (loss / cfg.grad_accum).backward()
        logged += torch.stack((loss.detach().float(), m["mse"], m["ce"])) / cfg.grad_accum
    if ddp():
        dist.all_reduce(logged)                          # for logging only: the mean over ranks
        logged /= world
    return logged


def run(cfg: TrainConfig, rank: int, world: int, device: str):
    log = Log(cfg, rank)
    if rank == 0:                                        # before any data is read
        checkpoint.prepare(cfg.out_dir, cfg.init_from == "resume", cfg.overwrite, dataclasses.asdict(cfg),
                           FREE_ON_RESUME - ({"max_steps"} if cfg.lr_schedule == "cosine" else set()),  # the decay's length
                           cfg.allow_changes, log)
    torch.manual_seed(cfg.seed)                          # same init on every rank
    log(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    log(f"devices: {world} x {device}" + (f" (DDP, {dist.get_backend()})" if ddp() else ""))
    encoder = FrozenEncoder(cfg.encoder, cfg.latent_mean, cfg.latent_std, cfg.encoder_dtype, cfg.encoder_weights).to(device)
    train, val = load_data(cfg, encoder, rank, world, log)

    size = {**SIZES[cfg.model], **{k: getattr(cfg, k) for k in ("depth", "hidden", "heads") if getattr(cfg, k)}}
    model_cfg = ELFConfig(latent_dim=encoder.dim, vocab_size=encoder.vocab_size, bottleneck=cfg.bottleneck,
                          max_seq_len=cfg.max_seq_len, pos_embed=cfg.pos_embed, n_prefix=cfg.n_prefix, **size)
    model = ELF(model_cfg).to(device)                    # the unwrapped module: EMA'd, saved, evaluated
    if cfg.decoder_init == "encoder":                    # decode towards the encoder's own token embeddings
        init_unembedding(model, encoder)
    ema = ELF(model_cfg).to(device).requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    log(f"model {cfg.model}: {model.num_params() / 1e6:.2f}M parameters")
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    opt = make_optimizer(model, cfg.optimizer, cfg.muon_params, lr)
    step, minutes = 0, 0.0
    if cfg.init_from == "resume":
        saved = checkpoint.resume(cfg.out_dir, model, ema, opt, dataclasses.asdict(model_cfg), log)
        step, stats = saved["step"], saved["latent_stats"]
        minutes = saved.get("train_minutes", 0.0)        # the clocks of time_limit and snapshots go on
        log.t0 -= 60 * minutes
        encoder.latent_mean, encoder.latent_std = stats["mean"], stats["std"]
        log(f"resumed from {cfg.out_dir} at step {step}")
    elif encoder.latent_mean is None:
        encoder.estimate_stats(train.raw(np.arange(min(len(train), 256))).cpu())
    log(f"latent statistics: mean {encoder.latent_mean:.4f} std {encoder.latent_std:.4f}")
    meta = {"train": dataclasses.asdict(cfg), "model": dataclasses.asdict(model_cfg),
            "flow": dataclasses.asdict(flow_config(cfg)),
            "latent_stats": {"mean": encoder.latent_mean, "std": encoder.latent_std}}

    # wrappers for speed; `model` itself stays plain, so checkpoints never see them
    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True     # float32 matmuls outside autocast (heads, Muon)
        torch.backends.cudnn.allow_tf32 = True
    else:
        keep_freed_memory()                              # freed buffers are reused, not page-faulted in each step
    amp = autocast(device, cfg.dtype)
    model.grad_checkpointing = cfg.grad_ckpt
    net = wrap(model, cfg.compile if cfg.compile is not None else cuda, cuda)
    if cuda:                                             # the loop's peak, not the setup's (estimate_stats)
        torch.cuda.reset_peak_memory_stats()
    step = loop(cfg, net, model, ema, opt, train, val, meta, step, minutes, lr, rank, world, device, amp, log)
    rss, files = peak_memory()
    memory = f"peak resident memory {rss:.2f} GB ({files:.2f} GB of it mapped files, shared)"
    if world > 1:
        print(f"rank {rank}: {memory}", flush=True)
    else:
        log(f"{memory}, {(time.time() - log.t0) / 60:.1f} min since start")
    log.record(step=step, peak_rss_gb=rss, mapped_files_gb=files)
    if rank == 0:
        closing_samples(cfg, ema, encoder, val, device)
    log.close()
    return model


def ddp() -> bool:
    """Whether this process trains under DDP (setup_distributed started a process group)."""
    return dist.is_available() and dist.is_initialized()


def wrap(model, compile: bool, cuda: bool):
    """The module the loop calls: DDP when distributed, then torch.compile. In this order
    dynamo sees DDP and splits the graph at its gradient buckets (DDPOptimizer), so each
    bucket's all-reduce starts while the backward goes on; a compiled module inside DDP
    would hand DDP all its gradients at once, at the end of the backward."""
    net = model
    if ddp():
        net = DDP(net, device_ids=[torch.cuda.current_device()] if cuda else None, broadcast_buffers=False)
    return torch.compile(net) if compile else net


def loop(cfg, net, model, ema, opt, train, val, meta, step, minutes, lr, rank, world, device, amp, log):
    """The training loop: warmup, gradients, clip, step, EMA; logs, validation, checkpoints.
    `minutes`: training minutes before this process (a resumed run)."""
    from tqdm import tqdm
    micro = cfg.batch_size // (world * cfg.grad_accum)  # rows per forward
    snapshots = sorted(float(m) for m in cfg.snapshot_minutes.split(",") if m.strip() and float(m) > minutes)
    if rank == 0:
        with amp:
            log.record(step=step, **validate(ema, val, cfg, device, micro))
    bar = tqdm(total=cfg.max_steps, initial=step, dynamic_ncols=True, disable=rank != 0,
               mininterval=0.1 if sys.stderr.isatty() else 30)   # a log file gets a line every 30 s
    t_start, done = time.time() - 60 * minutes, step >= cfg.max_steps
    finite = Finite(device)                              # nan / inf in the loss or the gradients
    while not done:
        set_lr(opt, warmup_lr(lr, step, cfg.warmup_steps, cfg.lr_schedule, cfg.max_steps))
        opt.zero_grad(set_to_none=True)
        loss = train_step(net, train, cfg, step, rank, world, device, amp)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        step += 1
        finite.update(step, loss, grad_norm)
        ema_update(ema, model, ema_decay(cfg.ema_decay, step, cfg.ema_warmup))
        minutes = (time.time() - t_start) / 60
        done = step >= cfg.max_steps or out_of_time(cfg, minutes, device, world)
        bar.update(1)
        log_now = step % cfg.log_interval == 0 or done
        eval_now = rank == 0 and (step % cfg.eval_interval == 0 or done)
        save_now = rank == 0 and (step % cfg.ckpt_interval == 0 or done)
        if log_now or eval_now or save_now or (rank == 0 and snapshots and minutes >= snapshots[0]):
            # before anything is logged, validated or saved: the host waits for the device here anyway
            finite.check(divergence_cause(cfg, lr, device), kept(cfg.out_dir))
        if log_now:
            values = dict(zip(("loss", "mse", "ce"), loss.tolist()))
            log.record(step=step, tokens=step * cfg.batch_size * cfg.max_length, lr=opt.param_groups[0]["lr"], **values)
            bar.set_postfix({k: f"{v:.3f}" for k, v in values.items()})
        if eval_now:
            with amp:
                scores = validate(ema, val, cfg, device, micro)
            if device.startswith("cuda"):
                scores["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
            log.record(step=step, **scores)
            bar.write(f"step {step}: val mse {scores['val_mse']:.4f} ce {scores['val_ce']:.4f}")
        if save_now:
            checkpoint.save(cfg.out_dir, model, ema, opt, step, dict(meta, train_minutes=minutes), cfg.keep_checkpoints)
        while rank == 0 and snapshots and minutes >= snapshots[0]:
            m = snapshots.pop(0)
            checkpoint.save(os.path.join(cfg.out_dir, f"at-{m:g}min"), model, ema, None, step,
                            dict(meta, train_minutes=minutes), keep=1)
    bar.close()
    return step


def divergence_cause(cfg: TrainConfig, lr: float, device: str) -> str:
    """What most often makes a run's loss nan or inf, in this run's numbers."""
    cause = (f"a learning rate too high for this run (lr {lr:g} = blr {cfg.blr:g} x batch_size {cfg.batch_size} / 256): "
             f"lower --blr or raise --warmup_steps (now {cfg.warmup_steps})")
    if cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and device.startswith("cuda")):
        cause += "; or a bfloat16 overflow (--dtype float32)"
    return cause


def kept(out_dir) -> str:
    """The last good checkpoint of a run folder, in words."""
    latest = checkpoint.read_latest(out_dir)
    return f"the last good checkpoint, {os.path.join(out_dir, latest)}, is kept" if latest else "no checkpoint was saved yet"


def peak_memory():
    """(peak resident GB, GB of it in mapped files now). The mapped files (libraries, the
    token store's pages) are page cache that ranks share; the rest is this process's own."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20   # kB -> GB (Linux)
    try:
        with open("/proc/self/status") as f:
            return rss, next(int(line.split()[1]) for line in f if line.startswith("RssFile:")) / 2 ** 20
    except (OSError, StopIteration):                     # not Linux
        return rss, float("nan")


def out_of_time(cfg: TrainConfig, minutes: float, device, world: int) -> bool:
    """Whether time_limit_min has passed; every rank stops at the same step."""
    if cfg.time_limit_min <= 0:
        return False
    late = torch.tensor(float(minutes > cfg.time_limit_min), device=device)
    if ddp():
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
    return bool(late)


def closing_samples(cfg: TrainConfig, ema, encoder, val: Latents, device):
    """The validation losses at the start and the end, and a few samples of the EMA model."""
    from sample import PRESETS, generate, translate
    with open(os.path.join(cfg.out_dir, "metrics.jsonl")) as f:
        evals = [r for r in map(json.loads, f) if "val_mse" in r]
    first, last = evals[0], evals[-1]
    print(f"val denoise mse: {first['val_mse']:.4f} (step {first['step']}) -> {last['val_mse']:.4f} (step {last['step']})")
    print(f"val decode  ce:  {first['val_ce']:.4f} (step {first['step']}) -> {last['val_ce']:.4f} (step {last['step']})")
    if cfg.n_samples <= 0:
        return
    preset = dict(PRESETS[cfg.sample_preset], **({"steps": cfg.sample_steps} if cfg.sample_steps else {}))
    name = f"{cfg.sample_preset}: {preset['sampler']}, {preset['steps']} steps, SC-CFG {preset['sc_cfg']:g}"
    if cfg.max_input_length:                             # conditional: a few held-out sources
        rows = val.rows.select(slice(0, cfg.n_samples))
        srcs = [ids[:c].tolist() for ids, c in zip(rows.ids, rows.cond_len)]
        hyps = translate(ema, encoder, srcs, cfg.max_length, cfg.max_input_length, seed=cfg.seed,
                         flow=flow_config(cfg), **preset)
        for i, (src, ids, c, h) in enumerate(zip(srcs, rows.ids, rows.cond_len, hyps)):
            print(f"--- sample {i} ({name}, CFG {preset['guidance']:g})\nsource:    {encoder.decode(src)}\n"
                  f"reference: {encoder.decode(ids[c:])}\noutput:    {h['text']}")
        return
    for r in generate(ema, encoder, n=cfg.n_samples, length=cfg.max_length, seed=cfg.seed,
                      flow=flow_config(cfg), **preset):
        print(f"--- sample {r['index']} ({name})\n{r['text']}")


def main(argv):
    cfg = parse_config(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.batch_size % (world * cfg.grad_accum):
        raise ValueError(f"batch_size {cfg.batch_size} does not split into {world} rank(s) x grad_accum {cfg.grad_accum}")
    with distributed(cfg.device) as (rank, world, device):
        # one writer per run folder: rank 0 alone writes it, so rank 0 alone holds its lock
        with RunLock(cfg.out_dir, "out_dir") if rank == 0 else contextlib.nullcontext():
            return run(cfg, rank, world, device)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
