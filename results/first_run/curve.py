"""The 60-minute curve of results/first_run/README.md: ELF (configs/tiny_60min.py, snapshots at
10, 20, 40 and 60 training minutes) and the autoregressive baseline (configs/ar_tiny.py for 10
and for 60 minutes), each scored with the yardstick into <eval>/<name>/report.json.

    python results/first_run/curve.py                  # curve.png from the kept curve.json
    python results/first_run/curve.py --collect runs/first_run/eval/curve \
        out/tiny_60min/metrics.jsonl

Two steps: collect writes curve.json (losses from metrics.jsonl, Gen. PPL / entropy /
repetition from the reports); render draws curve.png from curve.json alone.
"""

import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))


def collect(root, metrics):
    curve = {"elf": [], "ar": [], "real": None, "loss": []}
    for m in (10, 20, 40, 60):
        for kind in ("elf", "ar"):
            path = os.path.join(root, f"{kind}_{m}min", "report.json")
            if not os.path.exists(path):
                continue
            rep = json.load(open(path))
            r = rep["results"][0]
            curve[kind].append(
                {
                    "minutes": m,
                    **{k: r[k]["mean"] for k in ("ppl", "entropy", "repetition", "copies")},
                    "ppl_se": r["ppl"]["se"],
                    "ppl_ratio": r["ppl_ratio"],
                    "entropy_ratio": r["entropy_ratio"],
                }
            )
            curve["real"] = {
                k: rep["reference"]["real"][k]["mean"]
                for k in ("ppl", "entropy", "repetition", "copies")
            }
    for line in open(metrics):
        rec = json.loads(line)
        if "val_mse" in rec:
            curve["loss"].append(
                {k: rec[k] for k in ("step", "minutes", "val_mse", "val_ce") if k in rec}
            )
    return curve


def render(curve, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].plot(
        [p["minutes"] for p in curve["loss"]],
        [p["val_mse"] for p in curve["loss"]],
        "o-",
        label="val denoise MSE",
    )
    ax[0].plot(
        [p["minutes"] for p in curve["loss"]],
        [p["val_ce"] for p in curve["loss"]],
        "s-",
        label="val decode CE",
    )
    ax[0].set_xlabel("training minutes")
    ax[0].set_title("ELF validation losses")
    ax[0].legend()
    for i, key in ((1, "ppl"), (2, "entropy")):
        for kind, style in (("elf", "o-"), ("ar", "s--")):
            pts = curve[kind]
            ax[i].plot(
                [p["minutes"] for p in pts], [p[key] for p in pts], style, label=kind.upper()
            )
        if curve["real"]:
            ax[i].axhline(curve["real"][key], color="gray", ls=":", label="real text")
        ax[i].set_xlabel("training minutes")
        ax[i].set_title("judge Gen. PPL" if key == "ppl" else "unigram entropy")
        ax[i].legend()
    ax[1].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--collect"]:
        json.dump(
            collect(sys.argv[2], sys.argv[3]), open(os.path.join(here, "curve.json"), "w"), indent=1
        )
    curve = json.load(open(os.path.join(here, "curve.json")))
    render(curve, os.path.join(here, "curve.png"))
    print(json.dumps({k: curve[k] for k in ("elf", "ar", "real")}, indent=1))
