"""Train ELF (ELF_SPEC §5 objective, §7 schedule) on text encoded by a frozen encoder.

    python train.py configs/tiny.py                    # the offline CPU default (~10 min)
    python train.py configs/tiny.py --max_steps=50 --batch_size=16
    python train.py configs/owt_elf_b.py               # the paper's ELF-B on OpenWebText
    torchrun --nproc_per_node=8 train.py configs/owt_elf_b.py   # the same on 8 GPUs (DDP)

Config the nanoGPT way, strictly: defaults in `TrainConfig`, then the config file (run
with runpy), then `--key=value` overrides parsed with each default's type. Unknown keys
and wrong types are errors that name the key.

The loop: documents -> encoder tokens -> packed rows -> frozen-encoder latents (cached on
disk once) -> mixed-batch flow loss -> Muon (muon.py) or AdamW, linear warmup then constant
LR, grad clip, EMA -> validation losses, atomic checkpoints with exact resume -> samples.

One code path for one device and many: launched by torchrun, each rank trains on its
slice of the global batch (DDP: NCCL on CUDA, Gloo on CPU) and only rank 0 logs, evaluates
and saves. On CUDA the model runs under torch.compile and bf16 autocast by default.
"""

import contextlib
import dataclasses
import json
import os
import sys
import time
import typing
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from config import parse
from data import batch_indices, load_pair_rows, load_token_rows
from encoder import FrozenEncoder, Latents
from flow import FlowConfig, elf_loss
from model import ELF, ELFConfig, PRESETS, load_for_resume, save_checkpoint
from muon import Muon, muon_param_groups
from sample import decode_latents, euler_sample, translate


@dataclass
class TrainConfig:
    # I/O
    out_dir: str = "out/elf"
    init_from: str = "scratch"         # 'scratch' or 'resume' (from out_dir)
    eval_interval: int = 250
    eval_batches: int = 4              # validation rows = eval_batches * batch_size
    ckpt_interval: int = 1000
    n_samples: int = 4                 # decoded at the end (EMA weights, Euler ODE)
    sample_steps: int = 32
    sample_sc_cfg: float = 3.0
    # data (see data.py)
    dataset: str = "wiki"              # 'wiki' (bundled), a hub name, a file or a save_to_disk folder
    text_column: str = "text"
    val_size: int = 500                # documents held out when the source has no validation split
    max_length: int = 1024
    packing: bool = True               # pack documents into full rows; False: one per row, padded
    latent_cache: bool = False         # encode the data set once into cache_dir (small data only)
    # conditional generation (§6; data.py load_pairs): rows are [source ; target]
    max_input_length: int = 0          # > 0: conditional; the source's token budget
    label_drop_prob: float = 0.1       # examples trained without their source, for CFG
    source_column: str = ""            # '' = source/target, input/output or condition_input_ids/input_ids
    target_column: str = ""
    dataset_config: str = ""           # hub config name, e.g. 'de-en' for wmt/wmt14
    val_split: str = ""                # hub split held out and scored ('' = validation)
    cache_dir: str = "~/.cache/elf-torch"
    # encoder and model (§3, §4)
    encoder: str = "t5-small"          # 'minilm' (bundled), a hub name or a local folder
    encoder_dtype: str = "float32"     # 'bfloat16' autocasts the frozen encoder (2x faster on CPU)
    latent_mean: typing.Optional[float] = None  # None: estimated from training latents
    latent_std: typing.Optional[float] = None
    model: str = "ELF-B"               # a preset of model.PRESETS
    bottleneck: int = 128
    max_seq_len: int = 1024            # RoPE table size: the longest max_length this model takes
    # objective (§5)
    noise_scale: float = 2.0
    decoder_prob: float = 0.2
    decoder_noise_scale: float = 5.0
    self_cond_prob: float = 0.5
    # optimisation (§7)
    optimizer: str = "muon"            # 'muon' (§7: Muon + NAdam-like Adam, muon.py) or 'adamw'
    muon_params: str = "all"           # 2-D weights on Muon: 'all' (the authors) or 'blocks' (Muon reference)
    batch_size: int = 512              # global: summed over ranks and accumulation steps
    grad_accum: int = 1                # micro-batches per rank per step (one all-reduce per step)
    blr: float = 1e-3                  # lr = blr * batch_size / 256
    warmup_steps: int = 8620
    max_steps: int = 86200
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


