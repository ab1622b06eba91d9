"""The guard of every command: where its output may go (`Writer`, the one guard of every
writer) and how it ends (`cli`: one line for every error, Ctrl-C included; `finish_first`: a
Ctrl-C during a save ends the save first).

    with Writer(cfg.out_dir, "out_dir", "elf") as w:   # w.holds: output of this kind there
        ...
    if __name__ == "__main__":
        cli(main)

A folder's kind (KINDS: a run, a judge, an evaluation, a sampling run, ...) is written into its
`.kind` marker by its first writer and read back by `kind_of` (folders written before markers:
from their files), so that no command replaces another kind of output, --overwrite or not.
"""

import contextlib
import fcntl
import json
import os
import re
import signal
import sys
import threading

from lib.outputs import LOCK, RunLock, atomic_write_text, check_folder, describe, first_line, in_use

STEP_FOLDER = re.compile(r"(\.tmp-)?step-\d+(-\d+)?")


def checkpoint_manifest(path: str) -> bool:
    """Whether path is a checkpoint's manifest.json (its step and files), not any such file."""
    try:
        with open(path) as f:
            return {"step", "files"} <= set(json.load(f))
    except (OSError, ValueError, TypeError):
        return False


def in_step_folder(path: str):
    """The step folder of a run (step-N, or a folder holding a manifest.json) that path is or
    lies in, else None: what is written there is deleted when the run prunes that step."""
    d = os.path.abspath(path)
    while True:
        named = STEP_FOLDER.fullmatch(os.path.basename(d))
        if (
            named and os.path.isfile(os.path.join(os.path.dirname(d), "latest"))
        ) or checkpoint_manifest(os.path.join(d, "manifest.json")):
            return d
        if os.path.dirname(d) == d:
            return None
        d = os.path.dirname(d)


def check_outside_step_folders(path: str, key: str):
    """A writer's folder is not a run's step folder, nor inside one (what is written there is
    deleted when the run prunes that step)."""
    step = in_step_folder(path)
    if step and step == os.path.abspath(path):
        run = os.path.dirname(os.path.normpath(path)) or "."
        raise ValueError(
            f"{key} {path} is a step folder of a run, not a run folder: give the "
            f"run's folder ({run})"
        )
    if step:
        raise ValueError(
            f"{key} {path} is inside the step folder {step}, which its run deletes "
            f"when it prunes that step: give a folder outside it"
        )


