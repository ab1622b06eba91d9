"""Benchmarks of ELF on the current device: the training step in its parts, the optimiser,
and sampling, each as FLOPs, time and share of a matmul peak measured in the same run.

    python -m tools.bench                 # tiny and ELF-B: train step, optimisers, samplers
    python -m tools.bench --models tiny --parts sample  # keys: python -m tools.bench --help
    python -m tools.bench --profile       # + torch.profiler's top ops of the training step

What is timed (random tokens and latents: the data do not matter for speed):
- network: the training step's 2 no-grad self-conditioning forwards (on the expected 40%
  of the rows) and the forward-backward of the mixed batch; FLOPs counted by torch's
  FlopCounterMode (matmuls and attention), divided by the time and by the matmul peak.
- optimiser: clip + step of AdamW, Muon on every 2-D weight, Muon on the blocks only; the
  FLOPs are Newton-Schulz's (counted the same way). With the `muon-optimizer` package
  installed, its Newton-Schulz runs on the same matrices for comparison (not a dependency).
- step: one whole training step (all of the above), all its FLOPs over its time.
- sampling: samples/s, NFE and MFU of ODE, SDE and Heun at 8-64 steps (flow passes
  compute no vocabulary logits; the decode pass does).
The matmul peak: the best of `peak_reps` timed n x n matmuls in the model's dtype (float32
on CPU, bfloat16 on CUDA), with their spread. Times are medians of `iters` calls after a
warm-up call (where torch.compile compiles; its time is reported apart). Figures from one
run are comparable with each other; across runs, compare ratios: shared machines are noisy.
"""

import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import types
import typing
from dataclasses import dataclass
from typing import Annotated

import torch

from encoder import FrozenEncoder
from flow import Denoiser, FlowConfig, decode_latents, elf_loss, sample_latents, time_grid
from lib.config import comma_list, parse, resolve_device
from lib.data import load_token_rows, wiki_records
from lib.guard import cli
from lib.optim import flush_denormals, keep_freed_memory
from model import ELF, SIZES, ELFConfig
from muon import Muon, muon_param_groups, orthogonal_updates
from tools.timing import count_flops, matmul_peak, timed


@dataclass
class BenchConfig:
    """Time ELF's training step, optimisers and samplers on this device."""

    models: str = "tiny,ELF-B"  # comma-separated sizes of model.SIZES
    parts: str = "train,optim,sample"  # train, optim, sample, data (token store: slow, big files)
    batch_size: Annotated[int, "non_negative"] = 0  # 0: per-model default (SHAPES)
    length: Annotated[int, "non_negative"] = 0
    compile: typing.Optional[bool] = None  # None: eager and compiled; true / false: one of them
    # timed repetitions after one warm-up; the median is reported
    iters: Annotated[int, "at_least_1"] = 3
    peak_reps: Annotated[int, "at_least_1"] = 10  # repetitions of the matmul peak
    sample_steps: str = "8,16,32,64"
    # 0: 64, or 4 for a model bigger than tiny on a CPU
    sample_batch: Annotated[int, "non_negative"] = 0
    profile: bool = False  # torch.profiler's top ops of a step, by self CPU/CUDA time
    data_tokens: str = "20e6,200e6"  # part 'data': corpus sizes (tokens) of the store benchmark
    data_dir: str = ""  # where it writes its corpora and stores ('': a temp folder)
    latent_dim: Annotated[int, "at_least_1"] = 384  # D and V of the encoder (the bundled MiniLM's)
    vocab_size: Annotated[int, "at_least_1"] = 30522
    device: str = "auto"


# (batch, length): tiny as the CPU default, ELF-B at paper shape on a GPU and a CPU-sized cut
# otherwise
SHAPES = {"tiny": (32, 64), "ELF-B": (4, 256)}
SHAPES_CUDA = {"ELF-B": (32, 1024)}


def row(label, flops, seconds, peak, extra=""):
    """One line of figures; on CUDA also the peak memory since the previous line."""
    mem = ""
    if torch.cuda.is_available() and torch.cuda.max_memory_allocated() > 0:
        mem = f"   peak {torch.cuda.max_memory_allocated() / 1e9:.1f} GB"
        torch.cuda.reset_peak_memory_stats()
    print(
        f"  {label:<28} {flops / 1e9:9.1f} GFLOP {1e3 * seconds:10.1f} ms "
        f"{flops / seconds / 1e9:8.1f} GFLOP/s {100 * flops / seconds / peak:6.1f}% of peak"
        f"{extra}{mem}"
    )


