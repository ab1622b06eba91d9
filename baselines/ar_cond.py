"""The conditional autoregressive baseline: the repository's GPT-2 (baselines/ar.py's, Hugging
Face's classes) trained on conditional ELF's rows, `[source + EOS ; target + EOS]` padded with
EOS (lib/pairs.py load_pair_rows: the same data, tokenizer, max_length and max_input_length as
configs/de_en_tiny.py), with the loss on the target positions only; it decodes the target after
the source greedily and by sampling at temperature 1 (METHOD.md, "Baselines").

    python -m baselines.ar_cond configs/ar_de_en_tiny.py          # train, then score held-out pairs
    python -m baselines.ar_cond --ckpt out/ar_de_en_tiny --source "Wir haben zwei Kinder."
    python -m baselines.ar_cond --help                            # every key and its default

Early stopping (keep_best, on by default): every ckpt_interval steps the loss on the text of the
dev split's held-out targets (their words and EOS, not the padding; lib/floors.py's split, so
the test split is never read) is logged in train_log.json, and the weights that score lowest are
kept in out_dir/best, a checkpoint folder of its own: `--ckpt out_dir/best` scores them beside
the last weights. snapshot_minutes='10,20' also keeps out_dir/at-<m>min (and at-<m>min-best,
the best weights as they stood then): a score-against-minutes curve from one run.

Held-out scoring is evaluate.py's for conditional ELF (lib/heldout.py): the first n_samples
held-out pairs, BLEU, ROUGE-1/2/L and entropy, written to out_dir/heldout/ (hypotheses.jsonl,
report.json, report.md). A step's rows are `data.batch_indices(step)` and its dropout is seeded
by `data.noise_seed(seed, step)`, so `--init_from resume` continues a run exactly. With
token_vocab='train' (as ELF's and MDLM's) the embedding and the output layer span only the ids
the training rows hold (the unknown token first, standing for any other id). One process, one
device: a small baseline. (baselines/ar.py, the unconditional baseline and the judge, is a
separate command: its packed rows, judge tokenizer and sample loop are not this one's.)

A run's checkpoints are step folders, saved by lib/checkpoint.save_step as ELF's and MDLM's are:
out_dir/step-<step>/ holds the weights (save_pretrained: config.json, model.safetensors),
optim.pt (optimiser and step) and train.json (config, step, minutes), each listed with its
sha256 in manifest.json; `latest` names the newest and the newest KEEP are kept, so a kill at
any instant leaves a complete one, and a damaged newest one is skipped for the one before. A
run saved before step folders (a `ckpt` link to ckpt-<step>/, or a plain ckpt/ folder) still
loads and resumes; its first save in step folders replaces that layout.
"""

import dataclasses
import json
import math
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Annotated, Optional

import torch

from conditional import layout
from encoder import Tokenizer
from lib import checkpoint
from lib.config import check_input_length, comma_list, parse, snapshot_minutes
from lib.data import batch_indices, noise_seed
from lib.floors import PAIR_SPLITS
from lib.guard import KINDS, Writer, cli, interrupted, kind_of
from lib.heldout import score_baseline, split_indices
from lib.optim import flush_denormals
from lib.outputs import Progress, atomic_write_text, first_line, sha256, unreadable
from lib.pairs import load_pair_rows, pair_tables
from lib.store import train_vocab
from model import vocab_index
from sample import check_sources, split_sources


