"""The checkpoint format: one folder holds everything needed to rebuild, resume or sample a run,
and a crash at any instant leaves it loadable.

    out_dir/
      latest          the name of the newest complete step folder (written last)
      step-00000400/  model.safetensors  weights ("model.*") and EMA ("ema.*"), config as metadata
                      optim.pt           optimiser state and step (tensors only: weights_only=True)
                      config.json        the run's config, for people to read
                      manifest.json      each file's size and sha256, written last
      step-00000200/  the previous one (keep_checkpoints of them are kept)
      config.json     a copy of the newest config.json

`save_step` is the one save of every checkpoint here: it writes a step folder under a
temporary name (its files by a writer callback, then the manifest), renames it into place,
then switches `latest`: each is atomic, so a reader sees the old checkpoint or the new one,
never a mixture. `save` writes the files above (train.py's runs and snapshots, MDLM's,
distill.py's rounds); the conditional GPT-2 (baselines/ar_cond.py) saves its own files (Hugging
Face's weights, optim.pt, train.json) in step folders the same way. A save that fails (a
full disk) removes its temporary folder and says so in one line. A run folder's newest step
folder that does not match its manifest (a disk error, a truncated copy) is skipped for the
newest one that does (`find`); a step folder named directly must match its own, and weights
that are not finite are refused. Folders of the older flat layout (the files directly in
out_dir) still load.

`prepare` guards a run's folder before it starts, its lock held (outputs.RunLock): a run
folder, not one of its step folders; no checkpoint replaced, good or damaged, unless asked;
a resumed run is the same run, with steps left to train. `guard` is the same rule for the
other writers (distill.py's rounds, the release converter). `provenance` names the code and
the weights that made a result (git commit, the weights' sha256); sample.load_sampler adds
the frozen encoder to `load`'s network:

    model, meta = load("out/tiny")                       # the EMA network and the run's config
"""

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from lib.guard import STEP_KINDS, check_outside_step_folders, finish_first, marked, what_is
from lib.outputs import atomic_write, atomic_write_text, first_line, fsync, sha256, unreadable
from model import ELF, RENAMED, ELFConfig

FILES = ("model.safetensors", "optim.pt", "config.json")


def step_name(step: int) -> str:
    return f"step-{step:08d}"


def save(out_dir, model, ema, opt, step: int, meta: dict, keep: int = 2):
    """Save unwrapped weights, EMA, optimiser (unless None: a weights-only checkpoint) and step
    as out_dir/step-<step>/ (save_step), then point `latest` at it and keep the newest `keep`
    folders."""
    meta = dict(meta, step=step)
    # write_step is looked up when the save runs: tests replace it to kill a save midway
    return save_step(
        out_dir, step, lambda tmp: write_step(tmp, model, ema, opt, step, meta), meta, keep
    )


def write_step(tmp, model, ema, opt, step: int, meta: dict):
    """The files of an ELF or MDLM step folder, written into the empty folder tmp."""
    tensors = {
        **{f"model.{k}": v.contiguous() for k, v in model.state_dict().items()},
        **{f"ema.{k}": v.contiguous() for k, v in ema.state_dict().items()},
    }
    atomic_write(
        os.path.join(tmp, "model.safetensors"),
        lambda p: save_file(tensors, p, metadata={"meta": json.dumps(meta)}),
    )
    if opt is not None:
        atomic_write(
            os.path.join(tmp, "optim.pt"),
            lambda p: torch.save({"opt": opt.state_dict(), "step": step}, p),
        )
    atomic_write_text(os.path.join(tmp, "config.json"), json.dumps(meta, indent=2))


def save_step(out_dir, step: int, write, meta: dict, keep: int = 2):
    """The one save of every checkpoint here (ELF, MDLM, distillation, the conditional GPT-2):
    write(tmp) fills an empty temporary step folder with plain files; save_step lists them in
    its manifest.json, syncs it, renames it to out_dir/step-<step>/, switches `latest` to it,
    copies meta to out_dir/config.json and prunes older step folders (`prune`, keeping
    `keep`). A failure (a full disk) is one line that says what is kept; after a failure or
    Ctrl-C no temporary folder is left. Returns the step folder."""
    with finish_first():  # Ctrl-C: the save ends, then the run stops (lib.guard)
        return write_and_switch(out_dir, step, write, meta, keep)


