"""Ablations: train one setting with one thing changed, several seeds per arm, score every run
with the yardstick (evaluate.py), and write a table and a plot per ablation.

    python -m tools.ablate --name prediction \
        --arms "x: --prediction x | v: --prediction v | eps: --prediction eps"
    python -m tools.ablate --name sc_cfg --arms "base:" \
        --eval_arms "w1: --sc_cfg 1 | w3: --sc_cfg 3"
    python -m tools.ablate --help

Each arm is a label and train.py overrides on top of `base` and `common`; each eval arm a
label and evaluate.py overrides (a sampler, a scale) applied to every trained run. Runs go to
runs/ablations/<overrides>-<hash>-s<seed> (ablations that share an arm share its runs), reports
to runs/ablations/reports/<name>/: report.json (every
run's yardstick, and per arm the mean and standard error over training seeds, the paired 95%
t-interval of its difference from the first arm over the seeds both trained, each figure with
its n, and the provenance of its evaluations), report.md and ablation.png. Arms are compared on
the held-out 'dev' split (evaluate.py --split): choices are made there, headlines on 'test'.
A run whose checkpoint and evaluation exist is not redone, so an interrupted
ablation continues where it stopped. Training runs are independent processes, `parallel` at a
time on `threads` threads each: budgets are steps, so runs sharing the machine stay comparable.
"""

import hashlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from lib import checkpoint
from lib.config import comma_list, parse
from lib.decompose import summary
from lib.guard import Writer, cli
from lib.metrics import mean_se, paired_interval, value_at
from lib.outputs import atomic_write_text, run_summary

METRICS = (
    "ppl_ratio",
    "entropy_ratio",
    "repetition",
    "copies",
    "ngrams_seen",
    "ppl",
    "entropy",
    "distinct_2_matched",
    "mauve",
    "kn_ppl_ratio",
    "length",
)
# the yardstick table's figures, in its columns' order
YARDSTICK = (
    "ppl_ratio",
    "entropy_ratio",
    "repetition",
    "copies",
    "ngrams_seen",
    "val_mse",
    "val_ce",
)
# the instrument's figures (evaluate.py: diversity at a matched size, MAUVE, the n-gram judge)
INSTRUMENT = ("distinct_2_matched", "mauve", "kn_ppl_ratio", "length")
# the error decomposition's headline figures (decompose.summary): is an effect the decoder's or
# the flow's?
DECOMPOSITION = (
    "dec_acc",
    "dec_acc_seen",
    "nn_acc",
    "rt_acc_0.9",
    "rt_rep_0.9",
    "rt_acc_0.5",
    "rt_rep_0.5",
    "adj_cos_first",
    "end_nn_cos",
)
# the run's last validation losses: denoise MSE in velocity space, decode CE
LOSSES = ("val_mse", "val_ce")


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


def run_folder(cfg: AblateConfig, args, seed: int) -> str:
    """A run's folder, named by what it trains (the base config file's contents included):
    ablations that share an arm (the base setting, say) share its runs."""
    with open(cfg.base, "rb") as f:
        what = " ".join([hashlib.sha256(f.read()).hexdigest(), cfg.common, *args])
    slug = re.sub(r"[^A-Za-z0-9.]+", "_", " ".join(args)).strip("_") or "base"
    return os.path.join(cfg.runs, f"{slug}-{hashlib.sha256(what.encode()).hexdigest()[:8]}-s{seed}")


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


