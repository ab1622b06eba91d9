"""Sampling at scale: a run's sample indices split over torchrun's ranks, written in chunks
that a restarted run never redoes, merged in index order by rank 0.

The plumbing under `sample.py --out DIR` and evaluate.py's sampling (README, "Scaling up").
It relies on one property of `sample.generate`: sample i's noise is a function of (seed, i)
alone (METHOD.md, "Sampling"), so which rank draws a sample, and when, cannot change it. A run
folder holds

    DIR/run.json            the run's settings and provenance, written before any sample
    DIR/chunks/000012.jsonl chunk 12: samples 12 * chunk ... 13 * chunk - 1, written under a
                            temporary name and renamed, so a chunk is on disk whole or not at all
    DIR/samples.jsonl       every sample in index order (rank 0, at the end), each line with
                            the run's settings and provenance

A chunk is one batch of fixed indices whatever the number of ranks, so N ranks compute every
sample in the same batch as one process does and write the same bytes. A run killed at any
instant leaves whole chunks; the same command again draws only the missing ones, on any
number of ranks. A folder that holds another run (other weights, settings or seed) is refused
with one line naming the difference, before anything is written.

    torchrun --standalone --nproc_per_node=8 -- sample.py --ckpt out/elf_b --n 5000 --out samples/elf_b
    python sample.py --ckpt out/tiny --n 64 --out samples/tiny      # one process: the same code, N = 1

Also here, for every entry point: torchrun's process group (`distributed`) and the
provenance of a result (git commit, checkpoint hash).
"""

import contextlib
import datetime
import json
import math
import os
import subprocess
import time

import torch
import torch.distributed as dist

from checkpoint import atomic_write_text


def setup_distributed(device_key: str):
    """-> (rank, world, device). Distributed only when torchrun launched us (it sets LOCAL_RANK):
    its variables are read here, at run time, never at import. A one-process torchrun starts
    the process group too, so that one GPU runs what N do (NCCL, DDP's all-reduce, Muon's
    all-gather); plain `python train.py` never does. Multi-node: torchrun's flags."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available() and device_key in ("auto", "cuda")
    if world == 1 and "LOCAL_RANK" not in os.environ:     # plain python: no process group
        from config import resolve_device
        return 0, 1, resolve_device(device_key)
    if device_key not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device '{device_key}' under torchrun: use auto, cuda or cpu (rank r takes cuda:LOCAL_RANK)")
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


def provenance(ckpt=None):
    """The git commit of this code and a hash of the checkpoint's weights."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                                    capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", None
    out = {"git_commit": commit, "git_dirty": dirty}
    if ckpt:
        import checkpoint
        folder = checkpoint.find(ckpt)
        out["ckpt_folder"] = os.path.abspath(folder)
        out["ckpt_sha256"] = checkpoint.sha256(os.path.join(folder, "model.safetensors"))
    return out


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


# ----------------------------------------------------------------------------------------
# the run folder

def chunk_path(out_dir: str, k: int) -> str:
    return os.path.join(out_dir, "chunks", f"{k:06d}.jsonl")


def differs(old: dict, new: dict):
    """The first setting in which two runs differ, as one line; None when they are the same run."""
    if old["provenance"].get("ckpt_sha256") != new["provenance"].get("ckpt_sha256"):
        return (f"other checkpoint weights (sha256 {str(old['provenance'].get('ckpt_sha256'))[:12]} there, "
                f"{str(new['provenance'].get('ckpt_sha256'))[:12]} here)")
    for key in sorted(set(old["settings"]) | set(new["settings"])):
        a, b = old["settings"].get(key), new["settings"].get(key)
        if a != b:
            return f"{key} {a!r} there, {b!r} here"
    return None


def open_run(out_dir: str, record: dict, n_chunks: int):
    """Rank 0, before any sample: create DIR/run.json, or check that the one there is this run.
    Returns the finished chunks' numbers. Nothing is written when the folder holds another run."""
    path = os.path.join(out_dir, "run.json")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"--out names a folder (samples.jsonl, run.json and chunks go in it); {out_dir} is a file")
    if os.path.isfile(path):
        with open(path) as f:
            old = json.load(f)
        why = differs(old, record)
        if why:
            raise ValueError(f"{out_dir} holds another run: {why} (use another folder, or delete it)")
        if old["provenance"].get("git_commit") != record["provenance"].get("git_commit"):
            print(f"warning: {out_dir} was started at commit {old['provenance'].get('git_commit', '?')[:12]}, this is "
                  f"{record['provenance'].get('git_commit', '?')[:12]}: its finished chunks were drawn by that code",
                  flush=True)
    else:
        os.makedirs(out_dir, exist_ok=True)
        atomic_write_text(path, json.dumps({**record, "runs": []}, indent=2))
    folder = os.path.join(out_dir, "chunks")
    os.makedirs(folder, exist_ok=True)
    done = []
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext == ".jsonl" and stem.isdigit() and int(stem) < n_chunks:
            done.append(int(stem))
        elif ".tmp" in name:                             # a chunk whose writer was killed mid-write
            os.remove(os.path.join(folder, name))
    return done


