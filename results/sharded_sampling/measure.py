"""The measurement behind README "Scaling up" (sampling): samples/s of sample.py on 1 and 2
CPU ranks for ELF-tiny with random weights, FLOPs per sample, and what that makes of ELF-B on
8 GPUs (an estimate: no GPU was measured). Run by run.sh beside it:

    python results/sharded_sampling/measure.py ckpt DIR  # random tiny checkpoints, length 16 and 64
    python results/sharded_sampling/measure.py report DIR  # the table, from DIR/*/run.json
"""

import copy
import dataclasses
import glob
import json
import os
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from flow import FlowConfig  # noqa: E402
from lib import checkpoint  # noqa: E402
from model import ELF, SIZES, ELFConfig  # noqa: E402

STEPS = 32  # uncond32: 32 SDE steps + 1 decode pass = NFE 33
MINILM = dict(latent_dim=384, vocab_size=30522)
T5_SMALL = dict(latent_dim=512, vocab_size=32128)  # the paper's encoder for ELF-B


def make_ckpts(out):
    for L in (16, 64):
        cfg = ELFConfig(**MINILM, **SIZES["tiny"], max_seq_len=L)
        torch.manual_seed(0)
        net = ELF(cfg)
        # a flow head that moves the latents
        torch.nn.init.normal_(net.final_layer.linear.weight, std=0.02)
        meta = {
            "train": {"encoder": "minilm", "encoder_dtype": "float32", "max_length": L},
            "model": dataclasses.asdict(cfg),
            "flow": dataclasses.asdict(FlowConfig()),
            "latent_stats": {"mean": 0.0, "std": 0.2},
        }
        checkpoint.save(os.path.join(out, f"tiny{L}"), net, copy.deepcopy(net), None, 0, meta)


def flops_per_sample(cfg: ELFConfig, L: int) -> int:
    """STEPS flow passes (no vocabulary logits) and one decode pass, batch 1 (ELF-B: a few seconds
    on a CPU)."""
    net = ELF(cfg).eval()
    z, t, w = torch.randn(1, L, cfg.latent_dim), torch.rand(1), torch.ones(1)
    with torch.no_grad():
        with FlopCounterMode(display=False) as flow:
            net(z, t, w, x_sc=z)
        with FlopCounterMode(display=False) as decode:
            net(
                z, t, w, x_sc=z, decode=torch.ones(1, dtype=torch.bool), logits_rows=torch.arange(1)
            )
    return STEPS * flow.get_total_flops() + decode.get_total_flops()


def report(out):
    print("| length | ranks x threads | samples | seconds | samples/s | GFLOP / sample | GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    achieved = {}  # length -> best GFLOP/s measured
    for path in sorted(glob.glob(os.path.join(out, "L*", "run.json"))):
        name = os.path.basename(os.path.dirname(path))  # L16-1x1, L64-2x1, ...
        L, layout = int(name.split("-")[0][1:]), name.split("-")[1]
        run = json.load(open(path))["runs"][-1]
        f = flops_per_sample(ELFConfig(**MINILM, **SIZES["tiny"], max_seq_len=L), L)
        rate = run["samples_per_s"]
        achieved[L] = max(achieved.get(L, 0), f * rate)
        print(
            f"| {L} | {layout} | {run['drawn']} | {run['seconds']:.1f} | {rate:.2f} | "
            f"{f / 1e9:.2f} | {f * rate / 1e9:.0f} |"
        )
    f_b = flops_per_sample(ELFConfig(**T5_SMALL, **SIZES["ELF-B"], max_seq_len=1024), 1024)
    print(
        f"\nELF-B (T5-small, D 512, V 32128), length 1024, uncond32 (NFE 33): "
        f"{f_b / 1e12:.2f} TFLOP per sample"
    )
    # the judge, GPT-2 Large (36 x 1280, V 50257), on 1024 tokens: 2 FLOPs per weight per token in
    # the blocks and the LM head, and 4 L^2 d per layer for attention's two matmuls
    d, layers, V, L = 1280, 36, 50257, 1024
    f_j = 2 * (layers * 12 * d * d + d * V) * L + 4 * layers * L * L * d
    print(f"GPT-2 Large judge, 1024 tokens: {f_j / 1e12:.2f} TFLOP per sample (counted by hand)")
    for gpu, peak in (
        ("H100 SXM, bf16 dense 989 TFLOP/s", 989e12),
        ("A100, bf16 dense 312 TFLOP/s", 312e12),
    ):
        for mfu in (0.3, 0.5):
            per_gpu = mfu * peak / f_b
            print(
                f"  {gpu} at {mfu:.0%} of peak: sampling {per_gpu:.1f} samples/s per GPU, "
                f"{8 * per_gpu:.0f} on 8, 5000 samples in {5000 / (8 * per_gpu):.0f} s; "
                f"judging them {5000 * f_j / (8 * mfu * peak):.0f} s"
            )
    if achieved:  # ELF-B here, at tiny's best rate at the longest length
        L, cpu = max(achieved), achieved[max(achieved)]
        print(
            f"  this machine at its best measured rate at length {L} ({cpu / 1e9:.0f} GFLOP/s): "
            f"{f_b / cpu:.0f} s per ELF-B sample, {5000 * f_b / cpu / 86400:.1f} days for 5000"
        )


if __name__ == "__main__":
    {"ckpt": make_ckpts, "report": report}[sys.argv[1]](sys.argv[2])
