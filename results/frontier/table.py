"""ELF against the AR at equal compute along each one's quality-diversity knob, the AR's
early-stopped model beside its last (results/frontier/README.md): the table and the plot.

    python results/frontier/table.py --collect runs/frontier   # table.json from run.sh's runs
    python results/frontier/table.py --collect runs/frontier_gpt2   # another run, kept beside
    python results/frontier/table.py                           # table.md from the kept table.json

collect reads, for each run folder given, the two measure.json files run.sh has
results/cost/measure.py write (`last`: ELF and the AR's last model; `best`: the AR's
early-stopped model) and the training facts beside them (steps, minutes, the AR's dev-loss
curve) into table.json, named by the folder's name: the kept runs of other names stay (a run
measured on another machine, its folder not here), one of the same name is replaced. It draws
<name>.png for each; render writes table.md from table.json alone,
so the table rebuilds byte for byte. The frontiers are compared at matched diversity: each
curve's PPL (on a log scale; the n-gram judge's, and the GPT-2 judge's where the run was scored
with it) read at one distinct-2 inside both ranges (lib.metrics.value_at), on the means over
the sampling seeds of one training run each; ELF's curve is its Euler ODE's steps (Heun and the
SDE: points beside it).
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.metrics import value_at
from lib.outputs import run_summary
from lib.report import pyplot, read_table, table_command

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("mauve", "distinct_2_matched", "length", "copies", "ngrams_seen")
CURVES = ("ELF", "AR last", "AR early-stopped")
X, Y = "distinct_2_matched", "kn_ppl_ratio"
JUDGES = {"kn_ppl_ratio": "n-gram PPL / real", "ppl_ratio": "Gen. PPL / real (GPT-2 judge)"}


def rows_of(path: str, rename: dict):
    """(measure.json, its rows of the systems in `rename`, each under its curve's name)."""
    with open(path) as f:
        rep = json.load(f)
    return rep, [
        {
            "curve": rename[r["system"]],
            "setting": r["setting"],
            "nfe": r["nfe"],
            "latency_s": r["latency_s"],
            **{k: r["quality"][k] for k in JUDGES if k in r["quality"]},
            **{k: r["quality"][k] for k in FIGURES},
            "example": r["examples"][0] if r["examples"] else "",
        }
        for r in rep["rows"]
        if r["system"] in rename
    ]


def on_curve(r) -> bool:
    """ELF's frontier is its Euler ODE's step count; Heun and the SDE are points beside it."""
    return r["curve"] != "ELF" or r["setting"].startswith("ode")


def one_run(root: str) -> dict:
    """One run folder of run.sh as a kept run, named by the folder's name."""
    last, rows = rows_of(
        os.path.join(root, "last", "measure.json"), {"ELF": "ELF", "AR": "AR last"}
    )
    _, best = rows_of(os.path.join(root, "best", "measure.json"), {"AR": "AR early-stopped"})
    with open(os.path.join(root, "ar", "train_log.json")) as f:
        ar = json.load(f)
    elf = run_summary(os.path.join(root, "elf"))
    low = min(ar["val"], key=lambda v: v["val_loss"])
    return {
        "name": os.path.basename(os.path.normpath(root)),
        "machine": last["machine"],
        "torch": last["torch"],
        "git_commit": last["git_commit"],
        "judge": last["context"].get("judge", ""),
        "context": last["context"],
        "real": {k: last["reference"]["real"][k]["mean"] for k in FIGURES},
        "novelty_gram": last["reference"]["novelty_gram"],
        "training": {
            "elf_steps": elf["steps"],
            "elf_minutes": elf["minutes"],
            "ar_steps": ar["steps"],
            "ar_minutes": ar["minutes"],
            "ar_best_step": low["step"],
            "ar_val": [[v["step"], v["val_loss"]] for v in ar["val"]],
        },
        "rows": rows + best,
    }


def collect(*roots) -> dict:
    path = os.path.join(HERE, "table.json")
    new = [one_run(root) for root in roots]
    names = [r["name"] for r in new]
    kept = read_table(path)["runs"] if os.path.isfile(path) else []
    runs = [r for r in kept if r["name"] not in names] + new
    for r in new:
        plot(r, os.path.join(HERE, r["name"] + ".png"))
    return {"runs": runs}


def matched(rows, a: str, b: str, y: str = Y) -> dict:
    """Curves a and b read at the middle of the distinct-2 range both span: their PPL ratios
    (y: the n-gram judge's or the GPT-2 judge's) there, each curve's log PPL interpolated
    between its two nearest settings."""
    pts = {
        c: [(r[X]["mean"], math.log(r[y])) for r in rows if r["curve"] == c and on_curve(r)]
        for c in (a, b)
    }
    lo = max(min(x for x, _ in p) for p in pts.values())
    hi = min(max(x for x, _ in p) for p in pts.values())
    if lo > hi:  # one curve ends (hi) below where the other starts (lo)
        return {"pair": [a, b], "at": None, "range": [lo, hi]}
    at = (lo + hi) / 2
    return {"pair": [a, b], "at": at, **{c: math.exp(value_at(p, at)) for c, p in pts.items()}}


def judges(t: dict) -> list:
    """The PPL ratios a run was scored by: the n-gram judge's, and the GPT-2 judge's if any."""
    return [k for k in JUDGES if all(k in r for r in t["rows"])]


def run_lines(t: dict) -> list:
    tr, real, ctx = t["training"], t["real"], t["context"]
    n = len(str(ctx["seeds"]).split(","))  # sampling seeds: never "± 0" where they all agree
    fmt = lambda v: (
        f"{v['mean']:.3g} " + (f"(all {n} equal)" if v["se"] == 0 else f"± {v['se']:.2g}")
    )
    ys = judges(t)
    lines = [
        f"## Run `{t['name']}`",
        "",
        f"Trained at once, one thread each, on {t['machine']['cpu']} "
        f"({', '.join(t['machine']['cpu_flags'])}), "
        f"torch {t['torch']}, commit {t['git_commit'][:7]}: ELF {tr['elf_steps']} steps in "
        f"{tr['elf_minutes']:.1f} min, the AR {tr['ar_steps']} steps in {tr['ar_minutes']:.1f} "
        f"min (its lowest dev loss at step {tr['ar_best_step']}). Each row {ctx['n']} samples x "
        f"seeds {ctx['seeds']} (mean ± s.e. over the sampling seeds; one training run per "
        f"system), {ctx['split']} split; PPL over real text's (GPT-2 judge: "
        f"`{t.get('judge') or 'none'}`); seconds a sample at "
        f"batch 1 (the two measurements at once, one thread each); seen "
        f"{t['novelty_gram']}-grams: the share found in the training texts.",
        "",
        "| system | setting | NFE | s / sample | "
        + " | ".join(JUDGES[y] for y in ys)
        + " | MAUVE | distinct-2 | length | copies | seen n-grams | example |",
        "|---|---|---|---|" + "---|" * len(ys) + "---|---|---|---|---|---|",
        "| real text | - | - | - | "
        + "1 | " * len(ys)
        + " | ".join(f"{real[k]:.3g}" for k in FIGURES)
        + " | - |",
    ]
    for r in t["rows"]:
        lines.append(
            f"| {r['curve']} | {r['setting']} | {r['nfe']:g} | {r['latency_s']:.3f} | "
            + "".join(f"{r[y]:.3g} | " for y in ys)
            + " | ".join(fmt(r[k]) for k in FIGURES)
            + f" | {r['example'].replace('|', '/')} |"
        )
    lines += [
        "",
        "At matched diversity (each pair read at the middle of the distinct-2 range both curves "
        "span; ELF's curve is its Euler ODE):",
        "",
    ]
    for a, b in (("ELF", "AR last"), ("ELF", "AR early-stopped"), ("AR early-stopped", "AR last")):
        for y in ys:
            m = matched(t["rows"], a, b, y)
            if m["at"] is None:
                lo, hi = m["range"]
                lines.append(
                    f"- {a} / {b}: no shared distinct-2 (one curve ends at {hi:.3g}, the other "
                    f"starts at {lo:.3g})"
                )
                break
            lines.append(
                f"- {a} / {b} at distinct-2 {m['at']:.3g}: {JUDGES[y]} "
                f"{m[a]:.3g} against {m[b]:.3g}"
            )
    return lines


def render(t: dict) -> str:
    lines = []
    for r in t["runs"]:
        lines += [*run_lines(r), ""]
    return "\n".join(lines[:-1]) + "\n"


def plot(t: dict, path: str):
    """One run's frontiers: PPL over real text's against distinct-2, a panel per judge."""
    plt = pyplot()
    ys = judges(t)
    fig, axes = plt.subplots(1, len(ys), figsize=(6 * len(ys), 4.5), squeeze=False)
    for ax, y in zip(axes[0], ys):
        for c in CURVES:
            mine = sorted(
                (r for r in t["rows"] if r["curve"] == c and on_curve(r)),
                key=lambda r: r[X]["mean"],
            )
            ax.errorbar(
                [r[X]["mean"] for r in mine],
                [r[y] for r in mine],
                xerr=[r[X]["se"] for r in mine],
                fmt="o-",
                capsize=2,
                label=c + (" (Euler ODE, steps)" if c == "ELF" else " (temperature)"),
            )
            for r in mine:
                ax.annotate(r["setting"], (r[X]["mean"], r[y]), fontsize=6)
        for r in (r for r in t["rows"] if not on_curve(r)):  # ELF's other samplers
            ax.plot(r[X]["mean"], r[y], "s", color="grey", markersize=4)
            ax.annotate(r["setting"], (r[X]["mean"], r[y]), fontsize=6)
        ax.plot(t["real"][X], 1, "*", color="k", markersize=10, label="real text")
        ax.set(
            xlabel="distinct-2 at a matched size (higher: more diverse)",
            ylabel=JUDGES[y] + " (lower: better)",
            yscale="log",
            title="equal compute: ELF's steps, the AR's temperature",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/frontier", report="measure.json")
