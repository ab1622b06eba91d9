"""Where an entry point's output goes: the path checked before any work, one writer per folder,
and nothing replaced unless asked. Plumbing, not method: it keeps a run's work from being lost.

    outputs.check_folder(cfg.out_dir, "out_dir")   # before training or sampling: a folder we can write
    outputs.check_file(cfg.out, "out")             # a file path we can write (not a folder)
    with outputs.RunLock(cfg.out_dir, "out_dir"):  # a second writer of the folder is refused
        ...                                        # train, distill, convert, fit a judge

Every writer of a folder (train.py, distill.py, judge.py, checkpoint.py --convert) holds its
lock for its whole life. The lock is `<folder>/.lock`, a file naming its holder (process id,
host, start time, command) and locked with flock(2). The kernel drops an flock when its
process ends, however it ends (a SIGKILL, a power cut), so a lock file whose flock is free was
left by a dead writer: it is taken over with a warning. A normal exit removes the file, and
the folders the lock itself created while still empty, so a refused run leaves nothing behind.
"""

import datetime
import fcntl
import json
import os
import socket
import sys

LOCK = ".lock"


def writable_parent(path: str, key: str, folder: str = "") -> str:
    """The nearest existing folder at or above `folder` (default: path itself), where path will
    be written; one line when that folder cannot be written."""
    parent = os.path.abspath(folder or path)
    while not os.path.exists(parent):               # the missing folders are created at the first write
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"{key} {path} is not writable ({parent} is a file, not a folder)")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{key} {path} is not writable ({parent} is a read-only folder)")
    return parent


def check_folder(path: str, key: str):
    """Before the work: path is, or can become, a folder this process can write."""
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


class RunLock:
    """One writer per folder: `with RunLock(folder, key):` holds <folder>/.lock (see the module docstring)."""

    def __init__(self, folder: str, key: str = "out_dir", log=print):
        self.folder, self.key, self.log = folder, key, log
        self.path, self.fd, self.made = os.path.join(folder, LOCK), None, []

    def __enter__(self):
        check_folder(self.folder, self.key)
        missing, d = [], os.path.abspath(self.folder)
        while not os.path.exists(d):                   # created here, removed on release if still empty
            missing.append(d)
            d = os.path.dirname(d)
        os.makedirs(self.folder, exist_ok=True)
        self.made = missing
        while self.fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 4096)
                os.close(fd)
                self.remove_made()
                raise ValueError(f"{self.folder} is in use by {describe(holder)}; one writer per folder: wait "
                                 f"for it to end, or choose another --{self.key}") from None
            try:                                        # its last holder may have removed the file meanwhile
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
            else:
                os.close(fd)
        left = os.read(self.fd, 4096)
        if left.strip():                                # flock free but the file written: its writer died
            self.log(f"warning: {self.path} was left by {describe(left)}, which is no longer running: taken over")
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": datetime.datetime.now().isoformat(timespec="seconds"), "command": " ".join(sys.argv)}
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(holder).encode(), 0)
        return self

    def __exit__(self, *exc):
        try:
            os.unlink(self.path)                        # before the flock goes: no second holder of one file
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
        self.remove_made()
        return False

    def remove_made(self):
        for d in self.made:                             # innermost first; a folder with anything in it stays
            try:
                os.rmdir(d)
            except OSError:
                break
        self.made = []
