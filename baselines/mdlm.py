"""A masked diffusion baseline (MDLM, Sahoo et al. 2024): the discrete-diffusion family that
the paper compares ELF with (arXiv 2605.10938, Table 1 and Figure 1), on ELF's data,
tokenizer, rows and trunk, trained and sampled at equal compute (METHOD.md, "Baselines").

    python -m baselines.mdlm configs/mdlm_tiny.py                       # configs/tiny.py's baseline
    python -m baselines.mdlm --ckpt out/mdlm_tiny --sample_steps 32,64  # sample a trained one again
    python -m baselines.mdlm configs/mdlm_de_en_tiny.py   # conditional: held-out BLEU in heldout/
    python -m baselines.mdlm --help                                     # every key and its default

Absorbing-state diffusion with the log-linear schedule alpha_t = 1 - t (t = 0 data, t = 1 all
[MASK]: the opposite of flow.py's convention), the SUBS parameterisation ([MASK] is never
predicted, unmasked positions are copied through) and the continuous-time NELBO

    L = E_t [ 1/t * sum over masked positions of -log x_theta(z_t)[x] ]

over the batch's loss positions (conditional rows: the target's; the source is never masked
and held by the sampler), with low-discrepancy times. The network: ELF-tiny's blocks over a
token embedding, no time input. Sampling is ancestral on a uniform grid, each reveal drawn in
float64, a row calling the network only when it changed (NFE counts those calls). Samples:
`evaluate.py --samples out/mdlm_tiny/samples-16steps.jsonl --ckpt out/tiny --judge J`.
"""

import dataclasses
import json
import os
import re
import sys
import time
import types
from dataclasses import dataclass
from typing import Annotated, Optional

import numpy as np
import torch

from baselines.mdlm_model import MDLM, MDLMModelConfig, generate, generate_conditional, mdlm_loss
from conditional import layout
from encoder import Tokenizer
from lib import checkpoint
from lib.config import (
    MAX_SAMPLES,
    check_input_length,
    comma_list,
    parse,
    resolve_device,
    snapshot_minutes,
)
from lib.data import batch_indices, load_token_rows, noise_seed
from lib.floors import PAIR_SPLITS
from lib.guard import Writer, cli, interrupted, what_is
from lib.heldout import score_baseline
from lib.optim import (
    Finite,
    autocast,
    ema_decay,
    ema_update,
    flush_denormals,
    make_optimizer,
    scaled_lr,
    set_lr,
    warmup_lr,
)
from lib.outputs import Log, Progress, atomic_write_text, check_folder
from lib.pairs import load_pair_rows
from lib.store import train_vocab
from sample import check_sources, split_sources


