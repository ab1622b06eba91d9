"""Conditional ELF, AR and MDLM against training minutes on the de-duplicated splits of a task
(results/cond_minutes/README.md): the systems trained at once, one thread each, snapshots at
fixed minutes, every snapshot scored alike on dev and test (lib/heldout.py), the floors beside.

    python results/cond_minutes/table.py de_en        # TASK/table.md from TASK/table.json
    python results/cond_minutes/table.py de_en --collect runs/cond_minutes/de_en   # + the plot
    python results/cond_minutes/table.py wiki_summary --collect runs/cond_minutes/wiki_summary
    python results/cond_minutes/table.py de_en --collect runs/cond_minutes/de_en \
        runs/cond_minutes/de_en_s1                     # two training seeds (run.sh SEED=1)
    python results/cond_minutes/table.py de_en --collect runs/cond_minutes/de_en_s2
                                                       # joins the kept seeds (run.sh SEED=2)

collect reads every report under RUNS/eval (<system>-<point>-<split>/, evaluate.py's
report.json for ELF, heldout/report.json for the baselines), each snapshot's step (its step
folder) and training minutes, and the GPT-2's early-stopping record (the step and dev text loss
of its best weights at each point). render writes table.md from table.json alone: per split and
setting the BLEU at every point (mean +- s.e. over sampling seeds, n of them), then at each
budget's end the ROUGE, entropy, NFE and seconds per output; the floors as rows. Given
several runs' folders (one a training seed: run.sh names a seed's `<task>_s<seed>`), every
figure is the mean over training seeds +- their s.e., and each system is read against the
others seed by seed (ELF's CFG 2 against MDLM's 128 steps and the early-stopped GPT-2's greedy
output, at every point, with the paired 95% t-interval). A budget's end is named by its
minutes, so a seed trained on another day for a longer budget lines up with the kept seeds at
the snapshots they share: collecting its folder alone joins the kept table's other seeds, each
seed's machine said.
"""

import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib import checkpoint
from lib.metrics import mean_se, paired_interval
from lib.outputs import run_summary
from lib.report import (
    TASKS,
    floor_scores,
    provenance_sentence,
    read_table,
    table_command,
    task_argument,
)

HERE = os.path.dirname(os.path.abspath(__file__))  # main: this folder's TASK/
TASK = "de_en"
SYSTEMS = {  # run.sh's names: what each scores, in the table's order
    "elf": "ELF, the config as it ships",
    "elf_recipe": "ELF with the recipe",
    "ar": "AR GPT-2, last weights",
    "ar_best": "AR GPT-2, early-stopped (best dev text loss)",
    "mdlm": "MDLM",
}
SCORES = ("bleu", "rouge1", "rouge2", "rougeL", "entropy")
PLOTTED = {  # the settings drawn against minutes: name as the reports write it -> label
    "elf": {"CFG 1": "ELF ODE 32, CFG 1", "CFG 2": "ELF ODE 32, CFG 2"},
    "elf_recipe": {"CFG 2": "ELF with the recipe, ODE 32, CFG 2"},
    "ar": {"AR greedy": "AR greedy, last"},
    "ar_best": {"AR greedy": "AR greedy, early-stopped"},
    "mdlm": {"MDLM 128 steps (prob)": "MDLM 128 steps"},
}


def setting_name(system, r):
    """A result row's setting in words: ELF's by its CFG scale, the baselines' by name."""
    s = r["setting"]
    return f"CFG {s['guidance']:g}" if system.startswith("elf") else s["name"]


def step_of(folder):
    """The step of a run folder's newest step folder (or of the folder `latest` names)."""
    name = checkpoint.read_latest(folder) or sorted(glob.glob(os.path.join(folder, "step-*")))[-1]
    return int(name.split("-")[-1])


def end_minutes(root, system):
    """A run's training minutes at its end: its metrics.jsonl (ELF, MDLM) or train_log.json."""
    if system in ("ar", "ar_best"):
        with open(os.path.join(root, "ar", "train_log.json")) as f:
            return json.load(f)["minutes"]
    return run_summary(os.path.join(root, system))["minutes"]


