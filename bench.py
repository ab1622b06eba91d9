"""Training-throughput benchmark for ELF on the current device (ELF_SPEC §5 step, §7 optimiser).

    python bench.py                                   # tiny and ELF-B, eager and compiled
    python bench.py --models=tiny --compile=false     # keys: see BenchConfig

One §5 training step is timed in its parts, on random tokens and latents (the data do
not matter for speed): the frozen encoder on the batch's tokens (a run with a latent
cache skips it), the 2 no-grad self-conditioning forwards (on the expected number of
self-conditioned rows, 40% of the batch), the forward-backward of the mixed batch, and
the optimiser (grad clip + step; the EMA apart). A whole step is timed as a check. MFU is
the step's model FLOPs (matmuls and attention, counted by torch's FlopCounterMode) over
the step time without the encoder, divided by a matmul peak measured here, in this run,
with the same dtype as the model's matmuls (float32 on CPU, bfloat16 on CUDA). The
optimiser is timed as AdamW, Muon on every 2-D weight, and Muon on the blocks only.
The encoder is the bundled MiniLM, so D = 384 and V = 30522 for every model.
"""

import statistics
import sys
import time
import typing
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from config import parse
from encoder import FrozenEncoder
from flow import FlowConfig, elf_loss
from model import ELF, ELFConfig, PRESETS
from muon import Muon, muon_param_groups


@dataclass
class BenchConfig:
    models: str = "tiny,ELF-B"         # comma-separated presets of model.PRESETS
    batch_size: int = 0                # 0: per-model default (SHAPES)
    length: int = 0
    compile: typing.Optional[bool] = None  # None: eager and compiled; true / false: one of them
    encoder_dtype: str = "bfloat16"    # as configs/tiny.py
    iters: int = 3                     # timed repetitions (after one warm-up); the median is reported
    device: str = "auto"


# (batch, length): tiny as configs/tiny.py; ELF-B at paper shape on a GPU, a CPU-sized cut otherwise
SHAPES = {"tiny": (32, 64), "ELF-B": (4, 256)}
SHAPES_CUDA = {"ELF-B": (32, 1024)}