@dataclass
class ARCondConfig:
    """Train (or, with --ckpt, decode) the conditional GPT-2 baseline."""

    out_dir: str = "out/ar_de_en_tiny"  # step-N/ (weights, optimiser), train_log.json, heldout/
    ckpt: str = ""  # a trained out_dir: decode it, no training
    # with --ckpt: translate these ('a|b') and print (unset: score the held-out pairs)
    source: Optional[str] = None
    # conditional: the held-out pairs scored, 'all' or lib/floors.py's 'dev', 'test' (no pair
    # near a training pair) or 'near'
    split: Annotated[str, PAIR_SPLITS] = "all"
    # 'scratch' (nothing in out_dir) or 'resume'
    init_from: Annotated[str, ("scratch", "resume")] = "scratch"
    overwrite: bool = False  # scratch: replace what out_dir holds
    # data (lib/pairs.py load_pair_rows): configs/de_en_tiny.py's
    dataset: str = "auf_deutsch"
    val_size: Annotated[int, "non_negative"] = 500
    dataset_config: str = ""
    val_split: str = ""
    source_column: str = ""
    target_column: str = ""
    encoder: str = "minilm"  # whose tokenizer
    cache_dir: str = "~/.cache/elf-torch"
    max_length: Annotated[int, "at_least_1"] = 40
    max_input_length: int = 24  # 0 < max_input_length < max_length
    # 'full': the tokenizer's ids; 'train': the rows' ids
    token_vocab: Annotated[str, ("full", "train")] = "train"
    # the network: ELF-tiny's width and depth
    n_layer: Annotated[int, "at_least_1"] = 4
    n_embd: Annotated[int, "at_least_1"] = 256
    n_head: Annotated[int, "at_least_1"] = 4
    # optimisation: AdamW, linear warmup, then constant (baselines/ar.py's)
    batch_size: Annotated[int, "at_least_1"] = 64
    lr: Annotated[float, "positive"] = 1e-3
    warmup_steps: Annotated[int, "non_negative"] = 50
    weight_decay: Annotated[float, "non_negative"] = 0.01
    max_steps: Annotated[int, "at_least_1"] = 100_000
    # > 0: stop after this many training minutes
    time_limit_min: Annotated[float, "non_negative"] = 26.0
    ckpt_interval: Annotated[int, "at_least_1"] = 250
    keep_checkpoints: Annotated[int, "at_least_1"] = 2
    # every ckpt_interval steps the target loss (text and its EOS, no padding) on the held-out
    # pairs of the dev split; the lowest one's weights are kept in out_dir/best (early stopping:
    # score it with --ckpt out_dir/best)
    keep_best: bool = True
    snapshot_minutes: str = ""  # e.g. '10,20,40': also save out_dir/at-<m>min (and -best) then
    seed: int = 0
    # decoding and held-out scoring
    n_samples: Annotated[int, "non_negative"] = 117  # the first n held-out pairs
    decode: str = "greedy,sample"  # greedy (argmax) and/or sample (temperature 1)
    sample_seeds: str = "0,1,2"  # a set per seed (greedy: one set, the first seed's)
    sample_batch: Annotated[int, "at_least_1"] = 64
    kv_cache: bool = True  # cached keys, values (false: re-read the prefix each token)
    threads: Annotated[int, "non_negative"] = 0  # torch threads (0: torch's default)


# keys a resumed run may change: they do not touch what the next steps compute
FREE_ON_RESUME = {
    "split",
    "out_dir",
    "ckpt",
    "source",
    "init_from",
    "overwrite",
    "max_steps",
    "time_limit_min",
    "ckpt_interval",
    "keep_checkpoints",
    "keep_best",
    "snapshot_minutes",
    "n_samples",
    "decode",
    "sample_seeds",
    "sample_batch",
    "threads",
    "cache_dir",
    "kv_cache",
}


# ----------------------------------------------------------------------------------------
# the model and its checkpoint


def build(cfg: ARCondConfig, tokenizer, train_rows):
    """A GPT-2 over the tokenizer's ids or (token_vocab='train') the training rows' ids."""
    from transformers import GPT2Config, GPT2LMHeadModel  # deferred: heavy

    tok, vocab_ids = tokenizer.tokenizer, None
    if cfg.token_vocab == "train":
        vocab_ids = train_vocab(
            train_rows, tok.unk_token_id if tok.unk_token_id is not None else tokenizer.eos_id
        )
    eos = int(vocab_index(vocab_ids, torch.tensor(tokenizer.eos_id), len(tok)))
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tok) if vocab_ids is None else len(vocab_ids),
            n_positions=cfg.max_length,
            n_embd=cfg.n_embd,
            n_layer=cfg.n_layer,
            n_head=cfg.n_head,
            bos_token_id=eos,
            eos_token_id=eos,
        )
    )
    model.config.vocab_ids = None if vocab_ids is None else vocab_ids.tolist()
    return model


