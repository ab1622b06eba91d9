"""Does the unconditional default's recipe carry over to conditional ELF
(results/cond_recipe/README.md)? configs/<task>_tiny.py with the release's settings ('base': the
last layer, all 30,522 ids, bottleneck 128, self-conditioning) against encoder block 3, the cut
vocabulary, bottleneck 32 and no self-conditioning ('recipe': the de->en config as it ships now),
each change alone, and the recipe with its padding down-weighted ('pad', beside its control
'recipe_ctl'), trained for equal minutes and scored on held-out pairs of one split.

    python results/cond_recipe/table.py                           # table.md from table.json
    python results/cond_recipe/table.py --collect runs/cond_recipe   # from the runs, + plot
    python results/cond_recipe/table.py wiki_summary --collect runs/cond_recipe_wiki_summary

collect reads every run's evaluate.py report (<arm>-s<seed>/eval/report.json), its training
record (metrics.jsonl: steps, minutes, the last validation losses) and log (parameters); per
arm and CFG scale it keeps each training seed's BLEU, ROUGE and entropy (each the mean over the
sampling seeds) and the floors of the split. render writes table.md from table.json alone:
per arm the mean +- s.e. over training seeds with n, and the paired 95% t-interval of its
difference from 'base' over the seeds both trained (and from another arm: AGAINST).
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.metrics import mean_se
from lib.outputs import run_summary
from lib.report import (
    TASKS,
    floor_scores,
    paired_by_key,
    provenance_sentence,
    table_command,
    task_argument,
)

HERE = os.path.dirname(os.path.abspath(__file__))  # de->en's; a task's own: HERE/<task>/
TASK = "de_en"
ARMS = ("base", "block3", "vocab", "nosc", "b32", "recipe", "recipe_ctl", "pad")  # run.sh's
CHANGES = {
    "base": "the release's four settings",
    "block3": "encoder block 3",
    "vocab": "the cut vocabulary",
    "nosc": "no self-conditioning",
    "b32": "bottleneck 32",
    "recipe": "all four (configs/de_en_tiny.py's)",
    "recipe_ctl": "all four again, trained when and where pad was",
    "pad": "all four, padding at 0.1 in the loss",
}
# arms read against another arm than base, paired by training seed: what the other three add
# to block 3; the same recipe trained again on another day (how far equal minutes move);
# what down-weighting the padding does to the recipe trained beside it
AGAINST = (("recipe", "block3"), ("recipe_ctl", "recipe"), ("pad", "recipe_ctl"))
SCORES = ("bleu", "rouge1", "rouge2", "rougeL", "entropy")
DIAGNOSTICS = ("heldout", "train", "shuffled", "zeroed")  # evaluate.py --diagnose's samples


def run_record(folder):
    """A run's steps, training minutes, last validation losses and parameters (millions)."""
    last = run_summary(folder)
    with open(folder + ".log") as f:
        params = re.search(r"model \w+: ([\d.]+)M parameters", f.read())
    return {
        **{k: last[k] for k in ("steps", "minutes", "val_mse", "val_ce")},
        "params_m": float(params.group(1)),
    }


def collect(root):
    runs, splits = [], {}
    for name in sorted(os.listdir(root)):
        m = re.fullmatch(r"(\w+)-s(\d+)", name)
        if not m or not os.path.isfile(os.path.join(root, name, "eval", "report.json")):
            continue
        run = {"arm": m.group(1), "seed": int(m.group(2)), **run_record(os.path.join(root, name))}
        for split, folder in (("dev", "eval"), ("test", "eval-test")):
            path = os.path.join(root, name, folder, "report.json")
            if not os.path.isfile(path):
                continue
            with open(path) as f:
                rep = json.load(f)
            if rep["split"] != split:
                raise ValueError(f"{path} scores split '{rep['split']}', not '{split}'")
            run[split] = {
                f"{r['setting']['guidance']:g}": {s: r[s]["mean"] for s in SCORES}
                for r in rep["results"]
            }
            run["nfe"] = rep["results"][0]["nfe"]
            run["seconds_per_output"] = rep["results"][0]["seconds"]["mean"] / rep["n"]
            run["provenance"] = rep["provenance"]
            splits[split] = {
                "n": rep["n"],
                "sampling_seeds": rep["seeds"],
                "setting": "Euler ODE {steps} steps, {grid} grid".format(
                    **rep["results"][0]["setting"]
                ),
                "floors": floor_scores(rep["baselines"], SCORES),
                "reference_entropy": rep["reference_entropy"],
            }
        diag = os.path.join(root, name, "diag", "report.json")
        if os.path.isfile(diag):
            run["diagnostics"] = diagnostics(diag)
        runs.append(run)
    if not runs:
        raise ValueError(f"no <arm>-s<seed>/eval/report.json under {root}")
    table = {"task": TASK, "splits": splits, "runs": runs}
    plot(table, os.path.join(HERE, "recipe.png"))
    return table


