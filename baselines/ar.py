"""A small GPT-2 fitted on a corpus: the offline judge of Gen. PPL, and the autoregressive
baseline that ELF is compared with at equal compute.

    python -m baselines.ar --data wiki_descriptions,wiki --out judges/desc_wiki \
        --time_limit_min 45                     # a judge
    python -m baselines.ar configs/ar_tiny.py   # the AR baseline
    python -m baselines.ar configs/ar_tiny.py --time_limit_min 20 --snapshot_minutes 1,2,4,8.5
                                                # and its model and samples at those minutes

The paper scores samples with GPT-2 Large, which cannot be downloaded offline; this fits a
GPT-2 (Hugging Face's classes) on the training split of the same data instead, so its
perplexities compare models with each other, not with the paper's figures. The held-out
split is never trained on. Text is first put in the form ELF's samples take: round-tripped
through the ELF encoder's tokenizer (`normalize`; MiniLM is uncased, so lower-case, with its
spacing), so the judge sees real text and decoded samples alike. A judge reads it with its
own byte-level BPE (`tokenizer=bpe`, fitted on the training text: a small vocabulary keeps
its output layer cheap); the AR baseline reads it with ELF's own tokenizer (`tokenizer=minilm`).
Documents are joined by EOS and cut into rows of `length` tokens.

Early stopping (`keep_best`, configs/ar_tiny.py's): every `val_interval` steps the loss of the
held-out texts of the dev split (lib/reference.py's split, on the text as the encoder's
tokenizer reads it, so the test split is never read) is logged in train_log.json, and the model
that scores lowest is kept, with its samples, in out/best: the baseline's strongest checkpoint by
validation, beside the last one. The clock stops while it scores and saves, so the training
steps are the same with it as without.

As the baseline: the same trunk width and depth as the ELF model it is compared with, the
same data and the same wall-clock budget (`time_limit_min`); samples are drawn at
`temperature` (1 by default) from the EOS token (every training document follows one) until EOS or
`sample_length` tokens, and written as sample.py writes them (`samples.jsonl`). With
`token_vocab=train` (configs/ar_tiny.py, as ELF's token_vocab=train and MDLM's
token_vocab=train) the embedding and the output layer span only the ids the training rows hold
(the unknown token first, standing for any other held-out id; EOS where a tokenizer has none):
the model is trained on those rows' indices, its config.json holds `vocab_ids`, which maps them
back, and such a folder is a baseline, not a judge (metrics.load_judge refuses it).
"""

import json
import math
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from typing import Annotated

import torch

from encoder import resolve_encoder
from lib.checkpoint import disk_full
from lib.config import comma_list, parse, snapshot_minutes
from lib.data import load_documents
from lib.guard import KIND, Writer, cli, finish_first
from lib.optim import flush_denormals
from lib.outputs import LOCK, Progress, atomic_write_text, first_line, fsync
from lib.reference import split_of, split_texts
from model import vocab_index


@dataclass
class ARConfig:
    """A GPT-2 language model trained on the bundled (or any) text."""

    data: str = "wiki"  # lib/data.py data sets, comma-separated: train splits joined
    out: str = "judge"  # folder: the model (config.json), tokenizer, train_log.json
    tokenizer: str = "bpe"  # 'bpe' (fitted on the train text) or an encoder's tokenizer
    vocab: Annotated[int, "at_least_1"] = 4096  # the BPE vocabulary
    # 'full': the tokenizer's ids; 'train': the training rows'
    token_vocab: Annotated[str, ("full", "train")] = "full"
    normalize: str = "minilm"  # round-trip text via this encoder's tokenizer ('': raw text)
    # tokens per training row (documents packed, joined by EOS)
    length: Annotated[int, "at_least_1"] = 128
    n_layer: Annotated[int, "at_least_1"] = 4
    n_embd: Annotated[int, "at_least_1"] = 256
    n_head: Annotated[int, "at_least_1"] = 4
    batch_size: Annotated[int, "at_least_1"] = 32
    lr: Annotated[float, "positive"] = 1e-3  # AdamW, linear warmup, then constant
    warmup_steps: Annotated[int, "non_negative"] = 50
    weight_decay: Annotated[float, "non_negative"] = 0.01
    steps: Annotated[int, "at_least_1"] = 400
    # > 0: stop after this many training minutes (equal compute)
    time_limit_min: Annotated[float, "non_negative"] = 0.0
    snapshot_minutes: str = ""  # e.g. '1,2,4': also save out/at-<m>min (model, samples) then
    # early stopping: every val_interval steps the loss of the held-out texts of the dev split;
    # the lowest one's model (and samples) in out/best, and at-<m>min-best beside each snapshot
    keep_best: bool = False
    val_interval: Annotated[int, "at_least_1"] = 100
    seed: int = 0
    # > 0: texts per seed (at `temperature`) to <out>/samples.jsonl
    n_samples: Annotated[int, "non_negative"] = 0
    sample_seeds: str = "0"  # a set of n_samples per seed (evaluate.py: mean and s.e.)
    # the most new tokens of a sample (EOS ends it earlier)
    sample_length: Annotated[int, "at_least_1"] = 64
    kv_cache: bool = True  # cached keys, values (false: re-read the prefix each token)
    # of the samples: logits / temperature (1: the model's own)
    temperature: Annotated[float, "positive"] = 1.0
    threads: Annotated[int, "non_negative"] = 0  # torch threads (0: torch's default)
    overwrite: bool = False  # replace what `out` already holds