def write_and_switch(out_dir, step: int, write, meta: dict, keep: int):
    """save_step's work, in order: a crash at any instant leaves the previous step or this one."""
    made = not os.path.isdir(out_dir)  # a snapshot's folder: removed if the save fails
    os.makedirs(out_dir, exist_ok=True)
    final = os.path.join(out_dir, step_name(step))
    tmp = os.path.join(out_dir, f".tmp-{step_name(step)}-{os.getpid()}")
    previous = read_latest(out_dir)
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        write(tmp)
        write_manifest(tmp, step)
        if os.path.isdir(final):  # the same step saved again (a rerun): replace it
            shutil.rmtree(final)
        os.replace(tmp, final)  # the step folder appears whole
        fsync(out_dir)
        atomic_write_text(os.path.join(out_dir, "latest"), step_name(step) + "\n")
        atomic_write_text(os.path.join(out_dir, "config.json"), json.dumps(meta, indent=2))
        fsync(os.path.join(out_dir, "latest"), out_dir)
    # a full disk, a lost mount (torch: RuntimeError)
    except (OSError, RuntimeError, SafetensorError) as e:
        why = (
            "no space left on the disk of " + out_dir
            if disk_full(e, out_dir)
            else f"{first_line(e)} in {out_dir}"
        )
        # a half-written step must not fill the disk for the next try
        shutil.rmtree(tmp, ignore_errors=True)
        kept = (
            f"the previous checkpoint ({previous}) is intact"
            if previous
            else "no checkpoint was written"
        )
        raise ValueError(f"{why} while saving step {step}; {kept}") from None
    except BaseException:  # Ctrl-C: no half-written step left behind
        shutil.rmtree(tmp, ignore_errors=True)
        for name in os.listdir(out_dir):
            if name.endswith(f".tmp{os.getpid()}"):
                os.remove(os.path.join(out_dir, name))
        if made and not os.listdir(out_dir):
            os.rmdir(out_dir)
        raise
    prune(out_dir, keep)
    return final


def write_manifest(tmp, step: int):
    """manifest.json of a written step folder: each file's size and sha256 (FILES first, in the
    order ELF's manifests have always listed them, then the others by name), then everything
    synced: on disk before anything points at it."""
    names = sorted(os.listdir(tmp), key=lambda f: (FILES.index(f) if f in FILES else len(FILES), f))
    files = {
        f: {"bytes": os.path.getsize(os.path.join(tmp, f)), "sha256": sha256(os.path.join(tmp, f))}
        for f in names
        if os.path.isfile(os.path.join(tmp, f))
    }
    atomic_write_text(
        os.path.join(tmp, "manifest.json"), json.dumps({"step": step, "files": files}, indent=2)
    )
    fsync(tmp, *(os.path.join(tmp, f) for f in os.listdir(tmp)))


def disk_full(e: Exception, out_dir) -> bool:
    """Whether a failed write ran out of space. torch.save says only "file write failed", so
    the disk's free space is asked too (before the half-written folder is removed)."""
    if (
        getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
        or "No space left" in str(e)
        or "StorageFull" in str(e)
    ):
        return True
    try:
        return shutil.disk_usage(out_dir).free < 16 << 20
    except OSError:
        return False


def prune(out_dir, keep: int):
    """Keep the current step folder and the newest `keep` - 1 older ones that verify; delete
    the other older ones and what crashed saves left behind. Folders newer than the current
    one (left when a run resumed from an earlier step) are not touched."""
    current = read_latest(out_dir)
    older = sorted(
        (d for d in os.listdir(out_dir) if d.startswith("step-") and current and d < current),
        reverse=True,
    )
    good = []
    for d in older:  # newest first, until keep - 1 good ones
        if len(good) < keep - 1 and not verify(os.path.join(out_dir, d)):
            good.append(d)
    for d in older if keep > 0 else []:
        if d not in good:
            shutil.rmtree(os.path.join(out_dir, d), ignore_errors=True)
    remove_temporary(out_dir)  # left by a save that crashed (ours has been renamed)


# what a save writes under a temporary name: a step folder being written (.tmp-step-N-<pid>;
# older saves: without the pid) and the files renamed into place (NAME.tmp<pid>, atomic_write's)
TEMPORARY_FOLDER = re.compile(r"\.tmp-step-\d+(-\d+)?")
TEMPORARY_FILE = re.compile(r"(latest|config\.json|metrics\.jsonl|\.kind)\.tmp\d+")


