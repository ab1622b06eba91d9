"""Quality against training tokens for ELF and MDLM (results/compare/curve.sh, hour.sh): the
judge's Gen. PPL and the unigram entropy, each a ratio to real text's, at each weights-only
snapshot (folders <model>_<minutes>) and at the end (<model>_end, or the last minutes), with
the error decomposition of ELF's rows where evaluate.py measured it; a markdown table on stdout
and tokens.png in the folder.

    python results/compare/curve.py > results/compare/curve/table.md                   # after curve.sh
    python results/compare/curve.py hour/curve > results/compare/hour/curve/table.md   # after hour.sh
"""
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
import checkpoint  # noqa: E402  (the repository's, for its run-folder layout)

HERE = os.path.join(ROOT, "results", "compare", sys.argv[1] if len(sys.argv) > 1 else "curve")


def tokens(meta):
    """(training tokens, steps) of a run folder's or snapshot's meta: step x batch x length."""
    return meta["step"] * meta["train"]["batch_size"] * meta["train"]["max_length"], meta["step"]


def points():
    """{model: [(minutes, steps, tokens, row, decomposition)]} from HERE/<model>_<minutes>/; an MDLM
    row's checkpoint is found from its samples file (RUNS/mdlm or RUNS/mdlm_<m>)."""
    out = {}
    for path in glob.glob(os.path.join(HERE, "*_*", "report.json")):
        method, m = os.path.basename(os.path.dirname(path)).split("_", 1)
        rep = json.load(open(path))
        r = rep["results"][0]
        if method == "elf":
            ckpt = rep["ckpt"]
        else:
            runs = os.path.dirname(os.path.dirname(r["setting"]["samples"]))
            snap = os.path.join(runs, "mdlm", f"at-{m}min")       # the end of the run has none
            ckpt = snap if m != "end" and os.path.isdir(snap) else os.path.join(runs, "mdlm")
        meta = checkpoint.read_meta(checkpoint.find(ckpt))
        n, steps = tokens(meta)
        minutes = meta["train"]["time_limit_min"] if m == "end" else float(m)
        out.setdefault("ELF" if method == "elf" else method.upper(), []).append(
            (minutes, steps, n, r, rep.get("decomposition")))
    return {method: sorted(rows, key=lambda p: p[0]) for method, rows in sorted(out.items())}


def decomposition(d):
    """Decode accuracy on clean held-out latents (text tokens) and the round trip from t0 0.9."""
    if not d:
        return "| | "
    rt = next(x for x in d["round_trip"] if x["t0"] == 0.9)
    return f"| {d['decoder']['acc_text']:.3f} | {rt['acc_text']:.2f} / {rt['repetition']:.2f} "


if __name__ == "__main__":
    pts = points()
    decomposed = any(p[4] for rows in pts.values() for p in rows)
    print("| model | training minutes | steps | tokens | Gen. PPL / real | entropy / real | repetition |"
          + (" decoder (clean) | round trip 0.9 acc / rep |" if decomposed else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if decomposed else ""))
    for method, rows in pts.items():
        for minutes, steps, n, r, d in rows:
            print(f"| {method} | {minutes:g} | {steps} | {n / 1e6:.2f}M | {r['ppl_ratio']:.2f} | "
                  f"{r['entropy_ratio']:.2f} | {r['repetition']['mean']:.2f} "
                  + (decomposition(d) if decomposed else "") + "|")
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
    marks = ", ".join(f"{p[0]:g}" for p in next(iter(pts.values())))
    fig.suptitle(f"descriptions (L = 16), 2 CPU cores: snapshots at {marks} training minutes")
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, "tokens.png"), dpi=120)