def load_tokenizer(name: str):
    """The encoder's tokenizer with its EOS named (BERT-style: [SEP] ends a text)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(resolve_encoder(name))
    except (OSError, ValueError) as e:  # not a folder, not on the hub, or offline
        raise FileNotFoundError(
            f"could not load the tokenizer of '{name}' "
            f"({str(e).strip().splitlines()[0][:160]}); "
            f"offline, use the bundled 'minilm' or a local folder"
        ) from None
    if tok.eos_token is None:
        tok.eos_token = tok.sep_token
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


def fit_bpe(texts, vocab: int):
    """A byte-level BPE tokenizer fitted on texts, with <|endoftext|> as its EOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer, bpe.decoder = (
        pre_tokenizers.ByteLevel(add_prefix_space=False),
        decoders.ByteLevel(),
    )
    bpe.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )


def normalizer(name: str):
    """texts -> texts as ELF's samples read: tokenized and decoded by the encoder's tokenizer."""
    if not name:
        return list
    tok = load_tokenizer(name)
    return lambda texts: tok.batch_decode(
        tok(list(texts), add_special_tokens=False)["input_ids"], skip_special_tokens=True
    )


def packed_rows(texts, tok, length: int):
    """Documents joined by EOS, cut into (N, length) rows (the remainder dropped)."""
    flat = [
        i
        for ids in tok(list(texts), add_special_tokens=False)["input_ids"]
        for i in [tok.eos_token_id] + ids
    ]
    n = len(flat) // length
    return torch.tensor(flat[: n * length]).view(n, length)


def corpus(data: str):
    """(train texts, held-out texts) of the comma-separated data sets."""
    train, val = [], []
    for name in data.split(","):
        t, v = load_documents(name.strip())
        col = "text" if "text" in t.column_names else t.column_names[0]
        train += list(t[col])
        val += list(v[col])
    return train, val


@torch.no_grad()
def heldout_loss(model, rows, batch_size: int = 64) -> float:
    """Mean token loss (nats) of the held-out rows, the model in eval mode."""
    model.eval()
    nll = sum(
        model(input_ids=rows[i : i + batch_size], labels=rows[i : i + batch_size]).loss.item()
        * len(rows[i : i + batch_size])
        for i in range(0, len(rows), batch_size)
    )
    model.train()
    return nll / max(1, len(rows))


def heldout_ppl(model, rows, batch_size: int = 64) -> float:
    """Token perplexity of the held-out rows."""
    return math.exp(heldout_loss(model, rows, batch_size))


