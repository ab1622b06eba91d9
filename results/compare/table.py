"""The comparison of results/compare/: ELF (Euler ODE, Heun, the released SDE), MDLM and AR
trained for the same minutes, quality against sampling steps: NAME/table.json (every row),
NAME/table.md and two plots (judge PPL and unigram entropy, each a ratio to real text, against
the network calls a sample took).

    python results/compare/table.py desc             # desc/table.md from the kept desc/table.json
    python results/compare/table.py desc --plots     # and the two plots
    python results/compare/table.py desc --collect \
        runs/compare/desc/eval                       # table.json from the reports, then both

Two steps: collect reads the reports run.sh wrote (runs/compare/NAME/eval/<setting>/report.json,
and MDLM's samples files for its calls) into NAME/table.json; render writes table.md (and the
plots) from table.json alone, so the table is rebuilt byte for byte from what is kept.
"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.guard import cli
from lib.outputs import atomic_write_text, first_line
from lib.report import collect_table, read_table

TITLE = {
    "desc": "8.5 training minutes on 2 CPU cores: descriptions, L = 16",
    "para": "8.5 training minutes on 2 CPU cores: paragraphs, L = 64",
    "hour": "60 training minutes, 3 runs on 2 cores: descriptions",
}
ROOT = os.path.dirname(os.path.abspath(__file__))


def mean_nfe(path):
    """The mean network calls per sample of a samples file (MDLM writes them; AR has none)."""
    import numpy as np

    with open(path) as f:
        nfe = [json.loads(line).get("nfe") for line in f if line.strip()]
    return float(np.mean(nfe)) if None not in nfe else None


def points(root):
    """[(method, steps, nfe, row, reference)] from every <root>/<setting>/report.json."""
    out = []
    for path in sorted(glob.glob(os.path.join(root, "*", "report.json"))):
        rep, name = json.load(open(path)), os.path.basename(os.path.dirname(path))
        for r in rep["results"]:
            s = r["setting"]
            if "sampler" in s:  # ELF, sampled by evaluate.py
                out.append((f"ELF {s['sampler']}", s["steps"], r["nfe"], r, rep))
            elif name.startswith("mdlm"):
                out.append(("MDLM", int(name.split("_")[1]), mean_nfe(s["samples"]), r, rep))
            else:  # AR: a call per token written, and the EOS
                out.append(("AR", None, r["mean_tokens"]["mean"] + 1, r, rep))
    return out


def ratio_se(r, rep, key):
    return r[key]["se"] / rep["reference"]["real"][key]["mean"]


def collect(root):
    pts = points(root)
    rows = [
        {
            "method": m,
            "steps": steps,
            "nfe": nfe,
            "ppl_ratio": r["ppl_ratio"],
            "ppl_ratio_se": ratio_se(r, rep, "ppl"),
            "entropy_ratio": r["entropy_ratio"],
            "entropy_ratio_se": ratio_se(r, rep, "entropy"),
            "repetition": r["repetition"]["mean"],
            "copies": r["copies"]["mean"],
            "examples": r["examples"][:4],
        }
        for m, steps, nfe, r, rep in sorted(pts, key=lambda p: (p[0], p[1] or 0))
    ]
    real = pts[0][4]["reference"]["real"]
    return {
        "judge": pts[0][4]["judge"],
        "real": real["ppl"],
        "real_entropy": real["entropy"]["mean"],
        "real_repetition": real["repetition"]["mean"],
        "rows": rows,
    }


def render(table):
    lines = [
        f"Real held-out text: judge PPL {table['real']['mean']:.1f}, "
        f"entropy {table['real_entropy']:.3f}, repetition {table['real_repetition']:.2f}. "
        f"Each row: 64 samples x 3 seeds, mean ± s.e. over seeds.",
        "",
        "| method | steps | NFE | Gen. PPL / real | entropy / real | repetition | "
        "copies | example |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in table["rows"]:
        lines.append(
            f"| {x['method']} | {x['steps'] if x['steps'] else '–'} | {x['nfe']:.1f} | "
            f"{x['ppl_ratio']:.2f} ± {x['ppl_ratio_se']:.2f} | "
            f"{x['entropy_ratio']:.2f} ± {x['entropy_ratio_se']:.2f} | "
            f"{x['repetition']:.2f} | {x['copies']:.2f} | {x['examples'][0]} |"
        )
    return "\n".join(lines) + "\n"


def plot(table, here):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = table["rows"]
    for key, name in (
        ("ppl_ratio", "Gen. PPL / real text's (lower is better)"),
        ("entropy_ratio", "unigram entropy / real text's (1 = real)"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for method in sorted({x["method"] for x in rows}):
            mine = sorted((x for x in rows if x["method"] == method), key=lambda x: x["nfe"])
            ax.plot(
                [x["nfe"] for x in mine],
                [x[key] for x in mine],
                "o-" if len(mine) > 1 else "*",
                markersize=6 if len(mine) > 1 else 12,
                label=method,
            )
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set(
            xlabel="network calls per sample (NFE)",
            ylabel=name,
            title=TITLE.get(os.path.basename(here), ""),
        )
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(here, f"{key}_vs_nfe.png"), dpi=120)
        plt.close(fig)


def main(args):
    name = args[0] if args and not args[0].startswith("--") else "desc"
    here = os.path.join(ROOT, name)
    path = os.path.join(here, "table.json")
    if "--collect" in args:
        i = args.index("--collect")
        runs = args[i + 1] if len(args) > i + 1 else os.path.join("runs", "compare", name, "eval")
        collect_table(path, collect, [runs])
    table = read_table(path)
    try:
        text = render(table)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"{path} is not a comparison table ({first_line(e)})") from None
    atomic_write_text(os.path.join(here, "table.md"), text)
    if "--plots" in args or "--collect" in args:
        plot(table, here)
    print(f"wrote {os.path.join(here, 'table.md')}")


if __name__ == "__main__":
    cli(main)