def bench_train(model, net, B, L, cfg, device, peak, amp, label):
    """The network's parts and whole steps with each optimiser; returns {name: seconds}."""
    D, V = model.cfg.latent_dim, model.cfg.vocab_size
    g = torch.Generator(device).manual_seed(0)
    tokens = torch.randint(0, V, (B, L), device=device, generator=g)
    x = torch.randn(B, L, D, device=device, generator=g)
    mask = torch.ones(B, L, dtype=torch.bool, device=device)
    flow = FlowConfig()  # the rows training self-conditions
    n_sc = max(1, round((1 - flow.decoder_prob) * flow.self_cond_prob * B))
    zs, ts, ws = (
        torch.randn(n_sc, L, D, device=device),
        torch.rand(n_sc, device=device),
        torch.ones(n_sc, device=device),
    )
    gen = lambda: torch.Generator(device).manual_seed(0)  # the same branches every call

    def sc_forwards():
        with torch.no_grad(), amp:
            x_u, _ = net(zs, ts, ws)
            net(zs, ts, ws, x_sc=x_u)

    def fwd_bwd():
        with amp:
            loss, _ = elf_loss(net, x, tokens, mask, FlowConfig(self_cond_prob=0.0), gen())
        loss.backward()

    def full_step(opt):
        with amp:
            loss, _ = elf_loss(net, x, tokens, mask, FlowConfig(), gen())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    (t_sc, c_sc), (t_fb, c_fb) = (
        timed(sc_forwards, cfg.iters, device),
        timed(fwd_bwd, cfg.iters, device),
    )
    f_sc, f_fb = count_flops(sc_forwards), count_flops(fwd_bwd)
    print(
        f"{label}: network (compile warm-up {c_sc + c_fb:.1f} s)"
        if net is not model
        else f"{label}: network"
    )
    row("self-cond forwards x2", f_sc, t_sc, peak)
    row("forward-backward", f_fb, t_fb, peak)
    row(
        "network (both)", f_sc + f_fb, t_sc + t_fb, peak, f"   {B * L / (t_sc + t_fb):.0f} tokens/s"
    )
    steps = {}
    for name, make in optimizers(model):
        opt = make()
        full_step(opt)  # optimiser state exists
        t_opt = timed(
            lambda: (torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0), opt.step()),
            cfg.iters,
            device,
        )[0]
        f_opt = count_flops(opt.step)
        t_step = timed(lambda: full_step(opt), cfg.iters, device)[0]
        row(f"optimiser {name}", max(f_opt, 1), t_opt, peak)
        row(
            f"step with {name}",
            f_sc + f_fb + f_opt,
            t_step,
            peak,
            f"   {B * L / t_step:.0f} tokens/s",
        )
        steps[name] = t_step
    ratio = steps["Muon(all)"] / steps["AdamW"]
    print(f"  whole step Muon(all) / AdamW: {ratio:.2f}x")
    return steps


def optimizers(model):
    return (
        ("AdamW", lambda: torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)),
        ("Muon(all)", lambda: Muon(muon_param_groups(model, "all"), lr=1e-4)),
        ("Muon(blocks)", lambda: Muon(muon_param_groups(model, "blocks"), lr=1e-4)),
    )


def bench_newton_schulz(model, cfg, device, peak):
    """Newton-Schulz alone on every 2-D weight's shape: ours (float32, as released) against
    the muon-optimizer package's (bfloat16), when it is installed."""
    mats = [torch.randn_like(p) for p in model.parameters() if p.ndim == 2]
    # batched by shape, as the optimiser does
    ours = lambda: orthogonal_updates([(m, 5) for m in mats])
    t, f = timed(ours, cfg.iters, device)[0], count_flops(ours)
    row(f"Newton-Schulz, {len(mats)} matrices", f, t, peak, "   (float32)")
    reference = reference_newton_schulz()
    if reference is None:
        print("  (muon-optimizer not installed: no reference Newton-Schulz to compare)")
        return
    theirs = lambda: [reference(m, 5) for m in mats]
    t2 = timed(theirs, cfg.iters, device)[0]
    row(
        "muon-optimizer Newton-Schulz",
        count_flops(theirs),
        t2,
        peak,
        f"   (bfloat16; ours/theirs time {t / t2:.2f})",
    )