def save(cfg: ARCondConfig, model, opt, step: int, minutes: float, to: str = "", **extra):
    """out_dir/step-<step>/ (or `to`/step-<step>/, one kept: the best weights, a snapshot):
    the weights (save_pretrained: config.json, safetensors), the optimiser and step (optim.pt;
    not with opt None) and train.json (config, step, minutes, `extra`), saved as every
    checkpoint of this repository (lib/checkpoint.save_step: a manifest, renamed in whole,
    then `latest`), so that a kill at any instant keeps a complete one. Returns the folder."""

    def write(tmp):
        model.save_pretrained(tmp)
        if opt is not None:
            torch.save({"opt": opt.state_dict(), "step": step}, os.path.join(tmp, "optim.pt"))
        atomic_write_text(os.path.join(tmp, "train.json"), json.dumps(meta, indent=2))

    meta = {"train": dataclasses.asdict(cfg), "step": step, "train_minutes": minutes, **extra}
    if to:
        return checkpoint.save_step(to, step, write, meta, 1)
    folder = checkpoint.save_step(cfg.out_dir, step, write, meta, cfg.keep_checkpoints)
    remove_old_layout(cfg.out_dir)  # a run resumed from one: superseded now
    return folder


# the layout before step folders: a `ckpt` link to the newest ckpt-<step> folder (or a plain
# ckpt/ folder), and what killed saves of that layout left
OLD_LAYOUT = re.compile(r"ckpt(-\d{8})?|\.tmp-ckpt-\d+-\d+")


def old_layout(folder: str):
    """The checkpoint folder of a run saved before step folders: the one its `ckpt` link names
    (or its plain ckpt/ folder), else its newest complete ckpt-<step>; None when there is none."""
    link = os.path.join(folder, "ckpt")
    if os.path.isfile(os.path.join(link, "train.json")):
        return link
    names = os.listdir(folder) if os.path.isdir(folder) else []
    steps = [
        d
        for d in sorted(names, reverse=True)
        if re.fullmatch(r"ckpt-\d{8}", d) and os.path.isfile(os.path.join(folder, d, "train.json"))
    ]
    return os.path.join(folder, steps[0]) if steps else None


def remove_old_layout(folder: str):
    """Delete the folders of the layout before step folders (OLD_LAYOUT), never other names."""
    for d in os.listdir(folder):
        path = os.path.join(folder, d)
        if OLD_LAYOUT.fullmatch(d):
            if os.path.islink(path) or os.path.isfile(path):
                os.remove(path)
            else:
                shutil.rmtree(path, ignore_errors=True)


def saved(folder: str, warn=lambda line: None):
    """The newest complete checkpoint of a run folder (lib/checkpoint.find: the step folder
    `latest` names, or the newest that matches its manifest; or a checkpoint folder named
    directly), else of the layout before step folders (old_layout); None when there is none."""
    found = checkpoint.find(folder, warn=warn, of=("gpt2_cond",))
    if found and os.path.isfile(os.path.join(found, "train.json")):
        return found
    return old_layout(folder)


def kept(folder: str) -> str:
    """The last saved checkpoint of a run folder, in words (the line of a stopped run)."""
    found = saved(folder)
    return f"the last checkpoint, {found}, is kept" if found else "no checkpoint was saved yet"


def ckpt_folder(folder: str, warn=lambda line: None) -> str:
    """The checkpoint folder of a run folder (`saved`), or a one-line error that says why there
    is none: what the folder holds instead, or its damaged step folders."""
    found = saved(folder, warn)
    if found is None:
        kind = kind_of(folder) if os.path.isdir(folder) else None
        damaged = checkpoint.damaged_steps(folder)
        if kind not in (None, "gpt2_cond"):
            why = f": it holds {KINDS.get(kind, kind)}"
        else:
            why = f" that verifies ({'; '.join(damaged)})" if damaged else ""
        raise FileNotFoundError(f"no conditional GPT-2 checkpoint at {folder}{why}")
    return found


def read_meta(folder: str) -> dict:
    """The train.json of a run folder (or of a checkpoint folder): its config, step and minutes."""
    return train_json(ckpt_folder(folder))


def train_json(found: str) -> dict:
    path = os.path.join(found, "train.json")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        meta["train"], meta["step"], meta["train_minutes"]
        return meta
    except (ValueError, KeyError, TypeError) as e:  # not JSON, or not this format's
        raise ValueError(
            f"{path} is not a conditional GPT-2 checkpoint's train.json ({first_line(e)})"
        ) from None


