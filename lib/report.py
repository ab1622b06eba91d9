"""evaluate.py's reports: where they go (beside what they evaluate) and which evaluation they
are of (a report of another evaluation is not replaced unasked); report.json, the markdown
tables of report.md and the plots (ppl_vs_entropy.png: the quality-diversity frontier;
guidance.png: held-out scores against the CFG scale). What is measured is in evaluate.py and
lib/reference.py.
"""

import json
import os
import sys

from lib.checkpoint import provenance
from lib.decompose import markdown
from lib.guard import in_step_folder
from lib.outputs import atomic_write_text, sha256


def default_out_dir(cfg) -> str:
    """Where a report goes unless --out_dir says: beside what it evaluates, so that evaluations
    of different runs never meet (<run>/eval, <distill out_dir>/eval, <samples file>-eval)."""
    if cfg.distill:
        return os.path.join(cfg.distill, "eval")
    if cfg.samples:
        return os.path.splitext(cfg.samples)[0] + "-eval"
    step = in_step_folder(cfg.ckpt)                    # a step folder named: its run's folder
    return os.path.join(os.path.dirname(step) if step else cfg.ckpt, "eval")


def evaluation_of(cfg, ckpt_sha256: str) -> dict:
    """What a report evaluates: the weights (their sha256, which the report's provenance has
    hashed already), the samples file (sha256), the rounds."""
    return {"ckpt_sha256": ckpt_sha256, "distill": cfg.distill,
            "samples_sha256": sha256(cfg.samples) if os.path.isfile(cfg.samples) else None}


def keep_other_reports(cfg):
    """A report of another evaluation (other weights, other samples, other rounds) is not
    replaced unless asked to; the same evaluation again (other settings) replaces it. The
    weights are hashed here only when there is a report to compare with."""
    path = os.path.join(cfg.out_dir, "report.json")
    if cfg.overwrite or not os.path.isfile(path):
        return
    evaluation = evaluation_of(cfg, provenance(cfg.ckpt).get("ckpt_sha256"))
    try:
        with open(path) as f:
            old = json.load(f)
        old = old.get("evaluation") or {"ckpt_sha256": old.get("ckpt_sha256")}  # older reports
    except (OSError, ValueError, AttributeError):
        old = {}
    differ = [k for k in evaluation if old.get(k, evaluation[k]) != evaluation[k]]
    if differ:
        raise ValueError(f"out_dir {cfg.out_dir} holds the report of another evaluation (other "
                         f"{differ[0].replace('_sha256', '')}): --overwrite replaces it, or give "
                         f"another --out_dir")


def pyplot():
    """matplotlib's pyplot on the file backend (imported only when a plot is drawn)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def label(s) -> str:
    """A sampler setting in words (a baseline's setting: its name)."""
    if "name" in s:
        return s["name"]
    return f"{s['sampler']} {s['steps']} steps, SC-CFG {s['sc_cfg']:g}" + \
        (f", gamma {s['gamma']:g}" if s["sampler"] == "sde" else "") + f", {s['grid']}"


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=2))


def write_markdown(report, path):
    """The report as a table: one row per setting, the real and shuffled text below."""
    cols = ("ppl", "entropy", "distinct_1", "distinct_2", "distinct_3", "repetition", "copies",
            "ngrams_seen")
    fmt = lambda r, k: f"{r[k]['mean']:.3g} ± {r[k]['se']:.2g}"
    lines = [f"Judge `{report['judge']}`, {report['n']} texts per seed, seeds {report['seeds']}, "
             f"novelty on {report['ngram']}-grams; mean ± standard error over seeds.", "",
             "| setting | Gen. PPL | x real | " + " | ".join(cols[1:]) + " | targets met |",
             "|---" * (len(cols) + 3) + "|"]
    for r in report["results"]:
        name = label(r["setting"]) if "sampler" in r["setting"] else "samples file"
        met = sum(r["targets"].values())
        lines.append(f"| {name} | {fmt(r, 'ppl')} | {r['ppl_ratio']:.2f} | "
                     + " | ".join(fmt(r, k) for k in cols[1:])
                     + f" | {met}/{len(r['targets'])} |")
    for name in ("real", "shuffled"):
        r = report["reference"][name]
        lines.append(f"| **{name} text** | {fmt(r, 'ppl')} | "
                     f"{r['ppl']['mean'] / report['reference']['real']['ppl']['mean']:.2f} | "
                     + " | ".join(fmt(r, k) for k in cols[1:]) + " | |")
    lines += (["", "Samples (first seed):", ""]
              + [f"- {t}" for t in report["results"][0].get("examples", [])])
    lines += ["", "Real held-out text:", ""] + [f"- {t}" for t in report["real_examples"]]
    if report.get("decomposition"):
        lines += ([""] + markdown(report["decomposition"])
                  + ["", "One sampling trajectory: `trajectory.png`."])
    atomic_write_text(path, "\n".join(lines) + "\n")