def dev_texts(cfg: ARConfig, val_texts):
    """The held-out texts of the dev split (lib/reference.py's split_of, on the text as the
    encoder's tokenizer reads it). A text counts as dev when its whole form and its first
    sample_length tokens both fall in dev: evaluate.py reads the held-out texts as ELF's rows
    hold them, cut to that length (configs/ar_tiny.py: 15, ELF's 16 with the EOS), so a long
    text is never dev here and test there."""
    name = cfg.normalize or ("" if cfg.tokenizer == "bpe" else cfg.tokenizer)
    if not name or not val_texts:  # no encoder: the text as it is
        return split_texts(val_texts, "dev")
    tok = load_tokenizer(name)
    ids = tok(list(val_texts), add_special_tokens=False)["input_ids"]
    form = lambda cut: tok.batch_decode([i[:cut] for i in ids], skip_special_tokens=True)
    return [
        t
        for t, whole, cut in zip(val_texts, form(None), form(cfg.sample_length))
        if split_of(whole) == split_of(cut) == "dev"
    ]


@torch.no_grad()
def sample(
    model,
    tok,
    n: int,
    length: int,
    seed: int,
    batch_size: int = 64,
    vocab_ids=None,
    kv_cache: bool = True,
    temperature: float = 1.0,
):
    """n texts at `temperature` (logits / temperature; no top-k, no top-p), each started from EOS
    and cut at EOS; `vocab_ids` (a cut vocabulary) maps the model's indices to token ids. With
    `kv_cache` a step reads only the newest token beside the cached keys and values of the ones
    before: the same logits to round-off and the same draws from `seed` as re-reading the prefix.
    At temperature 1 the logits are divided by 1.0, which changes no bit: the same draws."""
    model.eval()
    device = next(model.parameters()).device  # the CPU's draws as before; CUDA: its own stream
    g = torch.Generator(device).manual_seed(seed)
    eos, out = tok.eos_token_id, []
    if vocab_ids is not None:
        eos = int((vocab_ids == eos).nonzero())
    for start in range(0, n, batch_size):
        ids = torch.full((min(batch_size, n - start), 1), eos, device=device)
        done, past = torch.zeros(len(ids), dtype=torch.bool, device=device), None
        for _ in range(length):
            # (logits, cache), by position: transformers 5 renamed past_key_values to cache
            res = model(ids if past is None else ids[:, -1:], past, use_cache=kv_cache).to_tuple()
            logits, past = res[0][:, -1].float(), (res[1] if kv_cache else None)  # (B, V)
            probs = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=g)[:, 0]
            nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
            ids, done = torch.cat([ids, nxt[:, None]], 1), done | (nxt == eos)
            if done.all():
                break
        for row in ids[:, 1:].tolist():
            row = row[: row.index(eos)] if eos in row else row
            row = row if vocab_ids is None else vocab_ids[row].tolist()
            out.append(tok.decode(row, skip_special_tokens=True))
    return out


