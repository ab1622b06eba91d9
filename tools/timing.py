"""Timing and FLOP counting shared by the lab's benchmarks (tools/bench.py, tools/gpu_check.py):
a device sync, the median of timed calls, a measured matmul peak and torch's FLOP counter.
"""

import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode


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
    a, b = (torch.randn(n, n, device=device, dtype=dtype),
            torch.randn(n, n, device=device, dtype=dtype))
    a @ b
    rates = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        rates.append(2 * n ** 3 / (time.perf_counter() - t0))
    return max(rates), statistics.median(rates), min(rates)


def count_flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()