def load(folder: str):
    """(model in eval mode, the train.json) of a run folder or a checkpoint folder; a damaged
    newest step folder is skipped for an older one, with a warning."""
    from transformers import GPT2LMHeadModel

    found = ckpt_folder(folder, warn=lambda line: print(line, file=sys.stderr))
    return GPT2LMHeadModel.from_pretrained(found).eval(), train_json(found)


def vocab_of(model):
    ids = model.config.vocab_ids
    return None if ids is None else torch.tensor(ids)


# ----------------------------------------------------------------------------------------
# training


def target_labels(rows, vocab_ids, vocab_size: int):
    """-> (input ids (B, L), labels (B, L)): the source's positions -100, outside the loss (the
    model reads the source, learns only the target; EOS padding is in the loss, as ELF's)."""
    ids = vocab_index(vocab_ids, rows.ids, vocab_size)
    pos = torch.arange(ids.shape[1])[None, :]
    return ids, ids.masked_fill(pos < rows.cond_len[:, None], -100)


def text_labels(rows, vocab_ids, vocab_size: int):
    """-> (input ids, labels): target_labels' with the EOS padding after the target's own EOS
    out of the loss too: the validation loss of early stopping, on text alone."""
    ids, labels = target_labels(rows, vocab_ids, vocab_size)
    pos = torch.arange(ids.shape[1])[None, :]
    return ids, labels.masked_fill(pos >= rows.length[:, None], -100)