def remove_temporary(out_dir):
    """Delete what crashed saves left in a run folder: the names a save itself writes under a
    temporary name (TEMPORARY_FOLDER, TEMPORARY_FILE), never another name with '.tmp' in it (a
    user's notes.tmp or .tmp-mine). Only the folder's one writer (its lock's holder) calls this."""
    for d in os.listdir(out_dir) if os.path.isdir(out_dir) else []:
        path = os.path.join(out_dir, d)
        if TEMPORARY_FOLDER.fullmatch(d) and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif TEMPORARY_FILE.fullmatch(d) and os.path.isfile(path):
            os.remove(path)


def run_log(path: str) -> bool:
    """Whether path is a run's metrics.jsonl (its first record a step at some minutes), which a
    fresh run of that folder replaces; any other file of that name is someone's, and is kept."""
    try:
        with open(path, encoding="utf-8") as f:
            return {"minutes", "step"} <= set(json.loads(f.readline()))
    except (OSError, ValueError, TypeError):
        return False


def prepare(
    out_dir, resume: bool, overwrite: bool, config: dict, free: set, allow_changes: str, log=print
):
    """Before a run reads any data, with the folder's lock held: out_dir is a run folder, what
    crashed saves left is removed, a fresh run replaces no checkpoint (good or damaged) unless
    asked to (and starts a fresh metrics.jsonl), and a resumed run is the same run, with steps
    left to train: a key outside `free` that differs from the saved config stops it, unless
    listed in allow_changes (comma-separated; then it is logged)."""
    check_outside_step_folders(out_dir, "out_dir")
    remove_temporary(out_dir)
    found = find(out_dir, warn=lambda m: None)
    # each verify reads a folder: only when needed
    damaged = [] if found else damaged_steps(out_dir)
    if not resume:
        if found and not overwrite:
            raise ValueError(
                f"{out_dir} already holds a checkpoint: "
                f"continue it with --init_from resume, "
                f"or start over with --overwrite (deletes it), "
                f"or choose another --out_dir"
            )
        if damaged and not overwrite:
            raise ValueError(
                f"{out_dir} holds a damaged checkpoint ({damaged[0]}), "
                f"which may still be someone's work: "
                f"start over with --overwrite (deletes it), "
                f"or choose another --out_dir"
            )
        if found or damaged:
            log(f"overwrite: deleting the checkpoints in {out_dir}")
            remove_all(out_dir)
        log_path = os.path.join(out_dir, "metrics.jsonl")
        if os.path.lexists(log_path) and not run_log(log_path):
            raise ValueError(
                f"{out_dir} holds a metrics.jsonl that is not a run's log (a run would replace "
                f"it): move it, or choose another --out_dir"
            )
        if os.path.isfile(log_path):
            os.remove(log_path)
        return
    if not found:
        raise FileNotFoundError(
            f"init_from=resume but there is no checkpoint in {out_dir}"
            + (f" that verifies ({'; '.join(damaged)})" if damaged else "")
        )
    saved_meta = read_meta(found)
    saved = saved_meta["train"]
    if "max_steps" in config and saved_meta["step"] >= config["max_steps"]:
        raise ValueError(
            f"the checkpoint in {out_dir} is at step {saved_meta['step']} "
            f"and max_steps is {config['max_steps']}: nothing to train "
            f"(raise --max_steps to continue it)"
        )
    allowed = {k.strip() for k in allow_changes.split(",") if k.strip()}
    changed = sorted(k for k in config if k not in free and k in saved and saved[k] != config[k])
    refused = [f"{k} ({saved[k]!r} -> {config[k]!r})" for k in changed if k not in allowed]
    if refused:
        raise ValueError(
            f"resume changes {', '.join(refused)}: "
            f"the run would not continue exactly; "
            f"list intended changes in --allow_changes"
        )
    for k in changed:
        log(f"resume: {k} changed from {saved[k]!r} to {config[k]!r} (allowed)")


def damaged_steps(out_dir) -> list:
    """'step-N: why' for each step folder of a run folder whose files do not match its manifest."""
    steps = (
        sorted(d for d in os.listdir(out_dir) if d.startswith("step-"))
        if os.path.isdir(out_dir)
        else []
    )
    return [f"{d}: {why}" for d in steps for why in [verify(os.path.join(out_dir, d))] if why]