def diagnostics(path):
    """What evaluate.py --diagnose and the decomposition measured on a run (run.sh DIAGNOSE=1):
    BLEU / ROUGE-1 on held-out and training pairs, with sources shuffled and zeroed; the share of
    text tokens the decoder reads from clean latents; round trips' token accuracy from each t0."""
    with open(path) as f:
        rep = json.load(f)
    d, dec = rep["diagnostics"], rep["decomposition"]
    return {
        "setting": d["setting"],
        "n": rep["n"],
        "decompose_n": dec["n"],
        **{k: {s: d[k][s] for s in ("bleu", "rouge1")} for k in DIAGNOSTICS},
        "decoder": dec["decoder"]["acc_text"],
        "round_trip": {f"{r['t0']:g}": r["acc_text"] for r in dec["round_trip"]},
        "neighbour_cosine": {
            "first_step": dec["adjacent_cosine"]["first_step_text"],
            "real": dec["adjacent_cosine"]["real_text"],
        },
    }


def arms_of(t, split="dev"):
    return [a for a in ARMS if any(r["arm"] == a and split in r for r in t["runs"])]


def per_seed(t, arm, split, g="1", m="bleu"):
    """{training seed: score m at CFG g on split} of one arm's runs scored there."""
    return {r["seed"]: r[split][g][m] for r in t["runs"] if r["arm"] == arm and split in r}