@dataclass
class MDLMConfig:
    """Train (or, with --ckpt, sample) the masked diffusion baseline.
    Defaults: configs/tiny.py's data and trunk."""

    # I/O
    out_dir: str = "out/mdlm_tiny"  # checkpoints, metrics.jsonl and samples-<K>steps.jsonl
    ckpt: str = ""  # an MDLM checkpoint: sample it into out_dir, no training
    # with --ckpt, conditional: translate these ('a|b'), print (unset: sample into out_dir)
    source: Optional[str] = None
    # conditional: the held-out pairs scored, 'all' or lib/floors.py's 'dev', 'test' (no pair
    # near a training pair) or 'near'
    split: Annotated[str, PAIR_SPLITS] = "all"
    # 'scratch' (no checkpoint in out_dir) or 'resume' (from it)
    init_from: Annotated[str, ("scratch", "resume")] = "scratch"
    overwrite: bool = False  # init_from=scratch: delete out_dir's checkpoints
    allow_changes: str = ""  # resume: comma-separated keys that may change
    # steps between train-loss lines in metrics.jsonl
    log_interval: Annotated[int, "at_least_1"] = 10
    # steps between validation NELBOs (EMA weights, fixed noise)
    eval_interval: Annotated[int, "at_least_1"] = 100
    eval_batches: Annotated[int, "at_least_1"] = 4  # validation rows = eval_batches * batch_size
    ckpt_interval: Annotated[int, "at_least_1"] = 100
    keep_checkpoints: Annotated[int, "at_least_1"] = 2
    snapshot_minutes: str = ""  # e.g. '10,20,40': also save out_dir/at-<m>min then
    # per seed and step count, at the end; conditional: pairs
    n_samples: Annotated[int, "non_negative"] = 64
    sample_seeds: str = "0,1,2"  # a set of n_samples per seed (evaluate.py: mean and s.e.)
    sample_steps: str = "4,8,16"  # K, a comma list: one samples-<K>steps.jsonl each
    # 'prob': each mask w.p. (t-s)/t (MDLM); 'count': round(#masks (t-s)/t)
    reveal: Annotated[str, ("prob", "count")] = "prob"
    hold_first: bool = True  # hold position 0 at a first token all rows share ([CLS])
    sample_batch: Annotated[int, "at_least_1"] = 64  # rows sampled at once
    # data (lib/data.py): the same rows as configs/tiny.py
    dataset: str = "wiki_descriptions"
    text_column: str = "text"
    val_size: Annotated[int, "non_negative"] = 500
    max_length: Annotated[int, "at_least_1"] = 16
    packing: bool = False
    # 'eos': EOS padding in the loss (learns where a text ends)
    pad_token: Annotated[str, ("pad", "eos")] = "eos"
    framing: bool = True  # [CLS] ... [SEP] around each document
    max_input_length: int = 0  # > 0: conditional [source ; target] rows, the source held
    dataset_config: str = ""  # conditional: the pair data set's table (lib/pairs.py)
    val_split: str = ""
    source_column: str = ""
    target_column: str = ""
    cache_dir: str = "~/.cache/elf-torch"
    encoder: str = "minilm"  # whose tokenizer (only the tokenizer is loaded)
    # 'full': tokenizer's V; 'train': the rows' ids and [MASK]
    token_vocab: Annotated[str, ("full", "train")] = "full"
    # network: ELF-tiny's trunk
    depth: Annotated[int, "at_least_1"] = 4
    hidden: Annotated[int, "at_least_1"] = 256
    heads: Annotated[int, "at_least_1"] = 4
    rope_theta: Annotated[float, "positive"] = 10000.0
    # objective and optimisation (lib/optim.py)
    # training times in [t_min, 1]: the 1/t weight stays finite
    t_min: Annotated[float, "fraction"] = 1e-3
    optimizer: Annotated[str, ("adamw", "muon")] = "adamw"  # 'adamw' or 'muon' (muon.py)
    muon_params: Annotated[str, ("all", "blocks")] = "all"
    batch_size: Annotated[int, "at_least_1"] = 128
    blr: Annotated[float, "positive"] = 2e-3  # lr = blr * batch_size / 256
    warmup_steps: Annotated[int, "non_negative"] = 30
    # after warmup: 'constant' or 'cosine' (lr/10 at max_steps)
    lr_schedule: Annotated[str, ("constant", "cosine")] = "constant"
    max_steps: Annotated[int, "at_least_1"] = 1_000_000
    # > 0: stop after this many minutes of training
    time_limit_min: Annotated[float, "non_negative"] = 10.0
    grad_clip: Annotated[float, "positive"] = 1.0
    ema_decay: Annotated[float, "fraction"] = 0.999
    ema_warmup: bool = True  # decay_k = min(decay, (1 + k) / (10 + k))
    seed: int = 0
    device: str = "auto"  # 'auto', 'cpu', 'cuda', 'cuda:1', ...


# keys a resumed run may change: they do not touch what the next steps compute
FREE_ON_RESUME = {
    "split",
    "out_dir",
    "ckpt",
    "source",
    "init_from",
    "overwrite",
    "allow_changes",
    "log_interval",
    "eval_interval",
    "eval_batches",
    "ckpt_interval",
    "keep_checkpoints",
    "snapshot_minutes",
    "n_samples",
    "sample_seeds",
    "sample_steps",
    "reveal",
    "sample_batch",
    "max_steps",
    "time_limit_min",
    "device",
    "cache_dir",
}


# ----------------------------------------------------------------------------------------
# data, checkpoints


def batch(rows, idx, hold: bool, device):
    """-> (tokens (B, L), loss positions (B, L) bool): the data's loss mask (EOS padding in it),
    without a held position 0, or without the source of a conditional row."""
    r = rows.select(idx)
    tokens = r.ids.to(device)
    pos = torch.arange(tokens.shape[1], device=device)[None, :]
    loss_pos = (
        torch.ones_like(tokens, dtype=torch.bool)
        if r.pad_in_loss
        else pos < r.length.to(device)[:, None]
    )
    if r.cond_len is not None:  # the source: never masked (corrupt), never in the loss
        loss_pos &= pos >= r.cond_len.to(device)[:, None]
    return tokens, (loss_pos & (pos > 0) if hold else loss_pos)