def checkpoint_of(root, system, point):
    """The folder run.sh scored for (system, point): a snapshot, its -best copy, or the end."""
    run = os.path.join(root, "ar" if system == "ar_best" else system)
    if point == "end":
        return os.path.join(run, "best") if system == "ar_best" else run
    return os.path.join(run, f"at-{point}min" + ("-best" if system == "ar_best" else ""))


def best_record(folder):
    """The early-stopped weights' step and dev text loss (their train.json)."""
    step = step_of(folder)
    with open(os.path.join(folder, f"step-{step:08d}", "train.json")) as f:
        meta = json.load(f)
    return {"best_step": meta["step"], "val_loss": meta["val_loss"]}


def seed_of(root):
    """A runs folder's training seed, as run.sh names it: `<task>_s<seed>`, else seed 0."""
    m = re.search(r"_s(\d+)$", os.path.normpath(root))
    return int(m.group(1)) if m else 0


def collect(*roots):
    seeds = [seed_of(root) for root in roots]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"two runs folders of one training seed: {', '.join(roots)}")
    rows, splits, provenance = [], {}, {}
    for root in roots:
        provenance[seed_of(root)] = collect_root(root, rows, splits)
    join_kept(rows, splits, provenance)
    last = [provenance[s] for s in seeds if provenance[s]] or [None]
    table = {"task": TASK, "splits": splits, "rows": rows, "provenance": last[-1]}
    if len(provenance) > 1:
        table["seeds"] = sorted(provenance)
        table["seed_provenance"] = {str(s): p for s, p in sorted(provenance.items())}
    plot(table, os.path.join(HERE, "minutes.png"))
    return table


def join_kept(rows, splits, provenance):
    """The kept table's training seeds that these runs do not hold, joined to them (a seed
    trained on another day, for another budget: `SEED=2 MINUTES=90 bash run.sh`); a seed given
    again takes its new figures. A kept table of another task or other split sizes is not
    replaced: ValueError (its seeds' runs may be gone; move it away to start a new table).
    Provenance that the kept table holds for all its seeds at once (tables collected before
    seed_provenance) is said to be one record for them, the last seed collected's."""
    path = os.path.join(HERE, "table.json")
    if not os.path.isfile(path):
        return
    kept = read_table(path)
    old = [r for r in kept["rows"] if r.get("seed", 0) not in provenance]
    if not old:
        return
    other = [
        f"{split}: {kept['splits'][split]['n']} pairs kept, {sp['n']} now"
        for split, sp in splits.items()
        if split in kept["splits"] and kept["splits"][split]["n"] != sp["n"]
    ]
    if kept["task"] != TASK or other:
        what = ", ".join(other) or f"task {kept['task']}"
        raise ValueError(f"{path} is of other pairs ({what}): move it away to start a new table")
    by_seed = {}
    for r in old:
        by_seed.setdefault(r.get("seed", 0), []).append(dict(r))
    one = dict(kept["provenance"] or {}, shared=len(kept.get("seeds", [0])) > 1)
    for seed, rs in sorted(by_seed.items()):
        name_end(rs)
        rows += rs
        provenance[seed] = kept.get("seed_provenance", {}).get(str(seed), one)
    for split, sp in kept["splits"].items():
        splits.setdefault(split, sp)
    joined = ", ".join(map(str, sorted(by_seed)))
    print(f"joined the kept training seeds {joined} ({path}) to the runs' seeds")


def name_end(rows):
    """One training seed's budget end named by its minutes, as a snapshot is (the end of a
    60-minute run is point '60'), so that seeds trained for other budgets line up point by
    point: the least of its runs' own end minutes, rounded (ELF's also count encoding the
    latents), each such row marked `end`; 'end' kept where a snapshot has that name."""
    ends = [r for r in rows if r["point"] == "end"]
    if not ends:
        return
    name = f"{min(r['minutes'] for r in ends):.0f}"
    if any(r["point"] == name for r in rows):  # a snapshot at the budget (a smoke test's 0)
        return
    for r in ends:
        r.update(point=name, end=True)


