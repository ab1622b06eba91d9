"""The strict command-line and config-file parser that every entry point shares, and train.py's
config: `TrainConfig` (every key of a training run, with its default and its check),
`parse_train` (the checks that need several keys) and the keys a resumed run may change
(`free_on_resume`).

    cfg = parse(["configs/tiny.py", "--batch_size=16", "--compile"], TrainConfig)

Defaults come from a dataclass, then an optional config file (a Python file run with
runpy, as nanoGPT's are: it is code, so only run config files you trust; its public names
are the keys), then `--key=value` / `--key value` overrides, parsed with each field's type
(an int is fine where a float is expected; `none` for Optional fields; `--flag` alone sets a
bool to true). Unknown keys and wrong types raise a ValueError that names the key, as does
a float that is not finite (`nan`, `inf`: no key of this project means either), and `--help`
prints every key with its default and the comment beside its field. A key's own check is
declared with it, as the second part of its annotation: `Annotated[float, "probability"]` (a
range of RANGES) or `Annotated[str, ("x", "v")]` (its choices); `parse` enforces them all, so a
new key is checked where it is declared (model.ModelKnobs, flow.FlowConfig, TrainConfig and
every command's config). Values that hold several
(`--seeds 0,1,2`) are read by `comma_list`, and `--device` by `resolve_device`, so that their
errors name the key too.
"""

import dataclasses
import inspect
import math
import os
import re
import runpy
import sys
import typing
from typing import Annotated, Optional

from flow import PRESETS, FlowConfig
from model import SIZES, ModelKnobs


def coerce(key, value, hint, cli: bool):
    """Convert value (a str from the command line, or a Python value from a file) to hint."""
    optional = type(None) in typing.get_args(hint)
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    if cli and base is not str:
        if optional and value.lower() == "none":
            return None
        if base is bool:
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"config key '{key}' expects a bool (true/false), got '{value}'")
            return value.lower() in ("true", "1")
        try:
            value = base(value)
        except ValueError:
            raise ValueError(f"config key '{key}' expects {base.__name__}, got '{value}'") from None
        return finite(key, value)
    if value is None and optional:
        return None
    if base is float and type(value) is int:
        return float(value)
    if type(value) is not base:
        raise ValueError(
            f"config key '{key}' expects {base.__name__}, got {type(value).__name__} {value!r}"
        )
    return finite(key, value)


def finite(key, value):
    """A float key's value, refused when it is nan or infinite: a learning rate of inf or a
    noise scale of nan would train to a loss of nan rather than fail."""
    if type(value) is float and not math.isfinite(value):
        raise ValueError(f"config key '{key}' must be a finite number, got {value}")
    return value


def comma_list(key: str, raw: str, kind=int, allowed=None) -> list:
    """'0,1,2' -> [0, 1, 2] for the key `key`; with kind=str and `allowed` (a tuple of names),
    'step,sample' -> ['step', 'sample'], each one of them. An empty or malformed list, or a
    name not allowed, is a one-line error that names the key (and the choices)."""
    try:
        values = [finite(key, kind(v)) for v in raw.split(",")]
    except ValueError:
        values = None
    if values is None or "" in values:  # '': an empty entry of a list of names
        raise ValueError(f"'{key}' expects a comma list of {kind.__name__}, got '{raw}'")
    unknown = [v for v in values if allowed is not None and v not in allowed]
    if unknown:
        raise ValueError(
            f"unknown {key} '{unknown[0]}' in '{raw}' (choose from {', '.join(map(str, allowed))})"
        )
    return values


def resolve_device(key: str) -> str:
    """'auto' -> 'cuda' where CUDA is available, else 'cpu'; 'cpu', 'cuda', 'cuda:N' as they are,
    refused with one line where this machine has no CUDA."""
    import torch

    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", key):
        raise ValueError(f"unknown device '{key}' (choose from auto, cpu, cuda, cuda:N)")
    if key == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if key.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device '{key}' but CUDA is not available here (use --device cpu)")
    return key