@torch.no_grad()
def val_loss(model, rows, vocab_ids, vocab_size: int, batch_size: int) -> float:
    """The mean target-token loss (text_labels) of held-out rows, the model in eval mode."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(rows), batch_size):
        batch = rows.select(slice(start, start + batch_size))
        ids, labels = text_labels(batch, vocab_ids, vocab_size)
        n = int((labels[:, 1:] != -100).sum())  # the loss is over shifted labels
        total += model(input_ids=ids, labels=labels).loss.item() * n
        count += n
    model.train()
    return total / max(1, count)


class Best:
    """Early stopping's state: the dev split's held-out rows and the lowest validation loss
    so far, whose weights out_dir/best holds (its train.json says which; a resumed run reads it
    back). `rows` is None where the data have no dev pairs (a tiny stand-in): then none is kept."""

    def __init__(self, cfg: ARCondConfig, tokenizer, val_rows):
        self.rows, self.loss, self.folder = None, math.inf, os.path.join(cfg.out_dir, "best")
        if not cfg.keep_best:
            return
        tables = pair_tables(cfg)  # no held-out table: val_rows are a tail of train, no dev
        dev = split_indices(cfg, tokenizer, "dev", tables) if len(tables[1]) else []
        if not dev:
            print("keep_best: the data have no held-out pairs in the dev split; no best kept")
            return
        self.rows = val_rows.select(dev)
        found = checkpoint.find(self.folder, warn=print, of=("gpt2_cond",))
        if cfg.init_from == "resume" and found:
            self.loss = train_json(found).get("val_loss", math.inf)

    def update(self, cfg, model, vocab_size: int, step: int, minutes: float, log: dict):
        """Score the dev rows; keep the weights if they score lowest so far."""
        if self.rows is None:
            return
        loss = val_loss(model, self.rows, vocab_of(model), vocab_size, cfg.batch_size)
        log["val"].append({"step": step, "minutes": minutes, "val_loss": loss})
        if loss < self.loss:
            self.loss = loss
            save(cfg, model, None, step, minutes, to=self.folder, val_loss=loss)


def train(cfg: ARCondConfig):
    """Train from scratch or resume, save, then score the held-out pairs."""
    flush_denormals()  # on a CPU, as train.py (lib/optim.py)
    torch.manual_seed(cfg.seed)
    tokenizer = Tokenizer(cfg.encoder)
    train_rows, val_rows = load_pair_rows(cfg, tokenizer)  # ELF's conditional rows
    model = build(cfg, tokenizer, train_rows)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    step, minutes = 0, 0.0
    if cfg.init_from == "resume":
        folder = ckpt_folder(cfg.out_dir, warn=print)  # weights, optimiser: one folder
        resumed, meta = load(folder)
        changed = sorted(
            k
            for k, v in meta["train"].items()
            if k not in FREE_ON_RESUME and getattr(cfg, k, v) != v
        )
        if changed:
            raise ValueError(
                f"resume changes {', '.join(changed)}: the run would not continue "
                f"exactly; give the saved values"
            )
        if resumed.config.vocab_ids != model.config.vocab_ids:
            raise ValueError(
                f"the training rows hold other token ids than the ones "
                f"{cfg.out_dir} was started with: resume it on the same data"
            )
        model.load_state_dict(resumed.state_dict())
        path = os.path.join(folder, "optim.pt")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            opt.load_state_dict(state["opt"])
        except Exception as e:  # noqa: BLE001 - code (never run), truncated, not a state
            raise ValueError(
                f"{unreadable(path, e)}: it cannot be resumed; start over with --overwrite"
            ) from None
        step, minutes = meta["step"], meta["train_minutes"]
        if step >= cfg.max_steps:
            raise ValueError(
                f"the checkpoint in {cfg.out_dir} is at step {step} and max_steps "
                f"is {cfg.max_steps}: nothing to train"
            )
    model.train()
    vocab_ids, V = vocab_of(model), len(tokenizer.tokenizer)
    print(
        f"gpt-2 (conditional): {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M params, "
        f"{len(train_rows)} training pairs of {cfg.max_length} tokens "
        f"(source <= {cfg.max_input_length})"
    )
    log = {"config": dataclasses.asdict(cfg), "curve": [], "val": []}
    best, snapshots = Best(cfg, tokenizer, val_rows), snapshot_minutes(cfg)
    snapshots = [m for m in snapshots if m > minutes]
    t_start = time.time() - 60 * minutes  # a resumed run's clock goes on
    bar = Progress(cfg.max_steps, step, cfg.time_limit_min, desc="gpt-2")
    try:
        while step < cfg.max_steps and not 0 < cfg.time_limit_min < minutes:
            for group in opt.param_groups:  # the update of step k: lr (k+1)/warmup
                group["lr"] = cfg.lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
            ids, labels = target_labels(
                train_rows.select(batch_indices(step, cfg.batch_size, len(train_rows), cfg.seed)),
                vocab_ids,
                V,
            )
            torch.manual_seed(noise_seed(cfg.seed, step))  # dropout: a function of (seed, step)
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step, minutes = step + 1, (time.time() - t_start) / 60
            value = loss.item()
            if not math.isfinite(value):
                raise ValueError(
                    f"step {step}: the loss is not finite ({value}), so training "
                    f"stopped; lower --lr (now {cfg.lr:g}) or raise --warmup_steps"
                )
            bar.update(step, minutes)
            bar.set_postfix({"loss": f"{value:.3f}"})
            log["curve"].append({"step": step, "loss": value})
            if step % cfg.ckpt_interval == 0:
                best.update(cfg, model, V, step, minutes, log)
                save(cfg, model, opt, step, minutes)
            while snapshots and minutes >= snapshots[0]:  # a quality-vs-minutes curve
                snapshot(cfg, model, step, minutes, snapshots.pop(0), best)
    except KeyboardInterrupt:  # Ctrl-C: one line, what is kept and how to go on
        raise interrupted(step, kept(cfg.out_dir)) from None
    bar.close()
    if step % cfg.ckpt_interval:  # the last step's, unless the loop just scored it
        best.update(cfg, model, V, step, minutes, log)
    folder = save(cfg, model, opt, step, minutes)
    old = os.path.join(cfg.out_dir, "train_log.json")  # a resumed run's log goes on
    if cfg.init_from == "resume" and os.path.isfile(old):
        with open(old) as f:
            before = json.load(f)
        log["curve"] = before["curve"] + log["curve"]
        log["val"] = before.get("val", []) + log["val"]
    atomic_write_text(old, json.dumps({**log, "steps": step, "minutes": minutes}, indent=2))
    print(f"trained {step} steps in {minutes:.1f} min; saved to {folder}")
    if cfg.n_samples > 0:
        score_heldout(cfg, model.eval(), tokenizer, cfg.out_dir)
    return model


def snapshot(cfg: ARCondConfig, model, step: int, minutes: float, at: float, best: Best):
    """out_dir/at-<m>min: the weights at `at` training minutes, and beside them at-<m>min-best,
    the early-stopped weights as they stood then (a copy of out_dir/best)."""
    save(cfg, model, None, step, minutes, to=os.path.join(cfg.out_dir, f"at-{at:g}min"))
    found = best.rows is not None and checkpoint.find(best.folder, of=("gpt2_cond",))
    if found:
        to = os.path.join(cfg.out_dir, f"at-{at:g}min-best")
        shutil.rmtree(to, ignore_errors=True)
        shutil.copytree(best.folder, to)


# ----------------------------------------------------------------------------------------
# decoding


@torch.no_grad()
def decode(
    model,
    tokenizer,
    rows,
    cap: int,
    greedy: bool,
    seed: int = 0,
    batch_size: int = 64,
    kv_cache: bool = True,
):
    """Conditional rows (conditional.layout of (source, [])) -> [{text, nfe}]: up to `cap` target
    tokens after each source, by argmax or drawn at temperature 1, cut at the first EOS. Rows
    are decoded in groups of equal source length (no padding inside a sequence, so neither in
    the cache). With `kv_cache` a step reads only the newest token beside the cached keys and
    values of the ones before: the same logits to round-off, the same draws from `seed`."""
    vocab_ids, V = vocab_of(model), len(tokenizer.tokenizer)
    eos = int(vocab_index(vocab_ids, torch.tensor(tokenizer.eos_id), V))
    g = torch.Generator().manual_seed(seed)
    src = vocab_index(vocab_ids, rows.ids, V)
    out = [None] * len(src)
    cond = rows.cond_len.tolist()
    for c in sorted(set(cond)):
        members = [i for i, x in enumerate(cond) if x == c]
        for start in range(0, len(members), batch_size):
            idx = members[start : start + batch_size]
            ids, done, past = src[idx, :c], torch.zeros(len(idx), dtype=torch.bool), None
            for _ in range(cap):
                # (logits, cache), by position: transformers 5 renamed past_key_values to cache
                res = model(
                    ids if past is None else ids[:, -1:], past, use_cache=kv_cache
                ).to_tuple()
                logits, past = res[0][:, -1].float(), (res[1] if kv_cache else None)  # (B, V)
                nxt = (
                    logits.argmax(-1)
                    if greedy
                    else torch.multinomial(torch.softmax(logits, -1), 1, generator=g)[:, 0]
                )
                nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
                ids, done = torch.cat([ids, nxt[:, None]], 1), done | (nxt == eos)
                if done.all():
                    break
            for i, row in zip(idx, ids[:, c:]):
                row = row if vocab_ids is None else vocab_ids[row]
                text = tokenizer.detokenize(row)  # cut at the first EOS
                n = row.tolist().index(tokenizer.eos_id) + 1 if tokenizer.eos_id in row else cap
                out[i] = {"text": text, "nfe": n}
    return out


def weights_sha256(folder: str) -> str:
    """The sha256 of a run folder's weights: what a held-out report names it by."""
    return sha256(os.path.join(ckpt_folder(folder), "model.safetensors"))


