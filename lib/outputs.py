"""Where an entry point's output goes: the path checked before any work, one writer per folder,
and nothing replaced unless asked. Plumbing, not method: it keeps a run's work from being lost.

    outputs.check_folder(cfg.out_dir, "out_dir")   # before training or sampling:
                                                     a folder we can write
    outputs.check_file(cfg.out, "out")             # a file path we can write (not a folder)
    with outputs.RunLock(cfg.out_dir, "out_dir"):  # a second writer of the folder is refused
        ...                                        # train, distill, convert, fit a judge

Every writer of a folder (train.py, distill.py, the baselines, the release converter) holds its
lock for its whole life. The lock is `<folder>/.lock`, a file naming its holder (process id,
host, start time, command) and locked with flock(2). The kernel drops an flock when its
process ends, however it ends (a SIGKILL, a power cut), so a lock file whose flock is free was
left by a dead writer: it is taken over with a warning. A normal exit removes the file, and
the folders the lock itself created while still empty, so a refused run leaves nothing behind.

`atomic_write_text` and `atomic_write` write a file under a temporary name and rename it
over the path, so a reader sees the old file or the new one, never half of one.

`Log` is a training run's voice: rank 0 alone prints, appends one JSON line per record to
`<out_dir>/metrics.jsonl` (and wandb, when asked), and plots the curves to metrics.png at
the end (`plot_metrics`).
"""

import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import re
import socket
import sys
import time

from tqdm import tqdm

LOCK = ".lock"


# ----------------------------------------------------------------------------------------
# files written whole: a reader sees the old file or the new one, never a mixture


def atomic_write(path, write_fn):
    """write_fn(tmp_path), then rename over path (with ordinary permissions)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        write_fn(tmp)
    except BaseException:  # a full disk, Ctrl-C: no half-written file left behind
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)  # atomic on POSIX: a reader sees the old file or the new one
    except BaseException:  # path is a folder, or the disk went away: no temporary file left
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write_text(path, text: str):
    """Write a text file atomically (config.json, sample and report files)."""

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)

    atomic_write(path, write)


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def first_line(e: Exception) -> str:
    """An exception as one short line: its type and the first line of its message."""
    lines = str(e).strip().splitlines()
    return type(e).__name__ + (f": {lines[0]}" if lines else "")


def unreadable(path: str, e: Exception) -> ValueError:
    """One line for a file torch.load(weights_only=True) refused or could not read: a pickle
    that asks to run code (never run), or a file that is not a torch file (truncated, text)."""
    code = re.search(r"unsupported GLOBAL (\S+)", str(e))
    if code:
        return ValueError(
            f"{path} is refused: it asks to run code ({code.group(1)}), not only to "
            f"hold tensors; it was not written by this repository"
        )
    why = "not a pickle of tensors" if "Weights only load failed" in str(e) else first_line(e)
    return ValueError(f"{path} is not a readable torch file ({why})")


def fsync(*paths):
    """Flush files and folders to the disk (a rename is durable once its folder is synced)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ----------------------------------------------------------------------------------------
# paths checked before the work


def writable_parent(path: str, key: str, folder: str = "") -> str:
    """The nearest existing folder at or above `folder` (default: path itself), where path will
    be written; one line when that folder cannot be written."""
    parent = os.path.abspath(folder or path)
    while not os.path.exists(parent):  # the missing folders are created at the first write
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"{key} {path} is not writable ({parent} is a file, not a folder)")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{key} {path} is not writable ({parent} is a read-only folder)")
    return parent


def check_folder(path: str, key: str):
    """Before the work: path is, or can become, a folder this process can write."""
    if os.path.islink(path) and not os.path.exists(path):
        raise ValueError(
            f"{key} {path} is a link to {os.readlink(path)}, which does not exist: "
            f"create its target or give another --{key}"
        )
    if os.path.isfile(path):
        raise ValueError(f"{key} {path} is a file: give a folder")
    writable_parent(path, key)


def check_file(path: str, key: str):
    """Before the work: path is, or can become, a file this process can write."""
    if os.path.isdir(path):
        raise ValueError(f"{key} {path} is a folder: give a file path")
    # files are written beside their path and renamed over it: what matters is the folder
    writable_parent(path, key, os.path.dirname(os.path.abspath(path)))


def describe(holder: bytes) -> str:
    """The holder a lock file names, in words."""
    try:
        h = json.loads(holder)
        return f"process {h['pid']} on {h['host']}, started {h['started']}: {h['command']}"
    except (ValueError, KeyError, TypeError):
        return "an unknown process"


def in_use(folder: str, holder: str, key: str) -> ValueError:
    """The one line of a folder another live writer holds (`holder`: describe's words)."""
    return ValueError(
        f"{folder} is in use by {holder}; one writer per folder: wait for it to "
        f"end, or choose another --{key}"
    )


def flock_retrying(fd, seconds: float = 0.5):
    """An exclusive flock, retried for a moment: another writer's probe (busy_holder) holds a
    shared one for an instant; a live writer holds it for good."""
    deadline = time.time() + seconds
    while True:
        try:
            return fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