def reference_newton_schulz():
    """The muon-optimizer package's Newton-Schulz, or None. The package installs a top-level
    `muon.py`, which this repository's muon.py shadows, so it is loaded from its own file."""
    import importlib.metadata
    import importlib.util

    try:
        path = importlib.metadata.distribution("muon-optimizer").locate_file("muon.py")
    except importlib.metadata.PackageNotFoundError:
        return None
    spec = importlib.util.spec_from_file_location("muon_optimizer_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.zeropower_via_newtonschulz5


def bench_sample(net, B, L, cfg, device, peak, amp, label):
    """samples/s, NFE and MFU of each sampler at each step count, one batch of sample_batch;
    `net` is the model, eager or compiled (its first call, compilation included, reported)."""
    D = cfg.latent_dim
    print(f"{label}: sampling, batch {B} x length {L}")
    for steps in comma_list("sample_steps", cfg.sample_steps):
        for sampler in ("ode", "sde", "heun"):

            def run():
                den = Denoiser(net, 3.0)
                g = torch.Generator(device).manual_seed(0)
                z = 2.0 * torch.randn(B, L, D, device=device, generator=g)
                with torch.no_grad(), amp:
                    z, _ = sample_latents(
                        den,
                        z,
                        time_grid(steps, "logit_normal_quantile", device=device),
                        sampler,
                        1.5,
                        g,
                    )
                    decode_latents(net, z, 3.0)
                run.nfe = den.nfe + 1

            t, first = timed(run, max(1, cfg.iters // 2), device)
            row(
                f"{sampler} {steps} steps, NFE {run.nfe}",
                count_flops(run),
                t,
                peak,
                f"   {B / t:.1f} samples/s"
                + (f"   (first call {first:.0f} s)" if label == "compiled" else ""),
            )


def profile_step(model, B, L, device, amp):
    """torch.profiler's top ops of one training step (AdamW), by self time."""
    from torch.profiler import ProfilerActivity, profile

    D, V = model.cfg.latent_dim, model.cfg.vocab_size
    x, tokens = torch.randn(B, L, D, device=device), torch.randint(0, V, (B, L), device=device)
    mask, opt = (
        torch.ones(B, L, dtype=torch.bool, device=device),
        torch.optim.AdamW(model.parameters()),
    )

    def step():
        with amp:
            loss, _ = elf_loss(
                model, x, tokens, mask, FlowConfig(), torch.Generator(device).manual_seed(0)
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=acts) as prof:
        step()
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=15))


def bench_data(cfg: BenchConfig):
    """The token store at two corpus sizes: tokenization throughput (the machine's cores),
    size on disk, and the peak resident memory of a training process reading it (one rank,
    then two Gloo ranks). The corpus: the bundled paragraphs repeated, each pass shuffled."""
    encoder = FrozenEncoder("minilm")
    paragraphs = [r.extract for r in wiki_records() if not r.held_out]
    per_pass = sum(map(len, encoder.tokenize(paragraphs))) + len(paragraphs)
    root = cfg.data_dir or tempfile.mkdtemp(prefix="elf-bench-data-")
    os.makedirs(root, exist_ok=True)
    for n_tokens in (int(x) for x in comma_list("data_tokens", cfg.data_tokens, float)):
        corpus = os.path.join(root, f"corpus-{n_tokens}.jsonl")
        passes = max(1, round(n_tokens / per_pass))
        if not os.path.isfile(corpus):
            with open(corpus + ".tmp", "w") as f:
                for p in range(passes):
                    order = random.Random(p).sample(paragraphs, len(paragraphs))
                    f.write("".join(json.dumps({"text": t}) + "\n" for t in order))
            os.replace(corpus + ".tmp", corpus)
        data = types.SimpleNamespace(
            dataset=corpus,
            text_column="text",
            val_size=500,
            max_length=64,
            packing=True,
            pad_token="pad",
            framing=False,
            cache_dir=root,
            encoder="minilm",
        )
        t0 = time.time()
        train, _ = load_token_rows(data, encoder)  # builds the store (or opens it)
        seconds = time.time() - t0
        store = train.store
        size = sum(os.path.getsize(os.path.join(store.path, f)) for f in os.listdir(store.path))
        built = os.path.getmtime(os.path.join(store.path, "meta.json")) >= t0
        speed = (
            f"store built in {seconds:.0f} s = "
            f"{store.meta['n_tokens'] / seconds / 1e6:.2f}M tokens/s with "
            f"{os.cpu_count()} cores (the JSON's conversion to Arrow included)"
            if built
            else "store built by an earlier run (opened, not timed)"
        )
        print(
            f"\ncorpus {store.meta['n_tokens'] / 1e6:.0f}M tokens ({passes} passes, "
            f"{len(store)} documents): {speed}, {size / 1e6:.0f} MB on disk"
        )
        args = [
            "configs/tiny.py",
            f"--dataset={corpus}",
            "--max_length=64",
            "--packing=true",
            "--latent_cache=false",
            "--max_steps=5",
            "--batch_size=32",
            "--eval_batches=1",
            "--n_samples=0",
            f"--cache_dir={root}",
            "--overwrite",
            "--log_interval=1",
            "--pad_token=pad",
            "--framing=false",
        ]  # the store built above
        env = dict(os.environ, OMP_NUM_THREADS="1")
        for launcher, ranks in (
            ([sys.executable], 1),
            (
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc_per_node=2",
                ],
                2,
            ),
        ):
            out = tempfile.mkdtemp(dir=root)
            r = subprocess.run(
                [*launcher, "train.py", *args, f"--out_dir={out}"],
                capture_output=True,
                text=True,
                env=env,
            )
            if r.returncode:
                raise ValueError(f"the training run failed: {r.stderr.strip().splitlines()[-1]}")
            rss = re.findall(
                r"(?:rank (\d): )?peak resident memory ([\d.]+) GB \(([\d.]+) GB", r.stdout
            )
            print(
                f"  training from it, {ranks} rank(s): peak resident memory "
                + ", ".join(
                    f"{'rank ' + k + ' ' if k else ''}{float(v):.2f} GB = "
                    f"{float(v) - float(f):.2f} own + {float(f):.2f} mapped files"
                    for k, v, f in rss
                )
            )


