"""Sampling at scale: a run's sample indices split over torchrun's ranks, written in chunks
that a restarted run never redoes, merged in index order by rank 0.

The plumbing under `sample.py --out DIR` and evaluate.py's sampling (README, "Scaling up").
It relies on one property of `sample.generate`: sample i's noise is a function of (seed, i)
alone (METHOD.md, "Sampling"), so which rank draws a sample, and when, cannot change it. A run
folder holds

    DIR/run.json            the run's settings and provenance, once, written before any sample
    DIR/chunks/000012.jsonl while the run goes on, chunk 12: samples 12 * chunk ... 13 * chunk
                            - 1, written under a temporary name and renamed, so a chunk is on
                            disk whole or not at all
    DIR/samples.jsonl       when it is done, every sample in index order (rank 0), one line each
                            ({text, nfe, seed, index}); the chunks are then deleted

A chunk is one batch of fixed indices whatever the number of ranks, so N ranks compute every
sample in the same batch as one process does and write the same bytes. A run killed at any
instant leaves whole chunks; the same command again draws only the missing ones, on any
number of ranks (a finished run, none). A folder that holds another run (other weights,
settings or seed) is refused with one line naming the difference, before anything is written.

    torchrun --standalone --nproc_per_node=8 -- sample.py --ckpt out/elf_b --n 5000 \
        --out samples/elf_b
    python sample.py --ckpt out/tiny --n 64 --out samples/tiny  # one process: the same code, N = 1
"""

import json
import math
import os
import shutil
import time

import torch.distributed as dist
from tqdm import tqdm

from lib.dist import on_rank0
from lib.outputs import atomic_write_text, first_line

# ----------------------------------------------------------------------------------------
# the run folder


def chunk_path(out_dir: str, k: int) -> str:
    return os.path.join(out_dir, "chunks", f"{k:06d}.jsonl")


def differs(old: dict, new: dict):
    """The first setting in which two runs differ, as one line; None when they are the same run."""
    if old["provenance"].get("ckpt_sha256") != new["provenance"].get("ckpt_sha256"):
        return (
            f"other checkpoint weights "
            f"(sha256 {str(old['provenance'].get('ckpt_sha256'))[:12]} there, "
            f"{str(new['provenance'].get('ckpt_sha256'))[:12]} here)"
        )
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
        raise ValueError(
            f"--out names a folder (samples.jsonl, run.json and chunks go in it); "
            f"{out_dir} is a file"
        )
    if os.path.isdir(path) or os.path.isfile(os.path.join(out_dir, "chunks")):
        what = "run.json is a folder" if os.path.isdir(path) else "chunks is a file"
        raise ValueError(f"{out_dir} is not a sampling run's folder ({what}): use another folder")
    if os.path.isfile(path):
        old = read_json(path)
        if not (
            isinstance(old, dict)
            and isinstance(old.get("settings"), dict)
            and isinstance(old.get("provenance"), dict)
            and isinstance(old.get("runs"), list)
        ):
            raise ValueError(
                f"{path} is not a sampling run's record: use another folder, or delete it"
            )
        why = differs(old, record)
        if why:
            raise ValueError(
                f"{out_dir} holds another run: {why} (use another folder, or delete it)"
            )
        if old["provenance"].get("git_commit") != record["provenance"].get("git_commit"):
            print(
                f"warning: {out_dir} was started at commit "
                f"{old['provenance'].get('git_commit', '?')[:12]}, this is "
                f"{record['provenance'].get('git_commit', '?')[:12]}: "
                f"its finished chunks were drawn by that code",
                flush=True,
            )
    else:
        os.makedirs(out_dir, exist_ok=True)
        atomic_write_text(path, json.dumps({**record, "runs": []}, indent=2))
    if finished(out_dir, record["settings"]["n"]) is not None:
        return list(range(n_chunks))
    folder = os.path.join(out_dir, "chunks")
    os.makedirs(folder, exist_ok=True)
    done = []
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext == ".jsonl" and stem.isdigit() and int(stem) < n_chunks:
            done.append(int(stem))
        elif ".tmp" in name:  # a chunk whose writer was killed mid-write
            os.remove(os.path.join(folder, name))
    return done


def read_json(path: str):
    """A JSON file, or one line naming it when it is not JSON (a damaged chunk, a run.json)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(
            f"{path} is damaged (not JSON: {first_line(e)}): delete it and rerun"
        ) from None


def read_jsonl(path: str) -> list:
    """The records of a JSONL file (a chunk, samples.jsonl), or one line naming the damage."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(
            f"{path} is damaged (not JSON lines: {first_line(e)}): delete it and rerun"
        ) from None


