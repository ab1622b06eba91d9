"""Ablations: train one setting with one thing changed, several seeds per arm, score every run
with the yardstick (evaluate.py), and write a table and a plot per ablation.

    python -m tools.ablate --name prediction \
        --arms "x: --prediction x | v: --prediction v | eps: --prediction eps"
    python -m tools.ablate --name sc_cfg --arms "base:" \
        --eval_arms "w1: --sc_cfg 1 | w3: --sc_cfg 3"
    python -m tools.ablate --help

Each arm is a label and train.py overrides on top of `base` and `common`; each eval arm a
label and evaluate.py overrides (a sampler, a scale) applied to every trained run. Runs go to
runs/ablations/<overrides>-<hash of the training config's values>-s<seed> (ablations that share
an arm share its runs; a comment edited in the base config keeps them), reports
to runs/ablations/reports/<name>/: report.json (every
run's yardstick, and per arm the mean and standard error over training seeds, the paired 95%
t-interval of its difference from the first arm over the seeds both trained, each figure with
its n, and the provenance of its evaluations), report.md and ablation.png. Arms are compared on
the held-out 'dev' split (evaluate.py --split): choices are made there, headlines on 'test'.
A run whose checkpoint and evaluation exist is not redone, so an interrupted
ablation continues where it stopped. Training runs are independent processes, `parallel` at a
time on `threads` threads each: budgets are steps, so runs sharing the machine stay comparable.
The figures over seeds, their pairing and the matched readings are tools/ablation.py's;
report.md and the plot, tools/ablation_report.py's.
"""

import glob
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from lib import checkpoint
from lib.config import comma_list, parse, parse_train
from lib.guard import Writer, cli
from lib.outputs import atomic_write_text, run_summary
from tools.ablation import at_matched_diversity, matched_pairs, summarise
from tools.ablation_report import draw, markdown


@dataclass
class AblateConfig:
    """Train and score the arms of one ablation."""

    name: str = ""  # the ablation: results go to <out>/<name>/
    arms: str = ""  # 'label: train.py overrides | label: ...': a run per seed
    eval_arms: str = "default:"  # 'label: evaluate.py overrides | ...', scored on every run
    base: str = "configs/tiny.py"  # the setting every arm starts from
    common: str = ""  # train.py overrides for every arm (a step budget, say)
    seeds: str = "0,1"  # training seeds per arm
    judge: str = "judges/desc_wiki"  # the judge of evaluate.py ('': the n-gram judge alone)
    split: str = "dev"  # evaluate.py's held-out split: choices are made on dev
    n: int = 64  # samples per evaluation seed
    eval_seeds: str = "0,1,2"
    parallel: int = 2  # training runs at once
    threads: int = 1  # torch threads per run
    runs: str = "runs/ablations"  # where the checkpoints go
    out: str = "runs/ablations/reports"  # each ablation's report, table and plot: <out>/<name>/
    score: bool = True  # False: train the runs only (score them later: rerun)


def words(key: str, text: str) -> list:
    """Overrides as a shell would split them, a quoting error named with its key."""
    try:
        return shlex.split(text)
    except ValueError as e:  # shlex: "No closing quotation", "No escaped character"
        raise ValueError(f"'{key}': {str(e).lower()} in '{text}'") from None


def parse_arms(text: str, key: str = "arms"):
    """'a: --x 1 | b: --y 2' -> [('a', ['--x', '1']), ('b', ['--y', '2'])]."""
    arms = []
    for part in (p.strip() for p in text.split("|") if p.strip()):
        label, sep, args = part.partition(":")
        if not sep or not label.strip():
            raise ValueError(f"'{key}': an arm is 'label: overrides', got '{part}'")
        arms.append((label.strip(), words(key, args)))
    if len({a for a, _ in arms}) != len(arms):
        raise ValueError(f"arm labels repeat in '{text}'")
    return arms


def run(cmd, log_path, threads: int):
    """A subprocess with its output in log_path; a failure names the log."""
    with open(log_path, "w") as log:
        r = subprocess.run(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, OMP_NUM_THREADS=str(threads)),
        )
    if r.returncode:
        raise ValueError(f"{' '.join(cmd[:3])} ... failed: see {log_path}")


# what train_and_score gives every run itself: no part of what the run trains
PER_RUN = ("out_dir", "seed", "n_samples", "overwrite", "init_from")


def run_folder(cfg: AblateConfig, args, seed: int) -> str:
    """A run's folder, named by what it trains: every value of the training config that the
    base file, `common` and the arm's overrides resolve to. Ablations that share an arm (the
    base setting, say) share its runs; a comment edited in the base file keeps them; a value
    changed there or in the code, or a field added to the training config, trains them again.
    A run of these values already trained under another name (one named by the base file's
    bytes, as this command named runs before) is found by its config.json and used."""
    trains = lambda config: {k: v for k, v in config.items() if k not in PER_RUN}
    train = parse_train([cfg.base, *words("common", cfg.common), *args])
    what = json.dumps(trains(asdict(train)), sort_keys=True)
    slug = re.sub(r"[^A-Za-z0-9.]+", "_", " ".join(args)).strip("_") or "base"
    folder = os.path.join(
        cfg.runs, f"{slug}-{hashlib.sha256(what.encode()).hexdigest()[:8]}-s{seed}"
    )
    if os.path.exists(folder):
        return folder
    want = json.loads(what)  # as a config.json holds them
    for other in sorted(glob.glob(os.path.join(glob.escape(cfg.runs), f"{slug}-*-s{seed}"))):
        try:
            with open(os.path.join(other, "config.json")) as f:
                if trains(json.load(f)["train"]) == want:
                    return other
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return folder


