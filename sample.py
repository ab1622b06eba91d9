"""Sampling from ELF (METHOD.md, "Sampling"): noise -> latent -> one decode pass -> text.

The text interface over the samplers of flow.py: `generate` (unconditional, with optional
given text held clean in place), `generate_conditional` (a clean source held in place, with
classifier-free guidance), and the command line:

    python sample.py --ckpt out/tiny --n 8    # the run's preset (uncond32 by default)
    python sample.py --ckpt out/tiny --n 4 --steps 16 --sampler sde --gamma 1.5 --sc_cfg 3 \\
        --prefix "the city of" --out samples/city                 # samples/city/samples.jsonl
    python sample.py --ckpt out/de_en_tiny --source "Wir haben zwei Kinder."  # conditional: cond64
    python sample.py --help

Every result reports its NFE: the number of network forward passes, the decode pass
included (CFG doubles the flow part, Heun adds a pass per step but the last).

`--out DIR` writes chunks a restarted run keeps; torchrun splits them over devices
(lib/shards.py); without it, the samples are drawn here and printed:

    torchrun --standalone --nproc_per_node=8 -- sample.py --ckpt out/elf_b --n 5000 \
        --out samples/elf_b --progress
"""

import contextlib
import os
from dataclasses import dataclass
from typing import Annotated, Optional

import torch

from conditional import batch_masks, layout, tokenize_pairs
from encoder import FrozenEncoder
from flow import (
    PRESETS,
    Denoiser,
    FlowConfig,
    decode_latents,
    noise_stream,
    randn_streams,
    sample_latents,
    sampler_settings,
    time_grid,
)
from lib import shards
from lib.checkpoint import load, provenance
from lib.config import MAX_SAMPLES, parse
from lib.dist import distributed
from lib.guard import Writer, cli

# ----------------------------------------------------------------------------------------
# text in, text out


def place_text(encoder, length: int, prefix="", suffix="", spans=()):
    """Given text -> (ids (L,), cond (L,) bool, x (L, D) clean latents). Each piece is encoded
    alone, like the source of conditional generation, and placed: the prefix at 0, the suffix
    at the end, each (position, text) span at its position."""
    pieces = ([(0, prefix)] if prefix else []) + list(spans)
    if suffix:
        pieces.append((length - len(encoder.tokenize([suffix])[0]), suffix))
    ids = torch.full((length,), encoder.pad_id, dtype=torch.long)
    cond = torch.zeros(length, dtype=torch.bool)
    x = torch.zeros(length, encoder.dim)
    for pos, text in pieces:
        tok = torch.tensor(encoder.tokenize([text])[0], dtype=torch.long)
        if len(tok) == 0:  # blank: nothing to hold, and the encoder takes no empty row
            raise ValueError(f"given text '{text}' holds no tokens")
        if set(tok.tolist()) <= set(encoder.tokenizer.all_special_ids):  # decoded to nothing
            raise ValueError(
                f"given text '{text}' holds only special tokens, which a sample's "
                f"text leaves out: give words"
            )
        if pos < 0 or pos + len(tok) > length:
            raise ValueError(
                f"given text '{text}' ({len(tok)} tokens at {pos}) does not fit in length {length}"
            )
        if cond[pos : pos + len(tok)].any():
            raise ValueError(f"given text '{text}' overlaps another piece at position {pos}")
        ids[pos : pos + len(tok)], cond[pos : pos + len(tok)] = tok, True
        x[pos : pos + len(tok)] = encoder.normalize(
            encoder.encode(tok[None].to(encoder.model.device))
        )[0].cpu()
    return ids, cond, x


def assemble(ids, given_ids, cond, eos_id):
    """Token list of one sample: given positions verbatim; in free positions an EOS skips
    everything up to the next given piece (after the last one, it ends the text)."""
    out, skipping = [], False
    for i, f, g in zip(ids.tolist(), cond.tolist(), given_ids.tolist()):
        if f:
            out.append(g)
            skipping = False
        elif i == eos_id:
            skipping = True
        elif not skipping:
            out.append(i)
    return out