def plot(t, path):
    """BLEU of every run per arm and split at CFG 1 (hollow) and 2 (the config's preset), the
    arm's mean at CFG 2, the floors dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = list(t["splits"])
    fig, axes = plt.subplots(1, len(splits), figsize=(5.5 * len(splits), 3.6), squeeze=False)
    for ax, split in zip(axes[0], splits):
        arms = arms_of(t, split)
        for i, arm in enumerate(arms):
            v1, v = (list(per_seed(t, arm, split, g).values()) for g in "12")
            ax.plot([i - 0.08] * len(v1), v1, "o", mfc="none", c="C0", alpha=0.6)
            ax.plot([i + 0.08] * len(v), v, "o", c="C0", alpha=0.8)
            ax.plot([i - 0.2, i + 0.3], [sum(v) / len(v)] * 2, "-", c="C0")
        for j, (name, fl) in enumerate(t["splits"][split]["floors"].items()):
            ax.axhline(fl["bleu"], ls="--", c=f"C{j + 1}", lw=1, label=name)
        ax.set_xticks(range(len(arms)), arms)
        task = TASKS[t.get("task", "de_en")]
        ax.set(ylabel="BLEU (CFG 1 hollow, CFG 2 filled)", title=f"{task}, {split} split")
        ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)  # a task's first table
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cell(values):
    """mean +- s.e. over training seeds, with n (one seed: its value and n=1, never +- 0)."""
    m, se = mean_se(values)
    return f"{m:.2f} (n=1)" if len(values) == 1 else f"{m:.2f} +- {se:.2f} (n={len(values)})"


def diff(t, arm, split, g="1", ref="base"):
    """The paired difference from ref over the seeds both trained, with its 95% interval."""
    if arm == ref:
        return ""
    return paired_by_key(per_seed(t, arm, split, g), per_seed(t, ref, split, g))


def render_split(t, split):
    sp = t["splits"][split]
    lines = [
        f"**{split} split**: {sp['n']} held-out {TASKS[t.get('task', 'de_en')]} pairs (no 'near' "
        f"duplicates of training pairs), {sp['setting']}, {len(sp['sampling_seeds'])} sampling "
        "seeds.",
        "",
        "| arm | change | params | steps | val MSE / CE | BLEU, CFG 1 | vs base | BLEU, CFG 2 "
        "| vs base | ROUGE-1 / 2 / L, CFG 1 | ROUGE-1 / 2, CFG 2 | entropy, CFG 1 | s/output |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms_of(t, split):
        runs = [r for r in t["runs"] if r["arm"] == arm and split in r]
        mean = lambda k, runs=runs: sum(r[k] for r in runs) / len(runs)
        avg = lambda m, g="1", runs=runs: sum(r[split][g][m] for r in runs) / len(runs)
        lines.append(
            f"| {arm} | {CHANGES[arm]} | {mean('params_m'):.1f}M | {mean('steps'):.0f} | "
            f"{mean('val_mse'):.3f} / {mean('val_ce'):.3f} | "
            f"{cell(list(per_seed(t, arm, split).values()))} | {diff(t, arm, split)} | "
            f"{cell(list(per_seed(t, arm, split, '2').values()))} | {diff(t, arm, split, '2')} | "
            f"{avg('rouge1'):.1f} / {avg('rouge2'):.1f} / {avg('rougeL'):.1f} | "
            f"{avg('rouge1', '2'):.1f} / {avg('rouge2', '2'):.1f} | {avg('entropy'):.2f} | "
            f"{mean('seconds_per_output'):.3f} |"
        )
    for name, fl in sp["floors"].items():
        lines.append(
            f"| floor: {name} | | | | | {fl['bleu']:.2f} | | | | {fl['rouge1']:.1f} / "
            f"{fl['rouge2']:.1f} / {fl['rougeL']:.1f} | | {fl['entropy']:.2f} | |"
        )
    lines.append(f"| (references) | | | | | | | | | | | {sp['reference_entropy']:.2f} | |")
    for arm, ref in AGAINST:
        if diff(t, arm, split, ref=ref):
            lines += [
                "",
                f"{arm} against {ref}, BLEU paired by training seed: CFG 1 "
                f"{diff(t, arm, split, '1', ref)}, CFG 2 {diff(t, arm, split, '2', ref)}.",
            ]
    return lines


def render_diagnostics(t):
    runs = [r for r in t["runs"] if "diagnostics" in r]
    if not runs:
        return []
    d0 = runs[0]["diagnostics"]
    t0s = list(d0["round_trip"])
    lines = [
        f"**Diagnostics** (evaluate.py --diagnose, Euler ODE {d0['setting']['steps']} steps, "
        f"CFG {d0['setting']['guidance']:g}, sampling seed 0, {d0['n']} dev pairs and as many "
        f"training pairs; the decomposition on the first {d0['decompose_n']} of the run's "
        "held-out rows, dev, test and near alike, text positions only): BLEU / ROUGE-1 "
        "on held-out pairs, on training pairs (against their targets as the rows hold them), "
        "with each held-out source replaced by another's, and with the source zeroed; the "
        "decoder's accuracy on clean target latents; the round trips' accuracy from real "
        "latents noised to t0 (t = 1 is data); neighbouring text latents' cosine at the first "
        "sampling step against real latents'.",
        "",
        "| run | held-out | training | shuffled | zeroed | decoder | "
        + " | ".join(f"round trip {x}" for x in t0s)
        + " | neighbour cosine |",
        "|---|---|---|---|---|---|" + "---|" * len(t0s) + "---|",
    ]
    for r in runs:
        d = r["diagnostics"]
        pair = lambda k, d=d: f"{d[k]['bleu']:.2f} / {d[k]['rouge1']:.1f}"
        lines.append(
            f"| {r['arm']}-s{r['seed']} | "
            + " | ".join(pair(k) for k in DIAGNOSTICS)
            + f" | {d['decoder']:.3f} | "
            + " | ".join(f"{d['round_trip'][x]:.3f}" for x in t0s)
            + f" | {d['neighbour_cosine']['first_step']:.2f} "
            f"(real {d['neighbour_cosine']['real']:.2f}) |"
        )
    return lines


def render(t):
    prov = t["runs"][-1]["provenance"]
    lines = [
        "Each figure the mean over training seeds +- s.e. (n training seeds); each difference "
        "paired by training seed against base (below the table: against the arm named), with "
        "its 95% t-interval. Every run trained for "
        "the same minutes on one thread beside one other run (README.md says which); steps and "
        "validation losses are the arm's means. " + provenance_sentence(prov),
    ]
    for split in t["splits"]:
        lines += [""] + render_split(t, split)
    diag = render_diagnostics(t)
    lines += [""] + diag if diag else []
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TASK = task_argument(sys.argv)
    runs = "runs/cond_recipe" if TASK == "de_en" else f"runs/cond_recipe_{TASK}"
    HERE = HERE if TASK == "de_en" else os.path.join(HERE, TASK)
    table_command(HERE, collect, render, runs)
