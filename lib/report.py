"""evaluate.py's reports: where they go (beside what they evaluate) and which evaluation they
are of (a report of another evaluation is not replaced unasked); report.json, the markdown
tables of report.md and the plots (ppl_vs_entropy.png: the quality-diversity frontier;
guidance.png: held-out scores against the CFG scale), and the provenance every row carries
(`machine`, `row_provenance`). What is measured is in evaluate.py and lib/reference.py.
"""

import datetime
import json
import os
import platform
import re

import torch

from lib.checkpoint import provenance
from lib.decompose import markdown
from lib.guard import cli, in_step_folder
from lib.metrics import paired_interval
from lib.outputs import atomic_write_text, first_line, sha256


def default_out_dir(cfg) -> str:
    """Where a report goes unless --out_dir says: beside what it evaluates, so that evaluations
    of different runs never meet (<run>/eval, <distill out_dir>/eval, <samples file>-eval)."""
    if cfg.distill:
        return os.path.join(cfg.distill, "eval")
    if cfg.samples:
        return os.path.splitext(cfg.samples)[0] + "-eval"
    step = in_step_folder(cfg.ckpt)  # a step folder named: its run's folder
    # a split other than the default's its own folder: a dev report never replaces a test one
    name = "eval" if getattr(cfg, "split", "") in ("", "dev") else f"eval-{cfg.split}"
    return os.path.join(os.path.dirname(step) if step else cfg.ckpt, name)


def evaluation_of(cfg, ckpt_sha256: str) -> dict:
    """What a report evaluates: the weights (their sha256, which the report's provenance has
    hashed already), the samples file (sha256), the rounds, the held-out split."""
    return {
        "ckpt_sha256": ckpt_sha256,
        "split": getattr(cfg, "split", "") or None,
        "distill": cfg.distill,
        "samples_sha256": sha256(cfg.samples) if os.path.isfile(cfg.samples) else None,
    }


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
    if not isinstance(old, dict):  # not an evaluation's report: someone's, kept
        raise ValueError(
            f"out_dir {cfg.out_dir} holds a report.json whose 'evaluation' is not this "
            f"repository's ({type(old).__name__}): --overwrite replaces it, or give another "
            f"--out_dir"
        )
    differ = [k for k in evaluation if old.get(k, evaluation[k]) != evaluation[k]]
    if differ:
        raise ValueError(
            f"out_dir {cfg.out_dir} holds the report of another evaluation (other "
            f"{differ[0].replace('_sha256', '')}): --overwrite replaces it, or give "
            f"another --out_dir"
        )


def machine() -> dict:
    """The CPU (model, and the ISA flags that change speed and bf16 numerics), torch's version."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        cpu = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE).group(1).strip()
        flags = set(re.search(r"^flags\s*:\s*(.+)$", info, re.MULTILINE).group(1).split())
    except (OSError, AttributeError):  # not Linux: the platform's name alone
        pass
    return {
        "cpu": cpu,
        "cpu_flags": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags],
        "torch": torch.__version__,
    }


def judge_sha256(judge: str):
    """A hash of a judge folder's weights (a hub name or no judge: None)."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        if judge and os.path.isfile(os.path.join(judge, name)):
            return sha256(os.path.join(judge, name))
    return None


def row_provenance(prov: dict, judge: str, second_judge: str, split: str) -> dict:
    """What one report row was measured with: the commit, the machine, the judges, the split."""
    return {
        "commit": prov.get("git_commit"),
        "git_dirty": prov.get("git_dirty"),
        **machine(),
        "judge": judge,
        "judge_sha256": judge_sha256(judge),
        "second_judge": second_judge,
        "split": split,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
    }


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
    return (
        f"{s['sampler']} {s['steps']} steps, SC-CFG {s['sc_cfg']:g}"
        + (f", gamma {s['gamma']:g}" if s["sampler"] == "sde" else "")
        + f", {s['grid']}"
    )


def write_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=2))