def collect_root(root, rows, splits):
    """One training seed's reports into rows (each with its seed) and splits; its provenance."""
    provenance, seed = None, seed_of(root)
    for name in sorted(os.listdir(os.path.join(root, "eval"))):
        m = re.fullmatch(r"(elf_recipe|elf|ar_best|ar|mdlm)-(\d+(?:\.\d+)?|end)-(\w+)", name)
        if not m:
            continue
        system, point, split = m.groups()
        path = os.path.join(root, "eval", name, "report.json")
        if not system.startswith("elf"):
            path = os.path.join(root, "eval", name, "heldout", "report.json")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            rep = json.load(f)
        if rep["split"] != split:
            raise ValueError(f"{path} scores split '{rep['split']}', not '{split}'")
        minutes = end_minutes(root, system) if point == "end" else float(point)
        trained = checkpoint_of(root, "ar" if system == "ar_best" else system, point)
        record = {"steps": step_of(trained)}  # the steps trained by then (AR: both rows)
        if system == "ar_best":
            record.update(best_record(checkpoint_of(root, system, point)))
        for r in rep["results"]:
            rows.append(
                {
                    "system": system,
                    "point": point,
                    "minutes": round(minutes, 2),
                    "split": split,
                    "setting": setting_name(system, r),
                    "nfe": r["nfe"],
                    "seconds_per_output": r["seconds"]["mean"] / rep["n"],
                    "n_seeds": len(r["per_seed"]),
                    **{s: {"mean": r[s]["mean"], "se": r[s]["se"]} for s in SCORES},
                    **record,
                    **({"seed": seed} if seed else {}),
                }
            )
        splits[split] = {
            "n": rep["n"],
            "floors": floor_scores(rep["baselines"], SCORES),
            "reference_entropy": rep["reference_entropy"],
        }
        provenance = rep.get("provenance") or provenance
    mine = [r for r in rows if r.get("seed", 0) == seed]
    if not mine:
        raise ValueError(f"no <system>-<point>-<split> reports under {root}/eval")
    name_end(mine)
    return provenance


def merged(t):
    """The rows, one per (system, setting, point, split): with one training seed as collected;
    with several, each score's mean over the training seeds with their s.e. (n_seeds: how
    many), the other figures their means (the early-stopped step: each seed's, joined)."""
    if "seeds" not in t:
        return t["rows"]
    groups = {}
    for r in t["rows"]:
        groups.setdefault((r["system"], r["setting"], r["point"], r["split"]), []).append(r)
    out = []
    for rs in groups.values():
        row = dict(rs[0], n_seeds=len(rs), seeds=[r.get("seed", 0) for r in rs])
        if any(r.get("end") for r in rs):
            row["end"] = True
        for k in ("minutes", "nfe", "seconds_per_output", "steps"):
            row[k] = sum(r[k] for r in rs) / len(rs)
        for k in SCORES:
            m, se = mean_se([r[k]["mean"] for r in rs])
            row[k] = {"mean": m, "se": se}
        if "best_step" in row:
            row["best_step"] = " / ".join(str(r["best_step"]) for r in rs)
        out.append(row)
    return out


def points(t):
    """The scored points in order of minutes (a table collected before the ends were named by
    their minutes: the snapshots, then 'end')."""
    found = {r["point"] for r in merged(t)}
    return sorted(found - {"end"}, key=float) + (["end"] if "end" in found else [])