def summarise(cfg: AblateConfig, results, arms, eval_arms):
    """Per (arm, eval arm): each training seed's yardstick, mean and s.e. over the seeds, and the
    paired interval against the first arm."""
    rows = []
    for arm, _ in arms:
        for label, _ in eval_arms:
            per_seed, nfe = [], None
            for (a, seed), (reports, losses) in sorted(results.items()):
                if a == arm:
                    (r,) = reports[label]["results"][:1]
                    nfe = r.get("nfe")  # network forwards a sample
                    real = reports[label]["reference"]["real"]
                    decomp = reports[label].get("decomposition")
                    per_seed.append(
                        {
                            "seed": seed,  # no judge: no Gen. PPL, nor its ratio
                            **{
                                f"real_{k}": real[k]["mean"]
                                for k in ("ppl", "entropy")
                                if k in real
                            },
                            **{
                                k: r[k] if isinstance(r[k], float) else r[k]["mean"]
                                for k in METRICS
                                if k in r
                            },
                            **losses,
                            **(summary(decomp) if decomp else {}),
                            "example": r.get("examples", [""])[0],
                            "provenance": r.get("provenance"),
                        }
                    )
            keys = [k for k in (*METRICS, *LOSSES, *DECOMPOSITION) if all(k in p for p in per_seed)]
            agg = {k: dict(zip(("mean", "se"), mean_se([p[k] for p in per_seed]))) for k in keys}
            prov = [p["provenance"] for p in per_seed if p["provenance"]]
            rows.append(
                {
                    "arm": arm,
                    "eval_arm": label,
                    "nfe": nfe,
                    **agg,
                    "per_seed": per_seed,
                    "provenance": [p for i, p in enumerate(prov) if p not in prov[:i]],
                }
            )
    for r in rows:  # each arm against the first, seed by seed
        base = next(b for b in rows if b["arm"] == arms[0][0] and b["eval_arm"] == r["eval_arm"])
        if r is not base:
            r["vs_base"] = versus(r["per_seed"], base["per_seed"])
    return rows


def axes(rows):
    """The frontier's axes: distinct-2 at a matched size (x: more diverse) against the Gen. PPL
    ratio where a GPT-2 judge scored, else the n-gram judge's (y: lower is better); x falls back
    to entropy's ratio in reports from before the instrument."""
    yk = "ppl_ratio" if all("ppl_ratio" in r for r in rows) else "kn_ppl_ratio"
    xk = "distinct_2_matched" if all("distinct_2_matched" in r for r in rows) else "entropy_ratio"
    return xk, yk


def frontiers(rows, xk: str, yk: str) -> dict:
    """{(arm, training seed): [(x, log y) per eval arm]}: each run's points, one per sampler
    setting."""
    out = {}
    for r in rows:
        for p in r.get("per_seed", ()):
            if xk in p and yk in p:
                out.setdefault((r["arm"], p["seed"]), []).append((p[xk], math.log(p[yk])))
    return out


def at_matched_diversity(rows, arms) -> dict:
    """Each arm's PPL ratio read off its frontier at one diversity: every (arm, training seed)
    has a point per eval arm (a sampler setting); the diversity is the middle of the range that
    all of them span, each one's log PPL interpolated there (lib.metrics.value_at), and each arm
    is paired with the first seed by seed. {} with fewer than two eval arms; 'at' None (and
    why) where the frontiers share no diversity."""
    xk, yk = axes(rows)
    frontier = frontiers(rows, xk, yk)
    if not frontier or min(len(v) for v in frontier.values()) < 2:
        return {}
    lo = max(min(x for x, _ in v) for v in frontier.values())
    hi = min(max(x for x, _ in v) for v in frontier.values())
    out = {"x": xk, "y": yk, "range": [lo, hi], "at": None}
    if lo > hi:
        out["why"] = (
            f"the frontiers share no {xk}: one tops out at {hi:.3g}, another starts at {lo:.3g}"
        )
        return out
    out["at"] = at = (lo + hi) / 2
    per_arm = {
        a: {str(s): math.exp(value_at(v, at)) for (b, s), v in sorted(frontier.items()) if b == a}
        for a, _ in arms
    }
    base = per_arm[arms[0][0]]
    out["arms"] = {}
    for a, per_seed in per_arm.items():
        mean, se = mean_se(list(per_seed.values()))
        row = {"per_seed": per_seed, "mean": mean, "se": se, "n": len(per_seed)}
        both = [s for s in per_seed if s in base]
        if a != arms[0][0] and both:
            row["vs_base"] = dict(
                zip(
                    ("diff", "lo", "hi", "n"),
                    paired_interval([per_seed[s] for s in both], [base[s] for s in both]),
                )
            )
        out["arms"][a] = row
    return out