def train(cfg: ARConfig):
    """Fit the GPT-2, save it with its tokenizer to cfg.out; returns the train log (dict)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    flush_denormals()  # denormals as zero on a CPU, as train.py
    torch.manual_seed(cfg.seed)
    norm = normalizer(cfg.normalize)
    train_texts, val_texts = (norm(t) for t in corpus(cfg.data))
    tok = (
        fit_bpe(train_texts, cfg.vocab) if cfg.tokenizer == "bpe" else load_tokenizer(cfg.tokenizer)
    )
    rows, val = packed_rows(train_texts, tok, cfg.length), packed_rows(val_texts, tok, cfg.length)
    if len(rows) == 0:
        raise ValueError(f"data '{cfg.data}' gives no training row of {cfg.length} tokens")
    vocab_ids, eos = None, tok.eos_token_id
    if cfg.token_vocab == "train":  # the model's index i: token id vocab_ids[i]
        unk = tok.unk_token_id if tok.unk_token_id is not None else eos
        seen = rows.unique()
        vocab_ids = torch.cat((torch.tensor([unk]), seen[seen != unk]))
        rows, val = vocab_index(vocab_ids, rows, len(tok)), vocab_index(vocab_ids, val, len(tok))
        eos = int((vocab_ids == eos).nonzero())
    dev = None  # early stopping's rows
    if cfg.keep_best:
        dev = packed_rows(dev_texts(cfg, val_texts), tok, cfg.length)
        dev = dev if vocab_ids is None else vocab_index(vocab_ids, dev, len(tok))
        if len(dev) == 0:
            print("keep_best: the dev split's held-out texts fill no row; no best kept")
            dev = None
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tok) if vocab_ids is None else len(vocab_ids),
            n_positions=max(cfg.length, cfg.sample_length + 1),
            n_embd=cfg.n_embd,
            n_layer=cfg.n_layer,
            n_head=cfg.n_head,
            bos_token_id=eos,
            eos_token_id=eos,
        )
    )
    if vocab_ids is not None:  # in config.json: load_judge refuses it
        model.config.vocab_ids = vocab_ids.tolist()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(cfg.seed)
    log = {
        "config": asdict(cfg),
        "params": sum(p.numel() for p in model.parameters()),
        "train_rows": len(rows),
        "curve": [],
        "val": [],
    }
    best, best_dir = math.inf, os.path.join(cfg.out, "best")

    def validate(step, t0):
        """Early stopping: score the dev rows, keep the model if lowest; -> t0 moved on by the
        seconds this took (the clock stops)."""
        nonlocal best
        paused = time.time()
        loss = heldout_loss(model, dev)
        log["val"].append({"step": step, "minutes": (paused - t0) / 60, "val_loss": loss})
        if loss < best:
            best = loss
            state = {**log, "steps": step, "minutes": (paused - t0) / 60, "val_loss": loss}
            save(best_dir, cfg, model, tok, vocab_ids, state)  # its samples: eval mode
        model.train()
        return t0 + time.time() - paused

    t0, step, snapshots = time.time(), 0, snapshot_minutes(cfg)
    bar = Progress(cfg.steps, 0, cfg.time_limit_min, desc="gpt-2")  # counts to the time limit
    while step < cfg.steps and not (
        cfg.time_limit_min > 0 and time.time() - t0 > 60 * cfg.time_limit_min
    ):
        for group in opt.param_groups:
            group["lr"] = cfg.lr * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
        batch = rows[torch.randint(len(rows), (cfg.batch_size,), generator=g)]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        bar.update(step, (time.time() - t0) / 60)
        value = loss.item()  # read every step for the progress bar anyway
        if not math.isfinite(value):
            raise ValueError(
                f"step {step}: the loss is not finite ({value}), so training stopped "
                f"and saved "
                f"nothing; likely cause: a learning rate too high (lr {cfg.lr:g}): "
                f"lower --lr or raise --warmup_steps"
            )
        bar.set_postfix({"loss": f"{value:.3f}"})
        if step % 100 == 0:
            log["curve"].append({"step": step, "minutes": (time.time() - t0) / 60, "loss": value})
        if dev is not None and step % cfg.val_interval == 0:
            t0 = validate(step, t0)
        while snapshots and time.time() - t0 >= 60 * snapshots[0]:  # a quality-vs-minutes curve
            paused = time.time()  # the clock stops while it saves and samples
            at = os.path.join(cfg.out, f"at-{snapshots.pop(0):g}min")
            save(
                at,
                cfg,
                model,
                tok,
                vocab_ids,
                {**log, "steps": step, "minutes": (paused - t0) / 60},
            )
            if os.path.isfile(os.path.join(best_dir, "train_log.json")):  # the best by then
                copy_whole(best_dir, at + "-best")
            t0 += time.time() - paused
            model.train()
    bar.close()
    if dev is not None and step % cfg.val_interval:  # the last step's, unless just scored
        t0 = validate(step, t0)
    log.update(
        steps=step,
        minutes=(time.time() - t0) / 60,
        tokens=step * cfg.batch_size * cfg.length,
        heldout_ppl=heldout_ppl(model, val) if len(val) else None,
    )
    with finish_first():  # Ctrl-C: the save ends, then the run stops (lib.guard)
        save(cfg.out, cfg, model, tok, vocab_ids, log)
    over = "" if vocab_ids is None else f" over {len(vocab_ids)} token ids"
    print(
        f"gpt-2: {log['params'] / 1e6:.1f}M params{over}, {step} steps in "
        f"{log['minutes']:.1f} min, held-out PPL {log['heldout_ppl'] or float('nan'):.1f}; "
        f"saved to {cfg.out}"
    )
    return log


def save(folder, cfg: ARConfig, model, tok, vocab_ids, log: dict):
    """The model and its tokenizer into folder, its samples (n_samples per sample seed) to
    folder/samples.jsonl, and the log (steps, minutes, ...) to folder/train_log.json: written
    beside (.tmp-save-<pid>), then renamed in file by file, train_log.json last, so that a kill
    during the save leaves whole files, never half ones. The old train_log.json goes first: a
    folder whose renames a kill cut short (old and new files mixed) holds none, and
    lib.metrics.load_judge refuses it."""
    tmp = os.path.join(folder, f".tmp-save-{os.getpid()}")
    finished = os.path.join(folder, "train_log.json")  # the mark of a whole judge
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if cfg.n_samples > 0:
            recs = [
                {"text": t, "index": i, "seed": seed}
                for seed in comma_list("sample_seeds", cfg.sample_seeds)
                for i, t in enumerate(
                    sample(
                        model,
                        tok,
                        cfg.n_samples,
                        cfg.sample_length,
                        seed,
                        vocab_ids=vocab_ids,
                        kv_cache=cfg.kv_cache,
                        temperature=cfg.temperature,
                    )
                )
            ]
            atomic_write_text(
                os.path.join(tmp, "samples.jsonl"), "".join(json.dumps(r) + "\n" for r in recs)
            )
        atomic_write_text(os.path.join(tmp, "train_log.json"), json.dumps(log, indent=2))
        names = sorted(os.listdir(tmp), key=lambda f: f == "train_log.json")  # the log last
        fsync(tmp, *(os.path.join(tmp, f) for f in names))
        for f in ("train_log.json", "samples.jsonl"):  # the log first: from here until the
            if os.path.exists(os.path.join(folder, f)):  # new one lands, the folder reads
                os.remove(os.path.join(folder, f))  # unfinished; no old samples stay
        fsync(folder)
        for f in names:
            os.replace(os.path.join(tmp, f), os.path.join(folder, f))
        fsync(folder)
    except (OSError, RuntimeError) as e:  # a full disk: one line, and what is kept
        why = "no space left on the disk" if disk_full(e, folder) else first_line(e)
        kept = (
            "the judge there before is kept"
            if os.path.exists(finished)
            else "no whole judge is there (no train_log.json): run it again"
        )
        raise ValueError(f"{why} while saving the GPT-2 into {folder}: {kept}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def copy_whole(src: str, dst: str):
    """A copy of the saved folder src as dst, made beside it and renamed in whole: a kill leaves
    a whole copy or none, never a part (remove_temporary clears what it left)."""
    tmp = os.path.join(os.path.dirname(dst), f".tmp-save-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dst, ignore_errors=True)
    os.replace(tmp, dst)


def remove_temporary(folder: str):
    """What a killed save left in a judge's folder (.tmp-save-<pid>), and nothing else."""
    for d in os.listdir(folder) if os.path.isdir(folder) else []:
        if re.fullmatch(r"\.tmp-save-\d+", d):
            shutil.rmtree(os.path.join(folder, d), ignore_errors=True)


