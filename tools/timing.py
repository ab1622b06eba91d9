"""Timing and FLOP counting shared by the lab's benchmarks (tools/bench.py, tools/gpu_check.py):
a device sync, the median of timed calls, a measured matmul peak, torch's FLOP counter and the
analytic count of ELF's FLOPs, memory probes, and the comparisons of two results (rel, cosine).
"""

import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from model import mlp_width


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, iters: int, device: str):
    """(median seconds of fn() over iters calls, seconds of the first, warm-up, call)."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    first, times = time.perf_counter() - t0, []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), first


def matmul_peak(device: str, dtype, reps: int, n: int = 0):
    """(best, median, min) FLOP/s of an n x n x n matmul over reps timed calls (n = 0: 4096 on
    CUDA, 2048 on a CPU)."""
    n = n or (4096 if device.startswith("cuda") else 2048)
    a, b = (
        torch.randn(n, n, device=device, dtype=dtype),
        torch.randn(n, n, device=device, dtype=dtype),
    )
    a @ b
    rates = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        rates.append(2 * n**3 / (time.perf_counter() - t0))
    return max(rates), statistics.median(rates), min(rates)


def count_flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def rate(flop_per_s: float) -> str:
    return (
        f"{flop_per_s / 1e12:.1f} TFLOP/s"
        if flop_per_s >= 1e12
        else f"{flop_per_s / 1e9:.1f} GFLOP/s"
    )


def rel(a, b) -> float:
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-12)


def cosine(a, b) -> float:
    a, b = a.double(), b.double()  # float32 sums of 1e8 terms round at ~1e-4
    return float(a @ b / (a.norm() * b.norm()))


def memory_gb():
    """(peak GB since the last reset, the device's GB); zeros on a CPU."""
    if not torch.cuda.is_available():
        return 0.0, 0.0
    return (
        torch.cuda.max_memory_allocated() / 1e9,
        torch.cuda.get_device_properties(0).total_memory / 1e9,
    )


def reset_memory():
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def analytic_flops(cfg, B: int, L: int, S: int, R: int, attention: bool = True) -> float:
    """The step's matmul FLOPs by hand: the forward of B rows, its backward (twice the
    forward, less the input gradients of the two first layers, whose inputs need none), the
    decoder head on R rows with its backward, and 2 no-grad forwards of S rows. `attention`:
    count attention's two products (FlopCounterMode counts the CUDA kernels, not the CPU's)."""
    D, H, b, V = cfg.latent_dim, cfg.hidden, cfg.bottleneck, cfg.vocab_size
    T = L + 3 * cfg.n_prefix
    h = mlp_width(cfg)  # SwiGLU's inner width
    # self_cond_proj; the time embeddings' first layers
    first = 2 * L * 2 * D * D + 2 * (2 * 256 * H)
    block = (
        2 * T * H * 3 * H
        + 2 * T * H * H
        + 2 * T * H * 2 * h
        + 2 * T * h * H
        + 4 * T * T * H * attention
    )
    text = 2 * L * D * b + 2 * L * b * H if b else 2 * L * D * H  # b = 0: one Linear D -> H
    row = first + text + 2 * (2 * H * H) + cfg.depth * block + 2 * L * H * D
    decoder = 2 * L * H * D + 2 * L * D * V
    return 3 * B * row - B * first + 3 * R * decoder + 2 * S * row


def flat_grad(model):
    """Every gradient of a model as one float32 vector (for rel and cosine)."""
    return torch.cat([p.grad.float().flatten() for p in model.parameters() if p.grad is not None])
