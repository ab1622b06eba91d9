"""Small measurements behind the performance notes of results/bench/README.md and of muon.py /
lib/optim.py that tools.bench does not print: Newton–Schulz's float32 accuracy (plain, on the
Gram matrix, and on the Gram matrix without its halfway restart), the speed of the two layouts
of the vocabulary projection's products, the CPU allocator setting on tiny's training step, and
two loss-tail variants that were tried and not kept.

    python results/bench/probes.py > runs/bench/probes_cpu.log
        # ~2 minutes on 2 cores (results/bench/probes_cpu.log: the run measured)
"""

import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from muon import NS_COEFFS, newton_schulz, plain_newton_schulz  # noqa: E402


def ms(fn, n=7):
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * sorted(times)[n // 2]


def wide_normalised(G, dtype=torch.float32):
    X = (G.T if G.shape[0] > G.shape[1] else G).to(dtype)
    return X / X.norm()


def float64_ns(G):
    a, b, c = NS_COEFFS
    X = wide_normalised(G, torch.float64)
    for _ in range(5):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X


def gram_without_restart(G):
    """The Gram recursion run straight through, on the wide side (what the restart fixes)."""
    a, b, c = NS_COEFFS
    X = wide_normalised(G)
    R, P = X @ X.T, torch.eye(X.shape[0])
    for _ in range(5):
        S = a * torch.eye(X.shape[0]) + b * R + c * R @ R
        P, R = S @ P, S @ R @ S
    return P @ X


def accuracy():
    print("Newton-Schulz, float32, relative Frobenius error against a float64 iteration:")
    g = torch.Generator().manual_seed(0)
    for shape in [(30522, 384), (1364, 256), (768, 256), (256, 682)]:
        for kind in ("gradient-like (rank 16 + noise)", "Gaussian"):
            G = (
                (
                    torch.randn(shape[0], 16, generator=g) @ torch.randn(16, shape[1], generator=g)
                    + 0.1 * torch.randn(*shape, generator=g)
                )
                if kind[0] == "g"
                else torch.randn(*shape, generator=g)
            )
            ref = float64_ns(G)
            err = lambda X: ((X.double() - ref).norm() / ref.norm()).item()
            ours = newton_schulz(G)
            print(
                f"  {str(shape):>13} {kind:<32} "
                f"plain {err(plain_newton_schulz(wide_normalised(G), 5)):.1e}   "
                f"Gram {err(ours.T if shape[0] > shape[1] else ours):.1e}   "
                f"Gram without restart {err(gram_without_restart(G)):.1e}"
            )


def layouts():
    print("the vocabulary projection's products (30522 x 384 and 384 x 384), float32:")
    G, P = torch.randn(30522, 384), torch.randn(384, 384)
    W = G.T.contiguous()
    gflop = 2 * 384 * 384 * 30522 / 1e9
    for name, fn in (
        ("tall @ small  (30522x384 @ 384x384)", lambda: G @ P),
        ("small @ wide  (384x384 @ 384x30522)", lambda: P @ W),
    ):
        t = ms(fn)
        print(f"  {name}: {t:.1f} ms, {gflop / t * 1e3:.0f} GFLOP/s")


STEP = """
import resource, sys, time, torch
sys.path.insert(0, sys.argv[2])
from flow import FlowConfig, elf_loss
from model import ELF, ELFConfig, SIZES
from lib.optim import keep_freed_memory
if sys.argv[1] == "keep":
    keep_freed_memory()
torch.manual_seed(0)
model = ELF(ELFConfig(latent_dim=384, vocab_size=30522, max_seq_len=64, **SIZES["tiny"]))
x, tokens, mask = torch.randn(32, 64, 384), torch.randint(0, 30522, (32, 64)), \
torch.ones(32, 64, dtype=torch.bool)
def step():
    loss, _ = elf_loss(model, x, tokens, mask, FlowConfig(), torch.Generator().manual_seed(0))
    loss.backward()
    model.zero_grad(set_to_none=True)
    return loss.item()
step(); step()
times, faults = [], []
for _ in range(5):
    f0, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    loss = step()
    times.append(1e3 * (time.perf_counter() - t0))
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
print(f"{sorted(times)[2]:.0f} ms, {sorted(faults)[2]} page faults a step, peak resident \
{rss:.2f} GB, loss {loss:.6f}")
"""


def allocator():
    print(
        "tiny's training step (batch 32 x 64, AdamW-free forward-backward), median of 5, "
        "in fresh processes:"
    )
    for rep in (1, 2):
        for mode in ("default", "keep"):
            out = subprocess.run(
                [sys.executable, "-c", STEP, mode, ROOT], capture_output=True, text=True, check=True
            )
            print(
                f"  run {rep}, "
                f"{'glibc default' if mode == 'default' else 'keep_freed_memory()':<20} "
                f"{out.stdout.strip()}"
            )


class FusedCrossEntropy(torch.autograd.Function):
    """log-sum-exp forward, softmax-minus-one-hot backward (tried, not kept)."""

    @staticmethod
    def forward(ctx, logits, target):
        lse = torch.logsumexp(logits, -1)
        ctx.save_for_backward(logits, target, lse)
        return lse - logits.gather(-1, target[:, None]).squeeze(-1)

    @staticmethod
    def backward(ctx, g):
        logits, target, lse = ctx.saved_tensors
        grad = (logits - lse[:, None]).exp_().mul_(g[:, None])
        return grad.scatter_add_(-1, target[:, None], -g[:, None]), None


def loss_tail():
    print(
        "the decoder's loss tail, 448 rows (7 decode rows of 64) x 30522, forward-backward "
        "with the unembedding:"
    )
    g = torch.Generator().manual_seed(0)
    x = torch.randn(448, 384, generator=g, requires_grad=True)
    W, b = (
        (0.05 * torch.randn(30522, 384, generator=g)).requires_grad_(),
        torch.zeros(30522, requires_grad=True),
    )
    target = torch.randint(0, 30522, (448,), generator=g)
    for name, ce in (
        ("F.cross_entropy", lambda lg: F.cross_entropy(lg, target, reduction="none")),
        ("fused", lambda lg: FusedCrossEntropy.apply(lg, target)),
    ):
        print(f"  {name}: {ms(lambda: ce(F.linear(x, W, b)).sum().backward()):.0f} ms")
    with torch.no_grad():
        gflop = 2 * 448 * 384 * 30522 / 1e9
        for name, fn in (
            ("logits h @ W^T", lambda: F.linear(x, W, b)),
            ("transposed W @ h^T", lambda: W @ x.T),
            ("transposed, copied back", lambda: (W @ x.T).T.contiguous()),
        ):
            t = ms(fn)
            print(f"  {name}: {t:.0f} ms, {gflop / t * 1e3:.0f} GFLOP/s")


if __name__ == "__main__":
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    accuracy()
    layouts()
    allocator()
    loss_tail()