def plot(t, path):
    """BLEU against training minutes per split: one curve per system's plotted settings, the
    seeds' s.e. as bars (the sampling seeds', or the training seeds' where there are several),
    the floors dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits, rows = list(t["splits"]), merged(t)
    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits) + 2.5, 3.8), squeeze=False)
    for ax, split in zip(axes[0], splits):
        for system, settings in PLOTTED.items():
            for setting, label in settings.items():
                rs = [
                    r
                    for r in rows
                    if (r["system"], r["split"], r["setting"]) == (system, split, setting)
                ]
                rs.sort(key=lambda r: r["minutes"])
                if rs:
                    ax.errorbar(
                        [r["minutes"] for r in rs],
                        [r["bleu"]["mean"] for r in rs],
                        [r["bleu"]["se"] for r in rs],
                        marker="o",
                        ms=3,
                        capsize=2,
                        label=label,
                    )
        for j, (name, fl) in enumerate(t["splits"][split]["floors"].items()):
            ax.axhline(fl["bleu"], ls="--", lw=1, c=f"C{j + 5}", label=f"floor: {name}")
        ax.set(xlabel="training minutes (one thread each, all at once on 2 cores)", ylabel="BLEU")
        ax.set_title(f"{TASKS[t['task']]}, {split} split ({t['splits'][split]['n']} pairs)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cell(s, n, of=0):
    """mean +- s.e. over seeds (one seed: its value and n=1, never +- 0); n said wherever it is
    fewer than the table's `of` training seeds."""
    if n == 1:
        return f"{s['mean']:.2f} (n=1)"
    return f"{s['mean']:.2f} +- {s['se']:.2f}" + (f" (n={n})" if n < of else "")


def render_split(t, split):
    sp, pts = t["splits"][split], points(t)
    rows = [r for r in merged(t) if r["split"] == split]
    keys = []  # (system, setting) in SYSTEMS' order, as first scored
    for system in SYSTEMS:
        for r in rows:
            if r["system"] == system and (system, r["setting"]) not in keys:
                keys.append((system, r["setting"]))
    at = {(r["system"], r["setting"], r["point"]): r for r in rows}
    of = len(t.get("seeds", ()))
    label = lambda p: "end" if p == "end" else f"{p} min"
    over = "sampling seeds (3; greedy AR: one set, n=1)"
    if "seeds" in t:
        seeds = ", ".join(map(str, t["seeds"]))
        over = f"training seeds ({seeds}; each seed's figure the mean of its sampling seeds)"
    lines = [
        f"**{split} split**: {sp['n']} held-out {TASKS[t['task']]} pairs (no 'near' duplicates "
        f"of training pairs). BLEU at each point, mean +- s.e. over {over}, the steps trained "
        "by then in brackets.",
        "",
        "| system | setting | " + " | ".join(label(p) for p in pts) + " |",
        "|---|---|" + "---|" * len(pts),
    ]
    for system, setting in keys:
        cells = []
        for p in pts:
            r = at.get((system, setting, p))
            cells.append(
                f"{cell(r['bleu'], r['n_seeds'], of)} ({r['steps']:.0f} steps)" if r else "-"
            )
        lines.append(f"| {SYSTEMS[system]} | {setting} | " + " | ".join(cells) + " |")
    for name, fl in sp["floors"].items():
        lines.append(f"| floor: {name} | | " + " | ".join(f"{fl['bleu']:.2f}" for _ in pts) + " |")
    lines += paired_lines(t, split, pts)
    for p in budget_ends(t, pts):
        lines += end_lines(t, split, p, keys, at, of)
    return lines


def budget_ends(t, pts):
    """The points where some training seed's budget ended (a table collected before the ends
    were named by their minutes: its last point, 'end')."""
    ends = sorted({r["point"] for r in t["rows"] if r.get("end")}, key=float)
    return ends or pts[-1:]


