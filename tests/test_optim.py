"""optim.py: the learning-rate scaling, the warmup's shape, the EMA update, by hand; the CPU
allocator setting, by its page faults."""

import os
import subprocess
import sys

import pytest
import torch

from lib.optim import ema_decay, ema_update, make_optimizer, scaled_lr, warmup_lr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_lr_scales_with_the_global_batch():
    assert scaled_lr(1e-3, 512) == pytest.approx(2e-3)  # the paper's ELF-B: 2e-3
    assert scaled_lr(2e-3, 128) == pytest.approx(1e-3)


def test_warmup_is_linear_from_zero_then_constant():
    lrs = [warmup_lr(1.0, step, 4) for step in range(7)]
    # update k (0-based) gets k / warmup
    assert lrs == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0])
    assert warmup_lr(3e-4, 0, 0) == pytest.approx(3e-4) and warmup_lr(3e-4, 1, 0) == pytest.approx(
        3e-4
    )
    cos = [warmup_lr(1.0, step, 2, "cosine", 12) for step in (0, 1, 2, 7, 12, 20)]
    assert cos == pytest.approx([0.0, 0.5, 1.0, 0.55, 0.1, 0.1])  # down to lr / 10 at max_steps


def test_ema_update_by_hand():
    torch.manual_seed(0)
    model, ema = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    before = [p.clone() for p in ema.parameters()]
    ema_update(ema, model, 0.9)
    for e, b, m in zip(ema.parameters(), before, model.parameters()):
        assert torch.allclose(e, 0.9 * b + 0.1 * m)
    assert ema_decay(0.999, 1, warmup=True) == pytest.approx(2 / 11)  # (1 + k) / (10 + k)
    assert (
        ema_decay(0.999, 10_000, warmup=True) == 0.999 and ema_decay(0.99, 1, warmup=False) == 0.99
    )


def test_optimizers():
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    adamw = make_optimizer(net, "adamw", "all", 1e-3)
    assert isinstance(adamw, torch.optim.AdamW) and adamw.param_groups[0]["weight_decay"] == 0.0
    muon = make_optimizer(net, "muon", "all", 1e-3)
    assert [len(g["params"]) for g in muon.param_groups] == [1, 3]  # the 2-D weight on Muon
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        make_optimizer(net, "sgd", "all", 1e-3)


PROBE = """
import resource, sys, torch
from lib.optim import keep_freed_memory
if sys.argv[1] == "keep" and not keep_freed_memory():
    sys.exit("unsupported")                    # not glibc: nothing to measure
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():                  # a training step's pattern: buffers of 1 to 64 MB, written, freed
    bufs = [torch.ones(n) for n in (1 << 18, 1 << 20, 1 << 22, 1 << 24)]
    del bufs
per_step = []
for _ in range(12):
    f0 = faults()
    step()
    per_step.append(faults() - f0)
print(sorted(per_step)[6])                     # the median step: the heap has grown by then
"""


def huge_pages_always():
    path = "/sys/kernel/mm/transparent_hugepage/enabled"
    return os.path.isfile(path) and "[always]" in open(path).read()


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or huge_pages_always(),
    reason="glibc's allocator, 4 KB pages",
)
def test_freed_buffers_are_reused_instead_of_page_faulted_in_again():
    """Without keep_freed_memory glibc unmaps the large blocks on free and every step faults
    them in again (measured: 16k page faults a step); with it, none in a typical step."""
    env = {k: v for k, v in os.environ.items() if k not in ("THP_MEM_ALLOC_ENABLE", "LD_PRELOAD")}
    run = lambda mode: subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True, env=env
    )
    kept = run("keep")
    if kept.returncode and "unsupported" in kept.stderr:
        pytest.skip("not glibc")
    default = int(run("default").stdout)
    assert default > 1000 and int(kept.stdout) < default / 20, (default, kept.stdout)


DENORMAL_PROBE = """
import sys, warnings, torch
from lib.optim import flush_denormals
torch.set_num_threads(2)
if sys.argv[1] == "late":
    torch.randn(1 << 20).mul(2.0).sum()                 # a parallel kernel starts the workers
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    flushed = flush_denormals()
product = torch.full((1 << 22,), 1e-30) * 1e-10        # a denormal product, on both threads
print(flushed, len(caught), (product.view(torch.int32) != 0).float().mean().item())
"""


@pytest.mark.parametrize("when", ["first", "late"])
def test_denormals_are_flushed_on_every_thread_only_when_flushed_first(when):
    """optim.flush_denormals before the first parallel kernel: every thread computes a
    denormal product as zero. After one: the worker threads do not (they copied the float
    mode when they started), and the function says so (False and a warning). The workers'
    denormals made the tiny default's steps 1.6x slower by step 300."""
    r = subprocess.run(
        [sys.executable, "-c", DENORMAL_PROBE, when], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-2000:]
    flushed, warned, denormal_share = r.stdout.split()
    if when == "first":
        assert (flushed, warned, float(denormal_share)) == ("True", "0", 0.0)
    else:  # the main thread's share flushed, not the rest
        assert (flushed, warned) == ("False", "1") and 0.0 < float(denormal_share) < 1.0