def read_chunks(out_dir: str, n: int, chunk: int):
    """Every chunk's records, in index order; a chunk that does not hold its indices is an error."""
    records = []
    for k in range(math.ceil(n / chunk)):
        with open(chunk_path(out_dir, k)) as f:
            part = [json.loads(line) for line in f if line.strip()]
        want = list(range(k * chunk, min(n, (k + 1) * chunk)))
        if [r.get("index") for r in part] != want:
            raise ValueError(f"{chunk_path(out_dir, k)} does not hold samples {want[0]}-{want[-1]}: delete it and rerun")
        records += part
    return records


def run(out_dir, settings: dict, prov: dict, n: int, chunk: int, draw, rank: int = 0, world: int = 1,
        progress: bool = False, desc: str = "samples"):
    """draw(indices) -> one record per index (a dict with 'index'), over range(n) in chunks of
    `chunk`, the missing chunks split over the ranks. Every rank returns all n records in index
    order; rank 0 writes DIR/samples.jsonl and logs the run's throughput in DIR/run.json.
    out_dir None: one process, nothing written, the same chunks in memory."""
    from tqdm import tqdm
    if out_dir is None and world > 1:
        raise ValueError("ranks share their samples through a run folder: give one")
    n_chunks = math.ceil(n / chunk)
    # compare as they will read back from run.json (tuples become lists)
    record = json.loads(json.dumps({"settings": {**settings, "n": n, "chunk": chunk}, "provenance": prov}))
    done = set(on_rank0(lambda: open_run(out_dir, record, n_chunks), rank, world)) if out_dir else set()
    todo = [k for k in range(n_chunks) if k not in done]
    mine = todo[rank::world]                             # the missing chunks, dealt out round-robin
    sizes = {k: min(n, (k + 1) * chunk) - k * chunk for k in mine}
    bar = tqdm(total=sum(sizes.values()), desc=f"{desc}, rank {rank}", unit="sample", position=rank,
               disable=not progress, dynamic_ncols=True)
    t0, kept = time.time(), {}
    for k in mine:
        part = draw(list(range(k * chunk, k * chunk + sizes[k])))
        if out_dir:
            atomic_write_text(chunk_path(out_dir, k), "".join(json.dumps(r) + "\n" for r in part))
        else:
            kept[k] = part
        bar.update(sizes[k])
    bar.close()
    mine_stats = (sum(sizes.values()), time.time() - t0)
    stats = [mine_stats] * world
    if world > 1:                                        # also the barrier: every chunk is on disk after it
        dist.all_gather_object(stats, mine_stats)
    records = read_chunks(out_dir, n, chunk) if out_dir else [r for k in sorted(kept) for r in kept[k]]
    if rank != 0:
        return records
    drawn, seconds = sum(s[0] for s in stats), max(s[1] for s in stats)
    rate = drawn / seconds if seconds > 0 else 0.0
    where = ""
    if out_dir:
        line = {k: v for k, v in prov.items() if k in ("git_commit", "git_dirty", "ckpt_folder", "ckpt_sha256")}
        atomic_write_text(os.path.join(out_dir, "samples.jsonl"),
                          "".join(json.dumps({**settings, **line, **r}) + "\n" for r in records))
        with open(os.path.join(out_dir, "run.json")) as f:
            log = json.load(f)
        log["runs"].append({"ranks": world, "drawn": drawn, "resumed": n - drawn, "seconds": round(seconds, 3),
                            "samples_per_s": round(rate, 4),
                            "per_rank_samples_per_s": [round(c / t, 4) if t else 0.0 for c, t in stats]})
        atomic_write_text(os.path.join(out_dir, "run.json"), json.dumps(log, indent=2))
        where = f" in {out_dir}/samples.jsonl"
    print(f"{desc}: {n}{where}; drew {drawn} on {world} rank(s) in {seconds:.1f} s ({rate:.2f} samples/s)"
          + (f", {n - drawn} were already there" if drawn < n else ""), flush=True)
    return records