# the instrument's table: diversity at a matched size, the n-gram judge, MAUVE, novelty
INSTRUMENT = (
    ("length", "length"),
    ("distinct_1_matched", "distinct-1"),
    ("distinct_2_matched", "distinct-2"),
    ("distinct_3_matched", "distinct-3"),
    ("unique", "unique"),
    ("self_bleu", "self-BLEU"),
    ("kn_ppl", "n-gram PPL"),
    ("mauve", "MAUVE"),
    ("copies", "copies"),
    ("ngrams_seen", "n-grams seen"),
)


def write_markdown(report, path):
    """The report as tables: one row per setting, the real and shuffled text below; the judge's
    figures (with --judge), then the instrument's."""
    cols = (
        "ppl",
        "entropy",
        "distinct_1",
        "distinct_2",
        "distinct_3",
        "repetition",
        "copies",
        "ngrams_seen",
    )
    fmt = lambda r, k: f"{r[k]['mean']:.3g} ± {r[k]['se']:.2g}" if k in r else "-"
    name = lambda r: label(r["setting"]) if "sampler" in r["setting"] else "samples file"
    refs = [(f"**{k} text**", report["reference"][k]) for k in ("real", "shuffled")]
    real = report["reference"]["real"]
    lines = [
        f"Judge `{report['judge'] or '(none)'}`, {report['n']} texts per seed, seeds "
        f"{report['seeds']}, held-out split `{report.get('split', 'all')}`, novelty on "
        f"{report['ngram']}-grams; mean ± standard error over seeds.",
        "",
    ]
    if "ppl" in real:
        lines += [
            "| setting | Gen. PPL | x real | " + " | ".join(cols[1:]) + " | targets met |",
            "|---" * (len(cols) + 3) + "|",
        ]
        for r in report["results"]:
            met = sum(r["targets"].values())
            lines.append(
                f"| {name(r)} | {fmt(r, 'ppl')} | {r['ppl_ratio']:.2f} | "
                + " | ".join(fmt(r, k) for k in cols[1:])
                + f" | {met}/{len(r['targets'])} |"
            )
        for who, r in refs:
            lines.append(
                f"| {who} | {fmt(r, 'ppl')} | {r['ppl']['mean'] / real['ppl']['mean']:.2f}"
                " | " + " | ".join(fmt(r, k) for k in cols[1:]) + " | |"
            )
        lines.append("")
    if "kn_ppl" in real:
        size = report.get("matched_size")
        lines += [
            (
                f"Diversity at a matched size ({size} texts a set; length in encoder tokens), "
                f"the n-gram judge (`{report.get('second_judge')}`), MAUVE against held-out "
                f"text ({report.get('mauve_features')}); entropy tracks length, not "
                "diversity, so it is not among them."
            ),
            "",
            "| setting | " + " | ".join(h for _, h in INSTRUMENT) + " | n-gram PPL x real |",
            "|---" * (len(INSTRUMENT) + 2) + "|",
        ]
        for who, r in [(name(r), r) for r in report["results"]] + refs:
            lines.append(
                f"| {who} | "
                + " | ".join(fmt(r, k) for k, _ in INSTRUMENT)
                + f" | {r['kn_ppl']['mean'] / real['kn_ppl']['mean']:.2f} |"
            )
    lines += ["", "Samples (first seed):", ""] + [
        f"- {t}" for t in report["results"][0].get("examples", [])
    ]
    lines += ["", "Real held-out text:", ""] + [f"- {t}" for t in report["real_examples"]]
    if report.get("decomposition"):
        lines += (
            [""]
            + markdown(report["decomposition"])
            + ["", "One sampling trajectory: `trajectory.png`."]
        )
    atomic_write_text(path, "\n".join(lines) + "\n")


