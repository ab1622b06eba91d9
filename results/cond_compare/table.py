"""The conditional comparison of results/cond_compare/ as a table and a plot: per task, ELF, the
conditional AR GPT-2 and conditional MDLM, each scored on the same held-out pairs by
lib/heldout.py (BLEU, ROUGE-1/2/L, entropy: mean ± s.e. over sampling seeds), with what each
cost (training steps, tokens seen, minutes; network calls and seconds per output).

    python results/cond_compare/table.py de_en                 # de_en/table.md from table.json
    python results/cond_compare/table.py de_en --collect runs/cond_compare/de_en   # + table.json
    python results/cond_compare/table.py de_en --floors    # + the floors in table.json (seconds)

collect reads the three reports and the runs' step counters under the runs folder (run.sh's
layout: elf/, eval_elf/, ar/, mdlm/) into TASK/table.json; render writes TASK/table.md and
TASK/score_vs_nfe.png (BLEU for de_en, ROUGE-1 for summaries) from table.json alone ($TABLES,
when set, is written instead of this folder: a smoke test's tables).

--floors measures the floors of lib/floors.py (retrieval of the nearest training pair's target,
a source-blind constant, copying the source, its first k words) on the task's held-out pairs of
each split in FLOOR_SPLITS ('all': the systems' pairs; 'test': without the near duplicates of
training pairs; 'near': those), scored by lib/heldout.py's Scorer as the systems are, into
table.json's "floors"; they need no training run. render shows them as rows of table.md.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from baselines import ar_cond
from lib import checkpoint
from lib.report import floor_scores, label

# $TABLES: a smoke test's tables, written elsewhere
HERE = os.environ.get("TABLES") or os.path.dirname(os.path.abspath(__file__))
METRICS = ("bleu", "rouge1", "rouge2", "rougeL", "entropy")
HEADLINE = {"de_en": "bleu"}  # the plot's score per task (else ROUGE-1)
headline = lambda name: HEADLINE.get(name.split("-")[0], "rouge1")  # de_en-60min: de_en's
N_EXAMPLES = 5  # held-out inputs shown with every system's output
FLOOR_SPLITS = ("all", "test", "near")  # the held-out splits the floors are measured on
REPORTS = {"ELF": "eval_elf", "AR": "ar/heldout", "MDLM": "mdlm/heldout"}  # under the runs folder


def setting_name(name, guidance=None):
    """A setting as the table names it: its label, with ELF's CFG scale."""
    return name + ("" if guidance is None else f", CFG {guidance:g}")


def trained(runs, system):
    """(steps, tokens seen, training minutes) of one system's run."""
    if system == "AR":
        with open(os.path.join(runs, "ar", "train_log.json")) as f:
            log = json.load(f)
        # its step folder's, or an older run's ckpt/ (ar_cond reads both layouts)
        cfg = ar_cond.read_meta(os.path.join(runs, "ar"))["train"]
        steps, minutes = log["steps"], log["minutes"]
    else:
        meta = checkpoint.read_meta(checkpoint.find(os.path.join(runs, system.lower())))
        steps, minutes, cfg = meta["step"], meta.get("train_minutes", 0.0), meta["train"]
    return steps, steps * cfg["batch_size"] * cfg["max_length"], minutes


def collect(runs, task):
    rows, systems = [], {}
    for system, path in REPORTS.items():
        with open(os.path.join(runs, path, "report.json")) as f:
            rep = json.load(f)
        steps, tokens, minutes = trained(runs, system)
        systems[system] = {"steps": steps, "tokens": tokens, "minutes": round(minutes, 2)}
        for r in rep["results"]:
            name = setting_name(label(r["setting"]), r["setting"].get("guidance"))
            secs = [p["seconds"] / rep["n"] for p in r["per_seed"]]
            rows.append(
                {
                    "system": system,
                    "setting": name,
                    "nfe": r["nfe"],
                    **{m: r[m] for m in METRICS},
                    "seconds_per_output": sum(secs) / len(secs),
                }
            )
    trivial = floor_scores(rep["baselines"], METRICS)
    return {
        "n": rep["n"],
        "seeds": rep["seeds"],
        "systems": systems,
        "trivial": trivial,
        "reference_entropy": rep["reference_entropy"],
        "rows": rows,
        "examples": examples(runs, rows, headline(task)),
    }


def examples(runs, rows, metric, k=N_EXAMPLES):
    """The first k held-out inputs with each system's output at its best setting (by the
    task's headline score), sampling seed 0, and the AR's greedy output beside its best."""
    best = {}
    for r in rows:
        if r["system"] not in best or r[metric]["mean"] > best[r["system"]][metric]["mean"]:
            best[r["system"]] = r
    picks = [(r["system"], r["setting"]) for r in best.values()]
    if ("AR", "AR greedy") not in picks and any(r["setting"] == "AR greedy" for r in rows):
        picks.append(("AR", "AR greedy"))
    out = []
    for system, setting in picks:
        texts = []
        with open(os.path.join(runs, REPORTS[system], "hypotheses.jsonl")) as f:
            for line in f:
                h = json.loads(line)
                name = setting_name(h["setting"], h.get("guidance"))
                if name == setting and h["seed"] == 0 and len(texts) < k:
                    texts.append(h)
        out.append(
            {
                "system": system,
                "setting": setting,
                "sources": [h["source"] for h in texts],
                "references": [h["reference"] for h in texts],
                "texts": [h["text"] for h in texts],
            }
        )
    return out