@torch.no_grad()
def generate(
    model,
    encoder,
    n=4,
    length=64,
    seed=0,
    prefix="",
    suffix="",
    spans=(),
    trajectory=False,
    flow: FlowConfig = FlowConfig(),
    batch_size=64,
    progress=False,
    churn="linear",
    indices=None,
    preset="uncond32",
    **overrides,
):
    """Sample n texts (or the samples `indices`, a list of sample numbers: a shard of a larger
    run) with the sampler settings of `preset`, any of them replaced by `overrides` (e.g.
    steps=16, sampler="ode"). Returns a list of dicts: text, nfe, seed, index and (if asked)
    the decoded trajectory of x_hat, one string per step."""
    s = sampler_settings(preset, **overrides)
    device = next(model.parameters()).device
    given, cond, x_cond = place_text(encoder, length, prefix, suffix, spans)
    held = bool(cond.any())
    indices = list(range(n)) if indices is None else list(indices)
    # One time grid per seed, shared by every sample of it. The release draws a logit-normal
    # grid per batch, which would make a sample depend on its batch; a grid per sample would
    # split every batch into single rows. Per seed keeps batches whole and the samples
    # independent of batch size and device count (METHOD.md, "Sampling").
    g = time_grid(s["steps"], s["grid"], flow, noise_stream(seed, "grid", device), device)
    results = []
    for start in range(0, len(indices), batch_size):
        idx = indices[start : start + batch_size]
        b, streams = len(idx), [noise_stream(seed, i, device) for i in idx]
        den = Denoiser(
            model,
            s["sc_cfg"],
            s["guidance"],
            cond.to(device).expand(b, -1) if held else None,
            x_cond.to(device).expand(b, -1, -1),
            flow,
        )
        # z: (B, L, D)
        z = flow.noise_scale * randn_streams((b, length, model.cfg.latent_dim), streams, device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, xs = sample_latents(
                den, z, g, s["sampler"], s["gamma"], streams, trajectory, progress, churn
            )
            ids = decode_latents(model, z, s["sc_cfg"]).cpu()
            steps_ids = [decode_latents(model, x, s["sc_cfg"]).cpu() for x in xs]
        for j in range(b):
            text = encoder.tokenizer.decode(
                assemble(ids[j], given, cond, encoder.eos_id), skip_special_tokens=True
            )
            r = {"text": text, "nfe": den.nfe + 1, "seed": seed, "index": idx[j]}
            if trajectory:
                r["trajectory"] = [encoder.detokenize(step[j]) for step in steps_ids]
            results.append(r)
    return results


@torch.no_grad()
def generate_conditional(
    model,
    encoder,
    sources,
    length,
    max_input_length,
    seed=0,
    flow: FlowConfig = FlowConfig(),
    batch_size=64,
    progress=False,
    preset="cond64",
    **overrides,
):
    """Conditional generation (METHOD.md, "Conditional generation"): each source (text or
    token ids) is placed clean at the start of its row, encoded under the condition mask and
    held there; the target is sampled after it with CFG, with the settings of `preset` (any
    replaced by `overrides`). Returns dicts {text: the target (at most length -
    max_input_length tokens) cut at its first EOS, nfe}."""
    s = sampler_settings(preset, **overrides)
    device = next(model.parameters()).device
    rows = layout([(src, []) for src in sources], encoder, length, max_input_length)
    # as in generate
    g = time_grid(s["steps"], s["grid"], flow, noise_stream(seed, "grid", device), device)
    results = []
    for start in range(0, len(sources), batch_size):
        batch = rows.select(slice(start, start + batch_size))
        m = batch_masks(batch, device)  # m.cond (B, L): the source, held clean
        x_cond = encoder.normalize(encoder.encode_rows(batch, m)).to(device)  # (B, L, D)
        den = Denoiser(model, s["sc_cfg"], s["guidance"], m.cond, x_cond, flow)
        # source i's own noise
        streams = [noise_stream(seed, i, device) for i in range(start, start + len(batch))]
        z = flow.noise_scale * randn_streams(x_cond.shape, streams, device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            z, _ = sample_latents(den, z, g, s["sampler"], s["gamma"], streams, progress=progress)
            out = decode_latents(model, z, s["sc_cfg"]).cpu()
        # the target: after the source, at most length - max_input_length tokens (as released)
        cap = length - max_input_length
        results += [
            {"text": encoder.detokenize(out[j, c : c + cap]), "nfe": den.nfe + 1}
            for j, c in enumerate(batch.cond_len.tolist())
        ]
    return results


def load_sampler(ckpt: str, device="cpu"):
    """(EMA model, frozen encoder with the run's latent statistics, meta) from a checkpoint
    folder: what sampling needs, rebuilt from the folder alone."""
    model, meta = load(ckpt, device)
    stats, tcfg = meta["latent_stats"], meta["train"]
    encoder = FrozenEncoder(
        tcfg["encoder"],
        stats["mean"],
        stats["std"],
        tcfg.get("encoder_dtype", "float32"),
        tcfg.get("encoder_weights", "pretrained"),
        tcfg.get("encoder_layer", -1),
    )
    return model, encoder.to(device), meta


# ----------------------------------------------------------------------------------------
# CLI


@dataclass
class SampleConfig:
    """Sample text from an ELF checkpoint."""

    ckpt: str = ""  # train.py out_dir (or a step folder) or a converted release
    n: Annotated[int, "positive"] = 8  # samples (at most 10 million)
    # a preset; '' = the run's sample_preset (uncond32 / cond64)
    preset: Annotated[str, ("", *PRESETS)] = ""
    # ode, sde or heun ('' = the preset's; so for the keys below)
    sampler: Annotated[str, ("", "ode", "sde", "heun")] = ""
    steps: Annotated[Optional[int], "positive"] = None
    gamma: Annotated[Optional[float], "non_negative"] = None  # SDE churn
    sc_cfg: Optional[float] = None  # SC-CFG scale (METHOD.md's w)
    guidance: Optional[float] = None  # CFG scale (conditional checkpoints)
    # uniform, logit_normal or logit_normal_quantile
    grid: Annotated[str, ("", "uniform", "logit_normal", "logit_normal_quantile")] = ""
    # linear (released; sharpens) or marginal (variance-matched)
    churn: Annotated[str, ("linear", "marginal")] = "linear"
    seed: int = 0
    # tokens per sample (None = the run's max_length)
    length: Annotated[Optional[int], "positive"] = None
    prefix: str = ""  # given text at the start, held clean through sampling
    suffix: str = ""  # given text at the end
    span: str = ""  # given text inside: 'POS:TEXT', several separated by '|'
    source: str = ""  # conditional: text to translate / summarise; several: 'a|b'
    trajectory: bool = False  # also decode x_hat at every step
    out: str = ""  # resumable folder: samples.jsonl, run.json; torchrun: needed
    # samples per forward (with --out: the chunk a restart keeps)
    batch_size: Annotated[int, "positive"] = 64
    progress: bool = False  # a progress bar per rank, in samples/s
    device: str = "auto"  # auto, cpu, cuda (torchrun: rank r takes cuda:LOCAL_RANK)


def check(a: SampleConfig):
    """One-line errors for settings that cannot be sampled (each key's own range and choices
    are declared with it, and checked by parse)."""
    for key in ("prefix", "suffix", "span", "source"):
        try:
            getattr(a, key).encode("utf-8")
        except UnicodeEncodeError:  # bytes the shell passed on undecoded
            raise ValueError(f"--{key} is not UTF-8 text: give it in UTF-8") from None
    if a.n > MAX_SAMPLES:  # held in memory: a MemoryError after the model loads, else
        raise ValueError(f"n must be at most {MAX_SAMPLES:,}, got {a.n:,}")
    if a.out:  # before sampling, not after: the samples must land
        Writer(a.out, "out", "samples").check()


def split_sources(text: str) -> list:
    """A --source given to a conditional command ('a|b') -> its sources; one line when it is not
    UTF-8 or names no text ('' or '|||': nothing to condition on)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the shell passed on undecoded
        raise ValueError("--source is not UTF-8 text: give it in UTF-8") from None
    sources = [x for x in text.split("|") if x]
    if not sources:
        raise ValueError(f"--source '{text}' names no text: give the text to condition on ('a|b')")
    return sources


def check_sources(encoder, sources, cap: int):
    """A source that encodes to nothing, or to more than the run's source budget (max_input_length,
    framing included), is refused with one line: sampling would drop its end unseen."""
    special = set(encoder.tokenizer.all_special_ids)
    for i, ids in enumerate(tokenize_pairs(sources, encoder, True)):
        words = [t for t in ids if t not in special]
        if not words:
            raise ValueError(f"--source {i + 1} ('{sources[i][:40]}') holds no tokens")
        if len(ids) > cap:
            raise ValueError(
                f"--source {i + 1} is {len(ids)} tokens with its framing, more than "
                f"the run's max_input_length {cap}: shorten it"
            )


def main(argv):
    a = parse(argv, SampleConfig, "sample.py")
    check(a)
    if not a.ckpt:
        raise ValueError("give --ckpt: a checkpoint folder (train.py out_dir)")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not (a.out and not a.source):
        raise ValueError(
            "under torchrun give --out DIR, where the ranks write their chunks "
            "(unconditional sampling; --source runs in one process)"
        )
    with distributed(a.device) as (rank, world, device):
        # one writer of a sampling run's folder: rank 0 holds its lock (every rank writes chunks)
        with Writer(a.out, "out", "samples") if a.out and rank == 0 else contextlib.nullcontext():
            return run(a, rank, world, device)


def run(a: SampleConfig, rank: int, world: int, device: str):
    """Sample as `a` says: this rank's share of the chunks when a.out is given, else all n here."""
    model, encoder, meta = load_sampler(a.ckpt, device)
    length = a.length or meta["train"]["max_length"]
    conditional = bool(meta["train"].get("max_input_length"))
    preset = (
        a.preset or meta["train"].get("sample_preset") or ("cond64" if conditional else "uncond32")
    )
    keys = ("steps", "sampler", "gamma", "sc_cfg", "guidance", "grid")  # the flags that override
    s = sampler_settings(
        preset, **{k: getattr(a, k) for k in keys if getattr(a, k) not in (None, "")}
    )
    sources = [x for x in a.source.split("|") if x]
    if conditional != bool(sources):
        raise ValueError(
            "--source goes with a conditional checkpoint"
            if sources
            else "this checkpoint is conditional: give --source TEXT"
        )
    cap = meta["train"].get("max_input_length", 0)  # the run's own max_length is past it
    if conditional and length <= cap:
        raise ValueError(
            f"length {length} leaves no room for a target after the source's "
            f"max_input_length {cap}: give --length > {cap}"
        )
    if conditional:
        check_sources(encoder, sources, cap)
        res = generate_conditional(
            model,
            encoder,
            sources,
            length,
            meta["train"]["max_input_length"],
            seed=a.seed,
            flow=FlowConfig(**meta["flow"]),
            batch_size=a.batch_size,
            preset=preset,
            **s,
        )
        for src, r in zip(sources, res):
            print(f"--- source (NFE {r['nfe']}): {src}\n{r['text']}")
        return res
    spans = []
    for sp in (x for x in a.span.split("|") if x):
        pos, _, text = sp.partition(":")
        if not pos.isdigit() or not text:
            raise ValueError(f"span expects POS:TEXT, got '{sp}'")
        spans.append((int(pos), text))
    kw = dict(
        length=length,
        seed=a.seed,
        prefix=a.prefix,
        suffix=a.suffix,
        spans=spans,
        trajectory=a.trajectory,
        churn=a.churn,
        **s,
    )
    draw = lambda indices: generate(
        model,
        encoder,
        indices=indices,
        batch_size=a.batch_size,
        flow=FlowConfig(**meta["flow"]),
        preset=preset,
        **kw,
    )
    if a.out:
        # every setting that changes a sample (CPU and CUDA round differently; the weights are named
        # by their hash, in the provenance, which rank 0 alone needs: it alone checks a run folder)
        settings = dict(
            preset=preset, device=torch.device(device).type, batch_size=a.batch_size, **kw
        )
        prov = provenance(a.ckpt) if rank == 0 else {}
        res = shards.run(a.out, settings, prov, a.n, a.batch_size, draw, rank, world, a.progress)
    else:  # one process: the same batches, drawn here
        res = generate(
            model,
            encoder,
            indices=list(range(a.n)),
            batch_size=a.batch_size,
            flow=FlowConfig(**meta["flow"]),
            preset=preset,
            progress=a.progress,
            **kw,
        )
    if rank == 0:
        for r in res[:8] if a.out else res:  # a run folder may hold thousands: the first few
            print(f"--- sample {r['index']} (seed {r['seed']}, NFE {r['nfe']})")
            for i, step_text in enumerate(r.get("trajectory", [])):
                print(f"  step {i + 1}: {step_text}")
            print(r["text"])
    return res


if __name__ == "__main__":
    cli(main)