def end_lines(t, split, p, keys, at, of):
    """The table of every score at one budget's end."""
    sp = t["splits"][split]
    if p == "end":
        head = "At each budget's end (the last point; 'minutes' are each run's own):"
    else:
        ended = sorted({r.get("seed", 0) for r in t["rows"] if r["point"] == p and r.get("end")})
        which = ", ".join(map(str, ended))
        head = (
            f"At {p} minutes, the end of training seed{'s' if len(ended) > 1 else ''} {which}'s "
            "budget ('minutes' are each run's own; a seed that trained on: its snapshot):"
        )
    lines = [
        "",
        head,
        "",
        "| system | setting | minutes | steps | NFE | BLEU | ROUGE-1 / 2 / L | entropy "
        "| s/output |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for system, setting in keys:
        r = at.get((system, setting, p))
        if r:
            extra = f" (best at step {r['best_step']})" if "best_step" in r else ""
            lines.append(
                f"| {SYSTEMS[system]} | {setting} | {r['minutes']:.1f} | {r['steps']:.0f}{extra} | "
                f"{r['nfe']:.1f} | {cell(r['bleu'], r['n_seeds'], of)} | "
                f"{r['rouge1']['mean']:.1f} / {r['rouge2']['mean']:.1f} / "
                f"{r['rougeL']['mean']:.1f} | {r['entropy']['mean']:.2f} | "
                f"{r['seconds_per_output']:.4f} |"
            )
    for name, fl in sp["floors"].items():
        lines.append(
            f"| floor: {name} | | | | 0 | {fl['bleu']:.2f} | {fl['rouge1']:.1f} / "
            f"{fl['rouge2']:.1f} / {fl['rougeL']:.1f} | {fl['entropy']:.2f} | |"
        )
    lines.append(f"| (references) | | | | | | | {sp['reference_entropy']:.2f} | |")
    return lines


# the readings paired by training seed: (system, setting) against (system, setting)
PAIRED = tuple(
    ((elf, "CFG 2"), other)
    for elf in ("elf", "elf_recipe")
    for other in (("mdlm", "MDLM 128 steps (prob)"), ("ar_best", "AR greedy"))
)


def paired_lines(t, split, pts):
    """Each PAIRED reading's BLEU difference at every point, seed by seed, with its paired
    95% t-interval (several training seeds only)."""
    if "seeds" not in t:
        return []
    bleu = {
        (r["system"], r["setting"], r["point"], r.get("seed", 0)): r["bleu"]["mean"]
        for r in t["rows"]
        if r["split"] == split
    }
    lines = []
    for a, b in PAIRED:
        cells = []
        for p in pts:
            both = [s for s in t["seeds"] if (*a, p, s) in bleu and (*b, p, s) in bleu]
            if len(both) < 2:
                cells.append("-")
                continue
            d, lo, hi, n = paired_interval(
                [bleu[(*a, p, s)] for s in both], [bleu[(*b, p, s)] for s in both]
            )
            cells.append(f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}] (n={n})")
        if all(c == "-" for c in cells):  # a system these seeds did not train
            continue
        lines.append(
            f"| {SYSTEMS[a[0]]} {a[1]} minus {SYSTEMS[b[0]]} {b[1]} | paired by seed | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def machines(t):
    """Where the runs were trained and scored: one sentence, or one per group of training
    seeds where seeds came from other days or machines."""
    if "seed_provenance" not in t:
        return provenance_sentence(t["provenance"])
    groups, plain = {}, True
    for seed, prov in t["seed_provenance"].items():
        sentence = provenance_sentence(prov) if prov and "commit" in prov else "not recorded."
        if prov and prov.get("shared"):
            sentence = f"one record kept for them all, the last collected's: {sentence}"
        plain = plain and bool(prov) and "commit" in prov and not prov.get("shared")
        groups.setdefault(sentence, []).append(seed)
    if len(groups) == 1 and plain:
        return next(iter(groups))
    return " ".join(
        f"Training seed{'s' if len(s) > 1 else ''} {', '.join(s)}: {sentence}"
        for sentence, s in groups.items()
    )


def render(t):
    recipe = any(r["system"] == "elf_recipe" for r in t["rows"])
    lines = [
        f"ELF (configs/{t['task']}_tiny.py as it ships"
        + (
            "; 'with the recipe': encoder block 3, the cut vocabulary, bottleneck 32, no "
            "self-conditioning"
            if recipe
            else ""
        )
        + "), the conditional GPT-2 and MDLM, trained at once, one thread each on 2 cores (each "
        "had the same share of the machine), snapshots at fixed training minutes; scored by "
        "lib/heldout.py alike. ELF: Euler ODE 32; MDLM: 32 and 128 steps; AR: greedy and "
        "sampled at temperature 1. " + machines(t),
    ]
    for split in t["splits"]:
        lines += [""] + render_split(t, split)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TASK = task_argument(sys.argv)
    HERE = os.path.join(HERE, TASK)
    table_command(HERE, collect, render, f"runs/cond_minutes/{TASK}")