def parse_config(argv):
    """[config.py] [--key=value ...] -> TrainConfig, with the checks that need several keys."""
    cfg = parse(argv, TrainConfig)
    if cfg.init_from not in ("scratch", "resume"):
        raise ValueError(f"init_from must be 'scratch' or 'resume', got '{cfg.init_from}'")
    if cfg.model not in PRESETS:
        raise ValueError(f"unknown model preset '{cfg.model}' (choose from {', '.join(PRESETS)})")
    if cfg.max_length > cfg.max_seq_len:
        raise ValueError(f"max_length {cfg.max_length} exceeds the model's RoPE table (max_seq_len={cfg.max_seq_len})")
    for key, allowed in (("optimizer", ("muon", "adamw")), ("muon_params", ("all", "blocks")),
                         ("dtype", ("auto", "float32", "bfloat16"))):
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"unknown {key} '{getattr(cfg, key)}' (choose from {', '.join(allowed)})")
    if cfg.max_input_length and not 0 < cfg.max_input_length < cfg.max_length:
        raise ValueError(f"max_input_length {cfg.max_input_length} must be in (0, max_length={cfg.max_length})")
    if cfg.grad_accum < 1 or cfg.batch_size % cfg.grad_accum:
        raise ValueError(f"grad_accum {cfg.grad_accum} must be >= 1 and divide batch_size {cfg.batch_size}")
    return cfg


def flow_config(cfg: TrainConfig) -> FlowConfig:
    return FlowConfig(noise_scale=cfg.noise_scale, decoder_prob=cfg.decoder_prob,
                      decoder_noise_scale=cfg.decoder_noise_scale, self_cond_prob=cfg.self_cond_prob)