def guard(out_dir, key: str, overwrite: bool, log=print):
    """The rule of the other writers of a run folder (distill.py's rounds, --convert): a folder
    that holds a checkpoint, good or damaged, is replaced only with --overwrite (which deletes
    it here: call it holding the folder's lock)."""
    check_outside_step_folders(out_dir, key)
    if find(out_dir, warn=lambda m: None) or damaged_steps(out_dir):
        if not overwrite:
            raise ValueError(
                f"{key} {out_dir} already holds a checkpoint: "
                f"--overwrite replaces it, or choose another --{key}"
            )
        log(f"overwrite: deleting the checkpoints in {out_dir}")
        remove_all(out_dir)


def remove_all(out_dir):
    """Delete every checkpoint of a run folder (asked for with train.py --overwrite): its step
    folders, snapshots (at-<m>min) and what crashed saves left, never other names."""
    for d in os.listdir(out_dir):
        path = os.path.join(out_dir, d)
        if re.fullmatch(r"step-\d+|at-[\d.e+-]+min", d) or TEMPORARY_FOLDER.fullmatch(d):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
    remove_temporary(out_dir)
    for f in ("latest", "config.json", *FILES):
        if os.path.isfile(os.path.join(out_dir, f)):
            os.remove(os.path.join(out_dir, f))


def read_latest(out_dir):
    path = os.path.join(out_dir, "latest")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return f.read().strip() or None


def kept(out_dir) -> str:
    """The last good checkpoint of a run folder, in words (for the line that stops a run)."""
    latest = read_latest(out_dir)
    return (
        f"the last good checkpoint, {os.path.join(out_dir, latest)}, is kept"
        if latest
        else "no checkpoint was saved yet"
    )


def verify(folder) -> str:
    """'' when folder is a complete checkpoint (its files match its manifest), else why not."""
    manifest = os.path.join(folder, "manifest.json")
    if not os.path.isfile(manifest):
        return "no manifest.json"
    try:
        with open(manifest) as f:
            files = json.load(f)["files"]
        wanted = {name: (int(want["bytes"]), str(want["sha256"])) for name, want in files.items()}
    except (ValueError, KeyError, TypeError, AttributeError):  # not JSON, or not the format's
        return "manifest.json is unreadable"
    for name, (size, digest) in wanted.items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            return f"{name} is missing"
        if os.path.getsize(path) != size or sha256(path) != digest:
            return f"{name} does not match its manifest"
    return ""


def find(ckpt, warn=print, of=("elf", "mdlm")):
    """The folder holding a checkpoint's files: a step folder if it verifies (a damaged one is
    an error); for a run's out_dir, the one `latest` names, or the newest that verifies if
    that one is damaged; the old flat layout as is. None when there is none. `of`: the kinds
    looked for (ELF's and MDLM's files; the conditional GPT-2 asks for its own): a run folder
    marked as another kind's that saves step folders (guard.STEP_KINDS) holds none of them."""
    if not os.path.isdir(ckpt) or marked(ckpt) in set(STEP_KINDS) - set(of):
        return None
    if os.path.isfile(os.path.join(ckpt, "manifest.json")):  # a step folder named directly
        why = verify(ckpt)
        if why:
            raise ValueError(f"checkpoint {ckpt} is damaged: {why}")
        return ckpt
    steps = sorted((d for d in os.listdir(ckpt) if d.startswith("step-")), reverse=True)
    current = read_latest(ckpt)
    for d in ([current] if current in steps else []) + [d for d in steps if d != current]:
        why = verify(os.path.join(ckpt, d))
        if not why:
            return os.path.join(ckpt, d)
        warn(f"warning: skipping damaged checkpoint {os.path.join(ckpt, d)}: {why}")
    return ckpt if os.path.isfile(os.path.join(ckpt, "model.safetensors")) else None


