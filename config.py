"""The strict command-line and config-file parser that every entry point shares.

    cfg = parse(["configs/tiny.py", "--batch_size=16", "--compile"], TrainConfig)

Defaults come from a dataclass, then an optional config file (a Python file run with
runpy, as nanoGPT's are: it is code, so only run config files you trust; its public names
are the keys), then `--key=value` / `--key value` overrides, parsed with each field's type
(an int is fine where a float is expected; `none` for Optional fields; `--flag` alone sets a
bool to true). Unknown keys and wrong types raise a ValueError that names the key, as does
a float that is not finite (`nan`, `inf`: no key of this project means either), and `--help`
prints every key with its default and the comment beside its field. Values that hold several
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
        raise ValueError(f"config key '{key}' expects {base.__name__}, got {type(value).__name__} {value!r}")
    return finite(key, value)


def finite(key, value):
    """A float key's value, refused when it is nan or infinite: a learning rate of inf or a
    noise scale of nan would train to a loss of nan rather than fail."""
    if type(value) is float and not math.isfinite(value):
        raise ValueError(f"config key '{key}' must be a finite number, got {value}")
    return value


def comma_list(key: str, raw: str, kind=int) -> list:
    """'0,1,2' -> [0, 1, 2] for the key `key`; an empty or malformed list names the key."""
    try:
        values = [finite(key, kind(v)) for v in raw.split(",")]
    except ValueError:
        raise ValueError(f"'{key}' expects a comma list of {kind.__name__}, got '{raw}'") from None
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
    """{field: the comment beside it in the dataclass source}: the text of --help."""
    out = {}
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+)\s*:[^#]*#\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def usage(cls, prog: str) -> str:
    """The --help text: usage, then one line per key with its type, default and comment."""
    hints, notes = typing.get_type_hints(cls), field_comments(cls)
    lines = [f"usage: python {prog} [config.py] [--key=value | --key value | --flag ...]",
             (inspect.getdoc(cls) or "").split("\n")[0], "", "keys (default; what it does):"]
    for f in dataclasses.fields(cls):
        name = getattr(hints[f.name], "__name__", None) or str(hints[f.name]).replace("typing.", "")
        lines.append(f"  --{f.name} ({name}, default {f.default!r})  {notes.get(f.name, '')}".rstrip())
    return "\n".join(lines)


def split_args(args, hints):
    """'--key value' -> '--key=value'; a bare '--flag' of a bool field -> '--flag=true'."""
    hints = {k: bool if h in (bool, typing.Optional[bool]) else h for k, h in hints.items()}
    out = []
    for a in args:
        if out and out[-1].startswith("--") and "=" not in out[-1] and not a.startswith("--") and \
                (hints.get(out[-1][2:]) is not bool or a.lower() in ("true", "false", "1", "0")):
            out[-1] += "=" + a
        else:
            out.append(a)
    return [f"{a}=true" if a.startswith("--") and "=" not in a and hints.get(a[2:]) is bool else a for a in out]


def run_file(path: str) -> dict:
    """Run a config file; an error in it becomes one line with the file, the line and the message.
    (Everything raised here comes from the user's file, not from this project's code.)"""
    try:
        return runpy.run_path(path)
    except SyntaxError as e:
        raise ValueError(f"config file {path}:{e.lineno}: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - any error in a config file is the file's, named with its line
        import traceback
        line = next((fr.lineno for fr in reversed(traceback.extract_tb(e.__traceback__))
                     if os.path.abspath(fr.filename) == os.path.abspath(path)), "?")
        raise ValueError(f"config file {path}:{line}: {type(e).__name__}: {e}") from None


RANGES = {"at_least_1": (lambda v: v >= 1, "must be >= 1"), "non_negative": (lambda v: v >= 0, "must be >= 0"),
          "positive": (lambda v: v > 0, "must be > 0"), "probability": (lambda v: 0 <= v <= 1, "must lie in [0, 1]"),
          "fraction": (lambda v: 0 < v < 1, "must lie in (0, 1)")}


def check_ranges(cfg, **keys):
    """Range checks at parse time, e.g. check_ranges(cfg, at_least_1=("batch_size",)): the
    first value out of its range stops with one line naming the key and the value. A key
    whose value is None (an optional override left unset) is skipped."""
    for kind, names in keys.items():
        ok, rule = RANGES[kind]
        for key in names:
            value = getattr(cfg, key)
            if value is not None and not ok(value):
                raise ValueError(f"{key} {rule}, got {value}")


def parse(argv, cls, prog: str = ""):
    """[config.py] [--key=value | --key value | --flag ...] -> cls instance. Later sources win.
    --help / -h prints usage(cls) and exits."""
    if "--help" in argv or "-h" in argv:
        print(usage(cls, prog or os.path.basename(sys.argv[0])))
        sys.exit(0)
    hints = typing.get_type_hints(cls)
    values = {}
    args = list(argv)
    if args and not args[0].startswith("--"):
        path = args.pop(0)
        if os.path.isdir(path):
            raise ValueError(f"config file {path} is a folder: give a Python file such as configs/tiny.py")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"config file not found: {path}")
        for k, v in run_file(path).items():
            if k.startswith("_") or callable(v) or type(v).__name__ == "module":
                continue
            if k not in hints:
                raise ValueError(f"unknown config key '{k}' in {path}")
            values[k] = coerce(k, v, hints[k], cli=False)
    for arg in split_args(args, hints):
        if not arg.startswith("--"):
            raise ValueError(f"expected --key=value or --key value, got '{arg}'")
        if "=" not in arg:
            k = arg[2:]
            raise ValueError(f"unknown config key '{k}'" if k not in hints else f"config key '{k}' needs a value")
        k, v = arg[2:].split("=", 1)
        if k not in hints:
            raise ValueError(f"unknown config key '{k}'")
        values[k] = coerce(k, v, hints[k], cli=True)
    return cls(**values)