class RunLock:
    """One writer per folder: `with RunLock(folder, key):` holds <folder>/.lock (see the module
    docstring)."""

    def __init__(self, folder: str, key: str = "out_dir", log=print):
        self.folder, self.key, self.log = folder, key, log
        self.path, self.fd, self.made = os.path.join(folder, LOCK), None, []

    def __enter__(self):
        check_folder(self.folder, self.key)
        missing, d = [], os.path.abspath(self.folder)
        while not os.path.exists(d):  # created here, removed on release if still empty
            missing.append(d)
            d = os.path.dirname(d)
        os.makedirs(self.folder, exist_ok=True)
        self.made = missing
        while self.fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                flock_retrying(fd)
            except BlockingIOError:
                holder = os.read(fd, 4096)
                os.close(fd)
                self.remove_made()
                raise in_use(self.folder, describe(holder), self.key) from None
            try:  # its last holder may have removed the file meanwhile
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
            else:
                os.close(fd)
        left = os.read(self.fd, 4096)
        if left.strip():  # flock free but the file written: its writer died
            self.log(
                f"warning: {self.path} was left by {describe(left)}, "
                f"which is no longer running: taken over"
            )
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(holder).encode(), 0)
        return self

    def __exit__(self, *exc):
        try:
            os.unlink(self.path)  # before the flock goes: no second holder of one file
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
        self.remove_made()
        return False

    def remove_made(self):
        for d in self.made:  # innermost first; a folder with anything in it stays
            try:
                os.rmdir(d)
            except OSError:
                break
        self.made = []


class Progress:
    """A training run's progress bar (tqdm; `on` for rank 0 alone). With a time limit its total is
    the step the run will end at: max_steps, or the steps the time left allows at the mean rate
    so far. tqdm's own estimate, at smoothing 0, divides the steps left by that same mean rate,
    so the time it shows left is the time limit's (within a step), not max_steps'."""

    def __init__(
        self, max_steps: int, step: int, time_limit_min: float = 0.0, on: bool = True, desc=None
    ):
        self.max_steps, self.limit, self.step0, self.t0 = (
            max_steps,
            time_limit_min,
            step,
            time.time(),
        )
        self.bar = tqdm(
            total=max_steps,
            initial=step,
            desc=desc,
            dynamic_ncols=True,
            disable=not on,
            smoothing=0,
            # a log file: a line every 30 s
            mininterval=0.1 if sys.stderr.isatty() else 30,
        )

    def update(self, step: int, minutes: float):
        """The run is at `step` after `minutes` of training (its clock, across resumes)."""
        if self.limit > 0 and step > self.step0:
            rate = (step - self.step0) / max(time.time() - self.t0, 1e-9)  # steps a second
            left = max(0.0, 60 * (self.limit - minutes))
            self.bar.total = max(step, min(self.max_steps, step + round(rate * left)))
        self.bar.update(step - self.bar.n)

    def set_postfix(self, values: dict):
        self.bar.set_postfix(values, refresh=False)  # shown at the bar's next refresh

    def write(self, line: str):
        self.bar.write(line)

    def close(self):
        self.bar.close()


class Log:
    """Rank 0 alone speaks: prints, one JSON line per record in out_dir/metrics.jsonl, an
    optional wandb run, and a plot of the curves (metrics.png) at the end."""

    def __init__(self, cfg, rank: int, kept=None):
        self.on, self.t0, self.run = rank == 0, time.time(), None
        self.kept = kept  # out_dir -> what is kept, in words
        self.path = os.path.join(cfg.out_dir, "metrics.jsonl")
        if self.on and getattr(cfg, "wandb", False):
            import wandb  # imported only when asked for

            self.run = wandb.init(project=cfg.wandb_project, config=dataclasses.asdict(cfg))

    def __call__(self, *args):
        if self.on:
            print(*args, flush=True)

    def record(self, **values):
        """Append {minutes, **values} to metrics.jsonl (and wandb)."""
        if not self.on:
            return
        values = {"minutes": round((time.time() - self.t0) / 60, 4), **values}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        try:
            with open(self.path, "a") as f:
                f.write(json.dumps(values) + "\n")
        except OSError as e:  # a full disk: one line; checkpoints are written apart
            kept = f"; {self.kept(os.path.dirname(self.path))}" if self.kept else ""
            raise ValueError(
                f"could not append step {values['step']} to {self.path} ({first_line(e)}){kept}"
            ) from None
        if self.run is not None:
            self.run.log(values, step=values["step"])

    def close(self):
        if self.on and os.path.isfile(self.path):
            plot_metrics(self.path)
        if self.run is not None:
            self.run.finish()


def metric_records(path) -> list:
    """The records of a metrics.jsonl (Log.record's), in order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_summary(folder) -> dict:
    """What the results tables read of a run's metrics.jsonl: its last step, the minutes of its
    last record, its last validation losses (val_mse, val_ce; absent before the first)."""
    recs = metric_records(os.path.join(folder, "metrics.jsonl"))
    val = [r for r in recs if "val_mse" in r]
    last = {k: val[-1][k] for k in ("val_mse", "val_ce")} if val else {}
    return {"steps": max(r["step"] for r in recs), "minutes": recs[-1]["minutes"], **last}


def plot_metrics(path):
    """metrics.png beside metrics.jsonl: train loss and validation MSE / CE against minutes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = metric_records(path)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    titles = ("train loss", "val denoise MSE", "val decode CE")
    for ax, key, title in zip(axes, ("loss", "val_mse", "val_ce"), titles):
        pts = [(r["minutes"], r[key]) for r in recs if key in r]
        if pts:
            ax.plot(*zip(*pts), marker="." if key != "loss" else None)
        ax.set(xlabel="minutes", title=title)
    fig.tight_layout()
    fig.savefig(os.path.splitext(path)[0] + ".png", dpi=100)
    plt.close(fig)