def common_first(rows, enabled: bool):
    """The token all training rows start with ([CLS] under framing, unpacked), or None (the first
    4096 rows checked: the store's documents all pass through the same tokenizer)."""
    first = set(rows.select(slice(0, 4096)).ids[:, 0].tolist())
    return first.pop() if enabled and len(first) == 1 else None


def load(ckpt: str, device="cpu"):
    """(EMA model in eval mode, meta) from an MDLM checkpoint folder."""
    folder = checkpoint.find(ckpt, warn=lambda m: print(m, file=sys.stderr))
    if folder is None:
        raise FileNotFoundError(f"no checkpoint at {ckpt}{what_is(ckpt)}")
    meta = checkpoint.read_meta(folder)
    if meta.get("kind") != "mdlm":
        raise ValueError(f"{ckpt} is not an MDLM checkpoint (an ELF one? sample it with sample.py)")
    model = MDLM(MDLMModelConfig(**meta["model"])).to(device)
    model.load_state_dict(checkpoint.load_state(folder, "ema", device))
    return model.eval(), meta


def samples_file(cfg: MDLMConfig, steps: int) -> str:
    return os.path.join(
        cfg.out_dir, f"samples-{steps}steps{'-count' if cfg.reveal == 'count' else ''}.jsonl"
    )


def keep_other_samples(cfg: MDLMConfig, ckpt):
    """Writing samples into out_dir (sampling checkpoint `ckpt`, or a fresh run: None) replaces
    samples files there only when they are this checkpoint's (samples.json names the weights
    of them all) or when asked to (--overwrite)."""
    there = sorted(
        f
        for f in (os.listdir(cfg.out_dir) if os.path.isdir(cfg.out_dir) else [])
        if re.fullmatch(r"samples-\d+steps(-count)?\.jsonl|heldout", f)
    )
    if not there or cfg.overwrite:
        return
    try:
        with open(os.path.join(cfg.out_dir, "samples.json")) as f:
            old = json.load(f)["provenance"].get("ckpt_sha256")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        old = None
    new = checkpoint.provenance(ckpt)["ckpt_sha256"] if ckpt else "a new run's"
    if old != new:
        latest = None if ckpt else checkpoint.read_latest(cfg.out_dir)  # a fresh run over a run
        also = (
            f" and a run's checkpoint ({latest}), which --overwrite deletes too "
            f"(--init_from resume continues that run)"
            if latest
            else ""
        )
        raise ValueError(
            f"out_dir {cfg.out_dir} holds {', '.join(there)} of other weights (sha256 "
            f"{str(old)[:12]} there, {new[:12]} here){also}: --overwrite replaces them, "
            f"or give another --out_dir"
        )


def write_samples(cfg: MDLMConfig, model, tokenizer, meta: dict, ckpt: str):
    """samples-<K>steps[-count].jsonl in out_dir for each K of sample_steps, n_samples per seed
    (conditional: heldout/, held-out scoring as evaluate.py's), and once, samples.json: the
    settings and the provenance (commit, the weights' sha256)."""
    settings = {
        k: getattr(cfg, k)
        for k in ("n_samples", "sample_seeds", "sample_steps", "reveal", "sample_batch")
    }
    atomic_write_text(
        os.path.join(cfg.out_dir, "samples.json"),
        json.dumps({"settings": settings, "provenance": checkpoint.provenance(ckpt)}, indent=2),
    )
    tcfg = types.SimpleNamespace(
        **{**dataclasses.asdict(MDLMConfig()), **meta["train"], "cache_dir": cfg.cache_dir}
    )
    if tcfg.max_input_length:
        return write_heldout(cfg, model, tokenizer, tcfg, ckpt)
    length, first = tcfg.max_length, meta["hold_first"]
    for steps in comma_list("sample_steps", cfg.sample_steps):
        t0 = time.time()
        recs = [
            r
            for seed in comma_list("sample_seeds", cfg.sample_seeds)
            for r in generate(
                model,
                tokenizer,
                cfg.n_samples,
                length,
                steps,
                seed,
                cfg.reveal,
                first,
                cfg.sample_batch,
            )
        ]
        path = samples_file(cfg, steps)
        os.makedirs(cfg.out_dir, exist_ok=True)
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in recs))
        print(
            f"--- {steps} steps ({cfg.reveal}): "
            f"mean NFE {np.mean([r['nfe'] for r in recs]):.1f}, "
            f"{time.time() - t0:.1f}s -> {path}"
        )
        for r in recs[:4]:
            print(r["text"])