def keep_other_report(cfg: ARCondConfig):
    """--ckpt A --out_dir B: A's held-out report does not replace B's report of other weights
    (unless --overwrite), nor goes into another run's folder, where it would read as that run's."""
    if saved(cfg.out_dir) and not os.path.samefile(cfg.out_dir, cfg.ckpt):
        raise ValueError(
            f"out_dir {cfg.out_dir} is another run's folder: {cfg.ckpt}'s held-out report "
            f"would read as its own; give another --out_dir (or --out_dir {cfg.ckpt})"
        )
    path = os.path.join(cfg.out_dir, "heldout", "report.json")
    if cfg.overwrite or not os.path.isfile(path):
        return
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f).get("ckpt_sha256")
    except (OSError, ValueError, AttributeError):
        old = None
    if old != weights_sha256(cfg.ckpt):
        raise ValueError(
            f"out_dir {cfg.out_dir} holds the held-out report of other weights: --overwrite "
            f"replaces it, or give another --out_dir"
        )


def score_heldout(cfg: ARCondConfig, model, tokenizer, out_dir: str, ckpt: str = ""):
    """The first n_samples held-out pairs decoded each way (greedy once, sampled per seed) and
    scored as evaluate.py scores conditional ELF (lib/heldout.py): out_dir/heldout/, naming the
    checkpoint (`ckpt`, default out_dir) and its weights' sha256."""
    seeds = comma_list("sample_seeds", cfg.sample_seeds)
    settings = [
        (
            {"name": f"AR {way}" + ("" if way == "greedy" else " (temperature 1)")},
            seeds[:1] if way == "greedy" else seeds,
            way == "greedy",
        )
        for way in cfg.decode.split(",")
    ]
    draw = lambda rows, cap, greedy, seed: decode(
        model, tokenizer, rows, cap, greedy, seed, cfg.sample_batch, cfg.kv_cache
    )
    ckpt = ckpt or out_dir
    return score_baseline(
        cfg,
        cfg.n_samples,
        tokenizer,
        settings,
        draw,
        out_dir,
        seeds,
        split=cfg.split,
        ckpt=ckpt,
        ckpt_sha256=weights_sha256(ckpt),
        system="AR",
    )


