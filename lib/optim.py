"""The optimisation recipe that train.py and distill.py share (METHOD.md, "Optimiser and schedule").

- `make_optimizer`: Muon for 2-D weights with a NAdam-like Adam for the rest (muon.py), or
  plain AdamW; no weight decay. The learning rate scales with the batch: lr = blr * B / 256.
- `warmup_lr`: linear warmup from 0, then constant (or a cosine decay, for short runs).
- `ema_update`: the exponential moving average of the weights that samples and evaluations use.
- `autocast`: bfloat16 autocast where asked (by default on CUDA), a no-op context otherwise.
- `keep_freed_memory`: on a CPU, freed memory stays in the process for the next step;
  `flush_denormals`: on a CPU, denormal floats computed as zero (results/recipe/README.md,
  "Denormal floats", measures what they cost);
  `peak_memory`: the process's peak resident memory, and how much of it is mapped files.
- `Finite`: the first step whose loss or gradient norm is not finite, kept on the device, so
  that a diverged run stops before it saves, evaluates or samples anything from that state.

    opt = make_optimizer(model, "muon", "all", lr=scaled_lr(1e-3, 512))
    set_lr(opt, warmup_lr(lr, step, warmup_steps)); ...; opt.step(); ema_update(ema, model, 0.9999)
"""

import ctypes
import math
import resource
import sys
import warnings

import torch

from muon import Muon, muon_param_groups


def scaled_lr(blr: float, batch_size: int) -> float:
    """lr = blr * global batch / 256 (blr 1e-3 at batch 512 gives 2e-3)."""
    return blr * batch_size / 256


def make_optimizer(model, name: str, muon_params: str, lr: float):
    """'muon' (Muon + NAdam-like Adam) or 'adamw' (betas 0.9/0.999, eps 1e-8); no weight decay."""
    if name == "muon":
        return Muon(muon_param_groups(model, muon_params), lr=lr)
    if name == "adamw":  # fused: one kernel for all parameters (same math)
        return torch.optim.AdamW(
            model.parameters(),
            lr=lr,
            betas=(0.9, 0.999),
            eps=1e-8,
            weight_decay=0.0,
            fused=all(p.dtype == torch.float32 for p in model.parameters()),
        )
    raise ValueError(f"unknown optimizer '{name}' (choose from muon, adamw)")


def warmup_lr(
    lr: float, step: int, warmup_steps: int, schedule: str = "constant", max_steps: int = 0
) -> float:
    """The learning rate of update `step` (0-based): lr * step / warmup_steps up to warmup_steps
    (the first update has lr 0, as in the authors' schedule), then lr ('constant', released) or
    a cosine from lr down to lr / 10 at max_steps ('cosine': for short runs)."""
    if step < warmup_steps:
        return lr * step / warmup_steps
    if schedule == "cosine" and max_steps > warmup_steps:
        done = min(1.0, (step - warmup_steps) / (max_steps - warmup_steps))
        return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * done)))
    return lr


def set_lr(opt, lr: float):
    for group in opt.param_groups:
        group["lr"] = lr


@torch.no_grad()
def ema_update(ema, model, decay: float):
    """ema <- decay * ema + (1 - decay) * model, parameter by parameter."""
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.lerp_(pm, 1 - decay)


def ema_decay(decay: float, k: int, warmup: bool) -> float:
    """The decay of the k-th update (1-based); with warmup, min(decay, (1 + k) / (10 + k)) so
    that a short run's EMA is not dominated by its random initialisation."""
    return min(decay, (1 + k) / (10 + k)) if warmup else decay


def autocast(device: str, dtype: str):
    """bfloat16 autocast for dtype 'bfloat16', or 'auto' on CUDA; otherwise disabled (float32)."""
    on = dtype == "bfloat16" or (dtype == "auto" and device.startswith("cuda"))
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=on)


def keep_freed_memory() -> bool:
    """CPU training frees and reallocates the same large buffers every step (the logits, the
    vocabulary projection's gradient, activations). By default glibc hands blocks over a
    dynamic threshold back to the kernel on free, so each step page-faults them in again
    (results/bench/README.md counts the faults). With the mmap and trim thresholds at 1 GB,
    freed memory stays in the process for reuse; the price is that it is not returned
    either: the resident memory stays near its peak. Process-wide; Linux with glibc only,
    a no-op (False) elsewhere or where glibc refuses the setting."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # musl or another libc: leave its defaults
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(libc.mallopt(M_MMAP_THRESHOLD, 1 << 30) and libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))


def flush_denormals() -> bool:
    """On a CPU, compute denormal floats (|x| < 1.2e-38) as zero (FTZ/DAZ), as GPUs do in
    most kernels. A CPU handles each denormal in microcode, many times slower than a normal
    float, and training makes them (in the decoder's softmax gradient; results/recipe/README.md,
    "Denormal floats", measures how many and what they cost).

    Call it before the first parallel operation: OpenMP's worker threads copy the
    floating-point mode of the thread that starts them, once, so a flush set later reaches
    this thread only and the workers' half of every kernel keeps making denormals. Returns
    whether every thread flushes: False,
    with a warning, when the threads predate the call; False where the CPU cannot (no SSE3)."""
    if not torch.set_flush_denormal(True):
        return False
    # 1e-30 x 1e-10 is a denormal product; 2^20 elements reach every thread of a parallel kernel
    product = torch.full((1 << 20,), 1e-30) * 1e-10
    if product.view(torch.int32).any():  # the bits: a compare would read zero
        warnings.warn(
            "denormals are flushed on this thread only: flush_denormals() ran after "
            "the first parallel operation had started the worker threads",
            stacklevel=2,
        )
        return False
    return True


def peak_memory():
    """(peak resident GB, GB of it in mapped files now). The mapped files (libraries, the
    token store's pages) are page cache that ranks share; the rest is this process's own."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # kB -> GB (Linux)
    try:
        with open("/proc/self/status") as f:
            return rss, next(
                int(line.split()[1]) for line in f if line.startswith("RssFile:")
            ) / 2**20
    except (OSError, StopIteration):  # not Linux
        return rss, float("nan")


class Finite:
    """Watches each step's loss and gradient norm (clip_grad_norm_'s return value, computed
    anyway) for nan and inf. `update` costs two small device ops and no sync: on CUDA the
    host never waits for the GPU on its account. `check` reads the one flag (a sync), and the
    loops call it only where they wait for the GPU anyway: before a log line (loss.tolist()),
    a validation, a checkpoint and the end. So a bad step is found within log_interval steps,
    always before its state is saved."""

    def __init__(self, device):
        # -1: every step finite so far
        self.first = torch.full((), -1, dtype=torch.long, device=device)

    def update(self, step: int, loss, grad_norm):
        bad = ~(torch.isfinite(grad_norm) & torch.isfinite(loss).all())
        self.first = torch.where(bad & (self.first < 0), step, self.first)

    def check(self, cause, kept):
        """One line naming the first bad step, what was kept and the likely cause: `cause` and
        `kept` are functions returning those sentences, called only then (`kept` reads the
        disk)."""
        step = int(self.first)
        if step >= 0:
            raise ValueError(
                f"step {step}: the loss or the gradient norm is not finite, "
                f"so training stopped and saved nothing from that state ({kept()}); "
                f"likely cause: {cause()}"
            )