def busy_holder(path: str):
    """The holder of a lock file that a live process holds, in words; None when it is free."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file: no writer
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a probe: taken and dropped at once
        return None
    except BlockingIOError:
        return describe(os.read(fd, 4096))
    finally:
        os.close(fd)


KIND = ".kind"  # what an output folder holds, written by its first writer


KINDS = {
    "elf": "an ELF run",
    "distill": "distillation rounds",
    "mdlm": "an MDLM run",
    "gpt2": "a GPT-2 (the AR baseline or a judge)",
    "gpt2_cond": "a conditional GPT-2 (the conditional AR baseline)",
    "samples": "a sampling run",
    "eval": "an evaluation",
    "ablation": "an ablation's report",
}


# the kinds whose writers save step folders (lib/checkpoint.save_step), by the format of
# the folders' files (steps_held): ELF's and MDLM's, and the conditional GPT-2's
STEP_FORMATS = {"elf": ("elf", "mdlm"), "gpt2_cond": ("gpt2_cond",)}
STEP_KINDS = ("elf", "mdlm", "gpt2_cond")


# the command that reads each kind of folder: named when a folder is given to another one
READ_BY = {
    "elf": "sample.py --ckpt or evaluate.py --ckpt",
    "distill": "sample.py --ckpt DIR/round<k>, or evaluate.py --distill",
    "mdlm": "python -m baselines.mdlm --ckpt",
    "gpt2": "evaluate.py --judge, or evaluate.py --samples DIR/samples.jsonl",
    "gpt2_cond": "python -m baselines.ar_cond --ckpt",
    "samples": "evaluate.py --samples",
}


def what_is(folder: str) -> str:
    """' (it holds ...: COMMAND reads it)' for a folder of this project's output that is not
    what a command looked for, else '': the words a 'no checkpoint at DIR' line ends with."""
    try:
        kind = kind_of(folder) if os.path.isdir(folder) else None
    except ValueError:  # a marker that names nothing: no kind to name
        kind = None
    if kind is None:
        return ""
    reader = f": {READ_BY[kind]} reads it" if kind in READ_BY else ""
    return f" (it holds {KINDS[kind]}{reader})"


def gpt2_config(path: str) -> bool:
    """Whether path is a Hugging Face GPT-2 config.json (a judge's, or the AR baseline's)."""
    try:
        with open(path) as f:
            return json.load(f).get("model_type") == "gpt2"
    except (OSError, ValueError, AttributeError):
        return False


def marked(folder: str):
    """What a folder's .kind marker says (stripped), None when it has none; an unreadable
    marker reads as its error, in one line, which names no kind."""
    marker = os.path.join(folder, KIND)
    if not os.path.lexists(marker):
        return None
    try:
        with open(marker, encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError) as e:
        return first_line(e)


def steps_held(folder: str, names):
    """Whose checkpoints the step folders among a folder's `names` are: 'gpt2_cond' (each
    step-N holds a train.json: the conditional GPT-2's), 'elf' (ELF's or MDLM's, one format),
    '' (a `latest` or a killed save's temporary folder only: either's), None (none)."""
    if not any(n == "latest" or STEP_FOLDER.fullmatch(n) for n in names):
        return None
    steps = [n for n in names if re.fullmatch(r"step-\d+", n)]
    if not steps:
        return ""
    cond = all(os.path.isfile(os.path.join(folder, n, "train.json")) for n in steps)
    return "gpt2_cond" if cond else "elf"


def kind_of(folder: str):
    """What an output folder holds (a key of KINDS), from its marker or, for folders written
    before markers, from its files; None when it holds no output of this project."""
    kind = marked(folder)
    if kind is not None:  # what it says is checked: never read as "holds nothing"
        marker = os.path.join(folder, KIND)
        if kind not in KINDS:
            raise ValueError(
                f"{marker} does not name what {folder} holds ({kind[:40] or 'it is empty'}): "
                f"look at the folder, then write its kind into the marker "
                f"({', '.join(KINDS)}) or give another folder"
            )
        held = steps_held(folder, os.listdir(folder))
        # checked against the files: a run's checkpoints under another kind's marker
        if held is not None and kind not in STEP_FORMATS.get(held, STEP_KINDS):
            whose = {"gpt2_cond": "a conditional GPT-2 run", "elf": "an ELF or MDLM run"}
            raise ValueError(
                f"{marker} says {folder} holds {KINDS[kind]}, but it holds "
                f"{whose.get(held, 'a run')}'s "
                f"checkpoints: look at the folder, or give another folder"
            )
        return kind
    names = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    if steps_held(folder, names) == "gpt2_cond":  # its marker lost
        return "gpt2_cond"
    if names & {"tokenizer_config.json", "tokenizer.json", "train_log.json"} or gpt2_config(
        os.path.join(folder, "config.json")
    ):  # a judge a kill left before its tokenizer: its weights and config.json
        return "gpt2"
    # a run's checkpoint before what may sit beside it (an evaluation written into the run)
    if steps_held(folder, names) is not None or (
        "model.safetensors" in names and "config.json" in names
    ):
        try:
            with open(os.path.join(folder, "config.json")) as f:
                return "mdlm" if json.load(f).get("kind") == "mdlm" else "elf"
        except (OSError, ValueError, AttributeError):
            return "elf"
    if any(re.fullmatch(r"round\d+", n) for n in names):
        return "distill"
    if "run.json" in names:
        return "samples"
    if "ablation.png" in names:
        return "ablation"
    if "report.json" in names:
        try:
            with open(os.path.join(folder, "report.json")) as f:
                return "ablation" if "arms" in json.load(f) else "eval"
        except (OSError, ValueError, TypeError):
            return "eval"
    return None


class Writer:
    """The one guard of every command that writes a folder (train.py, distill.py, sample.py
    --out, evaluate.py, the baselines, the release converter, ablations):

        with Writer(cfg.out_dir, "out_dir", "elf") as w:   # w.holds: output of this kind there
            ...

    Before any work: the folder can be written, is not a run's step folder nor inside one (a
    prune would delete it), and holds no output of another kind: --overwrite replaces a
    writer's own kind of output, never someone else's. Then its lock (RunLock) is held for
    the writer's life, and the folder is marked with its kind. A writer that wrote nothing
    leaves nothing behind. Whether output of its own kind may be replaced, continued or
    resumed is each writer's rule (`holds` says whether there is any)."""

    def __init__(self, folder: str, key: str, kind: str, log=print):
        self.folder, self.key, self.kind, self.log = folder, key, kind, log
        self.lock, self.marked, self.holds, self.before = None, False, False, set()

    def check(self, probe: bool = True):
        """The path rules (and, with probe, whether a live writer holds the folder's lock), no
        lock taken: what a command checks before it loads anything."""
        check_folder(self.folder, self.key)
        check_outside_step_folders(self.folder, self.key)
        busy = probe and busy_holder(os.path.join(self.folder, LOCK))
        if busy:
            raise in_use(self.folder, busy, self.key)
        found = kind_of(self.folder)
        if found not in (None, self.kind):
            raise ValueError(
                f"{self.key} {self.folder} holds {KINDS.get(found, found)}, not "
                f"{KINDS[self.kind]}: give another --{self.key} (--overwrite replaces "
                f"only output of its own kind)"
            )
        return found

    def __enter__(self):
        self.check()
        self.lock = RunLock(self.folder, self.key, self.log).__enter__()
        try:
            self.holds = self.check(probe=False) == self.kind  # again: no one else writes now
            self.before = set(os.listdir(self.folder)) - {LOCK, KIND}
            if not os.path.isfile(os.path.join(self.folder, KIND)):
                atomic_write_text(os.path.join(self.folder, KIND), self.kind + "\n")
                self.marked = True
        except BaseException:
            self.lock.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        now = set(os.listdir(self.folder)) - {LOCK, KIND} if os.path.isdir(self.folder) else set()
        if self.marked and now == self.before:  # refused, or wrote nothing: no marker
            os.remove(os.path.join(self.folder, KIND))
        self.lock.__exit__(*exc)
        return False