def matched_pairs(rows, arms) -> dict:
    """With three arms or more: each arm against the first, seed by seed: a training seed's two
    runs read off their own frontiers (log y interpolated, lib.metrics.value_at) at the middle of
    the diversity range both span, so that one arm whose diversity collapses leaves the others
    comparable. {arm: {x, y, per_seed: [{seed, at, arm, base}], unmatched: [seeds whose runs
    share no diversity], and the paired difference (diff, lo, hi, n) over the matched seeds}};
    {} with two arms (at_matched_diversity reads those)."""
    if len(arms) < 3:
        return {}
    xk, yk = axes(rows)
    frontier = frontiers(rows, xk, yk)
    base, pairs = arms[0][0], {}
    for arm, _ in arms[1:]:
        out = {"x": xk, "y": yk, "per_seed": [], "unmatched": []}
        for (a, seed), mine in sorted(frontier.items()):
            theirs = frontier.get((base, seed))
            if a != arm or theirs is None:
                continue
            lo = max(min(x for x, _ in mine), min(x for x, _ in theirs))
            hi = min(max(x for x, _ in mine), max(x for x, _ in theirs))
            if lo > hi or min(len(mine), len(theirs)) < 2:
                out["unmatched"].append(seed)
                continue
            at = (lo + hi) / 2
            y = {k: math.exp(value_at(v, at)) for k, v in (("arm", mine), ("base", theirs))}
            out["per_seed"].append({"seed": seed, "at": at, **y})
        if out["per_seed"]:
            ys = [(p["arm"], p["base"]) for p in out["per_seed"]]
            out.update(zip(("diff", "lo", "hi", "n"), paired_interval(*zip(*ys))))
        pairs[arm] = out
    return pairs


def versus(per_seed, base_per_seed) -> dict:
    """{metric: (mean difference, 95% lo, hi, n)} over the training seeds both arms ran."""
    base = {p["seed"]: p for p in base_per_seed}
    pairs = [(p, base[p["seed"]]) for p in per_seed if p["seed"] in base]
    out = {}
    for k in (*METRICS, *LOSSES):
        have = [(a[k], b[k]) for a, b in pairs if k in a and k in b]
        if have:
            out[k] = dict(zip(("diff", "lo", "hi", "n"), paired_interval(*zip(*have))))
    return out


def markdown(cfg: dict, rows, arms, eval_arms, matched=None, pairs=None) -> str:
    """An ablation's report.md: the yardstick per (arm, eval arm), the arms at matched diversity
    (at_matched_diversity), then the decomposition; cfg holds AblateConfig's fields
    (results/claims/table.py renders its kept table with it)."""
    common = f" {cfg['common']}" if cfg["common"] else ""
    lines = [
        f"Ablation `{cfg['name']}`: base `{cfg['base']}`{common}; training seeds "
        f"{cfg['seeds']}; each run scored with {cfg['n']} samples x evaluation seeds "
        f"{cfg['eval_seeds']} by `{cfg['judge']}`; mean ± standard error over the n training "
        "seeds.",
        "",
        "| arm | eval | n | NFE | Gen. PPL / real | entropy / real | repetition | "
        "copies | n-grams seen | val MSE (v) | val CE | example |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['arm']} | {r['eval_arm']} | {n_of(r)} | {r['nfe']} | "
        + " | ".join(figure(r, k) for k in YARDSTICK)
        + f" | {r['per_seed'][0]['example'] if 'per_seed' in r else r['example']} |"
        for r in rows
    ]
    if any(k in r for r in rows for k in INSTRUMENT):  # evaluations of the instrument's time
        lines += [
            "",
            "Diversity at a matched size, MAUVE against held-out text, the n-gram "
            "judge's PPL over real text's, length in encoder tokens:",
            "",
            "| arm | eval | n | " + " | ".join(INSTRUMENT) + " |",
            "|---|---|---|" + "---|" * len(INSTRUMENT),
        ]
        lines += [
            f"| {r['arm']} | {r['eval_arm']} | {n_of(r)} | "
            + " | ".join(figure(r, k) for k in INSTRUMENT)
            + " |"
            for r in rows
        ]
    if any("vs_base" in r for r in rows):
        lines += [
            "",
            f"Each arm minus `{arms[0][0]}`, paired by training seed: mean difference "
            "[95% t-interval] (n pairs; one pair: no interval):",
            "",
        ]
        for r in rows:
            lines += (
                [
                    f"- {r['arm']} / {r['eval_arm']}: "
                    + "; ".join(
                        f"{k} {paired(v)}"
                        for k, v in r["vs_base"].items()
                        if k in ("ppl_ratio", *INSTRUMENT)
                    )
                ]
                if r.get("vs_base")
                else []
            )
    lines += matched_lines(matched or {}, arms)
    lines += pair_lines(pairs or {}, arms)
    decomp = [k for k in DECOMPOSITION if all(k in r for r in rows)]
    if decomp:  # where each arm's error comes from (decompose.py)
        lines += [
            "",
            "The error decomposition (decoder on clean latents, nearest-latent ceiling, "
            "round trips from t0, neighbouring x_hat's cosine at the first step, end points' "
            "cosine to a training latent):",
            "",
            "| arm | eval | " + " | ".join(decomp) + " |",
            "|---|---|" + "---|" * len(decomp),
        ]
        lines += [
            f"| {r['arm']} | {r['eval_arm']} | " + " | ".join(figure(r, k) for k in decomp) + " |"
            for r in rows
        ]
    lines += [
        "",
        "Arms: " + "; ".join(f"`{a}`: `{' '.join(x) or '(base)'}`" for a, x in arms),
        "Eval arms: "
        + "; ".join(f"`{a}`: `{' '.join(x) or '(the run preset)'}`" for a, x in eval_arms),
    ]
    return "\n".join(lines) + "\n"