def make_optimizer(cfg: TrainConfig, model, lr: float):
    """§7: Muon on 2-D weights + NAdam-like Adam on the rest, or plain AdamW. No weight decay."""
    if cfg.optimizer == "muon":
        return Muon(muon_param_groups(model, cfg.muon_params), lr=lr)
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def setup_distributed(device_key: str):
    """-> (rank, world, device). Distributed only when torchrun launched us: its variables are
    read here, at run time, never at import (STYLE.md 3, 6). Multi-node: torchrun's flags."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available() and device_key in ("auto", "cuda")
    if world == 1:
        return 0, 1, ("cuda" if cuda else "cpu") if device_key == "auto" else device_key
    if device_key not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device '{device_key}' under torchrun: use auto, cuda or cpu (rank r takes cuda:LOCAL_RANK)")
    device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    return dist.get_rank(), world, device


# ----------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate(model, latents: Latents, cfg: TrainConfig, device, chunk: int):
    """Validation MSE (all rows denoised) and CE (all rows decoded) with fixed noise;
    `chunk` rows per forward (a training micro-batch: what fits in memory)."""
    model.eval()
    n = min(len(latents.ids), cfg.eval_batches * cfg.batch_size)
    sums = {"mse": 0.0, "ce": 0.0}
    gen = torch.Generator(device).manual_seed(1234)
    for i in range(0, n, chunk):
        x, tokens, mask, cond = latents.batch(np.arange(i, min(n, i + chunk)), device)
        for key, p in (("mse", 0.0), ("ce", 1.0)):
            _, m = elf_loss(model, x, tokens, mask, dataclasses.replace(flow_config(cfg), decoder_prob=p), gen, cond)
            sums[key] += m[key].item() * len(x)
    model.train()
    return {k: v / n for k, v in sums.items()}


def main(argv):
    cfg = parse_config(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.batch_size % (world * cfg.grad_accum):
        raise ValueError(f"batch_size {cfg.batch_size} does not split into {world} rank(s) x grad_accum {cfg.grad_accum}")
    rank, world, device = setup_distributed(cfg.device)
    try:
        return run(cfg, rank, world, device)
    finally:
        if world > 1:
            dist.destroy_process_group()


def run(cfg: TrainConfig, rank: int, world: int, device: str):
    log = print if rank == 0 else (lambda *a, **k: None)     # the main process alone speaks
    torch.manual_seed(cfg.seed)                              # same init on every rank
    log(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    log(f"devices: {world} x {device}")

    encoder = FrozenEncoder(cfg.encoder, cfg.latent_mean, cfg.latent_std, cfg.encoder_dtype).to(device)
    if cfg.max_input_length:                             # §6: (N, L) ids + (N,) condition lengths
        (train_ids, train_cond), (val_ids, val_cond) = load_pair_rows(cfg, encoder)
    else:                                                # (N, L) each; errors on missing/empty data
        (train_ids, train_cond), (val_ids, val_cond) = ((r, None) for r in load_token_rows(cfg, encoder))
    log(f"data: {len(train_ids)} train rows, {len(val_ids)} val rows of {cfg.max_length} tokens")
    t0 = time.time()
    if world > 1 and cfg.latent_cache and rank != 0:
        dist.barrier()                                   # rank 0 builds the cache, the others read it
    train = Latents(encoder, train_ids, cfg.cache_dir, cfg.latent_cache, train_cond)
    val = Latents(encoder, val_ids, cfg.cache_dir, cfg.latent_cache, val_cond)
    if world > 1 and cfg.latent_cache and rank == 0:
        dist.barrier()
    if cfg.latent_cache:
        log(f"latent cache ready in {time.time() - t0:.1f}s")

    model_cfg = ELFConfig(latent_dim=encoder.dim, vocab_size=encoder.vocab_size, bottleneck=cfg.bottleneck,
                          max_seq_len=cfg.max_seq_len, **PRESETS[cfg.model])
    model = ELF(model_cfg).to(device)                    # the unwrapped module: EMA'd, saved, evaluated
    ema = ELF(model_cfg).to(device).requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    log(f"model {cfg.model}: {model.num_params() / 1e6:.2f}M parameters")
    lr = cfg.blr * cfg.batch_size / 256
    opt = make_optimizer(cfg, model, lr)

    step = 0
    if cfg.init_from == "resume":
        saved = os.path.join(cfg.out_dir, "config.json")
        with open(saved) if os.path.isfile(saved) else contextlib.nullcontext() as f:
            saved = json.load(f)["train"] if f else {}
        for key in ("optimizer", "muon_params") if cfg.optimizer == "muon" else ("optimizer",):
            if saved and saved.get(key, "adamw") != getattr(cfg, key):
                raise ValueError(f"incompatible checkpoint in {cfg.out_dir}: {key} was '{saved.get(key, 'adamw')}', "
                                 f"now '{getattr(cfg, key)}'")
        meta = load_for_resume(cfg.out_dir, model, ema, opt, dataclasses.asdict(model_cfg))
        step, stats = meta["step"], meta["latent_stats"]
        encoder.latent_mean, encoder.latent_std = stats["mean"], stats["std"]
        log(f"resumed from {cfg.out_dir} at step {step}")
    elif encoder.latent_mean is None:
        rows = np.arange(min(len(train_ids), 256))
        encoder.estimate_stats(train.raw(rows).cpu())
    log(f"latent statistics: mean {encoder.latent_mean:.4f} std {encoder.latent_std:.4f}")
    meta = {"train": dataclasses.asdict(cfg), "model": dataclasses.asdict(model_cfg),
            "flow": dataclasses.asdict(flow_config(cfg)),
            "latent_stats": {"mean": encoder.latent_mean, "std": encoder.latent_std}}

    # wrappers for speed; `model` itself stays plain, so checkpoints never see them
    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True     # float32 matmuls outside autocast (heads, Muon)
        torch.backends.cudnn.allow_tf32 = True
    amp = cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and cuda)
    autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=amp)
    model.grad_checkpointing = cfg.grad_ckpt
    net = torch.compile(model) if (cfg.compile if cfg.compile is not None else cuda) else model
    if world > 1:
        net = DDP(net, device_ids=[torch.cuda.current_device()] if cuda else None, broadcast_buffers=False)

    from tqdm import tqdm
    fcfg = flow_config(cfg)
    micro = cfg.batch_size // (world * cfg.grad_accum)  # rows per forward
    history = []
    if rank == 0:
        with autocast:
            history.append((step, evaluate(ema, val, cfg, device, micro)))
        log(f"step {step}: val mse {history[-1][1]['mse']:.4f} ce {history[-1][1]['ce']:.4f} (EMA weights)")
    bar = tqdm(total=cfg.max_steps, initial=step, dynamic_ncols=True, disable=rank != 0)
    t_last, tokens_seen, losses, t_start, last = time.time(), 0, {}, time.time(), step >= cfg.max_steps
    while not last:
        for g in opt.param_groups:  # linear warmup, then constant (§7)
            g["lr"] = lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
        idx = batch_indices(step, cfg.batch_size, len(train_ids), cfg.seed)  # the global batch (B,)
        opt.zero_grad(set_to_none=True)
        logged = torch.zeros(3, device=device)           # loss, mse, ce: mean over the batch's shards
        for j in range(cfg.grad_accum):
            shard = rank * cfg.grad_accum + j            # this forward's slice of the global batch
            # noise is a function of (seed, step, shard): resume is exact, and N ranks x A
            # accumulation steps draw exactly what 1 rank x N*A accumulation steps draws
            seed = cfg.seed * 1_000_003 + step + (shard << 32)
            drop = torch.rand(micro, generator=torch.Generator().manual_seed(seed)) < cfg.label_drop_prob
            x, tokens, mask, cond = train.batch(idx[shard * micro:(shard + 1) * micro], device, drop)
            gen = torch.Generator(device).manual_seed(seed)
            sync = world == 1 or j == cfg.grad_accum - 1  # all-reduce gradients once per step
            with contextlib.nullcontext() if sync else net.no_sync():
                with autocast:
                    loss, m = elf_loss(net, x, tokens, mask, fcfg, gen, cond)
                (loss / cfg.grad_accum).backward()
            logged += torch.stack((loss.detach().float(), m["mse"], m["ce"])) / cfg.grad_accum
        if world > 1:
            dist.all_reduce(logged)                      # for logging only: the mean over ranks
            logged /= world
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses[step] = logged[0]
        step += 1
        decay = min(cfg.ema_decay, (1 + step) / (10 + step)) if cfg.ema_warmup else cfg.ema_decay
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 1 - decay)
        tokens_seen += cfg.batch_size * cfg.max_length
        last = step == cfg.max_steps
        if cfg.time_limit_min > 0:                       # every rank stops at the same step
            late = torch.tensor(float(time.time() - t_start > 60 * cfg.time_limit_min), device=device)
            if world > 1:
                dist.all_reduce(late, op=dist.ReduceOp.MAX)
            last = last or bool(late)
        if rank == 0 and (step % 10 == 0 or last):
            tps = tokens_seen / (time.time() - t_last)
            loss_, mse, ce = logged.tolist()
            bar.set_postfix(loss=f"{loss_:.3f}", mse=f"{mse:.3f}", ce=f"{ce:.3f}",
                            lr=f"{opt.param_groups[0]['lr']:.2e}", tok_s=f"{tps:.0f}")
            t_last, tokens_seen = time.time(), 0
        bar.update(1)
        if rank == 0 and (step % cfg.eval_interval == 0 or last):
            with autocast:
                history.append((step, evaluate(ema, val, cfg, device, micro)))
            bar.write(f"step {step}: val mse {history[-1][1]['mse']:.4f} ce {history[-1][1]['ce']:.4f}")
        if rank == 0 and (step % cfg.ckpt_interval == 0 or last):
            save_checkpoint(cfg.out_dir, model, ema, opt, step, meta)
    bar.close()

    out = {"val": history, "train_loss": {k: v.item() for k, v in losses.items()}, "model": model}
    if rank != 0:
        return out
    (s0, first), (s1, last) = history[0], history[-1]
    print(f"val denoise mse: {first['mse']:.4f} (step {s0}) -> {last['mse']:.4f} (step {s1})")
    print(f"val decode  ce:  {first['ce']:.4f} (step {s0}) -> {last['ce']:.4f} (step {s1})")
    if cfg.n_samples > 0 and cfg.max_input_length:     # §6: a few held-out sources, ODE + CFG 2
        rows = range(min(cfg.n_samples, len(val_ids)))
        srcs = [val_ids[i, :val_cond[i]].tolist() for i in rows]
        hyps = translate(ema, encoder, srcs, cfg.max_length, cfg.max_input_length, steps=cfg.sample_steps,
                         grid="uniform", seed=cfg.seed, noise_scale=cfg.noise_scale)
        for i, h in zip(rows, hyps):
            print(f"--- sample {i} (Euler ODE, {cfg.sample_steps} steps, CFG 2)\nsource:    {encoder.decode(srcs[i])}\n"
                  f"reference: {encoder.decode(val_ids[i, val_cond[i]:])}\noutput:    {h['text']}")
    elif cfg.n_samples > 0:
        g = torch.Generator(device).manual_seed(cfg.seed)
        z = euler_sample(ema, cfg.n_samples, cfg.max_length, cfg.sample_steps, cfg.sample_sc_cfg,
                         FlowConfig(noise_scale=cfg.noise_scale), g, device)
        for i, ids in enumerate(decode_latents(ema, z, cfg.sample_sc_cfg)):
            print(f"--- sample {i} (Euler ODE, {cfg.sample_steps} steps, SC-CFG {cfg.sample_sc_cfg})\n{encoder.decode(ids)}")
    return out


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
