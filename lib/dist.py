"""The process group of every entry point: distributed only when torchrun launched the
process (it sets LOCAL_RANK), read at run time, never at import (README, "Scaling up").

    with distributed(cfg.device) as (rank, world, device):   # plain python: (0, 1, device)
        ...
    value = on_rank0(fn, rank, world)     # fn on rank 0 alone, its result (or error) on every rank
"""

import contextlib
import datetime
import os

import torch
import torch.distributed as dist

from lib.config import resolve_device


def setup_distributed(device_key: str):
    """-> (rank, world, device). Distributed only when torchrun launched us (it sets LOCAL_RANK):
    its variables are read here, at run time, never at import. A one-process torchrun starts
    the process group too, so that one GPU runs what N do (NCCL, DDP's all-reduce, Muon's
    all-gather); plain `python train.py` never does. Multi-node: torchrun's flags."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available() and device_key in ("auto", "cuda")
    if world == 1 and "LOCAL_RANK" not in os.environ:  # plain python: no process group
        return 0, 1, resolve_device(device_key)
    if device_key not in ("auto", "cuda", "cpu"):
        raise ValueError(
            f"device '{device_key}' under torchrun: use auto, cuda or cpu "
            f"(rank r takes cuda:LOCAL_RANK)"
        )
    device = f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    # rank 0 may work alone for long while the others wait at a collective (train.py tokenizes
    # a new corpus; a sampling run hashes the checkpoint): allow it hours, not 10-30 minutes
    dist.init_process_group("nccl" if cuda else "gloo", timeout=datetime.timedelta(hours=6))
    return dist.get_rank(), world, device


@contextlib.contextmanager
def distributed(device_key: str):
    """with distributed(device) as (rank, world, device): setup_distributed, and the process
    group destroyed at the end, however the block ends."""
    rank, world, device = setup_distributed(device_key)
    try:
        yield rank, world, device
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def on_rank0(fn, rank: int, world: int):
    """fn() on rank 0, its result (or its one-line error) sent to every rank: either all ranks
    go on with the same value or all raise, so none waits at a collective for a rank that left."""
    box = [None, None]
    if rank == 0:
        try:
            box[0] = fn()
        except (ValueError, FileNotFoundError) as e:
            box[1] = str(e)
    if world > 1:
        dist.broadcast_object_list(box, src=0)
    if box[1] is not None:
        raise ValueError(box[1])
    return box[0]


def ddp() -> bool:
    """Whether this process runs under torchrun's process group (setup_distributed started it)."""
    return dist.is_available() and dist.is_initialized()