def matched_lines(m: dict, arms) -> list:
    """The arms read off their frontiers at one diversity, each against the first arm."""
    if not m:
        return []
    if m["at"] is None:
        return ["", f"At matched diversity: no verdict, {m['why']}."]
    lo, hi = m["range"]
    lines = [
        "",
        f"At matched diversity: {m['y']} read off each run's frontier (its eval arms) at "
        f"{m['x']} = {m['at']:.3g}, the middle of the range every run spans "
        f"[{lo:.3g}, {hi:.3g}]; mean ± s.e. over training seeds, and the paired difference "
        f"from `{arms[0][0]}` [95% t-interval]:",
        "",
    ]
    for a, v in m["arms"].items():
        fig = f"{v['mean']:.3g}" if v["n"] == 1 else f"{v['mean']:.3g} ± {v['se']:.2g}"
        vs = f"; minus `{arms[0][0]}`: {paired(v['vs_base'])}" if "vs_base" in v else ""
        lines.append(f"- {a}: {fig} (n={v['n']}){vs}")
    return lines


def pair_lines(pairs: dict, arms) -> list:
    """matched_pairs in words: each arm minus the first, seed by seed at a shared diversity."""
    if not pairs:
        return []
    base = arms[0][0]
    lines = [
        "",
        f"Each arm against `{base}` at matched diversity, seed by seed: a training seed's two "
        "runs read off their own frontiers at the middle of the diversity range both span; the "
        "paired difference over the seeds that share one [95% t-interval]:",
        "",
    ]
    for arm, m in pairs.items():
        seeds = ", ".join(
            f"seed {p['seed']} at {p['at']:.3g}: {p['arm']:.3g} against {p['base']:.3g}"
            for p in m["per_seed"]
        )
        none = f"; no shared {m['x']}: seeds {', '.join(map(str, m['unmatched']))}"
        line = f"- {arm} ({m['y']}): " + (seeds or "no seed shares one")
        line += none if m["unmatched"] else ""
        if m["per_seed"]:
            line += f"; minus `{base}`: {paired(m)}"
        lines.append(line)
    return lines


def figure(r, k) -> str:
    """A row's figure k: mean ± standard error over its training seeds; never "± 0": one seed
    has no spread (its figure alone, n is the table's column), and seeds that all agree say so."""
    if k not in r:
        return "-"
    n, mean, se = n_of(r), r[k]["mean"], r[k]["se"]
    if n == 1:
        return f"{mean:.3g}"
    return f"{mean:.3g} (all {n} equal)" if se == 0 else f"{mean:.3g} ± {se:.2g}"