# ----------------------------------------------------------------------------------------
# training


def write_heldout(cfg: MDLMConfig, model, tokenizer, tcfg, ckpt: str):
    """A conditional run's first n_samples held-out pairs translated at each K of sample_steps
    and each seed, scored as evaluate.py scores conditional ELF (lib/heldout.py):
    out_dir/heldout/ hypotheses.jsonl, report.json, report.md."""
    seeds = comma_list("sample_seeds", cfg.sample_seeds)
    settings = [
        ({"name": f"MDLM {steps} steps ({cfg.reveal})", "steps": steps}, seeds, steps)
        for steps in comma_list("sample_steps", cfg.sample_steps)
    ]
    draw = lambda rows, cap, steps, seed: generate_conditional(
        model, tokenizer, rows, steps, cap, seed, cfg.reveal, cfg.sample_batch
    )
    return score_baseline(
        tcfg,
        cfg.n_samples,
        tokenizer,
        settings,
        draw,
        cfg.out_dir,
        seeds,
        split=cfg.split,
        ckpt=ckpt,
        system="MDLM",
        **checkpoint.provenance(ckpt),
    )


@torch.no_grad()
def validate(model, val, cfg: MDLMConfig, hold: bool, device):
    """The NELBO per token of held-out rows, with fixed times and masks (seed 1234)."""
    model.eval()
    gen = torch.Generator(device).manual_seed(1234)
    n, total, count = min(len(val), cfg.eval_batches * cfg.batch_size), 0.0, 0
    for i in range(0, n, cfg.batch_size):
        tokens, loss_pos = batch(val, np.arange(i, min(n, i + cfg.batch_size)), hold, device)
        tokens = model.vocab_index(tokens)
        total += mdlm_loss(model, tokens, loss_pos, gen, cfg.t_min).item() * loss_pos.sum().item()
        count += loss_pos.sum().item()
    model.train()
    return {"val_nelbo": total / max(1, count)}


def build(cfg: MDLMConfig, tokenizer, train_rows, device: str):
    """(model, EMA, model config): the network over the tokenizer's ids, or over the ids the
    training rows hold (token_vocab='train': the unknown token first, [MASK] last)."""
    tok, vocab_ids = tokenizer.tokenizer, None
    if cfg.token_vocab == "train":  # the ids training shows, [MASK] last
        unk = tok.unk_token_id if tok.unk_token_id is not None else tokenizer.eos_id
        kept = train_vocab(train_rows, unk)
        vocab_ids = torch.cat((kept[kept != tok.mask_token_id], torch.tensor([tok.mask_token_id])))
    cut = 0 if vocab_ids is None else len(vocab_ids)
    mcfg = MDLMModelConfig(
        vocab_size=len(tok),
        cut_vocab=cut,
        mask_id=cut - 1 if cut else tok.mask_token_id,
        hidden=cfg.hidden,
        depth=cfg.depth,
        heads=cfg.heads,
        max_seq_len=cfg.max_length,
        rope_theta=cfg.rope_theta,
    )
    model = MDLM(mcfg).to(device)
    if vocab_ids is not None:
        model.vocab_ids.copy_(vocab_ids)
    ema = MDLM(mcfg).to(device).requires_grad_(False)
    ema.load_state_dict(model.state_dict())
    head = model.embed.weight.numel() + model.head.weight.numel()
    over = "" if vocab_ids is None else f", over {len(vocab_ids)} of the {len(tok)} token ids"
    print(
        f"mdlm: {model.num_params() / 1e6:.2f}M parameters ({head / 1e6:.2f}M of them the "
        f"embedding and the head{over})"
    )
    return model, ema, mcfg


