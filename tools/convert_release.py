"""The converter of the authors' released ELF checkpoints (a `torch.save` dict with `params`
and `ema_params1` in their parameter names) into this repository's checkpoint folder, which
`sample.py`, `evaluate.py` and `sample.load_sampler` read (METHOD.md, "Released
checkpoints"). The parameter names are ours but for the decoder head, which the release
stores as (in, out) kernels.

    python -m tools.convert_release --convert released.pt --out_dir out/elf_b --encoder t5-small
    python -m tools.convert_release --help
"""

import os
from dataclasses import asdict, dataclass
from typing import Annotated

import torch

from flow import FlowConfig
from lib.checkpoint import guard, save
from lib.config import check_input_length, parse
from lib.guard import Writer, cli
from lib.outputs import first_line, unreadable
from model import ELF, ELFConfig

HEAD = {
    "decoder_head.proj.weight": "proj_kernel",
    "decoder_head.proj.bias": "proj_bias",
    "decoder_head.unembed.weight": "unembed_kernel",
    "decoder_head.unembed.bias": "unembed_bias",
}


def to_release(state: dict) -> dict:
    """This project's state dict -> the released layout."""
    out = {HEAD.get(k, k): v for k, v in state.items()}
    for k in ("proj_kernel", "unembed_kernel"):
        out[k] = out[k].t().contiguous()
    return out


def from_release(state: dict):
    """The released layout -> (ELFConfig keyword arguments, this project's state dict)."""
    state = {k.removeprefix("module.").removeprefix("_orig_mod."): v for k, v in state.items()}
    missing = [
        k
        for k in (
            "self_cond_proj.weight",
            "text_proj.proj2.weight",
            "unembed_kernel",
            "proj_kernel",
            "blocks.0.attn.q_norm.weight",
        )
        if k not in state
    ]
    if missing:
        raise ValueError(
            f"incompatible checkpoint: not the ELF release layout (missing {', '.join(missing)})"
        )
    inv = {v: k for k, v in HEAD.items()}
    ours = {inv.get(k, k): v for k, v in state.items()}
    for k in ("decoder_head.proj.weight", "decoder_head.unembed.weight"):
        ours[k] = ours[k].t().contiguous()
    hidden = state["text_proj.proj2.weight"].shape[0]
    cfg = dict(
        latent_dim=state["self_cond_proj.weight"].shape[0],
        vocab_size=state["unembed_kernel"].shape[1],
        hidden=hidden,
        bottleneck=state["text_proj.proj1.weight"].shape[0],
        depth=1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks.")),
        heads=hidden // state["blocks.0.attn.q_norm.weight"].shape[0],
    )
    return cfg, ours


@dataclass
class ConvertConfig:
    """Convert an authors' released checkpoint (torch.save: params, ema_params1) into a folder."""

    convert: str = ""  # the released .pt file
    out_dir: str = ""  # the checkpoint folder to write (sample.py --ckpt reads it)
    encoder: str = "t5-small"  # the frozen encoder the release was trained with
    latent_mean: float = 0.0  # latent statistics of the release (T5-small: 0.0 / 0.2)
    latent_std: Annotated[float, "positive"] = 0.2
    # the run's sequence length (WMT14: 128, XSum: 1088)
    max_length: Annotated[int, "at_least_1"] = 1024
    max_input_length: int = 0  # > 0: conditional; source's budget (WMT14: 64, XSum: 1024)
    overwrite: bool = False  # replace the checkpoints already in out_dir


def convert_release(cfg: ConvertConfig, warn=print):
    """A released `torch.save` dict -> a checkpoint folder that load / load_sampler / sample.py
    read. Loaded with weights_only=True; EMA weights of None fall back to the raw weights."""
    if not os.path.isfile(cfg.convert):
        raise FileNotFoundError(f"no released checkpoint at {cfg.convert}")
    check_input_length(cfg)
    # refused before the release is read (it may be gigabytes)
    Writer(cfg.out_dir, "out_dir", "elf").check()
    if not cfg.overwrite:
        guard(cfg.out_dir, "out_dir", False)
    try:
        ckpt = torch.load(cfg.convert, map_location="cpu", weights_only=True)
    # empty, truncated, a text file, not torch's, or a pickle weights_only refuses to run
    except Exception as e:  # noqa: BLE001 - whatever fails to load is not a release
        raise unreadable(cfg.convert, e) from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("params"), dict):
        raise ValueError(
            f"incompatible checkpoint {cfg.convert}: expected a dict with 'params' "
            f"and 'ema_params1'"
        )
    if ckpt.get("ema_params1") is None:
        warn(
            f"warning: {cfg.convert} has no EMA weights (ema_params1 is None): "
            f"using params for both"
        )
    arch, params = from_release(ckpt["params"])
    _, ema = from_release(ckpt.get("ema_params1") or ckpt["params"])
    mcfg = ELFConfig(max_seq_len=max(1024, cfg.max_length), **arch)
    model, ema_model = ELF(mcfg), ELF(mcfg)
    try:  # strict: a wrong layout fails here, naming the keys
        model.load_state_dict(params)
        ema_model.load_state_dict(ema)
    except RuntimeError as e:
        raise ValueError(f"incompatible checkpoint {cfg.convert}: {first_line(e)}") from None
    train = {
        "encoder": cfg.encoder,
        "encoder_dtype": "float32",
        "max_length": cfg.max_length,
        "max_input_length": cfg.max_input_length,
        "sample_preset": "cond64" if cfg.max_input_length else "uncond32",
    }
    flow = FlowConfig(decoder_noise_scale=1.0 if cfg.max_input_length else 5.0)
    meta = {
        "train": train,
        "model": asdict(mcfg),
        "flow": asdict(flow),
        "source": cfg.convert,
        "latent_stats": {"mean": cfg.latent_mean, "std": cfg.latent_std},
    }
    with Writer(cfg.out_dir, "out_dir", "elf", warn):
        # deletes only now, the new checkpoint in hand
        guard(cfg.out_dir, "out_dir", cfg.overwrite, warn)
        return save(cfg.out_dir, model, ema_model, None, 0, meta)


def main(argv):
    cfg = parse(argv, ConvertConfig, "-m tools.convert_release")
    if not cfg.convert or not cfg.out_dir:
        raise ValueError("give --convert RELEASED.pt and --out_dir FOLDER")
    print(f"converted to {convert_release(cfg)}")


if __name__ == "__main__":
    cli(main)