def plot(report, out_dir):
    """ppl_vs_entropy.png: every setting (mean ± se over seeds) with the real and the shuffled
    text as reference points: the quality-diversity frontier."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    res = report["results"]
    for sampler, marker in zip(sorted({r["setting"].get("sampler", "samples") for r in res}),
                               "os^Dv"):
        rs = [r for r in res if r["setting"].get("sampler", "samples") == sampler]
        ax.errorbar([r["entropy"]["mean"] for r in rs], [r["ppl"]["mean"] for r in rs],
                    xerr=[r["entropy"]["se"] for r in rs], yerr=[r["ppl"]["se"] for r in rs],
                    fmt=marker, label=sampler, capsize=2)
        for r in rs:
            if "steps" in r["setting"]:
                ax.annotate(f"{r['setting']['steps']}/{r['setting']['sc_cfg']:g}",
                            (r["entropy"]["mean"], r["ppl"]["mean"]), fontsize=6)
    for name, marker in (("real", "*"), ("shuffled", "x")):
        r = report["reference"][name]
        ax.plot(r["entropy"]["mean"], r["ppl"]["mean"], marker, color="k", markersize=10,
                label=f"{name} text")
    ax.set(xlabel="unigram entropy (higher: more diverse)", ylabel="Gen. PPL (lower: better)",
           yscale="log", title="quality vs diversity (labels: steps/SC-CFG)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "ppl_vs_entropy.png"), dpi=120)
    plt.close("all")


def write_heldout_markdown(report, path):
    """A conditional report as a table: one row per setting, the trivial systems below."""
    ms = ("bleu", "rouge1", "rouge2", "rougeL", "entropy")
    f = lambda v: f"{v['mean']:.2f} ± {v['se']:.2f}" if isinstance(v, dict) else f"{v:.2f}"
    lines = [f"{report['n']} held-out pairs, seeds {report['seeds']}: "
             "mean ± standard error over seeds (the trivial systems: ROUGE ± its standard error "
             "over pairs). Entropy: unigram, the encoder's tokens.", "",
             "| setting | CFG | NFE | BLEU | ROUGE-1 | ROUGE-2 | ROUGE-L | entropy |",
             "|---" * 8 + "|"]
    cfg = lambda s: f"{s.get('guidance', 1.0):g}" if "sampler" in s else ""  # baselines: none
    lines += [f"| {label(r['setting'])} | {cfg(r['setting'])} | {r['nfe']} | "
              + " | ".join(f(r[m]) for m in ms) + " |" for r in report["results"]]
    lines += [f"| **{name}** | | | " + " | ".join(f(b[m]) for m in ms) + " |"
              for name, b in report["baselines"].items()]
    lines += [f"| **references** | | | | | | | {report['reference_entropy']:.2f} |"]
    lines += ["", "Outputs (first setting and seed):", ""]
    lines += [f"- {e['source']}\n  - reference: {e['reference']}\n"
              f"  - {report.get('system', 'ELF')}: {e['text']}"
              for e in report["examples"]]
    if report.get("decomposition"):
        lines += (["", "The error decomposition on the target positions:", ""]
                  + markdown(report["decomposition"]))
    atomic_write_text(path, "\n".join(lines) + "\n")


def plot_guidance(report, out_dir):
    """guidance.png: BLEU, ROUGE-1 and entropy against the CFG scale (mean ± se over seeds), one
    line per other setting, the trivial systems as dashed lines."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    lines = {}
    for r in report["results"]:
        lines.setdefault(label(r["setting"]), []).append(r)
    for ax, m in zip(axes, ("bleu", "rouge1", "entropy")):
        for name, rs in lines.items():
            rs = sorted(rs, key=lambda r: r["setting"]["guidance"])
            ax.errorbar([r["setting"]["guidance"] for r in rs], [r[m]["mean"] for r in rs],
                        yerr=[r[m]["se"] for r in rs], marker="o", capsize=2, label=name)
        for (name, b), style in zip(report["baselines"].items(), ("--", ":", "-.")):
            ax.axhline(b[m]["mean"] if isinstance(b[m], dict) else b[m], color="k", ls=style,
                       lw=0.8, label=name)
        if m == "entropy":
            ax.axhline(report["reference_entropy"], color="g", ls="-.", lw=0.8, label="references")
        ax.set(xlabel="CFG scale", ylabel=m, title=m)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "guidance.png"), dpi=120)
    plt.close("all")


def table_command(here: str, collect, render, runs: str):
    """The command of a results/<question>/table.py: `--collect [RUNS ...]` gathers the raw
    reports under RUNS (default `runs`) into here/table.json with collect(); then here/table.md
    is rendered from table.json alone, so a kept table rebuilds byte for byte."""
    path = os.path.join(here, "table.json")
    if sys.argv[1:2] == ["--collect"]:
        table = collect(*(sys.argv[2:] or [runs]))
        with open(path, "w") as f:
            json.dump(table, f, indent=1, ensure_ascii=False)
            f.write("\n")
    with open(path) as f:
        table = json.load(f)
    with open(os.path.join(here, "table.md"), "w") as f:
        f.write(render(table))
    print(f"wrote {os.path.join(here, 'table.md')}")
