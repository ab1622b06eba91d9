"""Train ELF (ELF_SPEC §5 objective, §7 schedule) on text encoded by a frozen encoder.

    python train.py configs/tiny.py                    # the offline CPU default (~10 min)
    python train.py configs/tiny.py --max_steps=50 --batch_size=16
    python train.py configs/owt_elf_b.py               # the paper's ELF-B on OpenWebText

Config the nanoGPT way, strictly: defaults in `TrainConfig`, then the config file (run
with runpy), then `--key=value` overrides parsed with each default's type. Unknown keys
and wrong types are errors that name the key.

The loop: documents -> encoder tokens -> packed rows -> frozen-encoder latents (cached on
disk once) -> mixed-batch flow loss -> AdamW, linear warmup then constant LR, grad clip,
EMA -> validation losses, atomic checkpoints with exact resume -> a few decoded samples.
"""

import dataclasses
import json
import os
import sys
import time
import typing
from dataclasses import dataclass

import numpy as np
import torch

from config import parse
from data import load_token_rows
from encoder import FrozenEncoder, LatentCache
from flow import FlowConfig, elf_loss
from model import ELF, ELFConfig, PRESETS, load_for_resume, save_checkpoint
from sample import decode_latents, euler_sample


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
    batch_size: int = 512
    blr: float = 1e-3                  # lr = blr * batch_size / 256
    warmup_steps: int = 8620
    max_steps: int = 86200
    grad_clip: float = 1.0
    ema_decay: float = 0.9999
    ema_warmup: bool = False           # decay_k = min(decay, (1 + k) / (10 + k)) for short runs
    seed: int = 0
    device: str = "auto"               # 'auto', 'cpu', 'cuda', 'cuda:1', ...


def parse_config(argv):
    """[config.py] [--key=value ...] -> TrainConfig, with the checks that need several keys."""
    cfg = parse(argv, TrainConfig)
    if cfg.init_from not in ("scratch", "resume"):
        raise ValueError(f"init_from must be 'scratch' or 'resume', got '{cfg.init_from}'")
    if cfg.model not in PRESETS:
        raise ValueError(f"unknown model preset '{cfg.model}' (choose from {', '.join(PRESETS)})")
    if cfg.max_length > cfg.max_seq_len:
        raise ValueError(f"max_length {cfg.max_length} exceeds the model's RoPE table (max_seq_len={cfg.max_seq_len})")
    return cfg


def flow_config(cfg: TrainConfig) -> FlowConfig:
    return FlowConfig(noise_scale=cfg.noise_scale, decoder_prob=cfg.decoder_prob,
                      decoder_noise_scale=cfg.decoder_noise_scale, self_cond_prob=cfg.self_cond_prob)


# ----------------------------------------------------------------------------------------
# latents: one batch of normalised encoder outputs, from the disk cache or encoded now

class Latents:
    def __init__(self, encoder: FrozenEncoder, ids: torch.Tensor, cache_dir: str, use_cache: bool):
        self.encoder, self.ids, self.cached = encoder, ids, None
        if use_cache:
            cache = LatentCache(os.path.expanduser(cache_dir), encoder, ids)
            if not cache.exists():
                cache.build()
            self.cached = cache.load()

    def raw(self, idx):
        if self.cached is not None:
            return torch.from_numpy(self.cached[idx].astype(np.float32))
        return self.encoder.encode(self.ids[idx])

    def batch(self, idx, device):
        """idx: np array of row indices -> (x (B, L, D), tokens (B, L), loss mask (B, L))."""
        tokens = self.ids[idx]
        x = self.encoder.normalize(self.raw(idx))
        return x.to(device), tokens.to(device), (tokens != self.encoder.pad_id).to(device)