def read_meta(folder) -> dict:
    """The config JSON stored in a checkpoint's weights file."""
    path = os.path.join(folder, "model.safetensors")
    try:
        with safe_open(path, framework="pt") as f:
            return json.loads((f.metadata() or {})["meta"])
    except (SafetensorError, OSError, KeyError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not an ELF checkpoint ({first_line(e)})") from None


def load_state(folder, which: str, device="cpu") -> dict:
    """The weights `which` ('model' or 'ema') of a checkpoint; non-finite ones are refused (a run
    saved from a diverged state cannot sample or resume)."""
    with safe_open(
        os.path.join(folder, "model.safetensors"), framework="pt", device=str(device)
    ) as f:
        state = {
            k[len(which) + 1 :]: f.get_tensor(k) for k in f.keys() if k.startswith(which + ".")
        }
    bad = next(
        (
            k
            for k, v in state.items()
            if v.is_floating_point() and not bool(torch.isfinite(v).all())
        ),
        None,
    )
    if bad is not None:
        raise ValueError(
            f"{folder}/model.safetensors holds non-finite weights ({which}.{bad}): "
            f"it was saved from a diverged run; use an earlier checkpoint"
        )
    return state


def load(ckpt: str, device="cpu", which: str = "ema"):
    """Rebuild the network from a checkpoint folder. Returns (model in eval mode, meta): meta is
    the saved config (train config, model config, flow config, latent statistics, step)."""
    skipped = []
    folder = find(ckpt, warn=skipped.append)
    if folder is None:  # the error names the damage: no warnings beside it
        damaged = damaged_steps(ckpt)
        raise FileNotFoundError(
            f"no checkpoint at {ckpt}"
            + (f" that verifies ({'; '.join(damaged)})" if damaged else what_is(ckpt))
        )
    for line in skipped:  # an older checkpoint is used: say why
        print(line, file=sys.stderr)
    meta = read_meta(folder)
    if meta.get("kind") == "mdlm":
        raise ValueError(
            f"{ckpt} is an MDLM checkpoint, not an ELF one: sample it with "
            f"python -m baselines.mdlm --ckpt {ckpt}"
        )
    model = ELF(ELFConfig.from_dict(meta["model"])).to(device)
    model.load_state_dict(load_state(folder, which, device))
    return model.eval(), meta


def resume(out_dir, model, ema, opt, model_cfg: dict, log=print):
    """Restore model, EMA and optimiser in place from out_dir's newest complete checkpoint;
    refuses another model config. Returns the saved meta."""
    folder = find(out_dir, warn=log)
    if folder is None:
        raise FileNotFoundError(f"init_from=resume but there is no checkpoint in {out_dir}")
    meta = read_meta(folder)
    # keys added since: their defaults; keys renamed since: today's names (ELFConfig.from_dict
    # also turns an older checkpoint's learned_embeddings into today's embeddings)
    cls = type(model.cfg)
    if hasattr(cls, "from_dict"):
        saved = asdict(cls.from_dict(meta["model"]))
    else:
        saved = {**asdict(cls()), **{RENAMED.get(k, k): v for k, v in meta["model"].items()}}
    if saved != model_cfg:
        diff = {k: (saved.get(k), v) for k, v in model_cfg.items() if saved.get(k) != v}
        raise ValueError(
            f"incompatible checkpoint in {out_dir}: model config differs (saved, now): {diff}"
        )
    model.load_state_dict(load_state(folder, "model"))
    ema.load_state_dict(load_state(folder, "ema"))
    path = os.path.join(folder, "optim.pt")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{folder} holds weights only (no optim.pt): it cannot be resumed")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        state["step"], state["opt"]
    except Exception as e:  # noqa: BLE001 - code (never run), truncated, not a dict: not resumable
        raise ValueError(
            f"{unreadable(path, e)}: resume from an earlier checkpoint, or start over "
            f"with --overwrite"
        ) from None
    if state["step"] != meta["step"]:
        raise ValueError(
            f"incompatible checkpoint in {folder}: optimiser at step {state['step']}, "
            f"weights at {meta['step']}"
        )
    opt.load_state_dict(state["opt"])
    return meta


def provenance(ckpt=None):
    """The git commit of this code and a hash of the checkpoint's weights (no machine path: the
    hash names the weights wherever they lie)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=here,
                capture_output=True,
                text=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", None
    out = {"git_commit": commit, "git_dirty": dirty}
    if ckpt:
        folder = find(ckpt, warn=lambda m: None)
        if folder is None:
            raise FileNotFoundError(f"no checkpoint at {ckpt}{what_is(ckpt)}")
        out["ckpt_sha256"] = sha256(os.path.join(folder, "model.safetensors"))
    return out