def train_and_score(cfg: AblateConfig, arm, args, seed: int, eval_arms):
    """Train one run (unless its checkpoint exists) and score it under every eval arm."""
    folder = run_folder(cfg, args, seed)
    found = checkpoint.find(folder, warn=lambda m: None)
    meta = checkpoint.read_meta(found) if found else None
    if not meta or (
        meta["step"] < meta["train"]["max_steps"] and not meta["train"].get("time_limit_min")
    ):
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        run(
            [
                sys.executable,
                "train.py",
                cfg.base,
                *words("common", cfg.common),
                *args,
                f"--seed={seed}",
                f"--out_dir={folder}",
                "--init_from=resume" if meta else "--overwrite",
                "--n_samples=0",
            ],
            folder + ".train.log",
            cfg.threads,
        )
    reports = {}
    for label, eval_args in eval_arms:
        # named by what it scores with: another judge, n, seeds or sampler is another evaluation
        key = json.dumps([cfg.judge, cfg.n, cfg.eval_seeds, eval_args, cfg.split])
        out = os.path.join(folder, f"eval-{label}-{hashlib.sha256(key.encode()).hexdigest()[:8]}")
        if not os.path.isfile(os.path.join(out, "report.json")):
            run(
                [
                    sys.executable,
                    "evaluate.py",
                    f"--ckpt={folder}",
                    f"--judge={cfg.judge}",
                    f"--n={cfg.n}",
                    f"--seeds={cfg.eval_seeds}",
                    f"--split={cfg.split}",
                    f"--out_dir={out}",
                    *eval_args,
                ],
                out + ".log",
                cfg.threads,
            )
        with open(os.path.join(out, "report.json")) as f:
            reports[label] = json.load(f)
    last = run_summary(folder)  # the run's last validation losses
    return arm, seed, reports, {"val_mse": last["val_mse"], "val_ce": last["val_ce"]}


def write_report(cfg: AblateConfig, rows, arms, eval_arms):
    out = os.path.join(cfg.out, cfg.name)
    os.makedirs(out, exist_ok=True)
    matched, pairs = at_matched_diversity(rows, arms), matched_pairs(rows, arms)
    atomic_write_text(
        os.path.join(out, "report.json"),
        json.dumps(
            {
                "config": asdict(cfg),
                "arms": arms,
                "eval_arms": eval_arms,
                "rows": rows,
                **({"matched": matched} if matched else {}),
                **({"matched_pairs": pairs} if pairs else {}),
            },
            indent=2,
        ),
    )
    atomic_write_text(
        os.path.join(out, "report.md"),
        markdown(asdict(cfg), rows, arms, eval_arms, matched, pairs),
    )
    draw(rows, arms, eval_arms, matched, cfg.name, os.path.join(out, "ablation.png"))
    return out


def main(argv):
    cfg = parse(argv, AblateConfig, "-m tools.ablate")
    if not cfg.name or not cfg.arms:
        raise ValueError("give --name and --arms 'label: overrides | ...'")
    arms, eval_arms = parse_arms(cfg.arms), parse_arms(cfg.eval_arms, "eval_arms")
    if not arms:
        raise ValueError(f"give --arms 'label: overrides | ...', got '{cfg.arms}'")
    if not eval_arms:
        raise ValueError(
            "give --eval_arms 'label: evaluate.py overrides | ...' (default 'default:')"
        )
    seeds = comma_list("seeds", cfg.seeds)
    comma_list("eval_seeds", cfg.eval_seeds)  # evaluate.py would fail on it after the training
    words("common", cfg.common)
    if not os.path.isfile(cfg.base):
        raise FileNotFoundError(f"base config file not found: {cfg.base}")
    for _, args in arms:  # a misspelt override: one line now, not after the others trained
        run_folder(cfg, args, seeds[0])
    jobs = [(arm, args, seed) for arm, args in arms for seed in seeds]
    if not cfg.score:
        with ThreadPoolExecutor(max_workers=max(1, cfg.parallel)) as pool:
            list(pool.map(lambda j: train_and_score(cfg, *j, ()), jobs))
        print(f"trained {len(jobs)} runs in {cfg.runs}; score them: the same command, --score true")
        return
    with Writer(os.path.join(cfg.out, cfg.name), "out", "ablation"):  # its report's one writer
        with ThreadPoolExecutor(max_workers=max(1, cfg.parallel)) as pool:
            done = list(pool.map(lambda j: train_and_score(cfg, *j, eval_arms), jobs))
        results = {(arm, seed): (reports, losses) for arm, seed, reports, losses in done}
        out = write_report(cfg, summarise(results, arms, eval_arms), arms, eval_arms)
    print(f"wrote {out}/report.json, report.md, ablation.png")


if __name__ == "__main__":
    cli(main)