def timed(fn, iters: int, device: str):
    """Median wall time of fn() in seconds, after one warm-up call (compilation happens there)."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fn()
    times = []
    for _ in range(iters):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_peak(device: str, dtype) -> float:
    """Best FLOP/s of an n x n x n matmul: the practical peak the MFU is measured against."""
    n = 4096 if device.startswith("cuda") else 2048
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    return 2 * n ** 3 / min(timed(lambda: a @ b, 1, device) for _ in range(5))


def count_flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def bench_model(name: str, cfg: BenchConfig, encoder: FrozenEncoder, device: str, peak: float):
    default = (SHAPES_CUDA if device.startswith("cuda") else {}).get(name) or SHAPES.get(name, (4, 256))
    B, L = cfg.batch_size or default[0], cfg.length or default[1]
    D, V = encoder.dim, encoder.vocab_size
    torch.manual_seed(0)
    model = ELF(ELFConfig(latent_dim=D, vocab_size=V, max_seq_len=L, **PRESETS[name])).to(device)
    amp = device.startswith("cuda")
    autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=amp)
    tokens = torch.randint(0, V, (B, L), device=device)
    x = torch.randn(B, L, D, device=device)                        # normalised latents (B, L, D)
    mask = torch.ones(B, L, dtype=torch.bool, device=device)
    n_sc = max(1, round(0.4 * B))                                  # (1 - decoder_prob) * self_cond_prob
    zs, ts, ws = torch.randn(n_sc, L, D, device=device), torch.rand(n_sc, device=device), torch.ones(n_sc, device=device)
    print(f"\n{name}: {model.num_params() / 1e6:.1f}M parameters, batch {B} x length {L} "
          f"({'bf16 autocast' if amp else 'float32'})")

    enc_ids = tokens.clamp(max=V - 1)
    fits = encoder.max_positions is None or L <= encoder.max_positions
    t_enc = timed(lambda: encoder.encode(enc_ids), cfg.iters, device) if fits else float("nan")

    modes = [False, True] if cfg.compile is None else [cfg.compile]
    header = f"{'mode':9} {'encoder':>8} {'sc-fwd x2':>9} {'fwd-bwd':>8} {'optim':>8} {'sum':>8} {'step':>8} " \
             f"{'tok/s':>8} {'tok/s+enc':>9} {'GFLOP':>7} {'MFU':>6}"
    print("times in ms; optim = clip + Muon(all) step; step = one whole step timed; tok/s on the step")
    print(header)
    opt = Muon(muon_param_groups(model, "all"), lr=1e-4)
    for compiled in modes:
        net = torch.compile(model) if compiled else model
        flow = FlowConfig(self_cond_prob=0.0)                      # the grad pass alone
        gen = lambda: torch.Generator(device).manual_seed(0)       # same branches every call

        def sc_forwards():
            with torch.no_grad(), autocast:
                x_u, _ = net(zs, ts, ws)
                net(zs, ts, ws, x_sc=x_u)

        def fwd_bwd():
            with autocast:
                loss, _ = elf_loss(net, x, tokens, mask, flow, gen())
            loss.backward()

        def optim():
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

        def full_step():
            with autocast:
                loss, _ = elf_loss(net, x, tokens, mask, FlowConfig(), gen())
            model.zero_grad(set_to_none=True)
            loss.backward()
            optim()

        t_sc, t_fb = timed(sc_forwards, cfg.iters, device), timed(fwd_bwd, cfg.iters, device)
        t_opt, t_step = timed(optim, cfg.iters, device), timed(full_step, cfg.iters, device)
        if not compiled:                                           # counted once, on the eager model
            flops = count_flops(sc_forwards) + count_flops(fwd_bwd)
        total = t_sc + t_fb + t_opt
        print(f"{'compiled' if compiled else 'eager':9} {1e3 * t_enc:8.1f} {1e3 * t_sc:9.1f} {1e3 * t_fb:8.1f} "
              f"{1e3 * t_opt:8.1f} {1e3 * total:8.1f} {1e3 * t_step:8.1f} {B * L / t_step:8.0f} "
              f"{B * L / (t_step + t_enc):9.0f} {flops / 1e9:7.1f} {100 * flops / total / peak:5.1f}%")

    steps = {}
    model.zero_grad(set_to_none=True)
    loss, _ = elf_loss(model, x, tokens, mask, FlowConfig(), torch.Generator(device).manual_seed(0))
    loss.backward()                                                # gradients to step on
    for label, make in (("AdamW", lambda: torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)),
                        ("Muon(all)", lambda: Muon(muon_param_groups(model, "all"), lr=1e-4)),
                        ("Muon(blocks)", lambda: Muon(muon_param_groups(model, "blocks"), lr=1e-4))):
        o = make()
        steps[label] = timed(o.step, cfg.iters, device), count_flops(o.step)  # matmul FLOPs: Newton–Schulz
    print("optimiser step alone: " + ", ".join(f"{k} {1e3 * t:.1f} ms ({f / 1e9:.0f} GFLOP)"
                                               for k, (t, f) in steps.items()))


def main(argv):
    cfg = parse(argv, BenchConfig)
    names = [n for n in cfg.models.split(",") if n]
    unknown = [n for n in names if n not in PRESETS]
    if unknown:
        raise ValueError(f"unknown model preset '{unknown[0]}' (choose from {', '.join(PRESETS)})")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    peak = matmul_peak(device, dtype)
    where = torch.cuda.get_device_name(device) if device.startswith("cuda") else f"{torch.get_num_threads()} threads"
    print(f"device: {device} ({where}), torch {torch.__version__}; matmul peak {peak / 1e9:.1f} GFLOP/s ({dtype})")
    encoder = FrozenEncoder("minilm", 0.0, 1.0, cfg.encoder_dtype).to(device)
    for name in names:
        bench_model(name, cfg, encoder, device, peak)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