def train(cfg: MDLMConfig, device: str):
    """Train from scratch or resume; checkpoints, snapshots, metrics.jsonl; samples at the end."""
    if cfg.init_from != "resume" and cfg.n_samples > 0:  # its samples would replace others'
        keep_other_samples(cfg, None)
    checkpoint.prepare(
        cfg.out_dir,
        cfg.init_from == "resume",
        cfg.overwrite,
        dataclasses.asdict(cfg),
        FREE_ON_RESUME,
        cfg.allow_changes,
    )
    print(f"config: {json.dumps(dataclasses.asdict(cfg))}")
    flush_denormals()  # on a CPU, as train.py (lib/optim.py)
    torch.manual_seed(cfg.seed)
    tokenizer = Tokenizer(cfg.encoder)
    if tokenizer.tokenizer.mask_token_id is None or tokenizer.eos_id is None:
        raise ValueError(
            f"encoder '{cfg.encoder}': MDLM needs a tokenizer with a [MASK] "
            f"and an EOS (or SEP) token"
        )
    # ELF's rows: the same store and layout (conditional: train.py's [source ; target] rows)
    train_rows, val_rows = (load_pair_rows if cfg.max_input_length else load_token_rows)(
        cfg, tokenizer
    )
    first = common_first(train_rows, cfg.hold_first and not cfg.max_input_length)
    held = (
        "the source held"
        if cfg.max_input_length
        else f"position 0 {'held at id %d' % first if first is not None else 'sampled'}"
    )
    print(
        f"data: {len(train_rows)} train rows, {len(val_rows)} val rows of {cfg.max_length} "
        f"tokens; {held}"
    )
    model, ema, mcfg = build(cfg, tokenizer, train_rows, device)
    vocab_ids = None if model.vocab_ids is None else model.vocab_ids.clone()
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    opt = make_optimizer(model, cfg.optimizer, cfg.muon_params, lr)
    step, minutes = 0, 0.0
    if cfg.init_from == "resume":
        saved = checkpoint.resume(cfg.out_dir, model, ema, opt, dataclasses.asdict(mcfg))
        if vocab_ids is not None and not torch.equal(model.vocab_ids, vocab_ids):
            raise ValueError(
                f"the training rows hold other token ids than the ones {cfg.out_dir} "
                f"was started with (token_vocab=train): resume it on the same data"
            )
        step, minutes = saved["step"], saved.get("train_minutes", 0.0)
        print(f"resumed from {cfg.out_dir} at step {step}")
    meta = {
        "kind": "mdlm",
        "train": dataclasses.asdict(cfg),
        "model": dataclasses.asdict(mcfg),
        "hold_first": first,
    }
    loop(cfg, model, ema, opt, step, minutes, meta, train_rows, val_rows, device)
    if cfg.n_samples > 0:
        write_samples(cfg, ema.eval(), tokenizer, meta, cfg.out_dir)
    return model


def loop(
    cfg: MDLMConfig,
    model,
    ema,
    opt,
    step: int,
    minutes: float,
    meta: dict,
    train_rows,
    val_rows,
    device: str,
) -> int:
    """The training loop (train.py's, for MDLM): warmup, step, clip, EMA; the non-finite stop
    before anything is logged or saved; validation, checkpoints, snapshots. Returns the step."""
    lr = scaled_lr(cfg.blr, cfg.batch_size)
    t_start = time.time() - 60 * minutes  # a resumed run's clock goes on
    log = Log(cfg, 0, kept=checkpoint.kept)  # metrics.jsonl
    log.t0, record = t_start, log.record
    amp = autocast(device, "auto")  # bf16 on CUDA, float32 on a CPU
    snapshots = [m for m in snapshot_minutes(cfg) if m > minutes]
    hold = meta["hold_first"] is not None
    cause = (
        f"a learning rate too high (lr {lr:g} = blr {cfg.blr:g} x batch_size "
        f"{cfg.batch_size} / 256): lower --blr or raise --warmup_steps"
    )
    with amp:
        record(step=step, **validate(ema, val_rows, cfg, hold, device))
    bar = Progress(cfg.max_steps, step, cfg.time_limit_min)  # counts to the time limit
    done, finite = step >= cfg.max_steps, Finite(device)  # nan / inf: stop before a save
    try:
        while not done:
            set_lr(opt, warmup_lr(lr, step, cfg.warmup_steps, cfg.lr_schedule, cfg.max_steps))
            tokens, loss_pos = batch(
                train_rows,
                batch_indices(step, cfg.batch_size, len(train_rows), cfg.seed),
                hold,
                device,
            )
            tokens = model.vocab_index(tokens)
            # times and masks are a function of (seed, step), as train.py's noise: resume is exact
            gen = torch.Generator(device).manual_seed(noise_seed(cfg.seed, step))
            with amp:
                loss = mdlm_loss(model, tokens, loss_pos, gen, cfg.t_min)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            step += 1
            finite.update(step, loss.detach(), grad_norm)
            ema_update(ema, model, ema_decay(cfg.ema_decay, step, cfg.ema_warmup))
            minutes = (time.time() - t_start) / 60
            done = step >= cfg.max_steps or 0 < cfg.time_limit_min < minutes
            bar.update(step, minutes)
            log_now = step % cfg.log_interval == 0 or done
            eval_now = step % cfg.eval_interval == 0 or done
            save_now = step % cfg.ckpt_interval == 0 or done
            if log_now or eval_now or save_now or (snapshots and minutes >= snapshots[0]):
                finite.check(lambda: cause, lambda: checkpoint.kept(cfg.out_dir))
            if log_now:
                record(
                    step=step,
                    tokens=step * cfg.batch_size * cfg.max_length,
                    lr=opt.param_groups[0]["lr"],
                    loss=loss.item(),
                )
                bar.set_postfix({"loss": f"{loss.item():.3f}"})
            if eval_now:
                with amp:
                    scores = validate(ema, val_rows, cfg, hold, device)
                record(step=step, **scores)
                bar.write(f"step {step}: val nelbo {scores['val_nelbo']:.4f}")
            # a snapshot before the checkpoint: one interrupted is taken again on resume
            while snapshots and minutes >= snapshots[0]:  # weights only: a quality-vs-tokens curve
                checkpoint.save(
                    os.path.join(cfg.out_dir, f"at-{snapshots[0]:g}min"),
                    model,
                    ema,
                    None,
                    step,
                    dict(meta, train_minutes=minutes),
                    keep=1,
                )
                snapshots.pop(0)
            if save_now:
                checkpoint.save(
                    cfg.out_dir,
                    model,
                    ema,
                    opt,
                    step,
                    dict(meta, train_minutes=minutes),
                    cfg.keep_checkpoints,
                )
    except KeyboardInterrupt:  # Ctrl-C: one line, the checkpoint intact
        raise interrupted(step, checkpoint.kept(cfg.out_dir)) from None
    bar.close()
    print(f"trained {step} steps in {(time.time() - t_start) / 60:.1f} min")
    return step