def main(argv):
    cfg = parse(argv, ARConfig, "-m baselines.ar")
    comma_list("sample_seeds", cfg.sample_seeds)
    snapshot_minutes(cfg)
    if not all(name.strip() for name in cfg.data.split(",")):
        raise ValueError(f"'data' expects comma-separated data set names, got '{cfg.data}'")
    with Writer(cfg.out, "out", "gpt2"):  # one writer of the folder, checked before training
        remove_temporary(cfg.out)
        held = sorted(f for f in os.listdir(cfg.out) if f not in (LOCK, KIND))
        if held and not cfg.overwrite:
            raise ValueError(
                f"out {cfg.out} already holds "
                f"{', '.join(held[:3])}{', ...' if len(held) > 3 else ''}: "
                f"--overwrite replaces it, or choose another --out"
            )
        # an overwritten judge keeps none of the old one's snapshots; its records (samples,
        # log) stay until the new judge's save replaces them, so a failed run keeps it whole
        for f in held:
            if f == "best" or f.startswith("at-") and f.endswith(("min", "min-best")):
                shutil.rmtree(os.path.join(cfg.out, f))
        try:
            return train(cfg)
        except KeyboardInterrupt:  # Ctrl-C: one line
            raise KeyboardInterrupt(
                f"interrupted: {cfg.out} holds the last GPT-2 saved whole, if any (a save "
                f"runs only when training ends, and a save begun is finished first)"
            ) from None


if __name__ == "__main__":
    cli(main)