def n_of(r) -> int:
    """A row's training seeds (a kept table's row lists them under 'seeds')."""
    return len(r.get("per_seed") or r.get("seeds") or ())


def paired(v) -> str:
    """A paired difference with its interval and n (n=1: the difference alone)."""
    if v["n"] == 1:
        return f"{v['diff']:+.3g} (n=1)"
    return f"{v['diff']:+.3g} [{v['lo']:+.3g}, {v['hi']:+.3g}] (n={v['n']})"


def kept_entry(rep: dict, per_seed_keys, portable=lambda text: text) -> dict:
    """An ablation's report.json as a results/ table keeps it: the settings that say what was
    run (through portable(): no machine's paths), each row's means with each training seed's
    per_seed_keys beside them, its paired differences and provenance, and the arms at matched
    diversity where the report has them."""
    cfg = {
        k: portable(str(v))
        for k, v in rep["config"].items()
        if k in ("name", "base", "common", "seeds", "n", "eval_seeds", "judge")
    }
    keys = [k for k in (*METRICS, *LOSSES, *DECOMPOSITION) if all(k in r for r in rep["rows"])]
    return {
        "config": cfg,
        "arms": rep["arms"],
        "eval_arms": rep["eval_arms"],
        "rows": [
            {
                "arm": r["arm"],
                "eval_arm": r["eval_arm"],
                "nfe": r["nfe"],
                **{k: r[k] for k in keys},
                "example": r["per_seed"][0]["example"],
                "seeds": [{k: p[k] for k in per_seed_keys if k in p} for p in r["per_seed"]],
                **{k: r[k] for k in ("vs_base", "provenance") if k in r},
            }
            for r in rep["rows"]
        ],
        **{k: rep[k] for k in ("matched", "matched_pairs") if k in rep},
    }


# the per-seed figures the instrument's tables keep (results/bottleneck, refinements, headline)
INSTRUMENT_SEED = (
    "seed",
    "kn_ppl_ratio",
    "distinct_2_matched",
    "mauve",
    "length",
    "copies",
    "ngrams_seen",
)


def kept_reports(folders, per_seed_keys, plots_to: str = "") -> list:
    """kept_entry of each tools.ablate report folder's report.json, in the order given; with
    plots_to, each folder's ablation.png is copied there as <ablation name>.png."""
    entries = []
    for folder in folders:
        with open(os.path.join(folder, "report.json")) as f:
            entry = kept_entry(json.load(f), per_seed_keys)
        plot = os.path.join(folder, "ablation.png")
        if plots_to and os.path.exists(plot):
            shutil.copyfile(plot, os.path.join(plots_to, f"{entry['config']['name']}.png"))
        entries.append(entry)
    return entries