def parse_config(argv) -> MDLMConfig:
    """[config.py] [--key value ...] -> MDLMConfig, with the checks that need several keys."""
    cfg = parse(argv, MDLMConfig, "-m baselines.mdlm")
    comma_list("sample_seeds", cfg.sample_seeds)
    if cfg.n_samples > MAX_SAMPLES:  # held in memory: refused before training, not after
        raise ValueError(f"n_samples must be at most {MAX_SAMPLES:,}, got {cfg.n_samples:,}")
    if min(comma_list("sample_steps", cfg.sample_steps)) < 1:
        raise ValueError(f"sample_steps must be >= 1, got '{cfg.sample_steps}'")
    snapshot_minutes(cfg)  # '10,20,40', as train.py's
    check_input_length(cfg)  # 0 < max_input_length < max_length
    check_folder(os.path.expanduser(cfg.cache_dir), "cache_dir")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ValueError(f"unknown device '{cfg.device}' (choose from auto, cpu, cuda, cuda:N)")
    return cfg


def main(argv):
    cfg = parse_config(argv)
    device = resolve_device(cfg.device)
    with Writer(cfg.out_dir, "out_dir", "mdlm"):  # one writer of the run's folder
        if not cfg.ckpt:
            return train(cfg, device)
        model, meta = load(cfg.ckpt, device)  # sample only: the run's length and framing
        tokenizer = Tokenizer(meta["train"]["encoder"])
        if cfg.source is not None:  # conditional: print, write nothing
            return translate(cfg, model, tokenizer, meta["train"])
        keep_other_samples(cfg, cfg.ckpt)
        write_samples(cfg, model, tokenizer, meta, cfg.ckpt)
        return model


def translate(cfg: MDLMConfig, model, tokenizer, tcfg: dict):
    """--source 'a|b' with a conditional checkpoint: each source's target at the largest K of
    sample_steps, the first seed, printed (sample.py's checks: an empty source is refused)."""
    cap = tcfg.get("max_input_length", 0)
    if not cap:
        raise ValueError("--source goes with a conditional checkpoint (max_input_length > 0)")
    sources = split_sources(cfg.source)
    check_sources(tokenizer, sources, cap)
    rows = layout([(s, []) for s in sources], tokenizer, tcfg["max_length"], cap)
    res = generate_conditional(
        model,
        tokenizer,
        rows,
        max(comma_list("sample_steps", cfg.sample_steps)),
        tcfg["max_length"] - cap,
        comma_list("sample_seeds", cfg.sample_seeds)[0],
        cfg.reveal,
        cfg.sample_batch,
    )
    for src, r in zip(sources, res):
        print(f"--- source (NFE {r['nfe']}): {src}\n{r['text']}")
    return res


if __name__ == "__main__":
    cli(main)