def finished(out_dir: str, n: int):
    """The records of a finished run's samples.jsonl of n samples in out_dir, else None."""
    path = os.path.join(out_dir, "samples.jsonl")
    if not os.path.isfile(path):
        return None
    records = read_jsonl(path)
    if not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path} is damaged (a line is not a sample): delete it and rerun")
    return records if len(records) == n else None


def read_chunks(out_dir: str, n: int, chunk: int):
    """Every record in index order: a finished run's samples.jsonl, else every chunk's; a chunk
    that does not hold its indices is an error."""
    records = finished(out_dir, n)
    if records is not None:
        return records
    records = []
    for k in range(math.ceil(n / chunk)):
        part = read_jsonl(chunk_path(out_dir, k))
        want = list(range(k * chunk, min(n, (k + 1) * chunk)))
        if [r.get("index") if isinstance(r, dict) else None for r in part] != want:
            raise ValueError(
                f"{chunk_path(out_dir, k)} does not hold samples "
                f"{want[0]}-{want[-1]}: delete it and rerun"
            )
        records += part
    return records


def run(
    out_dir,
    settings: dict,
    prov: dict,
    n: int,
    chunk: int,
    draw,
    rank: int = 0,
    world: int = 1,
    progress: bool = False,
    desc: str = "samples",
):
    """draw(indices) -> one record per index (a dict with 'index'), over range(n) in chunks of
    `chunk`, the missing chunks split over the ranks. Every rank returns all n records in index
    order; rank 0 writes DIR/samples.jsonl, deletes the chunks and logs the run's throughput in
    DIR/run.json."""
    n_chunks = math.ceil(n / chunk)
    # compare as they will read back from run.json (tuples become lists)
    record = json.loads(
        json.dumps({"settings": {**settings, "n": n, "chunk": chunk}, "provenance": prov})
    )
    done = set(on_rank0(lambda: open_run(out_dir, record, n_chunks), rank, world))
    todo = [k for k in range(n_chunks) if k not in done]
    mine = todo[rank::world]  # the missing chunks, dealt out round-robin
    sizes = {k: min(n, (k + 1) * chunk) - k * chunk for k in mine}
    bar = tqdm(
        total=sum(sizes.values()),
        desc=f"{desc}, rank {rank}",
        unit="sample",
        position=rank,
        disable=not progress,
        dynamic_ncols=True,
    )
    t0 = time.time()
    try:
        for k in mine:
            part = draw(list(range(k * chunk, k * chunk + sizes[k])))
            atomic_write_text(chunk_path(out_dir, k), "".join(json.dumps(r) + "\n" for r in part))
            bar.update(sizes[k])
    except KeyboardInterrupt:  # Ctrl-C: one line; the finished chunks are kept
        have = len([f for f in os.listdir(os.path.join(out_dir, "chunks")) if f.endswith(".jsonl")])
        raise KeyboardInterrupt(
            f"interrupted: {have} of {n_chunks} chunks are in "
            f"{out_dir}/chunks; the same command draws the rest"
        ) from None
    bar.close()
    mine_stats = (sum(sizes.values()), time.time() - t0)
    stats = [mine_stats] * world
    if world > 1:  # also the barrier: every chunk is on disk after it
        dist.all_gather_object(stats, mine_stats)
    records = read_chunks(out_dir, n, chunk)
    if world > 1:  # every rank has read them before rank 0 deletes
        dist.barrier()
    if rank != 0:
        return records
    drawn, seconds = sum(s[0] for s in stats), max(s[1] for s in stats)
    rate = drawn / seconds if seconds > 0 else 0.0
    # the samples once, the settings and provenance once (in run.json): the chunks have served
    atomic_write_text(
        os.path.join(out_dir, "samples.jsonl"), "".join(json.dumps(r) + "\n" for r in records)
    )
    shutil.rmtree(os.path.join(out_dir, "chunks"), ignore_errors=True)
    log = read_json(os.path.join(out_dir, "run.json"))
    log["runs"].append(
        {
            "ranks": world,
            "drawn": drawn,
            "resumed": n - drawn,
            "seconds": round(seconds, 3),
            "samples_per_s": round(rate, 4),
            "per_rank_samples_per_s": [round(c / t, 4) if t else 0.0 for c, t in stats],
        }
    )
    atomic_write_text(os.path.join(out_dir, "run.json"), json.dumps(log, indent=2))
    print(
        f"{desc}: {n} in {out_dir}/samples.jsonl; drew {drawn} on {world} rank(s) "
        f"in {seconds:.1f} s ({rate:.2f} samples/s)"
        + (f", {n - drawn} were already there" if drawn < n else ""),
        flush=True,
    )
    return records