def field_comments(cls) -> dict:
    """{field: the comment beside it in the dataclass source, else the comment lines just above
    it}: the text of --help (a subclass's own comments win over its bases'). The first comment
    line after a blank one heads a section ("# I/O") and describes no one field."""
    out = {}
    for klass in reversed([k for k in cls.__mro__ if dataclasses.is_dataclass(k)]):
        above, heading, blank = [], False, True
        for line in inspect.getsource(klass).splitlines():
            if m := re.match(r"\s+#\s*(.*)$", line):
                heading = heading or (blank and not above)
                above.append(m.group(1).strip())
                continue
            if m := re.match(r"\s+(\w+)\s*:[^#=]*(?:=[^#]*)?(?:#\s*(.*))?$", line):
                note = m.group(2) or " ".join(above[1:] if heading else above)
                if note.strip():
                    out[m.group(1)] = note.strip()
            above, heading, blank = [], False, not line.strip()
    return out


def usage(cls, prog: str) -> str:
    """The --help text: usage, then one line per key with its type, default and comment; a
    class's own keys first, then those it inherits (TrainConfig: the objective's)."""
    hints, notes = typing.get_type_hints(cls), field_comments(cls)
    lines = [
        f"usage: python {prog} [config.py] [--key=value | --key value | --flag ...]",
        (inspect.getdoc(cls) or "").split("\n")[0],
        "",
        "keys (default; what it does):",
    ]
    inherited = {
        f.name
        for base in cls.__mro__[1:]
        if dataclasses.is_dataclass(base)
        for f in dataclasses.fields(base)
    }
    for f in sorted(dataclasses.fields(cls), key=lambda f: f.name in inherited):
        name = getattr(hints[f.name], "__name__", None) or str(hints[f.name]).replace("typing.", "")
        lines.append(
            (f"  --{f.name} ({name}, default {f.default!r})  {notes.get(f.name, '')}").rstrip()
        )
    return "\n".join(lines)


def split_args(args, hints):
    """'--key value' -> '--key=value'; a bare '--flag' of a bool field -> '--flag=true'."""
    hints = {k: bool if h in (bool, typing.Optional[bool]) else h for k, h in hints.items()}
    out = []
    for a in args:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and not a.startswith("--")
            and (hints.get(out[-1][2:]) is not bool or a.lower() in ("true", "false", "1", "0"))
        ):
            out[-1] += "=" + a
        else:
            out.append(a)
    return [
        f"{a}=true" if a.startswith("--") and "=" not in a and hints.get(a[2:]) is bool else a
        for a in out
    ]


def run_file(path: str) -> dict:
    """Run a config file; an error in it becomes one line with the file, the line and the message.
    (Everything raised here comes from the user's file, not from this project's code.)"""
    try:
        return runpy.run_path(path)
    except SyntaxError as e:
        raise ValueError(f"config file {path}:{e.lineno}: {e.msg}") from None
    # any error is the config file's, named with its line; sys.exit in it too (a bare exit
    # code would stop the command with no word)
    except (Exception, SystemExit) as e:  # noqa: BLE001
        import traceback

        line = next(
            (
                fr.lineno
                for fr in reversed(traceback.extract_tb(e.__traceback__))
                if os.path.abspath(fr.filename) == os.path.abspath(path)
            ),
            "?",
        )
        what = f"it calls sys.exit({e.code!r})" if isinstance(e, SystemExit) else type(e).__name__
        raise ValueError(f"config file {path}:{line}: {what}: {e}") from None


MAX_SAMPLES = 10_000_000  # the most samples a command draws per seed: held in memory at once

RANGES = {
    "at_least_1": (lambda v: v >= 1, "must be >= 1"),
    "non_negative": (lambda v: v >= 0, "must be >= 0"),
    "positive": (lambda v: v > 0, "must be > 0"),
    "probability": (lambda v: 0 <= v <= 1, "must lie in [0, 1]"),
    "fraction": (lambda v: 0 < v < 1, "must lie in (0, 1)"),
}


