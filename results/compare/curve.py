"""Quality against training tokens for ELF and MDLM (results/compare/curve.sh): the judge's
Gen. PPL and the unigram entropy, each a ratio to real text's, at the snapshots of 1, 2 and 4
training minutes and at the end (8.5); a markdown table on stdout and curve/tokens.png.

    python results/compare/curve.py > results/compare/curve/table.md       # after curve.sh
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
import checkpoint  # noqa: E402  (the repository's, for its run-folder layout)

HERE = os.path.join(ROOT, "results", "compare", "curve")


def tokens(ckpt):
    """(training tokens, steps) of a run folder or snapshot: step x batch x length."""
    meta = checkpoint.read_meta(checkpoint.find(ckpt))
    return meta["step"] * meta["train"]["batch_size"] * meta["train"]["max_length"], meta["step"]


def points():
    """{model: [(minutes, steps, tokens, row)]}; an MDLM row's checkpoint is found from its samples file."""
    out = {}
    for m in ("1", "2", "4", "end"):
        for method in ("elf", "mdlm"):
            path = os.path.join(HERE, f"{method}_{m}", "report.json")
            if not os.path.isfile(path):
                continue
            rep = json.load(open(path))
            r = rep["results"][0]
            if method == "elf":
                ckpt = rep["ckpt"]
            else:                                        # samples in RUNS/mdlm or RUNS/mdlm_<m>
                runs = os.path.dirname(os.path.dirname(r["setting"]["samples"]))
                ckpt = os.path.join(runs, "mdlm", "" if m == "end" else f"at-{m}min")
            n, steps = tokens(ckpt)
            out.setdefault(method.upper() if method == "mdlm" else "ELF", []).append(
                (8.5 if m == "end" else float(m), steps, n, r))
    return out


if __name__ == "__main__":
    pts = points()
    print("| model | training minutes | steps | tokens | Gen. PPL / real | entropy / real | repetition |")
    print("|---|---|---|---|---|---|---|")
    for method, rows in pts.items():
        for minutes, steps, n, r in rows:
            print(f"| {method} | {minutes:g} | {steps} | {n / 1e6:.2f}M | {r['ppl_ratio']:.2f} | "
                  f"{r['entropy_ratio']:.2f} | {r['repetition']['mean']:.2f} |")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, name in ((axes[0], "ppl_ratio", "Gen. PPL / real text's"),
                          (axes[1], "entropy_ratio", "unigram entropy / real text's")):
        for method, rows in pts.items():
            ax.plot([p[2] for p in rows], [p[3][key] for p in rows], "o-", label=method)
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set(xlabel="training tokens", ylabel=name)
        ax.legend()
    fig.suptitle("descriptions (L = 16), 2 CPU cores: snapshots at 1, 2, 4 and 8.5 training minutes")
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "tokens.png"), dpi=120)
