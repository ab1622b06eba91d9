"""The comparison of results/compare/: ELF (Euler ODE, Heun, the released SDE), MDLM and AR
trained for the same minutes, quality against sampling steps; a markdown table on stdout and
two plots (judge PPL and unigram entropy, each a ratio to real text, against the network
calls a sample took), and every row as JSON (NAME/table.json).

    python results/compare/table.py desc > results/compare/desc/table.md      # after run.sh desc
"""
import glob
import json
import os
import sys

import numpy as np

TITLE = {"desc": "8.5 training minutes on 2 CPU cores: descriptions, L = 16",
         "para": "8.5 training minutes on 2 CPU cores: paragraphs, L = 64",
         "hour": "60 training minutes, 3 runs on 2 cores: descriptions"}
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), sys.argv[1] if len(sys.argv) > 1 else "desc")


def mean_nfe(path):
    """The mean network calls per sample of a samples file (MDLM writes them; AR has none)."""
    with open(path) as f:
        nfe = [json.loads(line).get("nfe") for line in f if line.strip()]
    return float(np.mean(nfe)) if None not in nfe else None


def points():
    """[(method, steps, nfe, row, reference)] from every report.json here."""
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "*", "report.json"))):
        rep, name = json.load(open(path)), os.path.basename(os.path.dirname(path))
        for r in rep["results"]:
            s = r["setting"]
            if "sampler" in s:                           # ELF, sampled by evaluate.py
                out.append((f"ELF {s['sampler']}", s["steps"], r["nfe"], r, rep))
            elif name.startswith("mdlm"):
                out.append(("MDLM", int(name.split("_")[1]), mean_nfe(s["samples"]), r, rep))
            else:                                        # AR: a call per token it wrote, and the EOS
                out.append(("AR", None, r["mean_tokens"]["mean"] + 1, r, rep))
    return out


def ratio_se(r, rep, key):
    return r[key]["se"] / rep["reference"]["real"][key]["mean"]


def table(pts):
    real = pts[0][4]["reference"]["real"]
    lines = [f"Real held-out text: judge PPL {real['ppl']['mean']:.1f}, entropy {real['entropy']['mean']:.3f}, "
             f"repetition {real['repetition']['mean']:.2f}. Each row: 64 samples x 3 seeds, mean ± s.e. over seeds.",
             "", "| method | steps | NFE | Gen. PPL / real | entropy / real | repetition | copies | example |",
             "|---|---|---|---|---|---|---|---|"]
    for method, steps, nfe, r, rep in sorted(pts, key=lambda p: (p[0], p[1] or 0)):
        lines.append(f"| {method} | {steps if steps else '–'} | {nfe:.1f} | {r['ppl_ratio']:.2f} ± "
                     f"{ratio_se(r, rep, 'ppl'):.2f} | {r['entropy_ratio']:.2f} ± {ratio_se(r, rep, 'entropy'):.2f} | "
                     f"{r['repetition']['mean']:.2f} | {r['copies']['mean']:.2f} | {r['examples'][0]} |")
    return "\n".join(lines)


def plot(pts):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for key, name in (("ppl_ratio", "Gen. PPL / real text's (lower is better)"),
                      ("entropy_ratio", "unigram entropy / real text's (1 = real)")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for method in sorted({p[0] for p in pts}):
            mine = sorted((p for p in pts if p[0] == method), key=lambda p: p[2])
            ax.plot([p[2] for p in mine], [p[3][key] for p in mine], "o-" if len(mine) > 1 else "*",
                    markersize=6 if len(mine) > 1 else 12, label=method)
        ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set(xlabel="network calls per sample (NFE)", ylabel=name,
               title=TITLE.get(os.path.basename(HERE), ""))
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(HERE, f"{key}_vs_nfe.png"), dpi=120)
        plt.close(fig)


def write_json(pts):
    rows = [{"method": m, "steps": steps, "nfe": nfe, "ppl_ratio": r["ppl_ratio"], "ppl_ratio_se": ratio_se(r, rep, "ppl"),
             "entropy_ratio": r["entropy_ratio"], "entropy_ratio_se": ratio_se(r, rep, "entropy"),
             "repetition": r["repetition"]["mean"], "copies": r["copies"]["mean"], "examples": r["examples"][:4]}
            for m, steps, nfe, r, rep in sorted(pts, key=lambda p: (p[0], p[1] or 0))]
    with open(os.path.join(HERE, "table.json"), "w") as f:
        json.dump({"judge": pts[0][4]["judge"], "real": pts[0][4]["reference"]["real"]["ppl"], "rows": rows}, f, indent=1)


if __name__ == "__main__":
    pts = points()
    print(table(pts))
    plot(pts)
    write_json(pts)