# ----------------------------------------------------------------------------------------
# the command line


def parse_config(argv) -> ARCondConfig:
    cfg = parse(argv, ARCondConfig, "-m baselines.ar_cond")
    bad = [w for w in cfg.decode.split(",") if w not in ("greedy", "sample")]
    if bad or not cfg.decode:
        raise ValueError(f"unknown decode '{cfg.decode}' (a comma list of greedy, sample)")
    if not cfg.max_input_length:
        raise ValueError(
            "max_input_length must be > 0: this is the conditional baseline "
            "(baselines/ar.py is the unconditional one)"
        )
    check_input_length(cfg)  # 0 < max_input_length < max_length
    comma_list("sample_seeds", cfg.sample_seeds)
    snapshot_minutes(cfg)  # '10,20,40', as train.py's
    return cfg


def main(argv):
    cfg = parse_config(argv)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.ckpt:  # decode only
        meta = read_meta(cfg.ckpt)
        run = ARCondConfig(**{**meta["train"], **{k: getattr(cfg, k) for k in FREE_ON_RESUME}})
        tokenizer = Tokenizer(run.encoder)
        if cfg.source is None:
            with Writer(cfg.out_dir, "out_dir", "gpt2_cond"):
                keep_other_report(cfg)
                return score_heldout(run, load(cfg.ckpt)[0], tokenizer, cfg.out_dir, cfg.ckpt)
        sources = split_sources(cfg.source)
        check_sources(tokenizer, sources, run.max_input_length)  # before the weights load
        model = load(cfg.ckpt)[0]
        rows = layout([(s, []) for s in sources], tokenizer, run.max_length, run.max_input_length)
        res = decode(
            model,
            tokenizer,
            rows,
            run.max_length - run.max_input_length,
            True,
            kv_cache=run.kv_cache,
        )
        for s, r in zip(sources, res):
            print(f"--- source (greedy): {s}\n{r['text']}")
        return res
    with Writer(cfg.out_dir, "out_dir", "gpt2_cond") as w:  # one writer of the run's folder
        held = [
            f
            for f in os.listdir(cfg.out_dir)
            if f in ("train_log.json", "heldout", "latest", "best")
            or re.fullmatch(r"step-\d+|ckpt(-\d{8})?|at-.+min(-best)?", f)
        ]
        if cfg.init_from == "scratch" and w.holds and held:
            if not cfg.overwrite:
                raise ValueError(
                    f"out_dir {cfg.out_dir} already holds a run: --init_from resume "
                    f"continues it, --overwrite replaces it"
                )
            checkpoint.remove_all(cfg.out_dir)  # step folders, `latest`, config.json
            remove_old_layout(cfg.out_dir)
            snaps = [f for f in held if f.startswith("at-")]
            for f in ["heldout", "train_log.json", "best"] + snaps:
                p = os.path.join(cfg.out_dir, f)
                shutil.rmtree(p) if os.path.isdir(p) else os.path.exists(p) and os.remove(p)
        return train(cfg)


if __name__ == "__main__":
    cli(main)