def plot(report, out_dir):
    """ppl_vs_entropy.png (its old name, kept): every setting (mean ± se over seeds) with the
    real and the shuffled text as reference points: the quality-diversity frontier, diversity
    read as distinct-2 at a matched size where the report has it (entropy tracks length)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    res = report["results"]
    real = report["reference"]["real"]
    # diversity that is not length where measured; the judge's PPL, else the n-gram judge's
    xk = "distinct_2_matched" if "distinct_2_matched" in real else "entropy"
    yk = "ppl" if "ppl" in real else "kn_ppl"
    for sampler, marker in zip(
        sorted({r["setting"].get("sampler", "samples") for r in res}), "os^Dv"
    ):
        rs = [r for r in res if r["setting"].get("sampler", "samples") == sampler]
        ax.errorbar(
            [r[xk]["mean"] for r in rs],
            [r[yk]["mean"] for r in rs],
            xerr=[r[xk]["se"] for r in rs],
            yerr=[r[yk]["se"] for r in rs],
            fmt=marker,
            label=sampler,
            capsize=2,
        )
        for r in rs:
            if "steps" in r["setting"]:
                ax.annotate(
                    f"{r['setting']['steps']}/{r['setting']['sc_cfg']:g}",
                    (r[xk]["mean"], r[yk]["mean"]),
                    fontsize=6,
                )
    for name, marker in (("real", "*"), ("shuffled", "x")):
        r = report["reference"][name]
        ax.plot(
            r[xk]["mean"], r[yk]["mean"], marker, color="k", markersize=10, label=f"{name} text"
        )
    ax.set(
        xlabel=("distinct-2 at a matched size" if xk != "entropy" else "unigram entropy")
        + " (higher: more diverse)",
        ylabel=("Gen. PPL" if yk == "ppl" else "n-gram judge PPL") + " (lower: better)",
        yscale="log",
        title="quality vs diversity (labels: steps/SC-CFG)",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "ppl_vs_entropy.png"), dpi=120)
    plt.close("all")


def write_heldout_markdown(report, path):
    """A conditional report as a table: one row per setting, the trivial systems below."""
    ms = ("bleu", "rouge1", "rouge2", "rougeL", "entropy")
    f = lambda v: f"{v['mean']:.2f} ± {v['se']:.2f}" if isinstance(v, dict) else f"{v:.2f}"
    lines = [
        f"{report['n']} held-out pairs, seeds {report['seeds']}: "
        "mean ± standard error over seeds (the trivial systems: ROUGE ± its standard error "
        "over pairs). Entropy: unigram, the encoder's tokens.",
        "",
        "| setting | CFG | NFE | BLEU | ROUGE-1 | ROUGE-2 | ROUGE-L | entropy |",
        "|---" * 8 + "|",
    ]
    cfg = lambda s: f"{s.get('guidance', 1.0):g}" if "sampler" in s else ""  # baselines: none
    lines += [
        f"| {label(r['setting'])} | {cfg(r['setting'])} | {r['nfe']} | "
        + " | ".join(f(r[m]) for m in ms)
        + " |"
        for r in report["results"]
    ]
    lines += [
        f"| **{name}** | | | " + " | ".join(f(b[m]) for m in ms) + " |"
        for name, b in report["baselines"].items()
    ]
    lines += [f"| **references** | | | | | | | {report['reference_entropy']:.2f} |"]
    lines += ["", "Outputs (first setting and seed):", ""]
    lines += [
        f"- {e['source']}\n  - reference: {e['reference']}\n"
        f"  - {report.get('system', 'ELF')}: {e['text']}"
        for e in report["examples"]
    ]
    if report.get("diagnostics"):  # evaluate.py --diagnose: does it read its source?
        d = report["diagnostics"]
        lines += [
            "",
            f"Diagnostics ({label(d['setting'])}, seed 0): held-out pairs as scored above; "
            "its training pairs (against their targets as its rows hold them, and whole); "
            "the held-out pairs with each source replaced by the next's, "
            "and with the source zeroed (CFG's unconditional branch).",
            "",
            "| pairs | BLEU | ROUGE-1 | ROUGE-2 | ROUGE-L |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {k} | " + " | ".join(f"{d[k][m]:.2f}" for m in ms[:4]) + " |"
            for k in ("heldout", "train", "train_full", "shuffled", "zeroed")
            if k in d  # reports before train_full have none
        ]
    if report.get("decomposition"):
        lines += ["", "The error decomposition on the target positions:", ""] + markdown(
            report["decomposition"]
        )
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
            ax.errorbar(
                [r["setting"]["guidance"] for r in rs],
                [r[m]["mean"] for r in rs],
                yerr=[r[m]["se"] for r in rs],
                marker="o",
                capsize=2,
                label=name,
            )
        for (name, b), style in zip(report["baselines"].items(), ("--", ":", "-.")):
            ax.axhline(
                b[m]["mean"] if isinstance(b[m], dict) else b[m],
                color="k",
                ls=style,
                lw=0.8,
                label=name,
            )
        if m == "entropy":
            ax.axhline(report["reference_entropy"], color="g", ls="-.", lw=0.8, label="references")
        ax.set(xlabel="CFG scale", ylabel=m, title=m)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "guidance.png"), dpi=120)
    plt.close("all")


def paired_by_key(a: dict, b: dict, scale: float = 1.0, digits: int = 2) -> str:
    """a - b over the keys (training seeds, teachers) both hold, as a table cell: the mean
    difference, its 95% t-interval and n (one pair: the difference alone); '' where none."""
    both = sorted(set(a) & set(b))
    if not both:
        return ""
    d, lo, hi, n = paired_interval([a[s] / scale for s in both], [b[s] / scale for s in both])
    if n == 1:
        return f"{d:+.{digits}f} (n=1)"
    return f"{d:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}] (n={n})"


def provenance_sentence(prov: dict) -> str:
    """A kept table's machine in one sentence, from a row's provenance (row_provenance)."""
    return (
        f"Commit {prov['commit'][:7]}, {prov['cpu']} ({', '.join(prov['cpu_flags'])}), "
        f"torch {prov['torch']}, {prov['date'][:10]}."
    )


def floor_scores(baselines: dict, metrics) -> dict:
    """A held-out report's floors as numbers: {name: {metric: value}}, where the report holds each
    value as a number or as {mean, se} over its pairs."""
    return {
        k: {m: v[m]["mean"] if isinstance(v[m], dict) else v[m] for m in metrics}
        for k, v in baselines.items()
    }


def collect_table(path: str, collect, roots: list, *args, report: str = "report.json"):
    """table.json (at path) from collect(*roots, *args), written whole (atomic_write_text) and
    only when the runs are there: a folder that is missing or holds no `report` file, or reports
    collect cannot read, stop with one line and leave the kept table as it was."""
    import glob

    for root in roots:
        if not os.path.isdir(root):
            raise ValueError(f"--collect {root}: no such folder; {path} is kept")
        if not glob.glob(os.path.join(root, "**", report), recursive=True):
            raise ValueError(f"--collect {root}: no runs there (no {report}); {path} is kept")
    try:
        table = collect(*roots, *args)
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise ValueError(
            f"--collect {' '.join(roots)}: could not read the runs ({first_line(e)}); "
            f"{path} is kept"
        ) from None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_text(path, json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    return table


def read_table(path: str):
    """A kept table.json, or one line saying why it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path} is missing: make it with --collect RUNS") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not a table ({first_line(e)})") from None


