"""Quality against training tokens for ELF and MDLM (results/compare/curve.sh, hour.sh): the
judge's Gen. PPL and the unigram entropy, each a ratio to real text's, at each weights-only
snapshot (folders <model>_<minutes>) and at the end (<model>_end, or the last minutes), with
the error decomposition of ELF's rows where evaluate.py measured it: NAME/table.json,
NAME/table.md and NAME/tokens.png.

    python results/compare/curve.py hour_r27/curve           # table.md from the kept table.json
    python results/compare/curve.py hour_r27/curve --plots   # and tokens.png
    python results/compare/curve.py curve --collect runs/compare/curve/eval       # after curve.sh
    python results/compare/curve.py hour/curve --collect runs/compare/hour/curve  # after hour.sh

Two steps: collect reads the snapshots' reports and, for the steps and tokens, the run folders'
checkpoints (lib.checkpoint) into table.json; render writes table.md (and the plot) from
table.json alone, so the table is rebuilt byte for byte from what is kept.
"""

import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tokens(meta):
    """(training tokens, steps) of a run folder's or snapshot's meta: step x batch x length."""
    return meta["step"] * meta["train"]["batch_size"] * meta["train"]["max_length"], meta["step"]


def points(root):
    """{model: [(minutes, steps, tokens, row, decomposition)]} from root/<model>_<minutes>/; an MDLM
    row's checkpoint is found from its samples file (RUNS/mdlm or RUNS/mdlm_<m>)."""
    sys.path.insert(0, ROOT)
    from lib import checkpoint  # noqa: E402  (the repository's, for its run-folder layout)

    out = {}
    for path in glob.glob(os.path.join(root, "*_*", "report.json")):
        method, m = os.path.basename(os.path.dirname(path)).split("_", 1)
        rep = json.load(open(path))
        r = rep["results"][0]
        if method == "elf":
            ckpt = rep["ckpt"]
        else:
            runs = os.path.dirname(os.path.dirname(r["setting"]["samples"]))
            snap = os.path.join(runs, "mdlm", f"at-{m}min")  # the end of the run has none
            ckpt = snap if m != "end" and os.path.isdir(snap) else os.path.join(runs, "mdlm")
        meta = checkpoint.read_meta(checkpoint.find(ckpt))
        n, steps = tokens(meta)
        minutes = meta["train"]["time_limit_min"] if m == "end" else float(m)
        out.setdefault("ELF" if method == "elf" else method.upper(), []).append(
            (minutes, steps, n, r, rep.get("decomposition"))
        )
    return {method: sorted(rows, key=lambda p: p[0]) for method, rows in sorted(out.items())}


def decomposition(d):
    """Decode accuracy on clean held-out latents (text tokens) and the round trip from t0 0.9."""
    if not d:
        return None
    rt = next(x for x in d["round_trip"] if x["t0"] == 0.9)
    return {
        "acc_text": d["decoder"]["acc_text"],
        "round_trip_0.9": [rt["acc_text"], rt["repetition"]],
    }


def collect(root):
    return {
        "rows": [
            {
                "model": method,
                "minutes": minutes,
                "steps": steps,
                "tokens": n,
                "ppl_ratio": r["ppl_ratio"],
                "entropy_ratio": r["entropy_ratio"],
                "repetition": r["repetition"]["mean"],
                "decomposition": decomposition(d),
            }
            for method, rows in points(root).items()
            for minutes, steps, n, r, d in rows
        ]
    }


def render(table):
    rows = table["rows"]
    decomposed = any(x["decomposition"] for x in rows)
    cell = lambda d: (
        f"| {d['acc_text']:.3f} | {d['round_trip_0.9'][0]:.2f} / {d['round_trip_0.9'][1]:.2f} "
        if d
        else "| | "
    )
    lines = [
        "| model | training minutes | steps | tokens | Gen. PPL / real | entropy / real | "
        "repetition |" + (" decoder (clean) | round trip 0.9 acc / rep |" if decomposed else ""),
        "|---|---|---|---|---|---|---|" + ("---|---|" if decomposed else ""),
    ]
    lines += [
        f"| {x['model']} | {x['minutes']:g} | {x['steps']} | {x['tokens'] / 1e6:.2f}M | "
        f"{x['ppl_ratio']:.2f} | {x['entropy_ratio']:.2f} | {x['repetition']:.2f} "
        + (cell(x["decomposition"]) if decomposed else "")
        + "|"
        for x in rows
    ]
    return "\n".join(lines) + "\n"


def plot(table, here):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = {}
    for x in table["rows"]:
        models.setdefault(x["model"], []).append(x)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, name in (
        (axes[0], "ppl_ratio", "Gen. PPL / real text's"),
        (axes[1], "entropy_ratio", "unigram entropy / real text's"),
    ):
        for method, rows in models.items():
            ax.plot([x["tokens"] for x in rows], [x[key] for x in rows], "o-", label=method)
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set(xlabel="training tokens", ylabel=name)
        ax.legend()
    marks = ", ".join(f"{x['minutes']:g}" for x in next(iter(models.values())))
    fig.suptitle(f"descriptions (L = 16), 2 CPU cores: snapshots at {marks} training minutes")
    fig.tight_layout()
    fig.savefig(os.path.join(here, "tokens.png"), dpi=120)


if __name__ == "__main__":
    args = sys.argv[1:]
    name = args[0] if args and not args[0].startswith("--") else "curve"
    here = os.path.join(ROOT, "results", "compare", name)
    if "--collect" in args:
        i = args.index("--collect")
        table = collect(args[i + 1])
        os.makedirs(here, exist_ok=True)
        with open(os.path.join(here, "table.json"), "w") as f:
            json.dump(table, f, indent=1)
    with open(os.path.join(here, "table.json")) as f:
        table = json.load(f)
    with open(os.path.join(here, "table.md"), "w") as f:
        f.write(render(table))
    if "--plots" in args or "--collect" in args:
        plot(table, here)
    print(f"wrote {os.path.join(here, 'table.md')}")