def batch_indices(step: int, batch_size: int, n: int, seed: int):
    """Rows of step `step`: consecutive slices of a per-epoch permutation. A pure function of
    (seed, step), so a resumed run sees exactly the batches the uninterrupted run would."""
    start = step * batch_size
    out = []
    while len(out) < batch_size:
        epoch, pos = divmod(start + len(out), n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        out.extend(perm[pos:pos + batch_size - len(out)])
    return np.array(out)


# ----------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate(model, latents: Latents, cfg: TrainConfig, device):
    """Validation MSE (all rows denoised) and CE (all rows decoded) with fixed noise."""
    model.eval()
    n = min(len(latents.ids), cfg.eval_batches * cfg.batch_size)
    sums = {"mse": 0.0, "ce": 0.0}
    gen = torch.Generator(device).manual_seed(1234)
    for i in range(0, n, cfg.batch_size):
        x, tokens, mask = latents.batch(np.arange(i, min(n, i + cfg.batch_size)), device)
        for key, p in (("mse", 0.0), ("ce", 1.0)):
            _, m = elf_loss(model, x, tokens, mask, dataclasses.replace(flow_config(cfg), decoder_prob=p), gen)
            sums[key] += m[key].item() * len(x)
    model.train()
    return {k: v / n for k, v in sums.items()}


def main(argv):
    cfg = parse_config(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    torch.manual_seed(cfg.seed)
    print(f"config: {json.dumps(dataclasses.asdict(cfg))}")

    encoder = FrozenEncoder(cfg.encoder, cfg.latent_mean, cfg.latent_std, cfg.encoder_dtype)
    train_ids, val_ids = load_token_rows(cfg, encoder)   # (N, L) each; errors on missing/empty data
    print(f"data: {len(train_ids)} train rows, {len(val_ids)} val rows of {cfg.max_length} tokens")
    t0 = time.time()
    train = Latents(encoder, train_ids, cfg.cache_dir, cfg.latent_cache)
    val = Latents(encoder, val_ids, cfg.cache_dir, cfg.latent_cache)
    if cfg.latent_cache:
        print(f"latent cache ready in {time.time() - t0:.1f}s")

    model_cfg = ELFConfig(latent_dim=encoder.dim, vocab_size=encoder.vocab_size, bottleneck=cfg.bottleneck,
                          max_seq_len=cfg.max_seq_len, **PRESETS[cfg.model])
    model = ELF(model_cfg).to(device)
    ema = ELF(model_cfg).to(device).requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    print(f"model {cfg.model}: {model.num_params() / 1e6:.2f}M parameters")
    lr = cfg.blr * cfg.batch_size / 256
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    step = 0
    if cfg.init_from == "resume":
        meta = load_for_resume(cfg.out_dir, model, ema, opt, dataclasses.asdict(model_cfg))
        step, stats = meta["step"], meta["latent_stats"]
        encoder.latent_mean, encoder.latent_std = stats["mean"], stats["std"]
        print(f"resumed from {cfg.out_dir} at step {step}")
    elif encoder.latent_mean is None:
        rows = np.arange(min(len(train_ids), 256))
        encoder.estimate_stats(train.raw(rows))
    print(f"latent statistics: mean {encoder.latent_mean:.4f} std {encoder.latent_std:.4f}")
    meta = {"train": dataclasses.asdict(cfg), "model": dataclasses.asdict(model_cfg),
            "flow": dataclasses.asdict(flow_config(cfg)),
            "latent_stats": {"mean": encoder.latent_mean, "std": encoder.latent_std}}

    from tqdm import tqdm
    history = [(step, evaluate(ema, val, cfg, device))]
    print(f"step {step}: val mse {history[-1][1]['mse']:.4f} ce {history[-1][1]['ce']:.4f} (EMA weights)")
    fcfg = flow_config(cfg)
    bar = tqdm(total=cfg.max_steps, initial=step, dynamic_ncols=True)
    t_last, tokens_seen, losses = time.time(), 0, {}
    while step < cfg.max_steps:
        for g in opt.param_groups:  # linear warmup, then constant (§7)
            g["lr"] = lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
        x, tokens, mask = train.batch(batch_indices(step, cfg.batch_size, len(train_ids), cfg.seed), device)
        gen = torch.Generator(device).manual_seed(cfg.seed * 1_000_003 + step)  # noise of this step
        loss, m = elf_loss(model, x, tokens, mask, fcfg, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses[step] = loss.detach()
        step += 1
        decay = min(cfg.ema_decay, (1 + step) / (10 + step)) if cfg.ema_warmup else cfg.ema_decay
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.lerp_(pm, 1 - decay)
        tokens_seen += tokens.numel()
        if step % 10 == 0 or step == cfg.max_steps:
            tps = tokens_seen / (time.time() - t_last)
            bar.set_postfix(loss=f"{loss.item():.3f}", mse=f"{m['mse'].item():.3f}", ce=f"{m['ce'].item():.3f}",
                            lr=f"{opt.param_groups[0]['lr']:.2e}", tok_s=f"{tps:.0f}")
            t_last, tokens_seen = time.time(), 0
        bar.update(1)
        if step % cfg.eval_interval == 0 or step == cfg.max_steps:
            history.append((step, evaluate(ema, val, cfg, device)))
            bar.write(f"step {step}: val mse {history[-1][1]['mse']:.4f} ce {history[-1][1]['ce']:.4f}")
        if step % cfg.ckpt_interval == 0 or step == cfg.max_steps:
            save_checkpoint(cfg.out_dir, model, ema, opt, step, meta)
    bar.close()

    (s0, first), (s1, last) = history[0], history[-1]
    print(f"val denoise mse: {first['mse']:.4f} (step {s0}) -> {last['mse']:.4f} (step {s1})")
    print(f"val decode  ce:  {first['ce']:.4f} (step {s0}) -> {last['ce']:.4f} (step {s1})")
    if cfg.n_samples > 0:
        g = torch.Generator(device).manual_seed(cfg.seed)
        z = euler_sample(ema, cfg.n_samples, cfg.max_length, cfg.sample_steps, cfg.sample_sc_cfg,
                         FlowConfig(noise_scale=cfg.noise_scale), g, device)
        for i, ids in enumerate(decode_latents(ema, z, cfg.sample_sc_cfg)):
            print(f"--- sample {i} (Euler ODE, {cfg.sample_steps} steps, SC-CFG {cfg.sample_sc_cfg})\n{encoder.decode(ids)}")
    return {"val": history, "train_loss": {k: v.item() for k, v in losses.items()}}


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