@contextlib.contextmanager
def finish_first():
    """Ctrl-C inside the block is held until the block ends, then raised: a save runs to its end
    and the run stops after it, with the checkpoint it was writing kept. Python's own handler
    raises KeyboardInterrupt wherever the interpreter is, and a save runs finalisers (__del__ of
    the objects it frees); one raised inside a finaliser is printed and dropped, and the run
    trains on (1 Ctrl-C in 20 was lost so). A flag cannot be dropped. Only where Ctrl-C has
    Python's own handler (the main thread, not ignored by a shell's `&`)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    pressed = []
    previous = signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def interrupted(step: int, kept: str) -> KeyboardInterrupt:
    """The one line of a run stopped by Ctrl-C (cli prints it): where it stopped, what is kept,
    and how to go on (`kept`: lib.checkpoint.kept's words)."""
    go_on = (
        "the same command starts it again"
        if kept.startswith("no checkpoint")
        else "--init_from resume continues it"
    )
    return KeyboardInterrupt(f"interrupted at step {step}; {kept}; {go_on}")


def cli(main):
    """Run a command's main(argv) as its user sees it: a refusal or bad input is one line
    (`error: ...`, exit 1), Ctrl-C is one line (exit 130), a closed pipe (`| head`) ends quietly."""
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")
    except BrokenPipeError:  # `| head` closed our output: quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e:  # a full disk, a lost mount, a permission while writing
        sys.exit(f"error: {first_line(e)}")
    except KeyboardInterrupt as e:
        print(str(e) or "interrupted", file=sys.stderr, flush=True)
        sys.exit(130)