def main(argv):
    cfg = parse(argv, BenchConfig, "-m tools.bench")
    names = comma_list("models", cfg.models, str, allowed=tuple(SIZES))
    parts = comma_list("parts", cfg.parts, str, allowed=("train", "optim", "sample", "data"))
    # malformed lists fail now, named
    for key, kind in (("sample_steps", int), ("data_tokens", float)):
        comma_list(key, getattr(cfg, key), kind)
    device = resolve_device(cfg.device)
    if parts == ["data"]:
        return bench_data(cfg)
    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        keep_freed_memory()  # as train.py does on a CPU
        flush_denormals()
    dtype = torch.bfloat16 if cuda else torch.float32
    peak, median, low = matmul_peak(device, dtype, cfg.peak_reps)
    where = torch.cuda.get_device_name(device) if cuda else f"{torch.get_num_threads()} threads"
    print(
        f"device: {device} ({where}), torch {torch.__version__}; "
        f"matmul peak {peak / 1e9:.1f} GFLOP/s ({dtype}; "
        f"median {median / 1e9:.1f}, min {low / 1e9:.1f} over {cfg.peak_reps})"
    )
    amp = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=cuda)
    for name in names:
        B, L = (SHAPES_CUDA if cuda else {}).get(name) or SHAPES.get(name, (4, 256))
        B, L = cfg.batch_size or B, cfg.length or L
        torch.manual_seed(0)
        model = ELF(
            ELFConfig(
                latent_dim=cfg.latent_dim, vocab_size=cfg.vocab_size, max_seq_len=L, **SIZES[name]
            )
        )
        model = model.to(device)
        print(
            f"\n{name}: {model.num_params() / 1e6:.1f}M parameters, batch {B} x length {L} "
            f"({'bf16 autocast' if cuda else 'float32'})"
        )
        B_sample = cfg.sample_batch or (64 if cuda or name == "tiny" else 4)
        for compiled in [False, True] if cfg.compile is None else [cfg.compile]:
            net, label = (torch.compile(model), "compiled") if compiled else (model, "eager")
            if "train" in parts:
                bench_train(model, net, B, L, cfg, device, peak, amp, label)
            if "sample" in parts:
                bench_sample(net, B_sample, L, cfg, device, peak, amp, label)
        if "optim" in parts:
            bench_newton_schulz(model, cfg, device, peak)
        if cfg.profile:
            profile_step(model, B, L, device, amp)
    if "data" in parts:
        bench_data(cfg)


if __name__ == "__main__":
    cli(main)