# the conditional tasks of the results tables (run.sh's TASK), in words
TASKS = {"de_en": "de->en", "wiki_summary": "summaries"}


def task_argument(argv: list, default: str = "de_en") -> str:
    """A conditional table.py's optional first argument, its task (removed from argv); an
    unknown one is one line and exit 1."""
    task = argv.pop(1) if len(argv) > 1 and not argv[1].startswith("--") else default
    if task not in TASKS:
        raise SystemExit(f"error: unknown task '{task}' (choose from {', '.join(TASKS)})")
    return task


def table_command(here: str, collect, render, runs: str, report: str = "report.json"):
    """The command of a results/<question>/table.py: `--collect [RUNS ...]` gathers the raw
    reports (`report` files) under RUNS (default `runs`) into here/table.json with collect();
    then here/table.md is rendered from table.json alone, so a kept table rebuilds byte for
    byte. Bad input is one line (lib.guard.cli)."""

    def main(argv):
        path = os.path.join(here, "table.json")
        if argv[:1] == ["--collect"]:
            collect_table(path, collect, argv[1:] or [runs], report=report)
        table = read_table(path)
        try:
            text = render(table)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise ValueError(f"{path} is not a table of this question ({first_line(e)})") from None
        atomic_write_text(os.path.join(here, "table.md"), text)
        print(f"wrote {os.path.join(here, 'table.md')}")

    cli(main)
