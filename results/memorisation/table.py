"""Who copies at equal compute (results/memorisation/README.md): for ELF, MDLM and AR at each
training minute of run.sh (snapshots 1, 2, 4, 8.5 and the end, 20), the steps, the passes over
the training descriptions, the share of samples that are a training description verbatim, the
share of their 4-grams seen in training, Gen. PPL of all samples and of the samples that are not
copies (`ppl_novel`), each a ratio to real held-out text's, and the entropy ratio.

    python results/memorisation/table.py                          # table.md from table.json
    python results/memorisation/table.py --collect runs/memorisation/eval      # after run.sh

Two steps: collect reads the yardstick's report.json of each <model>_<minutes> folder, and the
steps from the run folders beside it (runs/memorisation/<model>[/at-<m>min]), into table.json
and draws memorisation.png; render writes table.md from table.json alone.
"""

import functools
import glob
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib import checkpoint
from lib.data import load_documents
from lib.report import pyplot, table_command

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("elf", "mdlm", "ar")
NAMES = {"elf": "ELF", "mdlm": "MDLM", "ar": "AR"}


def progress(runs, model, minutes, end):
    """(steps, passes over the training texts) of a model's snapshot, or of its end."""
    folder = os.path.join(runs, model, "" if minutes == end else f"at-{minutes:g}min")
    if model == "ar":  # packed rows: the log counts them
        with open(os.path.join(folder, "train_log.json")) as f:
            log = json.load(f)
        return log["steps"], log["steps"] * log["config"]["batch_size"] / log["train_rows"]
    meta = checkpoint.read_meta(checkpoint.find(folder))  # one text a row
    train = meta["train"]
    return meta["step"], meta["step"] * train["batch_size"] / n_train(train["dataset"])


@functools.lru_cache
def n_train(dataset):
    """How many training texts the dataset has (read once, not at every snapshot)."""
    return len(load_documents(dataset)[0])


def collect(root):
    """Each <model>_<minutes>/report.json under root (the runs beside it) -> the table."""
    runs, rows, real = os.path.dirname(os.path.normpath(root)), [], None
    found = {}
    for path in glob.glob(os.path.join(root, "*_*", "report.json")):
        model, m = os.path.basename(os.path.dirname(path)).split("_", 1)
        found.setdefault(model, {})[float(m)] = path
    for model in MODELS:
        end = max(found.get(model, {0: None}))
        for m, path in sorted(found.get(model, {}).items()):
            with open(path) as f:
                rep = json.load(f)
            r, ref = rep["results"][0], rep["reference"]["real"]
            steps, passes = progress(runs, model, m, end)
            real = {
                "ppl": ref["ppl"]["mean"],
                "ppl_novel": ref["ppl_novel"]["mean"],
                "copies": ref["copies"]["mean"],
                "entropy": ref["entropy"]["mean"],
            }
            rows.append(
                {
                    "model": model,
                    "minutes": m,
                    "steps": steps,
                    "passes": round(passes, 2),
                    **{
                        k: r[k]
                        for k in (
                            "copies",
                            "ngrams_seen",
                            "ppl",
                            "ppl_novel",
                            "entropy",
                            "repetition",
                        )
                    },
                    "ppl_ratio": r["ppl"]["mean"] / real["ppl"],
                    "ppl_novel_ratio": r["ppl_novel"]["mean"] / real["ppl_novel"],
                    "entropy_ratio": r["entropy"]["mean"] / real["entropy"],
                    "example": r["examples"][0] if r.get("examples") else "",
                }
            )
    table = {"judge": "judges/desc_wiki", "n": 64, "seeds": [0, 1, 2], "real": real, "rows": rows}
    plot(table, os.path.join(HERE, "memorisation.png"))
    return table


def starts_to_copy(table, model):
    """The first minutes at which the model's samples copy training texts more often than real
    held-out text does (by more than two standard errors), or None."""
    for r in table["rows"]:
        if (
            r["model"] == model
            and r["copies"]["mean"] - 2 * r["copies"]["se"] > table["real"]["copies"]
        ):
            return r["minutes"]
    return None


def render(table):
    real = table["real"]
    f = lambda d: f"{d['mean']:.3f} ± {d['se']:.3f}"
    lines = [
        "# Who copies at equal compute",
        "",
        f"Each model alone on the machine's cores; {table['n']} samples x seeds "
        f"{', '.join(map(str, table['seeds']))} per point, scored by `{table['judge']}`. "
        f"Real held-out text: Gen. PPL {real['ppl']:.2f}, of its texts that are not training "
        f"descriptions {real['ppl_novel']:.2f}, copies {real['copies']:.3f} (held-out "
        f"descriptions that are also training descriptions, e.g. 'genus of plants'). "
        "Mean ± standard error over the sampling seeds.",
        "",
        "| model | minutes | steps | passes over the data | copies | 4-grams seen in training "
        "| Gen. PPL / real | Gen. PPL of non-copies / real's | entropy / real | repetition "
        "| example |",
        "|" + "---|" * 11,
    ]
    for r in table["rows"]:
        lines.append(
            f"| {NAMES[r['model']]} | {r['minutes']:g} | {r['steps']} | {r['passes']:.1f} | "
            f"{f(r['copies'])} | {f(r['ngrams_seen'])} | {r['ppl_ratio']:.2f} | "
            + ("-" if math.isnan(r["ppl_novel_ratio"]) else f"{r['ppl_novel_ratio']:.2f}")
            + f" | {r['entropy_ratio']:.3f} | {r['repetition']['mean']:.3f} | "
            f"{r['example'].replace('|', '/')} |"
        )
    lines.append("")
    for model in MODELS:
        m = starts_to_copy(table, model)
        lines.append(
            f"- {NAMES[model]}: "
            + (
                f"copies more than real text from {m:g} minutes"
                if m is not None
                else "never copies more than real text does here"
            )
        )
    return "\n".join(lines) + "\n"


def plot(table, path):
    """Copies and Gen. PPL of the non-copies against training minutes, a line per model."""
    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for model in MODELS:
        rs = [r for r in table["rows"] if r["model"] == model]
        if not rs:
            continue
        ms = [r["minutes"] for r in rs]
        a.errorbar(
            ms,
            [r["copies"]["mean"] for r in rs],
            [r["copies"]["se"] for r in rs],
            marker="o",
            label=NAMES[model],
        )
        b.plot(ms, [r["ppl_novel_ratio"] for r in rs], marker="o", label=NAMES[model])
    a.axhline(table["real"]["copies"], color="k", ls=":", label="real held-out text")
    b.axhline(1.0, color="k", ls=":", label="real held-out text")
    a.set(xscale="log", xlabel="training minutes", ylabel="share of samples copied verbatim")
    b.set(
        xscale="log",
        yscale="log",
        xlabel="training minutes",
        ylabel="Gen. PPL of the non-copies / real's",
    )
    a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/memorisation/eval")
