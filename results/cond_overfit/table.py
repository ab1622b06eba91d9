"""The overfit check of conditional ELF (results/cond_overfit/README.md): for each checkpoint of
the 64-pair run, what `python evaluate.py --diagnose` measured: BLEU and ROUGE on the 64
training pairs (has it fit them?), on held-out dev pairs, with the sources shuffled and zeroed
(does it read them?), and the decomposition (the decoder on clean target latents, round trips
from t0 with the source held, neighbouring positions' cosine at the first step).

    python results/cond_overfit/table.py                 # table.md from the kept table.json
    python results/cond_overfit/table.py --collect \
        runs/cond_overfit/eval                         # table.json from the reports, table.md

collect keeps each checkpoint's figures with the report's provenance and draws overfit.png;
render writes table.md from table.json alone, so the table rebuilds byte for byte.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from lib.report import provenance_sentence, table_command

HERE = os.path.dirname(os.path.abspath(__file__))
# evaluate.diagnostics' sample sets: the training pairs against their targets as the rows hold
# them and whole, held-out pairs, their sources shuffled, zeroed
SETS = ("train", "train_full", "heldout", "shuffled", "zeroed")
SCORES = ("bleu", "rouge1", "rouge2", "entropy")


def collect(root):
    rows = []
    for name in sorted(os.listdir(root)):
        m = re.fullmatch(r"step-(\d+)", name)
        path = os.path.join(root, name, "report.json")
        if not m or not os.path.isfile(path):
            continue
        with open(path) as f:
            rep = json.load(f)
        d, dec = rep["diagnostics"], rep["decomposition"]
        rows.append(
            {
                "step": int(m.group(1)),
                **{s: {k: d[s][k] for k in SCORES} for s in SETS},
                "decoder_acc_text": dec["decoder"]["acc_text"],
                "nn_acc_text": dec["decoder"]["nn_acc_text"],
                "round_trip": {
                    f"{r['t0']:g}": {"acc_text": r["acc_text"], "repetition": r["repetition"]}
                    for r in dec["round_trip"]
                },
                "cosine_first_step": dec["adjacent_cosine"]["first_step_text"],
                "cosine_real": dec["adjacent_cosine"]["real_text"],
                "example": next(
                    ({"source": e["source"], "text": e["text"]} for e in rep["examples"][:1]), None
                ),
                "provenance": rep["provenance"],
                "setting": "{sampler} {steps} steps, {grid} grid, CFG {guidance:g}".format(
                    **d["setting"]
                ),
            }
        )
    if not rows:
        raise ValueError(f"no step-N/report.json under {root}")
    table = {"n_train": 64, "n_heldout": rep["n"], "rows": rows}
    plot(table, os.path.join(HERE, "overfit.png"))
    return table


def plot(t, path):
    """BLEU on the training pairs, held-out, shuffled and zeroed sources against steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in t["rows"]]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for s in SETS:
        axes[0].plot(steps, [r[s]["bleu"] for r in t["rows"]], "o-", label=s)
    axes[0].axhline(80, ls=":", c="gray", label="the check's bar (80)")
    axes[0].set(xlabel="training step", ylabel="BLEU")
    axes[0].legend(fontsize=8)
    axes[1].plot(steps, [r["decoder_acc_text"] for r in t["rows"]], "o-", label="decoder, clean")
    for t0 in t["rows"][0]["round_trip"]:
        axes[1].plot(
            steps, [r["round_trip"][t0]["acc_text"] for r in t["rows"]], ".--", label=f"t0 {t0}"
        )
    axes[1].set(xlabel="training step", ylabel="token accuracy, text positions (dev)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render(t):
    prov = t["rows"][-1]["provenance"]
    t0s = list(t["rows"][0]["round_trip"])
    lines = [
        f"BLEU / ROUGE-1 / ROUGE-2 (sampling seed 0, setting `{t['rows'][0]['setting']}`) on the "
        f"{t['n_train']} training pairs (against their targets as the training rows hold them, "
        f"and whole), on {t['n_heldout']} held-out dev pairs, on those with "
        f"each source replaced by the next one's (shuffled) and with the source zeroed; the "
        f"decoder's token accuracy on clean dev target latents (text positions), and after a "
        "round trip from t0 with the source held. One training seed. " + provenance_sentence(prov),
        "",
        "| step | train | train, whole targets | held-out | shuffled | zeroed | decoder | "
        + " | ".join(f"t0 {t0}" for t0 in t0s)
        + " | cosine 1st step (real) |",
        "|---|" + "---|" * (6 + len(t0s) + 1),
    ]
    cell = lambda d: f"{d['bleu']:.1f} / {d['rouge1']:.1f} / {d['rouge2']:.1f}"
    for r in t["rows"]:
        lines.append(
            f"| {r['step']} | "
            + " | ".join(cell(r[s]) for s in SETS)
            + f" | {r['decoder_acc_text']:.3f} | "
            + " | ".join(f"{r['round_trip'][t0]['acc_text']:.3f}" for t0 in t0s)
            + f" | {r['cosine_first_step']:.2f} ({r['cosine_real']:.2f}) |"
        )
    last = t["rows"][-1]["example"]
    if last:
        lines += ["", f"Last step, first held-out pair: `{last['source']}` -> `{last['text']}`"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    table_command(HERE, collect, render, "runs/cond_overfit/eval")