def declared_checks(cls) -> dict:
    """{key: its check} for every field declared `Annotated[type, check]`: a name of RANGES or a
    tuple of the allowed values."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {k: h.__metadata__[0] for k, h in hints.items() if typing.get_origin(h) is Annotated}


def check_declared(cfg):
    """Every key's declared check: the first value out of its range, or not among its choices,
    stops with one line naming the key and the value. None (an optional key unset) passes."""
    for key, rule in declared_checks(type(cfg)).items():
        value = getattr(cfg, key)
        if value is None:
            continue
        if isinstance(rule, tuple):
            if value not in rule:
                shown = ", ".join(str(v) for v in rule if v != "")  # '': "the default's"
                raise ValueError(f"unknown {key} '{value}' (choose from {shown})")
        elif not RANGES[rule][0](value):
            raise ValueError(f"{key} {RANGES[rule][1]}, got {value}")


RENAMED_KEYS = {"decoder_vocab": "token_vocab"}  # keys of older config files -> today's names


def unknown(key: str, where: str = "") -> ValueError:
    """The one-line error of a key the config class lacks (naming today's name of a renamed one)."""
    hint = f" (renamed '{RENAMED_KEYS[key]}')" if key in RENAMED_KEYS else ""
    return ValueError(f"unknown config key '{key}'{where}{hint}")


def parse(argv, cls, prog: str = ""):
    """[config.py] [--key=value | --key value | --flag ...] -> cls instance. Later sources win.
    --help / -h prints usage(cls) and exits."""
    if "--help" in argv or "-h" in argv:
        try:
            print(usage(cls, prog or os.path.basename(sys.argv[0])), flush=True)
        except BrokenPipeError:  # `--help | head`: the reader has enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    hints = typing.get_type_hints(cls)
    values = {}
    args = list(argv)
    if args and not args[0].startswith("--"):
        path = args.pop(0)
        if os.path.isdir(path):
            raise ValueError(
                f"config file {path} is a folder: give a Python file such as configs/tiny.py"
            )
        if not os.path.isfile(path):
            raise FileNotFoundError(f"config file not found: {path}")
        for k, v in run_file(path).items():
            if k.startswith("_") or callable(v) or type(v).__name__ == "module":
                continue
            if k not in hints:
                raise unknown(k, f" in {path}")
            values[k] = coerce(k, v, hints[k], cli=False)
    for arg in split_args(args, hints):
        if not arg.startswith("--"):
            raise ValueError(f"expected --key=value or --key value, got '{arg}'")
        if "=" not in arg:
            k = arg[2:]
            raise unknown(k) if k not in hints else ValueError(f"config key '{k}' needs a value")
        k, v = arg[2:].split("=", 1)
        if k not in hints:
            raise unknown(k)
        values[k] = coerce(k, v, hints[k], cli=True)
    cfg = cls(**values)
    check_declared(cfg)
    return cfg


# ----------------------------------------------------------------------------------------
# train.py's config: its keys and defaults, the checks that need several keys, and which
# keys a resumed run may change


@dataclasses.dataclass
class TrainConfig(FlowConfig, ModelKnobs):
    """Train ELF. The defaults are the paper's ELF-B run on OpenWebText (configs/owt_elf_b.py).
    The objective's keys (noise_scale, p_mean, decoder_prob, ...) are flow.FlowConfig's and the
    network's (bottleneck, n_prefix, ...) model.ModelKnobs': declared there once, inherited."""

    # I/O
    out_dir: str = "out/owt_elf_b"
    # 'scratch' (out_dir holds no checkpoint) or 'resume'
    init_from: Annotated[str, ("scratch", "resume")] = "scratch"
    overwrite: bool = False  # init_from=scratch: delete out_dir's checkpoints
    allow_changes: str = ""  # resume: comma-separated keys that may change
    # steps between train-loss lines in out_dir/metrics.jsonl
    log_interval: Annotated[int, "at_least_1"] = 10
    # steps between validation losses (EMA weights)
    eval_interval: Annotated[int, "at_least_1"] = 2000
    eval_batches: Annotated[int, "at_least_1"] = 4  # validation rows = eval_batches * batch_size
    ckpt_interval: Annotated[int, "at_least_1"] = 2000
    # step folders kept (a damaged newest one is skipped)
    keep_checkpoints: Annotated[int, "at_least_1"] = 2
    snapshot_minutes: str = ""  # e.g. '10,20,40': also save out_dir/at-<m>min then
    n_samples: Annotated[int, "non_negative"] = 4  # decoded at the end with the EMA weights
    # those samples' preset; sample.py's, evaluate.py's default
    sample_preset: Annotated[str, tuple(PRESETS)] = "uncond32"
    sample_steps: Annotated[int, "non_negative"] = 0  # 0: the preset's step count
    wandb: bool = False  # also log to Weights & Biases (needs the wandb package)
    wandb_project: str = "elf-torch"
    # data (data.py)
    dataset: str = "Skylion007/openwebtext"  # 'wiki', 'wiki_descriptions', a hub name, file, folder
    text_column: str = "text"
    # documents held out when the source has no validation split
    val_size: Annotated[int, "non_negative"] = 500
    max_length: Annotated[int, "at_least_1"] = 1024  # tokens per row
    packing: bool = True  # pack documents into full rows; False: one per row, padded
    # 'pad' (outside the loss) or 'eos' (EOS padding, learnt)
    pad_token: Annotated[str, ("pad", "eos")] = "pad"
    # EOS padding's weight in the loss (pad_token 'eos' and conditional rows; 1: as the text, the
    # release; results/cond_recipe), past the text's own EOS
    pad_weight: Annotated[float, "probability"] = 1.0
    framing: bool = False  # the tokenizer's special tokens around each document
    latent_cache: bool = False  # encode the data set once into cache_dir (small data only)
    cache_dir: str = "~/.cache/elf-torch"
    # conditional generation (METHOD.md, "Conditional generation"): rows are [source ; target]
    max_input_length: int = 0  # > 0: conditional; the source's token budget
    # examples trained without their source, for CFG
    label_drop_prob: Annotated[float, "probability"] = 0.1
    source_column: str = ""  # '': source/target, input/output or condition_input_ids
    target_column: str = ""
    dataset_config: str = ""  # hub config name, e.g. 'de-en' for wmt/wmt14
    val_split: str = ""  # hub split held out and scored ('' = validation)
    # > 0: train on the first N training pairs only (the overfit check, results/cond_overfit)
    train_pairs: Annotated[int, "non_negative"] = 0
    # encoder
    encoder: str = "t5-small"  # 'minilm' (bundled), a hub name or a local folder
    # 'auto': bfloat16 where the device has it natively
    encoder_dtype: Annotated[str, ("auto", "float32", "bfloat16")] = "float32"
    # 'random': its architecture, random weights (ablation)
    encoder_weights: Annotated[str, ("pretrained", "random")] = "pretrained"
    encoder_layer: int = -1  # whose states are the latents: -1 last (released), k block k
    latent_mean: Optional[float] = 0.0  # T5-small: 0.0 / 0.2; None: estimated from data
    latent_std: Annotated[Optional[float], "positive"] = 0.2
    # model: its knobs are model.ModelKnobs'; here the size and what the data decides
    model: Annotated[str, tuple(SIZES)] = "ELF-B"  # a size of model.SIZES
    # set to override the size's depth, width, heads
    depth: Annotated[Optional[int], "at_least_1"] = None
    hidden: Annotated[Optional[int], "at_least_1"] = None
    heads: Annotated[Optional[int], "at_least_1"] = None
    max_seq_len: Optional[int] = None  # RoPE table's length (None: max_length)
    # unembedding: 'random' (released) or 'encoder' tokens
    decoder_init: Annotated[str, ("random", "encoder")] = "random"
    # 'full' (released) or 'train': only the training rows' ids ('train': val_ce is over
    # those, not comparable to 'full')
    token_vocab: Annotated[str, ("full", "train")] = "full"

    # optimisation (optim.py)
    # 'muon' (Muon + NAdam-like Adam, muon.py) or 'adamw'
    optimizer: Annotated[str, ("muon", "adamw")] = "muon"
    # 2-D weights on Muon: 'all' (authors) or 'blocks'
    muon_params: Annotated[str, ("all", "blocks")] = "all"
    # global: summed over ranks and accumulation steps
    batch_size: Annotated[int, "at_least_1"] = 512
    grad_accum: int = 1  # micro-batches per rank per step (one all-reduce per step)
    blr: Annotated[float, "positive"] = 1e-3  # lr = blr * batch_size / 256
    # linear warmup (0.5 epoch of OpenWebText), then constant
    warmup_steps: Annotated[int, "non_negative"] = 8620
    # 'constant' (released) or 'cosine' (to lr/10 at the end)
    lr_schedule: Annotated[str, ("constant", "cosine")] = "constant"
    max_steps: Annotated[int, "at_least_1"] = 86200  # 5 epochs of OpenWebText
    # > 0: also stop after this many minutes of training
    time_limit_min: Annotated[float, "non_negative"] = 0.0
    grad_clip: Annotated[float, "positive"] = 1.0
    ema_decay: Annotated[float, "fraction"] = 0.9999
    ema_warmup: bool = False  # decay_k = min(decay, (1 + k) / (10 + k)) for short runs
    seed: int = 0
    device: str = "auto"  # 'auto', 'cpu', 'cuda', 'cuda:1' (torchrun: auto/cuda/cpu)
    # speed
    compile: Optional[bool] = None  # torch.compile the model; None: on for CUDA, off on CPU
    # autocast: 'auto' (bf16 on CUDA), 'float32', 'bfloat16'
    dtype: Annotated[str, ("auto", "float32", "bfloat16")] = "auto"
    grad_ckpt: bool = False  # recompute blocks in backward: +1/3 compute, less memory


# keys a resumed run may change freely: they do not touch what the next steps compute
FREE_ON_RESUME = {
    "out_dir",
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
    "sample_preset",
    "sample_steps",
    "wandb",
    "wandb_project",
    "max_steps",
    "time_limit_min",
    "device",
    "compile",
    "cache_dir",
    "latent_cache",
}


def free_on_resume(cfg: TrainConfig) -> set:
    """The keys this run may change on resume: FREE_ON_RESUME, less max_steps under a cosine
    schedule (there it sets the decay's length, so the next steps' learning rates)."""
    return FREE_ON_RESUME - ({"max_steps"} if cfg.lr_schedule == "cosine" else set())


def parse_train(argv) -> TrainConfig:
    """train.py's [config.py] [--key value ...] -> TrainConfig: each key's own check is
    parse's (declared with the key); here, the checks that need several keys."""
    cfg = parse(argv, TrainConfig, "train.py")
    cfg.max_seq_len = cfg.max_seq_len or cfg.max_length
    if cfg.max_length > cfg.max_seq_len:
        raise ValueError(
            f"max_length {cfg.max_length} exceeds the model's RoPE table "
            f"(max_seq_len={cfg.max_seq_len})"
        )
    check_input_length(cfg)
    if cfg.embeddings == "learned" and cfg.max_input_length:
        raise ValueError(
            "embeddings 'learned' is an unconditional ablation: a source's latents "
            "come from the frozen encoder (set max_input_length 0)"
        )
    if cfg.train_pairs and not cfg.max_input_length:
        raise ValueError("train_pairs limits a conditional run's pairs: set max_input_length too")
    if cfg.grad_accum < 1 or cfg.batch_size % cfg.grad_accum:
        raise ValueError(
            f"grad_accum {cfg.grad_accum} must be >= 1 and divide batch_size {cfg.batch_size}"
        )
    snapshot_minutes(cfg)
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", cfg.device):
        raise ValueError(f"unknown device '{cfg.device}' (choose from auto, cpu, cuda, cuda:N)")
    return cfg


def check_input_length(cfg):
    """A conditional run's source budget, 0 < max_input_length < max_length (0: unconditional):
    checked here once, for train.py, the conditional baselines and tools/convert_release.py;
    the code after trusts it."""
    if cfg.max_input_length and not 0 < cfg.max_input_length < cfg.max_length:
        raise ValueError(
            f"max_input_length {cfg.max_input_length} must be in (0, max_length={cfg.max_length})"
        )


def snapshot_minutes(cfg) -> list:
    """The training minutes of cfg.snapshot_minutes ('10,20,40' -> [10.0, 20.0, 40.0]), in
    order ('': none); train.py's, mdlm.py's and ar.py's, refused in one line when malformed or
    not a finite number of minutes >= 0 (nan and inf would never snapshot, -1 name a folder
    at--1min; 0 is the start)."""
    try:
        minutes = sorted(float(m) for m in cfg.snapshot_minutes.split(",") if m.strip())
    except ValueError:
        minutes = None
    if minutes is None or not all(math.isfinite(m) and m >= 0 for m in minutes):
        raise ValueError(
            f"snapshot_minutes must be minutes >= 0 like '10,20,40', got '{cfg.snapshot_minutes}'"
        )
    return minutes


def flow_config(cfg: TrainConfig) -> FlowConfig:
    """The objective's settings: the TrainConfig fields named as FlowConfig's."""
    return FlowConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(FlowConfig)})