def measure_floors(task, n: int) -> dict:
    """The floors on the first n held-out pairs of each of FLOOR_SPLITS of a task's data
    (configs/TASK_tiny.py), scored by lib/heldout.py's Scorer with the encoder's tokens."""
    from encoder import Tokenizer
    from lib.config import TrainConfig, parse
    from lib.floors import NEAR
    from lib.heldout import Scorer, heldout_pairs, training_pairs

    dcfg = parse([f"configs/{task.split('-')[0]}_tiny.py"], TrainConfig)
    tok = Tokenizer(dcfg.encoder)
    train = training_pairs(dcfg, tok.tokenizer)
    splits = {}
    for split in FLOOR_SPLITS:
        _, srcs, refs = heldout_pairs(dcfg, n, tok.tokenizer, split)
        print(f"split '{split}': {len(srcs)} pairs")
        scorer = Scorer(srcs, refs, tok.tokenize, train=train, read=tok.read_back)
        splits[split] = {
            "n": len(srcs),
            "floors": floor_scores(scorer.baselines, METRICS),
        }
    return {"near": NEAR, "splits": splits}


def floor_rows(table) -> list:
    """table.md's rows of the floors: per split, each floor's scores (on 'all', the trivial
    rows above already show copy and lead-k: the same systems on the same pairs)."""
    splits = table.get("floors", {}).get("splits", {})
    return [
        f"| (floor, {split}: {s['n']} pairs) | {k} | 0 | "
        + " | ".join(f"{v[m]:.2f}" for m in METRICS)
        + " | |"
        for split, s in splits.items()
        for k, v in s["floors"].items()
        if not (split == "all" and k in table["trivial"])
    ]


def render(table, task):
    f = lambda v: f"{v['mean']:.2f} ± {v['se']:.2f}"
    lines = [
        f"{table['n']} held-out pairs x sampling seeds {table['seeds']}; mean ± standard "
        "error over seeds.",
        "",
        "| system | steps | tokens seen | training minutes |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {k} | {v['steps']} | {v['tokens'] / 1e6:.2f}M | {v['minutes']:.1f} |"
        for k, v in table["systems"].items()
    ]
    lines += [
        "",
        "| system | setting | NFE | BLEU | ROUGE-1 | ROUGE-2 | ROUGE-L | entropy | s / output |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['system']} | {r['setting']} | {r['nfe']} | "
        + " | ".join(f(r[m]) for m in METRICS)
        + f" | {r['seconds_per_output']:.4f} |"
        for r in table["rows"]
    ]
    lines += [
        f"| (trivial) | {k} | 0 | " + " | ".join(f"{v[m]:.2f}" for m in METRICS) + " | |"
        for k, v in table["trivial"].items()
    ]
    lines += floor_rows(table)
    lines += ["", f"References' entropy: {table['reference_entropy']:.3f}."]
    if table.get("floors"):
        lines += [
            "",
            "Floors (lib/floors.py), scored as the systems: the first pairs of each held-out "
            "split ('all': the systems' pairs; 'test': without those whose source has a "
            f"training source at TF-IDF cosine >= {table['floors']['near']:g}; 'near': those), "
            "from the training pairs alone.",
        ]
    ex = table.get("examples", [])
    if ex:
        lines += [
            "",
            f"The first {len(ex[0]['texts'])} held-out inputs, each system at its best "
            "setting (sampling seed 0):",
            "",
        ]
        for i, (src, ref) in enumerate(zip(ex[0]["sources"], ex[0]["references"])):
            lines += [f"{i + 1}. source: {src}", f"   - reference: {ref}"]
            lines += [f"   - {e['system']} ({e['setting']}): {e['texts'][i]}" for e in ex]
    os.makedirs(os.path.join(HERE, task), exist_ok=True)
    with open(os.path.join(HERE, task, "table.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = headline(task)
    fig, ax = plt.subplots(figsize=(6, 4))
    for system in table["systems"]:
        rs = sorted((r for r in table["rows"] if r["system"] == system), key=lambda r: r["nfe"])
        ax.errorbar(
            [r["nfe"] for r in rs],
            [r[m]["mean"] for r in rs],
            yerr=[r[m]["se"] for r in rs],
            fmt="o-",
            capsize=2,
            label=system,
        )
    for k, v in table["trivial"].items():
        ax.axhline(v[m], ls=":", color="grey")
        ax.annotate(k, (1, v[m]), fontsize=7, color="grey")
    # the floors that look up (on the systems' pairs): what recalling a training pair scores
    floor_all = table.get("floors", {}).get("splits", {}).get("all", {}).get("floors", {})
    for k, v in floor_all.items():
        if k not in table["trivial"]:
            ax.axhline(v[m], ls="--", color="grey")
            ax.annotate(k, (1, v[m]), fontsize=7, color="grey")
    ax.set(
        xscale="log",
        xlabel="network calls per output (NFE)",
        ylabel=m,
        title=f"{task}: {m} against NFE",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, task, "score_vs_nfe.png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: table.py TASK [--collect RUNS | --floors]")
    task = sys.argv[1]
    path = os.path.join(HERE, task, "table.json")
    if sys.argv[2:3] == ["--floors"]:  # the floors into the kept table.json, then render
        with open(path) as fh:
            table = json.load(fh)
        table["floors"] = measure_floors(task, table["n"])
        with open(path, "w") as fh:
            json.dump(table, fh, indent=1, ensure_ascii=False)
            fh.write("\n")
    if sys.argv[2:3] == ["--collect"]:  # refused in one line, the kept table kept, when wrong
        from lib.report import collect_table

        runs = sys.argv[3] if len(sys.argv) > 3 else f"runs/cond_compare/{task}"
        try:
            collect_table(path, collect, [runs], task)
        except ValueError as e:
            sys.exit(f"error: {e}")
    with open(path) as fh:
        render(json.load(fh), task)
    print(f"wrote {os.path.join(HERE, task, 'table.md')}")
