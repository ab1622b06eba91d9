"""A strict nanoGPT-style configurator for any dataclass (ELF_SPEC: none; STYLE.md point 2).

    cfg = parse(["configs/tiny.py", "--batch_size=16"], TrainConfig)

Defaults come from the dataclass, then the config file (run with runpy; its public
names are the keys), then `--key=value` overrides, parsed with each field's type (an int
is fine where a float is expected; `none` for Optional fields; split on the first '=').
Unknown keys and wrong types raise a ValueError that names the key. train.py, distill.py
and the conditional trainers share it, so it lives apart from any one script.
"""

import os
import runpy
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
            return base(value)
        except ValueError:
            raise ValueError(f"config key '{key}' expects {base.__name__}, got '{value}'") from None
    if value is None and optional:
        return None
    if base is float and type(value) is int:
        return float(value)
    if type(value) is not base:
        raise ValueError(f"config key '{key}' expects {base.__name__}, got {type(value).__name__} {value!r}")
    return value


def parse(argv, cls):
    """[config.py] [--key=value ...] -> cls instance. Later sources win."""
    hints = typing.get_type_hints(cls)
    values = {}
    args = list(argv)
    if args and not args[0].startswith("--"):
        path = args.pop(0)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"config file not found: {path}")
        for k, v in runpy.run_path(path).items():
            if k.startswith("_") or callable(v) or type(v).__name__ == "module":
                continue
            if k not in hints:
                raise ValueError(f"unknown config key '{k}' in {path}")
            values[k] = coerce(k, v, hints[k], cli=False)
    for arg in args:
        if not arg.startswith("--") or "=" not in arg:
            raise ValueError(f"expected --key=value, got '{arg}'")
        k, v = arg[2:].split("=", 1)
        if k not in hints:
            raise ValueError(f"unknown config key '{k}'")
        values[k] = coerce(k, v, hints[k], cli=True)
    return cls(**values)