def join_seeds(old: dict, new: dict) -> dict:
    """Two kept entries (kept_entry) of one ablation as one, seed by seed: a sweep continued on
    other training seeds (later, on the machine at hand) joins the kept seeds, and a seed both
    ran takes new's figures; new alone when it ran every seed old did, so collecting the same
    report twice changes nothing. Each row's means, paired differences and matched readings
    are computed again from the seeds' kept figures (a figure some seed does not keep is left
    out); the provenance of both where both supply seeds, so each row names every machine it
    ran on. ValueError if they differ in more than seeds."""
    what = lambda e: (
        {k: v for k, v in e["config"].items() if k != "seeds"},
        e["arms"],
        e["eval_arms"],
        [(r["arm"], r["eval_arm"]) for r in e["rows"]],
    )
    if what(old) != what(new):
        raise ValueError(f"{new['config']['name']}: the two sweeps differ in more than seeds")
    seeds = lambda e: {p["seed"] for r in e["rows"] for p in r["seeds"]}
    if seeds(new) >= seeds(old):
        return new
    rows = []
    for a, b in zip(old["rows"], new["rows"]):
        redone = {p["seed"] for p in b["seeds"]}
        kept = [p for p in a["seeds"] if p["seed"] not in redone]
        per_seed = sorted(kept + b["seeds"], key=lambda p: p["seed"])
        keys = [k for k in (*METRICS, *LOSSES, *DECOMPOSITION) if all(k in p for p in per_seed)]
        prov = (a.get("provenance") or []) + (b.get("provenance") or [])
        rows.append(
            {
                "arm": a["arm"],
                "eval_arm": a["eval_arm"],
                "nfe": a["nfe"],
                **{k: dict(zip(("mean", "se"), mean_se([p[k] for p in per_seed]))) for k in keys},
                "example": (b if per_seed[0]["seed"] in redone else a)["example"],
                "per_seed": per_seed,
                "provenance": [p for i, p in enumerate(prov) if p not in prov[:i]],
            }
        )
    arms = new["arms"]
    for r in rows:  # each arm against the first, seed by seed, as summarise pairs them
        base = next(b for b in rows if b["arm"] == arms[0][0] and b["eval_arm"] == r["eval_arm"])
        if r is not base:
            r["vs_base"] = versus(r["per_seed"], base["per_seed"])
    matched, pairs = at_matched_diversity(rows, arms), matched_pairs(rows, arms)
    return {
        "config": {
            **new["config"],
            "seeds": ",".join(str(s) for s in sorted(seeds(old) | seeds(new))),
        },
        "arms": arms,
        "eval_arms": new["eval_arms"],
        "rows": [
            {**{k: v for k, v in r.items() if k != "per_seed"}, "seeds": r["per_seed"]}
            for r in rows
        ],
        **({"matched": matched} if matched else {}),
        **({"matched_pairs": pairs} if pairs else {}),
    }


def render_entries(entries) -> str:
    """Kept entries (kept_entry) as one markdown document: a section per ablation."""
    return "\n".join(
        f"## `{c['config']['name']}`\n\n"
        + markdown(
            c["config"],
            c["rows"],
            c["arms"],
            c["eval_arms"],
            c.get("matched"),
            c.get("matched_pairs"),
        )
        for c in entries
    )


def draw(rows, arms, eval_arms, matched, name: str, path: str):
    """The ablation's plot: one curve per arm through its eval arms, the frontier's axes
    (axes), the matched diversity marked; rows summarised or kept (kept_entry) alike."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    xk, yk = axes(rows)
    for arm, _ in arms:  # one curve per arm through its eval arms, in the order of x
        mine = sorted((r for r in rows if r["arm"] == arm), key=lambda r: r[xk]["mean"])
        xs, ys = [r[xk]["mean"] for r in mine], [r[yk]["mean"] for r in mine]
        ax.errorbar(
            xs,
            ys,
            xerr=[r[xk]["se"] for r in mine],
            yerr=[r[yk]["se"] for r in mine],
            fmt="o-" if len(mine) > 1 else "o",
            capsize=2,
            label=arm,
        )
        for r in mine:
            label = r["arm"] if len(eval_arms) == 1 else r["eval_arm"]
            ax.annotate(label, (r[xk]["mean"], r[yk]["mean"]), fontsize=7)
    if matched.get("at") is not None:
        ax.axvline(matched["at"], color="grey", ls=":", lw=0.8, label="matched diversity")
    if xk == "entropy_ratio":
        ax.plot(1, 1, "*", color="k", markersize=10, label="real text")
    else:
        ax.axhline(1, color="k", lw=0.8, label="real text's PPL")
    ax.set(
        xlabel=(
            "entropy / real text's" if xk == "entropy_ratio" else "distinct-2 at a matched size"
        )
        + " (higher: more diverse)",
        ylabel=("Gen. PPL" if yk == "ppl_ratio" else "n-gram judge PPL")
        + " / real text's (lower: better)",
        yscale="log",
        title=f"ablation: {name}",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
        out = write_report(cfg, summarise(cfg, results, arms, eval_arms), arms, eval_arms)
    print(f"wrote {out}/report.json, report.md, ablation.png")


if __name__ == "__main__":
    cli(main)
